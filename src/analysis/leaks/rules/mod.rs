//! The leak rules, one file each (like ruff's rules): what the shape is, what it detects, the
//! evidence it reads from [`SiteEvidence`], and the fix. [`rules`] lists them, most specific
//! first; [`classify`] judges a site with the first that matches.

#[allow(unused_imports)]
use super::*;

mod accumulated_loss;
mod hook_cache;
mod kept_outputs;
mod retained_graph;
mod steady_growth;
mod tensor_cache;

pub use accumulated_loss::*;
pub use hook_cache::*;
pub use kept_outputs::*;
pub use retained_graph::*;
pub use steady_growth::*;
pub use tensor_cache::*;

/// The rules, most specific first; the last always matches.
pub fn rules() -> Vec<Box<dyn LeakRule>> {
    vec![
        Box::new(AccumulatedLoss),
        Box::new(RetainedGraph),
        Box::new(HookCache),
        Box::new(KeptOutputs),
        Box::new(TensorCache),
        Box::new(SteadyGrowth),
    ]
}

/// Judges a site with the rules.
pub fn classify(ev: &SiteEvidence) -> Match {
    rules().iter().find_map(|r| r.matches(ev)).unwrap_or(Match {
        kind: LeakKind::SteadyGrowth,
        confidence: Confidence::Low,
    })
}
