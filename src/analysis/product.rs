//! The one way from an opened capture to what every view reads: [`analyze`] runs the passes
//! of the capture's kind once and hands back a [`Product`] that owns the capture and all the
//! passes left behind (the report, the timelines with their checkpoints, the steps, the
//! classifiers, the leak series; for a trace its memory timeline, pairing, resolver and
//! autograd graph).
//!
//! Why one entry: before it, each command and view loaded and analysed a capture its own way
//! and copied pieces out of the result. Now a view borrows the product: it asks it for the
//! report ([`Product::report`]) and for the memory state at a moment ([`Product::state_at`],
//! a query of the replayed timeline, never a new replay), and runs no pass of its own.

use std::ops::Deref;
use std::path::Path;

use super::analyzed::{At, MomentError, Resolved};
use super::replay::State;
use super::snapshot::analyze_snapshot_with;
use super::trace_report::{analyze_trace_product_with, AnalyzedTrace};
use super::{Analysis, Analyzed, CaptureKind};
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
/// given: `-` for stdin); the report's byte count is the one [`crate::load::open`] read. What
/// [`crate::load::open`] opened gives a [`Product`] of either kind; what
/// [`crate::load::open_snapshot`] opened (the commands that take a snapshot only) gives a
/// [`SnapshotProduct`].
///
/// The independent passes run on as many threads as [`crate::threads::wanted`] gives
/// (`MEMSCOPE_THREADS`); [`analyze_on`] takes the count.
pub fn analyze<C: Analyze>(opened: Opened<C>, path: &Path) -> C::Product {
    analyze_on(opened, path, crate::threads::wanted())
}

/// [`analyze`] on `threads` threads (1: every pass on the calling thread, in order). The
/// product is the same for any count.
pub fn analyze_on<C: Analyze>(opened: Opened<C>, path: &Path, threads: usize) -> C::Product {
    C::analyze(opened.capture, path, opened.bytes, threads)
}

/// A capture [`analyze`] takes, and the product it makes of it.
pub trait Analyze: Sized {
    type Product;
    fn analyze(self, path: &Path, bytes: u64, threads: usize) -> Self::Product;
}

impl Analyze for Snapshot {
    type Product = SnapshotProduct;
    fn analyze(self, path: &Path, bytes: u64, threads: usize) -> SnapshotProduct {
        let analyzed = analyze_snapshot_with(&self, path, bytes, threads);
        SnapshotProduct {
            snap: self,
            analyzed,
        }
    }
}

impl Analyze for Trace {
    type Product = TraceProduct;
    fn analyze(self, path: &Path, bytes: u64, threads: usize) -> TraceProduct {
        let analyzed = analyze_trace_product_with(&self, path, bytes, threads);
        TraceProduct {
            trace: self,
            analyzed,
        }
    }
}

impl Analyze for Capture {
    type Product = Product;
    fn analyze(self, path: &Path, bytes: u64, threads: usize) -> Product {
        match self {
            Capture::Snapshot(s) => Product::Snapshot(s.analyze(path, bytes, threads)),
            Capture::Trace(t) => Product::Trace(t.analyze(path, bytes, threads)),
        }
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

    /// What the capture was.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures")
            .join(name)
    }

    #[test]
    fn a_snapshot_product_reports_the_stored_bytes_and_answers_states() {
        let p = fixture("leak_oom.pickle");
        let opened = crate::load::open(&p).unwrap();
        assert_eq!(opened.bytes, std::fs::metadata(&p).unwrap().len());
        let product = analyze(opened, &p);
        assert_eq!(product.kind(), CaptureKind::Snapshot);
        assert_eq!(
            product.report().input.bytes,
            std::fs::metadata(&p).unwrap().len()
        );
        let Product::Snapshot(s) = &product else {
            panic!("a snapshot");
        };
        // The state at the OOM is the replay's at that event; the end is the timeline's end.
        let (m, at_oom) = product.state_at(0, At::Oom).unwrap().unwrap();
        let oom = s.per_device[0].timeline.ooms.last().unwrap();
        assert_eq!(m.event, Some(oom.event));
        assert_eq!(at_oom.counters.allocated, oom.counters.allocated);
        let (_, end) = s.state_at(0, At::End).unwrap();
        assert_eq!(end, s.per_device[0].timeline.end);
        assert!(s.state_after(0, None).is_some());
        assert!(s.state_after(s.snap.devices.len(), None).is_none());
    }

    #[test]
    fn a_gzipped_trace_counts_its_compressed_bytes_and_has_no_allocator_state() {
        let p = fixture("trace_clean.trace.json.gz");
        let opened = crate::load::open(&p).unwrap();
        assert_eq!(opened.bytes, std::fs::metadata(&p).unwrap().len());
        let product = analyze(opened, &p);
        assert_eq!(product.kind(), CaptureKind::Trace);
        assert_eq!(
            product.report().input.bytes,
            std::fs::metadata(&p).unwrap().len()
        );
        assert!(product.state_at(0, At::End).is_none());
    }
}
