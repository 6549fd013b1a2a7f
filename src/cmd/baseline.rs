//! `memscope baseline`: the committed summary file that `check --baseline` compares against.

use std::io::Write;

use crate::cmd::cli::BaselineArgs;
use crate::cmd::output;
use crate::cmd::session::Session;

/// The baseline file is `memscope.baseline/1` itself, not an envelope: it is data that is
/// committed and read back (docs/json.md says why).
pub(crate) fn baseline(args: &BaselineArgs) -> anyhow::Result<u8> {
    if crate::cmd::job::wants_lines(args) {
        return crate::cmd::job::baseline_lines(args);
    }
    if let Some(n) = args.rank {
        anyhow::bail!("--rank {n} numbers a rank line: it goes with --format jsonl");
    }
    if args.ranks.rank_pattern.is_some() {
        anyhow::bail!("--rank-pattern numbers rank lines: it goes with --format jsonl");
    }
    let mut quiet = Session::default();
    let (mut summaries, _) =
        crate::cmd::load_with_progress(&args.files, &vec![None; args.files.len()], &mut quiet)?;
    // Committed files: paths from the repository root (else the file name), never absolute.
    for s in &mut summaries {
        s.path = memscope::check::paths::for_baseline(&s.path);
    }
    let b = memscope::check::Baseline::new(summaries);
    let mut text = serde_json::to_string_pretty(&b)?;
    text.push('\n');
    let inputs: Vec<&std::path::Path> = args.files.iter().map(|p| p.as_path()).collect();
    let mut out = output::Output::create(&args.output, &inputs)?;
    out.write_all(text.as_bytes())?;
    out.finish()?;
    Ok(0)
}
