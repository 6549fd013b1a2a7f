//! `memscope plan`'s outputs: text for the terminal, JSON for scripts, and an HTML page with
//! the chart of peak against batch. Each is one [`Render`](super::Render) of a [`PlanDoc`]; the analysis
//! ([`crate::analysis::plan`]) computes the plan, the words come from [`crate::wording`].

pub mod html;
pub mod json;
pub mod section;
pub mod text;

use crate::analysis::plan::Plan;

/// What every plan output shows besides the plans: the file they come from.
pub struct PlanDoc<'a> {
    pub file: &'a str,
    pub other: Option<&'a str>,
    pub plans: &'a [Plan],
}
