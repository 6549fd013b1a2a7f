//! Whether one capture's request sizes change from one iteration to the next: data-dependent
//! shapes (a mixture of experts' per-expert token counts, batches padded to their longest
//! sample, a detector's proposals).
//!
//! Why: a plan scales each recorded request to the asked shape and replays the log through the
//! allocator model. With fixed shapes every iteration asks the same sizes, so the recorded
//! layout is the layout at any size, up to the scaling. With data-dependent sizes each
//! iteration asks other sizes, and which segments are free when the cap is reached (what the
//! allocator can release and retry with) depends on sizes the capture cannot foresee. On issue
//! 39's holdout 6 a mixture-of-experts model (per-expert requests differing by up to 30%
//! between iterations) replayed under its cap lowered by the 5% band at batch 46, thanks to the
//! model's release of cached segments, where the card failed 46 twice in two (its reserved peak
//! without a cap was 3.7% over the cap). So where sizes vary, a fit is said only where the
//! replay stays under the lowered cap without releasing anything ([`super::model`]).
//!
//! The evidence: consecutive iterations of the step split whose allocations come from the same
//! stacks in the same order (an aligned pair), compared request by request. Pairs that are not
//! aligned (the first iteration making the optimizer state, a path taken once) are not
//! compared: they show other work, not other sizes. Immaterial differences are excluded: the
//! varying requests must hold at least [`MATERIAL_SHARE`] of the recorded allocated peak.

use crate::analysis::steps::Step;
use crate::model::{Action, Device};

/// The share of the recorded allocated peak the varying requests' largest sizes must reach
/// (summed over a pair) to call the sizes data-dependent: below it, a few scalars or index
/// lists that cannot move a segment.
pub const MATERIAL_SHARE: f64 = 0.01;

/// What the capture's iterations show of their request sizes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct StepSizes {
    /// Consecutive iteration pairs with the same allocation stacks in the same order.
    pub aligned_pairs: u32,
    /// Consecutive iteration pairs whose allocations differ in count or stacks (not compared).
    pub unaligned_pairs: u32,
    /// In the aligned pair with the most varying bytes: requests compared.
    pub requests: u64,
    /// Of those, requests whose size differs between the two iterations.
    pub varying: u64,
    /// Their larger sizes, summed.
    pub varying_bytes: u64,
    /// The largest relative difference of one request's two sizes, in per mille.
    pub largest_change_permille: u64,
    /// The varying bytes are material against the recorded peak ([`MATERIAL_SHARE`]).
    pub data_dependent: bool,
}

/// Compares every consecutive pair of iterations of `steps` (the device's step split).
pub fn evidence(dev: &Device, steps: &[Step], peak_allocated: u64) -> StepSizes {
    let allocs = |s: &Step| -> Vec<(u32, u64)> {
        let (a, b) = (s.start_event.0 as usize, s.end_event.0 as usize);
        (a..=b.min(dev.events.len().saturating_sub(1)))
            .map(|i| dev.events[i])
            .filter(|e| e.action == Action::Alloc)
            .map(|e| (e.stack.0, e.size))
            .collect()
    };
    let iters: Vec<Vec<(u32, u64)>> = steps
        .iter()
        .filter(|s| s.is_iteration() && s.complete)
        .map(allocs)
        .collect();
    let mut out = StepSizes::default();
    for w in iters.windows(2) {
        let (x, y) = (&w[0], &w[1]);
        let aligned = x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.0 == q.0);
        if !aligned {
            out.unaligned_pairs += 1;
            continue;
        }
        out.aligned_pairs += 1;
        let (mut varying, mut bytes, mut largest) = (0u64, 0u64, 0u64);
        for (p, q) in x.iter().zip(y) {
            if p.1 != q.1 {
                let (lo, hi) = (p.1.min(q.1), p.1.max(q.1));
                varying += 1;
                bytes = bytes.saturating_add(hi);
                largest = largest.max((hi - lo).saturating_mul(1000) / hi.max(1));
            }
        }
        if bytes > out.varying_bytes || out.aligned_pairs == 1 {
            out.requests = x.len() as u64;
            out.varying = varying;
            out.varying_bytes = bytes;
        }
        out.largest_change_permille = out.largest_change_permille.max(largest);
    }
    out.data_dependent =
        out.varying > 0 && out.varying_bytes as f64 >= MATERIAL_SHARE * peak_allocated as f64;
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::steps::{Step, StepSource};
    use crate::model::{EventData, EventIdx, StackId};

    fn step(start: u32, end: u32) -> Step {
        Step {
            name: String::new(),
            start_event: EventIdx(start),
            end_event: EventIdx(end),
            peak_allocated_bytes: 0,
            end_allocated_bytes: 0,
            source: StepSource::Loop,
            complete: true,
        }
    }

    fn ev(action: Action, addr: u64, size: u64, stack: u32) -> EventData {
        EventData {
            action,
            addr,
            size,
            stream: 0,
            time_us: Some(0),
            stack: StackId(stack),
            device_free: None,
            meta: crate::model::MetaId::NONE,
        }
    }

    /// Three iterations of two allocations each (from the given stacks), each freed at once:
    /// four events per iteration.
    fn device(its: [[(u32, u64); 2]; 3]) -> Device {
        let mut evs = Vec::new();
        let mut addr = 0x1000;
        for it in its {
            for (stack, size) in it {
                evs.push(ev(Action::Alloc, addr, size, stack));
                evs.push(ev(Action::FreeCompleted, addr, size, stack));
                addr += 0x1000;
            }
        }
        Device::of_events(evs)
    }

    const STEPS: [(u32, u32); 3] = [(0, 3), (4, 7), (8, 11)];

    fn steps() -> Vec<Step> {
        STEPS.iter().map(|&(a, b)| step(a, b)).collect()
    }

    #[test]
    fn fixed_shapes_are_not_data_dependent() {
        let d = device([[(1, 1 << 20), (2, 4 << 20)]; 3]);
        let s = evidence(&d, &steps(), 5 << 20);
        assert_eq!(
            (s.aligned_pairs, s.varying, s.data_dependent),
            (2, 0, false)
        );
    }

    #[test]
    fn varying_sizes_are_material_only_above_the_share() {
        let d = device([
            [(1, 1 << 20), (2, 4 << 20)],
            [(1, 1 << 20), (2, 5 << 20)],
            [(1, 1 << 20), (2, 4 << 20)],
        ]);
        let s = evidence(&d, &steps(), 8 << 20);
        assert_eq!(
            (s.aligned_pairs, s.varying, s.varying_bytes),
            (2, 1, 5 << 20)
        );
        assert_eq!(s.largest_change_permille, 200);
        assert!(s.data_dependent);
        // The same 5 MiB against a peak 1000 times larger is immaterial.
        assert!(!evidence(&d, &steps(), 8 << 30).data_dependent);
    }

    #[test]
    fn unaligned_iterations_are_not_compared() {
        // The middle iteration allocates from other stacks, in another order, other sizes.
        let d = device([
            [(1, 1 << 20), (2, 4 << 20)],
            [(2, 5 << 20), (1, 1 << 20)],
            [(1, 1 << 20), (2, 4 << 20)],
        ]);
        let s = evidence(&d, &steps(), 5 << 20);
        assert_eq!((s.aligned_pairs, s.unaligned_pairs), (0, 2));
        assert!(!s.data_dependent);
    }
}
