//! `memscope summarize`: each capture's rows under OUT (the map step, [`memscope::summarize`]),
//! and `memscope analyze OUT/`: the job view of a summaries directory.

use std::io::Write;

use anyhow::Context;
use memscope::report::envelope::{InEnvelope, Role};
use memscope::report::{self, Render};
use memscope::summarize::{self as sum, Format, Given};

use crate::cmd::cli::{AnalyzeArgs, OutputFormat, SummarizeArgs, SummaryFormat};
use crate::cmd::output::Stdout;
use crate::cmd::session::Session;

pub fn summarize(args: &SummarizeArgs) -> anyhow::Result<u8> {
    sum::check_name("job", &args.job)?;
    sum::check_name("step", &args.step)?;
    let files = crate::cmd::job::expand(&args.files)?;
    if args.rank.is_some() && files.len() != 1 {
        anyhow::bail!(
            "--rank numbers one capture; {} were given (their names or contents number them)",
            files.len()
        );
    }
    let given = Given {
        job: args.job.clone(),
        step: args.step.clone(),
        rank: args.rank,
        host: args.host.clone(),
        repo_roots: args.repo_root.clone(),
    };
    let format = match args.format {
        SummaryFormat::Parquet => Format::Parquet,
        SummaryFormat::Jsonl => Format::Jsonl,
    };
    let mut stdout = std::io::stdout().lock();
    let mut not_ok = 0usize;
    for f in &files {
        // One capture at a time: its product is gone when `summarize_file` returns, and its
        // rows when this iteration ends.
        let rows = sum::summarize_file(f, &given);
        sum::write_rows(&args.output, &rows, format)
            .with_context(|| format!("writing the rows of {}", f.display()))?;
        for r in &rows.rank {
            if r.status != sum::Status::Ok {
                not_ok += 1;
                if let Some(d) = &r.status_detail {
                    crate::cmd::output::eprint_term(&format!("memscope: note: {d}"));
                }
            }
            if args.rows {
                writeln!(stdout, "{}", serde_json::to_string(r)?).context("writing the rows")?;
            }
        }
    }
    stdout.flush().context("writing the rows")?;
    crate::cmd::output::eprint_term(&format!(
        "memscope: summarized {} captures under {} ({} without figures)",
        files.len(),
        args.output.display(),
        not_ok
    ));
    Ok(0)
}

/// `memscope analyze OUT/`: the job view of the rows under OUT.
pub fn analyze(args: &AnalyzeArgs, color: bool, s: &mut Session) -> anyhow::Result<u8> {
    let dir = &args.files[0];
    s.given(dir, Role::Input);
    let rows = sum::read::read_dir(dir)?;
    let from = sum::job::job(rows)?;
    for r in &from.failed {
        let rank = r
            .rank
            .map_or("rank unknown".to_owned(), |n| format!("rank {n}"));
        let status = serde_json::to_value(r.status)?;
        s.note(format!(
            "{rank} ({}) has no figures: {}{}",
            r.path,
            status.as_str().unwrap_or_default(),
            r.status_detail
                .as_deref()
                .map(|d| format!(" ({d})"))
                .unwrap_or_default()
        ));
    }
    let opts = report::Options {
        color,
        stacks: false,
    };
    let answer = s.envelope();
    let (fmt, sink): (&dyn Render<memscope::job::Job>, Stdout) = match args.format {
        OutputFormat::Text => (&report::job::Text, Stdout::Term),
        OutputFormat::Json => (&answer as &InEnvelope, Stdout::Answer),
    };
    crate::cmd::output::to_stdout(fmt, sink, &from.job, &opts, "writing the report")?;
    Ok(0)
}
