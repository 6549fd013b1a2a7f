//! A model of `DeviceCachingAllocator` (`c10/cuda/CUDACachingAllocator.cpp`, PyTorch 2.x) that
//! takes requests instead of recorded addresses.
//!
//! It follows the allocator's own procedures, named as in the source: `malloc` (best fit in the
//! pool's free set ordered by (stream, size, address), `garbage_collect_cached_blocks`,
//! `alloc_block`, `release_available_cached_blocks`, `release_cached_blocks` and a retry),
//! `alloc_found_block` (split by [`Rules::should_split`]), `free_block` with `try_merge_blocks`, and
//! for expandable segments `find_expandable_block`, `map_block` and `unmap_block` over one virtual
//! range per (stream, pool) mapped in pages of 2 MiB (small pool) or 20 MiB (large pool).
//! Rounding is [`round_size`] and the split rule [`Rules::should_split`], shared with the replay.
//!
//! The memory cap is the per-process fraction check of `alloc_block`:
//! `reserved + allocation size > cap` fails before any driver call.

use std::collections::{BTreeMap, BTreeSet};

use crate::analysis::replay::{round_size, Rules};
use crate::model::{AllocatorSettings, Pool, SMALL_BUFFER, SMALL_SIZE};

/// `kLargeBuffer`: large-pool segment size for requests under 10 MiB, and the expandable page size.
pub const LARGE_BUFFER: u64 = 20 << 20;
/// `kMinLargeAlloc`.
const MIN_LARGE_ALLOC: u64 = 10 << 20;
/// `kRoundLarge`.
const ROUND_LARGE: u64 = 2 << 20;
/// Where synthetic expandable ranges start (above any real CUDA virtual address).
const SYNTH_BASE: u64 = 1 << 52;
/// Where ordinary segments start when no recorded address is known.
const ORDINARY_BASE: u64 = 1 << 40;

/// The allocator configuration a model runs under.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Config {
    /// Rounding (`roundup_power2_divisions`) and `max_split_size` as `AllocatorSettings`.
    pub settings: AllocatorSettings,
    pub expandable_segments: bool,
    pub garbage_collection_threshold: f64,
    /// The per-process cap in bytes; `None`: no limit (no OOM can be predicted).
    pub cap: Option<u64>,
    /// Virtual size of an expandable segment (torch reserves 1 1/8 of the device's memory).
    pub expandable_va_bytes: u64,
    /// Give a new segment the recorded address of a segment of the same size made for the same
    /// request (best fit breaks ties by address); otherwise addresses increase.
    pub address_hints: bool,
    /// A new segment without a recorded address goes just below the lowest ordinary segment
    /// (where this driver put cudaMalloc's large segments: gpt_ctxall_amp at b48 made its
    /// 192, 384 and 384 MiB segments each below the last), not above the highest. Best fit
    /// breaks ties between free blocks of one size by address, so this decides which block a
    /// long-lived request splits (fixtures/plan/segments39).
    #[serde(skip)]
    pub descending_addresses: bool,
}

impl Config {
    pub fn max_split(&self) -> u64 {
        self.settings.max_split_size.unwrap_or(u64::MAX)
    }
}

/// `get_allocation_size`: how much a new segment for a rounded request holds.
pub fn allocation_size(size: u64) -> u64 {
    if size <= SMALL_SIZE {
        SMALL_BUFFER
    } else if size < MIN_LARGE_ALLOC {
        LARGE_BUFFER
    } else {
        size.div_ceil(ROUND_LARGE) * ROUND_LARGE
    }
}

#[derive(Clone, Debug)]
struct Block {
    addr: u64,
    size: u64,
    /// Base address of the segment it belongs to.
    seg: u64,
    stream: u64,
    pool: Pool,
    allocated: bool,
    /// Freed by the program but waiting for other streams (`event_count > 0`).
    pending: bool,
    mapped: bool,
    requested: u64,
    gc_base: u64,
}

#[derive(Clone, Debug)]
pub struct Seg {
    pub base: u64,
    /// Whole size (the virtual range for an expandable segment).
    pub size: u64,
    pub stream: u64,
    pub pool: Pool,
    pub expandable: bool,
    /// Mapped bytes (equals `size` for ordinary segments).
    pub mapped: u64,
}

#[derive(Default, Debug)]
struct BlockPool {
    /// Free, mapped blocks: (stream, size, address), the order of `BlockComparatorSize`.
    free: BTreeSet<(u64, u64, u64)>,
    /// Unmapped blocks of expandable segments: (stream, address).
    unmapped: BTreeSet<(u64, u64)>,
    get_free_blocks_call_count: u64,
}

/// `torch.cuda.memory_stats()`-like counters of the model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    pub allocated: u64,
    pub active: u64,
    pub requested: u64,
    pub reserved: u64,
    pub peak_allocated: u64,
    pub peak_reserved: u64,
    /// `segment.all` (ordinary segments only, like torch).
    pub segments: u64,
    pub peak_segments: u64,
    pub num_alloc_retries: u64,
    pub num_ooms: u64,
    pub num_device_alloc: u64,
    pub num_device_free: u64,
    pub num_sync_all_streams: u64,
}

/// Something the model did to its segments, in order (to compare with the recorded log).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegEvent {
    Alloc(u64),
    Free(u64),
    Map(u64),
    Unmap(u64),
}

/// A request the model could not satisfy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Oom {
    pub rounded: u64,
    pub allocation_size: u64,
    pub reserved: u64,
    pub allocated: u64,
}

/// The allocator model of one device.
pub struct Allocator {
    pub cfg: Config,
    rules: Rules,
    blocks: BTreeMap<u64, Block>,
    pub segs: BTreeMap<u64, Seg>,
    small: BlockPool,
    large: BlockPool,
    pub stats: Stats,
    pub seg_events: Vec<SegEvent>,
    next_synth: u64,
    /// Set when reserved reached a new peak; cleared by the caller after sampling.
    pub new_reserved_peak: bool,
}

impl Allocator {
    pub fn new(cfg: Config) -> Allocator {
        let mut settings = cfg.settings.clone();
        settings.expandable_segments = Some(cfg.expandable_segments);
        Allocator {
            rules: Rules::from_settings(&settings),
            cfg,
            blocks: BTreeMap::new(),
            segs: BTreeMap::new(),
            small: BlockPool::default(),
            large: BlockPool::default(),
            stats: Stats::default(),
            seg_events: Vec::new(),
            next_synth: SYNTH_BASE,
            new_reserved_peak: false,
        }
    }

    fn pool(&mut self, p: Pool) -> &mut BlockPool {
        match p {
            Pool::Small => &mut self.small,
            Pool::Large => &mut self.large,
        }
    }

    fn pool_ref(&self, p: Pool) -> &BlockPool {
        match p {
            Pool::Small => &self.small,
            Pool::Large => &self.large,
        }
    }

    fn gc_enabled(&self) -> bool {
        self.cfg.cap.is_some() && self.cfg.garbage_collection_threshold > 0.0
    }

    fn prev(&self, addr: u64) -> Option<u64> {
        let b = &self.blocks[&addr];
        let (&pa, p) = self.blocks.range(..addr).next_back()?;
        (p.seg == b.seg).then_some(pa)
    }

    fn next(&self, addr: u64) -> Option<u64> {
        let b = &self.blocks[&addr];
        let n = self.blocks.get(&(addr + b.size))?;
        (n.seg == b.seg).then_some(n.addr)
    }

    fn is_split(&self, addr: u64) -> bool {
        self.prev(addr).is_some() || self.next(addr).is_some()
    }

    fn insert_free(&mut self, addr: u64) {
        let (stream, size, pool) = {
            let b = &self.blocks[&addr];
            (b.stream, b.size, b.pool)
        };
        let p = self.pool(pool);
        p.free.insert((stream, size, addr));
        let base = p.get_free_blocks_call_count;
        self.blocks.get_mut(&addr).expect("block").gc_base = base;
    }

    fn remove_free(&mut self, addr: u64) {
        let b = &self.blocks[&addr];
        let key = (b.stream, b.size, addr);
        let pool = b.pool;
        self.pool(pool).free.remove(&key);
    }

    fn bump_reserved(&mut self, by: u64) {
        self.stats.reserved += by;
        if self.stats.reserved > self.stats.peak_reserved {
            self.stats.peak_reserved = self.stats.reserved;
            self.new_reserved_peak = true;
        }
    }

    /// `malloc`: the block's address, or the OOM.
    pub fn malloc(
        &mut self,
        orig: u64,
        stream: u64,
        hints: &mut Vec<(u64, u64)>,
    ) -> Result<u64, Oom> {
        let size = round_size(orig, &self.cfg.settings);
        let pool = Pool::for_rounded_size(size);
        let alloc_size = allocation_size(size);
        // Under a cap, allocated <= reserved <= cap in any real run. A log that starts with
        // more reserved than the cap (recording began mid-run) is seeded as it was recorded,
        // a state no run under the cap could reach: there, a request that takes the allocated
        // bytes past the cap fails whatever is cached.
        if self.cfg.cap.is_some_and(|cap| {
            self.stats.reserved > cap && self.stats.allocated.saturating_add(size) > cap
        }) {
            self.stats.num_ooms += 1;
            return Err(Oom {
                rounded: size,
                allocation_size: alloc_size,
                reserved: self.stats.reserved,
                allocated: self.stats.allocated,
            });
        }
        let mut found = self.get_free_block(pool, stream, size);
        if found.is_none() {
            if self.gc_enabled() {
                self.garbage_collect_cached_blocks();
            }
            found = self.alloc_block(pool, stream, size, alloc_size, false, hints);
            if found.is_none() && self.release_available_cached_blocks(pool, stream, size) {
                found = self.alloc_block(pool, stream, size, alloc_size, false, hints);
            }
            if found.is_none() {
                self.release_cached_blocks();
                found = self.alloc_block(pool, stream, size, alloc_size, true, hints);
            }
        }
        let Some(addr) = found else {
            self.stats.num_ooms += 1;
            return Err(Oom {
                rounded: size,
                allocation_size: alloc_size,
                reserved: self.stats.reserved,
                allocated: self.stats.allocated,
            });
        };
        let bsize = self.blocks[&addr].size;
        let split = self
            .rules
            .should_split(pool, self.cfg.expandable_segments, bsize, size);
        Ok(self.alloc_found_block(addr, size, orig, stream, split))
    }

    fn get_free_block(&mut self, pool: Pool, stream: u64, size: u64) -> Option<u64> {
        let gc = self.gc_enabled();
        let expandable = self.cfg.expandable_segments;
        let max_split = self.cfg.max_split();
        if gc {
            self.pool(pool).get_free_blocks_call_count += 1;
        }
        let p = self.pool_ref(pool);
        let mut it = p.free.range((stream, size, 0)..);
        let mut cur = *it.next()?;
        if cur.0 != stream {
            return None;
        }
        if expandable && self.segs[&self.blocks[&cur.2].seg].expandable {
            let exp_size = |a: u64| -> u64 {
                let b = &self.blocks[&a];
                b.size
                    + self
                        .next(a)
                        .map(|n| &self.blocks[&n])
                        .filter(|n| !n.mapped)
                        .map_or(0, |n| n.size)
            };
            for next in it {
                let cur_exp = self.segs[&self.blocks[&cur.2].seg].expandable;
                if !(cur_exp && next.0 == stream && exp_size(next.2) < exp_size(cur.2)) {
                    break;
                }
                cur = *next;
            }
        }
        let bsize = cur.1;
        if size < max_split && bsize >= max_split {
            return None;
        }
        if size >= max_split && bsize >= size.saturating_add(LARGE_BUFFER) {
            return None;
        }
        self.pool(pool).free.remove(&cur);
        Some(cur.2)
    }

    fn garbage_collect_cached_blocks(&mut self) {
        let cap = self.cfg.cap.unwrap_or(u64::MAX);
        let threshold = (self.cfg.garbage_collection_threshold * cap as f64) as u64;
        if self.stats.reserved <= threshold {
            return;
        }
        let target = self.stats.reserved - threshold;
        let calls = self.large.get_free_blocks_call_count;
        let age = |s: &Self, a: u64| calls - s.blocks[&a].gc_base;
        let mut total_age = 0u64;
        let mut count = 0u64;
        let candidates: Vec<u64> = self.large.free.iter().map(|k| k.2).collect();
        for &a in &candidates {
            if !self.is_split(a) {
                total_age += age(self, a);
                count += 1;
            }
        }
        if count == 0 {
            return;
        }
        let mut reclaimed = 0u64;
        let mut freed = true;
        while reclaimed < target && freed && count > 0 {
            let threshold_age = total_age as f64 / count as f64;
            freed = false;
            let keys: Vec<u64> = self.large.free.iter().map(|k| k.2).collect();
            for a in keys {
                if !self.is_split(a) && age(self, a) as f64 >= threshold_age {
                    freed = true;
                    reclaimed += self.blocks[&a].size;
                    total_age -= age(self, a);
                    count -= 1;
                    self.release_block(a);
                }
            }
        }
    }

    fn new_segment_addr(&mut self, size: u64, hints: &mut Vec<(u64, u64)>) -> u64 {
        // Reuse the recorded address of a segment of the same size made for the same request,
        // when the model has nothing there: ties in best fit are broken by address.
        if let Some(i) = hints.iter().position(|&(s, a)| {
            self.cfg.address_hints
                && s == size
                && self
                    .segs
                    .range(..a.saturating_add(size))
                    .next_back()
                    .is_none_or(|(_, g)| g.base + g.size <= a)
        }) {
            return hints.remove(i).1;
        }
        if self.cfg.descending_addresses {
            let lowest = self
                .segs
                .range(..SYNTH_BASE)
                .map(|(_, g)| g)
                .find(|g| !g.expandable);
            let below = lowest.map_or(Some(ORDINARY_BASE), |g| g.base.checked_sub(size));
            if let Some(a) = below
                .map(|a| a / ROUND_LARGE * ROUND_LARGE)
                .filter(|&a| a > 0)
            {
                return a;
            }
        }
        // Otherwise the driver is taken to hand out increasing addresses: just above the highest
        // ordinary segment. Segments never overlap, so the highest-based one below the synthetic
        // expandable ranges ends highest: found from the map's end, not by a scan of every
        // segment (which made a replay quadratic in its segments).
        let top = self
            .segs
            .range(..SYNTH_BASE)
            .rev()
            .map(|(_, g)| g)
            .find(|g| !g.expandable)
            .map_or(ORDINARY_BASE, |g| g.base + g.size);
        top.div_ceil(ROUND_LARGE) * ROUND_LARGE
    }

    fn alloc_block(
        &mut self,
        pool: Pool,
        stream: u64,
        size: u64,
        alloc_size: u64,
        retry: bool,
        hints: &mut Vec<(u64, u64)>,
    ) -> Option<u64> {
        if retry {
            self.stats.num_alloc_retries += 1;
        }
        if let Some(cap) = self.cfg.cap {
            if self.stats.reserved + alloc_size > cap {
                return None;
            }
        }
        if self.cfg.expandable_segments {
            return self.try_allocate_expandable_block(stream, pool, size);
        }
        let addr = self.new_segment_addr(alloc_size, hints);
        self.segs.insert(
            addr,
            Seg {
                base: addr,
                size: alloc_size,
                stream,
                pool,
                expandable: false,
                mapped: alloc_size,
            },
        );
        self.blocks.insert(
            addr,
            Block {
                addr,
                size: alloc_size,
                seg: addr,
                stream,
                pool,
                allocated: false,
                pending: false,
                mapped: true,
                requested: 0,
                gc_base: 0,
            },
        );
        self.bump_reserved(alloc_size);
        self.stats.segments += 1;
        self.stats.peak_segments = self.stats.peak_segments.max(self.stats.segments);
        self.stats.num_device_alloc += 1;
        self.seg_events.push(SegEvent::Alloc(alloc_size));
        Some(addr)
    }

    fn release_available_cached_blocks(&mut self, pool: Pool, stream: u64, size: u64) -> bool {
        let max_split = self.cfg.max_split();
        if max_split == u64::MAX {
            return false;
        }
        let key = size.max(max_split);
        let p = self.pool_ref(pool);
        let found = p
            .free
            .range((stream, key, 0)..)
            .next()
            .copied()
            .filter(|k| k.0 == stream);
        // In torch an oversize free block is a whole segment (requests under max_split_size
        // never split one). A segment seeded from a log that began mid-run under other settings
        // can hold one beside live blocks: it cannot be released on its own, so it is skipped.
        if let Some(k) = found {
            if self.segs[&self.blocks[&k.2].seg].expandable || self.is_split(k.2) {
                return false;
            }
            self.release_block(k.2);
            return true;
        }
        // No single block is large enough: free oversize blocks, largest first.
        let below: Vec<(u64, u64, u64)> = p.free.range(..(stream, key, 0)).rev().copied().collect();
        let mut released = 0u64;
        for k in below {
            if released >= key || k.1 < max_split || k.0 != stream {
                break;
            }
            if self.segs[&self.blocks[&k.2].seg].expandable {
                break;
            }
            if self.is_split(k.2) {
                continue;
            }
            released += k.1;
            self.release_block(k.2);
        }
        released >= key
    }

    /// `release_cached_blocks` (also what `torch.cuda.empty_cache()` does).
    pub fn release_cached_blocks(&mut self) {
        // synchronize_and_free_events: pending frees complete now.
        self.stats.num_sync_all_streams += 1;
        let pending: Vec<u64> = self
            .blocks
            .values()
            .filter(|b| b.pending)
            .map(|b| b.addr)
            .collect();
        for a in pending {
            self.free_block(a);
        }
        self.release_blocks(Pool::Large);
        self.release_blocks(Pool::Small);
    }

    fn release_blocks(&mut self, pool: Pool) {
        let keys: Vec<u64> = self.pool_ref(pool).free.iter().map(|k| k.2).collect();
        let mut to_unmap = Vec::new();
        for a in keys {
            if self.segs[&self.blocks[&a].seg].expandable {
                to_unmap.push(a);
            } else if !self.is_split(a) {
                self.release_block(a);
            }
        }
        for a in to_unmap {
            if let Some(u) = self.unmap_block(a) {
                if !self.is_split(u) {
                    self.release_expandable_segment(u);
                }
            }
        }
    }

    fn release_block(&mut self, addr: u64) {
        self.remove_free(addr);
        let b = self.blocks.remove(&addr).expect("block");
        self.segs.remove(&b.seg);
        self.stats.reserved -= b.size;
        self.stats.segments -= 1;
        self.stats.num_device_free += 1;
        self.seg_events.push(SegEvent::Free(b.size));
    }

    fn release_expandable_segment(&mut self, addr: u64) {
        let b = self.blocks.remove(&addr).expect("block");
        self.pool(b.pool).unmapped.remove(&(b.stream, addr));
        self.segs.remove(&b.seg);
    }

    /// Unmaps the whole pages inside a free block; the unmapped block's address, if any.
    fn unmap_block(&mut self, addr: u64) -> Option<u64> {
        let b = self.blocks[&addr].clone();
        let page = page_size(b.pool);
        let base = b.seg;
        let begin = (b.addr - base).div_ceil(page);
        let end = (b.addr + b.size - base) / page;
        if begin >= end {
            return None;
        }
        self.remove_free(addr);
        let u_start = base + begin * page;
        let u_len = (end - begin) * page;
        self.blocks.remove(&addr);
        let before = u_start - b.addr;
        if before > 0 {
            self.blocks.insert(
                b.addr,
                Block {
                    size: before,
                    ..b.clone()
                },
            );
            self.insert_free(b.addr);
        }
        let after = b.addr + b.size - (u_start + u_len);
        if after > 0 {
            let a = u_start + u_len;
            self.blocks.insert(
                a,
                Block {
                    addr: a,
                    size: after,
                    ..b.clone()
                },
            );
            self.insert_free(a);
        }
        self.blocks.insert(
            u_start,
            Block {
                addr: u_start,
                size: u_len,
                mapped: false,
                ..b.clone()
            },
        );
        let mut u = u_start;
        if let Some(p) = self.prev(u) {
            u = self.try_merge(u, p).unwrap_or(u);
        }
        if let Some(n) = self.next(u) {
            u = self.try_merge(u, n).unwrap_or(u);
        }
        self.pool(b.pool).unmapped.insert((b.stream, u));
        self.stats.reserved -= u_len;
        self.segs.get_mut(&base).expect("segment").mapped -= u_len;
        self.stats.num_device_free += 1;
        self.seg_events.push(SegEvent::Unmap(u_len));
        Some(u)
    }

    /// `try_merge_blocks(dst, src)`: merges a free neighbour into `dst` (which is in no set);
    /// `dst`'s new address, or `None` when they cannot merge.
    fn try_merge(&mut self, dst: u64, src: u64) -> Option<u64> {
        let s = self.blocks[&src].clone();
        let d_mapped = self.blocks[&dst].mapped;
        if s.allocated || s.pending || s.mapped != d_mapped {
            return None;
        }
        if s.mapped {
            self.pool(s.pool).free.remove(&(s.stream, s.size, src));
        } else {
            self.pool(s.pool).unmapped.remove(&(s.stream, src));
        }
        self.blocks.remove(&src);
        let mut d = self.blocks.remove(&dst).expect("block");
        if src < dst {
            d.addr = src;
        }
        d.size += s.size;
        let a = d.addr;
        self.blocks.insert(a, d);
        Some(a)
    }

    fn find_expandable_block(&mut self, stream: u64, pool: Pool, size: u64) -> u64 {
        let allocatable = |s: &Self, a: Option<u64>| {
            a.is_some_and(|a| !s.blocks[&a].allocated && !s.blocks[&a].pending)
        };
        let unmapped: Vec<u64> = self
            .pool_ref(pool)
            .unmapped
            .range((stream, 0)..)
            .take_while(|k| k.0 == stream)
            .map(|k| k.1)
            .collect();
        for u in unmapped {
            let mut c = u;
            if let Some(p) = self.prev(u).filter(|&p| allocatable(self, Some(p))) {
                c = p;
            }
            let mut bytes = 0u64;
            let mut b = Some(c);
            while bytes < size && allocatable(self, b) {
                let a = b.expect("allocatable");
                bytes += self.blocks[&a].size;
                b = self.next(a);
            }
            if bytes >= size {
                return c;
            }
        }
        let page = page_size(pool);
        let va = self.cfg.expandable_va_bytes.div_ceil(page) * page;
        let base = self.next_synth;
        self.next_synth += va + LARGE_BUFFER;
        self.segs.insert(
            base,
            Seg {
                base,
                size: va,
                stream,
                pool,
                expandable: true,
                mapped: 0,
            },
        );
        self.blocks.insert(
            base,
            Block {
                addr: base,
                size: va,
                seg: base,
                stream,
                pool,
                allocated: false,
                pending: false,
                mapped: false,
                requested: 0,
                gc_base: 0,
            },
        );
        self.pool(pool).unmapped.insert((stream, base));
        base
    }

    /// Maps the pages covering the first `size` bytes of an unmapped block; the resulting free
    /// block's address (after merging with free neighbours).
    fn map_block(&mut self, addr: u64, size: u64) -> u64 {
        let b = self.blocks[&addr].clone();
        let page = page_size(b.pool);
        let begin = (b.addr - b.seg) / page;
        let end = (b.addr + size - b.seg).div_ceil(page);
        let len = (end - begin) * page;
        debug_assert_eq!(b.seg + begin * page, b.addr);
        self.pool(b.pool).unmapped.remove(&(b.stream, addr));
        let mut blk = self.blocks.remove(&addr).expect("block");
        blk.mapped = true;
        if len < b.size {
            let r = addr + len;
            self.blocks.insert(
                r,
                Block {
                    addr: r,
                    size: b.size - len,
                    mapped: false,
                    ..b.clone()
                },
            );
            self.pool(b.pool).unmapped.insert((b.stream, r));
            blk.size = len;
        }
        self.blocks.insert(addr, blk);
        let mut a = addr;
        if let Some(p) = self.prev(a) {
            a = self.try_merge(a, p).unwrap_or(a);
        }
        if let Some(n) = self.next(a) {
            a = self.try_merge(a, n).unwrap_or(a);
        }
        self.insert_free(a);
        self.bump_reserved(len);
        self.segs.get_mut(&b.seg).expect("segment").mapped += len;
        self.stats.num_device_alloc += 1;
        self.seg_events.push(SegEvent::Map(len));
        a
    }

    fn try_allocate_expandable_block(&mut self, stream: u64, pool: Pool, size: u64) -> Option<u64> {
        let mut c = self.find_expandable_block(stream, pool, size);
        if !self.blocks[&c].mapped {
            let s = self.blocks[&c].size.min(size);
            c = self.map_block(c, s);
        }
        while self.blocks[&c].size < size {
            let remaining = size - self.blocks[&c].size;
            let n = self.next(c).expect("an unmapped block follows");
            let s = self.blocks[&n].size.min(remaining);
            // map_block merges `c` (a free block) into the newly mapped pages.
            let merged = self.map_block(n, s);
            c = merged;
        }
        self.remove_free(c);
        Some(c)
    }

    fn alloc_found_block(
        &mut self,
        addr: u64,
        size: u64,
        orig: u64,
        stream: u64,
        split: bool,
    ) -> u64 {
        let b = self.blocks.get_mut(&addr).expect("block");
        if split {
            let rest = Block {
                addr: addr + size,
                size: b.size - size,
                ..b.clone()
            };
            b.size = size;
            let r = rest.addr;
            self.blocks.insert(r, rest);
            self.insert_free(r);
        }
        let b = self.blocks.get_mut(&addr).expect("block");
        b.allocated = true;
        b.requested = orig;
        b.stream = stream;
        let bsize = b.size;
        self.stats.allocated += bsize;
        self.stats.active += bsize;
        self.stats.requested += orig;
        self.stats.peak_allocated = self.stats.peak_allocated.max(self.stats.allocated);
        addr
    }

    /// Places a segment that existed before the log began, with its live blocks where they were
    /// (`(address, size, requested, pending free)`, in address order) and free blocks in the gaps:
    /// the starting layout of a log that begins mid-run. It is placed as an ordinary segment
    /// whatever the settings under test: its blocks are assumed to stay where they were.
    pub fn seed_segment(
        &mut self,
        base: u64,
        size: u64,
        stream: u64,
        pool: Pool,
        live: &[(u64, u64, u64, bool)],
    ) {
        self.segs.insert(
            base,
            Seg {
                base,
                size,
                stream,
                pool,
                expandable: false,
                mapped: size,
            },
        );
        let end = base.saturating_add(size);
        let mut cursor = base;
        let mut free = Vec::new();
        for &(addr, bsize, requested, pending) in live {
            if addr < cursor || addr.saturating_add(bsize) > end {
                continue; // overlapping or outside: the rebuilt layout is inconsistent here
            }
            if addr > cursor {
                free.push((cursor, addr - cursor));
            }
            self.blocks.insert(
                addr,
                Block {
                    addr,
                    size: bsize,
                    seg: base,
                    stream,
                    pool,
                    allocated: !pending,
                    pending,
                    mapped: true,
                    requested,
                    gc_base: 0,
                },
            );
            if !pending {
                self.stats.allocated += bsize;
            }
            self.stats.active += bsize;
            self.stats.requested += requested;
            cursor = addr + bsize;
        }
        if cursor < end {
            free.push((cursor, end - cursor));
        }
        for (addr, fsize) in free {
            self.blocks.insert(
                addr,
                Block {
                    addr,
                    size: fsize,
                    seg: base,
                    stream,
                    pool,
                    allocated: false,
                    pending: false,
                    mapped: true,
                    requested: 0,
                    gc_base: 0,
                },
            );
            self.insert_free(addr);
        }
        self.bump_reserved(size);
        self.new_reserved_peak = false;
        self.stats.segments += 1;
        self.stats.peak_segments = self.stats.peak_segments.max(self.stats.segments);
        self.stats.peak_allocated = self.stats.peak_allocated.max(self.stats.allocated);
    }

    /// `free` (the program let go of the block): it stays unusable until `free_completed`.
    pub fn free_requested(&mut self, addr: u64) {
        if let Some(b) = self.blocks.get_mut(&addr).filter(|b| b.allocated) {
            b.allocated = false;
            b.pending = true;
            self.stats.allocated -= b.size;
        }
    }

    /// `free_block`: the block returns to its pool, merged with free neighbours.
    pub fn free_block(&mut self, addr: u64) {
        let Some(b) = self
            .blocks
            .get_mut(&addr)
            .filter(|b| b.pending || b.allocated)
        else {
            return;
        };
        if b.allocated {
            b.allocated = false;
            self.stats.allocated -= b.size;
        }
        b.pending = false;
        let (size, requested) = (b.size, b.requested);
        let mut a = addr;
        if let Some(p) = self.prev(a) {
            a = self.try_merge(a, p).unwrap_or(a);
        }
        if let Some(n) = self.next(a) {
            a = self.try_merge(a, n).unwrap_or(a);
        }
        self.insert_free(a);
        self.stats.active -= size;
        self.stats.requested -= requested;
    }

    /// Offset of a block in its segment, and the segment's (mapped) size.
    pub fn placement(&self, addr: u64) -> Option<(u64, u64, bool)> {
        let b = self.blocks.get(&addr)?;
        let s = &self.segs[&b.seg];
        Some((addr - s.base, s.mapped, s.expandable))
    }

    /// Reserved but not active, and the largest free (mapped) block.
    pub fn fragmentation(&self) -> (u64, u64) {
        let largest = self
            .small
            .free
            .iter()
            .chain(self.large.free.iter())
            .map(|k| k.1)
            .max()
            .unwrap_or(0);
        (
            self.stats.reserved.saturating_sub(self.stats.active),
            largest,
        )
    }

    /// Free bytes in ordinary segments that also hold active blocks (`inactive_split_bytes`).
    pub fn inactive_split_bytes(&self) -> u64 {
        self.blocks
            .values()
            .filter(|b| {
                b.mapped
                    && !b.allocated
                    && !b.pending
                    && !self.segs[&b.seg].expandable
                    && self.is_split(b.addr)
            })
            .map(|b| b.size)
            .sum()
    }
}

fn page_size(pool: Pool) -> u64 {
    match pool {
        Pool::Small => SMALL_BUFFER,
        Pool::Large => LARGE_BUFFER,
    }
}
