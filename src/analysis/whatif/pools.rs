//! "CUDA graphs raised the peak by X": the log's requests replayed with every private pool's
//! requests served by the default pool.
//!
//! A private pool (a CUDA graph's, `torch.compile(mode="reduce-overhead")`'s, a `MemPool`)
//! keeps its segments to itself: memory freed in it is reused only by its own requests, and the
//! default pool cannot take it. The model of the caching allocator ([`super::alloc`]) has one
//! pool per stream and size class, no private pools, so replaying the log's requests through
//! it (under the recorded settings, with no cap) is exactly the remap: each request goes where
//! the default pool would have put it. The recorded reserved peak (the replay's) minus the
//! model's is what the private pools added to the peak (negative where they lowered it).
//!
//! Two things in a graph capture's log are not requests of the program: `torch.cuda.graph`
//! empties the cache before capturing (its `segment_free`s carry an `empty_cache` frame, and
//! are followed by the capture's new segments, which the request reader would otherwise take
//! for the allocator's own retry), and that emptying is kept, as the program called it. And a
//! capture runs on a stream of its own (torch requires it): the requests made on a stream that
//! made a private pool's segments are remapped to the program's main stream too, as an eager
//! run makes them there (keeping the capture stream, the remap found +2 MiB on every graph
//! capture of fixtures/pools against 12..118 MiB from their eager twins).
//!
//! What the remap cannot see: requests the graph workflow makes that an eager run does not
//! (warm-up iterations on a side stream, a cuBLAS workspace per stream, static inputs). So the
//! figure is said with the range its truth lay in on every twin run without graphs
//! ([`super::error::GRAPH_PEAK_EFFECT`], re-measured by `tests/it/pools.rs`), and where that range
//! reaches both signs, not even the direction is said.

use super::error::{Bounded, FigureKind};
use super::{config, ops, simulate_ops, Op};
use std::collections::{HashMap, HashSet};

use crate::analysis::replay::{SegmentPools, Timeline, DEFAULT_POOL};
use crate::model::{Action, Device, Snapshot, StackId};

/// The remap's result, or why the log cannot support it.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum PoolWhatIf {
    /// The private pools raised the reserved peak by `raised_by_bytes` (negative: lowered it).
    Computed {
        /// The recorded reserved peak (the replay's).
        recorded_peak_reserved_bytes: u64,
        /// The model's reserved peak with every request in the default pool.
        default_pool_peak_reserved_bytes: u64,
        raised_by_bytes: i64,
        /// Where the truth lay for a figure of this size, on every twin run without the pools
        /// ([`super::error::GRAPH_PEAK_EFFECT`]).
        range: Bounded,
    },
    /// The log cannot support the figure.
    NotComputed { reason: NoWhatIf },
}

/// Why the remap was not computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NoWhatIf {
    /// The capture holds no allocation history, only the state at the dump.
    NoHistory,
    /// A private pool already held segments when the log began (recording began after the
    /// capture, or the ring buffer dropped it): its requests are not in the log.
    PoolBeforeLog,
    /// The replay could not explain the log (a ring that overflowed mid-way, a damaged file).
    ReplayInconsistent,
    /// The run ran out of memory: its peak is where the memory ended, not the workload's.
    RunOom,
}

/// Whether a stack has a frame of the given function name.
fn has_frame(snap: &Snapshot, stack: StackId, name: &str) -> bool {
    snap.stacks
        .frames(stack)
        .iter()
        .any(|&f| snap.stacks.str(snap.stacks.frame(f).name) == name)
}

/// The log's requests, with each explicit `empty_cache` (a run of `segment_free`s made by
/// `torch.cuda.empty_cache`, as its stack says) released as the program asked, and the
/// requests made on a capture's stream made on the program's main stream.
fn requests(snap: &Snapshot, dev: &Device, pools: &SegmentPools) -> Vec<Op> {
    let mut out = ops(dev);
    let mut in_run = false;
    for (i, e) in dev.events.iter().enumerate() {
        match e.action {
            Action::SegmentFree | Action::SegmentUnmap => {
                if !in_run && has_frame(snap, e.stack, "empty_cache") {
                    out[i] = Op::EmptyCache;
                }
                in_run = true;
            }
            Action::FreeCompleted | Action::Snapshot | Action::Other => {}
            _ => in_run = false,
        }
    }
    // The streams the captures ran on: in an eager run their requests are the program's own,
    // on its main stream.
    let capture: HashSet<u64> = pools
        .iter()
        .filter(|(_, p)| **p != DEFAULT_POOL)
        .filter(|(i, _)| (**i as usize) < dev.events.len())
        .map(|(i, _)| dev.events.stream(*i as usize))
        .collect();
    let main = main_stream(dev, &capture);
    for o in out.iter_mut() {
        if let Op::Malloc { stream, .. } = o {
            if capture.contains(stream) {
                *stream = main;
            }
        }
    }
    out
}

/// The stream an eager run makes the captures' requests on: the default stream (0) where the
/// program made requests there (torch's current stream unless the program picks another),
/// else the stream most requests outside the captures were made on.
fn main_stream(dev: &Device, capture: &HashSet<u64>) -> u64 {
    let mut n: HashMap<u64, usize> = HashMap::new();
    for (i, e) in dev.events.iter().enumerate() {
        let stream = dev.events.stream(i);
        if e.action == Action::Alloc && !capture.contains(&stream) {
            *n.entry(stream).or_default() += 1;
        }
    }
    if n.contains_key(&0) {
        return 0;
    }
    n.into_iter()
        .max_by_key(|&(s, c)| (c, std::cmp::Reverse(s)))
        .map(|(s, _)| s)
        .unwrap_or(0)
}

/// The remap for one device whose segments include a private pool; `None` where every pool
/// is the default one (or none is known).
pub fn graph_peak_effect(snap: &Snapshot, dev: &Device, tl: &Timeline) -> Option<PoolWhatIf> {
    let private = |k: &Option<(i64, i64)>| k.is_some_and(|p| p != DEFAULT_POOL);
    if !tl.pool_peaks.keys().any(private) {
        return None;
    }
    let not = |reason| Some(PoolWhatIf::NotComputed { reason });
    if !dev.events.iter().any(|e| {
        matches!(
            e.action,
            Action::Alloc | Action::SegmentAlloc | Action::SegmentMap
        )
    }) {
        return not(NoWhatIf::NoHistory);
    }
    if tl
        .initial
        .pool_reserved
        .iter()
        .any(|(k, &v)| private(k) && v > 0)
    {
        return not(NoWhatIf::PoolBeforeLog);
    }
    if !tl.ooms.is_empty() {
        return not(NoWhatIf::RunOom);
    }
    if !tl.consistency.consistent || !tl.anomalies.is_empty() {
        return not(NoWhatIf::ReplayInconsistent);
    }
    let cfg = config(&snap.settings, None, None);
    let run = simulate_ops(
        snap,
        dev,
        cfg,
        &tl.initial,
        requests(snap, dev, &tl.segment_pools),
    );
    let recorded = tl.peaks.reserved.bytes;
    let model = run.stats.peak_reserved;
    let raised =
        (recorded as i128 - model as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64;
    Some(PoolWhatIf::Computed {
        recorded_peak_reserved_bytes: recorded,
        default_pool_peak_reserved_bytes: model,
        raised_by_bytes: raised,
        range: Bounded::of(FigureKind::GraphPeakEffect, raised),
    })
}
