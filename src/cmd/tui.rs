//! `memscope tui`: checks the file and the terminal on the normal screen, then hands over to the TUI.

use std::io::IsTerminal;

use anyhow::Context;

use crate::cmd::cli::{PlanOpts, RankPatternArg};

pub(crate) fn tui(
    files: &[std::path::PathBuf],
    ranks: &RankPatternArg,
    plan: &PlanOpts,
) -> anyhow::Result<u8> {
    if crate::cmd::job::is_job(files) {
        return crate::cmd::job::tui(files, ranks, plan);
    }
    let file = files[0].as_path();
    // `--batch`: the plan's arguments are checked here, on the normal terminal.
    let plan = crate::cmd::pictures::plan_ask(plan)?;
    // A file that cannot be read is said here, whole, on the normal terminal (exit 2), not on
    // an alternate screen cut at its width; and before asking for a terminal, so that
    // `memscope tui missing </dev/null` says the one thing that is wrong.
    if file.as_os_str() != "-" {
        let meta =
            std::fs::metadata(file).with_context(|| format!("cannot open {}", file.display()))?;
        if meta.is_dir() {
            anyhow::bail!("cannot open {}: it is a directory", file.display());
        }
        std::fs::File::open(file).with_context(|| format!("cannot open {}", file.display()))?;
    }
    // Said once, before the alternate screen or raw mode could be touched.
    if !(std::io::stdout().is_terminal() && std::io::stdin().is_terminal()) {
        anyhow::bail!(
            "the TUI needs a terminal (stdin and stdout); for a text report run `memscope analyze {}`",
            file.display()
        );
    }
    memscope::tui::run_with(file, plan)?;
    Ok(0)
}
