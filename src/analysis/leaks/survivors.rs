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
    match e.action {
        Action::Alloc => {
            let r = Rec {
                site: sites.of(e.stack),
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

pub(super) fn walk(
    dev: &Device,
    snap: &Snapshot,
    sites: &mut SiteTable,
    bounds: &[(usize, usize)],
) -> Survivors {
    let mut live: HashMap<u64, Rec> = HashMap::default();
    let mut sums: Vec<(u64, u64, u64)> = Vec::new();
    let mut dirty: Vec<SiteId> = Vec::new();
    let mut is_dirty: Vec<bool> = Vec::new();
    let mut changes: Vec<Vec<Change>> = Vec::new();
    let mut next = 0usize;
    for i in 0..dev.events.len() {
        // A block that survived the last boundary and leaves now is an eviction.
        // The block that leaves is the one `apply` replaced or removed (one map lookup).
        let last_bound = next.checked_sub(1).map(|b| bounds[b].0);
        let (deltas, gone) = apply_gone(dev, snap, sites, &mut live, i);
        let evicts = gone
            .filter(|r| last_bound.is_some_and(|b| r.alloc as usize <= b))
            .map(|r| r.site);
        for (s, db, dc) in deltas.into_iter().flatten() {
            let k = s.0 as usize;
            if sums.len() <= k {
                sums.resize(k + 1, (0, 0, 0));
                is_dirty.resize(k + 1, false);
                changes.resize(k + 1, Vec::new());
            }
            sums[k].0 = sums[k].0.saturating_add_signed(db);
            sums[k].1 = sums[k].1.saturating_add_signed(dc);
            if dc < 0 && evicts == Some(s) {
                sums[k].2 += 1;
            }
            if !is_dirty[k] {
                is_dirty[k] = true;
                dirty.push(s);
            }
        }
        while next < bounds.len() && bounds[next].0 == i {
            for s in dirty.drain(..) {
                let k = s.0 as usize;
                is_dirty[k] = false;
                changes[k].push((next as u32, sums[k].0, sums[k].1, sums[k].2));
            }
            next += 1;
        }
    }
    changes.resize(sites.len(), Vec::new());
    Survivors { changes }
}
