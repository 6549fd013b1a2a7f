//! The gate's rules, one file each (ruff's layout: `rules/<rule>.rs`, and [`codes`] for the
//! ids and which rules a configuration runs). Each file's doc says what the rule detects, when
//! it cannot judge (SKIP), the evidence it gives on a FAIL, and the fix.
//!
//! Every per-input rule reads an [`InputSummary`] (built from the analysis' typed fields by
//! [`super::typed`]) and returns one [`RuleResult`]. A rule with a limit the user set also
//! says, through [`Rule::measurable`], whether an input holds anything to measure: `check`
//! turns "nothing to measure" into an error (exit 2) rather than a PASS. The baseline rules
//! ([`baseline`]) compare an input with its baseline entry, and [`imbalance`] compares the
//! ranks of one run.
//!
//! A new rule is a file here, its [`RuleId`] and its place in [`codes::configured`], and a
//! `mod` line below.

pub mod baseline;
pub mod codes;
pub mod fragmentation;
pub mod graph_growth;
pub mod growth_per_step;
pub mod imbalance;
pub mod leak;
pub mod oom;
pub mod peak;

pub use baseline::baseline_rules;
pub use codes::RuleId;
pub use fragmentation::FragmentationRule;
pub use graph_growth::GraphGrowthRule;
pub use growth_per_step::GrowthPerStepRule;
pub use leak::LeakRule;
pub use oom::OomRule;
pub use peak::PeakRule;

use super::summary::{self, InputSummary};
use super::{RuleResult, Unit, EVIDENCE};
use crate::analysis::CaptureKind;
use crate::wording::gate as words;
pub use crate::wording::gate::{NoLeakJudgement, Skip, Unmeasured};

/// Whether an input holds what a rule measures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Measurable {
    Yes,
    /// The rule does not apply to this kind of capture (graph growth of a snapshot): SKIP.
    NotThisKind(Skip),
    /// The rule applies, but this capture holds nothing to measure (why): SKIP, or an error
    /// when the user set the rule's limit.
    Nothing(Skip),
}

/// One rule of the gate.
pub trait Rule {
    /// The rule's name in every output (`oom`, `max-peak`, ...).
    fn id(&self) -> RuleId;
    /// Whether `s` holds what the rule measures.
    fn measurable(&self, s: &InputSummary) -> Measurable;
    /// The outcome on `s` (SKIP, with the reason, where [`Rule::measurable`] says no).
    fn apply(&self, s: &InputSummary) -> RuleResult;
}

fn skip_unless(rule: &dyn Rule, unit: Unit, s: &InputSummary) -> Option<RuleResult> {
    match rule.measurable(s) {
        Measurable::Yes => None,
        Measurable::NotThisKind(why) | Measurable::Nothing(why) => {
            Some(RuleResult::skip(rule.id(), unit, why))
        }
    }
}

/// Whether the capture could support a leak judgement: its findings, or why it could not.
fn leaks_judged(s: &InputSummary) -> Result<&[summary::LeakSummary], NoLeakJudgement> {
    let Some(leaks) = &s.leaks else {
        return Err(NoLeakJudgement::NotAnalysed);
    };
    match s.leak_judgement.as_ref().filter(|j| !j.judged) {
        // A finding is a finding, whatever the judgement says.
        Some(j) if leaks.is_empty() => Err(NoLeakJudgement::NotJudged {
            reason: j.reason.map(summary::Unjudged::reason),
            steps: j.steps,
            min_steps: j.min_steps,
        }),
        _ => Ok(leaks),
    }
}

/// Whether the lines of `s`'s sites are the lines of the statements (not for traces).
pub fn lines_known(s: &InputSummary) -> bool {
    s.kind != CaptureKind::Trace
}

fn site_lines(sites: &[summary::SiteBytes], known: bool) -> Vec<String> {
    sites
        .iter()
        .take(EVIDENCE)
        .map(|s| words::held_by(s.bytes, &s.site, known))
        .collect()
}

/// A leak finding's evidence: what keeps it alive, why, and the fix.
fn leak_evidence(l: &summary::LeakSummary, known: bool, ev: &mut Vec<String>) {
    if l.cause_site.is_some() {
        ev.push(words::kept_alive_by(&l.cause_site, known));
    }
    if !l.explanation.is_empty() {
        ev.push(l.explanation.clone());
    }
    if !l.fix.is_empty() {
        ev.push(words::fix_line(&l.fix));
    }
}

/// One growing op of the autograd graph, as evidence.
fn graph_evidence(g: &summary::GraphGrowthSummary, known: bool) -> String {
    words::graph_growth_line(&g.op, g.nodes_per_step, g.steps, &g.site, known)
}

/// A trace's summary for the rules' tests: cuda:0 measured at 1 GiB, cuda:1 known only as a
/// change from the trace's start (`peak` its lower bound), with no reserved total.
#[cfg(test)]
fn trace_summary(peak: u64) -> InputSummary {
    let dev = |name: &str, peak: u64| {
        serde_json::json!({
            "device": name, "peak_allocated_bytes": peak, "peak_reserved_bytes": 0,
            "end_allocated_bytes": 0, "end_reserved_bytes": 0
        })
    };
    serde_json::from_value(serde_json::json!({
        "path": "t.json", "kind": "trace", "verdict": "ok",
        "devices": [dev("cuda:0", 1 << 30), dev("cuda:1", peak)],
        "allocated_from_trace_start": ["cuda:1"],
        "reserved_unrecorded": ["cuda:1"],
    }))
    .unwrap()
}
