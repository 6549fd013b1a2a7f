//! `memscope analyze`: one capture's report (a rank directory goes to the job view).

use crate::cmd::cli::{AnalyzeArgs, OutputFormat};
use crate::cmd::output::{self, Stdout};
use crate::cmd::session::Session;
use memscope::analysis::Analysis;
use memscope::load::Capture;
use memscope::report::envelope::{InEnvelope, InputKind};
use memscope::report::{self, Render};

/// The one place `analyze` turns `--format` into a format of the report.
fn format<'a>(f: OutputFormat, answer: &'a InEnvelope<'a>) -> (&'a dyn Render<Analysis>, Stdout) {
    match f {
        OutputFormat::Text => (&report::text::Text, Stdout::Term),
        OutputFormat::Json => (answer, Stdout::Answer),
    }
}

pub(crate) fn analyze(args: &AnalyzeArgs, color: bool, s: &mut Session) -> anyhow::Result<u8> {
    if let [dir] = args.files.as_slice() {
        if memscope::summarize::read::is_summaries_dir(dir) {
            return crate::cmd::summarize::analyze(args, color, s);
        }
    }
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
    let answer = s.envelope();
    let (fmt, sink) = format(args.format, &answer);
    output::to_stdout(fmt, sink, analysis, &opts, "writing the report")?;
    Ok(0)
}
