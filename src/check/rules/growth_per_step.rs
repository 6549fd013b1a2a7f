//! `max-growth-per-step` (`--max-growth-per-step`): how fast the worst leak grows.
//!
//! - **Detects**: the largest per-step growth of any leak finding (0 where none was found),
//!   held to the limit.
//! - **Cannot judge (SKIP, or an error since the limit was set)**: a capture that cannot
//!   support a leak judgement, as [`super::leak`].
//! - **Evidence**: the finding's line, steps, live bytes and kind, what keeps it alive, the
//!   analysis' explanation.
//! - **Fix**: the finding's own fix (the last evidence line).

use super::{leak_evidence, lines_known, skip_unless, LeakRule, Measurable, Rule, RuleId};
use crate::check::summary::InputSummary;
use crate::check::{Measure, RuleResult, Skip, Unit};

pub struct GrowthPerStepRule {
    pub limit: u64,
}

impl Rule for GrowthPerStepRule {
    fn id(&self) -> RuleId {
        RuleId::MaxGrowthPerStep
    }
    fn measurable(&self, s: &InputSummary) -> Measurable {
        LeakRule.measurable(s)
    }
    fn apply(&self, s: &InputSummary) -> RuleResult {
        if let Some(r) = skip_unless(self, Unit::BytesPerStep, s) {
            return r;
        }
        let rule = RuleId::MaxGrowthPerStep;
        let Some((max, l)) = s.max_growth_per_step() else {
            return RuleResult::skip(rule, Unit::BytesPerStep, Skip::NoGrowthFindings);
        };
        let mut r = RuleResult::limit(
            rule,
            Unit::BytesPerStep,
            max,
            self.limit as f64,
            Measure::LargestGrowth,
        );
        if let Some(l) = l {
            r.site = l.site.clone();
            if r.failed() {
                r.evidence.push(crate::wording::gate::growth_line(
                    &l.site,
                    lines_known(s),
                    l.steps,
                    l.live_bytes,
                    l.kind,
                ));
                leak_evidence(l, lines_known(s), &mut r.evidence);
            }
        }
        r
    }
}
