//! The job view's commands: `analyze`, `report` and `tui` given several captures of one job
//! (one per rank, or a directory of them, or rank summaries), and `baseline --format jsonl`.
//!
//! One file keeps the one-capture commands exactly as they were; the job view starts at two
//! files, a directory, or one file of rank lines (`.jsonl`, `.ndjson`).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use memscope::check::InputSummary;
use memscope::job::{self, Job, Member};
use memscope::rank_name::RankPattern;
use memscope::report::envelope::{InEnvelope, Role};
use memscope::report::{self, Render};

use crate::cmd::cli::{
    AnalyzeArgs, BaselineArgs, BaselineFormat, OutputFormat, RankPatternArg, ReportArgs,
};
use crate::cmd::output::Stdout;
use crate::cmd::session::Session;

fn lines_name(p: &Path) -> bool {
    let n = p.to_string_lossy().to_ascii_lowercase();
    n.ends_with(".jsonl") || n.ends_with(".ndjson")
}

/// Whether `files` ask for the job view: several files, a file of rank lines, or a directory
/// with captures under it (one without any is refused as a directory, as it always was; one
/// whose walk fails is a job, so that `expand` says why).
pub fn is_job(files: &[PathBuf]) -> bool {
    files.len() > 1
        || files.first().is_some_and(|f| {
            lines_name(f) || (f.is_dir() && walk(f, &mut Vec::new()).map_or(true, |n| n > 0))
        })
}

/// Whether a file in a directory is one the job view reads: a snapshot pickle, a profiler
/// trace (`trace` in its name) or rank lines, optionally gzipped.
fn capture_like(p: &Path) -> bool {
    let n = p
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let n = n.strip_suffix(".gz").unwrap_or(&n);
    n.ends_with(".pickle")
        || n.ends_with(".pkl")
        || lines_name(Path::new(n))
        || (n.ends_with(".json") && n.contains("trace"))
}

/// Captures a job directory may hold at most: a job of 100,000 ranks is past any cluster's,
/// and a tree that holds more is not one job's directory.
pub const MAX_JOB_FILES: usize = 100_000;

/// Entries (files and directories) a walk reads at most, captures or not.
const MAX_WALKED: usize = 1_000_000;

/// Adds the captures under `dir` to `out`, in name order; returns how many. Symlinked
/// directories are not followed (two links to their parent, or one to `/`, would make the
/// walk endless), and the walk stops with an error past [`MAX_JOB_FILES`] captures or
/// [`MAX_WALKED`] entries.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<usize> {
    let before = out.len();
    let mut seen = 0usize;
    walk_in(dir, out, &mut seen)?;
    Ok(out.len() - before)
}

fn walk_in(dir: &Path, out: &mut Vec<PathBuf>, seen: &mut usize) -> anyhow::Result<()> {
    let mut entries: Vec<(PathBuf, bool)> = Vec::new();
    for e in std::fs::read_dir(dir)
        .with_context(|| format!("cannot read the directory {}", dir.display()))?
    {
        let Ok(e) = e else { continue };
        *seen += 1;
        if *seen > MAX_WALKED {
            anyhow::bail!(
                "{}: more than {MAX_WALKED} entries under it; give the directory of one job's captures",
                dir.display()
            );
        }
        // The entry itself, not what a symlink points at: a symlinked directory is skipped.
        let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
        entries.push((e.path(), is_dir));
    }
    entries.sort();
    for (p, is_dir) in entries {
        if is_dir {
            walk_in(&p, out, seen)?;
        } else if capture_like(&p) && !p.is_dir() {
            if out.len() >= MAX_JOB_FILES {
                anyhow::bail!(
                    "{}: more than {MAX_JOB_FILES} captures under it; a job's directory holds one capture per rank",
                    dir.display()
                );
            }
            out.push(p);
        }
    }
    Ok(())
}

/// The files of the job: the files given, each directory replaced by the captures under it.
pub fn expand(files: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for f in files {
        if f.as_os_str() == "-" {
            anyhow::bail!("`-` (stdin) holds one capture; a job's ranks must be files");
        }
        if f.is_dir() {
            if walk(f, &mut out)? == 0 {
                anyhow::bail!(
                    "{}: no capture under it (*.pickle, *.pkl, *trace*.json, *.jsonl, optionally .gz)",
                    f.display()
                );
            }
        } else {
            out.push(f.clone());
        }
    }
    Ok(out)
}

pub fn pattern(arg: &RankPatternArg) -> anyhow::Result<Option<RankPattern>> {
    arg.rank_pattern
        .as_deref()
        .map(RankPattern::new)
        .transpose()
        .map_err(anyhow::Error::from)
}

/// Loads, analyses and numbers the job's ranks.
pub fn load(
    files: &[PathBuf],
    arg: &RankPatternArg,
    s: &mut Session,
) -> anyhow::Result<(Job, Vec<Member>)> {
    let pattern = pattern(arg)?;
    let paths = expand(files)?;
    for p in &paths {
        s.given(p, Role::Input);
    }
    let (summaries, _) = crate::cmd::load_with_progress(&paths, &vec![None; paths.len()], s)?;
    let members = job::identify(summaries, pattern.as_ref())?;
    Ok((Job::new(&members), members))
}

pub fn analyze(args: &AnalyzeArgs, color: bool, s: &mut Session) -> anyhow::Result<u8> {
    if args.stacks {
        s.note("--stacks does nothing for a job of several ranks".into());
    }
    let (job, _) = load(&args.files, &args.ranks, s)?;
    let opts = report::Options {
        color,
        stacks: false,
    };
    let answer = s.envelope();
    let (fmt, sink) = format(args.format, &answer);
    crate::cmd::output::to_stdout(fmt, sink, &job, &opts, "writing the report")?;
    Ok(0)
}

/// The one place the job view turns `analyze --format` into a format of the job.
fn format<'a>(f: OutputFormat, answer: &'a InEnvelope<'a>) -> (&'a dyn Render<Job>, Stdout) {
    match f {
        OutputFormat::Text => (&report::job::Text, Stdout::Term),
        OutputFormat::Json => (answer, Stdout::Answer),
    }
}

pub fn report(a: &ReportArgs) -> anyhow::Result<u8> {
    if a.plan.batch.is_some() {
        anyhow::bail!("--batch plans one capture; give one file for a capacity plan");
    }
    let (job, _) = load(&a.files, &a.ranks, &mut Session::default())?;
    let inputs: Vec<&Path> = a.files.iter().map(PathBuf::as_path).collect();
    let mut w = crate::cmd::output::Output::create(&a.output, &inputs)?;
    report::job::Html.render(&job, &report::Options::default(), &mut w)?;
    let name = w.name();
    let n = w.finish()?;
    crate::cmd::output::eprint_term(&format!(
        "memscope: wrote {} ({})",
        name,
        memscope::units::bytes(n)
    ));
    Ok(0)
}

/// Whether `baseline` writes rank lines.
pub fn wants_lines(args: &BaselineArgs) -> bool {
    match args.format {
        Some(f) => f == BaselineFormat::Jsonl,
        None => lines_name(&args.output),
    }
}

/// `memscope baseline --format jsonl`: one line per rank.
pub fn baseline_lines(args: &BaselineArgs) -> anyhow::Result<u8> {
    let pattern = pattern(&args.ranks)?;
    let (mut summaries, _) = crate::cmd::load_with_progress(
        &args.files,
        &vec![None; args.files.len()],
        &mut Session::default(),
    )?;
    if let Some(n) = args.rank {
        if summaries.len() != 1 {
            anyhow::bail!(
                "--rank {n} numbers one capture; {} inputs were given (their names or --rank-pattern number them)",
                summaries.len()
            );
        }
        summaries[0].rank = Some(memscope::check::summary::RankInfo {
            rank: n,
            world_size: None,
            source: memscope::check::summary::RankSource::Explicit,
        });
    }
    let mut members = job::identify(summaries, pattern.as_ref())?;
    // Committed or shipped files: paths from the repository root, never absolute.
    for m in &mut members {
        m.summary.path = memscope::check::paths::for_baseline(&m.summary.path);
    }
    let j = Job::new(&members);
    let refs: Vec<&InputSummary> = members.iter().map(|m| &m.summary).collect();
    let text = job::lines::lines(&j, &refs)?;
    let inputs: Vec<&Path> = args.files.iter().map(PathBuf::as_path).collect();
    let mut out = crate::cmd::output::Output::create(&args.output, &inputs)?;
    out.write_all(text.as_bytes())?;
    out.finish()?;
    Ok(0)
}

pub fn tui(
    files: &[PathBuf],
    arg: &RankPatternArg,
    plan: &crate::cmd::cli::PlanOpts,
) -> anyhow::Result<u8> {
    use std::io::IsTerminal;
    if plan.batch.is_some() {
        anyhow::bail!("--batch plans one capture; give one file for the Plan view");
    }
    // What cannot be opened is said here, on the normal terminal, before asking for one.
    for f in expand(files)? {
        std::fs::File::open(&f).with_context(|| format!("cannot open {}", f.display()))?;
    }
    if !(std::io::stdout().is_terminal() && std::io::stdin().is_terminal()) {
        anyhow::bail!(
            "the TUI needs a terminal (stdin and stdout); for a text report of the job run `memscope analyze` with the same files"
        );
    }
    let (job, _) = load(files, arg, &mut Session::default())?;
    memscope::tui::run_job(job)?;
    Ok(0)
}
