//! `memscope man`: the man pages, `memscope(1)` and one `memscope-SUBCOMMAND(1)` per subcommand.
//!
//! clap_mangen draws each page from the same clap definitions as `--help`, so the pages cannot
//! drift from the flags; what clap does not know (the exit statuses, examples, the other pages)
//! is appended here as EXIT STATUS, EXAMPLES and SEE ALSO. `memscope(1)` lists the subcommands as
//! `memscope-analyze(1)` and so on: `memscope man -o DIR` writes every one of those pages.

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context};
use clap::CommandFactory;
use clap_mangen::roff::{bold, roman, Roff};

use crate::cmd::cli::{Cli, ManArgs};

/// `memscope man [SUBCOMMAND] [-o DIR]`.
pub fn run(args: &ManArgs) -> anyhow::Result<u8> {
    let pages = pages().context("rendering the man pages")?;
    if let Some(dir) = &args.output {
        return write_all(dir, &pages);
    }
    let want = match &args.subcommand {
        Some(sub) => format!("memscope-{sub}.1"),
        None => "memscope.1".to_owned(),
    };
    let Some((_, text)) = pages.iter().find(|(name, _)| *name == want) else {
        let subs: Vec<&str> = pages
            .iter()
            .filter_map(|(n, _)| n.strip_prefix("memscope-")?.strip_suffix(".1"))
            .collect();
        bail!(
            "no man page for `{}`; the subcommands are {}",
            args.subcommand.as_deref().unwrap_or_default(),
            subs.join(", ")
        );
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text).context("writing the man page")?;
    out.flush().context("writing the man page")?;
    Ok(0)
}

/// Writes every page into `dir` (created when missing) and names them on stderr.
fn write_all(dir: &Path, pages: &[(String, Vec<u8>)]) -> anyhow::Result<u8> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (name, text) in pages {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    eprintln!(
        "memscope man: {} pages written to {} (memscope.1, memscope-SUBCOMMAND.1); e.g. `man -l {}`",
        pages.len(),
        dir.display(),
        dir.join("memscope.1").display()
    );
    Ok(0)
}

/// Every page: (file name, roff text), `memscope.1` first.
pub fn pages() -> std::io::Result<Vec<(String, Vec<u8>)>> {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build(); // gives the subcommands their display names, `memscope-analyze`
    let mut out = vec![("memscope.1".to_owned(), page(&cmd, None)?)];
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = sub.get_name().to_owned();
        out.push((format!("memscope-{name}.1"), page(sub, Some(&name))?));
    }
    Ok(out)
}

/// One page: clap_mangen's sections, then EXIT STATUS, EXAMPLES and SEE ALSO.
fn page(cmd: &clap::Command, sub: Option<&str>) -> std::io::Result<Vec<u8>> {
    let mut text = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .source(format!("memscope {}", env!("CARGO_PKG_VERSION")))
        .manual("memscope manual")
        .render(&mut text)?;
    let mut roff = Roff::new();
    roff.control("SH", ["EXIT STATUS"]);
    for (code, meaning) in exit_status(sub) {
        roff.control("TP", [])
            .text([bold(*code)])
            .text([roman(*meaning)]);
    }
    roff.control("SH", ["EXAMPLES"]);
    for (command, what) in examples(sub) {
        roff.control("TP", [])
            .text([bold(*command)])
            .text([roman(*what)]);
    }
    roff.control("SH", ["SEE ALSO"]);
    let see = match sub {
        Some(_) => "memscope(1); the README and docs/ of the memscope repository.".to_owned(),
        None => "the README and docs/ of the memscope repository; `memscope man -o DIR` writes \
                 the memscope-SUBCOMMAND(1) pages listed above."
            .to_owned(),
    };
    roff.text([roman(see)]);
    // Without the second copy of the apostrophe preamble clap_mangen's part already has.
    for line in roff.render().lines().filter(|l| !is_preamble(l)) {
        text.extend_from_slice(line.as_bytes());
        text.push(b'\n');
    }
    Ok(text)
}

/// The two lines roff puts at the top of every text it renders.
fn is_preamble(line: &str) -> bool {
    line.starts_with(".ie \\n(.g .ds Aq") || line.starts_with(".el .ds Aq")
}

type Pairs = &'static [(&'static str, &'static str)];

/// What the exit status means for `sub` (`None`: memscope itself).
fn exit_status(sub: Option<&str>) -> Pairs {
    match sub {
        None => &[
            ("0", "Success."),
            (
                "1",
                "A check failed (`memscope check`: a rule did not hold).",
            ),
            (
                "2",
                "An error: unreadable, truncated or wrong input, a bad flag or configuration; one \
                 line on stderr says which file and what was expected.",
            ),
            (
                "N",
                "`memscope run` exits with its program's exit code (128+N after signal N).",
            ),
        ],
        Some("check") => &[
            ("0", "Every rule holds (SKIPped rules included)."),
            ("1", "A rule failed: the check failed."),
            (
                "2",
                "An error: unreadable input, bad flag, bad memscope.toml, or a limit with nothing \
                 to measure.",
            ),
        ],
        Some("summarize") => &[
            (
                "0",
                "Every capture has its rows, those that could not be read included (their \
                 rank_summary row says why).",
            ),
            (
                "2",
                "An error: a bad flag or --job/--step name, an output that cannot be written.",
            ),
        ],
        Some("run") => &[
            (
                "N",
                "The program's exit code; 128+N when signal N ended it.",
            ),
            ("2", "memscope could not start the program (or a bad flag)."),
        ],
        Some(_) => &[
            ("0", "Success (a closed output pipe too)."),
            ("1", "Not used: only `memscope check` fails a check."),
            (
                "2",
                "An error: unreadable, truncated or wrong input, a bad flag, an output that \
                 cannot be written; one line on stderr.",
            ),
        ],
    }
}

/// Commands to copy, for `sub` (`None`: memscope itself).
fn examples(sub: Option<&str>) -> Pairs {
    match sub {
        None => &[
            (
                "memscope run -o mem/ -- python train.py",
                "Record your job; an OOM leaves mem/memscope-oom.pickle.",
            ),
            (
                "memscope analyze mem/memscope-oom.pickle",
                "Why the OOM, which line, what to change.",
            ),
            (
                "memscope tui trace.json.gz",
                "Explore a snapshot or a profiler trace in the terminal.",
            ),
            (
                "memscope check mem.pickle --baseline ci/memscope-baseline.json",
                "The CI gate.",
            ),
        ],
        Some("analyze") => &[
            (
                "memscope analyze snap.pickle",
                "The text report of a snapshot.",
            ),
            (
                "memscope analyze trace.json.gz --format json > report.json",
                "A profiler trace, as memscope.report/1 JSON.",
            ),
            (
                "ssh gpu-box cat snap.pickle.gz | memscope analyze -",
                "A capture read from stdin.",
            ),
            (
                "memscope analyze snap.pickle --stacks",
                "With the full stack of each site.",
            ),
            (
                "memscope analyze out/iteration_6/",
                "Every rank of a job (rank{R}_memory_snapshot.pickle, snapshot_{R}.pickle, ..._rank{R}_pid...): a per-rank table, peak_rank, oom_ranks, the imbalance and the sites that differ.",
            ),
            (
                "memscope analyze --rank-pattern 'node(?P<rank>\\d+)/' */mem.pickle",
                "Ranks named another way.",
            ),
        ],
        Some("check") => &[
            (
                "memscope check mem.pickle --baseline ci/memscope-baseline.json --max-peak 8GiB",
                "Limits and a baseline.",
            ),
            (
                "memscope check rank*.pt.trace.json --max-imbalance 10% --format junit > junit.xml",
                "Ranks, as JUnit.",
            ),
        ],
        Some("baseline") => &[
            (
                "memscope baseline mem.pickle -o ci/memscope-baseline.json",
                "A summary to commit.",
            ),
            (
                "torchrun --nproc_per_node 8 --no-python sh -c 'python train.py; s=$?; memscope baseline out/rank${RANK}.pickle --rank $RANK -o sums/rank${RANK}.jsonl; exit $s'",
                "Under torchrun: each rank writes its summary line (JSON Lines, for DuckDB and Polars) when its program ends.",
            ),
            (
                "memscope baseline out/rank${SLURM_ARRAY_TASK_ID}.pickle --rank $SLURM_ARRAY_TASK_ID -o sums/rank${SLURM_ARRAY_TASK_ID}.jsonl",
                "In a Slurm array (#SBATCH --array=0-1023), one task per rank.",
            ),
            (
                "cat sums/*.jsonl > job.jsonl && memscope analyze job.jsonl",
                "On one machine: the job view over the summaries (or memscope check job.jsonl).",
            ),
        ],
        Some("diff") => &[
            (
                "memscope diff ci/memscope-baseline.json mem.pickle",
                "What grew since the baseline.",
            ),
            ("memscope diff before.pickle after.pickle", "Two captures."),
        ],
        Some("flamegraph") => &[
            (
                "memscope flamegraph snap.pickle --at peak -o live.svg",
                "Live memory at the peak.",
            ),
            (
                "memscope flamegraph snap.pickle --by category -o roles.svg",
                "By inferred role under each stack.",
            ),
            (
                "memscope flamegraph snap.pickle --folded -o live.folded",
                "Folded stacks for other tools.",
            ),
        ],
        Some("report") => &[(
            "memscope report snap.pickle -o report.html",
            "One self-contained HTML page.",
        )],
        Some("export") => &[(
            "memscope export snap.pickle --format perfetto -o trace.json",
            "For ui.perfetto.dev.",
        )],
        Some("tui") => &[
            (
                "memscope tui snap.pickle",
                "A snapshot's views: overview, timeline, allocator map, sites, leaks.",
            ),
            (
                "memscope tui trace.json.gz",
                "A profiler trace's: overview, timeline, steps, graph, leaks.",
            ),
        ],
        Some("whatif") => &[(
            "memscope whatif snap.pickle --alloc-conf expandable_segments:True --cap 2GiB",
            "The same requests under expandable segments and a 2 GiB cap.",
        )],
        Some("plan") => &[
            (
                "memscope plan snap.pickle --batch 8 --cap 80GiB --at 32 --at 64",
                "Peaks at batch 32 and 64, whether each fits under 80 GiB, and the largest batch that does.",
            ),
            (
                "memscope plan b8.pickle --batch 8 --with b16.pickle --with-batch 16",
                "Each request's growth fitted from two captures.",
            ),
        ],
        Some("query") => &[
            (
                "memscope query snap.pickle \"SELECT file, line, SUM(size) FROM live WHERE moment = 'peak' GROUP BY site_id ORDER BY 3 DESC LIMIT 5\"",
                "Which lines held the most at the peak (docs/query.md has ten such questions).",
            ),
            (
                "memscope query snap.pickle \"SELECT * FROM ooms\" --format json",
                "Each OOM's figures, as JSON.",
            ),
            (
                "memscope query snap.pickle",
                "An interactive prompt with history; .tables and .schema list the tables.",
            ),
        ],
        Some("mcp") => &[(
            "{\"mcpServers\": {\"memscope\": {\"command\": \"memscope\", \"args\": [\"mcp\"]}}}",
            "The entry that registers memscope with an MCP client (docs/mcp.md).",
        )],
        Some("run") => &[
            (
                "memscope run -o mem/ -- python train.py --your --args",
                "An OOM leaves mem/memscope-oom.pickle.",
            ),
            (
                "memscope run -o mem/ --snapshot-on both -- torchrun --nproc_per_node 8 train.py",
                "One file per rank.",
            ),
            (
                "memscope run -o mem/ --profile-steps 3:5 -- python train.py",
                "Also a profiler trace of steps 3 to 5.",
            ),
        ],
        Some("completions") => &[(
            "memscope completions bash > ~/.local/share/bash-completion/completions/memscope",
            "Bash completion.",
        )],
        Some("summarize") => &[
            (
                "memscope summarize caps/rank*.pickle -o sums/ --job run17",
                "Each rank's rows under sums/job=run17/step=0/rank=R/ (Parquet).",
            ),
            (
                "memscope summarize caps/rank${SLURM_ARRAY_TASK_ID}.pickle -o sums/ --job $SLURM_JOB_ID",
                "In a Slurm array, one task per rank (Python: memscope.summarize(paths, out)).",
            ),
            (
                "memscope analyze sums/",
                "The job view of the rows (docs/summaries.md has the SQL reduce).",
            ),
        ],
        Some("man") => &[
            (
                "memscope man -o ~/.local/share/man/man1",
                "Every page, for `man memscope-analyze`.",
            ),
            ("memscope man analyze | man -l -", "One page, read at once."),
        ],
        Some(_) => &[],
    }
}
