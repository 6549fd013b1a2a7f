//! Replaying a device's trace with the caching allocator's own accounting.
//!
//! A snapshot gives the final state and a log of what happened; users want to know what was
//! true at the peak or at the OOM, and torch's `memory_stats()` counters are the yardstick. The
//! counters only come out exact with torch's semantics: requests are rounded up to 512-byte
//! multiples, large blocks may be handed out unsplit (so a block's size comes from the
//! segment layout, not from the request), `allocated` drops at `free_requested` but `active`
//! only at `free_completed`, and `inactive_split_bytes` counts free blocks in segments that are
//! split. So the replay keeps the layout (segments and their active blocks), not just sums.
//!
//! The log may start after memory was already in use (recording began late, or the ring
//! buffer dropped the oldest entries). The initial state is then inferred: segments and blocks
//! that are freed before they are allocated, or that are live at the end and never touched,
//! existed before the first entry. Peaks seen in such a log are lower bounds, and are labelled so.

use std::collections::BTreeMap;

mod checkpoint;
mod split;
use checkpoint::Checkpoint;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::model::{
    Action, AllocatorSettings, BlockState, Device, Event, EventIdx, Events, Pool, StackId,
    MIN_BLOCK, SMALL_SIZE,
};

/// Rounds a request the way `CUDACachingAllocator::round_size` does.
pub fn round_size(size: u64, settings: &AllocatorSettings) -> u64 {
    if size < MIN_BLOCK {
        return MIN_BLOCK;
    }
    let divisions = power2_divisions(size, &settings.roundup_power2_divisions);
    if divisions > 1 && size > MIN_BLOCK.saturating_mul(divisions) {
        roundup_power2_next_division(size, divisions)
    } else {
        // Saturates for requests within 512 bytes of 2^64 (only hostile logs have them).
        size.div_ceil(MIN_BLOCK).saturating_mul(MIN_BLOCK)
    }
}

fn power2_divisions(size: u64, table: &[u64]) -> u64 {
    if table.is_empty() {
        return 0;
    }
    let log_size = 63 - size.leading_zeros() as i64;
    let interval_start = 20; // 1 MiB
    let idx = (log_size - interval_start).clamp(0, table.len() as i64 - 1) as usize;
    table[idx]
}

fn roundup_power2_next_division(size: u64, divisions: u64) -> u64 {
    if size.is_power_of_two() {
        return size;
    }
    let floor = 1u64 << (63 - size.leading_zeros());
    let step = floor >> (63 - divisions.leading_zeros());
    if step == 0 {
        return floor << 1;
    }
    let r = size & !(step - 1);
    if r == size {
        size
    } else {
        r.saturating_add(step)
    }
}

/// The allocator's running counters (bytes), as `torch.cuda.memory_stats()` names them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counters {
    /// `allocated_bytes.all`: blocks handed out and not yet freed by the program.
    pub allocated: u64,
    /// `active_bytes.all`: allocated plus freed-but-pending (`record_stream`).
    pub active: u64,
    /// `reserved_bytes.all`: memory held from the driver.
    pub reserved: u64,
    /// `requested_bytes.all`: what the program asked for, before rounding; like `active`, it
    /// drops at `free_completed`.
    pub requested: u64,
    /// `inactive_split_bytes.all`: free bytes in split (partly used) non-expandable segments.
    pub inactive_split: u64,
    /// `segment.all`: non-expandable segments (torch does not count expandable ones).
    pub segments: u64,
    /// Expandable segments (reported apart: torch keeps them out of `segment.all`).
    pub expandable_segments: u64,
    /// Free bytes inside expandable segments that hold active blocks (torch reports 0 for these).
    pub expandable_inactive: u64,
}

/// A block in use (allocated, or freed but pending on another stream).
#[derive(Clone, Debug, PartialEq)]
pub struct LiveBlock {
    pub address: u64,
    pub size: u64,
    pub requested: u64,
    pub state: BlockState,
    pub stream: u64,
    pub stack: StackId,
    /// The trace entry that allocated it; `None` when it predates the log.
    pub alloc_event: Option<EventIdx>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SegState {
    pub address: u64,
    pub size: u64,
    pub stream: u64,
    pub pool: Pool,
    pub expandable: bool,
    pub stack: StackId,
    /// The private pool the segment belongs to (`segment_pool_id`); `None` where the capture
    /// cannot tell (see [`PoolKey`]).
    pub pool_id: PoolKey,
    /// Active blocks by address; the gaps between them are free blocks.
    pub blocks: BTreeMap<u64, LiveBlock>,
    pub active_bytes: u64,
}

impl SegState {
    pub fn end(&self) -> u64 {
        self.address.saturating_add(self.size)
    }

    /// Free byte ranges `[start, end)` of this segment, in address order.
    pub fn free_ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let mut cursor = self.address;
        let end = self.end();
        let mut it = self.blocks.values();
        let mut done = false;
        std::iter::from_fn(move || loop {
            if done {
                return None;
            }
            match it.next() {
                Some(b) => {
                    let start = cursor;
                    cursor = cursor.max(b.address.saturating_add(b.size));
                    if b.address > start {
                        return Some((start, b.address));
                    }
                }
                None => {
                    done = true;
                    if end > cursor {
                        return Some((cursor, end));
                    }
                    return None;
                }
            }
        })
    }

    pub fn largest_free(&self) -> u64 {
        self.free_ranges()
            .map(|(a, b)| b.saturating_sub(a))
            .max()
            .unwrap_or(0)
    }

    fn inactive_split(&self) -> u64 {
        if self.blocks.is_empty() {
            0
        } else {
            self.size.saturating_sub(self.active_bytes)
        }
    }
}

/// Which memory pool a segment belongs to: its `segment_pool_id` (`(0, 0)` the default
/// pool), or `None` where the capture cannot tell. torch 2.11's trace entries do not name a
/// pool, so a segment made in the log takes the id the snapshot lists for it only when it is
/// the one alive at the dump; one freed before the dump is of an unknown pool (not guessed).
pub type PoolKey = Option<(i64, i64)>;

/// The default pool's id.
pub const DEFAULT_POOL: (i64, i64) = (0, 0);

/// The pool of each segment-making entry of a log whose segment is alive at the dump (by event
/// index): what carries `segment_pool_id` through the replay.
pub type SegmentPools = HashMap<u32, (i64, i64)>;

/// The allocator's layout at one point of the log.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct State {
    pub segments: BTreeMap<u64, SegState>,
    pub counters: Counters,
    /// Reserved bytes per pool (only pools that held a segment at some point).
    pub pool_reserved: BTreeMap<PoolKey, u64>,
}

impl State {
    /// The start of the segment holding `addr`, if any.
    pub fn segment_of(&self, addr: u64) -> Option<u64> {
        let (&a, s) = self.segments.range(..=addr).next_back()?;
        (addr < s.end()).then_some(a)
    }

    /// The segment holding `addr`, if any: one descent of the map (what `segment_of` and a
    /// `get_mut` of its key took two for).
    fn segment_mut(&mut self, addr: u64) -> Option<&mut SegState> {
        let (_, s) = self.segments.range_mut(..=addr).next_back()?;
        (addr < s.end()).then_some(s)
    }

    fn seg_counters(c: &mut Counters, s: &SegState, sign: i8) {
        State::seg_counters_of(c, s.expandable, s.inactive_split(), sign);
    }

    /// [`State::seg_counters`] for a segment of `inactive` inactive split bytes.
    fn seg_counters_of(c: &mut Counters, expandable: bool, inactive: u64, sign: i8) {
        let (split, exp_inactive) = if expandable {
            (0, inactive)
        } else {
            (inactive, 0)
        };
        if sign > 0 {
            c.inactive_split = c.inactive_split.saturating_add(split);
            c.expandable_inactive = c.expandable_inactive.saturating_add(exp_inactive);
        } else {
            c.inactive_split = c.inactive_split.saturating_sub(split);
            c.expandable_inactive = c.expandable_inactive.saturating_sub(exp_inactive);
        }
    }

    fn pool_add(&mut self, key: PoolKey, bytes: u64) {
        let v = self.pool_reserved.entry(key).or_insert(0);
        *v = v.saturating_add(bytes);
    }

    fn pool_sub(&mut self, key: PoolKey, bytes: u64) {
        if let Some(v) = self.pool_reserved.get_mut(&key) {
            *v = v.saturating_sub(bytes);
        }
    }

    /// All live blocks, in address order.
    pub fn live_blocks(&self) -> impl Iterator<Item = &LiveBlock> {
        self.segments.values().flat_map(|s| s.blocks.values())
    }
}

/// Something in the log that the replayed layout could not explain: the first one is where
/// replay and reality diverged.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Anomaly {
    pub event: EventIdx,
    /// What it did (serialized as its sentence).
    pub what: AnomalyKind,
}

/// What an entry of the log did that the replayed layout could not explain, at `addr` (the
/// entry's address).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnomalyKind {
    /// An `alloc` outside every known segment.
    AllocOutsideSegments { addr: u64 },
    /// An `alloc` over a live block.
    AllocOverlaps { addr: u64 },
    /// An `alloc` of `rounded` bytes where only `free` bytes are free.
    AllocDoesNotFit { addr: u64, rounded: u64, free: u64 },
    /// A `free_requested` where no block is live.
    FreeRequestedNoBlock { addr: u64 },
    /// A `free_requested` of a block already freed.
    FreeRequestedTwice { addr: u64 },
    /// A `free_completed` outside every known segment.
    FreeCompletedOutsideSegments { addr: u64 },
    /// A `free_completed` where no block is live.
    FreeCompletedNoBlock { addr: u64 },
    /// A `segment_alloc` over a known segment.
    SegmentAllocOverlaps { addr: u64 },
    /// A `segment_free` where no segment starts.
    SegmentFreeNoSegment { addr: u64 },
    /// A `segment_free` of a segment that still holds `blocks` live blocks.
    SegmentFreeWithLiveBlocks { addr: u64, blocks: usize },
    /// A `segment_map` of 0 bytes.
    EmptySegmentMap { addr: u64 },
    /// A `segment_unmap` outside every known segment.
    UnmapOutsideSegments { addr: u64 },
}

/// One difference between the replayed end state and the snapshot's own segments, at `addr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mismatch {
    /// The replay has a segment the snapshot does not list.
    SegmentNotInSnapshot { addr: u64, size: u64 },
    /// The snapshot lists a segment the replay does not have.
    SegmentNotReplayed { addr: u64 },
    /// A segment's size differs.
    SegmentSize {
        addr: u64,
        replay: u64,
        snapshot: u64,
    },
    /// A block is live in the snapshot and not in the replay.
    BlockNotReplayed {
        addr: u64,
        size: u64,
        state: BlockState,
    },
    /// A block is live in the replay and not in the snapshot.
    BlockNotInSnapshot { addr: u64, size: u64 },
    /// A block's size or state differs.
    BlockDiffers {
        addr: u64,
        replay: (u64, BlockState),
        snapshot: (u64, BlockState),
    },
}

/// The allocator's view when an allocation failed.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct OomFacts {
    pub event: EventIdx,
    pub requested_bytes: u64,
    pub rounded_bytes: u64,
    pub pool: Pool,
    pub stream: u64,
    pub device_free_bytes: Option<u64>,
    pub counters: Counters,
    /// Largest free block in the request's pool on its stream (what best-fit could have used).
    pub largest_free_block_bytes: u64,
    /// All free bytes in the request's pool on its stream.
    pub free_in_pool_bytes: u64,
    /// Free bytes in segments that also hold live blocks (cannot be returned to the driver).
    pub free_in_split_segments_bytes: u64,
    /// Free bytes of the request's pool that lie in whole mapping units (2 MiB small, 20 MiB
    /// large): what expandable segments could unmap and map again.
    pub free_whole_pages_bytes: u64,
    /// Free bytes in segments of a known private pool (a graph's, a `MemPool`'s): reserved,
    /// but only that pool's requests can use them. Left out of the figures above.
    #[serde(skip)]
    pub private_pool_free_bytes: u64,
    pub stack: StackId,
    pub time_us: Option<i64>,
}

/// Per-event samples of the counters the views draw: `allocated[i]` is the value after event
/// `i`. (`requested` is not kept per event: nothing reads it but its peak, and it would cost
/// 8 bytes per trace entry, issue #43.)
#[derive(Clone, Debug, Default)]
pub struct Series {
    pub allocated: Vec<u64>,
    pub active: Vec<u64>,
    pub reserved: Vec<u64>,
}

/// Peak of one counter and where it was first reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Peak {
    pub bytes: u64,
    /// Index of the event after which it was first reached; `None` when it is the initial state.
    pub event: Option<EventIdx>,
}

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Peaks {
    pub allocated: Peak,
    pub active: Peak,
    pub reserved: Peak,
    pub requested: Peak,
    pub inactive_split: Peak,
    pub segments: Peak,
}

/// How the replayed end state compares with the snapshot's own `segments`.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Consistency {
    pub consistent: bool,
    pub segments_compared: usize,
    pub blocks_compared: usize,
    pub mismatches: usize,
    /// The first difference (serialized as its sentence).
    pub first_mismatch: Option<Mismatch>,
    /// The first log entry the layout could not explain.
    pub first_anomaly: Option<Anomaly>,
}

/// Everything a full replay of one device yields.
#[derive(Clone, Debug)]
pub struct Timeline {
    pub device: u32,
    pub initial: State,
    pub end: State,
    pub series: Series,
    pub peaks: Peaks,
    pub ooms: Vec<OomFacts>,
    pub anomalies: Vec<Anomaly>,
    /// The log does not start from an empty allocator: peaks before it are unknown.
    pub starts_mid_run: bool,
    /// Some blocks predating the log were freed in it; their sizes are rounded requests, not layout sizes.
    pub approximate_initial_blocks: usize,
    pub consistency: Consistency,
    /// Per pool (unknown included), its reserved peak within the log.
    pub pool_peaks: BTreeMap<PoolKey, PoolPeak>,
    /// The pools of the segments the log made that are alive at the dump.
    pub segment_pools: SegmentPools,
    /// Replay states every few thousand events, for fast random access.
    checkpoints: Vec<(usize, Checkpoint)>,
}

/// One pool's reserved peak in the log, and how far segments of unknown pool could raise it.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct PoolPeak {
    pub reserved: Peak,
    /// The highest of this pool's reserved bytes plus those of unknown pool at the same
    /// moment: the peak is exact where this equals it (no unknown segment could have been
    /// this pool's while it was highest).
    pub reserved_with_unknown: u64,
}

/// Most pools whose peaks are bounded against unknown segments one by one; past it (only a
/// hostile log has that many), the bound is not kept and every peak counts as inexact.
const POOL_BOUND_LIMIT: usize = 64;

/// The pool of each segment-making entry whose segment is the one alive at the dump: the last
/// `segment_alloc` at a start address no later `segment_free` undid, or a `segment_map` inside
/// an expandable segment alive at the dump that no later `segment_unmap` touched.
pub fn segment_pools(dev: &Device) -> SegmentPools {
    let mut out = SegmentPools::default();
    let by_addr: HashMap<u64, (i64, i64)> = dev
        .segments
        .iter()
        .filter_map(|s| Some((s.address, s.segment_pool_id?)))
        .collect();
    if by_addr.is_empty() && !dev.segments.iter().any(|s| s.is_expandable) {
        return out;
    }
    let mut gone: HashSet<u64> = HashSet::default();
    for (i, e) in dev.events.iter().enumerate().rev() {
        match e.action {
            Action::SegmentFree | Action::SegmentUnmap => {
                gone.insert(e.addr);
            }
            Action::SegmentAlloc if !gone.contains(&e.addr) => {
                gone.insert(e.addr);
                if let Some(&p) = by_addr.get(&e.addr) {
                    out.insert(i as u32, p);
                }
            }
            Action::SegmentMap => {
                let owner = dev
                    .segments
                    .iter()
                    .find(|s| s.is_expandable && s.address <= e.addr && e.addr < s.end());
                if let Some(p) = owner.and_then(|s| s.segment_pool_id) {
                    if !gone.contains(&e.addr) {
                        out.insert(i as u32, p);
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// After a segment event: raises the peaks of the pool that grew (and, where unknown segments
/// grew, the bound of every pool).
fn track_pool_peaks(peaks: &mut BTreeMap<PoolKey, PoolPeak>, st: &State, e: &Event, i: usize) {
    let Some(key) = st
        .segment_of(e.addr)
        .and_then(|a| st.segments.get(&a))
        .map(|s| s.pool_id)
    else {
        return;
    };
    track_pool_peaks_of(peaks, key, &st.pool_reserved, i);
}

/// [`track_pool_peaks`] for a segment of pool `key`, with the pools' reserved bytes after entry `i`.
fn track_pool_peaks_of(
    peaks: &mut BTreeMap<PoolKey, PoolPeak>,
    key: PoolKey,
    pool_reserved: &BTreeMap<PoolKey, u64>,
    i: usize,
) {
    let unknown = pool_reserved.get(&None).copied().unwrap_or(0);
    let mine = pool_reserved.get(&key).copied().unwrap_or(0);
    let p = peaks.entry(key).or_default();
    if mine > p.reserved.bytes {
        p.reserved = Peak {
            bytes: mine,
            event: Some(EventIdx(i as u32)),
        };
    }
    if key.is_some() {
        p.reserved_with_unknown = p.reserved_with_unknown.max(mine.saturating_add(unknown));
    } else if pool_reserved.len() <= POOL_BOUND_LIMIT {
        for (k, &v) in pool_reserved {
            if k.is_some() && v > 0 {
                let q = peaks.entry(*k).or_default();
                q.reserved_with_unknown = q.reserved_with_unknown.max(v.saturating_add(unknown));
            }
        }
    } else {
        for (k, q) in peaks.iter_mut() {
            if k.is_some() {
                q.reserved_with_unknown = u64::MAX;
            }
        }
    }
}

/// Replay configuration derived from the recorded allocator settings.
#[derive(Clone, Debug)]
pub struct Rules {
    pub settings: AllocatorSettings,
}

impl Rules {
    pub fn from_settings(s: &AllocatorSettings) -> Rules {
        Rules {
            settings: s.clone(),
        }
    }

    /// `should_split` from the allocator: whether a free block of `block_size` serving a
    /// `rounded` request is split, or handed out whole.
    pub fn should_split(
        &self,
        pool: Pool,
        expandable: bool,
        block_size: u64,
        rounded: u64,
    ) -> bool {
        let remaining = block_size.saturating_sub(rounded);
        if pool == Pool::Small || expandable {
            remaining >= MIN_BLOCK
        } else {
            let below_max = self.settings.max_split_size.is_none_or(|m| rounded < m);
            below_max && remaining > SMALL_SIZE
        }
    }
}

/// Replays one device's log, one event at a time.
pub struct Replayer<'a> {
    rules: Rules,
    events: &'a Events,
    state: State,
    anomalies: Vec<Anomaly>,
    ooms: Vec<OomFacts>,
    /// The pools of segments made in the log ([`segment_pools`]); without it they are unknown.
    pools: Option<&'a SegmentPools>,
}

impl<'a> Replayer<'a> {
    pub fn new(rules: Rules, events: &'a Events, initial: State) -> Replayer<'a> {
        Replayer {
            rules,
            events,
            state: initial,
            anomalies: Vec::new(),
            ooms: Vec::new(),
            pools: None,
        }
    }

    /// Gives segments made in the log the pools the snapshot lists for them.
    pub fn with_pools(mut self, pools: &'a SegmentPools) -> Replayer<'a> {
        self.pools = Some(pools);
        self
    }

    fn pool_of_event(&self, i: usize) -> PoolKey {
        self.pools.and_then(|p| p.get(&(i as u32)).copied())
    }

    fn anomaly(&mut self, i: usize, what: AnomalyKind) {
        if self.anomalies.len() < 1000 {
            self.anomalies.push(Anomaly {
                event: EventIdx(i as u32),
                what,
            });
        }
    }

    /// Applies event `i`.
    pub fn step(&mut self, i: usize) {
        let e = self.events[i];
        match e.action {
            Action::Alloc => self.handle_alloc(i, &e),
            Action::FreeRequested => self.handle_free_requested(i, &e),
            Action::FreeCompleted => self.handle_free_completed(i, &e),
            Action::SegmentAlloc => self.handle_segment_alloc(i, &e, false),
            Action::SegmentFree => self.handle_segment_free(i, &e),
            Action::SegmentMap => self.handle_segment_map(i, &e),
            Action::SegmentUnmap => self.handle_segment_unmap(i, &e),
            Action::Oom => self.handle_oom(i, &e),
            // An annotation names a live block; it changes no memory.
            Action::Snapshot | Action::Annotate | Action::Other => {}
        }
    }

    fn handle_alloc(&mut self, i: usize, e: &Event) {
        let rounded = round_size(e.size, &self.rules.settings);
        let rules = &self.rules;
        let st = &mut self.state;
        let Some(seg) = st.segments.range_mut(..=e.addr).next_back().map(|(_, s)| s) else {
            self.anomaly(i, AnomalyKind::AllocOutsideSegments { addr: e.addr });
            return;
        };
        if e.addr >= seg.end() {
            self.anomaly(i, AnomalyKind::AllocOutsideSegments { addr: e.addr });
            return;
        }
        State::seg_counters(&mut st.counters, seg, -1);
        // The free range that starts at (or contains) the address.
        let prev_end = seg
            .blocks
            .range(..=e.addr)
            .next_back()
            .map(|(_, b)| b.address.saturating_add(b.size))
            .unwrap_or(seg.address);
        let next_start = seg
            .blocks
            .range(e.addr..)
            .next()
            .map(|(&a, _)| a)
            .unwrap_or(seg.end());
        let mut anomaly = None;
        let size = if prev_end > e.addr || next_start <= e.addr {
            anomaly = Some(AnomalyKind::AllocOverlaps { addr: e.addr });
            rounded
        } else {
            let free = next_start - e.addr;
            if free < rounded {
                anomaly = Some(AnomalyKind::AllocDoesNotFit {
                    addr: e.addr,
                    rounded,
                    free,
                });
                rounded
            } else if rules.should_split(seg.pool, seg.expandable, free, rounded) {
                rounded
            } else {
                free
            }
        };
        seg.blocks.insert(
            e.addr,
            LiveBlock {
                address: e.addr,
                size,
                requested: e.size,
                state: BlockState::ActiveAllocated,
                stream: self.events.stream(i),
                stack: e.stack,
                alloc_event: Some(EventIdx(i as u32)),
            },
        );
        seg.active_bytes = seg.active_bytes.saturating_add(size);
        State::seg_counters(&mut st.counters, seg, 1);
        st.counters.allocated = st.counters.allocated.saturating_add(size);
        st.counters.active = st.counters.active.saturating_add(size);
        st.counters.requested = st.counters.requested.saturating_add(e.size);
        if let Some(a) = anomaly {
            self.anomaly(i, a);
        }
    }

    fn find_block(&mut self, addr: u64) -> Option<&mut LiveBlock> {
        self.state.segment_mut(addr)?.blocks.get_mut(&addr)
    }

    fn handle_free_requested(&mut self, i: usize, e: &Event) {
        let Some(b) = self.find_block(e.addr) else {
            self.anomaly(i, AnomalyKind::FreeRequestedNoBlock { addr: e.addr });
            return;
        };
        if b.state != BlockState::ActiveAllocated {
            self.anomaly(i, AnomalyKind::FreeRequestedTwice { addr: e.addr });
            return;
        }
        b.state = BlockState::ActivePendingFree;
        let size = b.size;
        let c = &mut self.state.counters;
        c.allocated = c.allocated.saturating_sub(size);
    }

    fn handle_free_completed(&mut self, i: usize, e: &Event) {
        let st = &mut self.state;
        let Some(seg) = st.segments.range_mut(..=e.addr).next_back().map(|(_, s)| s) else {
            let what = AnomalyKind::FreeCompletedOutsideSegments { addr: e.addr };
            self.anomaly(i, what);
            return;
        };
        if e.addr >= seg.end() {
            let what = AnomalyKind::FreeCompletedOutsideSegments { addr: e.addr };
            self.anomaly(i, what);
            return;
        }
        let Some(b) = seg.blocks.remove(&e.addr) else {
            self.anomaly(i, AnomalyKind::FreeCompletedNoBlock { addr: e.addr });
            return;
        };
        let was_allocated = b.state == BlockState::ActiveAllocated;
        // Before the removal the segment held `b`: its inactive split bytes were these.
        let inactive = seg.size.saturating_sub(seg.active_bytes);
        State::seg_counters_of(&mut st.counters, seg.expandable, inactive, -1);
        seg.active_bytes = seg.active_bytes.saturating_sub(b.size);
        State::seg_counters(&mut st.counters, seg, 1);
        // Like torch's free_block: active and requested bytes drop only now.
        st.counters.active = st.counters.active.saturating_sub(b.size);
        st.counters.requested = st.counters.requested.saturating_sub(b.requested);
        if was_allocated {
            // free_completed without free_requested (older logs): the block leaves allocated too.
            st.counters.allocated = st.counters.allocated.saturating_sub(b.size);
        }
    }

    fn handle_segment_alloc(&mut self, i: usize, e: &Event, expandable: bool) {
        if self.state.segment_of(e.addr).is_some() {
            self.anomaly(i, AnomalyKind::SegmentAllocOverlaps { addr: e.addr });
            return;
        }
        let seg = SegState {
            address: e.addr,
            size: e.size,
            stream: self.events.stream(i),
            pool: segment_pool(e.size, expandable, &self.events[i..]),
            expandable,
            stack: e.stack,
            pool_id: self.pool_of_event(i),
            blocks: BTreeMap::new(),
            active_bytes: 0,
        };
        self.state.pool_add(seg.pool_id, e.size);
        let c = &mut self.state.counters;
        c.reserved = c.reserved.saturating_add(e.size);
        if expandable {
            c.expandable_segments = c.expandable_segments.saturating_add(1);
        } else {
            c.segments = c.segments.saturating_add(1);
        }
        self.state.segments.insert(e.addr, seg);
    }

    fn handle_segment_free(&mut self, i: usize, e: &Event) {
        let Some(seg) = self.state.segments.remove(&e.addr) else {
            self.anomaly(i, AnomalyKind::SegmentFreeNoSegment { addr: e.addr });
            return;
        };
        if !seg.blocks.is_empty() {
            let what = AnomalyKind::SegmentFreeWithLiveBlocks {
                addr: e.addr,
                blocks: seg.blocks.len(),
            };
            self.anomaly(i, what);
        }
        self.state.pool_sub(seg.pool_id, seg.size);
        let c = &mut self.state.counters;
        State::seg_counters(c, &seg, -1);
        c.reserved = c.reserved.saturating_sub(seg.size);
        if seg.expandable {
            c.expandable_segments = c.expandable_segments.saturating_sub(1);
        } else {
            c.segments = c.segments.saturating_sub(1);
        }
    }

    /// Expandable segments grow by mapping pages next to mapped ones. The snapshot lists each
    /// contiguous mapped range as a segment, so a map that continues a range extends it, one that
    /// fills the hole between two ranges joins them, and any other starts a new one.
    fn handle_segment_map(&mut self, i: usize, e: &Event) {
        if e.size == 0 {
            self.anomaly(i, AnomalyKind::EmptySegmentMap { addr: e.addr });
            return;
        }
        let end = e.addr.saturating_add(e.size);
        let prev = self
            .state
            .segments
            .range(..=e.addr)
            .next_back()
            .filter(|(_, s)| s.expandable && s.end() == e.addr)
            .map(|(&a, _)| a);
        let next = self
            .state
            .segments
            .get(&end)
            .filter(|s| s.expandable)
            .map(|s| s.address)
            .filter(|&n| Some(n) != prev);
        let st = &mut self.state;
        match (prev, next) {
            (Some(a), n) => {
                let seg = st.segments.get_mut(&a).expect("found above");
                State::seg_counters(&mut st.counters, seg, -1);
                seg.size = seg.size.saturating_add(e.size);
                let key = seg.pool_id;
                st.pool_add(key, e.size);
                if let Some(n) = n {
                    let right = st.segments.remove(&n).expect("found above");
                    State::seg_counters(&mut st.counters, &right, -1);
                    // A range joined to its left neighbour counts in the left one's pool.
                    st.pool_sub(right.pool_id, right.size);
                    st.pool_add(key, right.size);
                    let seg = st.segments.get_mut(&a).expect("found above");
                    seg.size = seg.size.saturating_add(right.size);
                    seg.active_bytes = seg.active_bytes.saturating_add(right.active_bytes);
                    seg.blocks.extend(right.blocks);
                    st.counters.expandable_segments =
                        st.counters.expandable_segments.saturating_sub(1);
                }
                let seg = st.segments.get_mut(&a).expect("found above");
                State::seg_counters(&mut st.counters, seg, 1);
                st.counters.reserved = st.counters.reserved.saturating_add(e.size);
            }
            (None, Some(n)) => {
                let mut seg = st.segments.remove(&n).expect("found above");
                State::seg_counters(&mut st.counters, &seg, -1);
                seg.address = e.addr;
                seg.size = seg.size.saturating_add(e.size);
                st.pool_add(seg.pool_id, e.size);
                State::seg_counters(&mut st.counters, &seg, 1);
                st.segments.insert(e.addr, seg);
                st.counters.reserved = st.counters.reserved.saturating_add(e.size);
            }
            (None, None) => self.handle_segment_alloc(i, e, true),
        }
    }

    fn handle_segment_unmap(&mut self, i: usize, e: &Event) {
        let Some(a) = self.state.segment_of(e.addr) else {
            self.anomaly(i, AnomalyKind::UnmapOutsideSegments { addr: e.addr });
            return;
        };
        let st = &mut self.state;
        let mut seg = st.segments.remove(&a).expect("found above");
        let unmap_end = e.addr.saturating_add(e.size).min(seg.end());
        State::seg_counters(&mut st.counters, &seg, -1);
        st.counters.reserved = st.counters.reserved.saturating_sub(unmap_end - e.addr);
        st.pool_sub(seg.pool_id, unmap_end - e.addr);
        st.counters.expandable_segments = st.counters.expandable_segments.saturating_sub(1);
        // What stays mapped on either side becomes (up to) two segments, as the snapshot lists them.
        let right_blocks = seg.blocks.split_off(&unmap_end);
        if unmap_end < seg.end() {
            let right = SegState {
                address: unmap_end,
                size: seg.end() - unmap_end,
                active_bytes: right_blocks
                    .values()
                    .fold(0u64, |a, b| a.saturating_add(b.size)),
                blocks: right_blocks,
                ..seg.clone()
            };
            seg.active_bytes = seg.active_bytes.saturating_sub(right.active_bytes);
            State::seg_counters(&mut st.counters, &right, 1);
            st.counters.expandable_segments += 1;
            st.segments.insert(unmap_end, right);
        }
        if e.addr > seg.address {
            seg.size = e.addr - seg.address;
            State::seg_counters(&mut st.counters, &seg, 1);
            st.counters.expandable_segments += 1;
            st.segments.insert(a, seg);
        }
    }

    fn handle_oom(&mut self, i: usize, e: &Event) {
        let rounded = round_size(e.size, &self.rules.settings);
        let stream = self.events.stream(i);
        let pool = Pool::for_rounded_size(rounded);
        let mut largest = 0u64;
        let mut free_pool = 0u64;
        let mut free_split = 0u64;
        let mut whole_pages = 0u64;
        // Expandable segments map memory in units of the pool's segment size (kSmallBuffer,
        // kLargeBuffer): only whole units of free memory could be unmapped and reused.
        let page: u64 = if pool == Pool::Small {
            2 << 20
        } else {
            20 << 20
        };
        let mut private_free = 0u64;
        for s in self.state.segments.values() {
            let split = !s.blocks.is_empty();
            // A private pool's free memory serves only its own requests; an OOM's request is
            // taken to be the default pool's (torch 2.11's entries do not say).
            let private = s.pool_id.is_some_and(|p| p != DEFAULT_POOL);
            for (a, b) in s.free_ranges() {
                let len = b - a;
                if private {
                    private_free = private_free.saturating_add(len);
                    continue;
                }
                if s.pool == pool && s.stream == stream {
                    largest = largest.max(len);
                    free_pool = free_pool.saturating_add(len);
                }
                if split {
                    free_split = free_split.saturating_add(len);
                }
                if s.pool == pool {
                    let first = a.div_ceil(page).saturating_mul(page);
                    let last = b / page * page;
                    if last > first {
                        whole_pages = whole_pages.saturating_add(last - first);
                    }
                }
            }
        }
        self.ooms.push(OomFacts {
            event: EventIdx(i as u32),
            requested_bytes: e.size,
            rounded_bytes: rounded,
            pool,
            stream: self.events.stream(i),
            device_free_bytes: self.events.device_free(i),
            counters: self.state.counters,
            largest_free_block_bytes: largest,
            free_in_pool_bytes: free_pool,
            free_in_split_segments_bytes: free_split,
            free_whole_pages_bytes: whole_pages,
            private_pool_free_bytes: private_free,
            stack: e.stack,
            time_us: e.time_us(),
        });
    }

    /// The layout after the events applied so far.
    pub fn state(&self) -> &State {
        &self.state
    }

    /// Ends the replay, handing over the final state.
    pub fn finish(self) -> (State, Vec<Anomaly>, Vec<OomFacts>) {
        (self.state, self.anomalies, self.ooms)
    }
}

/// A segment's pool from its size: small segments are exactly 2 MiB (`kSmallBuffer`); large
/// segments of 2 MiB do not exist (large requests are at least 1 MiB + 512 and use 20 MiB
/// buffers below 10 MiB). An expandable segment's pool is told by the first block put in it.
fn segment_pool(size: u64, expandable: bool, rest: &[Event]) -> Pool {
    if !expandable {
        return if size <= crate::model::SMALL_BUFFER {
            Pool::Small
        } else {
            Pool::Large
        };
    }
    let _ = rest;
    if size <= crate::model::SMALL_BUFFER {
        Pool::Small
    } else {
        Pool::Large
    }
}

/// Works out what existed before the first log entry (see the module docs).
fn initial_state(dev: &Device, rules: &Rules) -> (State, usize) {
    let mut first_seg_action: HashMap<u64, Action> = HashMap::default();
    let mut first_block_action: HashMap<u64, (Action, usize)> = HashMap::default();
    for (i, e) in dev.events.iter().enumerate() {
        match e.action {
            Action::SegmentAlloc
            | Action::SegmentFree
            | Action::SegmentMap
            | Action::SegmentUnmap => {
                first_seg_action.entry(e.addr).or_insert(e.action);
            }
            Action::Alloc | Action::FreeRequested | Action::FreeCompleted => {
                first_block_action.entry(e.addr).or_insert((e.action, i));
            }
            _ => {}
        }
    }
    let mut st = State::default();
    // Segments from the end state that the log never allocated.
    for s in &dev.segments {
        // An expandable segment's listed start moves when its first pages are unmapped: it was
        // made in the log when the log mapped any part of it.
        let created_in_log = matches!(
            first_seg_action.get(&s.address),
            Some(Action::SegmentAlloc | Action::SegmentMap)
        ) || (s.is_expandable
            && dev.events.iter().any(|e| {
                e.action == Action::SegmentMap
                    && e.addr < s.end()
                    && e.addr.saturating_add(e.size) > s.address
            }));
        if created_in_log {
            continue;
        }
        st.segments.insert(
            s.address,
            SegState {
                address: s.address,
                size: s.total_size,
                stream: s.stream,
                pool: s.pool,
                expandable: s.is_expandable,
                stack: s.stack,
                pool_id: s.segment_pool_id,
                blocks: BTreeMap::new(),
                active_bytes: 0,
            },
        );
    }
    // Segments freed in the log before any allocation of them.
    for (i, e) in dev.events.iter().enumerate() {
        if e.action == Action::SegmentFree
            && first_seg_action.get(&e.addr) == Some(&Action::SegmentFree)
            && !st.segments.contains_key(&e.addr)
        {
            st.segments.insert(
                e.addr,
                SegState {
                    address: e.addr,
                    size: e.size,
                    stream: dev.events.stream(i),
                    pool: if e.size <= crate::model::SMALL_BUFFER {
                        Pool::Small
                    } else {
                        Pool::Large
                    },
                    expandable: false,
                    stack: StackId::EMPTY,
                    // Freed before the dump: the snapshot does not say its pool.
                    pool_id: None,
                    blocks: BTreeMap::new(),
                    active_bytes: 0,
                },
            );
        }
    }
    // Expandable segments whose mapping shrank in the log: the unmapped bytes existed before.
    // (Handled approximately: an unmap of a segment we start with extends it back.)
    let mut approx = 0usize;
    let mut seen_block: HashSet<u64> = HashSet::default();
    let place = |st: &mut State, b: LiveBlock| {
        if let Some(a) = st.segment_of(b.address) {
            let seg = st.segments.get_mut(&a).expect("segment_of");
            seg.active_bytes = seg.active_bytes.saturating_add(b.size);
            seg.blocks.insert(b.address, b);
        }
    };
    // Blocks freed before being allocated in the log.
    for (&addr, &(action, i)) in &first_block_action {
        if action == Action::Alloc {
            continue;
        }
        let e = &dev.events[i];
        // Prefer the end state's layout when the block is still there with the same start.
        let rounded = round_size(e.size, &rules.settings);
        approx = approx.saturating_add(1);
        seen_block.insert(addr);
        place(
            &mut st,
            LiveBlock {
                address: addr,
                size: rounded,
                requested: e.size,
                state: if action == Action::FreeRequested {
                    BlockState::ActiveAllocated
                } else {
                    BlockState::ActivePendingFree
                },
                stream: dev.events.stream(i),
                stack: e.stack,
                alloc_event: None,
            },
        );
    }
    // Blocks live at the end that the log never touched.
    for s in &dev.segments {
        for b in &s.blocks {
            if b.state.is_active() && !first_block_action.contains_key(&b.address) {
                place(
                    &mut st,
                    LiveBlock {
                        address: b.address,
                        size: b.size,
                        requested: b.requested_size,
                        state: b.state,
                        stream: s.stream,
                        stack: b.stack,
                        alloc_event: None,
                    },
                );
            }
        }
    }
    // Counters of the initial state.
    let mut c = Counters::default();
    let mut pool_reserved: BTreeMap<PoolKey, u64> = BTreeMap::new();
    for s in st.segments.values() {
        let v = pool_reserved.entry(s.pool_id).or_insert(0);
        *v = v.saturating_add(s.size);
        c.reserved = c.reserved.saturating_add(s.size);
        if s.expandable {
            c.expandable_segments = c.expandable_segments.saturating_add(1);
        } else {
            c.segments = c.segments.saturating_add(1);
        }
        State::seg_counters(&mut c, s, 1);
        for b in s.blocks.values() {
            c.active = c.active.saturating_add(b.size);
            c.requested = c.requested.saturating_add(b.requested);
            if b.state == BlockState::ActiveAllocated {
                c.allocated = c.allocated.saturating_add(b.size);
            }
        }
    }
    st.counters = c;
    st.pool_reserved = pool_reserved;
    (st, approx)
}

/// Compares the replayed end state with the snapshot's recorded segments.
fn check_consistency(dev: &Device, end: &State, anomalies: &[Anomaly]) -> Consistency {
    let mut c = Consistency {
        first_anomaly: anomalies.first().cloned(),
        ..Consistency::default()
    };
    let note = |c: &mut Consistency, what: Mismatch| {
        c.mismatches = c.mismatches.saturating_add(1);
        if c.first_mismatch.is_none() {
            c.first_mismatch = Some(what);
        }
    };
    let recorded: HashMap<u64, &crate::model::Segment> =
        dev.segments.iter().map(|s| (s.address, s)).collect();
    for (a, s) in &end.segments {
        c.segments_compared = c.segments_compared.saturating_add(1);
        match recorded.get(a) {
            None => note(
                &mut c,
                Mismatch::SegmentNotInSnapshot {
                    addr: *a,
                    size: s.size,
                },
            ),
            Some(r) => {
                if r.total_size != s.size {
                    note(
                        &mut c,
                        Mismatch::SegmentSize {
                            addr: *a,
                            replay: s.size,
                            snapshot: r.total_size,
                        },
                    );
                }
                let rec_blocks: Vec<_> = r.blocks.iter().filter(|b| b.state.is_active()).collect();
                for rb in &rec_blocks {
                    c.blocks_compared = c.blocks_compared.saturating_add(1);
                    match s.blocks.get(&rb.address) {
                        None => note(
                            &mut c,
                            Mismatch::BlockNotReplayed {
                                addr: rb.address,
                                size: rb.size,
                                state: rb.state,
                            },
                        ),
                        Some(b) => {
                            if b.size != rb.size || b.state != rb.state {
                                note(
                                    &mut c,
                                    Mismatch::BlockDiffers {
                                        addr: rb.address,
                                        replay: (b.size, b.state),
                                        snapshot: (rb.size, rb.state),
                                    },
                                );
                            }
                        }
                    }
                }
                for b in s.blocks.values() {
                    if !rec_blocks.iter().any(|rb| rb.address == b.address) {
                        note(
                            &mut c,
                            Mismatch::BlockNotInSnapshot {
                                addr: b.address,
                                size: b.size,
                            },
                        );
                    }
                }
            }
        }
    }
    for a in recorded.keys() {
        if !end.segments.contains_key(a) {
            c.segments_compared = c.segments_compared.saturating_add(1);
            note(&mut c, Mismatch::SegmentNotReplayed { addr: *a });
        }
    }
    c.consistent = c.mismatches == 0;
    c
}

/// What copying `s` costs, in events' worth: two per segment, one per live block.
fn state_weight(s: &State) -> usize {
    s.segments
        .values()
        .map(|g| 2 + g.blocks.len())
        .fold(0usize, usize::saturating_add)
}

/// Replays a whole device log, keeping per-event series and checkpoints for random access, on
/// as many threads as [`crate::threads::wanted`] gives (see [`replay_on`]).
pub fn replay(dev: &Device, settings: &AllocatorSettings) -> Timeline {
    replay_on(dev, settings, crate::threads::wanted())
}

/// Fewest entries a log needs before its replay is split across threads: below it the
/// threads' start costs more than they save.
pub const SPLIT_MIN_EVENTS: usize = 1 << 16;

/// Fewest threads the split replay is taken on: it reads each incarnation's entries scattered
/// through the log, so it does about twice the serial replay's work in all, and on two threads
/// it was slower than the serial replay (BENCHMARKS.md, session 16).
pub const SPLIT_MIN_THREADS: usize = 4;

/// The environment variable that sets the fewest entries for a split (`0`: split every log,
/// on any count of threads above one): what the tests use to run the split on small captures.
pub const SPLIT_MIN_VAR: &str = "MEMSCOPE_REPLAY_SPLIT_MIN";

/// Whether a log of `n` entries is replayed split, on `threads` threads.
fn split_wanted(n: usize, threads: usize) -> bool {
    crate::threads::split_wanted(
        SPLIT_MIN_VAR,
        SPLIT_MIN_EVENTS,
        SPLIT_MIN_THREADS,
        n,
        threads,
    )
}

/// [`replay`] on `threads` threads: a log is split by segment ([`split`]) where it can be, is
/// long enough and enough threads are wanted ([`SPLIT_MIN_EVENTS`], [`SPLIT_MIN_THREADS`]); the
/// result is the serial replay's, whichever way it ran.
pub fn replay_on(dev: &Device, settings: &AllocatorSettings, threads: usize) -> Timeline {
    let split = split_wanted(dev.events.len(), threads);
    replay_with(dev, settings, split.then_some(threads)).0
}

/// The split replay on `threads` threads whatever the log's length, or `None` where the log
/// has a shape the split does not cover (what a test uses to check the two agree).
pub fn replay_split(
    dev: &Device,
    settings: &AllocatorSettings,
    threads: usize,
) -> Option<Timeline> {
    match replay_with(dev, settings, Some(threads)) {
        (t, true) => Some(t),
        (_, false) => None,
    }
}

/// The replay, split on `split` threads where it is `Some` and the log allows it; says whether
/// it was split.
fn replay_with(
    dev: &Device,
    settings: &AllocatorSettings,
    split: Option<usize>,
) -> (Timeline, bool) {
    let rules = Rules::from_settings(settings);
    let (initial, approx) = initial_state(dev, &rules);
    let n = dev.events.len();
    let checkpoint_every = 4096usize.max(n / 256 + 1);
    let segment_pools = segment_pools(dev);
    let pool_peaks = initial_pool_peaks(&initial);
    let c0 = initial.counters;
    let at_start = |bytes| Peak { bytes, event: None };
    let peaks = Peaks {
        allocated: at_start(c0.allocated),
        active: at_start(c0.active),
        reserved: at_start(c0.reserved),
        requested: at_start(c0.requested),
        inactive_split: at_start(c0.inactive_split),
        segments: at_start(c0.segments),
    };
    let ctx = Setup {
        dev,
        rules: &rules,
        initial: &initial,
        pools: &segment_pools,
        every: checkpoint_every,
    };
    let parallel = split.and_then(|t| {
        let r = split::run(
            dev,
            &rules,
            &initial,
            &segment_pools,
            pool_peaks.clone(),
            peaks.clone(),
            checkpoint_every,
            t,
        )?;
        Some((r, Vec::new(), Vec::new()))
    });
    let was_split = parallel.is_some();
    let (run, anomalies, ooms) = match parallel {
        Some(p) => p,
        None => serial(&ctx, pool_peaks, peaks),
    };
    let consistency = check_consistency(dev, &run.end, &anomalies);
    let starts_mid_run = !initial.segments.is_empty();
    let t = Timeline {
        device: dev.index,
        initial,
        end: run.end,
        series: run.series,
        peaks: run.peaks,
        ooms,
        anomalies,
        starts_mid_run,
        approximate_initial_blocks: approx,
        consistency,
        pool_peaks: run.pool_peaks,
        segment_pools,
        checkpoints: run.checkpoints,
    };
    (t, was_split)
}

/// What both ways of replaying start from.
struct Setup<'a> {
    dev: &'a Device,
    rules: &'a Rules,
    initial: &'a State,
    pools: &'a SegmentPools,
    every: usize,
}

/// Each pool's peak in the initial state, and its bound against segments of unknown pool.
fn initial_pool_peaks(initial: &State) -> BTreeMap<PoolKey, PoolPeak> {
    let unknown = initial.pool_reserved.get(&None).copied().unwrap_or(0);
    initial
        .pool_reserved
        .iter()
        .map(|(&k, &v)| {
            let bound = if k.is_some() {
                v.saturating_add(unknown)
            } else {
                v
            };
            let peak = Peak {
                bytes: v,
                event: None,
            };
            (
                k,
                PoolPeak {
                    reserved: peak,
                    reserved_with_unknown: bound,
                },
            )
        })
        .collect()
}

/// The serial replay: one pass over the log.
fn serial(
    s: &Setup,
    mut pool_peaks: BTreeMap<PoolKey, PoolPeak>,
    mut peaks: Peaks,
) -> (split::Run, Vec<Anomaly>, Vec<OomFacts>) {
    let dev = s.dev;
    let n = dev.events.len();
    let mut last_checkpoint = 0usize;
    let mut r = Replayer::new(s.rules.clone(), &dev.events, s.initial.clone()).with_pools(s.pools);
    let mut series = Series {
        allocated: Vec::with_capacity(n),
        active: Vec::with_capacity(n),
        reserved: Vec::with_capacity(n),
    };
    let mut checkpoints = Vec::new();
    for i in 0..n {
        // A checkpoint costs a copy of the state; it is taken only when the events since the
        // last one outnumber what it copies, so all of them together stay within the size of
        // the log (a 2 MB capture with 130k segments and 2M events no longer makes 257 copies
        // of 130k segments). Random access replays at most that many events more.
        if i > 0 && i % s.every == 0 && state_weight(&r.state) <= i - last_checkpoint {
            checkpoints.push((i, Checkpoint::of(&r.state)));
            last_checkpoint = i;
        }
        r.step(i);
        if matches!(
            dev.events[i].action,
            Action::SegmentAlloc | Action::SegmentMap
        ) {
            track_pool_peaks(&mut pool_peaks, &r.state, &dev.events[i], i);
        }
        let c = r.state.counters;
        series.allocated.push(c.allocated);
        series.active.push(c.active);
        series.reserved.push(c.reserved);
        let ev = Some(EventIdx(i as u32));
        for (p, v) in [
            (&mut peaks.allocated, c.allocated),
            (&mut peaks.active, c.active),
            (&mut peaks.reserved, c.reserved),
            (&mut peaks.requested, c.requested),
            (&mut peaks.inactive_split, c.inactive_split),
            (&mut peaks.segments, c.segments),
        ] {
            if v > p.bytes {
                *p = Peak {
                    bytes: v,
                    event: ev,
                };
            }
        }
    }
    let (end, anomalies, ooms) = r.finish();
    let run = split::Run {
        series,
        peaks,
        end,
        pool_peaks,
        checkpoints,
    };
    (run, anomalies, ooms)
}

impl Timeline {
    /// The allocator state after event `idx` (or the initial state for `None`), replayed from
    /// the nearest checkpoint: at most `checkpoint_every` events of work.
    pub fn state_after(
        &self,
        dev: &Device,
        settings: &AllocatorSettings,
        idx: Option<usize>,
    ) -> State {
        let Some(idx) = idx else {
            return self.initial.clone();
        };
        let idx = idx.min(dev.events.len().saturating_sub(1));
        let (start, st) = self
            .checkpoints
            .iter()
            .rev()
            .find(|(i, _)| *i <= idx)
            .map(|(i, s)| (*i, s.state()))
            .unwrap_or((0, self.initial.clone()));
        let mut r = Replayer::new(Rules::from_settings(settings), &dev.events, st)
            .with_pools(&self.segment_pools);
        for i in start..=idx {
            r.step(i);
        }
        r.finish().0
    }

    pub fn len(&self) -> usize {
        self.series.allocated.len()
    }

    /// What the checkpoints hold, in [`state_weight`] units (segments twice, blocks once): at
    /// most the number of events replayed.
    pub fn checkpoint_weight(&self) -> usize {
        self.checkpoints.iter().map(|(_, s)| s.weight()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.series.allocated.is_empty()
    }

    /// The entries before which a checkpoint was taken, in order (what a test compares between
    /// the serial and the split replay).
    pub fn checkpoint_events(&self) -> Vec<usize> {
        self.checkpoints.iter().map(|(i, _)| *i).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_matches_torch() {
        let s = AllocatorSettings::default();
        assert_eq!(round_size(1, &s), 512);
        assert_eq!(round_size(512, &s), 512);
        assert_eq!(round_size(513, &s), 1024);
        assert_eq!(round_size(4_194_304, &s), 4_194_304);
        let s4 = AllocatorSettings {
            roundup_power2_divisions: vec![4; 16],
            ..Default::default()
        };
        // 1.1 MiB with 4 divisions between 1 and 2 MiB rounds to 1.25 MiB.
        assert_eq!(round_size(1_153_434, &s4), 1_310_720);
        assert_eq!(round_size(1 << 21, &s4), 1 << 21);
    }

    #[test]
    fn split_rule() {
        let r = Rules::from_settings(&AllocatorSettings::default());
        assert!(r.should_split(Pool::Small, false, 2 << 20, 512));
        assert!(!r.should_split(Pool::Small, false, 1024, 1024));
        // Large pool: a remainder of at most 1 MiB is handed out with the block.
        assert!(!r.should_split(Pool::Large, false, 3 << 20, 2 << 20));
        assert!(r.should_split(Pool::Large, false, 20 << 20, 2 << 20));
    }

    /// A random log over three segments (allocations inside them and outside, double frees,
    /// frees of nothing; an allocation the layout could not hold is left out, as the replay's
    /// counters then follow the log, not the layout): after every step the segment one descent
    /// finds is the one `segment_of` names, and the counters the handlers keep by difference
    /// equal a recount of the layout (what `free_completed`'s single removal must keep).
    #[test]
    fn one_descent_keeps_counters_on_random_logs() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % n
        };
        let rules = Rules::from_settings(&AllocatorSettings::default());
        let segs = [
            (1u64 << 30, 2u64 << 20),
            (3 << 30, 20 << 20),
            (5 << 30, 2 << 20),
        ];
        let mut state = State::default();
        let mut anomalies = 0;
        let mut apply = |state: State, action: Action, addr: u64, size: u64| {
            let mut ev = Events::default();
            ev.push(crate::model::EventData {
                action,
                addr,
                size,
                stream: 0,
                time_us: None,
                stack: StackId(0),
                device_free: None,
                meta: crate::model::MetaId::NONE,
            });
            let mut r = Replayer::new(rules.clone(), &ev, state);
            r.step(0);
            let (st, an, _) = r.finish();
            anomalies += an.len();
            st
        };
        for &(a, n) in &segs {
            state = apply(state, Action::SegmentAlloc, a, n);
        }
        for i in 0..3000 {
            let (base, len) = segs[next(3) as usize];
            let addr = match next(10) {
                0 => base + len + next(4) * 512,
                1 => base.saturating_sub(512),
                _ => base + next(len / 512) * 512,
            };
            let size = 1 + next(64 << 10);
            let action = match next(3) {
                0 => Action::Alloc,
                1 => Action::FreeRequested,
                _ => Action::FreeCompleted,
            };
            if action == Action::Alloc {
                let rounded = round_size(size, &AllocatorSettings::default());
                let fits = state.segment_of(addr).is_some_and(|k| {
                    let g = &state.segments[&k];
                    let prev = g.blocks.range(..=addr).next_back();
                    let free_here = prev.is_none_or(|(_, b)| b.address + b.size <= addr);
                    let next_start = g.blocks.range(addr..).next().map_or(g.end(), |(&a, _)| a);
                    free_here && next_start > addr && next_start - addr >= rounded
                });
                if !fits && state.segment_of(addr).is_some() {
                    continue;
                }
            }
            state = apply(state, action, addr, size);
            let by_key = state.segment_of(addr);
            assert_eq!(state.segment_mut(addr).map(|s| s.address), by_key);
            let blocks = || state.segments.values().flat_map(|s| s.blocks.values());
            let active: u64 = blocks().map(|b| b.size).sum();
            let allocated: u64 = blocks()
                .filter(|b| b.state == BlockState::ActiveAllocated)
                .map(|b| b.size)
                .sum();
            let split: u64 = state.segments.values().map(|s| s.inactive_split()).sum();
            assert_eq!(state.counters.active, active, "event {i}");
            assert_eq!(state.counters.allocated, allocated, "event {i}");
            assert_eq!(state.counters.inactive_split, split, "event {i}");
        }
        assert!(anomalies > 10, "the log exercises the anomaly paths");
    }
}
