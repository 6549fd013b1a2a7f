//! The `memscope` binary: parse arguments, run, map the outcome to an exit code.
//!
//! Exit codes: 0 ok, 1 a check failed, 2 an error. A closed pipe (`memscope ... | head`) is
//! not an error.

mod cli;

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;

use cli::{AnalyzeArgs, Cli, Command, OutputFormat, WhatifArgs};
use memscope::load::Capture;
use memscope::report::{self, Format};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            if is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            eprintln!("memscope: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn run(cli: Cli) -> anyhow::Result<u8> {
    let color = cli.color.enabled();
    match cli.command {
        Some(Command::Analyze(args)) => analyze(&args, color),
        Some(Command::Whatif(args)) => whatif(&args),
        None => match cli.file {
            Some(file) => analyze(
                &AnalyzeArgs {
                    file,
                    format: OutputFormat::Text,
                    stacks: false,
                },
                color,
            ),
            None => {
                use clap::CommandFactory;
                Cli::command().print_help()?;
                Ok(2)
            }
        },
    }
}

fn whatif(args: &WhatifArgs) -> anyhow::Result<u8> {
    use memscope::analysis::whatif;
    let conf = whatif::parse_alloc_conf(&args.alloc_conf)
        .map_err(|e| anyhow::anyhow!("--alloc-conf: {e}"))?;
    let snap = memscope::load::load_snapshot(&args.file)?;
    // A capture made by fixtures/generate.py records its cap and GPU beside it.
    let name = args.file.to_string_lossy();
    let stem = name.strip_suffix(".gz").unwrap_or(&name);
    let meta: Option<serde_json::Value> = std::fs::read_to_string(format!(
        "{}.meta.json",
        stem.strip_suffix(".pickle").unwrap_or(stem)
    ))
    .ok()
    .and_then(|t| serde_json::from_str(&t).ok());
    let field = |k: &str| {
        meta.as_ref()
            .and_then(|m| m.get(k))
            .and_then(|v| v.as_u64())
    };
    let cap = match (args.cap, field("cap_bytes")) {
        (Some(c), _) => Some(whatif::CapInfo {
            bytes: Some(c),
            source: "given (--cap)".into(),
            range: None,
        }),
        (None, Some(c)) => Some(whatif::CapInfo {
            bytes: Some(c),
            source: "meta.json".into(),
            range: None,
        }),
        _ => None,
    };
    let w = whatif::what_if(&snap, &conf, cap, field("gpu_total_memory"))
        .with_context(|| format!("{}", args.file.display()))?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match args.format {
        OutputFormat::Text => write!(out, "{}", whatif::render_text(&w))?,
        OutputFormat::Json => writeln!(out, "{}", serde_json::to_string_pretty(&w)?)?,
    }
    out.flush().context("writing the report")?;
    Ok(0)
}

fn analyze(args: &AnalyzeArgs, color: bool) -> anyhow::Result<u8> {
    let file_len = std::fs::metadata(&args.file).map(|m| m.len()).unwrap_or(0);
    let analysis = match memscope::load::load(&args.file)? {
        Capture::Snapshot(snap) => {
            memscope::analysis::analyze_snapshot(&snap, &args.file, file_len)
        }
        Capture::Trace(trace) => memscope::analysis::analyze_trace(&trace, &args.file, file_len),
    };
    let opts = report::Options {
        color,
        stacks: args.stacks,
    };
    let fmt: &dyn Format = match args.format {
        OutputFormat::Text => &report::text::Text,
        OutputFormat::Json => &report::json::Json,
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    fmt.render(&analysis, &opts, &mut out)
        .context("writing the report")?;
    out.flush().context("writing the report")?;
    Ok(0)
}
