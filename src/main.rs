//! The `memscope` binary: parse arguments, run, map the outcome to an exit code.
//!
//! Exit codes: 0 ok, 1 a check failed, 2 an error. A closed pipe (`memscope ... | head`) is
//! not an error.

mod cli;
mod job_cmd;
mod man;
mod mcp_cmd;
mod output;
mod pictures;
mod plan_cmd;
mod query_cmd;
mod run_cmd;
mod session;

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;

use cli::{
    AnalyzeArgs, BaselineArgs, CheckArgs, CheckFormatArg, Cli, Command, DiffArgs, DiffFormatArg,
    OutputFormat, WhatifArgs,
};
use memscope::load::Capture;
use memscope::report::envelope::{ErrorKind, InputKind, Refused, Role};
use memscope::report::{self, Format};
use session::Session;

fn main() -> ExitCode {
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
            if is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            output::eprint_term(&format!("memscope: error: {e:#}"));
            session.fail(&e);
            ExitCode::from(2)
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    use std::io::ErrorKind::BrokenPipe;
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == BrokenPipe)
            || c.downcast_ref::<serde_json::Error>()
                .is_some_and(|j| j.io_error_kind() == Some(BrokenPipe))
    })
}

fn run(cli: Cli, s: &mut Session) -> anyhow::Result<u8> {
    match cli.command {
        Some(Command::Analyze(args)) => analyze(&args, args.color.enabled(), s),
        Some(Command::Check(args)) => check(&args, args.color.enabled(), s),
        Some(Command::Baseline(args)) => baseline(&args),
        Some(Command::Diff(args)) => diff(&args, args.color.enabled(), s),
        Some(Command::Flamegraph(a)) => pictures::flamegraph(&a),
        Some(Command::Report(a)) => pictures::report(&a),
        Some(Command::Export(a)) => pictures::export(&a),
        Some(Command::Tui(args)) => tui(&args.files, &args.ranks, &args.plan),
        Some(Command::Whatif(args)) => whatif(&args, s),
        Some(Command::Plan(args)) => plan_cmd::plan(&args, s),
        Some(Command::Query(args)) => query_cmd::query(&args, s),
        Some(Command::Mcp(args)) => mcp_cmd::mcp(&args),
        Some(Command::Run(args)) => run_cmd::run(&args),
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
                tui(&[file], &Default::default(), &Default::default())
            }
            Some(file) => analyze(
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

fn whatif(args: &WhatifArgs, s: &mut Session) -> anyhow::Result<u8> {
    use memscope::analysis::whatif;
    let conf = whatif::parse_alloc_conf(&args.alloc_conf).context("--alloc-conf")?;
    let snap = memscope::load::load_snapshot(&args.file)?;
    s.found(&args.file, InputKind::Snapshot);
    let cap = args.cap.map(|c| whatif::CapInfo {
        bytes: Some(c),
        source: whatif::CapSource::Given,
        range: None,
    });
    let w = whatif::what_if(&snap, &conf, cap, None)
        .with_context(|| format!("{}", args.file.display()))?;
    match args.format {
        OutputFormat::Text => {
            let mut out = output::term_stdout(false);
            write!(out, "{}", memscope::report::whatif::render_text(&w))?;
            out.flush().context("writing the report")?;
        }
        OutputFormat::Json => {
            let file = args.file.display().to_string();
            s.answer(&memscope::report::whatif::document(&file, &w))?;
        }
    }
    Ok(0)
}

fn tui(
    files: &[std::path::PathBuf],
    ranks: &cli::RankPatternArg,
    plan: &cli::PlanOpts,
) -> anyhow::Result<u8> {
    if job_cmd::is_job(files) {
        return job_cmd::tui(files, ranks, plan);
    }
    let file = files[0].as_path();
    // `--batch`: the plan's arguments are checked here, on the normal terminal.
    let plan = pictures::plan_ask(plan)?;
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

fn analyze(args: &AnalyzeArgs, color: bool, s: &mut Session) -> anyhow::Result<u8> {
    if job_cmd::is_job(&args.files) {
        return job_cmd::analyze(args, color, s);
    }
    let file = &args.files[0];
    let progress = memscope::load::Progress::default();
    let capture = memscope::load::load_with_progress(file, &progress)?;
    // As stored: a pipe's bytes count too.
    let file_len = progress.stored.load(std::sync::atomic::Ordering::Relaxed) as u64;
    let kind = match capture {
        Capture::Snapshot(_) => InputKind::Snapshot,
        Capture::Trace(_) => InputKind::Trace,
    };
    s.found(file, kind);
    s.sized(file, file_len);
    if args.stacks && kind == InputKind::Trace {
        s.note("--stacks does nothing for a profiler trace (its sites come without stacks)".into());
    }
    let analysis = match &capture {
        Capture::Snapshot(snap) => {
            memscope::analysis::analyze_snapshot(snap, file, file_len).analysis
        }
        Capture::Trace(trace) => memscope::analysis::analyze_trace(trace, file, file_len),
    };
    // The process ends right after the report: freeing a million-event model piece by piece
    // would only delay the exit.
    std::mem::forget(capture);
    let opts = report::Options {
        color,
        stacks: args.stacks,
    };
    match args.format {
        OutputFormat::Text => {
            let mut out = output::term_stdout(color);
            report::text::Text
                .render(&analysis, &opts, &mut out)
                .context("writing the report")?;
            out.flush().context("writing the report")?;
        }
        OutputFormat::Json => s.answer(&report::json::data(&analysis))?,
    }
    std::mem::forget(analysis);
    Ok(0)
}

/// Loads several captures on every core, with a progress line on stderr when stderr is a
/// terminal and the work takes more than half a second (64 rank traces, say).
/// Summaries (files written by `memscope baseline`) are accepted wherever captures are.
/// Returns the summaries and, for each, its `--rank` from `explicit` (one per file).
type Ranked = (Vec<memscope::check::InputSummary>, Vec<Option<u32>>);
pub(crate) fn load_with_progress(
    files: &[std::path::PathBuf],
    explicit: &[Option<u32>],
    s: &mut Session,
) -> Result<Ranked, memscope::inputs::InputError> {
    use std::io::IsTerminal;
    let start = std::time::Instant::now();
    let show = files.len() > 1 && std::io::stderr().is_terminal();
    let total = files.len();
    let progress = |done: usize| {
        if show && start.elapsed() > std::time::Duration::from_millis(500) {
            eprint!(
                "\rmemscope: {done}/{total} files analysed ({:.1} s)",
                start.elapsed().as_secs_f64()
            );
        }
    };
    let r = memscope::inputs::load_summaries_per_file(files, true, &progress);
    if show && start.elapsed() > std::time::Duration::from_millis(500) {
        eprint!("\r\x1b[2K");
    }
    // A summary file's entries keep their own ranks; `--rank` applies to a one-entry file.
    let mut out = Vec::new();
    let mut ranks = Vec::new();
    for ((v, r), file) in r?.into_iter().zip(explicit).zip(files) {
        s.found(file, file_kind(file, &v));
        let one = v.len() == 1;
        if let (Some(n), false) = (r, one) {
            s.note(format!(
                "--rank {n}={} does nothing: that summary holds {} inputs, which keep their own ranks",
                file.display(),
                v.len()
            ));
        }
        for s in v {
            ranks.push(r.filter(|_| one));
            out.push(s);
        }
    }
    Ok((out, ranks))
}

/// What a file given to `check` or `diff` was, from what it gave: a capture's one summary
/// carries the path as given, a baseline file's entries their stored paths.
fn file_kind(file: &std::path::Path, v: &[memscope::check::InputSummary]) -> InputKind {
    match v {
        [one] if one.path == file.display().to_string() => match one.kind {
            memscope::analysis::CaptureKind::Snapshot => InputKind::Snapshot,
            memscope::analysis::CaptureKind::Trace => InputKind::Trace,
        },
        _ => InputKind::Baseline,
    }
}

fn check(args: &CheckArgs, color: bool, s: &mut Session) -> anyhow::Result<u8> {
    use memscope::check::{self, config, CheckConfig};
    use memscope::report::check::CheckFormat;
    let flags = CheckConfig {
        baseline: args.baseline.clone(),
        max_peak: args.max_peak,
        max_reserved: args.max_reserved,
        max_growth_per_step: args.max_growth_per_step,
        max_graph_growth: args.max_graph_growth,
        max_imbalance: args.max_imbalance,
        fail_on: args.fail_on.clone(),
        tolerance: args.tolerance,
    };
    let config_path = match (&args.config, args.no_config) {
        (_, true) => None,
        (Some(p), false) => Some(p.clone()),
        (None, false) => config::find_config(&std::env::current_dir()?),
    };
    if let Some(p) = &config_path {
        s.given(p, Role::Config);
    }
    let file_cfg = match &config_path {
        Some(p) => CheckConfig::from_file(p)?,
        None => CheckConfig::default(),
    };
    if let Some(p) = &config_path {
        s.found(p, InputKind::Config);
    }
    let cfg = flags.or(file_cfg);
    // A gate that checks nothing would always pass: an error, naming where that came from.
    if cfg.checks_nothing() {
        let from = match (&args.fail_on, &config_path) {
            (Some(_), _) | (_, None) => "--fail-on none".to_owned(),
            (None, Some(p)) => p.display().to_string(),
        };
        return Err(Refused::new(
            ErrorKind::Usage,
            format!(
                "{from}: no rule to check (fail-on is empty and no limit or baseline is set); memscope check would pass anything"
            ),
        )
        .into());
    }
    let base = match &cfg.baseline {
        Some(p) => {
            s.given(p, Role::Baseline);
            let input = memscope::load::read_input(p)?;
            let text = std::str::from_utf8(&input).map_err(|_| {
                Refused::new(
                    ErrorKind::Baseline,
                    format!("{}: the baseline is not UTF-8 JSON", p.display()),
                )
            })?;
            let b = check::Baseline::from_json(text).map_err(|err| {
                memscope::inputs::InputError::Baseline {
                    path: p.clone(),
                    err,
                }
            })?;
            s.found(p, InputKind::Baseline);
            Some((p.display().to_string(), b))
        }
        None => None,
    };
    // Positional files, then `--rank N=FILE`s; summaries (baseline files) give their entries.
    let mut paths: Vec<std::path::PathBuf> = args.files.clone();
    let mut explicit: Vec<Option<u32>> = vec![None; paths.len()];
    for (n, f) in &args.rank {
        match paths.iter().position(|p| p == f) {
            Some(i) => explicit[i] = Some(*n),
            None => {
                paths.push(f.clone());
                explicit.push(Some(*n));
            }
        }
    }
    // `--rank-pattern`: the files it numbers are ranks of one run (`--rank` wins).
    if let Some(p) = job_cmd::pattern(&args.ranks)? {
        for (path, n) in paths.iter().zip(explicit.iter_mut()) {
            if n.is_none() {
                *n = p.rank(&path.display().to_string()).map(|r| r.rank);
            }
        }
    }
    let (summaries, explicit) = load_with_progress(&paths, &explicit, s)?;
    let report = check::check(
        &summaries,
        &explicit,
        &cfg,
        base.as_ref().map(|(p, b)| (p.as_str(), b)),
    )?;
    let opts = report::Options {
        color,
        stacks: false,
    };
    {
        let written = match args.format {
            CheckFormatArg::Json => s.answer(&report),
            CheckFormatArg::Text | CheckFormatArg::Junit => {
                let (fmt, mut out): (&dyn CheckFormat, Box<dyn Write>) = match args.format {
                    CheckFormatArg::Text => (
                        &report::check::CheckText,
                        Box::new(output::term_stdout(color)),
                    ),
                    _ => (
                        &report::check::Junit,
                        Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
                    ),
                };
                fmt.render(&report, &opts, &mut out)
                    .and_then(|()| out.flush())
                    .context("writing the check report")
            }
        };
        // A closed pipe (`memscope check ... | head`) cuts the report, not the verdict: a failed
        // check still exits 1, and the annotations below are still written.
        if let Err(e) = written {
            if !is_broken_pipe(&e) {
                return Err(e);
            }
        }
    }
    if std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true") {
        let plain = report::Options::default();
        let mut err = std::io::stderr().lock();
        report::check::GithubAnnotations {
            paths: memscope::check::paths::PathMap::from_env(
                args.source_root.clone(),
                args.strip_prefix.clone(),
            ),
        }
        .render(&report, &plain, &mut err)
        .context("writing annotations")?;
        if let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) {
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(&path)
                .with_context(|| {
                    format!(
                        "{}: cannot append the job summary",
                        std::path::Path::new(&path).display()
                    )
                })?;
            report::check::GithubSummary
                .render(&report, &plain, &mut f)
                .context("writing the job summary")?;
        }
    }
    Ok(if report.passed { 0 } else { 1 })
}

/// The baseline file is `memscope.baseline/1` itself, not an envelope: it is data that is
/// committed and read back (docs/json.md says why).
fn baseline(args: &BaselineArgs) -> anyhow::Result<u8> {
    if job_cmd::wants_lines(args) {
        return job_cmd::baseline_lines(args);
    }
    if let Some(n) = args.rank {
        anyhow::bail!("--rank {n} numbers a rank line: it goes with --format jsonl");
    }
    if args.ranks.rank_pattern.is_some() {
        anyhow::bail!("--rank-pattern numbers rank lines: it goes with --format jsonl");
    }
    let mut quiet = Session::default();
    let (mut summaries, _) =
        load_with_progress(&args.files, &vec![None; args.files.len()], &mut quiet)?;
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

/// True when stdout is the file `$GITHUB_STEP_SUMMARY` names (`memscope diff ... >>
/// "$GITHUB_STEP_SUMMARY"`): the text there is read as Markdown, so it is written as Markdown.
fn stdout_is_step_summary() -> bool {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) else {
        return false;
    };
    let (Ok(fd), Ok(want)) = (
        std::io::stdout().as_fd().try_clone_to_owned(),
        std::fs::metadata(path),
    ) else {
        return false;
    };
    std::fs::File::from(fd)
        .metadata()
        .is_ok_and(|m| m.dev() == want.dev() && m.ino() == want.ino())
}

fn diff(args: &DiffArgs, color: bool, s: &mut Session) -> anyhow::Result<u8> {
    use memscope::report::check::DiffFormat;
    let mut one = |p: &std::path::Path| -> anyhow::Result<memscope::check::InputSummary> {
        let mut v = memscope::inputs::load_summaries(&[p], true)?;
        s.found(p, file_kind(p, &v));
        match v.len() {
            1 => Ok(v.remove(0)),
            0 => Err(Refused::new(
                ErrorKind::Baseline,
                format!("{}: the baseline holds no inputs", p.display()),
            )
            .into()),
            n => Err(Refused::new(
                ErrorKind::Usage,
                format!(
                    "{}: the baseline holds {n} inputs; diff compares one capture with one",
                    p.display()
                ),
            )
            .into()),
        }
    };
    let before = one(&args.before)?;
    let after = one(&args.after)?;
    if !args.force {
        memscope::check::diff::comparable(&before, &after).with_context(|| {
            format!(
                "cannot compare {} with {}",
                args.before.display(),
                args.after.display()
            )
        })?;
    }
    let mut d = memscope::check::diff::diff(&before, &after);
    // The inputs as given on the command line (a baseline's entry keeps its stored path).
    d.before = args.before.display().to_string();
    d.after = args.after.display().to_string();
    let opts = report::Options {
        color,
        stacks: false,
    };
    let format = match args.format {
        DiffFormatArg::Text if stdout_is_step_summary() => DiffFormatArg::Markdown,
        f => f,
    };
    let (fmt, mut out): (&dyn DiffFormat, Box<dyn Write>) = match format {
        DiffFormatArg::Json => {
            s.answer(&d)?;
            return Ok(0);
        }
        DiffFormatArg::Text => (
            &report::check::DiffText,
            Box::new(output::term_stdout(color)),
        ),
        DiffFormatArg::Markdown => (
            &report::check::DiffMarkdown,
            Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
        ),
    };
    fmt.render(&d, &opts, &mut out)
        .context("writing the diff")?;
    out.flush().context("writing the diff")?;
    Ok(0)
}
