//! The walk: one pass over the log that counts, per allocation site, the blocks still alive at
//! every step boundary (stored as changes, since most sites never change).

#[allow(unused_imports)]
use super::*;

/// A block allocated in the log and not yet freed.
#[derive(Clone, Copy, Debug)]
pub(super) struct Rec {
    pub(super) site: SiteId,
    pub(super) size: u64,
    pub(super) requested: u64,
    pub(super) alloc: u32,
}

/// Per-site survivors at every boundary, stored as changes (most sites never change).
pub(super) struct Survivors {
    /// `changes[site]`: `(boundary, bytes, count, evicted)` whenever the site's figures changed.
    /// `evicted` counts, cumulatively, the site's blocks freed after surviving a boundary: old
    /// entries leaving a container (what tells a bounded container from a leak).
    pub(super) changes: Vec<Vec<Change>>,
}

/// One change of a site's figures: `(boundary, bytes, count, evicted)`.
pub(super) type Change = (u32, u64, u64, u64);

impl Survivors {
    /// Dense series of one site over all boundaries.
    pub(super) fn series(&self, site: SiteId, n: usize) -> (Vec<u64>, Vec<u64>) {
        let mut b = vec![0u64; n];
        let mut c = vec![0u64; n];
        let ch = &self.changes[site.0 as usize];
        for (k, &(at, by, co, _)) in ch.iter().enumerate() {
            let until = ch.get(k + 1).map(|x| x.0 as usize).unwrap_or(n);
            for i in at as usize..until.min(n) {
                b[i] = by;
                c[i] = co;
            }
        }
        (b, c)
    }

    /// Dense cumulative evictions of one site over all boundaries: its blocks freed after they
    /// had survived a boundary.
    pub(super) fn evicted(&self, site: SiteId, n: usize) -> Vec<u64> {
        let mut v = vec![0u64; n];
        let ch = &self.changes[site.0 as usize];
        for (k, &(at, _, _, ev)) in ch.iter().enumerate() {
            let until = ch.get(k + 1).map(|x| x.0 as usize).unwrap_or(n);
            for x in v.iter_mut().take(until.min(n)).skip(at as usize) {
                *x = ev;
            }
        }
        v
    }
}

/// A change of one site's sums: `(site, bytes delta, count delta)`.
type Delta = (SiteId, i64, i64);

/// Applies event `i` to the live map; returns the changes to per-site sums (at most two:
/// an alloc over a block believed live means that block was freed unseen).
pub(super) fn apply(
    dev: &Device,
    snap: &Snapshot,
    sites: &mut SiteTable,
    live: &mut HashMap<u64, Rec>,
    i: usize,
) -> [Option<Delta>; 2] {
    apply_gone(dev, snap, sites, live, i).0
}

/// [`apply`], with the record the event took out of the live map (the block an alloc
/// replaced, or the one a free removed).
fn apply_gone(
    dev: &Device,
    snap: &Snapshot,
    sites: &mut SiteTable,
    live: &mut HashMap<u64, Rec>,
    i: usize,
) -> ([Option<Delta>; 2], Option<Rec>) {
    let e = &dev.events[i];
    apply_event(e, i, snap, || sites.of(e.stack), live)
}

/// Applies entry `i` (`e`) to the live map, an alloc's site given by `site`: the one
/// application of an entry the serial walk and the split walk's shards share.
pub(super) fn apply_event(
    e: &crate::model::Event,
    i: usize,
    snap: &Snapshot,
    site: impl FnOnce() -> SiteId,
    live: &mut HashMap<u64, Rec>,
) -> ([Option<Delta>; 2], Option<Rec>) {
    match e.action {
        Action::Alloc => {
            let r = Rec {
                site: site(),
                size: round_size(e.size, &snap.settings),
                requested: e.size,
                alloc: i as u32,
            };
            let gone = live.insert(e.addr, r);
            let old = gone.map(|o| (o.site, -(o.size as i64), -1));
            ([Some((r.site, r.size as i64, 1)), old], gone)
        }
        Action::FreeRequested | Action::FreeCompleted => {
            let gone = live.remove(&e.addr);
            ([gone.map(|r| (r.site, -(r.size as i64), -1)), None], gone)
        }
        _ => ([None, None], None),
    }
}

/// The walk's per-site sums and the changes they made by boundary: the bookkeeping the serial
/// walk and each shard of the split walk share.
#[derive(Default)]
pub(super) struct Tally {
    sums: Vec<(u64, u64, u64)>,
    dirty: Vec<SiteId>,
    is_dirty: Vec<bool>,
    changes: Vec<Vec<Change>>,
}

impl Tally {
    /// One entry's changes; `evicts`: the site of a block it took out that had survived the
    /// last boundary (an eviction).
    pub(super) fn add(&mut self, deltas: [Option<Delta>; 2], evicts: Option<SiteId>) {
        for (s, db, dc) in deltas.into_iter().flatten() {
            let k = s.0 as usize;
            if self.sums.len() <= k {
                self.sums.resize(k + 1, (0, 0, 0));
                self.is_dirty.resize(k + 1, false);
                self.changes.resize(k + 1, Vec::new());
            }
            let sum = &mut self.sums[k];
            sum.0 = sum.0.saturating_add_signed(db);
            sum.1 = sum.1.saturating_add_signed(dc);
            if dc < 0 && evicts == Some(s) {
                sum.2 += 1;
            }
            if !self.is_dirty[k] {
                self.is_dirty[k] = true;
                self.dirty.push(s);
            }
        }
    }

    /// Boundary `b` reached: every site changed since the last one records its figures.
    pub(super) fn close(&mut self, b: u32) {
        for s in self.dirty.drain(..) {
            let k = s.0 as usize;
            self.is_dirty[k] = false;
            let (by, co, ev) = self.sums[k];
            self.changes[k].push((b, by, co, ev));
        }
    }

    pub(super) fn into_changes(self) -> Vec<Vec<Change>> {
        self.changes
    }
}

/// The site of the block `gone` when it had survived the boundary event `last_bound`.
pub(super) fn evicted_site(gone: Option<Rec>, last_bound: Option<usize>) -> Option<SiteId> {
    gone.filter(|r| last_bound.is_some_and(|b| r.alloc as usize <= b))
        .map(|r| r.site)
}

pub(super) fn walk(
    dev: &Device,
    snap: &Snapshot,
    sites: &mut SiteTable,
    bounds: &[(usize, usize)],
) -> Survivors {
    let mut live: HashMap<u64, Rec> = HashMap::default();
    let mut tally = Tally::default();
    let mut next = 0usize;
    for i in 0..dev.events.len() {
        // A block that survived the last boundary and leaves now is an eviction.
        // The block that leaves is the one `apply` replaced or removed (one map lookup).
        let last_bound = next.checked_sub(1).map(|b| bounds[b].0);
        let (deltas, gone) = apply_gone(dev, snap, sites, &mut live, i);
        tally.add(deltas, evicted_site(gone, last_bound));
        while next < bounds.len() && bounds[next].0 == i {
            tally.close(next as u32);
            next += 1;
        }
    }
    let mut changes = tally.into_changes();
    changes.resize(sites.len(), Vec::new());
    Survivors { changes }
}
