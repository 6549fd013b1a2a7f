//! Cutting a device's event log into the iterations of the program's loop.
//!
//! A leak is memory that survives one more iteration than the last, so every leak question
//! needs iterations first, and the log does not record them. Two sources are used, best first:
//!
//! * `external_annotations`: `record_function` ranges the allocator saw. User ranges named like
//!   the profiler's steps (`ProfilerStep#N`) bound a step exactly; the optimizer's own
//!   `Optimizer.step#...` ranges end one. Their `time_us` is mapped to the first event at or
//!   after it.
//! * The allocation stream itself, where no annotation covers a stretch (validation loops
//!   never call the optimizer; 2.1-era traces have no times). A loop allocates the same
//!   tensors from the same lines in the same order every iteration, so some `(stack, size)`
//!   key occurs exactly once per iteration at a steady spacing. The most frequent such key
//!   (ties: the earliest) is the anchor, and each of its occurrences starts an iteration. The
//!   stretches before and after the anchor's run are searched again, so a training phase
//!   followed by a validation phase gives two runs of iterations.
//!
//! Only working loops count: an iteration must allocate under `torch.nn`, `torch.autograd` or
//! `torch.optim` frames, or free most of what it allocates before the next iteration (its
//! temporaries). A loop that only creates tensors and keeps them (filling a buffer, the
//! fragmentation scenario) is keeping them on purpose as far as a snapshot can tell, and calling
//! its iterations "steps" would turn every kept tensor into a leak.

use rustc_hash::FxHashMap as HashMap;
use std::ops::Range;

use crate::analysis::replay::{round_size, Timeline};
use crate::model::{Action, Device, EventIdx, FrameKind, Snapshot, StackId, Stacks};

/// Where a step's bounds came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepSource {
    /// Before the first iteration: model creation, data loading.
    Setup,
    /// Bounded by `record_function` annotations.
    Annotation,
    /// Bounded by a repeating allocation of the loop (see the module docs).
    Pattern,
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
        matches!(self.source, StepSource::Annotation | StepSource::Pattern)
    }
    pub fn contains(&self, event: usize) -> bool {
        (self.start_event.0 as usize..=self.end_event.0 as usize).contains(&event)
    }
}

/// Fewest occurrences of an anchor for its run to count as a loop.
pub const MIN_ITERATIONS: usize = 4;

/// Splits a device's log into steps, covering every event exactly once, in order.
pub fn split(snap: &Snapshot, dev: &Device, tl: &Timeline) -> Vec<Step> {
    with_figures(bounds(snap, dev), tl)
}

/// Where the steps lie, from the events and their stacks alone: it needs no replay, so it can
/// run beside one (see [`with_figures`]).
pub struct Bounds(Vec<Seg>);

impl Bounds {
    /// Each step's `(start, end)` events, inclusive, as [`Step`] will hold them.
    pub fn ranges(&self) -> Vec<(usize, usize)> {
        self.0
            .iter()
            .filter(|s| !s.range.is_empty())
            .map(|s| (s.range.start, s.range.end - 1))
            .collect()
    }
}

/// The search half of [`split`]: annotations and the repeating pattern.
pub fn bounds(snap: &Snapshot, dev: &Device) -> Bounds {
    let n = dev.events.len();
    if n == 0 {
        return Bounds(Vec::new());
    }
    let model = ModelCode::new(&snap.stacks);
    let mut segs: Vec<Seg> = match annotation_segments(snap, dev) {
        Some(s) => s,
        None => vec![Seg {
            range: 0..n,
            source: StepSource::Tail,
            complete: false,
        }],
    };
    // Stretches the annotations do not cut (before the first and after the last marked
    // step) are searched for a repeating pattern.
    let mut out: Vec<Seg> = Vec::with_capacity(segs.len());
    for s in segs.drain(..) {
        // Any unmarked stretch may hold a loop (validation after training); the anchor
        // search itself requires MIN_ITERATIONS regular repetitions of model code.
        let searchable = matches!(s.source, StepSource::Setup | StepSource::Tail)
            && s.range.len() >= MIN_ITERATIONS;
        if !searchable {
            out.push(s);
            continue;
        }
        let anchors = pattern_anchors(dev, snap, &model, s.range.clone());
        push_pattern_segments(&mut out, s, &anchors);
    }
    Bounds(out)
}

/// The figures half of [`split`]: each step's peak and end from the replayed series.
pub fn with_figures(bounds: Bounds, tl: &Timeline) -> Vec<Step> {
    let mut counter = 0usize;
    bounds
        .0
        .into_iter()
        .filter(|s| !s.range.is_empty())
        .map(|s| {
            let (a, b) = (s.range.start, s.range.end - 1);
            let name = match s.source {
                StepSource::Setup => "setup".to_string(),
                StepSource::Tail => "tail".to_string(),
                StepSource::Annotation | StepSource::Pattern => {
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

fn annotation_segments(snap: &Snapshot, dev: &Device) -> Option<Vec<Seg>> {
    let n = dev.events.len();
    let times: Vec<i64> = dev
        .events
        .iter()
        .map(|e| e.time_us)
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
    Some(segs)
}

/// Splits `s` at `anchors` (sorted, inside `s.range`) into: the stretch before the first
/// anchor (joined to the previous segment when there is one), one pattern step per pair of
/// anchors, and a trailing partial iteration.
fn push_pattern_segments(out: &mut Vec<Seg>, s: Seg, anchors: &[usize]) {
    if anchors.len() < MIN_ITERATIONS {
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
            source: StepSource::Pattern,
            complete: true,
        });
    }
    let last = *anchors.last().unwrap_or(&s.range.end);
    out.push(Seg {
        range: last..s.range.end,
        source: StepSource::Tail,
        complete: false,
    });
}

/// Which stacks run model code (the test that a loop is a model loop).
pub(crate) struct ModelCode<'a> {
    stacks: &'a Stacks,
    memo: std::cell::RefCell<HashMap<StackId, bool>>,
}

impl<'a> ModelCode<'a> {
    pub(crate) fn new(stacks: &'a Stacks) -> Self {
        ModelCode {
            stacks,
            memo: Default::default(),
        }
    }
    pub(crate) fn is_model(&self, s: StackId) -> bool {
        if let Some(&v) = self.memo.borrow().get(&s) {
            return v;
        }
        // A module call (not `Module._apply`, which moves parameters once), autograd, or the
        // optimizer.
        let v = self.stacks.frames(s).iter().any(|&f| {
            let fr = self.stacks.frame(f);
            fr.kind == FrameKind::Torch && {
                let file = self.stacks.str(fr.file);
                let name = self.stacks.str(fr.name);
                (file.contains("torch/nn/modules/") && matches!(name, "forward" | "_call_impl"))
                    || file.contains("torch/autograd/")
                    || file.contains("torch/optim/")
                    || (file.ends_with("torch/_tensor.py") && name == "backward")
            }
        });
        self.memo.borrow_mut().insert(s, v);
        v
    }
}

/// The anchors of the loops in `range`, sorted: each starts one iteration. Searches the
/// stretch for the best anchor, then the stretches before and after its run.
fn pattern_anchors(
    dev: &Device,
    snap: &Snapshot,
    model: &ModelCode,
    range: Range<usize>,
) -> Vec<usize> {
    let mut out = Vec::new();
    let mut todo = vec![range];
    while let Some(r) = todo.pop() {
        let Some(run) = best_anchor(dev, snap, model, r.clone()) else {
            continue;
        };
        let (first, last) = (run[0], *run.last().unwrap_or(&run[0]));
        // Only a stretch long enough for another loop is searched again.
        let period = (last - first) / (run.len() - 1).max(1);
        if first - r.start > MIN_ITERATIONS * period {
            todo.push(r.start..first);
        }
        if r.end - last > (MIN_ITERATIONS + 1) * period {
            // The iteration the run's last anchor starts is part of the run.
            todo.push((last + period).min(r.end)..r.end);
        }
        out.extend(run);
    }
    out.sort_unstable();
    out
}

/// Anchor selection for one stretch (see the module docs). Returns the event indices of the
/// anchor's occurrences, or `None` when no key repeats regularly in a model loop.
pub(crate) fn best_anchor(
    dev: &Device,
    snap: &Snapshot,
    model: &ModelCode,
    range: Range<usize>,
) -> Option<Vec<usize>> {
    // Alloc events of the stretch, by key, as ordinals among the stretch's allocs.
    let mut allocs: Vec<usize> = Vec::new();
    let mut by_key: HashMap<(StackId, u64), Vec<u32>> = HashMap::default();
    for i in range.clone() {
        let e = &dev.events[i];
        if e.action != Action::Alloc {
            continue;
        }
        let k = (e.stack, round_size(e.size, &snap.settings));
        by_key.entry(k).or_default().push(allocs.len() as u32);
        allocs.push(i);
    }
    // For each alloc of the stretch, the event that freed it (usize::MAX: not in the stretch).
    let mut freed_at = vec![usize::MAX; allocs.len()];
    {
        let mut live: HashMap<u64, usize> = HashMap::default();
        let mut ordinal = 0usize;
        for i in range.clone() {
            let e = &dev.events[i];
            match e.action {
                Action::Alloc => {
                    live.insert(e.addr, ordinal);
                    ordinal += 1;
                }
                Action::FreeRequested => {
                    if let Some(o) = live.remove(&e.addr) {
                        freed_at[o] = i;
                    }
                }
                _ => {}
            }
        }
    }
    let mut best: Option<(usize, usize, &Vec<u32>)> = None; // (count, first ordinal, positions)
    for pos in by_key.values() {
        if pos.len() < MIN_ITERATIONS || !regular(pos) {
            continue;
        }
        let better = match best {
            None => true,
            Some((c, f, _)) => pos.len() > c || (pos.len() == c && (pos[0] as usize) < f),
        };
        if !better {
            continue;
        }
        // A model loop: most iterations allocate under model code, from two or more lines of
        // the user's code (data and forward, forward and loss). A key repeated once per layer
        // inside one forward pass is regular too, but all of it comes from the one line that
        // called the model.
        let iters = pos.len() - 1;
        let model_iters = pos
            .windows(2)
            .filter(|w| {
                let (a, b) = (w[0] as usize, w[1] as usize);
                let span = &allocs[a..b];
                let model_code = span.iter().any(|&i| model.is_model(dev.events[i].stack));
                // Or a working loop without model frames: most of what an iteration allocates
                // is freed before the next one starts (temporaries). A loop that frees nothing
                // it allocates is filling memory on purpose, not iterating.
                let end = allocs.get(b).copied().unwrap_or(usize::MAX);
                let temporaries = (a..b).filter(|&o| freed_at[o] < end).count();
                let working = span.len() >= 3 && temporaries * 2 >= span.len();
                let mut lines = span.iter().filter_map(|&i| {
                    snap.stacks
                        .user_frame(dev.events[i].stack)
                        .map(|f| (f.file, f.line))
                });
                let first = lines.next();
                let two_lines = first.is_some() && lines.any(|l| Some(l) != first);
                (model_code || working) && two_lines
            })
            .count();
        if model_iters * 2 < iters {
            continue;
        }
        best = Some((pos.len(), pos[0] as usize, pos));
    }
    let (_, _, pos) = best?;
    Some(pos.iter().map(|&p| allocs[p as usize]).collect())
}

/// Whether occurrences (alloc ordinals) are evenly spaced: the 10th and 90th percentile gaps
/// lie within 30% of the median gap. A key allocated several times per iteration (one per
/// layer) has short gaps within an iteration and a long one between iterations, and fails.
pub(crate) fn regular(pos: &[u32]) -> bool {
    if pos.len() < 2 {
        return false;
    }
    let mut gaps: Vec<u32> = pos.windows(2).map(|w| w[1] - w[0]).collect();
    gaps.sort_unstable();
    let med = gaps[gaps.len() / 2] as f64;
    let lo = gaps[gaps.len() / 10] as f64;
    let hi = gaps[(gaps.len() * 9) / 10] as f64;
    med >= 1.0 && lo >= 0.7 * med && hi <= 1.3 * med
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AllocatorSettings, Event, Layout};

    fn ev(action: Action, addr: u64, size: u64, stack: StackId, t: i64) -> Event {
        Event {
            action,
            addr,
            size,
            stream: 0,
            time_us: Some(t),
            stack,
            device_free: None,
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
        let dev = Device {
            index: 0,
            segments: Vec::new(),
            events,
        };
        let snap = Snapshot {
            layout: Layout::Modern,
            devices: vec![dev.clone()],
            stacks: st,
            annotations: Vec::new(),
            settings: AllocatorSettings::default(),
            load_notes: Vec::new(),
        };
        (snap, dev)
    }

    #[test]
    fn regular_spacing() {
        assert!(regular(&[0, 5, 10, 15, 20]));
        assert!(regular(&[0, 5, 10, 16, 20, 25]));
        // One per layer: 2, 2, 2 then a long gap.
        assert!(!regular(&[0, 2, 4, 9, 11, 13, 18, 20, 22]));
        assert!(!regular(&[3]));
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
            .filter(|s| s.source == StepSource::Pattern)
            .collect();
        // 10 anchors: 9 complete iterations and a trailing one.
        assert_eq!(iters.len(), 9);
        assert!(iters
            .iter()
            .all(|s| s.end_event.0 - s.start_event.0 + 1 == 12));
        assert_eq!(steps.last().map(|s| s.source), Some(StepSource::Tail));
        // Every event is covered once, in order.
        let mut next = 0;
        for s in &steps {
            assert_eq!(s.start_event.0, next);
            next = s.end_event.0 + 1;
        }
        assert_eq!(next as usize, dev.events.len());
    }

    #[test]
    fn no_model_code_no_steps() {
        let (mut snap, mut dev) = loop_snapshot(10);
        // Same loop, but the layer allocations have only a user frame.
        let f = snap.stacks.intern_frame("fill.py", 3, "fill");
        let s = snap.stacks.intern_stack(&[f]);
        for e in &mut dev.events {
            e.stack = s;
        }
        let tl = crate::analysis::replay::replay(&dev, &snap.settings);
        let steps = split(&snap, &dev, &tl);
        assert!(steps.iter().all(|s| !s.is_iteration()));
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
