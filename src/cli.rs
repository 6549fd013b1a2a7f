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
    /// Explain a memory snapshot (`torch.cuda.memory._dump_snapshot`): figures, OOM cause, sites.
    Analyze(AnalyzeArgs),
    /// Draw live memory as a flamegraph (bytes, not samples): SVG, or folded stacks.
    Flamegraph(FlamegraphArgs),
    /// Write one self-contained HTML report (verdict, chart, allocator map, sites, leaks, flamegraph).
    Report(ReportArgs),
    /// Export the snapshot's timeline for another viewer (Perfetto / Chrome trace JSON).
    Export(ExportArgs),
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
    /// Snapshot pickle (optionally .gz).
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
