//! A replay state kept for random access, stored flat.
//!
//! [`super::Timeline`] keeps a copy of the replayed state every few thousand events so that
//! `state_after` replays at most that many. A cloned `BTreeMap` keeps its nodes' slack (a node
//! holds up to eleven blocks, often seven or eight), so on a large capture the copies cost
//! about 80 bytes per live block; laid out as one vector of blocks in address order they cost
//! the block's own 48 (issue #43: memory beyond the file). Rebuilding the maps from sorted
//! vectors is linear.

use std::collections::BTreeMap;

use super::{Counters, LiveBlock, PoolKey, SegState, State};

/// A [`State`], flat: segments in address order (with their key and how many blocks follow),
/// their blocks in order, one vector for all.
#[derive(Clone, Debug)]
pub(super) struct Checkpoint {
    counters: Counters,
    pool_reserved: Vec<(PoolKey, u64)>,
    /// Each segment (its `blocks` left empty), its key in `State::segments`, its block count.
    segments: Vec<(u64, SegState, usize)>,
    /// Every live block with its key, segment after segment, in address order.
    blocks: Vec<(u64, LiveBlock)>,
}

/// A segment with its blocks apart (see [`Checkpoint::flat`]).
pub(super) type Flat = (SegState, Vec<(u64, LiveBlock)>);

/// `g` without its blocks.
fn bare(g: &SegState) -> SegState {
    SegState {
        address: g.address,
        size: g.size,
        stream: g.stream,
        pool: g.pool,
        expandable: g.expandable,
        stack: g.stack,
        pool_id: g.pool_id,
        blocks: BTreeMap::new(),
        active_bytes: g.active_bytes,
    }
}

impl Checkpoint {
    pub(super) fn of(s: &State) -> Checkpoint {
        let segs = s.segments.iter().map(|(&k, g)| (k, g));
        Checkpoint::build(s.counters, &s.pool_reserved, segs)
    }

    /// The checkpoint of a state with these counters, pools and segments (in key order, as the
    /// state's map holds them; each as [`Checkpoint::flat`] gives it): what the split replay
    /// assembles ([`super::split`]).
    pub(super) fn from_segments(
        counters: Counters,
        pool_reserved: &BTreeMap<PoolKey, u64>,
        segments: Vec<(u64, Flat)>,
    ) -> Checkpoint {
        let n = segments.iter().map(|(_, (_, b))| b.len()).sum();
        let segs = segments
            .into_iter()
            .map(|(k, (g, mine))| (k, g, mine.into_iter()));
        Checkpoint::assemble(counters, pool_reserved, n, segs)
    }

    /// One segment, flat: itself with `blocks` left empty, and its blocks in order.
    pub(super) fn flat(g: &SegState) -> Flat {
        let blocks = g.blocks.iter().map(|(&a, b)| (a, b.clone())).collect();
        (bare(g), blocks)
    }

    fn build<'a>(
        counters: Counters,
        pool_reserved: &BTreeMap<PoolKey, u64>,
        segs: impl Iterator<Item = (u64, &'a SegState)> + Clone,
    ) -> Checkpoint {
        let n = segs.clone().map(|(_, g)| g.blocks.len()).sum();
        let segs = segs.map(|(k, g)| (k, bare(g), g.blocks.iter().map(|(&a, b)| (a, b.clone()))));
        Checkpoint::assemble(counters, pool_reserved, n, segs)
    }

    /// The one loop both ways in share: each segment (bare) and its `n` blocks in total, laid
    /// out flat, from owned blocks (the split replay's) or cloned ones (a state's).
    fn assemble<B: ExactSizeIterator<Item = (u64, LiveBlock)>>(
        counters: Counters,
        pool_reserved: &BTreeMap<PoolKey, u64>,
        n: usize,
        segs: impl Iterator<Item = (u64, SegState, B)>,
    ) -> Checkpoint {
        let mut blocks = Vec::with_capacity(n);
        let segments = segs
            .map(|(k, g, mine)| {
                let count = mine.len();
                blocks.extend(mine);
                (k, g, count)
            })
            .collect();
        Checkpoint {
            counters,
            pool_reserved: pool_reserved.iter().map(|(&k, &v)| (k, v)).collect(),
            segments,
            blocks,
        }
    }

    /// The state it was made from, equal to it.
    pub(super) fn state(&self) -> State {
        let mut rest = &self.blocks[..];
        let segments = self
            .segments
            .iter()
            .map(|(k, g, n)| {
                let (mine, after) = rest.split_at((*n).min(rest.len()));
                rest = after;
                let mut g = g.clone();
                g.blocks = mine.iter().cloned().collect();
                (*k, g)
            })
            .collect();
        State {
            segments,
            counters: self.counters,
            pool_reserved: self.pool_reserved.iter().copied().collect(),
        }
    }

    /// Its size in [`super::state_weight`] units: two per segment, one per block.
    pub(super) fn weight(&self) -> usize {
        self.segments
            .len()
            .saturating_mul(2)
            .saturating_add(self.blocks.len())
    }
}
