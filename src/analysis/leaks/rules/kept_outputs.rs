#[allow(unused_imports)]
use super::*;

/// The forward pass's result kept every step (appended to a list, stored in a dict).
///
/// Detects: about one or two tensors per step that are the last allocation of a model call
/// survive. Bad because the list keeps each output and, unless detached, its graph.
/// Example: `preds.append(out)` for metrics at the end of the epoch.
/// Fix: `preds.append(out.detach().cpu())`, or accumulate the metric as you go.
pub struct KeptOutputs;

impl LeakRule for KeptOutputs {
    fn id(&self) -> LeakKind {
        LeakKind::KeptOutputs
    }
    fn describe(&self) -> &'static str {
        "a model's output appended to a list (or stored) every step"
    }
    fn matches(&self, ev: &SiteEvidence) -> Option<Match> {
        (ev.in_module_share >= 0.5).then(|| Match {
            kind: self.id(),
            confidence: Confidence::Medium,
        })
    }
}
