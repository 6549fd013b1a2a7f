//! How many threads memscope's own work may use, read in one place (issue #43).
//!
//! Why one place: the trace reader and the analysis' independent passes each split their
//! work across cores (a snapshot's pickle decode is still one thread: BENCHMARKS.md says why);
//! `MEMSCOPE_THREADS=N` bounds all of them the same way, and `MEMSCOPE_THREADS=1` makes every
//! one of them run on the calling thread, in the serial order (what a profile or a bisection
//! needs). Without it, the machine's parallelism, capped
//! at [`MAX`] (more threads than that only add memory and contention on the passes split here).
//!
//! [`join`] is the one way the analysis runs two independent passes (and [`map`] one pass over
//! independent items): on more threads where more than one is wanted, else one after the
//! other, in the order given.

use std::cell::Cell;

/// The most threads [`wanted`] gives without `MEMSCOPE_THREADS`.
pub const MAX: usize = 16;

/// The environment variable that sets the thread count.
pub const VAR: &str = "MEMSCOPE_THREADS";

/// The number of threads wanted, at least 1: `MEMSCOPE_THREADS` where it is a positive
/// integer (capped at 1024), else the machine's available parallelism capped at [`MAX`].
pub fn wanted() -> usize {
    from_env(std::env::var(VAR).ok().as_deref())
}

fn from_env(v: Option<&str>) -> usize {
    match v.and_then(|s| s.trim().parse::<usize>().ok()) {
        Some(n) if n >= 1 => n.min(1024),
        _ => std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX)),
    }
}

thread_local! {
    static SPAWNED: Cell<u64> = const { Cell::new(0) };
}

/// How many threads [`join`] and [`map`] have spawned from the calling thread so far: what a test reads to
/// know that the concurrent path was taken (or, with one thread, that it was not).
pub fn spawned_here() -> u64 {
    SPAWNED.with(|c| c.get())
}

/// A count set by environment variable `var` (a pass's split threshold, forced by the tests),
/// `None` where it is unset or no count.
pub fn count_from_env(var: &str) -> Option<usize> {
    std::env::var(var).ok()?.trim().parse::<usize>().ok()
}

/// Whether a pass over `n` entries is split across `threads` threads: at least `min_entries`
/// entries and `min_threads` threads (two at the least), unless the environment variable `var`
/// sets the fewest entries ([`count_from_env`]): then on any count of threads above one, what
/// the tests use to take a split on small captures. The replay, the step search and the leak
/// search each ask this with their own variable and thresholds.
pub fn split_wanted(
    var: &str,
    min_entries: usize,
    min_threads: usize,
    n: usize,
    threads: usize,
) -> bool {
    match count_from_env(var) {
        Some(min) => threads > 1 && n >= min,
        None => threads >= min_threads.max(2) && n >= min_entries,
    }
}

/// Runs `a` and `b`: on a second thread for `b` when `threads > 1`, else `a` then `b` on the
/// calling thread. A panic in either is resumed on the caller. A thread that cannot start (no
/// memory for its stack, a process limit) is not an error: `b` then runs here, after `a`.
pub fn join<A, B, RA, RB>(threads: usize, a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    if threads <= 1 {
        let ra = a();
        return (ra, b());
    }
    let slot = std::sync::Mutex::new(Some(b));
    let take = || slot.lock().unwrap_or_else(|e| e.into_inner()).take();
    std::thread::scope(|scope| {
        let hb = std::thread::Builder::new().spawn_scoped(scope, || take().map(|b| b()));
        if hb.is_ok() {
            SPAWNED.with(|c| c.set(c.get() + 1));
        }
        let ra = a();
        let rb = match hb {
            Ok(h) => h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)),
            Err(_) => None,
        };
        // `b` ran on the thread, or is still in the slot because the thread never started.
        let rb = match rb {
            Some(r) => r,
            None => take()
                .map(|b| b())
                .expect("b runs once: on the thread or here"),
        };
        (ra, rb)
    })
}

/// Runs `f` on a new thread of the scope `s`, or here, now, where a thread cannot start (no
/// memory for its stack, a process limit): the work is done either way, never a panic. Not
/// counted by [`spawned_here`] (a splitter's inner work, not one of the analysis' passes).
pub fn spawn_or_run<'scope, F>(s: &'scope std::thread::Scope<'scope, '_>, f: F)
where
    F: FnOnce() + Send + 'scope,
{
    let slot = std::sync::Arc::new(std::sync::Mutex::new(Some(f)));
    let theirs = std::sync::Arc::clone(&slot);
    let spawned = std::thread::Builder::new().spawn_scoped(s, move || {
        let f = theirs.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(f) = f {
            f();
        }
    });
    if spawned.is_err() {
        let f = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(f) = f {
            f();
        }
    }
}

/// `f` of each item, in the items' order: the items split into `threads` runs (fewer where
/// there are fewer items), one per
/// thread (the first on the calling thread); with one thread or one item, in order here.
pub fn map<T, R, F>(threads: usize, items: &[T], f: F) -> Vec<R>
where
    T: Sync,
    R: Send,
    F: Fn(&T) -> R + Sync,
{
    let n = threads.min(items.len());
    if n <= 1 {
        return items.iter().map(f).collect();
    }
    // n runs whose lengths differ by one at most.
    let (base, extra) = (items.len() / n, items.len() % n);
    let mut runs = Vec::with_capacity(n);
    let mut rest = items;
    for i in 0..n {
        let (run, r) = rest.split_at(base + usize::from(i < extra));
        runs.push(run);
        rest = r;
    }
    let mut chunks = runs.into_iter();
    let first = chunks.next().unwrap_or_default();
    let f = &f;
    std::thread::scope(|scope| {
        // A run whose thread cannot start is done here, in its place in the order.
        let rest: Vec<_> = chunks
            .map(|c| {
                let h = std::thread::Builder::new()
                    .spawn_scoped(scope, move || c.iter().map(f).collect::<Vec<R>>());
                if h.is_ok() {
                    SPAWNED.with(|s| s.set(s.get() + 1));
                }
                (c, h.ok())
            })
            .collect();
        let mut out: Vec<R> = first.iter().map(f).collect();
        for (c, h) in rest {
            match h {
                Some(h) => out.extend(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))),
                None => out.extend(c.iter().map(f)),
            }
        }
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variable_sets_the_count_and_bad_values_fall_back() {
        assert_eq!(from_env(Some("1")), 1);
        assert_eq!(from_env(Some(" 4 ")), 4);
        assert_eq!(from_env(Some("99999")), 1024);
        let default = from_env(None);
        assert!((1..=MAX).contains(&default));
        assert_eq!(from_env(Some("0")), default);
        assert_eq!(from_env(Some("many")), default);
    }

    #[test]
    fn join_spawns_only_when_more_than_one_thread_is_wanted() {
        let before = spawned_here();
        let order = std::sync::Mutex::new(Vec::new());
        let r = join(
            1,
            || order.lock().unwrap().push(1),
            || order.lock().unwrap().push(2),
        );
        assert_eq!(r, ((), ()));
        assert_eq!(*order.lock().unwrap(), vec![1, 2]);
        assert_eq!(spawned_here(), before);
        let (a, b) = join(2, || 3, || std::thread::current().id());
        assert_eq!(a, 3);
        assert_ne!(b, std::thread::current().id());
        assert_eq!(spawned_here(), before + 1);
    }

    #[test]
    fn map_keeps_the_order_on_any_count() {
        let items: Vec<u32> = (0..23).collect();
        let want: Vec<u32> = items.iter().map(|x| x * x).collect();
        for n in [1, 2, 3, 4, 16, 64] {
            let before = spawned_here();
            assert_eq!(map(n, &items, |x| x * x), want, "{n}");
            assert_eq!(spawned_here() - before, n.min(items.len()) as u64 - 1);
        }
        assert!(map(4, &[] as &[u32], |x| *x).is_empty());
    }
}
