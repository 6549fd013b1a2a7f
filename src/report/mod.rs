//! Views that turn the analysis into bytes, in families: [`analyze`] (the report: text, JSON,
//! HTML; what-if's table), [`check`] (the gate and the diff: text, Markdown, JSON, JUnit,
//! GitHub), [`plan`], [`job`] (several ranks of one job) and [`pictures`] (flamegraph,
//! Perfetto, the chart). Every format is one type implementing the one trait
//! [`Render<D>`](render::Render) for the document it shows, so adding a format never touches
//! the analyses, and each format has its own snapshot test. Every JSON document is written inside
//! the one `memscope/1` envelope of [`envelope`] (docs/json.md). The families' modules are
//! re-exported here under their short names (`report::text`, `report::flamegraph`).

pub mod analyze;
pub mod check;
pub mod envelope;
pub mod job;
pub mod pictures;
pub mod plan;
pub mod render;
pub mod style;

pub use crate::escape;
pub use analyze::{html, json, text, whatif};
pub use pictures::{chart, flamegraph, perfetto};
pub use render::{to_string, Options, Render};
