//! Command-line interface: the only place that knows about clap.

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser, Debug)]
#[command(
    name = "memscope",
    version,
    about = "Offline forensics of PyTorch GPU memory: why the OOM, what leaks, which line"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// A capture to analyse (same as `memscope analyze FILE`).
    pub file: Option<PathBuf>,
    /// When to colour the output.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, global = true)]
    pub color: ColorChoice,
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
    /// What changed between two captures, or a capture and a baseline: peaks, sites, steps.
    Diff(DiffArgs),
    /// Draw live memory as a flamegraph (bytes, not samples): SVG, or folded stacks.
    Flamegraph(FlamegraphArgs),
    /// Write one self-contained HTML report (verdict, chart, allocator map, sites, leaks, flamegraph).
    Report(ReportArgs),
    /// Export the snapshot's timeline for another viewer (Perfetto / Chrome trace JSON).
    Export(ExportArgs),
    /// Explore a snapshot interactively in the terminal.
    Tui(TuiArgs),
    /// Replay a snapshot's requests through a model of the caching allocator under other settings.
    Whatif(WhatifArgs),
}

#[derive(clap::Args, Debug)]
pub struct WhatifArgs {
    /// Snapshot pickle (optionally .gz) with an allocation history.
    pub file: PathBuf,
    /// Settings to try, as in PYTORCH_CUDA_ALLOC_CONF (overrides the recorded ones), e.g.
    /// `expandable_segments:True,max_split_size_mb:128,garbage_collection_threshold:0.6,roundup_power2_divisions:4`.
    #[arg(long, default_value = "")]
    pub alloc_conf: String,
    /// Memory cap in bytes (default: `cap_bytes` of FILE's .meta.json, else derived from the recorded OOM).
    #[arg(long)]
    pub cap: Option<u64>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
}

#[derive(clap::Args, Debug)]
pub struct TuiArgs {
    /// Snapshot pickle (optionally .gz).
    pub file: PathBuf,
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
    memscope::check::FailOn::parse_list(s)
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
    /// baseline`). Files of one kind and run are ranks (numbered by the trace's
    /// `distributedInfo`, the file name, or `--rank`); a snapshot and a trace are checked side by side.
    #[arg(required_unless_present = "rank")]
    pub files: Vec<PathBuf>,
    /// A capture and its rank, `N=FILE` (repeatable): checked as rank N of one run.
    #[arg(long, value_parser = rank_file)]
    pub rank: Vec<(u32, PathBuf)>,
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
    /// Largest allowed imbalance between the ranks' peaks (e.g. 10%).
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
}

#[derive(clap::Args, Debug)]
pub struct DiffArgs {
    /// The capture or baseline before.
    pub before: PathBuf,
    /// The capture or baseline after.
    pub after: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
}

#[derive(clap::Args, Debug)]
pub struct FlamegraphArgs {
    /// Snapshot pickle (optionally .gz).
    pub file: PathBuf,
    /// Moment to draw: `end`, `peak`, `oom` or an event index.
    #[arg(long, default_value = "end")]
    pub at: String,
    /// How to group frames.
    #[arg(long, value_enum, default_value_t = FlameBy::Stack)]
    pub by: FlameBy,
    /// Device index (default: the device with an OOM, else the first).
    #[arg(long)]
    pub device: Option<u32>,
    /// Write folded stacks (`frame;frame;frame bytes`, outermost first) instead of SVG.
    #[arg(long)]
    pub folded: bool,
    /// Output file.
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
    /// Snapshot pickle (optionally .gz).
    pub file: PathBuf,
    /// Output HTML file.
    #[arg(short, long)]
    pub output: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    /// Snapshot pickle (optionally .gz).
    pub file: PathBuf,
    #[arg(long, value_enum, default_value_t = ExportFormat::Perfetto)]
    pub format: ExportFormat,
    /// Output file.
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
    /// Snapshot pickle or Chrome trace JSON (either optionally .gz).
    pub file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
    /// Print the full stack under each site.
    #[arg(long)]
    pub stacks: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum OutputFormat {
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
