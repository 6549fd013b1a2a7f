#[allow(unused_imports)]
use super::*;

/// A tensor made on a user line and cached every step (a list or a dict that only grows).
///
/// Detects: about one tensor per step created by the user's own line (not inside a model
/// call) survives. Bad because the container grows without bound.
/// Example: `cache[step] = out.detach().clone()`.
/// Fix: bound the cache (evict, or keep only the last N), or move entries to the CPU.
pub struct TensorCache;

impl LeakRule for TensorCache {
    fn id(&self) -> LeakKind {
        LeakKind::TensorCache
    }
    fn describe(&self) -> &'static str {
        "tensors created by a user line and stored every step in a list or dict that only grows"
    }
    fn matches(&self, ev: &SiteEvidence) -> Option<Match> {
        (ev.in_module_share < 0.5).then(|| Match {
            kind: self.id(),
            confidence: Confidence::Medium,
        })
    }
}
