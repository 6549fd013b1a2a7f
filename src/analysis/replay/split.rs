//! One device's replay on many cores, equal to the serial one (issue #43).
//!
//! Why it can be split: the blocks of one segment evolve only through the entries at addresses
//! inside it, so once it is known which segment incarnation (one `segment_alloc` .. `segment_free`
//! life, or one segment of the initial state) each entry falls in, every incarnation can be
//! replayed on its own, by the same [`Replayer`] the serial replay uses. What is global (the
//! counters, which sum over segments, and the pools' reserved bytes, which only segment entries
//! move) is put back together in entry order: each entry's change of every counter is written
//! beside it, and one pass adds them up, as the serial loop would have seen them.
//!
//! Why it is safe: the split is taken only where it provably gives the serial result, and the
//! serial replay runs wherever it is not. Any entry the layout cannot explain (an anomaly: an
//! entry outside every segment, an overlapping segment, a segment freed with blocks), an
//! `oom` (its figures read every segment at once), an expandable segment (maps and unmaps move
//! blocks between segments), a zero-sized segment, or a counter that would leave `u64` (where
//! the serial replay saturates) gives `None`. An incarnation replays with its counters at
//! [`BASE`], so its per-entry changes are exact differences; the serial replay's saturating
//! sums equal these exact sums exactly when no sum leaves `0..=u64::MAX`, which the merge checks.
//!
//! Cost: one sequential pass that finds each entry's segment (as the serial replay does, with a
//! one-segment cache), the incarnations on `threads` threads (largest first), one sequential
//! pass of additions. Memory beyond the serial replay: 8 bytes per entry while it runs (the
//! incarnation lists), and the series' own vectors hold the changes until they are summed.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use super::checkpoint::{Checkpoint, Flat};
use super::{
    track_pool_peaks_of, Counters, Peak, Peaks, PoolKey, PoolPeak, Replayer, Rules, SegState,
    SegmentPools, Series, State,
};
use crate::model::{Action, Device, EventIdx};

/// The value an incarnation's counters start from: far from both ends of `u64`, so that its
/// changes are exact unless a single incarnation moves a counter by 2^62 bytes (checked).
const BASE: u64 = 1 << 62;

/// No incarnation: an entry that changes no memory.
const NONE: u32 = u32::MAX;

/// What a replay yields besides what the set-up gives (the initial state, the pools).
pub(super) struct Run {
    pub series: Series,
    pub peaks: Peaks,
    pub end: State,
    pub pool_peaks: BTreeMap<PoolKey, PoolPeak>,
    pub checkpoints: Vec<(usize, Checkpoint)>,
}

/// One segment's life: where it starts, and the entry that made it (`None`: the initial state).
struct Incarnation {
    addr: u64,
    made_at: Option<usize>,
}

/// What the sequential pre-pass finds.
struct Plan {
    incs: Vec<Incarnation>,
    /// The entries of each incarnation, incarnation after incarnation, in entry order.
    order: Vec<u32>,
    /// Where each incarnation's entries start in `order` (one more than `incs`).
    starts: Vec<usize>,
    /// The entries before which the serial replay takes a checkpoint, and the pools' reserved
    /// bytes there.
    checkpoints: Vec<(usize, BTreeMap<PoolKey, u64>)>,
    pool_peaks: BTreeMap<PoolKey, PoolPeak>,
    pool_reserved: BTreeMap<PoolKey, u64>,
}

/// How an entry moves the counters.
#[derive(Clone, Copy, PartialEq)]
enum Class {
    Block,
    Segment,
    Nothing,
}

fn class(a: Action) -> Class {
    match a {
        Action::Alloc | Action::FreeRequested | Action::FreeCompleted => Class::Block,
        Action::SegmentAlloc | Action::SegmentFree => Class::Segment,
        _ => Class::Nothing,
    }
}

/// The split replay (see the module docs), or `None` where the log has a shape it does not
/// cover: the caller then replays serially.
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    dev: &Device,
    rules: &Rules,
    initial: &State,
    pools: &SegmentPools,
    pool_peaks: BTreeMap<PoolKey, PoolPeak>,
    peaks: Peaks,
    every: usize,
    threads: usize,
) -> Option<Run> {
    let plan = plan(dev, initial, pools, pool_peaks, every)?;
    let out = replay_incarnations(dev, rules, initial, pools, &plan, threads)?;
    let Worked {
        deltas,
        mut exceptions,
        ends,
        kept,
    } = out;
    exceptions.sort_unstable_by_key(|&(i, _)| i);
    let (series, peaks, at_checkpoints, counters) = merge(
        dev,
        initial.counters,
        deltas,
        &exceptions,
        peaks,
        &plan,
        threads,
    )?;
    // Each checkpoint's segments, gathered from the threads' parts, put in key order and
    // laid flat on the threads.
    let mut groups: Vec<Mutex<Vec<Kept>>> = Vec::new();
    groups.resize_with(plan.checkpoints.len(), Mutex::default);
    for part in kept {
        for (g, mine) in groups.iter_mut().zip(part) {
            g.get_mut().unwrap_or_else(|e| e.into_inner()).push(mine);
        }
    }
    let places: Vec<(usize, Counters)> = (0..groups.len()).zip(at_checkpoints).collect();
    let checkpoints = crate::threads::map(threads, &places, |&(p, c)| {
        let parts = std::mem::take(&mut *groups[p].lock().unwrap_or_else(|e| e.into_inner()));
        let mut segs: Vec<(u64, Flat)> = parts.into_iter().flatten().collect();
        segs.sort_unstable_by_key(|(a, _)| *a);
        let (i, pool_reserved) = &plan.checkpoints[p];
        (*i, Checkpoint::from_segments(c, pool_reserved, segs))
    });
    let end = State {
        segments: ends.into_iter().map(|s| (s.address, s)).collect(),
        counters,
        pool_reserved: plan.pool_reserved,
    };
    Some(Run {
        series,
        peaks,
        end,
        pool_peaks: plan.pool_peaks,
        checkpoints,
    })
}

/// The sequential pre-pass: each entry's incarnation, the checkpoints' places, the pools.
fn plan(
    dev: &Device,
    initial: &State,
    pools: &SegmentPools,
    mut pool_peaks: BTreeMap<PoolKey, PoolPeak>,
    every: usize,
) -> Option<Plan> {
    if initial
        .segments
        .values()
        .any(|s| s.expandable || s.size == 0)
    {
        return None;
    }
    let n = dev.events.len();
    let mut incs: Vec<Incarnation> = Vec::new();
    // Live segments: start -> (end, incarnation, pool, size).
    let mut live: BTreeMap<u64, (u64, u32, PoolKey, u64)> = BTreeMap::new();
    for (&a, s) in &initial.segments {
        live.insert(a, (s.end(), incs.len() as u32, s.pool_id, s.size));
        incs.push(Incarnation {
            addr: a,
            made_at: None,
        });
    }
    let mut pool_state = State {
        pool_reserved: initial.pool_reserved.clone(),
        ..State::default()
    };
    let mut segs = initial.segments.len();
    let mut blocks: usize = initial.segments.values().map(|s| s.blocks.len()).sum();
    let mut inc_of = vec![NONE; n];
    let mut checkpoints = Vec::new();
    let mut last = 0usize;
    // Segments found, by address (see `cache_slot`): (start, end, incarnation), good while
    // the incarnation is alive (segments alive never overlap, so one that holds the address
    // is the one the map would find).
    let mut cache = vec![(0u64, 0u64, 0u32); CACHE_SLOTS];
    let mut alive: Vec<bool> = vec![true; incs.len()];
    for (i, e) in dev.events.iter().enumerate() {
        if i > 0 && i % every == 0 && segs.saturating_mul(2).saturating_add(blocks) <= i - last {
            checkpoints.push((i, pool_state.pool_reserved.clone()));
            last = i;
        }
        match e.action {
            Action::Alloc | Action::FreeRequested | Action::FreeCompleted => {
                let slot = &mut cache[cache_slot(e.addr)];
                let (a, b, k) = *slot;
                let k = if a <= e.addr && e.addr < b && alive[k as usize] {
                    k
                } else {
                    let (&a, &(b, k, _, _)) = live.range(..=e.addr).next_back()?;
                    if e.addr >= b {
                        return None;
                    }
                    *slot = (a, b, k);
                    k
                };
                inc_of[i] = k;
                match e.action {
                    Action::Alloc => blocks += 1,
                    Action::FreeCompleted => blocks = blocks.saturating_sub(1),
                    _ => {}
                }
            }
            Action::SegmentAlloc => {
                if e.size == 0 {
                    return None;
                }
                if let Some((_, &(b, _, _, _))) = live.range(..=e.addr).next_back() {
                    if e.addr < b {
                        return None;
                    }
                }
                let k = u32::try_from(incs.len()).ok().filter(|&k| k != NONE)?;
                let key = pools.get(&(i as u32)).copied();
                live.insert(e.addr, (e.addr.saturating_add(e.size), k, key, e.size));
                incs.push(Incarnation {
                    addr: e.addr,
                    made_at: Some(i),
                });
                inc_of[i] = k;
                segs += 1;
                alive.push(true);
                pool_state.pool_add(key, e.size);
                track_pool_peaks_of(&mut pool_peaks, key, &pool_state.pool_reserved, i);
            }
            Action::SegmentFree => {
                let (_, k, key, size) = live.remove(&e.addr)?;
                inc_of[i] = k;
                segs -= 1;
                alive[k as usize] = false;
                pool_state.pool_sub(key, size);
            }
            Action::SegmentMap | Action::SegmentUnmap | Action::Oom => return None,
            Action::Snapshot | Action::Annotate | Action::Other => {}
        }
    }
    // The entries of each incarnation, as one list.
    let mut starts = vec![0usize; incs.len() + 1];
    for &k in &inc_of {
        if k != NONE {
            starts[k as usize + 1] += 1;
        }
    }
    for k in 0..incs.len() {
        starts[k + 1] += starts[k];
    }
    let mut fill = starts.clone();
    let mut order = vec![0u32; starts[incs.len()]];
    for (i, &k) in inc_of.iter().enumerate() {
        if k != NONE {
            order[fill[k as usize]] = i as u32;
            fill[k as usize] += 1;
        }
    }
    Some(Plan {
        incs,
        order,
        starts,
        checkpoints,
        pool_peaks,
        pool_reserved: pool_state.pool_reserved,
    })
}

/// Slots of the pre-pass' segment cache: a power of two.
const CACHE_SLOTS: usize = 4096;

/// The cache slot of an address: by its MiB (segments are 2 MiB and more, so a segment's
/// entries share a few slots), the higher bits folded in.
fn cache_slot(addr: u64) -> usize {
    let mib = addr >> 20;
    ((mib ^ (mib >> 12) ^ (mib >> 24)) as usize) & (CACHE_SLOTS - 1)
}

/// Segments kept for one checkpoint: start, segment.
type Kept = Vec<(u64, Flat)>;

/// What the incarnations' replays leave: per entry, the changes of three counters (see
/// [`merge`]); the inactive-split changes that are not minus the active change; the segments
/// alive at the end; the segments kept for the checkpoints (per thread, per checkpoint).
struct Worked {
    deltas: [Vec<u64>; 3],
    exceptions: Vec<(u32, i64)>,
    ends: Vec<SegState>,
    kept: Vec<Vec<Kept>>,
}

/// What one incarnation's replay leaves (see [`Worked`]).
#[derive(Default)]
struct Part {
    exceptions: Vec<(u32, i64)>,
    ends: Vec<SegState>,
    kept: Vec<Kept>,
}

impl Part {
    /// Keeps segment `flat` (at `addr`) for checkpoint `p` of `n`.
    fn keep(&mut self, p: usize, n: usize, addr: u64, flat: Flat) {
        if self.kept.len() < n {
            self.kept.resize_with(n, Vec::new);
        }
        self.kept[p].push((addr, flat));
    }
}

/// Replays every incarnation on `threads` threads, largest first; `None` where one of them
/// does something the split does not cover.
fn replay_incarnations(
    dev: &Device,
    rules: &Rules,
    initial: &State,
    pools: &SegmentPools,
    plan: &Plan,
    threads: usize,
) -> Option<Worked> {
    let n = dev.events.len();
    let slots =
        || -> Vec<AtomicU64> { std::iter::repeat_with(AtomicU64::default).take(n).collect() };
    let deltas = [slots(), slots(), slots()];
    prefault(&deltas, threads);
    let mut by_size: Vec<usize> = (0..plan.incs.len()).collect();
    by_size.sort_by_key(|&k| std::cmp::Reverse(plan.starts[k + 1] - plan.starts[k]));
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let parts: Mutex<Vec<Part>> = Mutex::new(Vec::new());
    let work = || {
        let mut part = Part::default();
        while !failed.load(Ordering::Relaxed) {
            let Some(&k) = by_size.get(next.fetch_add(1, Ordering::Relaxed)) else {
                break;
            };
            let inc = &plan.incs[k];
            let entries = &plan.order[plan.starts[k]..plan.starts[k + 1]];
            if incarnation(
                dev, rules, initial, pools, plan, inc, entries, &deltas, &mut part,
            )
            .is_none()
            {
                failed.store(true, Ordering::Relaxed);
            }
        }
        parts.lock().unwrap_or_else(|e| e.into_inner()).push(part);
    };
    std::thread::scope(|s| {
        for _ in 1..threads.min(plan.incs.len()) {
            crate::threads::spawn_or_run(s, work);
        }
        work();
    });
    if failed.into_inner() {
        return None;
    }
    let (mut exceptions, mut ends, mut kept) = (Vec::new(), Vec::new(), Vec::new());
    for p in parts.into_inner().unwrap_or_else(|e| e.into_inner()) {
        exceptions.extend(p.exceptions);
        ends.extend(p.ends);
        kept.push(p.kept);
    }
    let [a, b, c] = deltas;
    Some(Worked {
        deltas: [plain(a), plain(b), plain(c)],
        exceptions,
        ends,
        kept,
    })
}

/// The changes' vectors as plain integers, in place: a copy of three vectors of 8 bytes per
/// entry cost a third of the split's sequential time (and as much memory again). The standard
/// library collects a mapped `IntoIter` into its own allocation where the two element types
/// have one layout, as `AtomicU64` and `u64` have: no copy, and no `unsafe` here.
fn plain(v: Vec<AtomicU64>) -> Vec<u64> {
    v.into_iter().map(AtomicU64::into_inner).collect()
}

/// Touches the changes' vectors' pages, a stretch per thread, before the incarnations write
/// to them at scattered places: the pages are then faulted in side by side, in order, rather
/// than one at a time wherever a write first lands.
fn prefault(slots: &[Vec<AtomicU64>; 3], threads: usize) {
    const PAGE: usize = 512;
    let n = slots[0].len();
    let per = n.div_ceil(threads.max(1)).max(PAGE);
    let stretches: Vec<usize> = (0..n).step_by(per).collect();
    crate::threads::map(threads, &stretches, |&start| {
        for v in slots {
            for x in v[start..(start + per).min(n)].iter().step_by(PAGE) {
                x.store(0, Ordering::Relaxed);
            }
        }
    });
}

/// One incarnation's replay: writes each entry's counter changes into `deltas` (block
/// entries: allocated, active, requested; segment entries: segments, 0, reserved) and keeps
/// the segment at each checkpoint of its life; `None` where the split does not cover it.
#[allow(clippy::too_many_arguments)]
fn incarnation(
    dev: &Device,
    rules: &Rules,
    initial: &State,
    pools: &SegmentPools,
    plan: &Plan,
    inc: &Incarnation,
    entries: &[u32],
    deltas: &[Vec<AtomicU64>; 3],
    part: &mut Part,
) -> Option<()> {
    let mut st = State {
        counters: Counters {
            allocated: BASE,
            active: BASE,
            reserved: BASE,
            requested: BASE,
            inactive_split: BASE,
            segments: BASE,
            expandable_segments: BASE,
            expandable_inactive: BASE,
        },
        ..State::default()
    };
    if inc.made_at.is_none() {
        let s = initial.segments.get(&inc.addr)?;
        st.segments.insert(inc.addr, s.clone());
    }
    let mut r = Replayer::new(rules.clone(), &dev.events, st).with_pools(pools);
    let ck = &plan.checkpoints;
    let mut p = ck.partition_point(|(c, _)| inc.made_at.is_some_and(|m| *c <= m));
    let mut freed = false;
    for (j, &i) in entries.iter().enumerate() {
        if j % TOUCH == 0 {
            touch(dev, entries.get(j..j + TOUCH).unwrap_or(&entries[j..]));
        }
        let i = i as usize;
        while ck.get(p).is_some_and(|(c, _)| *c <= i) {
            let flat = Checkpoint::flat(r.state.segments.get(&inc.addr)?);
            part.keep(p, ck.len(), inc.addr, flat);
            p += 1;
        }
        let before = r.state.counters;
        r.step(i);
        let after = r.state.counters;
        let d = |f: fn(&Counters) -> u64| -> Option<i64> {
            let (a, b) = (f(&after), f(&before));
            if a == 0 || a == u64::MAX {
                return None;
            }
            i64::try_from(i128::from(a) - i128::from(b)).ok()
        };
        let dalloc = d(|c| c.allocated)?;
        let dactive = d(|c| c.active)?;
        let dres = d(|c| c.reserved)?;
        let dreq = d(|c| c.requested)?;
        let dinact = d(|c| c.inactive_split)?;
        let dseg = d(|c| c.segments)?;
        if d(|c| c.expandable_segments)? != 0 || d(|c| c.expandable_inactive)? != 0 {
            return None;
        }
        let (x, y, z, usual_inactive) = match class(dev.events[i].action) {
            Class::Block if dres == 0 && dseg == 0 => (dalloc, dactive, dreq, -dactive),
            Class::Segment if dalloc == 0 && dactive == 0 && dreq == 0 => (dseg, 0, dres, 0),
            _ => return None,
        };
        for (slot, v) in deltas.iter().zip([x, y, z]) {
            slot[i].store(v as u64, Ordering::Relaxed);
        }
        if dinact != usual_inactive {
            part.exceptions.push((i as u32, dinact));
        }
        freed = dev.events[i].action == Action::SegmentFree;
    }
    if !r.anomalies.is_empty() || !r.ooms.is_empty() {
        return None;
    }
    if !freed {
        let seg = r.state.segments.remove(&inc.addr)?;
        if p < ck.len() {
            let flat = Checkpoint::flat(&seg);
            for q in p..ck.len() {
                part.keep(q, ck.len(), inc.addr, flat.clone());
            }
        }
        part.ends.push(seg);
    }
    Some(())
}

/// How many entries of an incarnation are read ahead at once (see [`touch`]).
const TOUCH: usize = 32;

/// Reads the entries ahead of their replay: an incarnation's entries lie scattered through the
/// log, and reading them one by one as the replay needs them waits on memory each time
/// (half the replay's time, by a profile); read together, the reads overlap.
fn touch(dev: &Device, entries: &[u32]) {
    let mut x = 0u64;
    for &i in entries {
        if let Some(e) = dev.events.get(i as usize) {
            x ^= e.addr;
        }
    }
    std::hint::black_box(x);
}

/// Fewest entries a stretch of the sums has ([`merge`]): below it a thread costs more than it adds.
const MERGE_STRETCH: usize = 1 << 14;

/// Sums the changes in entry order: the series (in place of the changes), the peaks, the
/// counters before each checkpoint, the end counters; `None` where a sum would leave `u64`.
/// On `threads` threads, by stretches: each stretch's total change first, then each stretch
/// from its start counters; a stretch's highest value and its first entry, taken in stretch
/// order where strictly higher, is the serial loop's peak.
fn merge(
    dev: &Device,
    c0: Counters,
    deltas: [Vec<u64>; 3],
    exceptions: &[(u32, i64)],
    mut peaks: Peaks,
    plan: &Plan,
    threads: usize,
) -> Option<(Series, Peaks, Vec<Counters>, Counters)> {
    let [mut allocated, mut active, mut reserved] = deltas;
    let n = dev.events.len();
    let per = n.div_ceil(threads.max(1)).max(MERGE_STRETCH);
    let starts: Vec<usize> = (0..n).step_by(per).collect();
    let cks: Vec<usize> = plan.checkpoints.iter().map(|(i, _)| *i).collect();
    let exc_of = |s: usize, e: usize| {
        let lo = exceptions.partition_point(|(j, _)| (*j as usize) < s);
        let hi = exceptions.partition_point(|(j, _)| (*j as usize) < e);
        &exceptions[lo..hi]
    };
    let totals = crate::threads::map(threads, &starts, |&s| {
        let e = (s + per).min(n);
        let d = [&allocated[s..e], &active[s..e], &reserved[s..e]];
        total(&dev.events[s..e], s, d, exc_of(s, e))
    });
    let mut begin = Vec::with_capacity(starts.len());
    let mut c = c0;
    for t in &totals {
        begin.push(c);
        c = add(c, t)?;
    }
    let done: Mutex<Vec<(usize, Option<Stretch>)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        let stretches = allocated
            .chunks_mut(per)
            .zip(active.chunks_mut(per))
            .zip(reserved.chunks_mut(per))
            .enumerate();
        for (k, ((a, b), r)) in stretches {
            let s = k * per;
            let e = s + a.len();
            let (c, exc, cks, done) = (begin[k], exc_of(s, e), &cks, &done);
            let events = &dev.events[s..e];
            crate::threads::spawn_or_run(scope, move || {
                let out = stretch(events, s, [a, b, r], exc, cks, c);
                done.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((k, out));
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    done.sort_unstable_by_key(|(k, _)| *k);
    let mut at_checkpoints = Vec::with_capacity(cks.len());
    let mut end = c0;
    for (_, out) in done {
        let out = out?;
        for (p, q) in fields(&mut peaks).into_iter().zip(out.peaks) {
            if q.bytes > p.bytes {
                *p = q;
            }
        }
        at_checkpoints.extend(out.at_checkpoints);
        end = out.end;
    }
    if end != c {
        return None;
    }
    let series = Series {
        allocated,
        active,
        reserved,
    };
    Some((series, peaks, at_checkpoints, end))
}

/// The peaks' fields, in the order [`stretch`] tracks them.
fn fields(p: &mut Peaks) -> [&mut Peak; 6] {
    [
        &mut p.allocated,
        &mut p.active,
        &mut p.reserved,
        &mut p.requested,
        &mut p.inactive_split,
        &mut p.segments,
    ]
}

/// `c` moved by a stretch's total change, or `None` where a counter would leave `u64`.
fn add(c: Counters, t: &[i128; 6]) -> Option<Counters> {
    let f = |v: u64, d: i128| u64::try_from(i128::from(v) + d).ok();
    Some(Counters {
        allocated: f(c.allocated, t[0])?,
        active: f(c.active, t[1])?,
        reserved: f(c.reserved, t[2])?,
        requested: f(c.requested, t[3])?,
        inactive_split: f(c.inactive_split, t[4])?,
        segments: f(c.segments, t[5])?,
        ..c
    })
}

/// One entry's changes, as [`incarnation`] wrote them: (allocated, active, reserved, requested,
/// inactive split, segments).
fn changes(cls: Class, x: i64, y: i64, z: i64, exception: Option<i64>) -> [i64; 6] {
    match cls {
        Class::Block => [x, y, 0, z, exception.unwrap_or(-y), 0],
        Class::Segment => [0, 0, z, 0, exception.unwrap_or(0), x],
        Class::Nothing => [0; 6],
    }
}

/// A stretch's total change of each counter (entries `off..`, the changes `d`, its exceptions).
fn total(
    events: &[crate::model::Event],
    off: usize,
    d: [&[u64]; 3],
    exc: &[(u32, i64)],
) -> [i128; 6] {
    let mut t = [0i128; 6];
    let mut exc = exc.iter().peekable();
    for (j, e) in events.iter().enumerate() {
        let cls = class(e.action);
        if cls == Class::Nothing {
            continue;
        }
        let x = exc
            .next_if(|(i, _)| *i as usize == off + j)
            .map(|&(_, v)| v);
        let ch = changes(cls, d[0][j] as i64, d[1][j] as i64, d[2][j] as i64, x);
        for (a, b) in t.iter_mut().zip(ch) {
            *a += i128::from(b);
        }
    }
    t
}

/// What one stretch of the sums gives: each peak's highest value in it and its first entry,
/// the counters before each checkpoint in it, the counters at its end.
struct Stretch {
    peaks: [Peak; 6],
    at_checkpoints: Vec<Counters>,
    end: Counters,
}

/// Sums one stretch (entries `off..`) from its start counters `c`, writing the series in place
/// of its changes `d`; `None` where a counter would leave `u64`.
fn stretch(
    events: &[crate::model::Event],
    off: usize,
    d: [&mut [u64]; 3],
    exc: &[(u32, i64)],
    cks: &[usize],
    mut c: Counters,
) -> Option<Stretch> {
    let [allocated, active, reserved] = d;
    let mut exc = exc.iter().peekable();
    let first = cks.partition_point(|&i| i < off);
    let mut ck = cks[first..].iter().copied().peekable();
    let mut at_checkpoints = Vec::new();
    let mut peaks = [Peak::default(); 6];
    for (j, e) in events.iter().enumerate() {
        let i = off + j;
        if ck.next_if_eq(&i).is_some() {
            at_checkpoints.push(c);
        }
        let cls = class(e.action);
        if cls != Class::Nothing {
            let x = exc.next_if(|(k, _)| *k as usize == i).map(|&(_, v)| v);
            let ch = changes(
                cls,
                allocated[j] as i64,
                active[j] as i64,
                reserved[j] as i64,
                x,
            );
            c.allocated = c.allocated.checked_add_signed(ch[0])?;
            c.active = c.active.checked_add_signed(ch[1])?;
            c.reserved = c.reserved.checked_add_signed(ch[2])?;
            c.requested = c.requested.checked_add_signed(ch[3])?;
            c.inactive_split = c.inactive_split.checked_add_signed(ch[4])?;
            c.segments = c.segments.checked_add_signed(ch[5])?;
        }
        allocated[j] = c.allocated;
        active[j] = c.active;
        reserved[j] = c.reserved;
        let values = [
            c.allocated,
            c.active,
            c.reserved,
            c.requested,
            c.inactive_split,
            c.segments,
        ];
        for (p, v) in peaks.iter_mut().zip(values) {
            if v > p.bytes {
                *p = Peak {
                    bytes: v,
                    event: Some(EventIdx(i as u32)),
                };
            }
        }
    }
    Some(Stretch {
        peaks,
        at_checkpoints,
        end: c,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `plain` keeps the allocation (the reason it exists): same pointer, same values.
    #[test]
    fn plain_reuses_the_allocation() {
        let v: Vec<AtomicU64> = (0..10_000u64).map(AtomicU64::new).collect();
        let at = v.as_ptr() as usize;
        let w = plain(v);
        assert_eq!(w.as_ptr() as usize, at);
        assert!(w.iter().enumerate().all(|(i, &x)| x == i as u64));
    }
}
