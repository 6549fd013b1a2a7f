#[allow(unused_imports)]
use super::*;

/// Retained autograd graph: a forward pass's saved activations survive every step.
///
/// Detects: several tensors per step allocated under `torch.nn` module calls survive. Bad
/// because a graph that is neither backpropagated nor released keeps every tensor it saved
/// for backward, so memory grows by a whole forward pass per step until the OOM.
/// Example: validation without `torch.no_grad()` doing `val_loss += crit(model(x), y)`;
/// `loss.backward(retain_graph=True)` with the losses kept in a list.
/// In a trace: most of a group's surviving bytes were made by ops whose autograd nodes no
/// backward in the trace consumed (the trace records the graph, not which calls were modules).
/// Fix: `with torch.no_grad():` (or `torch.inference_mode()`) for evaluation, accumulate
/// `.item()`, and drop `retain_graph=True` unless a second backward needs it.
pub struct RetainedGraph;

impl LeakRule for RetainedGraph {
    fn id(&self) -> LeakKind {
        LeakKind::RetainedGraph
    }
    fn describe(&self) -> &'static str {
        "every step's forward activations kept alive by an autograd graph that is never released"
    }
    fn matches(&self, ev: &SiteEvidence) -> Option<Match> {
        (ev.in_module_share >= 0.5
            && ev.growth_tensors_per_step >= 3.0
            && ev.survival_share >= MIN_GRAPH_SURVIVAL)
            .then(|| Match {
                kind: self.id(),
                confidence: Confidence::High,
            })
    }
    fn matches_trace(&self, ev: &TraceSiteEvidence) -> Option<Match> {
        (ev.graph_bytes > 0 && ev.graph_bytes.saturating_mul(2) >= ev.total_bytes).then(|| Match {
            kind: self.id(),
            confidence: Confidence::Medium,
        })
    }
}
