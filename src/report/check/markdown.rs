//! Markdown of `memscope diff` (`--format markdown`, or text written to the file
//! `$GITHUB_STEP_SUMMARY` names).

use std::io::{self, Write};

use super::text::DiffText;
use crate::check::diff::Diff;
use crate::report::escape;
use crate::report::{Options, Render};

/// `memscope diff --format markdown`, for `$GITHUB_STEP_SUMMARY`: a heading, then the text
/// diff (no colour, through the terminal boundary) in a code block fenced longer than any
/// backtick run inside it, so nothing a capture names can render (no HTML, image or link).
pub struct DiffMarkdown;

impl Render<Diff> for DiffMarkdown {
    fn render(&self, d: &Diff, _opts: &Options, out: &mut dyn Write) -> io::Result<()> {
        let mut t = escape::TermWriter::new(Vec::new(), false);
        DiffText.render(d, &Options::default(), &mut t)?;
        t.flush()?;
        let text = String::from_utf8_lossy(&t.into_inner()).into_owned();
        writeln!(out, "### memscope diff")?;
        writeln!(out)?;
        write!(out, "{}", escape::md_fence(&text))
    }
}
