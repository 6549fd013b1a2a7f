//! Views that turn the analysis into bytes, in three families: [`analyze`] (the report: text,
//! JSON, HTML, each a [`Format`]), [`check`] (the gate: `CheckFormat` and `DiffFormat`) and
//! [`pictures`] (flamegraph, Perfetto, the chart). Adding a format never touches the analyses,
//! and each format has its own snapshot test. Every JSON document is written inside the one
//! `memscope/1` envelope of [`envelope`] (docs/json.md). The families' modules are re-exported
//! here under their short names (`report::text`, `report::flamegraph`).

pub mod analyze;
pub mod check;
pub mod envelope;
pub mod job;
pub mod pictures;
pub mod plan;
pub mod style;

pub use crate::escape;
pub use analyze::{html, json, text, whatif};
pub use pictures::{chart, flamegraph, perfetto};

use std::io::{self, Write};

use crate::analysis::Analysis;

/// Options shared by the formats.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// ANSI colours (the caller decides: terminal, `NO_COLOR`, `--color`).
    pub color: bool,
    /// Print full stacks under each site.
    pub stacks: bool,
}

/// One output format.
pub trait Format {
    fn render(&self, analysis: &Analysis, opts: &Options, out: &mut dyn Write) -> io::Result<()>;
}

/// Renders into a `String` (tests and callers that need the text).
pub fn to_string(f: &dyn Format, analysis: &Analysis, opts: &Options) -> String {
    let mut v = Vec::new();
    f.render(analysis, opts, &mut v)
        .expect("writing to a Vec cannot fail");
    String::from_utf8(v).expect("formats write UTF-8")
}
