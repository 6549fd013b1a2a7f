//! Views of check results and diffs: the [`CheckFormat`] and [`DiffFormat`] traits, the
//! counterparts of [`Format`](super::Format) for [`CheckReport`] and [`Diff`].
//!
//! Formats: human text ([`super::check_text`]), JSON ([`CheckJson`], schema
//! `memscope.check/2`), JUnit XML ([`super::check_junit`]), GitHub Actions annotations and a
//! step-summary Markdown table ([`super::check_github`]).

use std::io::{self, Write};

use super::Options;
use crate::check::diff::Diff;
use crate::check::CheckReport;

/// One output format of `memscope check`.
pub trait CheckFormat {
    fn render(&self, report: &CheckReport, opts: &Options, out: &mut dyn Write) -> io::Result<()>;
}

/// One output format of `memscope diff`.
pub trait DiffFormat {
    fn render(&self, diff: &Diff, opts: &Options, out: &mut dyn Write) -> io::Result<()>;
}

/// Renders a check report into a `String`.
pub fn check_to_string(f: &dyn CheckFormat, report: &CheckReport, opts: &Options) -> String {
    let mut v = Vec::new();
    f.render(report, opts, &mut v)
        .expect("writing to a Vec cannot fail");
    String::from_utf8(v).expect("formats write UTF-8")
}

/// Renders a diff into a `String`.
pub fn diff_to_string(f: &dyn DiffFormat, diff: &Diff, opts: &Options) -> String {
    let mut v = Vec::new();
    f.render(diff, opts, &mut v)
        .expect("writing to a Vec cannot fail");
    String::from_utf8(v).expect("formats write UTF-8")
}

/// `memscope.check/2`, pretty-printed.
pub struct CheckJson;

impl CheckFormat for CheckJson {
    fn render(&self, report: &CheckReport, _opts: &Options, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, report).map_err(io::Error::from)?;
        writeln!(out)
    }
}

/// `memscope.diff/1`, pretty-printed.
pub struct DiffJson;

impl DiffFormat for DiffJson {
    fn render(&self, diff: &Diff, _opts: &Options, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, diff).map_err(io::Error::from)?;
        writeln!(out)
    }
}
