//! Views of check results and diffs: one family of [`Render`](super::Render)s of
//! [`CheckReport`] and [`Diff`], one file per output:
//!
//! - [`text`]: human text of `check` ([`CheckText`]) and `diff` ([`DiffText`]);
//! - [`markdown`]: `diff --format markdown`, for `$GITHUB_STEP_SUMMARY` ([`DiffMarkdown`]);
//! - [`json`]: `memscope.check/3` ([`CheckJson`]) and `memscope.diff/1` ([`DiffJson`]), alone
//!   or inside the envelope;
//! - [`junit`]: JUnit XML ([`Junit`]);
//! - [`github`]: GitHub Actions annotations ([`GithubAnnotations`]) and a step-summary
//!   Markdown table ([`GithubSummary`]).
//!
//! A new format is one file implementing `Render`, and its `mod`/`pub use` lines here.

#[cfg(doc)]
use crate::check::{diff::Diff, CheckReport};

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
