//! Views of check results and diffs: one family, the [`CheckFormat`] and [`DiffFormat`]
//! traits (the counterparts of [`Format`](super::Format) for [`CheckReport`] and [`Diff`]),
//! one file per output:
//!
//! - [`text`]: human text of `check` ([`CheckText`]) and `diff` ([`DiffText`]);
//! - [`markdown`]: `diff --format markdown`, for `$GITHUB_STEP_SUMMARY` ([`DiffMarkdown`]);
//! - [`json`]: `memscope.check/2` ([`CheckJson`]) and `memscope.diff/1` ([`DiffJson`]);
//! - [`junit`]: JUnit XML ([`Junit`]);
//! - [`github`]: GitHub Actions annotations ([`GithubAnnotations`]) and a step-summary
//!   Markdown table ([`GithubSummary`]).
//!
//! A new format is one file implementing a trait, and its `mod`/`pub use` lines here.

use std::io::{self, Write};

use super::Options;
use crate::check::diff::Diff;
use crate::check::CheckReport;

pub mod github;
pub mod json;
pub mod junit;
pub mod markdown;
pub mod text;

pub use github::{GithubAnnotations, GithubSummary};
pub use json::{CheckJson, DiffJson};
pub use junit::Junit;
pub use markdown::DiffMarkdown;
pub use text::{CheckText, DiffText};

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
