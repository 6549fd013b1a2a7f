//! `fragmentation` (`--fail-on fragmentation`): an OOM whose cause is fragmentation.
//!
//! - **Detects**: an OOM where enough memory was cached but free, yet no free block was large
//!   enough for the request. Measures the number of such OOMs, held to 0.
//! - **Cannot judge (SKIP)**: where the capture could not have recorded an OOM, as
//!   [`super::oom`].
//! - **Evidence**: the last such OOM: its device, the request that did not fit, its line and
//!   the analysis' summary of it.
//! - **Fix**: `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` (or `max_split_size_mb`), or
//!   long-lived tensors allocated first; the OOM's remedies (`memscope analyze`) say which
//!   would have helped here.

use super::oom::oom_measurable;
use super::{skip_unless, Measurable, Rule, RuleId};
use crate::analysis::oom::Cause;
use crate::check::summary::InputSummary;
use crate::check::{Measure, Reason, RuleResult, Unit};

pub struct FragmentationRule;

impl Rule for FragmentationRule {
    fn id(&self) -> RuleId {
        RuleId::Fragmentation
    }
    fn measurable(&self, s: &InputSummary) -> Measurable {
        oom_measurable(s)
    }
    fn apply(&self, s: &InputSummary) -> RuleResult {
        if let Some(r) = skip_unless(self, Unit::Count, s) {
            return r;
        }
        let frag: Vec<_> = s
            .ooms
            .iter()
            .filter(|o| o.cause == Cause::Fragmentation)
            .collect();
        let mut r = RuleResult::limit(
            RuleId::Fragmentation,
            Unit::Count,
            frag.len() as f64,
            0.0,
            Measure::FragmentationOoms,
        );
        match frag.last() {
            Some(o) => {
                r.say(Reason::FragmentationOom {
                    device: o.device.clone(),
                    requested_bytes: o.requested_bytes,
                });
                r.site = o.site.clone();
                r.evidence.push(o.summary.clone());
            }
            None => r.say(Reason::NoFragmentationOom),
        }
        r
    }
}
