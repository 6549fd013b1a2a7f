//! A device's counters as every view shows them: the current value and the peak, with the
//! peak's standing (exact, a lower bound, or unknown) decided here once.
//!
//! The text report, the HTML report and the TUI each used to pick between a peak and the
//! highest value seen in the log on their own; they disagreed (the HTML showed an `active`
//! peak of "≥ 23.2 GiB" under a current 23.8 GiB, where the text said "unknown"). Every view
//! now reads [`DeviceReport::figures`].
//!
//! A torch 1.9-era trace gives allocated bytes only as changes from its start (running sums of
//! each event's `Bytes`): its figure has no current value in bytes, its peak is the lower bound
//! those changes imply, and [`Figure::from_start`] carries the changes themselves, so that no
//! view can print a change as bytes in use ("0 B allocated" at every step end).

use super::DeviceReport;

/// One of the allocator's byte counters (`torch.cuda.memory_stats()` names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Counter {
    Allocated,
    Active,
    Reserved,
    Requested,
}

impl Counter {
    pub const ALL: [Counter; 4] = [
        Counter::Allocated,
        Counter::Active,
        Counter::Reserved,
        Counter::Requested,
    ];

    /// The counter's name, as `memory_stats()` spells it (without `_bytes`).
    pub fn name(self) -> &'static str {
        match self {
            Counter::Allocated => "allocated",
            Counter::Active => "active",
            Counter::Reserved => "reserved",
            Counter::Requested => "requested",
        }
    }
}

/// What the capture says about a peak.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "bytes")]
pub enum Bound {
    /// The log starts from an empty allocator: the replay saw the true peak.
    Exact(u64),
    /// The highest value seen (in the log, or now): the true peak may be higher, never lower.
    AtLeast(u64),
    /// The capture records nothing of this counter.
    Unknown,
}

/// One counter of one device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Figure {
    pub counter: Counter,
    /// `None`: the capture does not record this counter (a trace's active or requested
    /// bytes, a torch 1.9 trace's reserved bytes).
    pub current: Option<u64>,
    pub peak: Bound,
    /// Where the capture gives this counter only as changes from the trace's start (a torch
    /// 1.9-era trace's allocated bytes): those changes. `current` is then `None`.
    pub from_start: Option<Change>,
}

/// A counter's current value and peak as signed changes from the trace's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Change {
    pub current: i64,
    pub peak: i64,
}

impl DeviceReport {
    /// One counter: its current value, and its peak where known, else the highest value seen
    /// (which includes the current one, so a bound is never below what the dump holds).
    pub fn figure(&self, counter: Counter) -> Figure {
        let (current, peak, seen) = match counter {
            Counter::Allocated => (
                self.allocated_bytes,
                self.peak_allocated_bytes,
                self.observed_peak_allocated_bytes,
            ),
            // Active includes allocated: the allocated bytes seen bound the active peak too.
            Counter::Active => (
                self.active_bytes,
                self.peak_active_bytes,
                self.observed_peak_allocated_bytes,
            ),
            Counter::Reserved => (
                self.reserved_bytes,
                self.peak_reserved_bytes,
                self.observed_peak_reserved_bytes.unwrap_or(0),
            ),
            Counter::Requested => (
                self.requested_bytes,
                self.peak_requested_bytes,
                self.observed_peak_requested_bytes,
            ),
        };
        let from_start = match counter {
            Counter::Allocated => self.from_start.map(|f| Change {
                current: f.allocated_bytes,
                peak: f.peak_allocated_bytes,
            }),
            _ => None,
        };
        let peak = match (peak, current) {
            (Some(p), _) => Bound::Exact(p),
            (None, Some(c)) => Bound::AtLeast(seen.max(c)),
            // Changes from the start bound the bytes in use at the peak from below.
            (None, None) if from_start.is_some() => Bound::AtLeast(seen),
            (None, None) => Bound::Unknown,
        };
        Figure {
            counter,
            current,
            peak,
            from_start,
        }
    }

    /// The four counters, in [`Counter::ALL`]'s order.
    pub fn figures(&self) -> [Figure; 4] {
        Counter::ALL.map(|c| self.figure(c))
    }
}
