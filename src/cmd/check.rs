//! `memscope check`: the CI gate over captures and summaries, with its formats and GitHub annotations.

use std::path::PathBuf;

use anyhow::Context;

use crate::cmd::cli::{CheckArgs, CheckFormatArg};
use crate::cmd::output::{self, Stdout};
use crate::cmd::session::Session;
use memscope::check::{Baseline, CheckConfig, CheckReport};
use memscope::report::envelope::{ErrorKind, InEnvelope, InputKind, Refused, Role};
use memscope::report::{self, Render};

/// The one place `check` turns `--format` into a format of the check report.
fn format<'a>(
    f: CheckFormatArg,
    answer: &'a InEnvelope<'a>,
) -> (&'a dyn Render<CheckReport>, Stdout) {
    match f {
        CheckFormatArg::Text => (&report::check::CheckText, Stdout::Term),
        CheckFormatArg::Json => (answer, Stdout::Answer),
        CheckFormatArg::Junit => (&report::check::Junit, Stdout::Plain),
    }
}

pub(crate) fn check(args: &CheckArgs, color: bool, s: &mut Session) -> anyhow::Result<u8> {
    let cfg = config(args, s)?;
    let base = baseline(&cfg, s)?;
    let (paths, explicit) = ranked_paths(args)?;
    let (summaries, explicit) = crate::cmd::load_with_progress(&paths, &explicit, s)?;
    let report = memscope::check::check(
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
        let answer = s.envelope();
        let (fmt, sink) = format(args.format, &answer);
        let written = output::to_stdout(fmt, sink, &report, &opts, "writing the check report");
        // A closed pipe (`memscope check ... | head`) cuts the report, not the verdict: a failed
        // check still exits 1, and the annotations below are still written.
        if let Err(e) = written {
            if !crate::cmd::is_broken_pipe(&e) {
                return Err(e);
            }
        }
    }
    if std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true") {
        github(args, &report)?;
    }
    Ok(if report.passed { 0 } else { 1 })
}

/// The gate's configuration: the flags over the config file (`--config`, or the one found from
/// the working directory unless `--no-config`). A gate that checks nothing is refused.
fn config(args: &CheckArgs, s: &mut Session) -> anyhow::Result<CheckConfig> {
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
        (None, false) => memscope::check::config::find_config(&std::env::current_dir()?),
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
    Ok(cfg)
}

/// The baseline the configuration names, read and parsed, with the path it is reported under.
fn baseline(cfg: &CheckConfig, s: &mut Session) -> anyhow::Result<Option<(String, Baseline)>> {
    let Some(p) = &cfg.baseline else {
        return Ok(None);
    };
    s.given(p, Role::Baseline);
    let input = memscope::load::read_input(p)?;
    let text = std::str::from_utf8(&input).map_err(|_| {
        Refused::new(
            ErrorKind::Baseline,
            format!("{}: the baseline is not UTF-8 JSON", p.display()),
        )
    })?;
    let b = Baseline::from_json(text).map_err(|err| memscope::inputs::InputError::Baseline {
        path: p.clone(),
        err,
    })?;
    s.found(p, InputKind::Baseline);
    Ok(Some((p.display().to_string(), b)))
}

/// Positional files (a directory stands for the captures under it, as `analyze` reads a rank
/// directory), then `--rank N=FILE`s, each with its explicit rank if any; `--rank-pattern`
/// numbers the rest (`--rank` wins). Summaries (baseline files) give their entries later.
fn ranked_paths(args: &CheckArgs) -> anyhow::Result<(Vec<PathBuf>, Vec<Option<u32>>)> {
    let mut paths: Vec<PathBuf> = Vec::with_capacity(args.files.len());
    for f in &args.files {
        // As `analyze`: a directory without a capture under it stays one input, refused as
        // a directory.
        let one = std::slice::from_ref(f);
        if f.is_dir() && crate::cmd::job::is_job(one) {
            paths.extend(crate::cmd::job::expand(one)?);
        } else {
            paths.push(f.clone());
        }
    }
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
    if let Some(p) = crate::cmd::job::pattern(&args.ranks)? {
        for (path, n) in paths.iter().zip(explicit.iter_mut()) {
            if n.is_none() {
                *n = p.rank(&path.display().to_string()).map(|r| r.rank);
            }
        }
    }
    Ok((paths, explicit))
}

/// Under GitHub Actions: annotations on stderr, and the job summary appended to
/// `$GITHUB_STEP_SUMMARY` when it is set.
fn github(args: &CheckArgs, report: &CheckReport) -> anyhow::Result<()> {
    let plain = report::Options::default();
    let mut err = std::io::stderr().lock();
    report::check::GithubAnnotations {
        paths: memscope::check::paths::PathMap::from_env(
            args.source_root.clone(),
            args.strip_prefix.clone(),
        ),
    }
    .render(report, &plain, &mut err)
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
            .render(report, &plain, &mut f)
            .context("writing the job summary")?;
    }
    Ok(())
}
