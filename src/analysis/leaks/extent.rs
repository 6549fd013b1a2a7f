//! How long a growing site's memory lived: judged over the loop's life, not at the capture's end.
//!
//! A site whose survivors rise at every step boundary is an accumulation while the steps go on.
//! Where the capture was taken decides what is still alive there, not whether the program
//! accumulated: a list local to `train()` is freed when `train()` returns, so an exit snapshot
//! (`memscope run --snapshot-on exit`, `_dump_snapshot` at the end of a script) sees the growth
//! and then its release. What tells an accumulation from a bound is *when* the release came:
//!
//! * **Alive**: at least half of what grew is still alive at the end (or at the last OOM).
//! * **Released after the loop**: the growth went on up to the last step, and the bytes were
//!   freed only after it (the loop's function returned, the script ended): the peak grows with
//!   the number of steps, so a longer run OOMs.
//! * **Released each epoch**: the growth ran over a stretch of steps and was freed all at once,
//!   then grew again, and again (outputs kept for an epoch metric and cleared at its end): the
//!   peak grows with the number of steps between releases.
//! * **Bounded** (not an accumulation): the growth stopped while the steps continued: a plateau
//!   (`deque(maxlen=N)`, a list trimmed to its last entries: one old entry freed per new one),
//!   warm-up, lazily created optimizer state, or a one-time release followed by no regrowth.
//!
//! When it cannot judge: a release that comes all at once inside the steps, and regrows, looks
//! the same whether an epoch ended or a cache was flushed when full; memscope calls it a release
//! each epoch (its peak does grow with the span between releases) and says what it saw.

use rustc_hash::FxHashMap as HashMap;

use crate::analysis::sites::Site;
use crate::model::{Action, Device, EventIdx, Snapshot, Sym};

use super::{loops, Candidate, Details};

/// How long a finding's memory lived (module docs).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Extent {
    /// Still alive where the capture ends, or at its last OOM.
    #[default]
    Alive,
    /// Grew up to the last step and was freed only after the loop ended.
    ReleasedAfterLoop,
    /// Grew over a stretch of steps, was freed all at once, and grew again.
    ReleasedEachEpoch,
}

impl Extent {
    /// The snake_case name used in JSON and baselines.
    pub fn id(self) -> &'static str {
        match self {
            Extent::Alive => "alive",
            Extent::ReleasedAfterLoop => "released_after_loop",
            Extent::ReleasedEachEpoch => "released_each_epoch",
        }
    }
    /// The name in prose.
    pub fn label(self) -> &'static str {
        match self {
            Extent::Alive => "alive at the end",
            Extent::ReleasedAfterLoop => "released only after its loop ended",
            Extent::ReleasedEachEpoch => "released all at once each epoch",
        }
    }
    /// What a finding's `live_bytes` is: alive at the end, or, for memory released before it,
    /// the bytes at the growth's end.
    pub fn held(self) -> &'static str {
        if self.released() {
            "at the growth's end"
        } else {
            "live"
        }
    }
    /// Whether the memory was freed before the capture's end (the finding is still an
    /// accumulation: its peak grows with the number of steps).
    pub fn released(self) -> bool {
        self != Extent::Alive
    }
}

impl std::fmt::Display for Extent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

/// Where and when a released accumulation was freed: the evidence behind its [`Extent`].
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Release {
    /// The free that took the freed bytes past half of what grew.
    pub event: EventIdx,
    pub time_us: Option<i64>,
    /// The innermost user frame of that free, when the log recorded its stack.
    pub site: Option<Site>,
    /// Whether the function that ran the steps' loop was still on that free's stack: `false`
    /// means it had returned (the list was a local of `train()`); `None`: no stack recorded,
    /// or no loop frame known.
    pub loop_function_active: Option<bool>,
    /// The function that ran the loop, where known.
    pub loop_function: Option<String>,
    /// Share of the grown bytes freed by the end of the capture (or its last OOM).
    pub freed_share: f64,
    /// For a release each epoch: the number of steps between two releases.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub period_steps: Option<usize>,
    /// Releases of this kind seen in the log (1 after the loop; one per epoch).
    pub releases: usize,
}

/// How one candidate's survivors were freed after its window, from one scan of the log.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Freed {
    /// The first free of a survivor after the window's end.
    first: Option<usize>,
    /// The free that took the freed bytes past half of the grown bytes.
    half: Option<usize>,
}

/// Scans the log once from the earliest window end to `judge_at`, following each candidate's
/// survivors (alive at its window's end) to their frees. Linear in events and survivors.
pub(super) fn scan(
    dev: &Device,
    bounds: &[(usize, usize)],
    cands: &[Candidate],
    details: &[Details],
    judge_at: usize,
) -> Vec<Freed> {
    let mut out = vec![Freed::default(); cands.len()];
    let mut activate: Vec<(usize, usize)> = cands
        .iter()
        .enumerate()
        .map(|(ci, c)| (bounds[c.window.end].0, ci))
        .collect();
    activate.sort_unstable();
    let Some(&(start, _)) = activate.first() else {
        return out;
    };
    let grown: Vec<u64> = details.iter().map(|d| d.grown_bytes()).collect();
    let mut freed = vec![0u64; cands.len()];
    let mut live: HashMap<u64, (usize, u64)> = HashMap::default();
    let mut next = 0usize;
    let end = judge_at.min(dev.events.len().saturating_sub(1));
    for i in start..=end {
        let e = &dev.events[i];
        let frees = matches!(
            e.action,
            Action::FreeRequested | Action::FreeCompleted | Action::Alloc
        );
        if frees {
            if let Some((ci, size)) = live.remove(&e.addr) {
                freed[ci] = freed[ci].saturating_add(size);
                let f = &mut out[ci];
                f.first.get_or_insert(i);
                if f.half.is_none() && freed[ci].saturating_mul(2) >= grown[ci] {
                    f.half = Some(i);
                }
            }
        }
        while next < activate.len() && activate[next].0 == i {
            let ci = activate[next].1;
            for (addr, r) in &details[ci].survivors {
                live.insert(*addr, (ci, r.size));
            }
            next += 1;
        }
    }
    out
}

/// Drops of at least half the window's rise between two boundaries, each followed by a rise:
/// the steps between two such drops, when the series falls back and grows again.
fn periodic_drops(b: &[u64], start: usize, end: usize) -> Vec<usize> {
    let rise = b[end].saturating_sub(b[start]);
    if rise == 0 {
        return Vec::new();
    }
    (0..b.len().saturating_sub(1))
        .filter(|&i| b[i].saturating_sub(b[i + 1]).saturating_mul(2) >= rise)
        .collect()
}

/// What one released candidate is, from its series `b` over the boundaries and its frees.
pub(super) struct Judged {
    pub extent: Extent,
    pub period_steps: Option<usize>,
    pub releases: usize,
}

/// Judges a candidate whose grown bytes were mostly freed by the judgement point: an
/// accumulation released after the loop or each epoch, or `None` for bounded growth.
pub(super) fn judge(
    b: &[u64],
    c: &Candidate,
    freed: Freed,
    bounds: &[(usize, usize)],
) -> Option<Judged> {
    let (first, half) = (freed.first?, freed.half?);
    // The last step may run on to the log's end (nothing after the loop allocated): a release
    // in it, or after it, comes when no further step follows.
    let last_boundary = bounds[bounds.len().checked_sub(2)?].0;
    // Half of what grew freed within one step: a release all at once, not one old entry
    // dropped per new one.
    let at_once = !bounds.iter().any(|&(e, _)| e >= first && e < half);
    let drops = periodic_drops(b, c.window.start, c.window.end);
    let regrows = |d: usize| b[d + 1..].windows(2).filter(|w| w[1] > w[0]).count() >= 2;
    let periodic: Vec<usize> = drops.iter().copied().filter(|&d| regrows(d)).collect();
    // The window's own release: the last boundary before it must be (near) the window's end, so
    // the growth did not plateau while the steps went on.
    let before_release = bounds.iter().filter(|&&(e, _)| e < half).count();
    let no_plateau = before_release <= c.window.end + 2;
    if !at_once || !no_plateau {
        return None;
    }
    if !periodic.is_empty() {
        let mut marks: Vec<usize> = periodic.clone();
        marks.push(c.window.end);
        marks.sort_unstable();
        marks.dedup();
        let gaps: Vec<usize> = marks.windows(2).map(|w| w[1] - w[0]).collect();
        let period = if gaps.is_empty() {
            c.window.end - c.window.start + 1
        } else {
            let mut g = gaps.clone();
            g.sort_unstable();
            g[g.len() / 2]
        };
        let after_loop = usize::from(half > last_boundary);
        return Some(Judged {
            extent: Extent::ReleasedEachEpoch,
            period_steps: Some(period),
            releases: periodic.len() + after_loop,
        });
    }
    (half > last_boundary && c.window.end + 2 >= b.len()).then_some(Judged {
        extent: Extent::ReleasedAfterLoop,
        period_steps: None,
        releases: 1,
    })
}

/// The evidence of a release: where it happened and whether the loop's function had returned.
pub(super) fn release(
    snap: &Snapshot,
    dev: &Device,
    freed: Freed,
    judged: &Judged,
    freed_share: f64,
    loop_frame: Option<(Sym, Sym)>,
) -> Option<Release> {
    let half = freed.half?;
    let e = &dev.events[half];
    let st = &snap.stacks;
    let frames = st.frames(e.stack);
    let site = loops::user_chain(st, e.stack)
        .last()
        .map(|&(file, name, line)| Site {
            file: st.str(file).to_owned(),
            line,
            function: st.str(name).to_owned(),
        });
    let loop_function_active = match (loop_frame, frames.is_empty()) {
        (Some(f), false) => Some(frames.iter().any(|&x| {
            let fr = st.frame(x);
            (fr.file, fr.name) == f
        })),
        _ => None,
    };
    Some(Release {
        event: EventIdx(half as u32),
        time_us: e.time_us(),
        site,
        loop_function_active,
        loop_function: loop_frame.map(|(_, n)| st.str(n).to_owned()),
        freed_share,
        period_steps: judged.period_steps,
        releases: judged.releases,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::leaks::Window;

    fn cand(start: usize, end: usize) -> Candidate {
        Candidate {
            site: super::super::SiteId(0),
            window: Window {
                start,
                end,
                rising: end - start,
            },
            slope_bytes: 1.0,
            slope_count: 1.0,
            r2: 1.0,
            live_bytes: 0,
            count: 0,
            ruled: crate::analysis::leaks::RuledOut {
                blocks_at_start: 0,
                blocks_at_end: 0,
                steps_after: 0,
                evicted_after: 0,
                steps_to_peak: None,
                peak_allocated_bytes: 0,
            },
        }
    }

    fn bounds(n: usize) -> Vec<(usize, usize)> {
        (0..n).map(|i| (10 * (i + 1), i)).collect()
    }

    #[test]
    fn growth_to_the_last_step_freed_after_it_is_released_after_the_loop() {
        let b: Vec<u64> = (0..10).collect();
        let f = Freed {
            first: Some(101),
            half: Some(103),
        };
        let j = judge(&b, &cand(0, 9), f, &bounds(10)).expect("an accumulation");
        assert_eq!(j.extent, Extent::ReleasedAfterLoop);
    }

    #[test]
    fn a_plateau_then_release_is_bounded() {
        // Rose for 6 steps, flat for 10 more, then freed after the loop.
        let b: Vec<u64> = (0..16).map(|i: u64| i.min(6)).collect();
        let f = Freed {
            first: Some(161),
            half: Some(162),
        };
        assert!(judge(&b, &cand(0, 6), f, &bounds(16)).is_none());
    }

    #[test]
    fn one_entry_dropped_per_step_is_bounded() {
        let b: Vec<u64> = (0..20).map(|i: u64| i.min(8)).collect();
        // First survivor freed at step 9, half of them by step 12: gradual turnover.
        let f = Freed {
            first: Some(95),
            half: Some(125),
        };
        assert!(judge(&b, &cand(0, 8), f, &bounds(20)).is_none());
    }

    #[test]
    fn a_sawtooth_is_released_each_epoch() {
        // Three epochs of 8 steps, cleared at each end.
        let b: Vec<u64> = (0..24).map(|i: u64| i % 8).collect();
        let f = Freed {
            first: Some(81),
            half: Some(82),
        };
        let j = judge(&b, &cand(0, 7), f, &bounds(24)).expect("an accumulation");
        assert_eq!(j.extent, Extent::ReleasedEachEpoch);
        assert_eq!(j.period_steps, Some(8));
    }
}
