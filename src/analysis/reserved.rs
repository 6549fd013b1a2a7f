//! Reserved far above allocated: memory the caching allocator holds that no tensor uses.
//!
//! The allocator keeps freed blocks cached in their segments. That is its job, but when the
//! shapes grow (a sequence-length curriculum, variable-length batches), each new largest request
//! fits no cached block and takes a new segment, and the old ones stay reserved: a run can
//! reserve 16 GiB for a 1.7 GiB allocated peak. Nothing fails, no leak grows, and the memory is
//! lost to every other process on the card (and to this one's next large request).
//!
//! A device is a finding where its reserved peak is at least [`MIN_RATIO`] times its allocated
//! peak and above it by at least [`MIN_EXCESS_BYTES`]. The evidence is the log's: the segments it
//! made and released, how many of them came with a request larger than any before at its own
//! line (growing shapes), and the holes at the reserved peak. The fix is the allocator setting
//! whose replay of the same requests reserves least, with its figure's error bound
//! ([`crate::analysis::whatif::error`]): `expandable_segments:True`, whose segments grow and
//! shrink by pages instead of being made anew for every larger shape. A device that ran out of
//! memory is left to its OOM's diagnosis.

use rustc_hash::FxHashMap as HashMap;

use crate::analysis::replay::Timeline;
use crate::analysis::whatif::error::{Bounded, FigureKind};
use crate::analysis::whatif::{self, plausible};
use crate::model::{Action, Device, Snapshot, StackId};

/// Least ratio of reserved peak to allocated peak for a finding. Below 2, cached memory is the
/// allocator's ordinary working room (rounding, one step's freed activations kept for the next).
pub const MIN_RATIO: f64 = 2.0;
/// Least excess (reserved peak minus allocated peak): smaller amounts are not worth a user's
/// time next to a GPU's memory.
pub const MIN_EXCESS_BYTES: u64 = 512 << 20;

/// The allocator setting a finding's fix names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Setting {
    ExpandableSegments,
}

/// Reserved far above allocated on one device, with its evidence and fix.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ReservedExcess {
    pub peak_reserved_bytes: u64,
    pub peak_allocated_bytes: u64,
    /// Reserved but not in a live block at the reserved peak, and the largest such hole.
    pub free_at_reserved_peak_bytes: u64,
    pub largest_hole_at_reserved_peak_bytes: u64,
    /// Segments the log made (`segment_alloc`) and released (`segment_free`).
    pub segments_made: u64,
    pub segments_released: u64,
    /// Of the segments made, those made for a request larger than any before at its own line:
    /// growing shapes.
    pub segments_for_larger_shapes: u64,
    /// The fix: the setting, and the peak reserved the replay of the same requests gives under
    /// it, with its error bound. `None` where expandable segments were on already.
    pub fix: Option<ExcessFix>,
}

/// A setting and what the replay says it would reserve.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ExcessFix {
    pub setting: Setting,
    pub predicted_peak_reserved: Bounded,
}

impl ReservedExcess {
    /// The bytes at stake: what the fix frees for certain (the recorded peak less the highest
    /// the fix's peak could be), else reserved beyond allocated.
    pub fn bytes_at_stake(&self) -> u64 {
        match self.fix_frees() {
            Some(b) if b > 0 => b,
            _ => self
                .peak_reserved_bytes
                .saturating_sub(self.peak_allocated_bytes),
        }
    }

    /// What the fix frees at least: the recorded peak less the highest its peak could be on
    /// every twin (0 where it may not lower it).
    pub fn fix_frees(&self) -> Option<u64> {
        self.fix.as_ref().map(|f| {
            self.peak_reserved_bytes
                .saturating_sub(f.predicted_peak_reserved.truth_high.max(0) as u64)
        })
    }
}

/// Segments made in the log, released, and made for a request larger than any before at its
/// line (the request that follows the `segment_alloc`).
fn segment_counts(dev: &Device) -> (u64, u64, u64) {
    let mut largest: HashMap<StackId, u64> = HashMap::default();
    let (mut made, mut released, mut larger) = (0u64, 0u64, 0u64);
    let mut pending = 0u64;
    for e in &dev.events {
        match e.action {
            Action::SegmentAlloc => {
                made += 1;
                pending += 1;
            }
            Action::SegmentFree => released += 1,
            Action::Alloc => {
                let prev = largest.get(&e.stack).copied();
                if prev.is_none_or(|p| e.size > p) {
                    largest.insert(e.stack, e.size);
                    if prev.is_some() {
                        larger += pending;
                    }
                }
                pending = 0;
            }
            _ => {}
        }
    }
    (made, released, larger)
}

/// The finding for one device, where its reserved peak is far above its allocated peak.
pub fn find(snap: &Snapshot, dev: &Device, tl: &Timeline) -> Option<ReservedExcess> {
    if !tl.ooms.is_empty() || !dev.events.iter().any(|e| e.action == Action::Alloc) {
        return None;
    }
    let (reserved, allocated) = (tl.peaks.reserved.bytes, tl.peaks.allocated.bytes);
    let excess = reserved.saturating_sub(allocated);
    if excess < MIN_EXCESS_BYTES || (reserved as f64) < MIN_RATIO * allocated as f64 {
        return None;
    }
    let (made, released, larger) = segment_counts(dev);
    let fix = (snap.settings.expandable_segments != Some(true) && plausible(dev)).then(|| {
        let mut s = snap.settings.clone();
        s.expandable_segments = Some(true);
        let cfg = whatif::config(&s, None, snap.device_total(dev.index));
        let run = whatif::simulate(snap, dev, cfg, &tl.initial);
        ExcessFix {
            setting: Setting::ExpandableSegments,
            predicted_peak_reserved: Bounded::of(
                FigureKind::WhatIfPeakReserved,
                run.stats.peak_reserved.min(i64::MAX as u64) as i64,
            ),
        }
    });
    let at_peak = tl.peaks.reserved.event.map(|ev| {
        let st = tl.state_after(dev, &snap.settings, Some(ev.0 as usize));
        (
            st.counters.reserved.saturating_sub(st.counters.active),
            st.segments
                .values()
                .map(|s| s.largest_free())
                .max()
                .unwrap_or(0),
        )
    });
    let (free, hole) = at_peak.unwrap_or((excess, 0));
    Some(ReservedExcess {
        peak_reserved_bytes: reserved,
        peak_allocated_bytes: allocated,
        free_at_reserved_peak_bytes: free,
        largest_hole_at_reserved_peak_bytes: hole,
        segments_made: made,
        segments_released: released,
        segments_for_larger_shapes: larger,
        fix,
    })
}
