//! Steps from the program's structure: the loop in the user's own code.
//!
//! Where no annotation marks the steps, the Python stacks do. Every allocation's stack holds,
//! from the outside in, the frames of the user's program down to the call into PyTorch (a model
//! call, an op, the optimizer). While a loop body runs, the line of the loop's frame moves
//! forward; when the next iteration starts, it goes back to an earlier line. So a step boundary
//! is an allocation whose frame at some depth is the same function, called from the same place,
//! as the previous allocation's, at an earlier line: a *back-jump*.
//!
//! What is not a step, by construction:
//! * the layers of a model, the chunks of an op: their loops run below the call into PyTorch
//!   (`nn.Module.__call__`), and the user chain stops there;
//! * the tokens of a library's `generate`: library frames are skipped, so the user's frame above
//!   stays on one line for the whole generation;
//! * a loop that only fills memory (allocating on one line, keeping everything): the line never
//!   goes back, and a loop that does go back must be a *working* loop (model code, or temporaries
//!   freed each iteration; see [`working`]).
//!
//! Loops nest: back-jumps are grouped into loops by where they go back to (depth, calling
//! context, function, target line); a loop that starts inside another's span at a later line or
//! a deeper frame is nested in it. Levels run from the outermost (epochs) inwards (steps,
//! micro-batches); [`find`] returns every level so the caller can judge at the level where
//! survivors accumulate.

use rustc_hash::FxHashMap as HashMap;
use std::ops::Range;

use crate::model::{Action, Device, FrameKind, Snapshot, StackId, Stacks, Sym};

/// One frame of a user chain: `(file, function, line)`.
type Link = (Sym, Sym, u32);

/// The user's frames of a stack, outermost first, down to the first PyTorch frame: the part of
/// the program where its loops live. Library, interpreter and native frames are skipped (a
/// trainer library may call the user's `training_step`); a call into a model, autograd or a
/// compiled graph ends the chain ([`one_call_into_torch`]).
pub(crate) fn user_chain(stacks: &Stacks, s: StackId) -> Vec<Link> {
    let mut out = Vec::new();
    for &f in stacks.frames(s).iter().rev() {
        let fr = stacks.frame(f);
        match fr.kind {
            // A model's forward or a decoding loop written in the user's own code (a functional
            // model, a hand-written `generate`) is one call: its loops are layers and tokens.
            FrameKind::User if inside_one_call(stacks.str(fr.name)) => break,
            FrameKind::User => out.push((fr.file, fr.name, fr.line)),
            // A call into a model, autograd or a compiled graph ends the chain: the user code
            // under it runs within that one call. Other PyTorch frames only pass the program
            // through: the optimizer calling the step's closure (Lightning runs
            // `training_step` there), a `torch.no_grad()` decorator, an autocast context.
            FrameKind::Torch if one_call_into_torch(stacks.str(fr.file), stacks.str(fr.name)) => {
                break
            }
            FrameKind::Torch => {}
            FrameKind::Library | FrameKind::Python | FrameKind::Native | FrameKind::Generated => {}
        }
    }
    out
}

/// PyTorch frames below which the user's frames run inside one call: a module's call, autograd
/// (a backward, a custom Function), a compiled graph.
fn one_call_into_torch(file: &str, name: &str) -> bool {
    (file.contains("torch/nn/modules/module.py")
        && matches!(name, "_call_impl" | "_wrapped_call_impl" | "__call__"))
        || file.contains("torch/autograd/")
        || (file.ends_with("torch/_tensor.py") && name == "backward")
        || file.contains("torch/_dynamo/")
        || file.contains("torch/_inductor/")
        || file.contains("torch/_functorch/")
        || file.contains("torch/fx/")
        || file.contains("torch/utils/checkpoint.py")
}

/// Functions whose loops run inside one call, by the names Python and PyTorch code give them:
/// comprehensions and generator expressions;
/// a module's `forward` (also when the model is written as plain functions, or `forward` is
/// called directly), and the token loops of decoding (`generate`, `decode`, `sample`, beam and
/// greedy search). A loop that calls such a function once per iteration (a serving loop, a
/// benchmark) still has its iterations: only the loops inside them are cut.
fn inside_one_call(name: &str) -> bool {
    is_comprehension(name)
        || matches!(
            name,
            "forward"
                | "_forward"
                | "forward_impl"
                | "generate"
                | "_generate"
                | "decode"
                | "sample"
                | "_sample"
                | "greedy_search"
                | "beam_search"
        )
}

/// The token loops of decoding: functions whose loop runs once per generated token.
fn is_decoding(name: &str) -> bool {
    matches!(
        name,
        "generate"
            | "_generate"
            | "decode"
            | "sample"
            | "_sample"
            | "greedy_search"
            | "beam_search"
    )
}

/// The decoding loops of `range`: a user function named for decoding ([`is_decoding`]) whose
/// line goes back at least twice between allocations, called from one place. [`find`] never
/// cuts such a loop into steps (its iterations are tokens, and a KV cache grows with each), so
/// without this a generation would read as "one pass" though its frames loop.
pub fn decoding_loops(snap: &Snapshot, dev: &Device, range: Range<usize>) -> Vec<LoopSite> {
    let stacks = &snap.stacks;
    // Per stack: the decoding frame, as (caller's line, file, function, line).
    let mut memo: HashMap<StackId, Option<(u32, Sym, Sym, u32)>> = HashMap::default();
    // Per (caller line, file, function): (last line, back-jumps, lowest line gone back to).
    let mut seen: HashMap<(u32, Sym, Sym), (u32, usize, u32)> = HashMap::default();
    for e in &dev.events[range] {
        if e.action != Action::Alloc {
            continue;
        }
        let at = *memo.entry(e.stack).or_insert_with(|| {
            let mut caller = 0;
            for &f in stacks.frames(e.stack).iter().rev() {
                let fr = stacks.frame(f);
                if fr.kind != FrameKind::User {
                    continue;
                }
                if is_decoding(stacks.str(fr.name)) {
                    return Some((caller, fr.file, fr.name, fr.line));
                }
                caller = fr.line;
            }
            None
        });
        let Some((caller, file, name, line)) = at else {
            continue;
        };
        let v = seen
            .entry((caller, file, name))
            .or_insert((line, 0, u32::MAX));
        if line < v.0 {
            v.1 += 1;
            v.2 = v.2.min(line);
        }
        v.0 = line;
    }
    let mut out: Vec<LoopSite> = seen
        .into_iter()
        .filter(|(_, v)| v.1 >= 2)
        .map(|((_, file, name), (_, jumps, target))| LoopSite {
            file: stacks.str(file).to_owned(),
            function: stacks.str(name).to_owned(),
            line: target,
            iterations: jumps + 1,
        })
        .collect();
    out.sort_by(|a, b| b.iterations.cmp(&a.iterations).then(a.line.cmp(&b.line)));
    out
}

/// A comprehension or generator expression: one expression of its line
/// (`sum(x.mean() for x in outs)`).
fn is_comprehension(name: &str) -> bool {
    matches!(
        name,
        "<genexpr>" | "<listcomp>" | "<dictcomp>" | "<setcomp>"
    )
}

/// Where a loop goes back to: the depth of its frame, the calling context above it (the
/// lines of the outer frames), the function and the target line.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct LoopKey {
    depth: usize,
    context: Vec<Link>,
    file: Sym,
    function: Sym,
    target: u32,
}

/// A loop found in the log: its back-jumps (event indices where an iteration started again).
#[derive(Clone, Debug)]
struct LoopJumps {
    key: LoopKey,
    jumps: Vec<usize>,
    /// The event that started the first iteration.
    start: usize,
}

/// A loop of the program, as reported: where it is and how its iterations were cut.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LoopSite {
    pub file: String,
    pub function: String,
    /// The first line an iteration allocates from (the loop body's first allocating line).
    pub line: u32,
    pub iterations: usize,
}

/// A nesting level of the program's loops.
#[derive(Clone, Debug, PartialEq)]
pub struct Level {
    /// Event indices where an iteration of this level (or of an enclosing one) starts, sorted.
    pub starts: Vec<usize>,
    /// The loops of this level, outermost first.
    pub loops: Vec<LoopSite>,
    /// The iteration that begins at the last start: where it ends (exclusive) and whether it ran
    /// to its end. Nothing follows it to mark its end, so it ends before the first allocation
    /// outside its loop (the program's epilogue, or the end of the log); it is complete when it
    /// reached the line the iteration before it reached and no OOM cut it short.
    pub last: LastIteration,
    /// Where this level's loops go back to (same order as `loops`).
    pub(crate) keys: Vec<LoopKey>,
}

impl Level {
    /// In how many of `ranges` this level's loop bodies run: an allocation inside one of its
    /// loops (see [`inside`]) falls in the range.
    pub(crate) fn runs_in(
        &self,
        snap: &Snapshot,
        dev: &Device,
        ranges: &[std::ops::Range<usize>],
    ) -> usize {
        let mut chains = Chains::new(&snap.stacks);
        ranges
            .iter()
            .filter(|r| {
                dev.events[r.start.min(dev.events.len())..r.end.min(dev.events.len())]
                    .iter()
                    .any(|e| {
                        e.action == Action::Alloc && {
                            let c = chains.of(e.stack);
                            let ch = &chains.chains[c as usize];
                            self.keys.iter().any(|k| inside(ch, k))
                        }
                    })
            })
            .count()
    }
}

/// The extent of a loop level's final iteration (see [`Level::last`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LastIteration {
    pub end: usize,
    pub complete: bool,
}

impl Level {
    pub fn iterations(&self) -> usize {
        self.starts.len()
    }
}

/// What the stacks say about the structure of a stretch of the log.
#[derive(Clone, Debug, PartialEq)]
pub enum Structure {
    /// No allocation in the stretch has a user frame: the stacks cannot tell.
    NoStacks,
    /// The user's frames only move forward: one pass through the program (a single forward,
    /// one generation, one benchmark call), not a loop.
    SinglePass,
    /// Loops, outermost level first.
    Loops(Vec<Level>),
}

/// The chains of the stretch's allocations, interned per stack.
struct Chains<'a> {
    stacks: &'a Stacks,
    memo: HashMap<StackId, u32>,
    chains: Vec<Vec<Link>>,
}

impl<'a> Chains<'a> {
    fn new(stacks: &'a Stacks) -> Self {
        Chains {
            stacks,
            memo: HashMap::default(),
            chains: Vec::new(),
        }
    }
    fn of(&mut self, s: StackId) -> u32 {
        if let Some(&i) = self.memo.get(&s) {
            return i;
        }
        let i = self.chains.len() as u32;
        self.chains.push(user_chain(self.stacks, s));
        self.memo.insert(s, i);
        i
    }
}

/// Finds the loops of `range` (see the module docs).
pub fn find(snap: &Snapshot, dev: &Device, range: Range<usize>) -> Structure {
    let mut chains = Chains::new(&snap.stacks);
    // (event, chain) of the stretch's allocations that have a user frame.
    let mut seq: Vec<(usize, u32)> = Vec::new();
    for i in range.clone() {
        let e = &dev.events[i];
        if e.action != Action::Alloc {
            continue;
        }
        let c = chains.of(e.stack);
        if !chains.chains[c as usize].is_empty() {
            seq.push((i, c));
        }
    }
    if seq.is_empty() {
        return Structure::NoStacks;
    }
    let mut groups: HashMap<LoopKey, Vec<usize>> = HashMap::default();
    for w in seq.windows(2) {
        let (a, b) = (
            &chains.chains[w[0].1 as usize],
            &chains.chains[w[1].1 as usize],
        );
        let Some(k) = (0..a.len().min(b.len())).find(|&k| a[k] != b[k]) else {
            continue;
        };
        let (fa, fb) = (a[k], b[k]);
        if fa.0 == fb.0 && fa.1 == fb.1 && fb.2 < fa.2 {
            let key = LoopKey {
                depth: k,
                context: a[..k].to_vec(),
                file: fb.0,
                function: fb.1,
                target: fb.2,
            };
            groups.entry(key).or_default().push(w[1].0);
        }
    }
    if groups.is_empty() {
        return match calls_of_one_line(snap, dev, &chains, &seq, range.clone()) {
            Some(level) => Structure::Loops(vec![level]),
            None => Structure::SinglePass,
        };
    }
    let mut loops: Vec<LoopJumps> = groups
        .into_iter()
        .map(|(key, jumps)| {
            let start = first_iteration(&chains, &seq, &key, jumps[0], range.start);
            LoopJumps { key, jumps, start }
        })
        .collect();
    loops.sort_by_key(|l| (l.start, l.key.depth, l.key.target));
    // Nesting: a loop inside another's span, deeper or at a later line of the same function.
    let n = loops.len();
    let mut level = vec![0usize; n];
    for g in 0..n {
        for h in 0..n {
            if g == h {
                continue;
            }
            let (lg, lh) = (&loops[g], &loops[h]);
            let inside = lg.start >= lh.start
                && lg.jumps[0] < *lh.jumps.last().unwrap_or(&lh.start)
                && lg.jumps[0] > lh.start;
            let inner = lh.key.depth < lg.key.depth
                || (lh.key.depth == lg.key.depth
                    && lh.key.context == lg.key.context
                    && lh.key.file == lg.key.file
                    && lh.key.function == lg.key.function
                    && lh.key.target < lg.key.target);
            if inside && inner {
                level[g] += 1;
            }
        }
    }
    let max_level = level.iter().copied().max().unwrap_or(0);
    let mut levels = Vec::new();
    for l in 0..=max_level {
        let mut starts: Vec<usize> = Vec::new();
        let mut sites = Vec::new();
        let mut keys = Vec::new();
        for (g, lp) in loops.iter().enumerate() {
            if level[g] > l {
                continue;
            }
            // A nested loop's first iteration begins with its enclosing iteration.
            if level[g] == 0 {
                starts.push(lp.start);
            }
            starts.extend(&lp.jumps);
            if level[g] == l {
                keys.push(lp.key.clone());
                sites.push(LoopSite {
                    file: snap.stacks.str(lp.key.file).to_owned(),
                    function: snap.stacks.str(lp.key.function).to_owned(),
                    line: lp.key.target,
                    iterations: lp.jumps.len() + 1,
                });
            }
        }
        starts.sort_unstable();
        starts.dedup();
        if !sites.is_empty() {
            // The loop whose iteration starts last owns the final iteration.
            let owner = loops
                .iter()
                .enumerate()
                .filter(|&(g, _)| level[g] <= l)
                .max_by_key(|(_, lp)| *lp.jumps.last().unwrap_or(&lp.start))
                .map(|(_, lp)| lp);
            let last = match owner {
                Some(lp) => last_iteration(dev, &chains, &seq, lp, range.end),
                None => LastIteration {
                    end: range.end,
                    complete: false,
                },
            };
            levels.push(Level {
                starts,
                loops: sites,
                last,
                keys,
            });
        }
    }
    Structure::Loops(levels)
}

/// Repeated calls made from one line: `for i in range(50): model(x)` allocates from a single
/// user line, so its frames never go back to an earlier line. What tells the calls apart from
/// one long call (a model's layers, an op's chunks) is memory: after each call, what the calls
/// made is freed down to the same level, a level it never goes below again (a workspace made by
/// the first call may stay). A single pass that keeps what it makes (a forward saving its
/// activations) climbs instead, and one long call returns to the level only once, at its end.
/// Every allocation of the stretch must have the same user chain, and the calls must be alike
/// (allocation counts within a factor of two of the median); at least [`MIN_CALLS`] of them.
fn calls_of_one_line(
    snap: &Snapshot,
    dev: &Device,
    chains: &Chains,
    seq: &[(usize, u32)],
    range: Range<usize>,
) -> Option<Level> {
    let ch = &chains.chains[seq.first()?.1 as usize];
    if seq.iter().any(|&(_, c)| chains.chains[c as usize] != *ch) {
        return None;
    }
    let &(file, function, line) = ch.last()?;
    // Live bytes of the blocks allocated in the stretch, after each event.
    let mut live: HashMap<u64, u64> = HashMap::default();
    let mut level = 0u64;
    let mut after = Vec::with_capacity(range.len());
    let mut allocs_before = Vec::with_capacity(range.len());
    let mut n_allocs = 0usize;
    for i in range.clone() {
        let e = &dev.events[i];
        match e.action {
            Action::Alloc => {
                if let Some(old) = live.insert(e.addr, e.size) {
                    level = level.saturating_sub(old);
                }
                level = level.saturating_add(e.size);
                n_allocs += 1;
            }
            Action::FreeRequested => {
                if let Some(b) = live.remove(&e.addr) {
                    level = level.saturating_sub(b);
                }
            }
            _ => {}
        }
        after.push(level);
        allocs_before.push(n_allocs);
    }
    // Suffix minimum: the lowest level from each event on.
    let mut floor = vec![0u64; after.len()];
    let mut m = u64::MAX;
    for k in (0..after.len()).rev() {
        m = m.min(after[k]);
        floor[k] = m;
    }
    // Ends of calls: a free that brings the level down to a floor it keeps, after allocations
    // since the previous end, at the same level as the previous end.
    let mut ends: Vec<usize> = Vec::new();
    let mut last_allocs = 0usize;
    for k in 0..after.len() {
        let i = range.start + k;
        if dev.events[i].action != Action::FreeRequested
            || after[k] != floor[k]
            || allocs_before[k] == last_allocs
        {
            continue;
        }
        if let Some(&prev) = ends.last() {
            if after[prev - range.start] != after[k] {
                return None;
            }
        }
        ends.push(i);
        last_allocs = allocs_before[k];
    }
    if ends.len() < MIN_CALLS {
        return None;
    }
    // Each call starts at the first allocation after the previous call's end.
    let first_alloc_after = |i: usize| {
        seq[seq.partition_point(|&(e, _)| e <= i)..]
            .first()
            .map(|&(e, _)| e)
    };
    let mut starts = vec![seq[0].0];
    starts.extend(
        ends[..ends.len() - 1]
            .iter()
            .filter_map(|&e| first_alloc_after(e)),
    );
    let counts: Vec<usize> = starts
        .iter()
        .zip(&ends)
        // `seq` is in event order: two binary searches, not a scan per call (linear, not
        // quadratic, in a log of thousands of calls).
        .map(|(&a, &b)| {
            seq.partition_point(|&(e, _)| e <= b) - seq.partition_point(|&(e, _)| e < a)
        })
        .collect();
    let mut sorted = counts.clone();
    sorted.sort_unstable();
    let median = sorted[sorted.len() / 2];
    if counts.iter().any(|&c| c * 2 < median || c > median * 2) {
        return None;
    }
    // A comprehension (`sum(t.mean().item() for t in outs)`) repeats too, but it is one
    // statement of the program, not its steps.
    let st = &snap.stacks;
    let mut seen: HashMap<StackId, bool> = HashMap::default();
    let in_comprehension = seq.iter().any(|&(e, _)| {
        *seen.entry(dev.events[e].stack).or_insert_with(|| {
            st.frames(dev.events[e].stack).iter().any(|&f| {
                let fr = st.frame(f);
                fr.kind == FrameKind::User && is_comprehension(st.str(fr.name))
            })
        })
    });
    if in_comprehension {
        return None;
    }
    // Allocations after the last end: a call cut short (or code after the calls).
    let tail_start = first_alloc_after(*ends.last()?);
    let mut end = ends.last()? + 1;
    let mut complete = true;
    if let Some(t) = tail_start {
        starts.push(t);
        end = range.end;
        complete = false;
    }
    let key = LoopKey {
        depth: ch.len() - 1,
        context: ch[..ch.len() - 1].to_vec(),
        file,
        function,
        target: line,
    };
    Some(Level {
        loops: vec![LoopSite {
            file: snap.stacks.str(file).to_owned(),
            function: snap.stacks.str(function).to_owned(),
            line,
            iterations: starts.len(),
        }],
        starts,
        last: LastIteration { end, complete },
        keys: vec![key],
    })
}

/// Whether `part` begins the work of the steps `seen` again: every allocation of it that has a
/// user frame runs user code already seen there (the same chain of user frames), and one of
/// them runs the code the first of those steps began with. (Steps cut at the optimizer's end
/// begin with what follows `opt.step()` in the loop's body; a stretch holding only that is the
/// end of the last iteration, not a new one.)
pub(crate) fn repeats(
    snap: &Snapshot,
    dev: &Device,
    part: Range<usize>,
    seen: &[Range<usize>],
) -> bool {
    let mut chains = Chains::new(&snap.stacks);
    let clamp = |r: &Range<usize>| r.start.min(dev.events.len())..r.end.min(dev.events.len());
    let mut known: rustc_hash::FxHashSet<Vec<Link>> = Default::default();
    let mut first: Option<Vec<Link>> = None;
    for r in seen {
        for e in &dev.events[clamp(r)] {
            if e.action == Action::Alloc {
                let c = chains.of(e.stack);
                let ch = &chains.chains[c as usize];
                if first.is_none() && !ch.is_empty() {
                    first = Some(ch.clone());
                }
                known.insert(ch.clone());
            }
        }
    }
    let mut any = false;
    for e in &dev.events[clamp(&part)] {
        if e.action != Action::Alloc {
            continue;
        }
        let c = chains.of(e.stack);
        let ch = &chains.chains[c as usize];
        if ch.is_empty() {
            continue;
        }
        if !known.contains(ch) {
            return false;
        }
        any |= first.as_ref() == Some(ch);
    }
    any
}

/// Fewest alike calls from one line for them to be taken as a loop's iterations.
const MIN_CALLS: usize = 3;

/// The event that started a loop's first iteration: walking back from its first back-jump,
/// the earliest allocation still inside the loop (same context and function, at or after the
/// target line, or deeper in a call made from there).
fn first_iteration(
    chains: &Chains,
    seq: &[(usize, u32)],
    key: &LoopKey,
    first_jump: usize,
    floor: usize,
) -> usize {
    let pos = seq.partition_point(|&(i, _)| i < first_jump);
    let mut start = first_jump;
    for &(i, c) in seq[..pos].iter().rev() {
        if !inside(&chains.chains[c as usize], key) {
            break;
        }
        start = i;
    }
    start.max(floor)
}

/// Whether a user chain runs inside the loop `key`: the same calling context and function at
/// its depth, at or after the loop's first line (or deeper in a call made from there).
fn inside(ch: &[Link], key: &LoopKey) -> bool {
    ch.len() > key.depth
        && ch[..key.depth] == key.context[..]
        && ch[key.depth].0 == key.file
        && ch[key.depth].1 == key.function
        && ch[key.depth].2 >= key.target
}

/// The extent of a loop's final iteration, which starts at its last back-jump: it runs until
/// the first allocation outside the loop (another function, or a line of the loop's function
/// past the last line its earlier iterations reached), or `end`; it is complete when it reached at least
/// the line the previous iteration reached at the loop's depth and no OOM happened in it.
fn last_iteration(
    dev: &Device,
    chains: &Chains,
    seq: &[(usize, u32)],
    lp: &LoopJumps,
    end: usize,
) -> LastIteration {
    let from = *lp.jumps.last().unwrap_or(&lp.start);
    let prev = if lp.jumps.len() >= 2 {
        lp.jumps[lp.jumps.len() - 2]
    } else {
        lp.start
    };
    let line_at = |c: u32| chains.chains[c as usize][lp.key.depth].2;
    let pos_prev = seq.partition_point(|&(i, _)| i < prev);
    let pos_from = seq.partition_point(|&(i, _)| i < from);
    let prev_reach = seq[pos_prev..pos_from]
        .iter()
        .filter(|&&(_, c)| inside(&chains.chains[c as usize], &lp.key))
        .map(|&(_, c)| line_at(c))
        .max();
    // The loop body's last line, over all earlier iterations: a later line of the same
    // function is the code after the loop.
    let pos_start = seq.partition_point(|&(i, _)| i < lp.start);
    let body_end = seq[pos_start..pos_from]
        .iter()
        .filter(|&&(_, c)| inside(&chains.chains[c as usize], &lp.key))
        .map(|&(_, c)| line_at(c))
        .max();
    let mut stop = end;
    let mut reach = None;
    for &(i, c) in &seq[pos_from..] {
        if i >= end {
            break;
        }
        let ch = &chains.chains[c as usize];
        if !inside(ch, &lp.key) || Some(line_at(c)) > body_end {
            stop = i;
            break;
        }
        reach = reach.max(Some(line_at(c)));
    }
    let oom = dev.events[from..stop.min(dev.events.len())]
        .iter()
        .any(|e| e.action == Action::Oom);
    LastIteration {
        end: stop,
        complete: !oom && reach.is_some() && reach >= prev_reach,
    }
}

/// Whether the iterations `starts` (event indices) are those of a working loop, not one that
/// fills memory on purpose: most iterations allocate under model code, or free most of what
/// they allocate before the next one starts (temporaries).
pub(crate) fn working(
    dev: &Device,
    model: &crate::model::model_code::ModelCode,
    starts: &[usize],
    end: usize,
) -> bool {
    if starts.len() < 2 {
        return false;
    }
    let (ok, total) = working_count(dev, model, starts, 0..starts.len(), end);
    total > 0 && ok * 2 >= total
}

/// The environment variable that sets the fewest entries a stretch needs for its iterations to
/// be judged on several threads (`0`: every stretch, on any count of threads above one): what
/// the tests use to take the split on small captures.
pub const SPLIT_MIN_VAR: &str = "MEMSCOPE_STEPS_SPLIT_MIN";

/// Fewest entries a stretch needs for [`working_on`] and [`whole_steps_on`] to split it, unless
/// [`SPLIT_MIN_VAR`] says otherwise.
pub const SPLIT_MIN_EVENTS: usize = 1 << 17;

/// Whether a stretch of `n` entries is judged split on `threads` threads.
pub(crate) fn split_wanted(n: usize, threads: usize) -> bool {
    crate::threads::split_wanted(SPLIT_MIN_VAR, SPLIT_MIN_EVENTS, 2, n, threads)
}

/// The entries from the first iteration's start to `end` (at most the log's end): what
/// [`split_wanted`] weighs.
fn stretch(dev: &Device, starts: &[usize], end: usize) -> usize {
    end.min(dev.events.len())
        .saturating_sub(starts.first().copied().unwrap_or(0))
}

/// [`working`] on `threads` threads (issue #43): each iteration is judged on its own, so runs of
/// them go to threads (each with its own memo of model stacks) and the counts are summed.
pub(crate) fn working_on(
    snap: &Snapshot,
    dev: &Device,
    model: &crate::model::model_code::ModelCode,
    starts: &[usize],
    end: usize,
    threads: usize,
) -> bool {
    let span = stretch(dev, starts, end);
    if starts.len() < 2 || !split_wanted(span, threads) {
        return working(dev, model, starts, end);
    }
    let (ok, total) = counts_on(snap, dev, starts, end, threads);
    total > 0 && ok * 2 >= total
}

/// [`working_count`] of every iteration of `starts`, in runs of them on `threads` threads (each
/// run with its own memo of model stacks), summed.
fn counts_on(
    snap: &Snapshot,
    dev: &Device,
    starts: &[usize],
    end: usize,
    threads: usize,
) -> (usize, usize) {
    let n = threads.min(starts.len()).max(1);
    let runs: Vec<Range<usize>> = (0..n)
        .map(|t| t * starts.len() / n..(t + 1) * starts.len() / n)
        .collect();
    let counts = crate::threads::map(threads, &runs, |r| {
        let model = crate::model::model_code::ModelCode::new(&snap.stacks);
        working_count(dev, &model, starts, r.clone(), end)
    });
    counts.iter().fold((0, 0), |a, c| (a.0 + c.0, a.1 + c.1))
}

/// Of the iterations `ks` of `starts`: how many are working ones, and how many were judged.
fn working_count(
    dev: &Device,
    model: &crate::model::model_code::ModelCode,
    starts: &[usize],
    ks: Range<usize>,
    end: usize,
) -> (usize, usize) {
    let mut ok = 0usize;
    let mut total = 0usize;
    for k in ks {
        let a = starts[k];
        let b = starts
            .get(k + 1)
            .copied()
            .unwrap_or(end)
            .min(dev.events.len());
        if b <= a {
            continue;
        }
        total += 1;
        let mut allocs: rustc_hash::FxHashSet<u64> = Default::default();
        let mut model_code = false;
        let mut freed = 0usize;
        let mut n = 0usize;
        for e in &dev.events[a..b] {
            match e.action {
                // One request under model code settles the iteration: stop reading it.
                Action::Alloc if model.is_model(e.stack) => {
                    model_code = true;
                    break;
                }
                Action::Alloc => {
                    n += 1;
                    allocs.insert(e.addr);
                }
                Action::FreeRequested if allocs.remove(&e.addr) => freed += 1,
                _ => {}
            }
        }
        if model_code || (n >= 2 && freed * 2 >= n) {
            ok += 1;
        }
    }
    (ok, total)
}

/// Whether the iterations `starts` (event indices) of an inner loop level are whole steps of
/// the program's loop, not a loop inside one step: most of them run the backward pass, where the
/// stretch runs one at all, else a module call. A loop over parameters inside one
/// `optimizer.step` (a hand-written AdamW creating its state lazily), over layers or over tokens
/// does neither per iteration, so its iterations are never taken as steps. The iterations are
/// read on `threads` threads where the stretch is long enough ([`split_wanted`]): each is read
/// on its own, and the answers kept in order.
pub(crate) fn whole_steps_on(
    snap: &Snapshot,
    dev: &Device,
    starts: &[usize],
    end: usize,
    threads: usize,
) -> bool {
    let span = stretch(dev, starts, end);
    let threads = if split_wanted(span, threads) {
        threads
    } else {
        1
    };
    let ks: Vec<usize> = (0..starts.len()).collect();
    let its: Vec<(bool, bool)> = crate::threads::map(threads, &ks, |&k| {
        super::work::of_range(
            &snap.stacks,
            dev,
            starts[k]..starts.get(k + 1).copied().unwrap_or(end),
        )
    });
    let any_backward = its.iter().any(|w| w.0);
    let whole = its
        .iter()
        .filter(|w| if any_backward { w.0 } else { w.1 })
        .count();
    !its.is_empty() && whole * 2 >= its.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{EventData, Layout};

    const MODULE: &str = "/v/lib/python3.12/site-packages/torch/nn/modules/module.py";
    const HF: &str = "/v/lib/python3.12/site-packages/transformers/generation/utils.py";

    /// A log built from stacks given outermost first as `(file, line, function)`.
    struct Log {
        stacks: Stacks,
        events: Vec<EventData>,
        addr: u64,
    }

    impl Log {
        fn new() -> Self {
            Log {
                stacks: Stacks::new(),
                events: Vec::new(),
                addr: 0,
            }
        }
        fn alloc(&mut self, chain: &[(&str, u32, &str)]) {
            let frames: Vec<_> = chain
                .iter()
                .rev()
                .map(|&(f, l, n)| self.stacks.intern_frame(f, l, n))
                .collect();
            let stack = self.stacks.intern_stack(&frames);
            self.addr += 1 << 20;
            self.events.push(EventData {
                action: Action::Alloc,
                addr: self.addr,
                size: 4096,
                stream: 0,
                time_us: None,
                stack,
                device_free: None,
                meta: crate::model::MetaId::NONE,
            });
        }
        /// Frees the block allocated `back` allocations ago (1 = the last one).
        fn free(&mut self, back: u64) {
            let addr = self.addr - (back - 1) * (1 << 20);
            self.events.push(EventData {
                action: Action::FreeRequested,
                addr,
                size: 4096,
                stream: 0,
                time_us: None,
                stack: StackId::EMPTY,
                device_free: None,
                meta: crate::model::MetaId::NONE,
            });
        }
        fn find(self) -> Structure {
            let dev = Device::of_events(self.events);
            let n = dev.events.len();
            let snap = Snapshot::of_devices(Layout::Modern, Vec::new(), self.stacks);
            find(&snap, &dev, 0..n)
        }
    }

    #[test]
    fn iterations_judged_in_runs_on_threads_count_as_one_pass_does() {
        // 23 iterations: every third allocates under model code, the others outside it and keep
        // their block (fills memory); starts at each iteration, some at odd places.
        let mut log = Log::new();
        let mut starts = Vec::new();
        for k in 0..23 {
            starts.push(log.events.len());
            if k % 3 == 0 {
                layer(&mut log);
            } else {
                log.alloc(&[("bench.py", 5, "<module>"), ("bench.py", 60, "fill")]);
                log.alloc(&[("bench.py", 5, "<module>"), ("bench.py", 61, "fill")]);
            }
        }
        let dev = Device::of_events(log.events);
        let end = dev.events.len();
        let snap = Snapshot::of_devices(Layout::Modern, Vec::new(), log.stacks);
        let model = crate::model::model_code::ModelCode::new(&snap.stacks);
        let one = working_count(&dev, &model, &starts, 0..starts.len(), end);
        assert_eq!(one, (8, 23));
        for threads in 1..=30 {
            assert_eq!(
                counts_on(&snap, &dev, &starts, end, threads),
                one,
                "{threads}"
            );
        }
    }

    fn iterations(s: &Structure) -> Vec<usize> {
        match s {
            Structure::Loops(levels) => levels.iter().map(|l| l.iterations()).collect(),
            _ => Vec::new(),
        }
    }

    const LINEAR: &str = "/v/lib/python3.12/site-packages/torch/nn/modules/linear.py";

    fn layer(log: &mut Log) {
        log.alloc(&[
            ("bench.py", 5, "<module>"),
            ("bench.py", 41, "main"),
            (MODULE, 1775, "_call_impl"),
            (LINEAR, 134, "forward"),
        ]);
    }

    #[test]
    fn calls_from_one_line_are_steps_when_memory_returns_to_its_level() {
        // for i in range(20): model(x) under no_grad: each call's 3 layers free their inputs,
        // and the result is dropped; the first call also keeps a workspace.
        let mut log = Log::new();
        for call in 0..20 {
            if call == 0 {
                layer(&mut log); // the workspace, kept for good
            }
            layer(&mut log);
            for _ in 0..2 {
                layer(&mut log);
                log.free(2);
            }
            log.free(1);
        }
        let s = log.find();
        assert_eq!(iterations(&s), vec![20]);
        let Structure::Loops(levels) = s else {
            unreachable!()
        };
        assert_eq!(levels[0].loops[0].line, 41);
        assert!(levels[0].last.complete);
    }

    #[test]
    fn one_call_from_one_line_is_one_pass() {
        // One forward that keeps its activations (autograd on): memory only climbs.
        let mut log = Log::new();
        for _ in 0..32 {
            layer(&mut log);
            layer(&mut log);
            log.free(1); // a temporary
        }
        assert_eq!(log.find(), Structure::SinglePass);
        // One long no_grad call whose layers free their inputs: back at the level only once.
        let mut log = Log::new();
        layer(&mut log);
        for _ in 0..32 {
            layer(&mut log);
            log.free(2);
        }
        log.free(1);
        assert_eq!(log.find(), Structure::SinglePass);
    }

    #[test]
    fn layers_of_one_forward_are_not_steps() {
        // bench.py calls the model once; the model's forward loops over 32 layers under
        // nn.Module.__call__ frames.
        let mut log = Log::new();
        log.alloc(&[("bench.py", 5, "<module>"), ("bench.py", 40, "main")]);
        for _ in 0..32 {
            for line in [22, 23, 24] {
                log.alloc(&[
                    ("bench.py", 5, "<module>"),
                    ("bench.py", 41, "main"),
                    (MODULE, 1775, "_call_impl"),
                    ("model.py", line, "forward"),
                ]);
            }
        }
        assert_eq!(log.find(), Structure::SinglePass);
    }

    #[test]
    fn tokens_of_a_library_generate_are_not_steps() {
        let mut log = Log::new();
        for _ in 0..20 {
            for line in [2300, 2310] {
                log.alloc(&[
                    ("serve.py", 9, "<module>"),
                    ("serve.py", 30, "main"),
                    (HF, line, "_sample"),
                    (MODULE, 1775, "_call_impl"),
                ]);
            }
        }
        assert_eq!(log.find(), Structure::SinglePass);
    }

    #[test]
    fn requests_of_a_serving_loop_are_steps() {
        let mut log = Log::new();
        for _ in 0..10 {
            log.alloc(&[("serve.py", 9, "<module>"), ("serve.py", 28, "main")]);
            for line in [2300, 2310] {
                log.alloc(&[
                    ("serve.py", 9, "<module>"),
                    ("serve.py", 30, "main"),
                    (HF, line, "_sample"),
                ]);
            }
        }
        let s = log.find();
        assert_eq!(iterations(&s), vec![10]);
        let Structure::Loops(levels) = s else {
            unreachable!()
        };
        assert_eq!(levels[0].loops[0].line, 28);
        assert_eq!(levels[0].loops[0].function, "main");
        assert_eq!(levels[0].starts[0], 0);
    }

    #[test]
    fn nested_loops_are_levels_and_sequential_loops_are_phases() {
        // for step in range(12): x = data() (10); for micro in range(4): out = model(x) (12),
        // loss (13); opt.step() (15). Then 5 eval batches at lines 20-21.
        let mut log = Log::new();
        log.alloc(&[("train.py", 1, "<module>"), ("train.py", 5, "main")]);
        for _ in 0..12 {
            log.alloc(&[("train.py", 1, "<module>"), ("train.py", 10, "main")]);
            for _ in 0..4 {
                log.alloc(&[("train.py", 1, "<module>"), ("train.py", 12, "main")]);
                log.alloc(&[("train.py", 1, "<module>"), ("train.py", 13, "main")]);
            }
            log.alloc(&[("train.py", 1, "<module>"), ("train.py", 15, "main")]);
        }
        for _ in 0..5 {
            log.alloc(&[("train.py", 1, "<module>"), ("train.py", 20, "main")]);
            log.alloc(&[("train.py", 1, "<module>"), ("train.py", 21, "main")]);
        }
        let s = log.find();
        // Level 0: 12 steps and 5 eval batches; level 1 adds the micro-batches.
        assert_eq!(iterations(&s), vec![17, 17 + 12 * 3]);
        let Structure::Loops(levels) = s else {
            unreachable!()
        };
        let lines: Vec<u32> = levels[0].loops.iter().map(|l| l.line).collect();
        assert_eq!(lines, vec![10, 20]);
        assert_eq!(levels[1].loops[0].line, 12);
        // The first step starts at the first `x = data()`, after the setup allocation.
        assert_eq!(levels[0].starts[0], 1);
    }
}
