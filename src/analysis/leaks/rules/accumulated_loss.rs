#[allow(unused_imports)]
use super::*;

/// Accumulated loss tensor: a 0-dim tensor kept every step.
///
/// Detects: survivors that are all tiny (at most 16 bytes requested: one scalar), about one
/// per step. Bad because each scalar carries its autograd graph: `total += loss` (out of
/// place) or `losses.append(loss)` keeps one per step, and with it every graph node and, if
/// backward was not run on it, every activation it saved.
/// Example: `total_loss = total_loss + loss` in the training loop.
/// Fix: `total_loss += loss.item()` (or `loss.detach()`).
pub struct AccumulatedLoss;

impl LeakRule for AccumulatedLoss {
    fn id(&self) -> LeakKind {
        LeakKind::AccumulatedLoss
    }
    fn describe(&self) -> &'static str {
        "one 0-dim tensor (a loss) kept per step, with its autograd graph"
    }
    fn matches(&self, ev: &SiteEvidence) -> Option<Match> {
        let one_per_step = (0.5..=2.5).contains(&ev.growth_tensors_per_step);
        (ev.survivors > 0 && ev.max_requested <= 16 && one_per_step).then(|| Match {
            kind: self.id(),
            confidence: Confidence::Medium,
        })
    }
}
