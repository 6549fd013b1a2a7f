//! The analysis' renderers: one [`Render<Analysis>`](super::Render) each (text, JSON, HTML),
//! and `whatif`'s text. They read the analysis and say it through [`crate::wording`]; none runs a pass.

pub mod html;
pub mod json;
pub mod text;
pub mod whatif;
