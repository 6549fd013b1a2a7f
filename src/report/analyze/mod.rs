//! The analysis' renderers: one [`super::Format`] each (text, JSON, HTML), and `whatif`'s
//! table. They read the analysis and say it through [`crate::wording`]; none runs a pass.

pub mod html;
pub mod json;
pub mod text;
pub mod whatif;
