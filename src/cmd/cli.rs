//! Command-line interface: the only place that knows about clap.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser, Debug)]
#[command(
    name = "memscope",
    version = VERSION,
    args_conflicts_with_subcommands = true,
    about = "Offline forensics of PyTorch GPU memory: why the OOM, what leaks, which line"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// A capture to analyse (same as `memscope analyze FILE`).
    pub file: Option<PathBuf>,
    #[command(flatten)]
    pub color: ColorArg,
}

/// `memscope --version`: the crate's version and the commit it was built from (`build.rs`).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("MEMSCOPE_GIT_COMMIT"),
    ")"
);

/// `--color`, on the commands whose output has colour (analyze, check, diff) and nowhere else.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct ColorArg {
    /// When to colour the output.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
}

impl ColorArg {
    pub fn enabled(self) -> bool {
        self.color.enabled()
    }
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Explain a memory snapshot (`torch.cuda.memory._dump_snapshot`) or a profiler trace
    /// (`prof.export_chrome_trace`): figures, OOM cause, leaks, graph growth, sites.
    Analyze(AnalyzeArgs),
    /// CI gate: check captures against limits and a baseline; exit 1 when a rule fails.
    Check(CheckArgs),
    /// Write a small, stable summary of captures to commit and compare against.
    Baseline(BaselineArgs),
    /// The map step of a large job: each capture's rows (rank_summary, site_at_peak,
    /// step_series, leak_site) as Parquet or JSON Lines under OUT/job=J/step=S/rank=R/
    /// (docs/summaries.md); `memscope analyze OUT/` and SQL reduce them.
    Summarize(SummarizeArgs),
    /// What changed between two captures, or a capture and a baseline: peaks, sites, steps.
    Diff(DiffArgs),
    /// Draw live memory as a flamegraph (bytes, not samples): SVG, or folded stacks.
    Flamegraph(FlamegraphArgs),
    /// Write one self-contained HTML report (verdict, chart, allocator map, sites, leaks, flamegraph).
    Report(ReportArgs),
    /// Export the snapshot's timeline for another viewer (Perfetto / Chrome trace JSON).
    Export(ExportArgs),
    /// Explore a snapshot or a profiler trace interactively in the terminal.
    Tui(TuiArgs),
    /// Replay a snapshot's requests through a model of the caching allocator under other settings.
    Whatif(WhatifArgs),
    /// Capacity planning: predicted peaks at other batch sizes, OOM under a cap, and the largest
    /// batch that fits, by replaying the capture's requests scaled through the allocator model.
    Plan(PlanArgs),
    /// SQL over a capture's segments, blocks, events, steps, leaks and OOMs (docs/query.md);
    /// an interactive prompt when no SQL is given.
    Query(QueryArgs),
    /// Serve memscope's analyses to an AI agent: a Model Context Protocol server on stdio
    /// (tools analyze, query, diff, check, plan).
    Mcp(McpArgs),
    /// Run a Python program unchanged with CUDA memory recording on; write a snapshot when an
    /// OutOfMemoryError escapes it (and at exit if asked).
    #[command(long_about = RUN_ABOUT)]
    Run(RunArgs),
    /// Print a shell completion script (e.g. `memscope completions bash > ~/.local/share/bash-completion/completions/memscope`).
    Completions(CompletionsArgs),
    /// Print the man page memscope(1), or a subcommand's (memscope-SUBCOMMAND(1)), as roff; `-o DIR`
    /// writes them all, e.g. `memscope man -o ~/.local/share/man/man1`.
    Man(ManArgs),
}

#[derive(clap::Args, Debug)]
pub struct ManArgs {
    /// The subcommand whose page to print (`memscope man analyze`); without it, memscope(1).
    #[arg(value_name = "SUBCOMMAND")]
    pub subcommand: Option<String>,
    /// Write memscope.1 and every memscope-SUBCOMMAND.1 into DIR (created when missing) instead.
    #[arg(short, long, value_name = "DIR", conflicts_with = "subcommand")]
    pub output: Option<PathBuf>,
}

const RUN_ABOUT: &str = "\
Run a Python program unchanged with CUDA memory recording on.

memscope run -o DIR -- python train.py ARGS   (or torchrun ..., or any command that starts Python)

The program's Python processes get a sitecustomize on PYTHONPATH (any existing sitecustomize still
runs). Once a process initialises CUDA, the caching allocator records its history
(torch.cuda.memory._record_memory_history with --max-entries and --stacks). When an
OutOfMemoryError escapes the program, DIR/memscope-oom.pickle is written; --snapshot-on exit|both
writes DIR/memscope-exit.pickle at exit (both: the exit one only when no OOM one was written).
Under torchrun each rank writes its own file, the rank in its name (memscope-oom-rank1.pickle,
from RANK or LOCAL_RANK). Processes that never touch CUDA (torchrun's launcher) write nothing.

--profile-steps A:B also records a torch.profiler trace (profile_memory, with_stack,
record_shapes) of steps A to B into DIR/memscope-trace.json, without touching your code: a step is
one optimizer step, counted by PyTorch's global optimizer step hook
(torch.optim.optimizer.register_optimizer_step_post_hook). Step 1 starts when CUDA initialises.

memscope exits with the program's exit code (128+N when a signal N ended it) and prints the
`memscope analyze` command to run next. Not recorded: `python -S` / `-I` (they skip
sitecustomize), and OOMs the program catches itself (use memscope.capture() or
--snapshot-on exit for those).";

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// When to write a snapshot: when an OutOfMemoryError escapes, at exit, or both.
    #[arg(long, value_enum, default_value_t = SnapshotOn::Oom)]
    pub snapshot_on: SnapshotOn,
    /// Allocator events kept (a ring buffer: the oldest are dropped past it). With Python stacks a
    /// snapshot takes about 75 to 130 bytes per event: 100000 events, about 7 to 13 MB; deeper
    /// stacks take more.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_entries: u64,
    /// Stacks recorded per allocation: python (cheap) or all (adds C++ frames, much slower).
    #[arg(long, value_enum, default_value_t = RecordStacks::Python)]
    pub stacks: RecordStacks,
    /// Also write a profiler trace of optimizer steps A to B (counted from 1), e.g. 3:5.
    #[arg(long, value_parser = profile_steps, value_name = "A:B")]
    pub profile_steps: Option<(u64, u64)>,
    /// Stop the program after N optimizer steps (PyTorch's global optimizer step hook): the
    /// program ends with status 0 and `--snapshot-on exit` writes its snapshot; a capture for
    /// `memscope plan` needs 3.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_steps: Option<u64>,
    /// Directory for the snapshots and the trace (created when missing).
    #[arg(short, long, value_name = "DIR")]
    pub output: PathBuf,
    /// The program to run, after `--`: `python train.py ARGS`, `torchrun ...`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum SnapshotOn {
    Oom,
    Exit,
    Both,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum RecordStacks {
    Python,
    All,
}

fn profile_steps(s: &str) -> Result<(u64, u64), String> {
    let bad = || format!("{s:?} is not A:B with 1 <= A <= B (e.g. 3:5)");
    let (a, b) = s.split_once(':').ok_or_else(bad)?;
    let (a, b) = (
        a.trim().parse::<u64>().map_err(|_| bad())?,
        b.trim().parse::<u64>().map_err(|_| bad())?,
    );
    if a == 0 || b < a {
        return Err(bad());
    }
    Ok((a, b))
}

#[derive(clap::Args, Debug)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// The subcommand names, for "did you mean".
pub fn subcommand_names() -> Vec<String> {
    use clap::CommandFactory;
    Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect()
}

/// When the first argument that is not a flag is neither a subcommand nor an existing file but
/// is close to a subcommand's name, the message to print ("did you mean `report`?").
pub fn mistyped_subcommand(args: &[OsString]) -> Option<String> {
    // The first word that is neither a flag nor the value of the one top-level flag that takes
    // one (`--color never`).
    let mut rest = args.iter().skip(1);
    let word = loop {
        let a = rest.next()?;
        let s = a.to_string_lossy();
        if s == "--color" {
            rest.next();
        } else if !s.starts_with('-') {
            break a;
        }
    };
    let word = word.to_str()?;
    let names = subcommand_names();
    if names.iter().any(|n| n == word) || word == "help" || std::path::Path::new(word).exists() {
        return None;
    }
    let (best, d) = names
        .iter()
        .map(|n| (n, edit_distance(word, n)))
        .min_by_key(|(_, d)| *d)?;
    // Close enough to be a typo: at most a third of the name wrong (`reprot`, `analyse`, `chek`).
    (d <= (best.len() / 3).max(1))
        .then(|| format!("`{word}` is neither a subcommand nor a file; did you mean `{best}`?"))
}

/// Levenshtein distance, with a transposition counting as one edit.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

#[derive(clap::Args, Debug)]
pub struct QueryArgs {
    /// Snapshot pickle (optionally .gz) or profiler trace; `-` reads stdin.
    pub file: PathBuf,
    /// SQL to run (several statements separated by `;`), or `.tables`, `.schema [TABLE]`.
    /// Without it: an interactive prompt on a terminal, else statements read from stdin.
    pub sql: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = QueryFormatArg::Table)]
    pub format: QueryFormatArg,
    /// Time for all the SQL given (`60s`, `500ms`, `5m`; `0`: no limit). A query past it
    /// stops with a `limit` error; the rows made before it are written.
    #[arg(long, value_parser = duration, default_value = "60s")]
    pub timeout: std::time::Duration,
    /// Rows one statement may make (`0`: no limit).
    #[arg(long, default_value_t = memscope::query::limits::DEFAULT_ROWS)]
    pub max_rows: u64,
    /// Memory SQLite may use for one query, on top of the tables (sorts, joins, values).
    #[arg(long, value_parser = size, default_value = "1GiB")]
    pub max_memory: u64,
    /// Write CSV cells as they are: no `'` before a cell a spreadsheet would run as a formula
    /// (leading `=`, `+`, `-`, `@`, tab, carriage return).
    #[arg(long)]
    pub csv_raw: bool,
}

/// A duration: a number of seconds, or with a unit (`ms`, `s`, `m`).
fn duration(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else {
        (t, 1.0)
    };
    num.trim()
        .parse::<f64>()
        .ok()
        .map(|v| v * scale)
        .filter(|v| v.is_finite() && *v >= 0.0 && *v < 1e9)
        .map(std::time::Duration::from_secs_f64)
        .ok_or_else(|| format!("{s:?} is not a duration (e.g. 60s, 500ms, 5m, 0 for none)"))
}

/// `memscope query`'s output formats.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueryFormatArg {
    Table,
    Json,
    Csv,
}

#[derive(clap::Args, Debug)]
pub struct McpArgs {
    /// A directory the tools may read under (repeatable). Without one, the working directory;
    /// the client's MCP roots, when it sends them, are added. Tools never read outside the
    /// roots, nor the server's own stdin or stdout.
    #[arg(long = "root", value_name = "DIR")]
    pub roots: Vec<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct WhatifArgs {
    /// Snapshot pickle (optionally .gz) with an allocation history; `-` reads stdin.
    pub file: PathBuf,
    /// Settings to try, as in PYTORCH_CUDA_ALLOC_CONF (overrides the recorded ones), e.g.
    /// `expandable_segments:True,max_split_size_mb:128,garbage_collection_threshold:0.6,roundup_power2_divisions:4`.
    #[arg(long, default_value = "")]
    pub alloc_conf: String,
    /// Memory cap, a size with units like every other limit (`2GiB`, `1536MiB`, `1610612736`);
    /// default: derived from the recorded OOM (or the allocator's retries), else the device's
    /// size where the capture records it (`memscope run` does).
    #[arg(long, value_parser = size)]
    pub cap: Option<u64>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = WhatifFormatArg::Text)]
    pub format: WhatifFormatArg,
}

#[derive(clap::Args, Debug)]
pub struct PlanArgs {
    /// Snapshot pickle (optionally .gz) with an allocation history, recorded at --batch; `-`
    /// reads stdin.
    pub file: PathBuf,
    /// The batch size the capture was recorded at.
    #[arg(long, value_parser = at_most)]
    pub batch: u64,
    /// The sequence length the capture was recorded at (enables `--at BxS`).
    #[arg(long, value_parser = at_most)]
    pub seq: Option<u64>,
    /// Memory cap (reserved memory, as a per-process fraction limits it), a size with units
    /// (`80GiB`); default: derived from the recorded OOM, else the device's size where the
    /// capture records it (`memscope run` does).
    #[arg(long, value_parser = size)]
    pub cap: Option<u64>,
    /// Shapes to predict: a batch size (`64`) or batch x sequence length (`8x4096`); repeatable.
    /// Default: 2, 4 and 8 times the recorded batch.
    #[arg(long, value_parser = shape, value_name = "B[xS]")]
    pub at: Vec<(u64, Option<u64>)>,
    /// Allocator settings to plan for, as in PYTORCH_CUDA_ALLOC_CONF (default: the recorded ones).
    #[arg(long, default_value = "")]
    pub alloc_conf: String,
    /// A second capture of the same program at another batch size (--with-batch) or sequence
    /// length (--with-seq): each request's term is then fitted from its two sizes.
    #[arg(long, value_name = "OTHER")]
    pub with: Option<PathBuf>,
    /// The batch size of the --with capture (default: --batch).
    #[arg(long, requires = "with", value_parser = count)]
    pub with_batch: Option<u64>,
    /// The sequence length of the --with capture (default: --seq).
    #[arg(long, requires = "with", value_parser = count)]
    pub with_seq: Option<u64>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = PlanFormatArg::Text)]
    pub format: PlanFormatArg,
    #[command(flatten)]
    pub color: ColorArg,
    /// More captures of the same program at other batch sizes (repeatable, with one
    /// --also-batch each, after --with): each request's term is fitted from all of them.
    #[arg(long, requires = "with", value_name = "FILE")]
    pub also: Vec<PathBuf>,
    /// The batch size of each --also capture, in order.
    #[arg(long, requires = "also", value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub also_batch: Vec<u64>,
}

/// `memscope plan`'s output formats.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum PlanFormatArg {
    Text,
    Json,
    Html,
}

/// A batch size or sequence length of at most [`memscope::units::MAX_SHAPE`] (0 is left to the
/// plan's own check, which says which one must be at least 1).
fn at_most(s: &str) -> Result<u64, String> {
    s.trim()
        .parse::<u64>()
        .ok()
        .filter(|n| *n <= memscope::units::MAX_SHAPE)
        .ok_or_else(|| {
            format!(
                "{s:?} is not a count from 1 to {} (2^32)",
                memscope::units::MAX_SHAPE
            )
        })
}

/// A batch size or sequence length: 1 to [`memscope::units::MAX_SHAPE`].
fn count(s: &str) -> Result<u64, String> {
    s.trim()
        .parse::<u64>()
        .ok()
        .filter(|n| (1..=memscope::units::MAX_SHAPE).contains(n))
        .ok_or_else(|| {
            format!(
                "{s:?} is not a count from 1 to {} (2^32)",
                memscope::units::MAX_SHAPE
            )
        })
}

fn shape(s: &str) -> Result<(u64, Option<u64>), String> {
    let bad = |e: String| {
        format!("{s:?} is not a batch size (64) or batch x sequence length (8x4096): {e}")
    };
    match s.split_once(['x', 'X']) {
        Some((b, q)) => Ok((at_most(b).map_err(bad)?, Some(at_most(q).map_err(bad)?))),
        None => Ok((at_most(s).map_err(bad)?, None)),
    }
}

#[derive(clap::Args, Debug)]
pub struct TuiArgs {
    /// Snapshot pickle or Chrome trace JSON (either optionally .gz). Several files (or a
    /// directory) of one job, one per rank: the Ranks view.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub ranks: RankPatternArg,
    /// With --batch, a Plan view (snapshots): the predicted peak against the batch size, the cap
    /// and the largest batch that fits.
    #[command(flatten, next_help_heading = "Capacity plan")]
    pub plan: PlanOpts,
}

/// `--batch` and its companions on `report` and `tui`: the capacity plan `memscope plan` makes,
/// added to the page or the views. The same meanings and parsers as `plan`'s.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct PlanOpts {
    /// Add a capacity plan: the batch size the capture was recorded at (as `memscope plan
    /// --batch`).
    #[arg(long, value_parser = at_most)]
    pub batch: Option<u64>,
    /// The sequence length the capture was recorded at (enables `--at BxS`).
    #[arg(long, requires = "batch", value_parser = at_most)]
    pub seq: Option<u64>,
    /// Memory cap (reserved memory, as a per-process fraction limits it), a size with units
    /// (`80GiB`); default: derived from the recorded OOM, else the device's size where the
    /// capture records it (`memscope run` does).
    #[arg(long, value_parser = size, requires = "batch")]
    pub cap: Option<u64>,
    /// Shapes to predict: a batch size (`64`) or batch x sequence length (`8x4096`); repeatable.
    /// Default: 2, 4 and 8 times the recorded batch.
    #[arg(long, value_parser = shape, value_name = "B[xS]", requires = "batch")]
    pub at: Vec<(u64, Option<u64>)>,
}

fn size(s: &str) -> Result<u64, String> {
    memscope::units::parse_bytes(s)
        .ok_or_else(|| format!("{s:?} is not a size (e.g. 8GiB, 512MiB, 1.5GB, 1024)"))
}

fn percent(s: &str) -> Result<f64, String> {
    memscope::check::config::parse_percent(s)
        .ok_or_else(|| format!("{s:?} is not a percentage (e.g. 5%)"))
}

/// An alias, so that clap takes the list as one value (`--fail-on leak,oom`) rather than many.
type FailOnList = Vec<memscope::check::FailOn>;

fn fail_on(s: &str) -> Result<FailOnList, String> {
    memscope::check::FailOn::parse_list(s).map_err(|e| e.to_string())
}

fn nodes(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| format!("{s:?} is not a number of nodes per step"))
}

fn rank_file(s: &str) -> Result<(u32, PathBuf), String> {
    let (n, f) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected N=FILE (e.g. 3=rank3.pickle)"))?;
    let n = n
        .trim()
        .parse()
        .map_err(|_| format!("{n:?} is not a rank number"))?;
    if f.is_empty() {
        return Err(format!("{s:?}: no file after '='"));
    }
    Ok((n, PathBuf::from(f)))
}

#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// Captures to check (snapshots, profiler traces, or summaries written by `memscope
    /// baseline`), or a directory of one job's captures. Files of one kind and run are ranks (numbered by the trace's
    /// `distributedInfo`, the file name, or `--rank`); a snapshot and a trace are checked side by side.
    #[arg(required_unless_present = "rank")]
    pub files: Vec<PathBuf>,
    /// A capture and its rank, `N=FILE` (repeatable): checked as rank N of one run.
    #[arg(long, value_parser = rank_file)]
    pub rank: Vec<(u32, PathBuf)>,
    #[command(flatten)]
    pub ranks: RankPatternArg,
    /// Where the recorded source files lie in this checkout, for GitHub annotations (default:
    /// `$GITHUB_WORKSPACE`, else the current directory; a recorded path is found there by its
    /// longest suffix that exists).
    #[arg(long)]
    pub source_root: Option<PathBuf>,
    /// A prefix to cut off recorded source paths (the capturing machine's checkout),
    /// repeatable; what is left is a path under the source root.
    #[arg(long)]
    pub strip_prefix: Vec<String>,
    /// Compare against a baseline written by `memscope baseline`.
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// Largest allowed peak of allocated memory on any device (e.g. 8GiB).
    #[arg(long, value_parser = size)]
    pub max_peak: Option<u64>,
    /// Largest allowed peak of reserved memory on any device.
    #[arg(long, value_parser = size)]
    pub max_reserved: Option<u64>,
    /// Largest allowed growth per step of any leak finding (e.g. 1MiB).
    #[arg(long, value_parser = size)]
    pub max_growth_per_step: Option<u64>,
    /// Largest allowed autograd graph growth, in nodes per step (profiler traces).
    #[arg(long, value_parser = nodes)]
    pub max_graph_growth: Option<f64>,
    /// Largest allowed imbalance between the ranks' peaks of allocated memory, as its spread:
    /// (highest - lowest) / highest (e.g. 10%; max/min 2.60x is a spread of 61.5%).
    #[arg(long, value_parser = percent)]
    pub max_imbalance: Option<f64>,
    /// Findings that fail the check: leak,oom,fragmentation,graph-growth, or none [default: oom,leak,graph-growth].
    #[arg(long, value_parser = fail_on)]
    pub fail_on: Option<FailOnList>,
    /// Relative tolerance for baseline comparisons [default: 5%].
    #[arg(long, value_parser = percent)]
    pub tolerance: Option<f64>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = CheckFormatArg::Text)]
    pub format: CheckFormatArg,
    /// Settings file [default: memscope.toml in the current directory or the repository root].
    #[arg(long, conflicts_with = "no_config")]
    pub config: Option<PathBuf>,
    /// Ignore memscope.toml.
    #[arg(long)]
    pub no_config: bool,
    #[command(flatten)]
    pub color: ColorArg,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum CheckFormatArg {
    Text,
    Json,
    Junit,
}

#[derive(clap::Args, Debug)]
pub struct BaselineArgs {
    /// Captures to summarize (one per rank).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Where to write the baseline (`-` for stdout).
    #[arg(short, long)]
    pub output: PathBuf,
    /// `json`: one `memscope.baseline/1` document; `jsonl`: one flat line per rank (JSON Lines,
    /// for DuckDB and Polars, and for `check` or `analyze` to reduce) [default: jsonl when -o
    /// ends in .jsonl or .ndjson, else json].
    #[arg(long, value_enum)]
    pub format: Option<BaselineFormat>,
    /// With --format jsonl and one capture: its rank (e.g. `--rank "$SLURM_PROCID"`), where
    /// neither its name nor its content says it.
    #[arg(long)]
    pub rank: Option<u32>,
    #[command(flatten)]
    pub ranks: RankPatternArg,
}

#[derive(clap::Args, Debug)]
pub struct SummarizeArgs {
    /// Captures (one per rank), or directories of them. A file that cannot be read is a row
    /// with its status, not an error.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// The directory the tables go under (`OUT/job=J/step=S/rank=R/<table>.<ext>`).
    #[arg(short, long)]
    pub output: PathBuf,
    /// The tables' file format.
    #[arg(long, value_enum, default_value_t = SummaryFormat::Parquet)]
    pub format: SummaryFormat,
    /// The job the rows belong to (letters, digits, `.`, `_`, `-`).
    #[arg(long, default_value = "job")]
    pub job: String,
    /// The step (or snapshot round) the captures were taken at.
    #[arg(long, default_value = "0")]
    pub step: String,
    /// With one capture: its rank (e.g. `--rank "$SLURM_PROCID"`), over its name or content.
    #[arg(long)]
    pub rank: Option<u32>,
    /// The host the captures were written on, over what they record (`memscope run` records
    /// it).
    #[arg(long)]
    pub host: Option<String>,
    /// A repository root as the capturing host spelled it (`/home/alice/proj`): a site's file
    /// below it is identified by its path below it (`model/train.py`), not its name alone.
    /// May be given several times (one per checkout); the longest that holds a file wins.
    #[arg(long, value_name = "DIR")]
    pub repo_root: Vec<String>,
    /// Also print each capture's rank_summary row on stdout, one JSON object a line.
    #[arg(long)]
    pub rows: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum SummaryFormat {
    Parquet,
    Jsonl,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum BaselineFormat {
    Json,
    Jsonl,
}

/// `--rank-pattern`, on the commands that read several ranks of one job.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct RankPatternArg {
    /// How this job names its ranks' files: a regular expression over each path as given,
    /// whose group `rank` (or else its first group) is the rank, e.g. `node(?P<rank>\d+)/`.
    /// Without it: torchtitan's rank{R}_memory_snapshot, Megatron-LM's oom_rank-{R}_,
    /// Megatron-Bridge's snapshot_{R} and snapshot_oom_rank-{R}, verl's _rank{R}_pid, and
    /// the trace's distributedInfo.
    #[arg(long, value_name = "REGEX")]
    pub rank_pattern: Option<String>,
}

#[derive(clap::Args, Debug)]
pub struct DiffArgs {
    /// The capture or baseline before.
    pub before: PathBuf,
    /// The capture or baseline after.
    pub after: PathBuf,
    /// Output format (`markdown` for `$GITHUB_STEP_SUMMARY`; text written straight into
    /// that file becomes Markdown by itself).
    #[arg(long, value_enum, default_value_t = DiffFormatArg::Text)]
    pub format: DiffFormatArg,
    /// Compare captures that cannot be compared: a snapshot with a trace, or two programs
    /// that share no source file (refused otherwise, exit 2).
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub color: ColorArg,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum DiffFormatArg {
    Text,
    Json,
    Markdown,
}

#[derive(clap::Args, Debug)]
pub struct FlamegraphArgs {
    /// Snapshot pickle or profiler trace JSON (either optionally .gz); `-` reads stdin.
    pub file: PathBuf,
    /// Moment to draw: `end`, `peak`, `oom` or an event index; by default the (last) OOM when
    /// the capture has one, else the end. On a profiler trace: `peak` (the default) or `end`.
    #[arg(long, conflicts_with = "step")]
    pub at: Option<String>,
    /// The live memory at a step's peak: on a profiler trace, `ProfilerStep#N`'s; on a snapshot,
    /// the peak of the analysis's step N (`step N` in `analyze`; the log must cover it).
    #[arg(long, value_name = "N")]
    pub step: Option<u64>,
    /// How to group frames.
    #[arg(long, value_enum, default_value_t = FlameBy::Stack)]
    pub by: FlameBy,
    /// Device index (default: the device with an OOM, else the first).
    #[arg(long)]
    pub device: Option<u32>,
    /// Write folded stacks (`frame;frame;frame bytes`, outermost first) instead of SVG.
    #[arg(long)]
    pub folded: bool,
    /// Output file (`-` for stdout).
    #[arg(short, long)]
    pub output: PathBuf,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum FlameBy {
    Stack,
    Site,
    Category,
}

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// Snapshot pickle or profiler trace JSON (either optionally .gz); `-` reads stdin. Several captures (or a directory, or
    /// rank summaries) of one job, one per rank: a page of the job's ranks.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub ranks: RankPatternArg,
    /// Output HTML file (`-` for stdout).
    #[arg(short, long)]
    pub output: PathBuf,
    /// With --batch, a "Capacity plan" section: the predicted peak against the batch size, the
    /// cap and the largest batch that fits.
    #[command(flatten, next_help_heading = "Capacity plan")]
    pub plan: PlanOpts,
}

#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    /// Snapshot pickle, or profiler trace JSON to annotate with memscope's findings (either
    /// optionally .gz); `-` reads stdin.
    pub file: PathBuf,
    #[arg(long, value_enum, default_value_t = ExportFormat::Perfetto)]
    pub format: ExportFormat,
    /// Output file (`-` for stdout).
    #[arg(short, long)]
    pub output: PathBuf,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum ExportFormat {
    /// Chrome trace event JSON, as Perfetto's UI and chrome://tracing read it.
    Perfetto,
}

#[derive(clap::Args, Debug)]
pub struct AnalyzeArgs {
    /// Snapshot pickle or Chrome trace JSON (either optionally .gz); `-` reads stdin. Several
    /// files of one job, one per rank (or a directory of them, or rank summaries written by
    /// `memscope baseline --format jsonl`): the job's per-rank table, imbalance and the sites
    /// that differ between the highest and the lowest rank.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub ranks: RankPatternArg,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
    /// Print the full stack under each site (snapshots).
    #[arg(long)]
    pub stacks: bool,
    #[command(flatten)]
    pub color: ColorArg,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum OutputFormat {
    Text,
    Json,
}

/// `whatif --format`: its own, so that a format added to `analyze` is not asked of `whatif`.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum WhatifFormatArg {
    Text,
    Json,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

impl ColorChoice {
    pub fn enabled(self) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                    && std::io::stdout().is_terminal()
            }
        }
    }
}
