//! `leak` (`--fail-on leak`): memory that grows with the steps.
//!
//! - **Detects**: a leak finding of the analysis (alive at the end, or released only after the
//!   loop that grew it: its peak still grows with the number of steps), or an OOM caused by a
//!   leak. Measures the number of findings, held to 0.
//! - **Cannot judge (SKIP)**: a capture that cannot support a leak judgement (no allocation
//!   history, one pass, a decoding loop, too few steps, no memory events, CPU memory only),
//!   with the reason: never a PASS it did not earn.
//! - **Evidence**: the largest finding (by bytes at stake): its kind, line, growth, steps and
//!   live bytes, what keeps it alive, the analysis' explanation.
//! - **Fix**: the finding's own fix (`.item()` on an accumulated loss, `detach()` what a hook
//!   caches, ...), printed as the last evidence line.

use super::{leak_evidence, leaks_judged, lines_known, Measurable, Rule, RuleId, Skip};
use crate::analysis::oom::Cause;
use crate::check::summary::InputSummary;
use crate::check::{Measure, Reason, RuleResult, Unit};
use crate::wording::gate::LeakFigures;

pub struct LeakRule;

impl Rule for LeakRule {
    fn id(&self) -> RuleId {
        RuleId::Leak
    }
    fn measurable(&self, s: &InputSummary) -> Measurable {
        match leaks_judged(s) {
            Ok(_) => Measurable::Yes,
            Err(why) => Measurable::Nothing(Skip::Leaks(why)),
        }
    }
    fn apply(&self, s: &InputSummary) -> RuleResult {
        if let Some(o) = s.ooms.iter().rev().find(|o| o.cause == Cause::Leak) {
            if s.leaks.as_ref().is_none_or(Vec::is_empty) {
                let mut r = RuleResult::limit(RuleId::Leak, Unit::Count, 1.0, 0.0, Measure::Leaks);
                r.say(Reason::OomCausedByLeak {
                    device: o.device.clone(),
                });
                r.site = o.site.clone();
                r.evidence.push(o.summary.clone());
                return r;
            }
        }
        let leaks = match leaks_judged(s) {
            Ok(l) => l,
            Err(why) => return RuleResult::skip(RuleId::Leak, Unit::Count, Skip::Leaks(why)),
        };
        let mut r = RuleResult::limit(
            RuleId::Leak,
            Unit::Count,
            leaks.len() as f64,
            0.0,
            Measure::Leaks,
        );
        // The largest finding by bytes at stake (what it holds), as the analysis ranks them.
        let worst = leaks.iter().max_by_key(|l| l.live_bytes);
        match worst {
            Some(l) => {
                // An accumulation freed only after its loop fails too: its peak grows with the
                // number of steps, so a longer run runs out of memory (docs/how-it-decides.md).
                r.say(Reason::Leaks(LeakFigures {
                    findings: leaks.len(),
                    released: leaks.iter().filter(|l| l.extent.released()).count(),
                    kind: l.kind,
                    growth_bytes_per_step: l.growth_bytes_per_step,
                    steps: l.steps,
                    live_bytes: l.live_bytes,
                    extent: l.extent,
                }));
                r.site = l.site.clone();
                leak_evidence(l, lines_known(s), &mut r.evidence);
            }
            None => r.say(Reason::NoLeak {
                steps: s.leak_judgement.as_ref().map(|j| j.steps),
            }),
        }
        r
    }
}
