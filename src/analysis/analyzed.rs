//! One capture, analysed once: the report every view shows, and what the views browse.
//!
//! The passes run once over one replayed timeline per device (replay, then steps and loops,
//! survivors and leaks, categories, OOM causes, the verdict: see [`super::analyze_snapshot`],
//! which runs the independent ones side by side). What they leave behind besides the report (the timeline, the
//! steps, the classifier the categories were judged with) is kept here, so that a view never
//! runs a pass again: the HTML report's chart and allocator map, the flamegraph at a moment
//! and the TUI read this product, and ask it for the state at a moment. With the snapshot it
//! was made from, it is [`super::SnapshotProduct`], what [`super::analyze`] gives.

use std::ops::Deref;

use super::categories::Classifier;
use super::replay::{State, Timeline};
use super::steps::Step;
use super::Analysis;
use crate::model::{Device, EventIdx, Snapshot};

/// What one device's passes leave for the views.
#[derive(Clone, Debug)]
pub struct DeviceProduct {
    pub timeline: Timeline,
    /// Every stretch the step split found (setup and tail included), with figures.
    pub steps: Vec<Step>,
    /// The classifier the device's categories were judged with: what classifying a block needs
    /// from the whole log (a view classifies the states it shows with a clone of it).
    pub classifier: Classifier,
}

impl DeviceProduct {
    /// The iterations the step split found (`step 1`, `step 2`, ...: setup and tail left out),
    /// in order.
    pub fn iterations(&self) -> impl Iterator<Item = &Step> {
        self.steps.iter().filter(|s| s.is_iteration())
    }

    /// Iteration `n` (1-based, as its name `step N` counts) and the event after which its
    /// allocated peak was first reached: the moment `flamegraph --step N` draws, whose live
    /// bytes are the step's `peak_allocated_bytes`.
    pub fn step_peak(&self, n: u64) -> Option<(&Step, EventIdx)> {
        let step = self
            .iterations()
            .nth(usize::try_from(n).ok()?.checked_sub(1)?)?;
        let (a, b) = (step.start_event.0 as usize, step.end_event.0 as usize);
        let series = self.timeline.series.allocated.get(a..=b)?;
        let at = series
            .iter()
            .position(|&v| v == step.peak_allocated_bytes)?;
        Some((step, EventIdx((a + at) as u32)))
    }

    /// Each step's `(start, end)` events, inclusive.
    pub fn step_ranges(&self) -> Vec<(usize, usize)> {
        self.steps
            .iter()
            .map(|s| (s.start_event.0 as usize, s.end_event.0 as usize))
            .collect()
    }
}

/// A snapshot's analysis: the report ([`Analysis`], which it dereferences to) and, per device
/// in `snap.devices` order, what the passes leave for the views.
#[derive(Clone, Debug)]
pub struct Analyzed {
    pub analysis: Analysis,
    /// Named apart from the report's `devices`, which the product dereferences to.
    pub per_device: Vec<DeviceProduct>,
    /// Per `analysis.leaks` entry: the bytes its sites held at each step's end.
    pub leak_series: Vec<super::leaks::series::LeakSeries>,
}

impl Deref for Analyzed {
    type Target = Analysis;
    fn deref(&self) -> &Analysis {
        &self.analysis
    }
}

/// Which moment of a device's log a view asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum At {
    /// The end of the capture (what the snapshot itself lists).
    End,
    /// The allocated peak.
    Peak,
    /// The last OOM of the device.
    Oom,
    /// After a given event index.
    Event(u32),
}

impl At {
    /// Parses `end`, `peak`, `oom` or an event index.
    pub fn parse(s: &str) -> Option<At> {
        match s {
            "end" => Some(At::End),
            "peak" => Some(At::Peak),
            "oom" => Some(At::Oom),
            n => n.parse().ok().map(At::Event),
        }
    }
}

/// A moment resolved against a device's log: what was asked, and the event the state is taken
/// after (`None`: the end of the log).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resolved {
    pub asked: At,
    pub event: Option<EventIdx>,
}

/// Why a moment does not exist in a device's log.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MomentError {
    #[error("cuda:{device} recorded no OOM")]
    NoOom { device: u32 },
    #[error("event {event} is past the end of cuda:{device}'s log ({events} events)")]
    PastTheEnd {
        event: u32,
        device: u32,
        events: usize,
    },
}

impl Analyzed {
    /// The device products and the snapshot's devices, paired (same order).
    pub fn device<'s>(
        &self,
        snap: &'s Snapshot,
        pos: usize,
    ) -> Option<(&'s Device, &DeviceProduct)> {
        Some((snap.devices.get(pos)?, self.per_device.get(pos)?))
    }

    /// The position of device `index` (`cuda:N`) in `snap.devices`.
    pub fn position(&self, snap: &Snapshot, index: u32) -> Option<usize> {
        snap.devices.iter().position(|d| d.index == index)
    }

    /// Resolves `at` on the device at `pos`. The peak of a log that holds none (a mid-run log
    /// whose highest point is its start) is the end.
    pub fn resolve(&self, snap: &Snapshot, pos: usize, at: At) -> Result<Resolved, MomentError> {
        let (dev, p) = self.device(snap, pos).expect("a device of this snapshot");
        let event = match at {
            At::End => None,
            At::Peak => p.timeline.peaks.allocated.event,
            At::Oom => Some(
                p.timeline
                    .ooms
                    .last()
                    .ok_or(MomentError::NoOom { device: dev.index })?
                    .event,
            ),
            At::Event(i) if (i as usize) < dev.events.len() => Some(EventIdx(i)),
            At::Event(i) => {
                return Err(MomentError::PastTheEnd {
                    event: i,
                    device: dev.index,
                    events: dev.events.len(),
                })
            }
        };
        Ok(Resolved { asked: at, event })
    }

    /// The allocator state at a resolved moment: a query of the replayed timeline (from its
    /// nearest checkpoint), not a new replay.
    pub fn state_at(&self, snap: &Snapshot, pos: usize, m: Resolved) -> State {
        let (dev, p) = self.device(snap, pos).expect("a device of this snapshot");
        match m.event {
            Some(e) => p
                .timeline
                .state_after(dev, &snap.settings, Some(e.0 as usize)),
            None => p.timeline.end.clone(),
        }
    }

    /// The timelines, in `snap.devices` order.
    pub fn timelines(&self) -> impl Iterator<Item = &Timeline> {
        self.per_device.iter().map(|d| &d.timeline)
    }
}
