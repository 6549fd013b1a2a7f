//! The one way from an opened capture to what every view reads: [`analyze`] runs the passes
//! of the capture's kind once and hands back a [`Product`] that owns the capture and all the
//! passes left behind (the report, the timelines with their checkpoints, the steps, the
//! classifiers, the leak series; for a trace its memory timeline, pairing and resolver).
//!
//! Why one entry: before it, each command and view loaded and analysed a capture its own way
//! and copied pieces out of the result. Now a view borrows the product: it asks it for the
//! report ([`Product::report`]) and for the memory state at a moment ([`Product::state_at`],
//! a query of the replayed timeline, never a new replay), and runs no pass of its own.

use std::ops::Deref;
use std::path::Path;

use super::analyzed::{At, MomentError, Resolved};
use super::replay::State;
use super::trace_report::{analyze_trace_product, AnalyzedTrace};
use super::{analyze_snapshot, Analysis, Analyzed, CaptureKind};
use crate::load::{Capture, Opened};
use crate::model::trace::Trace;
use crate::model::Snapshot;

/// A capture analysed once, with the capture itself (the views browse both).
// Made once per capture and moved to its view: boxing the larger variant saves nothing.
#[allow(clippy::large_enum_variant)]
pub enum Product {
    Snapshot(SnapshotProduct),
    Trace(TraceProduct),
}

/// A snapshot and its analysis ([`Analyzed`], which it dereferences to).
pub struct SnapshotProduct {
    pub snap: Snapshot,
    pub analyzed: Analyzed,
}

/// A profiler trace and its analysis ([`AnalyzedTrace`], which it dereferences to).
pub struct TraceProduct {
    pub trace: Trace,
    pub analyzed: AnalyzedTrace,
}

/// Runs every analysis of the capture's kind once. `path` is the name the report shows (as
/// given: `-` for stdin); the report's byte count is the one [`crate::load::open`] read.
pub fn analyze(opened: Opened, path: &Path) -> Product {
    match opened.capture {
        Capture::Snapshot(snap) => Product::Snapshot(analyze_snapshot_opened(
            Opened {
                capture: snap,
                bytes: opened.bytes,
            },
            path,
        )),
        Capture::Trace(trace) => {
            let analyzed = analyze_trace_product(&trace, path, opened.bytes);
            Product::Trace(TraceProduct { trace, analyzed })
        }
    }
}

/// [`analyze`] of what [`crate::load::open_snapshot`] opened (the commands that take a
/// snapshot only).
pub fn analyze_snapshot_opened(opened: Opened<Snapshot>, path: &Path) -> SnapshotProduct {
    let analyzed = analyze_snapshot(&opened.capture, path, opened.bytes);
    SnapshotProduct {
        snap: opened.capture,
        analyzed,
    }
}

impl Product {
    /// The report every format renders.
    pub fn report(&self) -> &Analysis {
        match self {
            Product::Snapshot(p) => &p.analyzed.analysis,
            Product::Trace(p) => &p.analyzed.analysis,
        }
    }

    /// The report, the rest of the product dropped.
    pub fn into_report(self) -> Analysis {
        match self {
            Product::Snapshot(p) => p.analyzed.analysis,
            Product::Trace(p) => p.analyzed.analysis,
        }
    }

    pub fn kind(&self) -> CaptureKind {
        match self {
            Product::Snapshot(_) => CaptureKind::Snapshot,
            Product::Trace(_) => CaptureKind::Trace,
        }
    }

    /// The allocator state of the device at `pos` (in the snapshot's device order) at `at`:
    /// `None` for a trace, which logs running totals, not an allocator state to rebuild.
    pub fn state_at(&self, pos: usize, at: At) -> Option<Result<(Resolved, State), MomentError>> {
        match self {
            Product::Snapshot(p) => Some(p.state_at(pos, at)),
            Product::Trace(_) => None,
        }
    }
}

impl SnapshotProduct {
    /// Resolves `at` on the device at `pos` and gives the allocator state there.
    pub fn state_at(&self, pos: usize, at: At) -> Result<(Resolved, State), MomentError> {
        let m = self.analyzed.resolve(&self.snap, pos, at)?;
        Ok((m, self.analyzed.state_at(&self.snap, pos, m)))
    }

    /// The state after event `event` of the device at `pos` (`None`: before its log's first
    /// event; an index past the end: after its last), or `None` without such a device.
    pub fn state_after(&self, pos: usize, event: Option<usize>) -> Option<State> {
        let (dev, p) = self.analyzed.device(&self.snap, pos)?;
        Some(p.timeline.state_after(dev, &self.snap.settings, event))
    }
}

impl Deref for SnapshotProduct {
    type Target = Analyzed;
    fn deref(&self) -> &Analyzed {
        &self.analyzed
    }
}

impl Deref for TraceProduct {
    type Target = AnalyzedTrace;
    fn deref(&self) -> &AnalyzedTrace {
        &self.analyzed
    }
}
