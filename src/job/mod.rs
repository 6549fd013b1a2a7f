//! The job view: several captures of one job, one per rank, read together (`analyze`, `report`
//! and `tui` given several files).
//!
//! Each rank is analysed once, alone, into its [`Analyzed`](crate::analysis::Analyzed) product
//! and reduced to the gate's typed [`InputSummary`] ([`crate::check::summarize`]); or its summary
//! is read from a file that `memscope baseline` wrote where the rank ran (a cluster's ranks are
//! summarised in place, and one machine reduces the summaries). The [`Job`] is built from those
//! summaries only, so a job of captures and a job of their summaries give the same figures,
//! and no view runs a pass again. The sites that differ between the rank that peaked highest
//! and the one that peaked lowest come from the gate's own site diff
//! ([`crate::check::diff::site_changes`]), which is why this module sits beside
//! [`crate::inputs`], above `analysis` and `check`, and below the views.
//!
//! The ranks are told apart first ([`identify`]): by the `--rank-pattern` the user gave, the
//! trace's `distributedInfo`, the file name ([`crate::rank_name`]), a rank a summary file
//! recorded, or the one CUDA device a snapshot uses. Files whose rank cannot be told, or that
//! repeat a rank, are refused: a job table with two rank 0s would compare nothing.

use serde::Serialize;

use crate::analysis::oom::Cause;
use crate::analysis::TOP_SITES;
use crate::analysis::{CaptureKind, VerdictKind};
use crate::check::diff::{site_changes, SiteChange, SiteStatus};
use crate::check::summary::{DeviceSummary, RankSource, SiteBytes};
use crate::check::InputSummary;
use crate::rank_name::RankPattern;
use crate::wording::job::{self as words, JobVerdict};

pub mod lines;
pub mod table;

/// `memscope analyze --format json` over several files.
pub const JOB_SCHEMA: &str = "memscope.job/1";

pub use crate::rank_name::RankFrom;

/// One input of the job and its rank.
#[derive(Clone, Debug)]
pub struct Member {
    pub rank: u32,
    pub from: RankFrom,
    pub summary: InputSummary,
}

/// Why the inputs are no job the view can show: typed, its sentences [`words`]'.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// An input whose rank nothing tells (`pattern_given`: `--rank-pattern` was, and did not
    /// match).
    #[error("{}", words::no_rank_error(path, *pattern_given))]
    NoRank { path: String, pattern_given: bool },
    /// Two inputs of one rank (`from`: where the second's number came from).
    #[error("{}", words::repeated_rank(*rank, first, second, *from))]
    Repeated {
        rank: u32,
        first: String,
        second: String,
        from: RankFrom,
    },
    /// Captures of two programs (no source file in common), refused as one job as `diff`
    /// refuses to compare them.
    #[error(transparent)]
    Unrelated(#[from] crate::check::diff::Unrelated),
}

/// The rank of one summary (see the module's docs for the order).
fn rank_of(s: &InputSummary, pattern: Option<&RankPattern>) -> Option<(u32, RankFrom)> {
    if let Some(p) = pattern {
        if let Some(n) = p.rank(&s.path) {
            return Some((n.rank, RankFrom::Pattern));
        }
    }
    let stored = s.rank.as_ref();
    if let Some(r) = stored.filter(|r| r.source <= RankSource::DistributedInfo) {
        let from = match r.source {
            RankSource::DistributedInfo => RankFrom::DistributedInfo,
            _ => RankFrom::Summary,
        };
        return Some((r.rank, from));
    }
    if pattern.is_none() {
        if let Some(n) = crate::rank_name::from_file_name(&s.path) {
            return Some((n.rank, RankFrom::FileName));
        }
    }
    match stored {
        Some(r) if r.source == RankSource::FileName => Some((r.rank, RankFrom::Summary)),
        Some(r) => Some((r.rank, RankFrom::Device)),
        None => None,
    }
}

/// Numbers each input with its rank, sorted by rank; refuses an input without one, a rank
/// given twice, and captures of different programs
/// ([`crate::check::diff::one_program`]).
pub fn identify(
    inputs: Vec<InputSummary>,
    pattern: Option<&RankPattern>,
) -> Result<Vec<Member>, JobError> {
    let mut out: Vec<Member> = Vec::with_capacity(inputs.len());
    // rank -> index in `out`: linear in the number of inputs, however many.
    let mut seen: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
    for s in inputs {
        let Some((rank, from)) = rank_of(&s, pattern) else {
            return Err(JobError::NoRank {
                path: s.path,
                pattern_given: pattern.is_some(),
            });
        };
        if let Some(&i) = seen.get(&rank) {
            return Err(JobError::Repeated {
                rank,
                first: out[i].summary.path.clone(),
                second: s.path,
                from,
            });
        }
        seen.insert(rank, out.len());
        out.push(Member {
            rank,
            from,
            summary: s,
        });
    }
    out.sort_by_key(|m| m.rank);
    crate::check::diff::one_program(out.iter().map(|m| &m.summary))?;
    Ok(out)
}

/// One rank's figures: the largest over the capture's devices (a rank uses one).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RankFigures {
    pub rank: u32,
    pub rank_from: RankFrom,
    pub path: String,
    pub kind: CaptureKind,
    pub verdict: VerdictKind,
    pub peak_allocated_bytes: u64,
    pub peak_reserved_bytes: u64,
    /// Whether the peaks are exact: the log starts from an empty allocator. Otherwise they are
    /// the highest the log saw, which is the true peak unless it came before recording began.
    pub peak_exact: bool,
    /// Allocated (live) bytes at the end of the capture.
    pub end_allocated_bytes: u64,
    pub end_reserved_bytes: u64,
    pub ooms: usize,
    /// The cause of the last OOM.
    pub oom_cause: Option<Cause>,
    /// Leak findings; `None` where the capture could not support a judgement.
    pub leaks: Option<usize>,
    /// Bytes the leak findings held alive at the end.
    pub leak_live_bytes: u64,
}

pub use crate::check::imbalance::{Imbalance, RankBytes};

/// The sites live at the peak that differ between the rank that peaked highest and the one
/// that peaked lowest (`before` = lowest, `after` = highest).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SiteSpread {
    pub high_rank: u32,
    pub low_rank: u32,
    pub changes: Vec<SiteChange>,
}

/// The job: its ranks' figures, and what sets them apart.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Job {
    pub schema: &'static str,
    /// Sorted by rank.
    pub ranks: Vec<RankFigures>,
    /// The rank with the highest peak of allocated memory (the lower rank on a tie).
    pub peak_rank: Option<u32>,
    pub oom_ranks: Vec<u32>,
    pub leak_ranks: Vec<u32>,
    /// Ranks whose captures could not support a leak judgement.
    pub unjudged_ranks: Vec<u32>,
    /// `None` with fewer than two ranks.
    pub imbalance: Option<Imbalance>,
    /// `None` with fewer than two ranks, or where the two ranks recorded no sites.
    pub sites: Option<SiteSpread>,
}

/// The device a rank's figures and sites come from: the one with the highest peak.
fn main_device(s: &InputSummary) -> Option<&DeviceSummary> {
    s.devices.iter().max_by_key(|d| d.peak_allocated_bytes)
}

fn figures(m: &Member) -> RankFigures {
    let s = &m.summary;
    let max = |f: fn(&DeviceSummary) -> u64| s.devices.iter().map(f).max().unwrap_or(0);
    let judged = s.leak_judgement.as_ref().is_none_or(|j| j.judged);
    let leaks = s
        .leaks
        .as_ref()
        .filter(|l| !l.is_empty() || judged)
        .map(Vec::len);
    RankFigures {
        rank: m.rank,
        rank_from: m.from,
        path: s.path.clone(),
        kind: s.kind,
        verdict: s.verdict,
        peak_allocated_bytes: max(|d| d.peak_allocated_bytes),
        peak_reserved_bytes: max(|d| d.peak_reserved_bytes),
        peak_exact: !s.devices.is_empty() && s.devices.iter().all(|d| d.peak_exact),
        end_allocated_bytes: max(|d| d.end_allocated_bytes),
        end_reserved_bytes: max(|d| d.end_reserved_bytes),
        ooms: s.ooms.len(),
        oom_cause: if s.ended_by_outside_oom() {
            Some(Cause::OutsideAllocator)
        } else {
            s.ooms.last().map(|o| o.cause)
        },
        leaks,
        leak_live_bytes: s.leaks.iter().flatten().map(|l| l.live_bytes).sum(),
    }
}

/// The job's imbalance: the one definition ([`crate::check::imbalance`]) over the ranks'
/// peaks of allocated memory.
fn imbalance(ranks: &[RankFigures]) -> Option<Imbalance> {
    let peaks: Vec<(u32, u64)> = ranks
        .iter()
        .map(|r| (r.rank, r.peak_allocated_bytes))
        .collect();
    crate::check::imbalance::imbalance(&peaks)
}

/// A rank's sites as the job compares them. The ranks of one job run the same code: a site is
/// its file, line and function. Its heaviest stack (what the diff pairs sites by across code
/// motion) differs with the moment each rank peaked, not with the code, so it is left out; and
/// the blocks without a Python stack (allocated before recording began, or recorded without
/// one) are one row, since nothing tells one such row of a rank from another of the next.
fn same_code_sites(sites: &[SiteBytes]) -> Vec<SiteBytes> {
    let mut out: Vec<SiteBytes> = Vec::with_capacity(sites.len());
    for s in sites {
        match (&s.site, out.iter_mut().find(|o| o.site.is_none())) {
            (None, Some(o)) => {
                o.bytes += s.bytes;
                o.blocks += s.blocks;
            }
            _ => out.push(SiteBytes {
                chain: Vec::new(),
                ..s.clone()
            }),
        }
    }
    out
}

impl Job {
    /// The figures its verdict reads ([`words::job_verdict`]).
    pub fn verdict(&self) -> JobVerdict<'_> {
        JobVerdict {
            oom_ranks: &self.oom_ranks,
            oom_causes: self
                .oom_ranks
                .iter()
                .filter_map(|r| self.ranks.iter().find(|f| f.rank == *r)?.oom_cause)
                .collect(),
            leak_ranks: &self.leak_ranks,
            none_judged: self.unjudged_ranks.len() == self.ranks.len(),
            highest: self
                .imbalance
                .as_ref()
                .zip(self.peak_rank)
                .map(|(i, p)| (p, i.spread())),
        }
    }

    /// The job of `members` (as [`identify`] returns them).
    pub fn new(members: &[Member]) -> Job {
        let ranks: Vec<RankFigures> = members.iter().map(figures).collect();
        Job::from_figures(ranks, |rank| {
            let m = members.iter().find(|m| m.rank == rank)?;
            Some(main_device(&m.summary)?.sites_at_peak.clone())
        })
    }

    /// The job of ranks' figures (sorted by rank), each rank's sites at its peak given by
    /// `listed` (its top ones as its summary lists them): [`Job::new`]'s reduce, and the one
    /// of a summaries directory ([`crate::summarize::job`]).
    pub fn from_figures(
        ranks: Vec<RankFigures>,
        listed: impl Fn(u32) -> Option<Vec<SiteBytes>>,
    ) -> Job {
        let imbalance = imbalance(&ranks);
        let sites = imbalance.as_ref().and_then(|i| {
            // Each side's sites, and how many the summary listed (its top ones, or all).
            let side = |rank: u32| -> Option<(Vec<SiteBytes>, usize)> {
                let listed = listed(rank)?;
                Some((same_code_sites(&listed), listed.len()))
            };
            let ((low, low_listed), (high, high_listed)) = (side(i.min.rank)?, side(i.max.rank)?);
            let mut changes = site_changes(&low, &high);
            // Whether the side that lacks a site listed only its top sites, counted before the
            // rows without a stack were joined.
            for c in &mut changes {
                c.below_top = match c.status {
                    SiteStatus::New => low_listed >= TOP_SITES,
                    SiteStatus::Gone => high_listed >= TOP_SITES,
                    _ => false,
                };
            }
            (!low.is_empty() || !high.is_empty()).then_some(SiteSpread {
                high_rank: i.max.rank,
                low_rank: i.min.rank,
                changes,
            })
        });
        let pick = |f: &dyn Fn(&RankFigures) -> bool| -> Vec<u32> {
            ranks.iter().filter(|r| f(r)).map(|r| r.rank).collect()
        };
        Job {
            schema: JOB_SCHEMA,
            peak_rank: imbalance
                .as_ref()
                .map(|i| i.max.rank)
                .or(ranks.first().map(|r| r.rank)),
            oom_ranks: pick(&|r| r.ooms > 0),
            leak_ranks: pick(&|r| r.leaks.is_some_and(|n| n > 0)),
            unjudged_ranks: pick(&|r| r.leaks.is_none()),
            ranks,
            imbalance,
            sites,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::sites::Site;

    fn row(line: Option<u32>, bytes: u64, chain: &[&str]) -> SiteBytes {
        SiteBytes {
            site: line.map(|line| Site {
                file: "train.py".into(),
                line,
                function: "main".into(),
            }),
            bytes,
            blocks: 1,
            chain: chain.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn sites_of_ranks_pair_by_line_and_join_the_stackless_rows() {
        // Rank 0 peaked inside Adam's step, rank 1 while Adam made its state: the same line,
        // two heaviest stacks.
        let low = same_code_sites(&[
            row(Some(70), 300, &["_multi_tensor_adam", "step", "main"]),
            row(None, 132, &[]),
            row(None, 96, &[]),
        ]);
        let high = same_code_sites(&[
            row(Some(70), 290, &["_init_group", "step", "main"]),
            row(None, 96, &[]),
        ]);
        assert_eq!(low.len(), 2);
        assert_eq!((low[1].bytes, low[1].blocks), (228, 2));
        let c = site_changes(&low, &high);
        assert_eq!(c.len(), 2, "{c:?}");
        assert!(c.iter().all(|c| c.status == SiteStatus::Shrunk));
        assert_eq!(c[0].delta_bytes, -132);
        assert_eq!(c[1].delta_bytes, -10);
    }
}
