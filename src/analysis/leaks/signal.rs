//! The OOM's view of the leaks: whether memory grew steadily, through a leak, right up to an
//! OOM (what the OOM diagnosis weighs against fragmentation and capacity).

#[allow(unused_imports)]
use super::*;

/// Whether memory grew steadily, through a leak, right up to an OOM.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LeakSignal {
    /// Index of the finding in the `leaks` list it was judged from.
    pub leak: usize,
    pub kind: LeakKind,
    pub site: Option<Site>,
    pub growth_bytes_per_step: f64,
    pub steps: usize,
    /// Bytes the finding's sites gained over its window.
    pub grown_bytes: u64,
    /// That growth as a share of allocated memory at the OOM.
    pub share_of_allocated: f64,
}

/// Share of allocated memory at the OOM that the leak's growth must account for.
pub const MIN_OOM_SHARE: f64 = 0.2;

/// Says whether memory grew steadily before the OOM at `oom` (an `oom` event's index): a leak
/// finding whose growth lasted until at most two steps before the OOM and accounts for at
/// least [`MIN_OOM_SHARE`] of allocated memory there. Steady growth that is no leak of a
/// model loop (tensors kept on purpose outside one) does not count.
pub fn leak_signal_before(
    snap: &Snapshot,
    dev: &Device,
    tl: &Timeline,
    oom: EventIdx,
) -> Option<LeakSignal> {
    let steps = steps::split(snap, dev, tl);
    let leaks = find(snap, dev, tl, &steps);
    leak_signal_from(&steps, &leaks.leaks, tl, oom)
}

/// [`leak_signal_before`] with steps and findings already computed.
pub fn leak_signal_from(
    steps: &[Step],
    leaks: &[Leak],
    tl: &Timeline,
    oom: EventIdx,
) -> Option<LeakSignal> {
    let o = oom.0 as usize;
    let allocated = tl.series.allocated.get(o).copied().unwrap_or(0).max(1);
    let bounds: Vec<usize> = steps::boundaries(steps)
        .iter()
        .map(|b| b.0)
        .filter(|&b| b < o)
        .collect();
    let recent = bounds.len().saturating_sub(3);
    let recent_from = bounds.get(recent).copied().unwrap_or(0);
    leaks
        .iter()
        .enumerate()
        // Growth that began before the OOM and was still going in its last steps (the step
        // the OOM interrupted may be the window's last).
        .filter(|(_, l)| {
            (l.window_start_event.0 as usize) < o && l.window_end_event.0 as usize >= recent_from
        })
        // Retained failed attempts are not growth over steps: they make their own cause.
        .filter(|(_, l)| l.kind != LeakKind::RetainedAttempt)
        // What was released before this OOM did not fill the memory it ran out of.
        .filter(|(_, l)| !l.extent.released())
        .map(|(i, l)| (i, l, l.grown_bytes().max(0.0)))
        .filter(|(_, _, g)| *g >= MIN_OOM_SHARE * allocated as f64)
        .max_by(|a, b| a.2.total_cmp(&b.2))
        .map(|(i, l, g)| LeakSignal {
            leak: i,
            kind: l.kind,
            site: l.site.clone(),
            growth_bytes_per_step: l.growth_bytes_per_step,
            steps: l.steps,
            grown_bytes: g as u64,
            share_of_allocated: g / allocated as f64,
        })
}
