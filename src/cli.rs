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
