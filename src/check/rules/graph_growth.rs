//! `graph-growth` (`--fail-on graph-growth`, limit 0) and `max-graph-growth`
//! (`--max-graph-growth N`): an autograd graph that grows every step (profiler traces).
//!
//! - **Detects**: the most autograd nodes per step that no backward pass consumed, held to the
//!   limit (0 for `graph-growth`).
//! - **Cannot judge (SKIP)**: a snapshot (no autograd graph: the rule does not apply to its
//!   kind), and a trace that cannot support a judgement (no op carries an autograd sequence
//!   number, no backward pass, fewer than three profiled steps).
//! - **Evidence**: the growing ops (up to three), their nodes per step and their functions.
//! - **Fix**: carry no tensor that requires grad across iterations: `total += loss.item()`
//!   (or `.detach()`), metrics and validation under `torch.no_grad()` (the analysis' fix for
//!   each op, in `memscope analyze`).

use super::{graph_evidence, lines_known, skip_unless, Measurable, Rule, RuleId, Skip};
use crate::check::summary::InputSummary;
use crate::check::{Measure, RuleResult, Unit, EVIDENCE};
use crate::wording::gate::Caveat;

/// `id` is [`RuleId::GraphGrowth`] (limit 0) or [`RuleId::MaxGraphGrowth`].
pub struct GraphGrowthRule {
    pub id: RuleId,
    pub limit: f64,
}

/// Why a capture of `s`'s kind has no graph to judge.
fn no_graph(s: &InputSummary) -> Skip {
    Skip::NoGraph(s.kind)
}

impl Rule for GraphGrowthRule {
    fn id(&self) -> RuleId {
        self.id
    }
    fn measurable(&self, s: &InputSummary) -> Measurable {
        match (&s.graph_growth, &s.graph_not_judged) {
            (Some(_), Some(why)) => Measurable::Nothing(Skip::GraphNotJudged(why.clone())),
            (Some(_), None) => Measurable::Yes,
            (None, _) => Measurable::NotThisKind(no_graph(s)),
        }
    }
    fn apply(&self, s: &InputSummary) -> RuleResult {
        if let Some(r) = skip_unless(self, Unit::NodesPerStep, s) {
            return r;
        }
        let Some((max, g)) = s.max_graph_growth() else {
            return RuleResult::skip(self.id, Unit::NodesPerStep, no_graph(s));
        };
        let mut r = RuleResult::limit(
            self.id,
            Unit::NodesPerStep,
            max,
            self.limit,
            Measure::GraphGrowth,
        );
        if let Some(g) = g {
            r.caveat(Caveat::Op(g.op.clone()));
            r.site = g.site.clone();
            if r.failed() {
                for g in s.graph_growth.iter().flatten().take(EVIDENCE) {
                    r.evidence.push(graph_evidence(g, lines_known(s)));
                }
            }
        }
        r
    }
}
