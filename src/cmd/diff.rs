//! `memscope diff`: one capture against another, as text, Markdown or JSON.

use anyhow::Context;

use crate::cmd::cli::{DiffArgs, DiffFormatArg};
use crate::cmd::output::{self, Stdout};
use crate::cmd::session::Session;
use memscope::check::diff::Diff;
use memscope::report::envelope::{ErrorKind, InEnvelope, Refused};
use memscope::report::{self, Render};

/// True when stdout is the file `$GITHUB_STEP_SUMMARY` names (`memscope diff ... >>
/// "$GITHUB_STEP_SUMMARY"`): the text there is read as Markdown, so it is written as Markdown.
pub(crate) fn stdout_is_step_summary() -> bool {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) else {
        return false;
    };
    let (Ok(fd), Ok(want)) = (
        std::io::stdout().as_fd().try_clone_to_owned(),
        std::fs::metadata(path),
    ) else {
        return false;
    };
    std::fs::File::from(fd)
        .metadata()
        .is_ok_and(|m| m.dev() == want.dev() && m.ino() == want.ino())
}

pub(crate) fn diff(args: &DiffArgs, color: bool, s: &mut Session) -> anyhow::Result<u8> {
    let mut one = |p: &std::path::Path| -> anyhow::Result<memscope::check::InputSummary> {
        let mut v = memscope::inputs::load_summaries(&[p], true)?;
        s.found(p, crate::cmd::file_kind(p, &v));
        match v.len() {
            1 => Ok(v.remove(0)),
            0 => Err(Refused::new(
                ErrorKind::Baseline,
                format!("{}: the baseline holds no inputs", p.display()),
            )
            .into()),
            n => Err(Refused::new(
                ErrorKind::Usage,
                format!(
                    "{}: the baseline holds {n} inputs; diff compares one capture with one",
                    p.display()
                ),
            )
            .into()),
        }
    };
    let before = one(&args.before)?;
    let after = one(&args.after)?;
    if !args.force {
        memscope::check::diff::comparable(&before, &after).with_context(|| {
            format!(
                "cannot compare {} with {}",
                args.before.display(),
                args.after.display()
            )
        })?;
    }
    let mut d = memscope::check::diff::diff(&before, &after);
    // The inputs as given on the command line (a baseline's entry keeps its stored path).
    d.before = args.before.display().to_string();
    d.after = args.after.display().to_string();
    let opts = report::Options {
        color,
        stacks: false,
    };
    let asked = match args.format {
        DiffFormatArg::Text if stdout_is_step_summary() => DiffFormatArg::Markdown,
        f => f,
    };
    let answer = s.envelope();
    let (fmt, sink) = format(asked, &answer);
    output::to_stdout(fmt, sink, &d, &opts, "writing the diff")?;
    Ok(0)
}

/// The one place `diff` turns `--format` into a format of the diff.
fn format<'a>(f: DiffFormatArg, answer: &'a InEnvelope<'a>) -> (&'a dyn Render<Diff>, Stdout) {
    match f {
        DiffFormatArg::Text => (&report::check::DiffText, Stdout::Term),
        DiffFormatArg::Json => (answer, Stdout::Answer),
        DiffFormatArg::Markdown => (&report::check::DiffMarkdown, Stdout::Plain),
    }
}
