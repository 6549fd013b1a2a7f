//! The step an OOM failed in, against the steps before it.
//!
//! The failed request alone cannot tell capacity from fragmentation: a cache with 276 MiB free
//! and no 300 MiB hole looks fragmented, yet if the step that made the request was on a batch six
//! times longer than any before and had already allocated more than any earlier step's peak, it
//! ran out of room for that input, and a defragmented cache would only have moved the failure a
//! few requests later. So the cause is judged on the whole step:
//!
//! * the step's allocated bytes at the failure against the highest peak of the iterations before
//!   it (the same program, the same cap: those fit);
//! * its inputs against theirs: the same line (the same interned stack) asking for more bytes in
//!   this step than in any earlier one. The input batch, the activations of a longer sequence and
//!   the attention scores of a longer context all show there, at the lines that made them before.
//!
//! A step past every earlier peak on larger inputs ran out of capacity for that input
//! ([`FailingStep::outgrew`]); fragmentation is the cause only where the step's need would have
//! fit. One pass over the log for all of a device's OOMs: each step's per-line sizes are merged
//! into the earlier steps' once the step ends.

use rustc_hash::FxHashMap as HashMap;

use crate::analysis::replay::Timeline;
use crate::analysis::sites::Site;
use crate::analysis::steps::{Step, StepSource};
use crate::model::{Action, Device, Snapshot, StackId};

/// Least growth of one line's request over its largest in any earlier step to count as a larger
/// input. Below it, sizes at one line move with rounding and with shapes that differ by a few
/// rows (a last batch, padding to a multiple of 8); a larger input moves them by its own ratio.
pub const MIN_INPUT_GROWTH: f64 = 1.25;

/// The step an OOM failed in, against the iterations before it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct FailingStep {
    /// The step's name in the report (`step 7`), and where its bounds came from (a `tail` is
    /// the partial iteration after the last complete one).
    pub step: String,
    pub source: StepSource,
    pub start_event: u32,
    /// Iterations that ended before it.
    pub earlier_steps: usize,
    /// The highest allocated peak among them, and which one had it.
    pub earlier_peak_bytes: u64,
    pub earlier_peak_step: String,
    /// Allocated when the request failed.
    pub allocated_at_failure_bytes: u64,
    /// The least the step needed: what it held plus the failed request.
    pub needed_at_least_bytes: u64,
    /// Lines that asked for more in this step than in any earlier one.
    pub larger_inputs: Option<LargerInputs>,
    /// The log holds no end of this step: it stops inside it, or the step was abandoned at the
    /// failure. Its requests after the failure are not in the log.
    pub log_ends_inside: bool,
}

/// The evidence that a step ran on larger inputs than the ones before it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LargerInputs {
    /// The line whose request grew the most, relative to its largest in an earlier step.
    pub site: Option<Site>,
    pub earlier_max_bytes: u64,
    pub this_step_bytes: u64,
    /// Lines of this step (up to the failure) that also ran in earlier steps, and how many of
    /// them asked for at least [`MIN_INPUT_GROWTH`] times their earlier largest.
    pub lines_compared: usize,
    pub lines_grown: usize,
}

impl LargerInputs {
    pub fn ratio(&self) -> f64 {
        self.this_step_bytes as f64 / self.earlier_max_bytes.max(1) as f64
    }
}

impl FailingStep {
    /// Past every earlier step's peak, on larger inputs: the step ran out of capacity for its
    /// input, whatever the cache's holes.
    pub fn outgrew(&self) -> bool {
        self.allocated_at_failure_bytes > self.earlier_peak_bytes && self.larger_inputs.is_some()
    }
}

/// Running comparison of one step's requests with the earlier steps'.
#[derive(Default)]
struct InStep {
    sizes: HashMap<StackId, u64>,
    compared: usize,
    grown: usize,
    /// The largest growth so far: (stack, earlier, now).
    best: Option<(StackId, u64, u64)>,
}

impl InStep {
    fn see(&mut self, earlier: &HashMap<StackId, u64>, stack: StackId, size: u64) {
        let prev = self.sizes.get(&stack).copied();
        if prev.is_some_and(|p| p >= size) {
            return;
        }
        self.sizes.insert(stack, size);
        let Some(&before) = earlier.get(&stack) else {
            return;
        };
        if prev.is_none() {
            self.compared += 1;
        }
        let grown = |s: u64| s as f64 >= MIN_INPUT_GROWTH * before.max(1) as f64;
        if !grown(size) {
            return;
        }
        if !prev.is_some_and(grown) {
            self.grown += 1;
        }
        let ratio = |(_, b, n): (StackId, u64, u64)| n as f64 / b.max(1) as f64;
        if self
            .best
            .is_none_or(|b| size as f64 / before.max(1) as f64 > ratio(b))
        {
            self.best = Some((stack, before, size));
        }
    }
}

/// For each OOM of the device (the timeline's, in order), its step against the earlier ones;
/// `None` where the OOM lies in no step, or no iteration ended before its step.
pub fn failing_steps(
    snap: &Snapshot,
    dev: &Device,
    tl: &Timeline,
    steps: &[Step],
) -> Vec<Option<FailingStep>> {
    let mut out = vec![None; tl.ooms.len()];
    if tl.ooms.is_empty() {
        return out;
    }
    let mut earlier: HashMap<StackId, u64> = HashMap::default();
    let (mut n_earlier, mut peak, mut peak_step) = (0usize, 0u64, String::new());
    let mut next_oom = 0usize;
    for s in steps {
        let (a, b) = (s.start_event.0 as usize, s.end_event.0 as usize);
        let mut cur = InStep::default();
        for i in a..=b.min(dev.events.len().saturating_sub(1)) {
            let e = &dev.events[i];
            if !matches!(e.action, Action::Alloc | Action::Oom) {
                continue;
            }
            cur.see(&earlier, e.stack, e.size);
            while next_oom < tl.ooms.len() && (tl.ooms[next_oom].event.0 as usize) < i {
                next_oom += 1;
            }
            if e.action != Action::Oom {
                continue;
            }
            let Some(k) = (next_oom < tl.ooms.len() && tl.ooms[next_oom].event.0 as usize == i)
                .then_some(next_oom)
            else {
                continue;
            };
            if n_earlier == 0 {
                continue;
            }
            let o = &tl.ooms[k];
            out[k] = Some(FailingStep {
                step: s.name.clone(),
                source: s.source,
                start_event: a as u32,
                earlier_steps: n_earlier,
                earlier_peak_bytes: peak,
                earlier_peak_step: peak_step.clone(),
                allocated_at_failure_bytes: o.counters.allocated,
                needed_at_least_bytes: o.counters.allocated.saturating_add(o.rounded_bytes),
                larger_inputs: cur.best.map(|(st, before, now)| LargerInputs {
                    site: Site::of_stack(&snap.stacks, st),
                    earlier_max_bytes: before,
                    this_step_bytes: now,
                    lines_compared: cur.compared,
                    lines_grown: cur.grown,
                }),
                log_ends_inside: !s.complete,
            });
        }
        if s.is_iteration() {
            for (st, size) in cur.sizes {
                let m = earlier.entry(st).or_default();
                *m = (*m).max(size);
            }
            n_earlier += 1;
            if s.peak_allocated_bytes > peak || n_earlier == 1 {
                peak = s.peak_allocated_bytes;
                peak_step = s.name.clone();
            }
        }
    }
    out
}
