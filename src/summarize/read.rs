//! Reading a summaries directory back (`memscope analyze OUT/`): every table file under it, in
//! either format, each row checked against the schema version.
//!
//! A directory is one of summaries when it is laid out as `summarize` writes it: it is named
//! `job=…` or `step=…`, or holds a `job=…` directory. The walk is bounded like the job view's
//! ([`MAX_ENTRIES`], no symlinked directory followed), and so is each file
//! ([`super::parquet::MAX_FILE_BYTES`], [`super::parquet::MAX_ROWS`]).

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::parquet::{MAX_FILE_BYTES, MAX_ROWS};
use super::rows::{LeakRow, RankRow, SiteRow, StepRow, SUMMARIES_SCHEMA};
use super::table::Table;
use super::SummariesError;

/// Entries a walk reads at most.
pub const MAX_ENTRIES: usize = 1_000_000;

/// Rows read from one directory at most, over all its files and tables (100,000 ranks of about
/// 15 rows): what bounds the whole read, however many files hold them.
pub const MAX_TOTAL_ROWS: usize = 1_500_000;

/// All the rows under a directory.
#[derive(Clone, Debug, Default)]
pub struct Summaries {
    pub rank: Vec<RankRow>,
    pub sites: Vec<SiteRow>,
    pub steps: Vec<StepRow>,
    pub leaks: Vec<LeakRow>,
}

fn partition_name(name: &str) -> bool {
    name.starts_with("job=") || name.starts_with("step=")
}

/// Whether `dir` is laid out as `summarize` writes (see the module's docs).
pub fn is_summaries_dir(dir: &Path) -> bool {
    if !dir.is_dir() {
        return false;
    }
    let named = dir
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .is_some_and(|n| partition_name(&n));
    named
        || std::fs::read_dir(dir).is_ok_and(|rd| {
            rd.take(10_000).flatten().any(|e| {
                e.file_type().is_ok_and(|t| t.is_dir())
                    && e.file_name().to_string_lossy().starts_with("job=")
            })
        })
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>, seen: &mut usize) -> Result<(), SummariesError> {
    let rd = std::fs::read_dir(dir).map_err(|e| SummariesError::io(dir, e))?;
    let mut entries: Vec<(PathBuf, bool)> = Vec::new();
    for e in rd.flatten() {
        *seen += 1;
        if *seen > MAX_ENTRIES {
            return Err(SummariesError::TooLarge {
                path: dir.display().to_string(),
                limit: MAX_ENTRIES as u64,
            });
        }
        entries.push((e.path(), e.file_type().is_ok_and(|t| t.is_dir())));
    }
    entries.sort();
    for (p, is_dir) in entries {
        if is_dir {
            walk(&p, out, seen)?;
        } else {
            out.push(p);
        }
    }
    Ok(())
}

fn typed<T: DeserializeOwned>(path: &Path, rows: Vec<Value>) -> Result<Vec<T>, SummariesError> {
    rows.into_iter()
        .enumerate()
        .map(|(i, v)| {
            let bad = |what: String| SummariesError::Malformed {
                path: path.display().to_string(),
                what: format!("row {}: {what}", i + 1),
            };
            if v.get("schema").and_then(Value::as_str) != Some(SUMMARIES_SCHEMA) {
                return Err(bad(format!(
                    "not a {SUMMARIES_SCHEMA} row (written by another memscope version?)"
                )));
            }
            serde_json::from_value(v).map_err(|e| bad(crate::check::summary::no_echo(&e)))
        })
        .collect()
}

fn read_jsonl(path: &Path) -> Result<Vec<Value>, SummariesError> {
    let len = std::fs::metadata(path)
        .map_err(|e| SummariesError::io(path, e))?
        .len();
    if len > MAX_FILE_BYTES {
        return Err(SummariesError::TooLarge {
            path: path.display().to_string(),
            limit: MAX_FILE_BYTES,
        });
    }
    let text = std::fs::read(path).map_err(|e| SummariesError::io(path, e))?;
    let mut out = Vec::new();
    for (n, l) in text.split(|&b| b == b'\n').enumerate() {
        if l.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if out.len() == MAX_ROWS {
            return Err(SummariesError::TooLarge {
                path: path.display().to_string(),
                limit: MAX_ROWS as u64,
            });
        }
        let v: Value = serde_json::from_slice(l).map_err(|e| SummariesError::Malformed {
            path: path.display().to_string(),
            what: format!("line {}: {}", n + 1, crate::check::summary::no_echo(&e)),
        })?;
        out.push(v);
    }
    Ok(out)
}

/// Reads every table file under `dir`.
pub fn read_dir(dir: &Path) -> Result<Summaries, SummariesError> {
    let mut files = Vec::new();
    walk(dir, &mut files, &mut 0)?;
    let mut s = Summaries::default();
    let mut total = 0usize;
    for f in files {
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Some(table) = Table::of_file_name(&name) else {
            continue;
        };
        let rows = if name.ends_with(".parquet") {
            super::parquet::read(table, &f)?
        } else if name.ends_with(".jsonl") {
            read_jsonl(&f)?
        } else {
            continue;
        };
        total += rows.len();
        if total > MAX_TOTAL_ROWS {
            return Err(SummariesError::TooLarge {
                path: dir.display().to_string(),
                limit: MAX_TOTAL_ROWS as u64,
            });
        }
        match table {
            Table::RankSummary => s.rank.extend(typed(&f, rows)?),
            Table::SiteAtPeak => s.sites.extend(typed(&f, rows)?),
            Table::StepSeries => s.steps.extend(typed(&f, rows)?),
            Table::LeakSite => s.leaks.extend(typed(&f, rows)?),
        }
    }
    Ok(s)
}
