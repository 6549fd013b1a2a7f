//! `oom` (`--fail-on oom`): the capture recorded an out-of-memory error.
//!
//! - **Detects**: any OOM the capture recorded (a snapshot's allocation history, a trace's
//!   memory events), and an OOM raised outside the allocator (NCCL, cuBLAS...) that `memscope
//!   run`'s recorder caught and that the analysis made the verdict. Measures the OOM count, held
//!   to 0.
//! - **Cannot judge (SKIP)**: a capture without OOMs that could not have recorded one (a
//!   snapshot without allocation history, a trace without memory events or with CPU memory
//!   only), where "no OOM recorded" is no evidence that none happened.
//! - **Evidence**: the last OOM (the one that ended the run): its device, request and cause,
//!   its line, and the analysis' summary of it.
//! - **Fix**: the remedies `memscope analyze` gives for the cause: fix what keeps tensors
//!   alive (leak), `expandable_segments` (fragmentation), a smaller batch, checkpointing or
//!   mixed precision (capacity), leaving the `except` block before retrying (retained attempt).

use super::{skip_unless, Measurable, Rule, RuleId, Skip};
use crate::check::summary::InputSummary;
use crate::check::{Measure, Reason, RuleResult, Unit};
use crate::wording::gate::OomFigures;

pub struct OomRule;

/// Whether `s` could have recorded an OOM: `Nothing(why)` for a capture without OOMs that
/// could not have recorded one (a snapshot without allocation history, a trace without
/// memory events), where "no OOM recorded" is no evidence that none happened. Shared with
/// [`super::fragmentation`].
pub(super) fn oom_measurable(s: &InputSummary) -> Measurable {
    if s.ended_by_outside_oom() {
        return Measurable::Yes;
    }
    let why = s
        .ooms
        .is_empty()
        .then(|| s.leak_judgement.as_ref()?.reason)
        .flatten()
        .map(|r| r.reason())
        .filter(|r| crate::wording::no_oom_record(*r).is_some());
    match why {
        Some(why) => Measurable::Nothing(Skip::OomsNotJudged(why)),
        None => Measurable::Yes,
    }
}

impl Rule for OomRule {
    fn id(&self) -> RuleId {
        RuleId::Oom
    }
    fn measurable(&self, s: &InputSummary) -> Measurable {
        oom_measurable(s)
    }
    fn apply(&self, s: &InputSummary) -> RuleResult {
        if let Some(r) = skip_unless(self, Unit::Count, s) {
            return r;
        }
        let n = s.ooms.len() + usize::from(s.ended_by_outside_oom());
        let mut r = RuleResult::limit(RuleId::Oom, Unit::Count, n as f64, 0.0, Measure::Ooms);
        if s.ended_by_outside_oom() {
            r.say(Reason::OutsideOom {
                allocator_ooms: s.ooms.len(),
            });
        } else if let Some(o) = s.ooms.last() {
            r.say(Reason::Ooms(OomFigures {
                count: n,
                requested_bytes: o.requested_bytes,
                device: o.device.clone(),
                cause: o.cause,
            }));
            r.site = o.site.clone();
            r.evidence.push(o.summary.clone());
        } else {
            r.say(Reason::NoOom);
        }
        r
    }
}
