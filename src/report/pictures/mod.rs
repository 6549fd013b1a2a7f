//! Pictures of the memory: the flamegraph of the live memory at a moment, the Perfetto trace of
//! the whole log, and the SVG chart the HTML report embeds. Each is drawn from the analysis
//! product (`analysis::Analyzed`): its timelines, its states at a moment, its classifier.

pub mod chart;
pub mod flamegraph;
pub mod perfetto;
pub mod trace_page;
pub mod trace_perfetto;
