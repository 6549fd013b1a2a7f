//! `memscope summarize`: the map step of a job too large for one machine's `analyze DIR`.
//!
//! Each capture (one rank's snapshot or trace) becomes rows of four tables, written as Parquet
//! or JSON Lines under a Hive layout, `OUT/job=J/step=S/rank=R/<table>-<path hash>.<ext>`:
//!
//! - `rank_summary`: one row per capture, whatever became of it (an unreadable, cut or missing
//!   file is a row with its `status`, never a gap);
//! - `site_at_peak`: the main device's top sites live at its peak, each with a `site_id` that
//!   joins across ranks and hosts ([`site_id`]);
//! - `step_series`: each step's peak and end;
//! - `leak_site`: each leak finding with its line's `site_id`.
//!
//! It is pure and idempotent: the same capture gives the same files (rewritten whole, through
//! a temporary file and a rename), and nothing outside its rank's directory is touched, so any
//! engine may run it once per capture, in any order, again after a failure. One capture is
//! analysed at a time and its product dropped before the next ([`map`]): a batch's memory is
//! that of its largest capture. The reduce is SQL over these files (`sql/`, docs/summaries.md);
//! [`read`] reads them back for `memscope analyze OUT/`, whose job view is built from the rows
//! alone ([`job`]).

use std::io::Write;
use std::path::{Path, PathBuf};

pub mod job;
pub mod map;
pub mod parquet;
pub mod read;
pub mod rows;
pub mod site_id;
pub mod table;

pub use map::{summarize_file, Given};
pub use rows::{HostFrom, LeakRow, RankRow, Rows, SiteRow, Status, StepRow, SUMMARIES_SCHEMA};
pub use table::{Table, TABLES};

/// Which files the tables are written as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Parquet,
    Jsonl,
}

impl Format {
    pub fn ext(self) -> &'static str {
        match self {
            Format::Parquet => "parquet",
            Format::Jsonl => "jsonl",
        }
    }
}

/// Why rows could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum SummariesError {
    #[error("{path}: {err}")]
    Io { path: String, err: std::io::Error },
    #[error("parquet: {0}")]
    Parquet(#[from] ::parquet::errors::ParquetError),
    #[error("a table's columns do not match its schema")]
    Columns,
    #[error("column {0} holds a null where the schema has none")]
    NullIn(&'static str),
    #[error("column {0} has another type than memscope's schema gives it")]
    ColumnType(&'static str),
    #[error("{path}: over the limit of {limit} (bytes or rows) for one summary file")]
    TooLarge { path: String, limit: u64 },
    #[error("{path}: {what}")]
    Malformed { path: String, what: String },
    #[error("{value:?}: a --{what} must be 1 to 128 letters, digits, `.`, `_` or `-` (it names a directory)")]
    BadName { what: &'static str, value: String },
}

impl SummariesError {
    pub fn io(path: &Path, err: std::io::Error) -> SummariesError {
        SummariesError::Io {
            path: path.display().to_string(),
            err,
        }
    }
}

/// Checks a job or step name: it becomes a directory's name (`job=NAME`).
pub fn check_name(what: &'static str, value: &str) -> Result<(), SummariesError> {
    let ok = !value.is_empty()
        && value.len() <= 128
        && value != "."
        && value != ".."
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(SummariesError::BadName {
            what,
            value: value.to_owned(),
        })
    }
}

/// The Hive directory of one capture's rows (a capture whose rank nothing tells goes under
/// Hive's null partition). Its files are `<table>-<hash of the capture's path>.<ext>`.
pub fn rank_dir(out: &Path, job: &str, step: &str, rank: Option<u32>) -> PathBuf {
    let r = rank.map_or("__HIVE_DEFAULT_PARTITION__".to_owned(), |r| r.to_string());
    out.join(format!("job={job}"))
        .join(format!("step={step}"))
        .join(format!("rank={r}"))
}

fn json_rows<T: serde::Serialize>(rows: &[T]) -> Result<Vec<serde_json::Value>, SummariesError> {
    rows.iter()
        .map(|r| {
            serde_json::to_value(r).map_err(|e| SummariesError::Malformed {
                path: String::new(),
                what: e.to_string(),
            })
        })
        .collect()
}

/// Writes one capture's rows under `out`; returns the files written. A table without rows has
/// no file (one left by an earlier run of the same capture is removed), except `rank_summary`,
/// which every capture has.
pub fn write_rows(out: &Path, rows: &Rows, format: Format) -> Result<Vec<PathBuf>, SummariesError> {
    let Some(head) = rows.rank.first() else {
        return Ok(Vec::new());
    };
    let dir = rank_dir(out, &head.job, &head.step, head.rank);
    std::fs::create_dir_all(&dir).map_err(|e| SummariesError::io(&dir, e))?;
    // Named by the capture's path too: two captures that claim one rank (a rerun beside the
    // first, a misnamed file) keep their rows apart, and the reduce sees both.
    let suffix = format!("-{}", site_id::path_hash(&head.path));
    let mut written = Vec::new();
    for t in TABLES {
        let values = match t {
            Table::RankSummary => json_rows(&rows.rank)?,
            Table::SiteAtPeak => json_rows(&rows.sites)?,
            Table::StepSeries => json_rows(&rows.steps)?,
            Table::LeakSite => json_rows(&rows.leaks)?,
        };
        let path = dir.join(format!("{}{suffix}.{}", t.name(), format.ext()));
        if values.is_empty() {
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(SummariesError::io(&path, e))
                }
                _ => {}
            }
            continue;
        }
        write_atomically(&path, |f| match format {
            Format::Parquet => parquet::write(t, &values, f),
            Format::Jsonl => {
                for v in &values {
                    writeln!(f, "{}", table::line(t, v))
                        .map_err(|e| SummariesError::io(&path, e))?;
                }
                Ok(())
            }
        })?;
        written.push(path);
    }
    Ok(written)
}

/// Writes `path` through a temporary file beside it and a rename: a reader never sees half a
/// file. No fsync: a file lost to a crash is made again by running the map again (it is
/// idempotent), and a sync per file made the map wait on the disk four times per capture.
fn write_atomically(
    path: &Path,
    body: impl FnOnce(&mut std::fs::File) -> Result<(), SummariesError>,
) -> Result<(), SummariesError> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut f = std::fs::File::create(&tmp).map_err(|e| SummariesError::io(&tmp, e))?;
    if let Err(e) = body(&mut f) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, path).map_err(|e| SummariesError::io(path, e))
}
