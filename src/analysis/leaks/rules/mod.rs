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

pub(super) fn at(site: &Option<Site>) -> String {
    site.as_ref()
        .map(|s| format!("{}:{} (in {})", s.file, s.line, s.function))
        .unwrap_or_else(|| "allocations with no recorded stack".into())
}

pub(super) fn per_step(ev: &SiteEvidence) -> String {
    format!(
        "{} more survive at {} after every step ({:.1} tensors per step, {} steps, {} live at the end of the growth)",
        bytes(ev.growth_bytes_per_step.max(0.0) as u64),
        at(&ev.site),
        ev.growth_tensors_per_step,
        ev.steps,
        bytes(ev.live_bytes)
    )
}

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
    rules()
        .iter()
        .find_map(|r| r.matches(ev))
        .unwrap_or_else(|| Match {
            kind: LeakKind::SteadyGrowth,
            confidence: Confidence::Low,
            explanation: per_step(ev),
            fix: String::new(),
        })
}
