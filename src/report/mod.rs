//! Views that turn an [`Analysis`](crate::analysis::Analysis) into bytes.
//!
//! Every output format implements [`Format`], so adding one (JUnit, GitHub annotations, HTML)
//! never touches the analyses, and each format has its own snapshot test.

pub mod chart;
pub mod check;
pub use crate::escape;
pub mod flamegraph;
pub mod html;
pub mod json;
pub mod perfetto;
pub mod style;
pub mod text;
pub mod whatif;

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
