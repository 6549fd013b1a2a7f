//! What `memscope tui FILE` opened, loaded and analysed: the capture's kind decides the mode,
//! that is which views it has ([`Loaded::into_mode`]); after that the app never asks the kind.

use std::path::Path;

use super::data::Data;
use super::mode::{CaptureMode, Mode};
use super::snapshot_mode::Snap;
use super::trace::TraceData;
use super::views;
use crate::analysis::plan::Ask;
use crate::analysis::{self, Product};
use crate::load::{self, LoadError};

/// What `memscope tui FILE` opened: a snapshot or a profiler trace.
// Made once per file and moved once into the app: boxing the larger variant saves nothing.
#[allow(clippy::large_enum_variant)]
pub enum Loaded {
    Snapshot(Data),
    Trace(TraceData),
}

impl Loaded {
    /// Reads, parses and analyses a snapshot or a trace, whichever the file holds.
    pub fn load(path: &Path) -> Result<Loaded, LoadError> {
        Loaded::load_with_progress(path, &load::Progress::default())
    }

    /// [`Loaded::load`], reporting how far the decoding has got in `progress`.
    pub fn load_with_progress(path: &Path, progress: &load::Progress) -> Result<Loaded, LoadError> {
        Loaded::load_planned(path, progress, None)
    }

    /// [`Loaded::load_with_progress`], with the capacity plan `ask` asks for (`--batch`) made
    /// from a snapshot's analysis: its views then have a Plan view. A trace has no allocator
    /// log to replay, so no plan.
    pub fn load_planned(
        path: &Path,
        progress: &load::Progress,
        ask: Option<&Ask>,
    ) -> Result<Loaded, LoadError> {
        let opened = load::open_with_progress(path, progress)?;
        // Decoded: what is left is the analysis.
        progress.done.store(
            progress.total.load(std::sync::atomic::Ordering::Relaxed),
            std::sync::atomic::Ordering::Relaxed,
        );
        Ok(match analysis::analyze(opened, path) {
            Product::Snapshot(p) => Loaded::Snapshot(Data::from_product(path, p, ask)),
            Product::Trace(p) => Loaded::Trace(TraceData::from_product(path, p)),
        })
    }

    /// The capture with its kind's views.
    pub fn into_mode(self) -> Box<dyn CaptureMode> {
        match self {
            Loaded::Snapshot(mut d) => {
                let plan = d.plan.take();
                Box::new(Mode::new(Snap::new(d), views::snapshot(plan)))
            }
            Loaded::Trace(t) => Box::new(Mode::new(t, views::trace())),
        }
    }
}
