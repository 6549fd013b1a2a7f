//! The job of a summaries directory (`memscope analyze OUT/`): the job view built from the
//! `rank_summary` and `site_at_peak` rows that `memscope summarize` wrote, with no capture read.
//!
//! Each `ok` row is its rank's [`RankFigures`], column for column (the map step wrote them from
//! the same figures); each rank's `site_at_peak` rows, in their order, are its listed sites.
//! The job is then reduced by [`Job::from_figures`], the reduce of the job read from the
//! captures, so both show the same figures. Rows whose capture gave none (unreadable, cut,
//! missing, rank-less) are returned beside the job, for the caller to say; the job is that of
//! the ranks that have figures. One directory holds one job and one step: more are refused,
//! and so are two rows of one rank.

use std::collections::HashMap;

use super::read::Summaries;
use super::{RankRow, Status};
use crate::job::{Job, JobError, RankFigures, RankFrom};

/// Why the rows make no job.
#[derive(Debug, thiserror::Error)]
pub enum FromSummariesError {
    #[error("no rank_summary rows under the directory")]
    Empty,
    #[error(
        "the directory holds several jobs or steps ({0}); give one of them, e.g. OUT/job=J/step=S"
    )]
    Several(String),
    #[error("rank {rank}: its row says `ok` but lacks {column}")]
    Missing { rank: u32, column: &'static str },
    #[error(transparent)]
    Job(#[from] JobError),
}

/// A job, and the rows of captures that gave no figures.
pub struct FromRows {
    pub job: Job,
    pub failed: Vec<RankRow>,
}

fn figures(r: &RankRow) -> Result<RankFigures, FromSummariesError> {
    let rank = r.rank.unwrap_or(0);
    let need = |v: Option<u64>, column: &'static str| {
        v.ok_or(FromSummariesError::Missing { rank, column })
    };
    let missing = |column| FromSummariesError::Missing { rank, column };
    Ok(RankFigures {
        rank,
        rank_from: r.rank_from.unwrap_or(RankFrom::Summary),
        path: r.path.clone(),
        kind: r.kind.ok_or(missing("kind"))?,
        verdict: r.verdict.ok_or(missing("verdict"))?,
        peak_allocated_bytes: need(r.peak_allocated_bytes, "peak_allocated_bytes")?,
        peak_reserved_bytes: need(r.peak_reserved_bytes, "peak_reserved_bytes")?,
        peak_exact: r.history_complete.ok_or(missing("history_complete"))?,
        end_allocated_bytes: need(r.end_allocated_bytes, "end_allocated_bytes")?,
        end_reserved_bytes: need(r.end_reserved_bytes, "end_reserved_bytes")?,
        ooms: need(r.ooms, "ooms")? as usize,
        oom_cause: r.oom_cause,
        leaks: r.leaks.map(|n| n as usize),
        leak_live_bytes: need(r.leak_live_bytes, "leak_live_bytes")?,
    })
}

/// The job of the rows.
pub fn job(s: Summaries) -> Result<FromRows, FromSummariesError> {
    let mut keys: Vec<String> = s
        .rank
        .iter()
        .map(|r| format!("job={}/step={}", r.job, r.step))
        .collect();
    keys.sort();
    keys.dedup();
    match keys.len() {
        0 => return Err(FromSummariesError::Empty),
        1 => {}
        _ => return Err(FromSummariesError::Several(keys.join(", "))),
    }
    let (ok, mut failed): (Vec<RankRow>, Vec<RankRow>) = s
        .rank
        .into_iter()
        .partition(|r| r.status == Status::Ok && r.rank.is_some());
    failed.sort_by(|a, b| (a.rank, &a.path).cmp(&(b.rank, &b.path)));
    let mut ranks = Vec::with_capacity(ok.len());
    let mut seen: HashMap<u32, String> = HashMap::new();
    for r in &ok {
        let f = figures(r)?;
        if let Some(first) = seen.insert(f.rank, f.path.clone()) {
            return Err(JobError::Repeated {
                rank: f.rank,
                first,
                second: f.path,
                from: f.rank_from,
            }
            .into());
        }
        ranks.push(f);
    }
    ranks.sort_by_key(|r| r.rank);
    let mut sites: HashMap<u32, Vec<crate::summarize::SiteRow>> = HashMap::new();
    for row in s.sites {
        if let Some(rank) = row.rank.filter(|r| seen.contains_key(r)) {
            sites.entry(rank).or_default().push(row);
        }
    }
    for v in sites.values_mut() {
        v.sort_by_key(|r| r.position);
    }
    let job = Job::from_figures(ranks, |rank| {
        let rows = sites.get(&rank)?;
        Some(rows.iter().map(|r| r.site_bytes()).collect())
    });
    Ok(FromRows { job, failed })
}
