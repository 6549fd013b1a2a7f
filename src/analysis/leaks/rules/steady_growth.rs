#[allow(unused_imports)]
use super::*;

/// Steady growth of a shape memscope does not recognise.
///
/// In a snapshot it matches any growing site, with low confidence: a site no other rule
/// explains. In a trace, survivors of many profiled steps that hold no retained graph: the
/// trace shows their growth but not what shape of container keeps them (medium confidence,
/// the growth itself being what the trace's memory events show).
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
    fn matches_trace(&self, _ev: &TraceSiteEvidence) -> Option<Match> {
        Some(Match {
            kind: self.id(),
            confidence: Confidence::Medium,
        })
    }
}
