//! Memory pools: the default pool and the private ones (CUDA graphs, `MemPool`s), per device.
//!
//! torch names each segment's pool by `segment_pool_id`: `(0, 0)` the default pool, `(n, 0)`
//! a CUDA graph's own pool (`torch.cuda.graph` without a `pool=`), `(0, n)` one made by
//! `graph_pool_handle()` or `torch.cuda.MemPool()`. `(0, n)` is shared by user pools and the
//! pools `torch.compile(mode="reduce-overhead")` (CUDA graph trees) captures into, so a
//! `(0, n)` pool counts as a graph's where the stacks of its segments show a capture
//! (`cudagraph_trees.py`, `torch/cuda/graphs.py`), else as a user's.
//!
//! A private pool holds its memory by design (a graph's replays write to the same addresses),
//! so its free bytes are not cached memory the program can use, nor a leak or fragmentation.
//!
//! Figures at the dump are the snapshot's own segments (what `torch.cuda.memory_snapshot()`
//! sums); peaks come from the replay, which carries each segment's pool ([`PoolKey`]).
//! Ghost blocks are memory_viz's name (PyTorch 2026) for allocated blocks of the dump that no
//! log entry mentions: allocated before recording began, or whose entry the ring dropped; the
//! replay's "before the log" blocks still alive untouched at the end, counted per pool.

use std::collections::BTreeMap;

use super::replay::{PoolKey, Timeline, DEFAULT_POOL};
use super::whatif::pools::{graph_peak_effect, PoolWhatIf};
use crate::model::{BlockState, Device, Snapshot, StackId};

/// What a pool is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PoolKind {
    Default,
    /// A CUDA graph's (a manual capture, or CUDA graph trees under reduce-overhead).
    Graph,
    /// A `torch.cuda.MemPool` or a handle the program made and used itself.
    User,
}

/// How a pool's kind was told.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KindEvidence {
    /// `(0, 0)`.
    DefaultId,
    /// `(n, 0)`: the id a graph gives its own pool.
    GraphId,
    /// `(0, n)` whose segments were made under a capture (their stacks say so).
    CaptureStack,
    /// `(0, n)` with no capture in its segments' stacks.
    UserId,
}

/// One pool of a device.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PoolReport {
    pub pool_id: [i64; 2],
    pub kind: PoolKind,
    pub kind_evidence: KindEvidence,
    /// At the dump, from the snapshot's segments.
    pub reserved_bytes: u64,
    pub allocated_bytes: u64,
    pub active_bytes: u64,
    pub segments: u64,
    /// The highest reserved within the log (the dump's where there is no log).
    pub peak_reserved_bytes: u64,
    /// Whether that peak is the pool's own: the pool held nothing before the log, and no
    /// segment of unknown pool could have been its at its highest.
    pub peak_reserved_exact: bool,
    /// The log entry after which the peak was first reached (`null`: the log's start).
    pub peak_event: Option<u32>,
    /// Allocated blocks of the dump that no log entry mentions (memory_viz's ghost blocks).
    pub ghost_blocks: u64,
    pub ghost_bytes: u64,
}

impl PoolReport {
    pub fn is_private(&self) -> bool {
        self.kind != PoolKind::Default
    }
}

/// Free bytes held in the private ones of `pools` at the dump: reserved there, usable only by
/// the pool's own requests.
pub fn private_free_bytes(pools: &[PoolReport]) -> u64 {
    pools
        .iter()
        .filter(|p| p.is_private())
        .map(|p| p.reserved_bytes.saturating_sub(p.active_bytes))
        .fold(0u64, u64::saturating_add)
}

/// A device's pools, with what the log cannot attribute and the graphs' effect on the peak.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct DevicePools {
    pub pools: Vec<PoolReport>,
    /// Highest reserved bytes in segments whose pool cannot be told (made and freed in the
    /// log: torch 2.11's trace entries do not name a pool).
    pub unknown_pool_peak_reserved_bytes: u64,
    /// What the private pools did to the device's reserved peak, where a private pool exists.
    pub whatif: Option<PoolWhatIf>,
}

impl DevicePools {
    /// Whether any private pool is known.
    pub fn has_private(&self) -> bool {
        self.pools.iter().any(PoolReport::is_private)
    }

    /// Free bytes held in private pools at the dump: reserved there, usable only by the pool.
    pub fn private_free_bytes(&self) -> u64 {
        private_free_bytes(&self.pools)
    }

    /// The pool `id`, where known.
    pub fn pool(&self, id: (i64, i64)) -> Option<&PoolReport> {
        self.pools.iter().find(|p| p.pool_id == [id.0, id.1])
    }
}

/// Frames that show a segment was made under a CUDA graph capture.
fn capture_frame(file: &str) -> bool {
    file.ends_with("cudagraph_trees.py") || file.ends_with("torch/cuda/graphs.py")
}

fn stack_shows_capture(snap: &Snapshot, stack: StackId) -> bool {
    snap.stacks
        .frames(stack)
        .iter()
        .any(|&f| capture_frame(snap.stacks.str(snap.stacks.frame(f).file)))
}

#[derive(Default)]
struct Sums {
    reserved: u64,
    allocated: u64,
    active: u64,
    segments: u64,
    ghost_blocks: u64,
    ghost_bytes: u64,
    capture: bool,
}

/// The pools of one device; empty where no segment carries a pool id (layouts before it).
pub fn device_pools(snap: &Snapshot, dev: &Device, tl: &Timeline) -> DevicePools {
    if !dev.segments.iter().any(|s| s.segment_pool_id.is_some()) {
        return DevicePools::default();
    }
    let mut sums: BTreeMap<(i64, i64), Sums> = BTreeMap::new();
    for s in &dev.segments {
        let Some(id) = s.segment_pool_id else {
            continue;
        };
        let e = sums.entry(id).or_default();
        e.reserved = e.reserved.saturating_add(s.total_size);
        e.allocated = e.allocated.saturating_add(s.allocated_bytes());
        e.active = e.active.saturating_add(s.active_bytes());
        e.segments = e.segments.saturating_add(1);
        e.capture |= stack_shows_capture(snap, s.stack);
    }
    for (&i, &id) in &tl.segment_pools {
        if let (Some(e), Some(ev)) = (sums.get_mut(&id), dev.events.get(i as usize)) {
            e.capture |= stack_shows_capture(snap, ev.stack);
        }
    }
    let has_log = !dev.events.is_empty();
    for seg in tl.end.segments.values() {
        let Some(e) = seg.pool_id.and_then(|id| sums.get_mut(&id)) else {
            continue;
        };
        for b in seg.blocks.values() {
            // With no log at all, no block is mentioned by one: every allocated block is a ghost.
            let ghost =
                b.state == BlockState::ActiveAllocated && (b.alloc_event.is_none() || !has_log);
            if ghost {
                e.ghost_blocks = e.ghost_blocks.saturating_add(1);
                e.ghost_bytes = e.ghost_bytes.saturating_add(b.size);
            }
        }
    }
    let pools = sums
        .into_iter()
        .map(|(id, s)| pool_report(id, s, tl))
        .collect();
    let unknown_pool_peak_reserved_bytes = tl
        .pool_peaks
        .get(&None)
        .map(|p| p.reserved.bytes)
        .unwrap_or(0);
    DevicePools {
        pools,
        unknown_pool_peak_reserved_bytes,
        whatif: graph_peak_effect(snap, dev, tl),
    }
}

fn pool_report(id: (i64, i64), s: Sums, tl: &Timeline) -> PoolReport {
    let (kind, kind_evidence) = if id == DEFAULT_POOL {
        (PoolKind::Default, KindEvidence::DefaultId)
    } else if id.1 == 0 {
        (PoolKind::Graph, KindEvidence::GraphId)
    } else if s.capture {
        (PoolKind::Graph, KindEvidence::CaptureStack)
    } else {
        (PoolKind::User, KindEvidence::UserId)
    };
    let key: PoolKey = Some(id);
    let peak = tl.pool_peaks.get(&key).copied().unwrap_or_default();
    let before_log = tl.initial.pool_reserved.get(&key).copied().unwrap_or(0) > 0;
    let seen = peak.reserved.bytes.max(s.reserved);
    PoolReport {
        pool_id: [id.0, id.1],
        kind,
        kind_evidence,
        reserved_bytes: s.reserved,
        allocated_bytes: s.allocated,
        active_bytes: s.active,
        segments: s.segments,
        peak_reserved_bytes: seen,
        peak_reserved_exact: !before_log
            && !tl.is_empty()
            && peak.reserved_with_unknown <= peak.reserved.bytes,
        peak_event: peak.reserved.event.map(|e| e.0),
        ghost_blocks: s.ghost_blocks,
        ghost_bytes: s.ghost_bytes,
    }
}
