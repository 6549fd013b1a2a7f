#[allow(unused_imports)]
use super::*;

/// A forward hook or module cache keeping an intermediate activation every step.
///
/// Detects: about one tensor per step that is an intermediate of a forward pass (the same
/// call allocates more after it) survives. Bad because nothing in the user's own loop holds
/// it: a hook (`register_forward_hook` appending `output`) or a module attribute does, and
/// such references outlive the step silently.
/// Example: `def hook(m, i, out): cache.append(out)`.
/// Fix: store `output.detach().cpu()` (or a reduced statistic), and clear the cache each step.
pub struct HookCache;

impl LeakRule for HookCache {
    fn id(&self) -> LeakKind {
        LeakKind::HookCache
    }
    fn describe(&self) -> &'static str {
        "an intermediate activation kept every step by a forward hook or a module-level cache"
    }
    fn matches(&self, ev: &SiteEvidence) -> Option<Match> {
        let inner = ev.intermediate_share >= 0.5 && ev.nested_share >= 0.5;
        (ev.in_module_share >= 0.5 && inner).then(|| Match {
            kind: self.id(),
            confidence: Confidence::Medium,
        })
    }
}
