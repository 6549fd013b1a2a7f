//! `max-imbalance` (`--max-imbalance`): the ranks of one run peak far apart.
//!
//! - **Detects**: the spread, `(max - min) / max` of the peak allocated bytes of the ranks of
//!   one run and kind (the one definition, [`crate::check::imbalance`]; one result per group,
//!   [`crate::check::ranks`]), held to the limit.
//! - **Cannot judge (an error, since the limit was set)**: one input, no two inputs that are
//!   ranks of one run and kind (a snapshot and a trace are two views of one rank), a rank that
//!   recorded no device memory, or one whose allocated bytes are only changes from its trace's
//!   start (its peak cannot be compared with another rank's), or inputs grouped as ranks that
//!   are captures of different programs (no source file in common).
//! - **Evidence**: both figures of the imbalance (max/min and the spread), the rank that peaks
//!   highest and the one that peaks lowest, with their peaks, and the mean.
//! - **Fix**: balance the work between the ranks (sharding, uneven batches or sequence
//!   lengths, rank 0's extra work), or look at the high rank's own capture.

use super::RuleId;
use crate::check::diff::Unrelated;
use crate::check::ranks::RankGroup;
use crate::check::{CheckError, Measure, RankPeakUnknown, RuleResult, Unit};

pub struct ImbalanceRule {
    /// The largest allowed fraction.
    pub limit: f64,
}

impl ImbalanceRule {
    /// One result per group of ranks (`inputs`: how many inputs the check has), or why the
    /// limit has nothing to measure.
    pub fn apply(
        &self,
        groups: &[RankGroup],
        unrelated: &[Unrelated],
        inputs: usize,
    ) -> Result<Vec<RuleResult>, CheckError> {
        if let Some(u) = unrelated.first() {
            return Err(CheckError::Unrelated(u.clone()));
        }
        if groups.is_empty() && inputs > 1 {
            return Err(CheckError::NoRanks);
        }
        if groups.is_empty() {
            return Err(CheckError::OneInput);
        }
        let mut out = Vec::new();
        for g in groups {
            let Some(im) = &g.imbalance else {
                let (r, why) = match g.ranks.iter().find(|r| !r.has_memory) {
                    Some(r) => (Some(r), RankPeakUnknown::NoMemory),
                    None => (
                        g.ranks.iter().find(|r| r.from_trace_start),
                        RankPeakUnknown::FromTraceStart,
                    ),
                };
                return Err(CheckError::RankUnmeasurable {
                    rank: r.map_or(0, |r| r.rank),
                    group: g.label(),
                    path: r.map_or_else(String::new, |r| r.path.clone()),
                    why,
                });
            };
            let mut r = RuleResult::limit(
                RuleId::MaxImbalance,
                Unit::Fraction,
                im.spread_percent / 100.0,
                self.limit,
                Measure::Imbalance { group: g.label() },
            );
            r.evidence
                .push(crate::wording::job::imbalance(&im.spread()));
            out.push(r);
        }
        Ok(out)
    }
}
