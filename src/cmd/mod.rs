//! The binary's commands, one file each; `main.rs` only parses arguments and dispatches here.
//! Only `cli.rs` and `man.rs` know about clap's types beyond the parsed arguments.

pub mod analyze;
pub mod baseline;
pub mod check;
pub mod cli;
pub mod diff;
pub mod job;
pub mod man;
pub mod mcp;
pub mod output;
pub mod pictures;
pub mod pictures_trace;
pub mod plan;
pub mod query;
pub mod run;
pub mod session;
pub mod summarize;
pub mod tui;
pub mod whatif;

use memscope::report::envelope::InputKind;

use crate::cmd::session::Session;

pub(crate) fn is_broken_pipe(e: &anyhow::Error) -> bool {
    use std::io::ErrorKind::BrokenPipe;
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == BrokenPipe)
            || c.downcast_ref::<serde_json::Error>()
                .is_some_and(|j| j.io_error_kind() == Some(BrokenPipe))
    })
}

/// Loads several captures on every core, with a progress line on stderr when stderr is a
/// terminal and the work takes more than half a second (64 rank traces, say).
/// Summaries (files written by `memscope baseline`) are accepted wherever captures are.
/// Returns the summaries and, for each, its `--rank` from `explicit` (one per file).
type Ranked = (Vec<memscope::check::InputSummary>, Vec<Option<u32>>);
pub(crate) fn load_with_progress(
    files: &[std::path::PathBuf],
    explicit: &[Option<u32>],
    s: &mut Session,
) -> Result<Ranked, memscope::inputs::InputError> {
    use std::io::IsTerminal;
    let start = std::time::Instant::now();
    let show = files.len() > 1 && std::io::stderr().is_terminal();
    let total = files.len();
    let progress = |done: usize| {
        if show && start.elapsed() > std::time::Duration::from_millis(500) {
            eprint!(
                "\rmemscope: {done}/{total} files analysed ({:.1} s)",
                start.elapsed().as_secs_f64()
            );
        }
    };
    let r = memscope::inputs::load_summaries_per_file(files, true, &progress);
    if show && start.elapsed() > std::time::Duration::from_millis(500) {
        eprint!("\r\x1b[2K");
    }
    // A summary file's entries keep their own ranks; `--rank` applies to a one-entry file.
    let mut out = Vec::new();
    let mut ranks = Vec::new();
    for ((v, r), file) in r?.into_iter().zip(explicit).zip(files) {
        s.found(file, file_kind(file, &v));
        let one = v.len() == 1;
        if let (Some(n), false) = (r, one) {
            s.note(format!(
                "--rank {n}={} does nothing: that summary holds {} inputs, which keep their own ranks",
                file.display(),
                v.len()
            ));
        }
        for s in v {
            ranks.push(r.filter(|_| one));
            out.push(s);
        }
    }
    Ok((out, ranks))
}

/// What a file given to `check` or `diff` was, from what it gave: a capture's one summary
/// carries the path as given, a baseline file's entries their stored paths.
pub(crate) fn file_kind(file: &std::path::Path, v: &[memscope::check::InputSummary]) -> InputKind {
    match v {
        [one] if one.path == file.display().to_string() => match one.kind {
            memscope::analysis::CaptureKind::Snapshot => InputKind::Snapshot,
            memscope::analysis::CaptureKind::Trace => InputKind::Trace,
        },
        _ => InputKind::Baseline,
    }
}
