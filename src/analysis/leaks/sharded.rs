//! The survivors walk on several threads (issue #43): a 15M-entry log of one device spent
//! most of its leak search in [`walk`]'s map of live blocks, one entry at a time.
//!
//! Why by address: an entry only ever touches the live block at its own address (an alloc
//! replaces it, a free removes it), so the addresses split into shards whose live maps never
//! meet. Each thread walks the whole log, applying only its shard's entries, and keeps its own
//! per-site sums and changes; the per-site figures are sums, so the shards' changes merged by
//! boundary (a site changed at a boundary where it changed in any shard) are the serial walk's.
//! Sites are interned first, in the serial walk's order (its first alloc of each stack), so
//! their ids, and every tie broken by them later, are the same. A log whose rounded sizes
//! could saturate a sum (over `u64::MAX` in all) is walked serially: saturation is not a sum.

#[allow(unused_imports)]
use super::*;

/// The environment variable that sets the fewest entries for the split walk (`0`: split every
/// log, on any count of threads above one): what the tests use to take it on small captures.
pub const SPLIT_MIN_VAR: &str = "MEMSCOPE_LEAK_SPLIT_MIN";

/// Fewest entries a log needs for its survivors to be walked split, unless [`SPLIT_MIN_VAR`]
/// says otherwise: below it, threads cost more than they save.
pub const SPLIT_MIN_EVENTS: usize = 1 << 17;

/// Whether a log of `n` entries is walked split on `threads` threads.
pub(super) fn split_wanted(n: usize, threads: usize) -> bool {
    crate::threads::split_wanted(SPLIT_MIN_VAR, SPLIT_MIN_EVENTS, 2, n, threads)
}

/// [`walk`] on `threads` threads where the log is long enough ([`split_wanted`]); the result,
/// and the site table it leaves, are the serial walk's either way.
pub(super) fn walk_on(
    dev: &Device,
    snap: &Snapshot,
    sites: &mut SiteTable,
    bounds: &[(usize, usize)],
    threads: usize,
) -> Survivors {
    if !split_wanted(dev.events.len(), threads) {
        return walk(dev, snap, sites, bounds);
    }
    // Sites in the serial walk's order: it interns each alloc's stack as it meets it.
    let site_of: Vec<SiteId> = dev
        .events
        .iter()
        .map(|e| match e.action {
            Action::Alloc => sites.of(e.stack),
            _ => SiteId(u32::MAX),
        })
        .collect();
    let shards: Vec<usize> = (0..threads).collect();
    let parts = crate::threads::map(threads, &shards, |&me| {
        shard(dev, snap, &site_of, bounds, threads, me)
    });
    let total: u128 = parts.iter().map(|p| p.1).sum();
    if total > u128::from(u64::MAX) {
        return walk(dev, snap, sites, bounds);
    }
    let parts: Vec<Vec<Vec<Change>>> = parts.into_iter().map(|p| p.0).collect();
    let ids: Vec<usize> = (0..sites.len()).collect();
    let changes = crate::threads::map(threads, &ids, |&k| merge_site(&parts, k));
    Survivors { changes }
}

/// The shard (of `shards`) an address belongs to.
fn shard_of(addr: u64, shards: usize) -> usize {
    // Blocks are aligned: the low bits say nothing; a multiplicative hash spreads the rest.
    ((addr >> 9).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize % shards
}

/// [`walk`] over the entries of shard `me`: its changes per site, and the sum of the rounded
/// sizes it allocated (what says whether a sum could have saturated).
fn shard(
    dev: &Device,
    snap: &Snapshot,
    site_of: &[SiteId],
    bounds: &[(usize, usize)],
    shards: usize,
    me: usize,
) -> (Vec<Vec<Change>>, u128) {
    let mut live: HashMap<u64, Rec> = HashMap::default();
    let mut tally = Tally::default();
    let mut total = 0u128;
    let mut next = 0usize;
    for (i, e) in dev.events.iter().enumerate() {
        let mine = matches!(
            e.action,
            Action::Alloc | Action::FreeRequested | Action::FreeCompleted
        ) && shard_of(e.addr, shards) == me;
        if mine {
            let last_bound = next.checked_sub(1).map(|b| bounds[b].0);
            let (deltas, gone) = apply_event(e, i, snap, || site_of[i], &mut live);
            if e.action == Action::Alloc {
                total += u128::from(round_size(e.size, &snap.settings));
            }
            tally.add(deltas, evicted_site(gone, last_bound));
        }
        while next < bounds.len() && bounds[next].0 == i {
            tally.close(next as u32);
            next += 1;
        }
    }
    (tally.into_changes(), total)
}

/// Site `k`'s changes over all shards: at each boundary where any shard changed, the sum of
/// every shard's figures as they stood there.
fn merge_site(parts: &[Vec<Vec<Change>>], k: usize) -> Vec<Change> {
    let lists: Vec<&[Change]> = parts
        .iter()
        .map(|p| p.get(k).map_or(&[][..], |v| &v[..]))
        .collect();
    let mut at = vec![0usize; lists.len()];
    let mut cur = vec![(0u64, 0u64, 0u64); lists.len()];
    let mut out = Vec::new();
    while let Some(b) = lists
        .iter()
        .zip(&at)
        .filter_map(|(l, &j)| l.get(j).map(|c| c.0))
        .min()
    {
        for (s, l) in lists.iter().enumerate() {
            if let Some(&(cb, by, co, ev)) = l.get(at[s]) {
                if cb == b {
                    cur[s] = (by, co, ev);
                    at[s] += 1;
                }
            }
        }
        let sum = cur.iter().fold((0u64, 0u64, 0u64), |a, c| {
            (
                a.0.saturating_add(c.0),
                a.1.saturating_add(c.1),
                a.2.saturating_add(c.2),
            )
        });
        out.push((b, sum.0, sum.1, sum.2));
    }
    out
}
