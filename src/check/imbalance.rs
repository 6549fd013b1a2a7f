//! Imbalance between ranks, defined once: `analyze` of a job, `check`'s rank groups and its
//! `max-imbalance` rule, the TUI's job view, MCP and the SQL reduce all read this one figure.
//!
//! Over each rank's peak allocated bytes: `max_over_min` = max / min (`None` where the min is
//! 0), and `spread_percent` = (max − min) / max × 100 (0 where every rank peaked at 0), with
//! the ranks that peaked highest and lowest (the lower rank on a tie) and the mean.
//! `--max-imbalance` holds the spread to its limit. The two figures say the same thing two ways
//! (a spread of 61.5 % is max/min 2.60x); the words ([`crate::wording::job::IMBALANCE_HOW`])
//! say which is which wherever they are printed.
//!
//! It lives here, below [`crate::job`], because the gate needs it and the job view already
//! reads the gate's summaries (tools/layers.py: no circle); [`crate::job`] re-exports it.

use serde::Serialize;

use crate::wording::job::{RankPeak, Spread};

/// A figure and the rank it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RankBytes {
    pub rank: u32,
    pub bytes: u64,
}

/// How far apart the ranks' peaks of allocated memory are.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Imbalance {
    /// `max / min`; `None` where the smallest is 0.
    pub max_over_min: Option<f64>,
    /// `(max - min) / max × 100`; 0 where the largest is 0.
    pub spread_percent: f64,
    pub max: RankBytes,
    pub min: RankBytes,
    pub mean_bytes: u64,
}

/// The imbalance of `peaks` (rank, peak allocated bytes); `None` with fewer than two.
pub fn imbalance(peaks: &[(u32, u64)]) -> Option<Imbalance> {
    if peaks.len() < 2 {
        return None;
    }
    let &(max_rank, max) = peaks
        .iter()
        .max_by_key(|(r, b)| (*b, std::cmp::Reverse(*r)))?;
    let &(min_rank, min) = peaks.iter().min_by_key(|(r, b)| (*b, *r))?;
    let sum: u128 = peaks.iter().map(|(_, b)| *b as u128).sum();
    Some(Imbalance {
        max_over_min: (min > 0).then(|| max as f64 / min as f64),
        spread_percent: if max == 0 {
            0.0
        } else {
            (max - min) as f64 / max as f64 * 100.0
        },
        max: RankBytes {
            rank: max_rank,
            bytes: max,
        },
        min: RankBytes {
            rank: min_rank,
            bytes: min,
        },
        mean_bytes: (sum / peaks.len() as u128) as u64,
    })
}

impl Imbalance {
    /// The figures its words read ([`crate::wording::job::imbalance`]).
    pub fn spread(&self) -> Spread {
        let peak = |r: &RankBytes| RankPeak {
            rank: r.rank,
            bytes: r.bytes,
        };
        Spread {
            max_over_min: self.max_over_min,
            spread_percent: self.spread_percent,
            max: peak(&self.max),
            min: peak(&self.min),
            mean_bytes: self.mean_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_figures_of_one_definition() {
        // The case: 2.60x is a spread of 61.5 %.
        let i = imbalance(&[(0, 100), (1, 260), (2, 260)]).unwrap();
        assert_eq!(i.max_over_min, Some(2.6));
        assert!((i.spread_percent - 61.538_461_538).abs() < 1e-6);
        // Ties: the lower rank, on both ends.
        assert_eq!((i.max.rank, i.min.rank), (1, 0));
        assert_eq!(i.mean_bytes, 206);
        let z = imbalance(&[(3, 0), (1, 0)]).unwrap();
        assert_eq!((z.max_over_min, z.spread_percent), (None, 0.0));
        assert_eq!((z.max.rank, z.min.rank), (1, 1));
        let u = imbalance(&[(0, 0), (1, 5)]).unwrap();
        assert_eq!((u.max_over_min, u.spread_percent), (None, 100.0));
        assert!(imbalance(&[(0, 5)]).is_none());
    }
}
