//! The `memscope` binary: parse arguments, run, map the outcome to an exit code.
//!
//! Exit codes: 0 ok, 1 a check failed, 2 an error. A closed pipe (`memscope ... | head`) is
//! not an error.

mod cli;

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;

use cli::{AnalyzeArgs, Cli, Command, OutputFormat};
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
    e.chain()
        .any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
}

fn run(cli: Cli) -> anyhow::Result<u8> {
    let color = cli.color.enabled();
    match cli.command {
        Some(Command::Analyze(args)) => analyze(&args, color),
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

fn analyze(args: &AnalyzeArgs, color: bool) -> anyhow::Result<u8> {
    let file_len = std::fs::metadata(&args.file).map(|m| m.len()).unwrap_or(0);
    let snap = memscope::load::load_snapshot(&args.file)?;
    let analysis = memscope::analysis::analyze_snapshot(&snap, &args.file, file_len);
    let opts = report::Options { color, stacks: args.stacks };
    let fmt: &dyn Format = match args.format {
        OutputFormat::Text => &report::text::Text,
        OutputFormat::Json => &report::json::Json,
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    fmt.render(&analysis, &opts, &mut out).context("writing the report")?;
    out.flush().context("writing the report")?;
    Ok(0)
}
