//! The `memscope` binary: parse arguments, run, map the outcome to an exit code.
//!
//! Exit codes: 0 ok, 1 a check failed, 2 an error. A closed pipe (`memscope ... | head`) is
//! not an error.

mod cmd;

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;

use cmd::cli::{self, AnalyzeArgs, Cli, Command, OutputFormat};
use cmd::session::{self, Session};
use cmd::{
    analyze, baseline, check, diff, man, mcp, output, pictures, plan, query, run, summarize, tui,
    whatif,
};

fn main() -> ExitCode {
    memscope::arenas::cap();
    memscope::signals::install();
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(msg) = cli::mistyped_subcommand(&args) {
        eprintln!("memscope: error: {msg}");
        return ExitCode::from(2);
    }
    let cli = match Cli::try_parse_from(&args) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            if e.use_stderr() {
                session::refused_line(&args, &e);
            }
            return ExitCode::from(code);
        }
    };
    let mut session = Session::of(&cli);
    match run(cli, &mut session) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            if cmd::is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            output::eprint_term(&format!("memscope: error: {e:#}"));
            session.fail(&e);
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli, s: &mut Session) -> anyhow::Result<u8> {
    match cli.command {
        Some(Command::Analyze(args)) => analyze::analyze(&args, args.color.enabled(), s),
        Some(Command::Check(args)) => check::check(&args, args.color.enabled(), s),
        Some(Command::Baseline(args)) => baseline::baseline(&args),
        Some(Command::Summarize(args)) => summarize::summarize(&args),
        Some(Command::Diff(args)) => diff::diff(&args, args.color.enabled(), s),
        Some(Command::Flamegraph(a)) => pictures::flamegraph(&a),
        Some(Command::Report(a)) => pictures::report(&a),
        Some(Command::Export(a)) => pictures::export(&a),
        Some(Command::Tui(args)) => tui::tui(&args.files, &args.ranks, &args.plan),
        Some(Command::Whatif(args)) => whatif::whatif(&args, s),
        Some(Command::Plan(args)) => plan::plan(&args, s),
        Some(Command::Query(args)) => query::query(&args, s),
        Some(Command::Mcp(args)) => mcp::mcp(&args),
        Some(Command::Run(args)) => run::run(&args),
        Some(Command::Completions(args)) => {
            use clap::CommandFactory;
            // Into memory first: clap_complete panics on a write error (a closed pipe).
            let mut text = Vec::new();
            clap_complete::generate(args.shell, &mut Cli::command(), "memscope", &mut text);
            let mut out = std::io::stdout().lock();
            out.write_all(&text).context("writing the completions")?;
            out.flush().context("writing the completions")?;
            Ok(0)
        }
        Some(Command::Man(args)) => man::run(&args),
        None => match cli.file {
            Some(file) if std::io::stdout().is_terminal() => {
                tui::tui(&[file], &Default::default(), &Default::default())
            }
            Some(file) => analyze::analyze(
                &AnalyzeArgs {
                    files: vec![file],
                    ranks: Default::default(),
                    format: OutputFormat::Text,
                    stacks: false,
                    color: cli.color,
                },
                cli.color.enabled(),
                s,
            ),
            None => {
                use clap::CommandFactory;
                Cli::command().print_help()?;
                Ok(2)
            }
        },
    }
}
