//! The layout a log starts with, fitted across captures (issue 39, session 17).
//!
//! A log recorded after warm-up steps starts from a layout: blocks alive at its first event
//! (weights, optimizer state, the last step's outputs still held by the loop's variables) and
//! the segments the warm-up steps cached. Until session 17 the plan replayed the first
//! capture's layout as fixed at every size, but the last step's outputs and the segments cached
//! for the step's requests depend on the batch: holdout 6's hf_llama_ckpt (recorded after one
//! warm-up step) holds 654 MB reserved before recording at b4 and 847 MB at b8, and the b8
//! capture replayed from b4's layout came out 12.8% over in reserved.
//!
//! With two captures or more the layouts are paired like requests ([`super::fit`]):
//! - blocks by their stack and the order in which the log first frees them (the same program
//!   frees the last step's outputs at the same points at any size), blocks the log never touches
//!   by stack and address; a pair needs an exact term between its sizes, as requests do;
//! - segments by what they hold: a paired block's segment pairs with its counterpart's, then a
//!   segment left pairs by the first paired request the log places in it.
//!
//! Each paired value is the recorded one at every capture's shape (so each capture's own replay
//! starts from its own layout) and fitted between and beyond them: a block's size and offset by
//! the exact term through its values (as a request's), a segment's size by the request that made
//! it, through the allocator's rounding (20 MiB for a request of 1 to 10 MiB, else the request
//! rounded up to 2 MiB) from the captures where it is not 20 MiB. What pairs with nothing keeps
//! the first capture's reading (its blocks and segments, as recorded) or is left out (the
//! others'): both counted ([`PrelogFit`]). One capture cannot tell what grows: its layout is
//! replayed as recorded at every size.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use super::fit::{self, Tier};
use super::{Shape, Term};
use crate::analysis::replay::State;
use crate::analysis::whatif::alloc::{allocation_size, Allocator, LARGE_BUFFER};
use crate::model::{Action, BlockState, Device, Pool, Snapshot, SMALL_SIZE};

/// Where a segment moved up by a grown one below it starts: the driver's granularity.
const SEG_ALIGN: u64 = 2 << 20;

/// One value of the layout (a block's size or offset): the first capture's, and the paired
/// ones' at their axis values, with the term fitted through them.
#[derive(Clone, Debug)]
struct Value {
    first: u64,
    seen: Vec<(u64, u64)>,
    term: Term,
}

impl Value {
    fn new(first: u64, x0: u64, seen: Vec<(u64, u64)>, quadratic: bool) -> Value {
        let term = if seen.iter().all(|&(_, v)| v == first) {
            Term::Fixed
        } else {
            fit::term_from(first, x0, &seen, quadratic)
        };
        Value { first, seen, term }
    }

    /// The recorded value at a capture's axis value, else the term's.
    fn at(&self, x0: u64, x: u64) -> u64 {
        if x == x0 {
            return self.first;
        }
        if let Some(&(_, v)) = self.seen.iter().find(|p| p.0 == x) {
            return v;
        }
        match self.term {
            Term::Fixed => self.first,
            // An offset of 0 stays 0 (`Term::scale` gives at least 1 byte).
            t => t.scale(self.first, x0, x).min(u64::MAX / 2),
        }
    }

    fn differs(&self) -> bool {
        self.seen.iter().any(|&(_, v)| v != self.first)
    }
}

/// A segment's size at each capture: at another shape, the allocator's rounding of the request
/// that made it, estimated from the captures whose segment is not `kLargeBuffer`.
#[derive(Clone, Debug)]
struct SegSize {
    first: u64,
    seen: Vec<(u64, u64)>,
}

impl SegSize {
    fn at(&self, x0: u64, x: u64, pool: Pool) -> u64 {
        if x == x0 {
            return self.first;
        }
        if let Some(&(_, v)) = self.seen.iter().find(|p| p.0 == x) {
            return v;
        }
        if pool == Pool::Small || self.seen.iter().all(|&(_, v)| v == self.first) {
            return self.first;
        }
        // A `kLargeBuffer` segment was made for a request of 1 to 10 MiB: no size of it is known.
        let mut known: Vec<(u64, u64)> = std::iter::once((x0, self.first))
            .chain(self.seen.iter().copied())
            .filter(|&(_, v)| v != LARGE_BUFFER)
            .collect();
        known.sort_unstable();
        let request = match known.as_slice() {
            [] => return self.first,
            [(xk, v)] => Term::Linear.scale(*v, *xk, x),
            [(xk, v), rest @ ..] => fit::term_from(*v, *xk, rest, false).scale(*v, *xk, x),
        };
        allocation_size(request.clamp(SMALL_SIZE + 1, u64::MAX / 2))
    }
}

#[derive(Clone, Debug)]
struct PBlock {
    /// Its address in the first capture (what the log frees it by), where it has one.
    addr: Option<u64>,
    offset: Value,
    size: Value,
    requested: Value,
    pending: bool,
}

#[derive(Clone, Debug)]
struct PSeg {
    base: u64,
    stream: u64,
    pool: Pool,
    size: SegSize,
    blocks: Vec<PBlock>,
}

/// What pairing the layouts found, for the plan's words.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PrelogFit {
    /// The first capture's blocks alive at the first event, and of them those paired in at
    /// least one other capture, and those whose size differs there (fitted to the axis).
    pub blocks: usize,
    pub blocks_paired: usize,
    pub blocks_fitted: usize,
    /// Their bytes in the first capture, and those of the fitted ones.
    pub block_bytes: u64,
    pub fitted_block_bytes: u64,
    /// The first capture's segments at the first event, paired, and of other sizes elsewhere.
    pub segments: usize,
    pub segments_paired: usize,
    pub segments_fitted: usize,
    pub reserved_bytes: u64,
    /// The other captures' blocks and segments with no counterpart here (left out), summed.
    pub others_unpaired_blocks: usize,
    pub others_unpaired_segments: usize,
}

/// One capture's layout at its first event, each value with its counterparts' in the others.
#[derive(Clone, Debug)]
struct Layout {
    x: u64,
    segs: Vec<PSeg>,
}

/// The layout a plan's replays start from, as a function of the shape: the layout of the
/// capture nearest the shape (the larger of two as near), its fitted values moved to the shape.
#[derive(Clone, Debug)]
pub struct Prelog {
    batch_axis: bool,
    /// The first capture's, then the others'.
    layouts: Vec<Layout>,
    /// Two captures or more and a layout to pair: what the pairing found.
    pub fit: Option<PrelogFit>,
}

/// One capture, for the pairing: its device, snapshot, layout at the first event and axis value.
pub struct Side<'a> {
    pub snap: &'a Snapshot,
    pub dev: &'a Device,
    pub initial: &'a State,
    pub x: u64,
}

/// A block alive at a capture's first event, as the pairing sees it.
struct Pre {
    seg: u64,
    addr: u64,
    size: u64,
    requested: u64,
    /// The first log event that touches it (a free), `None` when the log never does.
    touched: Option<usize>,
    key: String,
}

fn pre_blocks(s: &Side) -> Vec<Pre> {
    let addrs: HashSet<u64> = s.initial.live_blocks().map(|b| b.address).collect();
    let mut touched: HashMap<u64, usize> = HashMap::default();
    for (i, e) in s.dev.events.iter().enumerate() {
        let block_event = matches!(
            e.action,
            Action::Alloc | Action::FreeRequested | Action::FreeCompleted
        );
        if block_event && addrs.contains(&e.addr) {
            touched.entry(e.addr).or_insert(i);
        }
    }
    let mut keys: HashMap<crate::model::StackId, String> = HashMap::default();
    let mut out = Vec::new();
    for seg in s.initial.segments.values() {
        for b in seg.blocks.values() {
            let key = keys
                .entry(b.stack)
                .or_insert_with(|| fit::key(s.snap, b.stack, Tier::Full))
                .clone();
            out.push(Pre {
                seg: seg.address,
                addr: b.address,
                size: b.size,
                requested: b.requested,
                touched: touched.get(&b.address).copied(),
                key,
            });
        }
    }
    out
}

/// Blocks `xs` of `a` and `ys` of `b`, each in order, paired by [`fit::align`] where `exact`
/// accepts their sizes (indices into `a` and `b`).
fn align_sizes(
    a: &[Pre],
    b: &[Pre],
    xs: &[usize],
    ys: &[usize],
    exact: &dyn Fn(u64, u64) -> bool,
) -> Vec<(usize, usize)> {
    let ok = |i: usize, j: usize| exact(a[xs[i]].size, b[ys[j]].size);
    fit::align(xs.len(), ys.len(), &ok)
        .into_iter()
        .map(|(i, j)| (xs[i], ys[j]))
        .collect()
}

/// Pairs the blocks of two captures that the log frees (indices into `a` and `b`): by stack,
/// in the order the log first touches them; `exact` accepts a pair of sizes. (Blocks the log
/// never touches have no order the two processes share: their addresses are the driver's.)
fn pair_touched(a: &[Pre], b: &[Pre], exact: &dyn Fn(u64, u64) -> bool) -> Vec<(usize, usize)> {
    fn group(v: &[Pre]) -> HashMap<&str, Vec<usize>> {
        let mut g: HashMap<&str, Vec<usize>> = HashMap::default();
        for (i, p) in v.iter().enumerate() {
            if p.touched.is_some() {
                g.entry(p.key.as_str()).or_default().push(i);
            }
        }
        for xs in g.values_mut() {
            xs.sort_by_key(|&i| v[i].touched);
        }
        g
    }
    let (ga, gb) = (group(a), group(b));
    let mut out = Vec::new();
    for (k, xs) in &ga {
        if let Some(ys) = gb.get(k) {
            out.extend(align_sizes(a, b, xs, ys, exact));
        }
    }
    out
}

/// Pairs the blocks the log never touches, within paired segments (`segs`: first's base ->
/// other's), in address order, a pair needing `exact` sizes.
fn pair_untouched(
    a: &[Pre],
    b: &[Pre],
    segs: &HashMap<u64, u64>,
    exact: &dyn Fn(u64, u64) -> bool,
) -> Vec<(usize, usize)> {
    let by_seg = |v: &[Pre]| {
        let mut g: HashMap<u64, Vec<usize>> = HashMap::default();
        for (i, p) in v.iter().enumerate() {
            if p.touched.is_none() {
                g.entry(p.seg).or_default().push(i);
            }
        }
        g
    };
    let (ga, gb) = (by_seg(a), by_seg(b));
    let mut out = Vec::new();
    for (sa, xs) in &ga {
        let Some(ys) = segs.get(sa).and_then(|sb| gb.get(sb)) else {
            continue;
        };
        // `pre_blocks` lists each segment's blocks in address order.
        out.extend(align_sizes(a, b, xs, ys, exact));
    }
    out
}

/// Per initial segment (by base): the first log event that makes, frees or maps a segment at
/// its address; past it the address no longer names the segment.
fn seg_ends(s: &Side) -> HashMap<u64, usize> {
    let mut out: HashMap<u64, usize> = HashMap::default();
    for (i, e) in s.dev.events.iter().enumerate() {
        let seg_event = matches!(
            e.action,
            Action::SegmentAlloc | Action::SegmentFree | Action::SegmentMap | Action::SegmentUnmap
        );
        if seg_event && s.initial.segments.contains_key(&e.addr) {
            out.entry(e.addr).or_insert(i);
        }
    }
    out
}

/// The initial segment of `s` that a log event `i` (a request) is placed at the start of,
/// where that segment held no live block at the first event and still exists: a segment cached
/// for this request by the steps before recording.
fn cached_for(s: &Side, ends: &HashMap<u64, usize>, i: usize) -> Option<u64> {
    let addr = s.dev.events[i].addr;
    let seg = s.initial.segments.get(&addr)?;
    let alive = ends.get(&addr).is_none_or(|&end| i < end);
    (alive && seg.blocks.is_empty()).then_some(addr)
}

/// One other capture's pairing with the first: blocks (first's index -> other's) and segments
/// (first's base -> other's).
struct Pairs {
    blocks: HashMap<usize, usize>,
    segs: HashMap<u64, u64>,
}

/// Pairs segment `sa` here with `sb` there, where neither is paired yet and their pools agree.
fn vote(
    segs: &mut HashMap<u64, u64>,
    taken: &mut HashSet<u64>,
    a: &Side,
    b: &Side,
    sa: u64,
    sb: u64,
) {
    let pool = |s: &Side, base: u64| s.initial.segments.get(&base).map(|g| (g.pool, g.stream));
    if !segs.contains_key(&sa) && !taken.contains(&sb) && pool(a, sa) == pool(b, sb) {
        segs.insert(sa, sb);
        taken.insert(sb);
    }
}

/// A segment to the byte: its pool, stream, size and blocks (offset, size).
type Signature = (Pool, u64, u64, Vec<(u64, u64)>);

fn signature(g: &crate::analysis::replay::SegState) -> Signature {
    let blocks = g
        .blocks
        .values()
        .map(|b| (b.address.saturating_sub(g.address), b.size))
        .collect();
    (g.pool, g.stream, g.size, blocks)
}

fn pair_with(
    a: &Side,
    pa: &[Pre],
    b: &Side,
    pb: &[Pre],
    requests: &[Option<usize>],
    quadratic: bool,
) -> Pairs {
    let exact = |s: u64, t: u64| !fit::term(s, t, a.x, b.x, quadratic).1;
    let mut blocks: HashMap<usize, usize> = pair_touched(pa, pb, &exact).into_iter().collect();
    let mut segs: HashMap<u64, u64> = HashMap::default();
    let mut taken: HashSet<u64> = HashSet::default();
    // A paired block's segment pairs with its counterpart's.
    let mut by_first: Vec<(usize, usize)> = blocks.iter().map(|(&i, &j)| (i, j)).collect();
    by_first.sort_unstable();
    for (i, j) in by_first {
        vote(&mut segs, &mut taken, a, b, pa[i].seg, pb[j].seg);
    }
    // A segment cached for a request pairs with the one cached for its counterpart.
    let (ea, eb) = (seg_ends(a), seg_ends(b));
    for (i, e) in a.dev.events.iter().enumerate() {
        if e.action != Action::Alloc {
            continue;
        }
        let Some(j) = requests.get(i).copied().flatten() else {
            continue;
        };
        if let (Some(sa), Some(sb)) = (cached_for(a, &ea, i), cached_for(b, &eb, j)) {
            vote(&mut segs, &mut taken, a, b, sa, sb);
        }
    }
    // Segments alike to the byte (the same blocks at the same offsets: weights, optimizer
    // state), in address order.
    let mut alike: HashMap<Signature, Vec<u64>> = HashMap::default();
    for g in b.initial.segments.values().rev() {
        if !g.blocks.is_empty() && !taken.contains(&g.address) {
            alike.entry(signature(g)).or_default().push(g.address);
        }
    }
    for g in a.initial.segments.values() {
        if g.blocks.is_empty() || segs.contains_key(&g.address) {
            continue;
        }
        if let Some(sb) = alike.get_mut(&signature(g)).and_then(|v| v.pop()) {
            vote(&mut segs, &mut taken, a, b, g.address, sb);
        }
    }
    blocks.extend(pair_untouched(pa, pb, &segs, &exact));
    Pairs { blocks, segs }
}

/// A capture's layout with every value as recorded, each block named by its own address.
fn layout_of(initial: &State, x: u64) -> Layout {
    let fixed = |v: u64| Value {
        first: v,
        seen: Vec::new(),
        term: Term::Fixed,
    };
    let segs = initial
        .segments
        .values()
        .map(|s| PSeg {
            base: s.address,
            stream: s.stream,
            pool: s.pool,
            size: SegSize {
                first: s.size,
                seen: Vec::new(),
            },
            blocks: s
                .blocks
                .values()
                .map(|b| PBlock {
                    addr: Some(b.address),
                    offset: fixed(b.address.saturating_sub(s.address)),
                    size: fixed(b.size),
                    requested: fixed(b.requested),
                    pending: b.state == BlockState::ActivePendingFree,
                })
                .collect(),
        })
        .collect();
    Layout { x, segs }
}

/// Capture `c`'s layout with its values' counterparts in every other capture (`pairs[k]`: the
/// first capture's pairing with capture `k + 1`; `pres[c]`: capture `c`'s blocks).
fn layout_fitted(
    c: usize,
    sides: &[&Side],
    pres: &[Vec<Pre>],
    pairs: &[Pairs],
    quadratic: bool,
) -> Layout {
    let side = sides[c];
    let mut out = layout_of(side.initial, side.x);
    // Capture `c`'s block (index) and segment (base) -> the first capture's.
    let (to_first_block, to_first_seg): (HashMap<usize, usize>, HashMap<u64, u64>) = match c {
        0 => (
            (0..pres[0].len()).map(|i| (i, i)).collect(),
            side.initial.segments.keys().map(|&a| (a, a)).collect(),
        ),
        _ => (
            pairs[c - 1].blocks.iter().map(|(&i, &j)| (j, i)).collect(),
            pairs[c - 1].segs.iter().map(|(&a, &b)| (b, a)).collect(),
        ),
    };
    // The first capture's block or segment -> capture `d`'s.
    let block_in = |d: usize, i: usize| match d {
        0 => Some(i),
        _ => pairs[d - 1].blocks.get(&i).copied(),
    };
    let seg_in = |d: usize, a: u64| match d {
        0 => Some(a),
        _ => pairs[d - 1].segs.get(&a).copied(),
    };
    let mut j = 0;
    for s in &mut out.segs {
        let first_seg = to_first_seg.get(&s.base).copied();
        let others = (0..sides.len()).filter(|&d| d != c);
        s.size.seen = others
            .clone()
            .filter_map(|d| {
                let sb = seg_in(d, first_seg?)?;
                Some((sides[d].x, sides[d].initial.segments.get(&sb)?.size))
            })
            .collect();
        for b in &mut s.blocks {
            let first_block = to_first_block.get(&j).copied();
            j += 1;
            b.addr = first_block.map(|i| pres[0][i].addr);
            let (mut sizes, mut offs, mut reqs) = (Vec::new(), Vec::new(), Vec::new());
            for d in others.clone() {
                let Some(o) = first_block
                    .and_then(|i| block_in(d, i))
                    .map(|k| &pres[d][k])
                else {
                    continue;
                };
                let x = sides[d].x;
                sizes.push((x, o.size));
                reqs.push((x, o.requested));
                if first_seg.and_then(|a| seg_in(d, a)) == Some(o.seg) {
                    offs.push((x, o.addr - o.seg));
                }
            }
            b.size = Value::new(b.size.first, side.x, sizes, quadratic);
            b.offset = Value::new(b.offset.first, side.x, offs, quadratic);
            b.requested = Value::new(b.requested.first, side.x, reqs, quadratic);
        }
    }
    out
}

/// What the pairing found, from the first capture's layout.
fn count(first: &Layout, pairs: &[Pairs], pres: &[Vec<Pre>], sides: &[&Side]) -> PrelogFit {
    let mut fit = PrelogFit::default();
    for s in &first.segs {
        fit.segments += 1;
        fit.reserved_bytes = fit.reserved_bytes.saturating_add(s.size.first);
        fit.segments_paired += usize::from(!s.size.seen.is_empty());
        fit.segments_fitted += usize::from(s.size.seen.iter().any(|&(_, v)| v != s.size.first));
        for b in &s.blocks {
            fit.blocks += 1;
            fit.block_bytes = fit.block_bytes.saturating_add(b.size.first);
            fit.blocks_paired += usize::from(!b.size.seen.is_empty());
            if b.size.differs() || b.offset.differs() {
                fit.blocks_fitted += 1;
                fit.fitted_block_bytes = fit.fitted_block_bytes.saturating_add(b.size.first);
            }
        }
    }
    for (k, p) in pairs.iter().enumerate() {
        fit.others_unpaired_blocks += pres[k + 1].len() - p.blocks.len();
        fit.others_unpaired_segments += sides[k + 1].initial.segments.len() - p.segs.len();
    }
    fit
}

impl Prelog {
    /// The first capture's layout (`x0`: its value of the axis the captures vary), replayed as
    /// recorded at every shape.
    pub fn fixed(initial: &State, x0: u64, batch_axis: bool) -> Prelog {
        Prelog {
            batch_axis,
            layouts: vec![layout_of(initial, x0)],
            fit: None,
        }
    }

    /// The captures' layouts paired with the first's (`pairing`: the requests as the fit paired
    /// them, per other capture) and fitted to the axis.
    pub fn fitted(
        first: &Side,
        others: &[Side],
        pairing: &fit::Pairing,
        batch_axis: bool,
        quadratic: bool,
    ) -> Prelog {
        if first.initial.segments.is_empty() || others.is_empty() {
            return Prelog::fixed(first.initial, first.x, batch_axis);
        }
        let sides: Vec<&Side> = std::iter::once(first).chain(others).collect();
        let pres: Vec<Vec<Pre>> = sides.iter().map(|s| pre_blocks(s)).collect();
        let none = Vec::new();
        let pairs: Vec<Pairs> = others
            .iter()
            .enumerate()
            .map(|(k, o)| {
                let requests = pairing.get(k).unwrap_or(&none);
                pair_with(first, &pres[0], o, &pres[k + 1], requests, quadratic)
            })
            .collect();
        let layouts: Vec<Layout> = (0..sides.len())
            .map(|c| layout_fitted(c, &sides, &pres, &pairs, quadratic))
            .collect();
        let fit = count(&layouts[0], &pairs, &pres, &sides);
        Prelog {
            batch_axis,
            layouts,
            fit: Some(fit),
        }
    }

    /// The first capture's layout as recorded at every shape (what one capture gives).
    pub fn as_recorded(&self, initial: &State) -> Prelog {
        Prelog::fixed(initial, self.layouts[0].x, self.batch_axis)
    }

    /// The same without capture `c`'s layout (its shape then starts from the nearest other's),
    /// where more than one is left.
    pub fn without(&self, c: usize) -> Option<Prelog> {
        if self.layouts.len() < 2 || c >= self.layouts.len() {
            return None;
        }
        let mut p = self.clone();
        p.layouts.remove(c);
        Some(p)
    }

    /// Places the layout at `at` in the model; returns the address map that starts a replay
    /// (each block by its first-capture address). At a capture's shape it is that capture's
    /// layout, block for block.
    pub fn seed(&self, m: &mut Allocator, at: Shape) -> HashMap<u64, u64> {
        let x = if self.batch_axis {
            at.batch
        } else {
            at.seq.unwrap_or(1)
        };
        let anchor = self
            .layouts
            .iter()
            .min_by_key(|l| (l.x.abs_diff(x), std::cmp::Reverse(l.x)))
            .expect("a plan has a first capture");
        let (x0, recorded) = (anchor.x, anchor.x == x);
        let mut addr_map = HashMap::default();
        let mut floor = 0u64;
        let mut placed: Vec<(u64, u64, u64, bool, Option<u64>)> = Vec::new();
        let mut live: Vec<(u64, u64, u64, bool)> = Vec::new();
        for s in &anchor.segs {
            // A segment cached empty that pairs with none elsewhere has no size at another
            // shape: the requests there make their own.
            if !recorded && self.fit.is_some() && s.blocks.is_empty() && s.size.seen.is_empty() {
                continue;
            }
            placed.clear();
            placed.extend(s.blocks.iter().map(|b| {
                let (off, size) = (b.offset.at(x0, x), b.size.at(x0, x));
                let req = b.requested.at(x0, x);
                (off, size, req, b.pending, b.addr)
            }));
            let mut size = s.size.at(x0, x, s.pool);
            if !recorded {
                // Grown blocks that would overlap are pushed up, in their order at this shape,
                // and the segment holds them all.
                placed.sort_by_key(|p| p.0);
                let mut cursor = 0u64;
                for p in placed.iter_mut() {
                    p.1 = p.1.div_ceil(512).saturating_mul(512);
                    p.0 = p.0.div_ceil(512).saturating_mul(512).max(cursor);
                    cursor = p.0.saturating_add(p.1);
                }
                if cursor > size {
                    size = cursor.div_ceil(SEG_ALIGN).saturating_mul(SEG_ALIGN);
                }
            }
            let base = if s.base >= floor {
                s.base
            } else {
                floor.div_ceil(SEG_ALIGN).saturating_mul(SEG_ALIGN)
            };
            floor = base.saturating_add(size);
            live.clear();
            live.extend(placed.iter().map(|&(off, size, req, pending, _)| {
                (base.saturating_add(off), size, req, pending)
            }));
            m.seed_segment(base, size, s.stream, s.pool, &live);
            for &(off, .., addr) in &placed {
                if let Some(a) = addr {
                    addr_map.insert(a, base.saturating_add(off));
                }
            }
        }
        addr_map
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn pre(seg: u64, addr: u64, size: u64, touched: Option<usize>, key: &str) -> Pre {
        Pre {
            seg,
            addr,
            size,
            requested: size,
            touched,
            key: key.to_string(),
        }
    }

    #[test]
    fn blocks_the_log_frees_pair_by_stack_and_free_order() {
        let exact = |a: u64, b: u64| !fit::term(a, b, 4, 8, false).1;
        // Here: two outputs of one stack freed at events 10 and 30, a weight never freed.
        let here = [
            pre(0, 0x100, 2 * MIB, Some(10), "out"),
            pre(0, 0x200, 4 * MIB, Some(30), "out"),
            pre(0, 0x300, MIB, None, "w"),
        ];
        // There (twice the batch): the same two, freed in the same order at other events and
        // addresses (in another address order), one more freed first that has no counterpart
        // (3 MiB: no exact term).
        let there = [
            pre(0, 0x900, 3 * MIB, Some(5), "out"),
            pre(0, 0x500, 4 * MIB, Some(12), "out"),
            pre(0, 0x400, 8 * MIB, Some(40), "out"),
            pre(0, 0x600, MIB, None, "w"),
        ];
        let mut pairs = pair_touched(&here, &there, &exact);
        pairs.sort_unstable();
        assert_eq!(pairs, vec![(0, 1), (1, 2)]);
        // Untouched blocks pair only within paired segments.
        let none: HashMap<u64, u64> = HashMap::default();
        assert!(pair_untouched(&here, &there, &none, &exact).is_empty());
        let segs: HashMap<u64, u64> = [(0, 0)].into_iter().collect();
        assert_eq!(pair_untouched(&here, &there, &segs, &exact), vec![(2, 3)]);
    }

    #[test]
    fn values_are_recorded_at_the_captures_and_fitted_between_and_beyond() {
        let v = Value::new(2 * MIB, 4, vec![(8, 4 * MIB)], false);
        assert_eq!(v.term, Term::Linear);
        assert_eq!(
            (v.at(4, 4), v.at(4, 8), v.at(4, 16)),
            (2 * MIB, 4 * MIB, 8 * MIB)
        );
        assert_eq!(Value::new(0, 4, vec![(8, 0)], false).at(4, 16), 0);
        // A segment of 20 MiB at b4 (made for a request of 1 to 10 MiB) and 12 MiB at b8: the
        // request is about 12 MiB at b8, so 24 MiB at b16; at b4 and b8 as recorded.
        let s = SegSize {
            first: LARGE_BUFFER,
            seen: vec![(8, 12 * MIB)],
        };
        assert_eq!(s.at(4, 4, Pool::Large), LARGE_BUFFER);
        assert_eq!(s.at(4, 8, Pool::Large), 12 * MIB);
        assert_eq!(s.at(4, 16, Pool::Large), 24 * MIB);
        // Below 10 MiB the allocator rounds to its 20 MiB buffer again.
        assert_eq!(s.at(4, 6, Pool::Large), LARGE_BUFFER);
        // Small-pool segments keep their size.
        assert_eq!(s.at(4, 16, Pool::Small), LARGE_BUFFER);
    }
}
