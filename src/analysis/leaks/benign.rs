//! The benign readings of growth, ruled out (or found) before a leak is reported.
//!
//! Survivors of one site rising step after step is what a leak looks like, and also what four
//! harmless things look like. Each is tested here, from the per-boundary series of the site (bytes,
//! blocks, and the blocks that left after surviving a boundary), and its figures are kept: growth
//! that one of them explains is reported as [`ExcludedGrowth`] with its [`BenignReading`], and a
//! finding carries [`RuledOut`], the figures that show none of them applied.
//!
//! * **Replacement**: the same tensor replaced by a larger one every step (a sequence-length
//!   curriculum's input batch, the logits of that batch still referenced at the step's end). The
//!   site's block count stays constant while its bytes grow, and the old blocks are freed: nothing
//!   is kept. A buffer grown by `torch.cat` into one tensor looks the same in a snapshot (one block,
//!   replaced by a larger one); it is read as replacement, a limit said in docs/how-it-decides.md.
//! * **Bounded container**: the count rises to a bound and stays there while old entries leave,
//!   one out per one in (`deque(maxlen=N)`, a list trimmed to its last N, an LRU cache).
//! * **Loops that are not the training iteration** are ruled out where steps are cut
//!   ([`crate::analysis::steps`]): an inner level is used as the steps only when its iterations run
//!   the backward (or, in a log with no backward, a module call), so a loop over parameters inside
//!   one `optimizer.step`, over layers or over tokens never is.
//! * **Immaterial growth**: growth too small against the peak to ever run the device out of memory
//!   ([`MATERIAL_STEPS`]).

use crate::analysis::sites::Site;

use super::{LeakKind, Window};

/// Growth is immaterial when, at its rate, adding as much memory again as the device's allocated
/// peak would take more than this many steps. The longest training runs take on the order of
/// 10^5 to 10^6 optimizer steps, and a job's memory is sized against its peak: growth slower than
/// one peak per million steps cannot be what runs a device out of memory within a run (1.6 KiB per
/// step against a 1.7 GiB peak needs 1.1 million steps). Such growth is a note
/// ([`BenignReading::Immaterial`]), never a finding or a gate failure. Survivors that are scalars
/// (a kept loss) are exempt: each holds its autograd graph, which its bytes do not show.
pub const MATERIAL_STEPS: f64 = 1_000_000.0;

/// Complete steps a site must stay at its bound, with old entries leaving, to be a bounded
/// container rather than growth that has not reached its end yet.
pub const MIN_PLATEAU_STEPS: usize = 3;

/// Share of the plateau's steps at which an old entry must leave: one out per one in.
pub const MIN_TURNOVER_SHARE: f64 = 0.75;

/// A benign reading of a site's growth, with the figures that bear it out.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "reading", rename_all = "snake_case")]
pub enum BenignReading {
    /// The site's live blocks stayed at `blocks` while its bytes grew from `first_bytes` to
    /// `last_bytes`: each step freed its blocks (`replaced_blocks` in all) for larger ones.
    Replacement {
        blocks: u64,
        first_bytes: u64,
        last_bytes: u64,
        replaced_blocks: u64,
    },
    /// The site's blocks rose to `site_blocks` (`bound_bytes`) and stayed there for
    /// `plateau_steps` complete steps, `evicted_blocks` old ones leaving as new ones came.
    /// `bound_blocks` of them were alive right after an old one left: the container's bound (the
    /// others were the step's own, or made once before the growth).
    BoundedContainer {
        bound_blocks: u64,
        site_blocks: u64,
        bound_bytes: u64,
        plateau_steps: usize,
        evicted_blocks: u64,
    },
    /// At `growth_bytes_per_step`, adding `peak_allocated_bytes` again takes `steps_to_peak`
    /// steps, more than [`MATERIAL_STEPS`]. `kind` is the leak shape it would otherwise have had.
    Immaterial {
        kind: LeakKind,
        peak_allocated_bytes: u64,
        steps_to_peak: f64,
    },
}

impl BenignReading {
    /// The snake_case name used in JSON.
    pub fn id(&self) -> &'static str {
        match self {
            BenignReading::Replacement { .. } => "replacement",
            BenignReading::BoundedContainer { .. } => "bounded_container",
            BenignReading::Immaterial { .. } => "immaterial",
        }
    }
}

/// Growth that a benign reading explains: not a leak, said with its evidence.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ExcludedGrowth {
    pub site: Option<Site>,
    pub growth_bytes_per_step: f64,
    /// Boundaries the growth crossed.
    pub steps: usize,
    /// The site's bytes and blocks at the growth's end.
    pub live_bytes: u64,
    pub count: u64,
    #[serde(flatten)]
    pub reading: BenignReading,
}

/// What a finding's figures say against each benign reading (module docs).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RuledOut {
    /// Live blocks of the main site at the growth's start and end: more blocks, not one
    /// replaced by a larger one.
    pub blocks_at_start: u64,
    pub blocks_at_end: u64,
    /// Complete steps after the growth ended, and the grown blocks that left during them: no
    /// plateau with old entries leaving, so no bound.
    pub steps_after: usize,
    pub evicted_after: u64,
    /// Steps at this finding's rate to add the allocated peak again (at most [`MATERIAL_STEPS`]);
    /// `None` where the exemption for kept scalars applied.
    pub steps_to_peak: Option<f64>,
    pub peak_allocated_bytes: u64,
}

/// The per-boundary series of one site: bytes, blocks, cumulative evictions.
pub(super) struct SiteSeries<'a> {
    pub bytes: &'a [u64],
    pub blocks: &'a [u64],
    pub evicted: &'a [u64],
}

/// Replacement over the window: the block count stays within one of its value at the start
/// (no more blocks per step), and old blocks left at half the rising boundaries or more.
pub(super) fn replacement(s: &SiteSeries, w: Window) -> Option<BenignReading> {
    let counts = &s.blocks[w.start..=w.end];
    let (lo, hi) = (counts.iter().min()?, counts.iter().max()?);
    let replaced = s.evicted[w.end].saturating_sub(s.evicted[w.start]);
    let steady = *hi > 0 && hi - lo <= 1 && s.blocks[w.end] <= s.blocks[w.start] + 1;
    (steady && replaced as usize * 2 >= w.rising).then(|| BenignReading::Replacement {
        blocks: s.blocks[w.end],
        first_bytes: s.bytes[w.start],
        last_bytes: s.bytes[w.end],
        replaced_blocks: replaced,
    })
}

/// A bounded container: after the window, `plateau` complete boundaries (those before `last`,
/// exclusive) where the count stays at its bound and old blocks leave.
pub(super) fn bounded(s: &SiteSeries, w: Window, last: usize) -> Option<BenignReading> {
    let bound = s.blocks[w.end];
    let after = (w.end + 1)..last.min(s.blocks.len());
    if after.len() < MIN_PLATEAU_STEPS || bound == 0 {
        return None;
    }
    let at_bound = after
        .clone()
        .all(|k| s.blocks[k] + 1 >= bound && s.blocks[k] <= bound + 1);
    let turns = after
        .clone()
        .filter(|&k| s.evicted[k] > s.evicted[k - 1])
        .count();
    let enough = turns as f64 >= MIN_TURNOVER_SHARE * after.len() as f64;
    (at_bound && enough).then(|| BenignReading::BoundedContainer {
        bound_blocks: bound,
        site_blocks: bound,
        bound_bytes: after.clone().map(|k| s.bytes[k]).max().unwrap_or(0),
        plateau_steps: after.len(),
        evicted_blocks: s.evicted[after.end - 1].saturating_sub(s.evicted[w.end]),
    })
}

/// The container's bound: over the plateau (after boundary `end`, up to boundary `at`), the
/// number of the site's blocks made since the growth began (boundary `from`) that are alive right
/// after each eviction of one that had survived a boundary; the median of those counts. Right after
/// an old entry leaves, a container holds its bound: a `deque(maxlen=N)` (or an LRU cache) takes the
/// new entry, then drops the oldest. What the line made once before the growth (a cuBLAS workspace
/// made by its first matmul) is not counted. One pass over the log up to that boundary, following
/// the site's blocks only.
pub(super) fn bound_entries(
    dev: &crate::model::Device,
    sites: &mut super::SiteTable,
    bounds: &[(usize, usize)],
    site: super::SiteId,
    (from, end, at): (usize, usize, usize),
) -> Option<u64> {
    use crate::model::Action;
    let (grown_after, plateau_after) = (bounds[from].0, bounds[end].0);
    let mut live: rustc_hash::FxHashMap<u64, usize> = Default::default();
    let mut next_bound = 0usize;
    let mut counts: Vec<u64> = Vec::new();
    for (i, e) in dev.events.iter().enumerate().take(bounds[at].0 + 1) {
        let last_bound = next_bound.checked_sub(1).map(|b| bounds[b].0);
        let freed = match e.action {
            Action::Alloc | Action::FreeRequested | Action::FreeCompleted => live.remove(&e.addr),
            _ => None,
        };
        if e.action == Action::Alloc && i > grown_after && sites.of(e.stack) == site {
            live.insert(e.addr, i);
        }
        let evicted = freed.is_some_and(|a| last_bound.is_some_and(|b| a <= b));
        if evicted && i > plateau_after {
            counts.push(live.len() as u64);
        }
        while next_bound < bounds.len() && bounds[next_bound].0 <= i {
            next_bound += 1;
        }
    }
    counts.sort_unstable();
    counts.get(counts.len() / 2).copied()
}

/// Steps at `per_step` to add `peak` again (infinite for no growth).
pub fn steps_to_peak(per_step: f64, peak: u64) -> f64 {
    if per_step <= 0.0 {
        f64::INFINITY
    } else {
        peak as f64 / per_step
    }
}

/// Whether growth of `per_step` against `peak` is immaterial ([`MATERIAL_STEPS`]).
pub fn immaterial(per_step: f64, peak: u64) -> bool {
    steps_to_peak(per_step, peak) > MATERIAL_STEPS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(start: usize, end: usize) -> Window {
        Window {
            start,
            end,
            rising: end - start,
        }
    }

    #[test]
    fn one_block_replaced_by_a_larger_one_is_replacement() {
        let bytes: Vec<u64> = (0..10).map(|i| 1000 + 100 * i).collect();
        let blocks = vec![1u64; 10];
        let evicted: Vec<u64> = (0..10).collect();
        let s = SiteSeries {
            bytes: &bytes,
            blocks: &blocks,
            evicted: &evicted,
        };
        assert!(matches!(
            replacement(&s, w(0, 9)),
            Some(BenignReading::Replacement { blocks: 1, .. })
        ));
        // One more block per step is no replacement.
        let blocks: Vec<u64> = (1..11).collect();
        let none = vec![0u64; 10];
        let s = SiteSeries {
            bytes: &bytes,
            blocks: &blocks,
            evicted: &none,
        };
        assert!(replacement(&s, w(0, 9)).is_none());
    }

    #[test]
    fn a_plateau_with_turnover_is_a_bounded_container() {
        // 8 steps of growth to 8 blocks, then 5 steps at 8 with one out per step.
        let blocks: Vec<u64> = (0..14u64).map(|i| i.min(8)).collect();
        let bytes: Vec<u64> = blocks.iter().map(|c| c * 100).collect();
        let evicted: Vec<u64> = (0..14u64).map(|i| i.saturating_sub(8)).collect();
        let s = SiteSeries {
            bytes: &bytes,
            blocks: &blocks,
            evicted: &evicted,
        };
        let r = bounded(&s, w(0, 8), 14).expect("bounded");
        assert_eq!(
            r,
            BenignReading::BoundedContainer {
                bound_blocks: 8,
                site_blocks: 8,
                bound_bytes: 800,
                plateau_steps: 5,
                evicted_blocks: 5
            }
        );
        // The same plateau without anything leaving is not a container at its bound.
        let none = vec![0u64; 14];
        let s = SiteSeries {
            bytes: &bytes,
            blocks: &blocks,
            evicted: &none,
        };
        assert!(bounded(&s, w(0, 8), 14).is_none());
        // Too short a plateau cannot be told from growth not yet at its end.
        let s = SiteSeries {
            bytes: &bytes,
            blocks: &blocks,
            evicted: &evicted,
        };
        assert!(bounded(&s, w(0, 8), 11).is_none());
    }

    #[test]
    fn kib_per_step_against_gib_is_immaterial() {
        assert!(immaterial(1.6 * 1024.0, 1_825_361_100));
        assert!(!immaterial(8.0 * 1024.0, 249_000_000));
        assert!(!immaterial(2.0 * 1024.0 * 1024.0, 400_000_000));
    }
}
