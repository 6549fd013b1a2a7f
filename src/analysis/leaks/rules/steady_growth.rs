#[allow(unused_imports)]
use super::*;

/// Steady growth of a shape memscope does not recognise.
pub struct SteadyGrowth;

impl LeakRule for SteadyGrowth {
    fn id(&self) -> LeakKind {
        LeakKind::SteadyGrowth
    }
    fn describe(&self) -> &'static str {
        "survivors of one site that grow every step, of no recognised shape"
    }
    fn matches(&self, _ev: &SiteEvidence) -> Option<Match> {
        Some(Match {
            kind: self.id(),
            confidence: Confidence::Low,
        })
    }
}
