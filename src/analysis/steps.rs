//! Cutting a device's event log into the iterations of the program's loop.
//!
//! A leak is memory that survives one more iteration than the last, so every leak question
//! needs iterations first, and the log does not record them. A step is one iteration of the
//! loop where the program repeats its work: a training step, an evaluation batch, a served
//! request. The evidence, best first:
//!
//! * `external_annotations`: `record_function` ranges the allocator saw. User ranges named like
//!   the profiler's steps (`ProfilerStep#N`) bound a step exactly; the optimizer's own
//!   `Optimizer.step#...` ranges end one (with gradient accumulation, the micro-batches between
//!   two optimizer steps are one step). Their `time_us` is mapped to the first event at or after
//!   it.
//! * The Python stacks, where no annotation covers a stretch (validation loops never call the
//!   optimizer; 2.1-era logs have no times): the outermost user frame going back to an earlier
//!   line of its loop ([`super::loops`]). Repetition inside one call (a model's layers, a
//!   library's token loop, an op's chunks) is not a step. Nested loops are levels; the
//!   outermost level with enough iterations to judge growth is used.
//!
//! Only working loops count: an iteration must allocate under `torch.nn`, `torch.autograd` or
//! `torch.optim` frames, or free most of what it allocates before the next iteration (its
//! temporaries). A loop that only creates tensors and keeps them (filling a buffer, the
//! fragmentation scenario) is keeping them on purpose as far as a snapshot can tell, and calling
//! its iterations "steps" would turn every kept tensor into a leak.
//!
//! A log whose user frames only move forward is one pass through the program: one step, about
//! which no leak can be judged. [`Structure`] says which of these the log showed.

use rustc_hash::FxHashMap as HashMap;
use std::ops::Range;

use crate::analysis::loops::{self, LoopSite};
use crate::analysis::replay::Timeline;
use crate::model::model_code::ModelCode;
use crate::model::{Device, EventIdx, Snapshot};

/// Where a step's bounds came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepSource {
    /// Before the first iteration: model creation, data loading.
    Setup,
    /// Bounded by `record_function` annotations.
    Annotation,
    /// An iteration of a loop of the user's code, found from the Python stacks.
    #[serde(rename = "loop")]
    Loop,
    /// After the last complete iteration: a partial iteration, or the end of the program.
    Tail,
}

/// A stretch of the event log: one iteration of the loop, or what lies before or after them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Step {
    pub name: String,
    pub start_event: EventIdx,
    /// Inclusive.
    pub end_event: EventIdx,
    pub peak_allocated_bytes: u64,
    pub end_allocated_bytes: u64,
    pub source: StepSource,
    /// Whether the step ran to its end (false for a trailing part cut off by the end of the log).
    /// Only the ends of complete steps are sampled for survivors.
    pub complete: bool,
}

impl Step {
    pub fn is_iteration(&self) -> bool {
        matches!(self.source, StepSource::Annotation | StepSource::Loop)
    }
    pub fn contains(&self, event: usize) -> bool {
        (self.start_event.0 as usize..=self.end_event.0 as usize).contains(&event)
    }
}

/// Fewest events in an unannotated stretch for it to be searched for a loop.
pub const MIN_ITERATIONS: usize = 4;
/// Iterations a loop level needs to be the level steps are cut at. The outermost level that has
/// them is the program's loop; the levels inside it (micro-batches, a per-layer loop the user
/// wrote, tokens) are repetition within one step. Only when the outer level is too short (two
/// epochs) does an inner level (their steps) take its place.
pub const JUDGE_ITERATIONS: usize = crate::analysis::JUDGE_STEPS;

/// What the log showed of the program's structure, for the report.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Structure {
    /// The annotation family that bounds steps (`ProfilerStep`, `Optimizer.step`), if any.
    pub annotation: Option<String>,
    /// The loops of the user's code whose iterations are steps (outermost first).
    pub loops: Vec<LoopSite>,
    /// Loops nested inside those (micro-batches, inner loops): not used as steps.
    pub nested_loops: Vec<LoopSite>,
    /// The user's frames only moved forward: one pass, not a loop.
    pub single_pass: bool,
    /// No allocation had a user frame, so the stacks could not show loops.
    pub no_user_stacks: bool,
    /// Decoding loops (a `generate`/`decode` function's token loop) in stretches that are
    /// otherwise one pass: loops, but of tokens, never cut into steps.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub decoding_loops: Vec<LoopSite>,
    /// Optimizer steps marked in each iteration of the loop, where the loop's body runs several
    /// (a GAN's discriminator and generator, several optimizers): the iterations are the steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optimizer_steps_per_iteration: Option<usize>,
}

/// Splits a device's log into steps, covering every event exactly once, in order.
pub fn split(snap: &Snapshot, dev: &Device, tl: &Timeline) -> Vec<Step> {
    with_figures(bounds(snap, dev), tl)
}

/// Where the steps lie, from the events and their stacks alone: it needs no replay, so it can
/// run beside one (see [`with_figures`]).
pub struct Bounds {
    segs: Vec<Seg>,
    pub structure: Structure,
}

impl Bounds {
    /// Each step's `(start, end)` events, inclusive, as [`Step`] will hold them.
    pub fn ranges(&self) -> Vec<(usize, usize)> {
        self.segs
            .iter()
            .filter(|s| !s.range.is_empty())
            .map(|s| (s.range.start, s.range.end - 1))
            .collect()
    }
}

/// The search half of [`split`]: annotations, then the loops of the user's code.
pub fn bounds(snap: &Snapshot, dev: &Device) -> Bounds {
    bounds_on(snap, dev, crate::threads::wanted())
}

/// [`bounds`] with each loop level's iterations judged on `threads` threads where the stretch
/// is long enough ([`loops::SPLIT_MIN_VAR`]); the bounds are the serial search's either way.
pub fn bounds_on(snap: &Snapshot, dev: &Device, threads: usize) -> Bounds {
    let mut structure = Structure::default();
    let n = dev.events.len();
    if n == 0 {
        return Bounds {
            segs: Vec::new(),
            structure,
        };
    }
    let model = ModelCode::new(&snap.stacks);
    let mut ends_marked = false;
    let mut segs: Vec<Seg> = match annotation_segments(snap, dev) {
        Some((s, family)) if family != "ProfilerStep" => {
            // An iteration is the loop's body, not an optimizer call: where every iteration
            // of the user's loop runs the same number (2 or more) of optimizer steps, the
            // iterations are the steps and the marks are evidence of them.
            match several_marks_per_iteration(snap, dev, &model, &s) {
                Some((per, level)) => {
                    structure.optimizer_steps_per_iteration = Some(per);
                    structure.loops.extend(level.loops.iter().cloned());
                    let mut out = Vec::new();
                    let whole = Seg {
                        range: 0..n,
                        source: StepSource::Tail,
                        complete: false,
                    };
                    push_loop_segments(&mut out, whole, &level.starts, level.last);
                    if out.first().is_some_and(|x| x.source == StepSource::Tail) {
                        out[0].source = StepSource::Setup;
                    }
                    out
                }
                None => {
                    structure.annotation = Some(family.to_owned());
                    ends_marked = true;
                    s
                }
            }
        }
        Some((s, family)) => {
            structure.annotation = Some(family.to_owned());
            s
        }
        None => vec![Seg {
            range: 0..n,
            source: StepSource::Tail,
            complete: false,
        }],
    };
    // Stretches the annotations do not cut (before the first and after the last marked
    // step: validation after training) are searched for the user's loops.
    let mut out: Vec<Seg> = Vec::with_capacity(segs.len());
    let mut passes = 0usize;
    let mut searched = 0usize;
    let mut no_stacks = 0usize;
    for s in segs.drain(..) {
        let searchable = matches!(s.source, StepSource::Setup | StepSource::Tail)
            && s.range.len() >= MIN_ITERATIONS;
        if !searchable {
            out.push(s);
            continue;
        }
        searched += 1;
        match loops::find(snap, dev, s.range.clone()) {
            loops::Structure::NoStacks => {
                no_stacks += 1;
                out.push(s);
            }
            loops::Structure::SinglePass => {
                // After steps whose ends are marked (`Optimizer.step`), a stretch that runs
                // only code those steps ran is the next step, begun and not finished (an OOM or
                // the dump cut it): a step, incomplete.
                let annotated: Vec<Range<usize>> = out
                    .iter()
                    .filter(|x| x.source == StepSource::Annotation)
                    .map(|x| x.range.clone())
                    .collect();
                if s.source == StepSource::Tail
                    && ends_marked
                    && !annotated.is_empty()
                    && loops::repeats(snap, dev, s.range.clone(), &annotated)
                {
                    out.push(Seg {
                        range: s.range,
                        source: StepSource::Annotation,
                        complete: false,
                    });
                } else {
                    let tokens = loops::decoding_loops(snap, dev, s.range.clone());
                    if tokens.is_empty() {
                        passes += 1;
                    }
                    structure.decoding_loops.extend(tokens);
                    out.push(s);
                }
            }
            loops::Structure::Loops(levels) => {
                let end = s.range.end;
                // The outermost working level with enough iterations to judge (see
                // JUDGE_ITERATIONS), else the working level with the most.
                // An inner level is the steps only where its iterations are whole steps (they
                // run the backward, or a module call): never a loop over parameters inside one
                // optimizer step, over layers or over tokens (`loops::whole_steps`).
                let working: Vec<_> = levels
                    .iter()
                    .enumerate()
                    .filter(|(k, l)| {
                        loops::working_on(snap, dev, &model, &l.starts, end, threads)
                            && (*k == 0
                                || loops::whole_steps_on(snap, dev, &l.starts, end, threads))
                    })
                    .collect();
                let pick = working
                    .iter()
                    .find(|(_, l)| l.iterations() >= JUDGE_ITERATIONS)
                    .or_else(|| working.iter().max_by_key(|(_, l)| l.iterations()))
                    .copied();
                // After the annotated steps, a loop whose body ran in some of them but not all
                // is a loop inside the annotated one (validation every few steps) finishing its
                // last iteration, not steps of its own; one that ran in every annotated step is
                // the annotated loop going on unannotated, and one that ran in none is a phase
                // of its own (evaluation after training).
                let annotated: Vec<Range<usize>> = out
                    .iter()
                    .filter(|x| x.source == StepSource::Annotation)
                    .map(|x| x.range.clone())
                    .collect();
                let nested_in_annotated = |level: &loops::Level| {
                    s.source == StepSource::Tail && !annotated.is_empty() && {
                        let n = level.runs_in(snap, dev, &annotated);
                        n > 0 && n < annotated.len()
                    }
                };
                match pick {
                    Some((_, level)) if nested_in_annotated(level) => {
                        merge_loops(&mut structure.nested_loops, &level.loops);
                        out.push(s);
                    }
                    Some((k, level)) => {
                        merge_loops(&mut structure.loops, &level.loops);
                        for inner in &levels[k + 1..] {
                            merge_loops(&mut structure.nested_loops, &inner.loops);
                        }
                        let after_annotated = out
                            .last()
                            .is_some_and(|p| p.source == StepSource::Annotation);
                        let starts = trim_fragment(&level.starts, after_annotated);
                        push_loop_segments(&mut out, s, starts, level.last);
                    }
                    None => {
                        passes += 1;
                        out.push(s);
                    }
                }
            }
        }
    }
    if structure.annotation.is_none() && structure.loops.is_empty() && searched > 0 {
        structure.single_pass = passes > 0 && structure.decoding_loops.is_empty();
        structure.no_user_stacks =
            passes == 0 && no_stacks > 0 && structure.decoding_loops.is_empty();
    }
    Bounds {
        segs: out,
        structure,
    }
}

/// The figures half of [`split`]: each step's peak and end from the replayed series.
pub fn with_figures(bounds: Bounds, tl: &Timeline) -> Vec<Step> {
    let mut counter = 0usize;
    bounds
        .segs
        .into_iter()
        .filter(|s| !s.range.is_empty())
        .map(|s| {
            let (a, b) = (s.range.start, s.range.end - 1);
            let name = match s.source {
                StepSource::Setup => "setup".to_string(),
                StepSource::Tail => "tail".to_string(),
                StepSource::Annotation | StepSource::Loop => {
                    counter += 1;
                    format!("step {counter}")
                }
            };
            let peak = tl
                .series
                .allocated
                .get(a..=b)
                .and_then(|v| v.iter().max().copied());
            Step {
                name,
                start_event: EventIdx(a as u32),
                end_event: EventIdx(b as u32),
                peak_allocated_bytes: peak.unwrap_or(0),
                end_allocated_bytes: tl.series.allocated.get(b).copied().unwrap_or(0),
                source: s.source,
                complete: s.complete,
            }
        })
        .collect()
}

/// Event indices after which survivors are sampled: the ends of complete steps, in order,
/// paired with the index of the step that ends there.
pub fn boundaries(steps: &[Step]) -> Vec<(usize, usize)> {
    steps
        .iter()
        .enumerate()
        .filter(|(_, s)| s.complete)
        .map(|(i, s)| (s.end_event.0 as usize, i))
        .collect()
}

#[derive(Clone, Debug)]
struct Seg {
    range: Range<usize>,
    source: StepSource,
    complete: bool,
}

/// How an annotation family marks steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Marks {
    /// Each range is one step (`ProfilerStep#N`): steps start at START.
    Range,
    /// Each range ends a step (`Optimizer.step`): steps end at END.
    End,
}

/// The family of an annotation name: `ProfilerStep#12` -> `ProfilerStep`,
/// `Optimizer.step#AdamW.step` -> `Optimizer.step`.
pub fn annotation_family(name: &str) -> &str {
    name.split('#')
        .next()
        .unwrap_or(name)
        .trim_end_matches(|c: char| c.is_ascii_digit())
}

fn annotation_segments(snap: &Snapshot, dev: &Device) -> Option<(Vec<Seg>, &'static str)> {
    let n = dev.events.len();
    let times: Vec<i64> = dev
        .events
        .iter()
        .map(|e| e.time_us())
        .collect::<Option<Vec<i64>>>()?;
    if times.windows(2).any(|w| w[1] < w[0]) {
        return None;
    }
    let first = *times.first()?;
    let mine: Vec<_> = snap
        .annotations
        .iter()
        .filter(|a| a.device == dev.index)
        .collect();
    let anns: Vec<_> = if mine.is_empty() {
        snap.annotations.iter().collect()
    } else {
        mine
    };
    let mut starts: HashMap<&str, Vec<i64>> = HashMap::default();
    let mut ends: HashMap<&str, Vec<i64>> = HashMap::default();
    for a in anns {
        // Ranges that closed after the last event (the dump came later) still bound a step.
        if a.time_us < first {
            continue;
        }
        let fam = annotation_family(&a.name);
        if a.start {
            starts.entry(fam).or_default().push(a.time_us);
        } else {
            ends.entry(fam).or_default().push(a.time_us);
        }
    }
    let pick = [
        ("ProfilerStep", Marks::Range),
        ("Optimizer.step", Marks::End),
        ("Optimizer.zero_grad", Marks::End),
    ]
    .into_iter()
    .find(|(f, m)| {
        let v = if *m == Marks::Range { &starts } else { &ends };
        v.get(f).is_some_and(|t| t.len() >= 2)
    })?;
    let to_event = |t: i64| times.partition_point(|&x| x < t);
    let mut segs = Vec::new();
    match pick.1 {
        Marks::Range => {
            let mut s: Vec<usize> = starts[pick.0].iter().map(|&t| to_event(t)).collect();
            s.sort_unstable();
            s.dedup();
            let end = ends
                .get(pick.0)
                .and_then(|v| v.iter().max())
                .map(|&t| to_event(t).min(n))
                .filter(|&e| e > *s.last().unwrap_or(&0))
                .unwrap_or(n);
            segs.push(Seg {
                range: 0..s[0],
                source: StepSource::Setup,
                complete: true,
            });
            for w in s.windows(2) {
                segs.push(Seg {
                    range: w[0]..w[1],
                    source: StepSource::Annotation,
                    complete: true,
                });
            }
            let last_start = *s.last().unwrap_or(&0);
            // The last range is complete only if its END was recorded.
            let closed = end < n || ends.get(pick.0).map(|v| v.len()) == Some(s.len());
            segs.push(Seg {
                range: last_start..end,
                source: StepSource::Annotation,
                complete: closed,
            });
            segs.push(Seg {
                range: end..n,
                source: StepSource::Tail,
                complete: false,
            });
        }
        Marks::End => {
            let mut e: Vec<usize> = ends[pick.0].iter().map(|&t| (to_event(t)).min(n)).collect();
            e.sort_unstable();
            e.dedup();
            let mut prev = 0;
            for &b in &e {
                segs.push(Seg {
                    range: prev..b,
                    source: StepSource::Annotation,
                    complete: true,
                });
                prev = b;
            }
            segs.push(Seg {
                range: prev..n,
                source: StepSource::Tail,
                complete: false,
            });
        }
    }
    segs.retain(|s| !s.range.is_empty());
    Some((segs, pick.0))
}

/// The iteration starts of a stretch that follows annotated steps, less a first "iteration" that
/// is only the end of the last annotated one: a profiler step ends at `prof.step()` (or the
/// optimizer's hook), and what the loop body does after it (`loss.item()`) comes before the next
/// back-jump. Such a fragment, shorter than half the median iteration, joins the step before it.
fn trim_fragment(starts: &[usize], after_annotated: bool) -> &[usize] {
    if !after_annotated || starts.len() < 3 {
        return starts;
    }
    let mut lens: Vec<usize> = starts.windows(2).map(|w| w[1] - w[0]).collect();
    let first = lens[0];
    lens.sort_unstable();
    if first * 2 < lens[lens.len() / 2] {
        &starts[1..]
    } else {
        starts
    }
}

/// The loop level whose every complete iteration holds the same number, 2 or more, of the
/// marked step ends in `marked` (segments from `Optimizer.step` ends), and that number.
fn several_marks_per_iteration(
    snap: &Snapshot,
    dev: &Device,
    model: &ModelCode,
    marked: &[Seg],
) -> Option<(usize, loops::Level)> {
    let ends: Vec<usize> = marked
        .iter()
        .filter(|x| x.source == StepSource::Annotation)
        .map(|x| x.range.end)
        .collect();
    if ends.len() < 2 * MIN_ITERATIONS {
        return None;
    }
    let n = dev.events.len();
    let loops::Structure::Loops(levels) = loops::find(snap, dev, 0..n) else {
        return None;
    };
    levels.into_iter().find_map(|level| {
        if level.iterations() < MIN_ITERATIONS || !loops::working(dev, model, &level.starts, n) {
            return None;
        }
        let counts: Vec<usize> = level
            .starts
            .windows(2)
            .map(|w| ends.iter().filter(|&&e| e > w[0] && e <= w[1]).count())
            .collect();
        let per = *counts.first()?;
        (per >= 2 && counts.iter().all(|&c| c == per)).then_some((per, level))
    })
}

/// Splits `s` at `anchors` (iteration starts, sorted, inside `s.range`) into: the stretch
/// before the first (joined to the previous segment when there is one), one loop step per pair
/// of starts, the final iteration (complete or cut short, as `last` says), and what follows it.
fn push_loop_segments(out: &mut Vec<Seg>, s: Seg, anchors: &[usize], last: loops::LastIteration) {
    if anchors.len() < 2 {
        out.push(s);
        return;
    }
    let head = s.range.start..anchors[0];
    if !head.is_empty() {
        match out.last_mut() {
            Some(prev) if prev.range.end == head.start && prev.complete => {
                prev.range.end = head.end
            }
            _ => out.push(Seg {
                range: head,
                source: StepSource::Setup,
                complete: true,
            }),
        }
    }
    for w in anchors.windows(2) {
        out.push(Seg {
            range: w[0]..w[1],
            source: StepSource::Loop,
            complete: true,
        });
    }
    let from = *anchors.last().unwrap_or(&s.range.end);
    let to = last.end.clamp(from, s.range.end);
    out.push(Seg {
        range: from..to,
        source: StepSource::Loop,
        complete: last.complete,
    });
    out.push(Seg {
        range: to..s.range.end,
        source: StepSource::Tail,
        complete: false,
    });
}

/// Adds `from` to `into`, where one loop line is one loop, its iterations summed: the same loop
/// seen in two stretches (around annotated steps), or reached from several callers (`loops`
/// tells loops apart by their calling context, which a [`LoopSite`] does not show), was
/// otherwise listed once per stretch or caller (DeComFL's `adam_forward.py:185 (196
/// iterations)`, three times, issue 42).
fn merge_loops(into: &mut Vec<LoopSite>, from: &[LoopSite]) {
    for l in from {
        let same = into
            .iter_mut()
            .find(|x| (&x.file, &x.function, x.line) == (&l.file, &l.function, l.line));
        match same {
            Some(x) => x.iterations += l.iterations,
            None => into.push(l.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Action, EventData, Layout, StackId, Stacks};

    fn ev(action: Action, addr: u64, size: u64, stack: StackId, t: i64) -> EventData {
        EventData {
            action,
            addr,
            size,
            stream: 0,
            time_us: Some(t),
            stack,
            device_free: None,
            meta: crate::model::MetaId::NONE,
        }
    }

    /// A loop of `iters` iterations: input on a user line, three layer outputs under a
    /// module frame (same stack, so the key repeats within an iteration), all freed.
    pub(crate) fn loop_snapshot(iters: usize) -> (Snapshot, Device) {
        let mut st = Stacks::new();
        let user = st.intern_frame("train.py", 10, "main");
        let user2 = st.intern_frame("train.py", 11, "main");
        let lin = st.intern_frame(
            "/v/lib/python3.12/site-packages/torch/nn/modules/linear.py",
            134,
            "forward",
        );
        let s_in = st.intern_stack(&[user]);
        let s_lin = st.intern_stack(&[lin, user2]);
        let mut events = vec![ev(Action::SegmentAlloc, 0, 20 << 20, StackId::EMPTY, 0)];
        for t in 1..=iters as i64 {
            events.push(ev(Action::Alloc, 0, 4096, s_in, t));
            for k in 1..4u64 {
                events.push(ev(Action::Alloc, k << 20, 1 << 20, s_lin, t));
            }
            for k in 0..4u64 {
                events.push(ev(Action::FreeRequested, k << 20, 0, s_in, t));
                events.push(ev(Action::FreeCompleted, k << 20, 0, s_in, t));
            }
        }
        let dev = Device::of_events(events);
        let snap = Snapshot::of_devices(Layout::Modern, vec![dev.clone()], st);
        (snap, dev)
    }

    #[test]
    fn families() {
        assert_eq!(annotation_family("ProfilerStep#12"), "ProfilerStep");
        assert_eq!(
            annotation_family("Optimizer.step#AdamW.step"),
            "Optimizer.step"
        );
        assert_eq!(annotation_family("epoch3"), "epoch");
    }

    #[test]
    fn pattern_finds_the_period() {
        let (snap, dev) = loop_snapshot(10);
        let tl = crate::analysis::replay::replay(&dev, &snap.settings);
        let steps = split(&snap, &dev, &tl);
        let iters: Vec<_> = steps
            .iter()
            .filter(|s| s.source == StepSource::Loop)
            .collect();
        // 10 iterations: the last one reached the line the others reach (train.py:11) and
        // nothing follows it, so it is complete too, and there is no tail.
        assert_eq!(iters.len(), 10);
        assert!(iters
            .iter()
            .all(|s| s.end_event.0 - s.start_event.0 + 1 == 12 && s.complete));
        assert_eq!(steps.last().map(|s| s.source), Some(StepSource::Loop));
        // Every event is covered once, in order.
        let mut next = 0;
        for s in &steps {
            assert_eq!(s.start_event.0, next);
            next = s.end_event.0 + 1;
        }
        assert_eq!(next as usize, dev.events.len());
    }

    #[test]
    fn last_iteration_cut_by_an_oom_or_followed_by_an_epilogue() {
        // The final iteration allocates its input and then OOMs: it began, it is a step, but
        // it did not run to its end.
        let (mut snap, mut dev) = loop_snapshot(6);
        let s_in = dev.events[1].stack;
        dev.events.push(ev(Action::Alloc, 9 << 20, 4096, s_in, 7));
        let mut oom = ev(Action::Oom, 0, 1 << 30, s_in, 7);
        oom.device_free = Some(0);
        dev.events.push(oom);
        let tl = crate::analysis::replay::replay(&dev, &snap.settings);
        let steps = split(&snap, &dev, &tl);
        let iters: Vec<_> = steps.iter().filter(|s| s.is_iteration()).collect();
        assert_eq!(iters.len(), 7);
        assert!(iters[..6].iter().all(|s| s.complete));
        assert!(!iters[6].complete);

        // After the loop, the program allocates in another function, or at a later line of the
        // loop's own function: that is the tail, not part of the last iteration.
        for (line, function) in [(30, "report"), (40, "main")] {
            let (_, mut dev) = loop_snapshot(6);
            let after = snap.stacks.intern_frame("train.py", line, function);
            let s_after = snap.stacks.intern_stack(&[after]);
            dev.events
                .push(ev(Action::Alloc, 9 << 20, 4096, s_after, 7));
            let n = dev.events.len();
            let tl = crate::analysis::replay::replay(&dev, &snap.settings);
            let steps = split(&snap, &dev, &tl);
            let iters: Vec<_> = steps.iter().filter(|s| s.is_iteration()).collect();
            assert_eq!(iters.len(), 6, "{function}:{line}");
            assert!(iters.iter().all(|s| s.complete));
            let tail = steps.last().expect("a tail");
            assert_eq!(tail.source, StepSource::Tail);
            assert_eq!(tail.start_event.0 as usize, n - 1);
        }
    }

    #[test]
    fn no_model_code_no_steps() {
        let (mut snap, mut dev) = loop_snapshot(10);
        // Same loop, but the layer allocations have only a user frame and nothing is freed:
        // a loop filling memory on purpose (a buffer, a list of tensors), not a working loop.
        let f = snap.stacks.intern_frame("fill.py", 3, "fill");
        let s = snap.stacks.intern_stack(&[f]);
        dev.events
            .retain(|e| e.action != Action::FreeRequested && e.action != Action::FreeCompleted);
        for e in &mut dev.events {
            e.stack = s;
        }
        let tl = crate::analysis::replay::replay(&dev, &snap.settings);
        let steps = split(&snap, &dev, &tl);
        assert!(steps.iter().all(|s| !s.is_iteration()));
        // The same calls freeing what they made each time are a working loop: one line called
        // ten times, memory back at its level after each call.
        let (mut snap, mut dev) = loop_snapshot(10);
        let f = snap.stacks.intern_frame("fill.py", 3, "fill");
        let s = snap.stacks.intern_stack(&[f]);
        for e in &mut dev.events {
            e.stack = s;
        }
        let tl = crate::analysis::replay::replay(&dev, &snap.settings);
        let steps = split(&snap, &dev, &tl);
        assert_eq!(steps.iter().filter(|s| s.is_iteration()).count(), 10);
    }

    #[test]
    fn a_loop_over_parameters_inside_the_optimizer_step_is_not_the_steps() {
        // Two training iterations (forward, backward, a hand-written optimizer's step looping
        // over 40 parameters, creating their state in the first step): too few steps to judge,
        // never 80 "steps" of the parameter loop.
        let mut st = Stacks::new();
        let module = "/v/lib/python3.12/site-packages/torch/nn/modules/module.py";
        let tensor = "/v/lib/python3.12/site-packages/torch/_tensor.py";
        let fwd = [
            st.intern_frame(module, 1775, "_call_impl"),
            st.intern_frame("train.py", 10, "main"),
        ];
        let bwd = [
            st.intern_frame(tensor, 626, "backward"),
            st.intern_frame("train.py", 11, "main"),
        ];
        let s_fwd = st.intern_stack(&fwd);
        let s_bwd = st.intern_stack(&bwd);
        let call = st.intern_frame("train.py", 12, "main");
        let state = st.intern_frame("opt.py", 21, "step");
        let temp = st.intern_frame("opt.py", 24, "step");
        let s_state = st.intern_stack(&[state, call]);
        let s_temp = st.intern_stack(&[temp, call]);
        let mut events = vec![ev(Action::SegmentAlloc, 0, 1 << 30, StackId::EMPTY, 0)];
        let mut addr = 0u64;
        let mut t = 0i64;
        let mut alloc = |events: &mut Vec<EventData>, stack, free: bool| {
            addr += 4096;
            t += 1;
            events.push(ev(Action::Alloc, addr, 4096, stack, t));
            if free {
                events.push(ev(Action::FreeRequested, addr, 0, stack, t));
                events.push(ev(Action::FreeCompleted, addr, 0, stack, t));
            }
        };
        for step in 0..2 {
            alloc(&mut events, s_fwd, true);
            alloc(&mut events, s_bwd, true);
            for _ in 0..40 {
                if step == 0 {
                    alloc(&mut events, s_state, false);
                }
                alloc(&mut events, s_temp, true);
            }
        }
        let dev = Device::of_events(events);
        let snap = Snapshot::of_devices(Layout::Modern, vec![dev.clone()], st);
        let b = bounds(&snap, &dev);
        let iterations = b
            .segs
            .iter()
            .filter(|s| s.source == StepSource::Loop)
            .count();
        assert!(iterations <= 2, "{iterations} steps: {:?}", b.structure);
        assert!(b.structure.nested_loops.iter().any(|l| l.file == "opt.py"));
    }

    /// DeComFL's public snapshot (ZidongLiu/DeComFL, `memory.pickle` at edd30e09) listed
    /// `adam_forward.py:185 (196 iterations)` three times under "loops inside a step": one level
    /// held that loop three times, reached from three callers, and a stretch searched twice
    /// would have added it again.
    #[test]
    fn a_loop_seen_in_several_stretches_is_listed_once() {
        let site = |line: u32, iterations: usize| LoopSite {
            file: "adam_forward.py".into(),
            function: "forward".into(),
            line,
            iterations,
        };
        let mut nested = Vec::new();
        merge_loops(&mut nested, &[site(185, 196), site(185, 196), site(190, 3)]);
        merge_loops(&mut nested, &[site(185, 196)]);
        assert_eq!(nested, vec![site(185, 588), site(190, 3)]);
    }

    #[test]
    fn annotations_bound_steps() {
        let (mut snap, dev) = loop_snapshot(6);
        // Optimizer.step END at the end of iterations 1..=3 (each iteration is one time unit).
        for t in 1..=3 {
            snap.annotations.push(crate::model::Annotation {
                device: 0,
                name: "Optimizer.step#AdamW.step".into(),
                start: false,
                time_us: t + 1,
            });
        }
        let tl = crate::analysis::replay::replay(&dev, &snap.settings);
        let steps = split(&snap, &dev, &tl);
        let ann: Vec<_> = steps
            .iter()
            .filter(|s| s.source == StepSource::Annotation)
            .collect();
        assert_eq!(ann.len(), 3);
        // The first annotated step includes the setup event and the first iteration.
        assert_eq!(ann[0].start_event.0, 0);
        assert_eq!(ann[0].end_event.0, 12);
    }
}
