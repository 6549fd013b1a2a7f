//! `memscope analyze`: one capture's report (a rank directory goes to the job view).

use std::io::Write;

use anyhow::Context;

use crate::cmd::cli::{AnalyzeArgs, OutputFormat};
use crate::cmd::output;
use crate::cmd::session::Session;
use memscope::load::Capture;
use memscope::report::envelope::InputKind;
use memscope::report::{self, Format};

pub(crate) fn analyze(args: &AnalyzeArgs, color: bool, s: &mut Session) -> anyhow::Result<u8> {
    if crate::cmd::job::is_job(&args.files) {
        return crate::cmd::job::analyze(args, color, s);
    }
    let file = &args.files[0];
    let opened = memscope::load::open(file)?;
    let kind = match opened.capture {
        Capture::Snapshot(_) => InputKind::Snapshot,
        Capture::Trace(_) => InputKind::Trace,
    };
    s.found(file, kind);
    // As stored: a pipe's bytes count too.
    s.sized(file, opened.bytes);
    if args.stacks && kind == InputKind::Trace {
        s.note("--stacks does nothing for a profiler trace (its sites come without stacks)".into());
    }
    // The process ends right after the report: freeing a million-event model piece by piece
    // would only delay the exit, so the product is never dropped.
    let product = std::mem::ManuallyDrop::new(memscope::analysis::analyze(opened, file));
    let analysis = product.report();
    let opts = report::Options {
        color,
        stacks: args.stacks,
    };
    match args.format {
        OutputFormat::Text => {
            let mut out = output::term_stdout(color);
            report::text::Text
                .render(analysis, &opts, &mut out)
                .context("writing the report")?;
            out.flush().context("writing the report")?;
        }
        OutputFormat::Json => s.answer(&report::json::data(analysis))?,
    }
    Ok(0)
}
