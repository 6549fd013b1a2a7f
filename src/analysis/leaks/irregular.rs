//! Irregular growth: a container that gains entries on some steps and never frees them.
//!
//! A cache keyed by shape, length or id (`self.masks[T] = torch.triu(...)` with the sequence
//! length varying per batch) gains an entry whenever a step brings a new key, and keeps it. Its
//! growth is not a line in steps (it rises on 25 of 40 steps, by entries of different sizes), so
//! the straight-line search ([`super::growth_window`], [`super::MIN_R2`]) does not see it; it is
//! a leak all the same: nothing bounds it. What marks it, from the per-boundary series of its site:
//!
//! * its blocks rose at [`MIN_GAINS`] boundaries or more, and at least [`MIN_LATE_GAINS`] of
//!   them in the second half of the steps: still gaining, not a warm-up (lazily created optimizer
//!   state rises once; a cache keyed by a small fixed set of shapes fills in its first steps and
//!   then stays flat);
//! * from its first gain on, none of its blocks that survived a boundary was freed, and neither its
//!   blocks nor its bytes ever fell: nothing evicts (a cache with eviction is a bounded container);
//! * its growth is material ([`super::benign::MATERIAL_STEPS`]).
//!
//! The finding's evidence is the steps that added entries and the entries' sizes.

#[allow(unused_imports)]
use super::*;

use super::benign::SiteSeries;

/// Fewest boundaries at which the site gained blocks.
pub const MIN_GAINS: usize = 5;
/// Fewest of those gains in the second half of the boundaries: the cache still grows.
pub const MIN_LATE_GAINS: usize = 2;
/// Entry sizes shown in a finding (the distinct ones, largest first).
pub const SHOWN_SIZES: usize = 8;

/// Irregular growth of one site: the boundaries at which it gained, and the window from the
/// boundary before its first gain to the last boundary.
pub(super) fn find(s: &SiteSeries, last: usize) -> Option<(Vec<usize>, Window)> {
    let n = last.min(s.blocks.len());
    let gains: Vec<usize> = (1..n).filter(|&k| s.blocks[k] > s.blocks[k - 1]).collect();
    let first = *gains.first()?;
    let late = gains.iter().filter(|&&k| 2 * k >= n).count();
    if gains.len() < MIN_GAINS || late < MIN_LATE_GAINS {
        return None;
    }
    let from = first - 1;
    let kept = (from + 1..n)
        .all(|k| s.blocks[k] >= s.blocks[k - 1] && s.bytes[k] >= s.bytes[k - 1])
        && s.evicted[n - 1] == s.evicted[from];
    kept.then(|| {
        let rising = gains.len();
        (
            gains,
            Window {
                start: from,
                end: n - 1,
                rising,
            },
        )
    })
}

/// The finding for an irregular candidate `c` whose survivors are `d`.
#[allow(clippy::too_many_arguments)]
pub(super) fn leak(
    snap: &Snapshot,
    dev: &Device,
    steps: &[Step],
    bounds: &[(usize, usize)],
    sites: &SiteTable,
    c: &Candidate,
    d: &Details,
    gains: &[usize],
    loop_frame: Option<(Sym, Sym)>,
    ruled_out: RuledOut,
) -> Leak {
    let heaviest = d
        .stack_bytes
        .iter()
        .max_by_key(|(s, b)| (**b, std::cmp::Reverse(**s)))
        .map(|(s, _)| *s)
        .unwrap_or(StackId::EMPTY);
    let allocation_site = sites.site(c.site);
    let loop_line = loop_frame.and_then(|f| line_in(&snap.stacks, heaviest, f));
    let step = |i: usize| steps.get(i).map(|s| s.name.clone()).unwrap_or_default();
    let mut sizes: Vec<u64> = d.survivors.iter().map(|(_, r)| r.size).collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    sizes.dedup();
    let distinct_sizes = sizes.len();
    sizes.truncate(SHOWN_SIZES);
    let w = c.window;
    let entries = c.count.saturating_sub(ruled_out.blocks_at_start);
    let evidence = IrregularEvidence {
        site: allocation_site.clone(),
        gain_steps: gains.iter().map(|&k| step(bounds[k].1)).collect(),
        steps: w.end - w.start,
        entries,
        bytes: d.grown_bytes(),
        sizes,
        distinct_sizes,
        loop_line: match (&loop_line, &allocation_site) {
            (Some(l), Some(a)) if l != a => Some(l.clone()),
            _ => None,
        },
    };
    Leak {
        kind: LeakKind::TensorCache,
        extent: Extent::Alive,
        release: None,
        site: loop_line.clone().or_else(|| allocation_site.clone()),
        blame: if loop_line.is_some() {
            Blame::LoopLine
        } else {
            Blame::AllocatingLine
        },
        line_known: true,
        allocation_site,
        cause_site: None,
        kept_by: None,
        confidence: Confidence::Medium,
        live_bytes: c.live_bytes,
        freed_by_fix_at_least: Some(d.grown_bytes()),
        count: c.count,
        growth_bytes_per_step: c.slope_bytes,
        growth_tensors_per_step: c.slope_count,
        steps: w.end - w.start,
        first_step: StepLabel::Step(step(bounds[w.start].1 + 1)),
        last_step: StepLabel::Step(step(bounds[w.end].1)),
        window_start_event: EventIdx(bounds[w.start].0 as u32),
        window_end_event: EventIdx(bounds[w.end].0 as u32),
        r2: c.r2,
        evidence: LeakEvidence::Irregular(evidence),
        ruled_out: Some(ruled_out),
        samples: samples(dev, d),
        related_sites: Vec::new(),
        stack: snap
            .stacks
            .frames(heaviest)
            .iter()
            .map(|&f| snap.stacks.frame_label(snap.stacks.frame(f)))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(blocks: &[u64]) -> (Vec<u64>, Vec<u64>, Vec<u64>) {
        let bytes = blocks.iter().map(|b| b * 1000).collect();
        (blocks.to_vec(), bytes, vec![0; blocks.len()])
    }

    #[test]
    fn a_cache_gaining_on_some_steps_and_never_freed_is_irregular_growth() {
        // Gains on 8 of 16 steps, some late.
        let (blocks, bytes, evicted) = series(&[0, 1, 2, 2, 3, 3, 3, 4, 4, 5, 5, 5, 6, 6, 6, 7]);
        let s = SiteSeries {
            bytes: &bytes,
            blocks: &blocks,
            evicted: &evicted,
        };
        let (gains, w) = find(&s, 16).expect("irregular growth");
        assert_eq!(gains, vec![1, 2, 4, 7, 9, 12, 15]);
        assert_eq!((w.start, w.end), (0, 15));
    }

    #[test]
    fn a_cache_of_a_few_shapes_or_with_eviction_is_not() {
        // A fixed set of three shapes: fills in the first steps, then flat.
        let (blocks, bytes, evicted) = series(&[0, 1, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3]);
        let s = SiteSeries {
            bytes: &bytes,
            blocks: &blocks,
            evicted: &evicted,
        };
        assert!(find(&s, 16).is_none());
        // Gains all along, but old entries leave: bounded.
        let (blocks, bytes, _) = series(&[0, 1, 2, 2, 3, 3, 3, 4, 4, 5, 5, 5, 6, 6, 6, 7]);
        let evicted: Vec<u64> = (0..16u64).map(|k| k / 4).collect();
        let s = SiteSeries {
            bytes: &bytes,
            blocks: &blocks,
            evicted: &evicted,
        };
        assert!(find(&s, 16).is_none());
    }
}
