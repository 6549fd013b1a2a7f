//! What the app and the views ask of a capture, whatever its kind: the devices, each device's
//! events and markers and times (the timeline, which the app drives), the findings, the status
//! line, the help. A snapshot ([`super::snapshot_mode::Snap`]) and a trace
//! ([`super::trace::TraceData`]) answer it, so the app never asks which one it holds.
//!
//! Depends on [`super::action`], [`super::data`] and [`super::help`]'s pages only.

use super::action::{Action, Ctx, Effect};
use super::data::{Finding, Marker};
use super::help::Page;

/// A capture as the app and the views see it.
pub trait Capture {
    /// The file it was read from, for the title.
    fn path(&self) -> &std::path::Path;

    /// How many devices it shows.
    fn devices(&self) -> usize;

    /// The events of device `dev` on the timeline.
    fn events(&self, dev: usize) -> usize;

    /// The points of interest on device `dev`'s timeline, sorted by event.
    fn markers(&self, dev: usize) -> &[Marker];

    /// Each event's time in seconds from the first, for device `dev`, where the capture has them.
    fn times(&self, dev: usize) -> Option<&[f64]>;

    /// The overview's findings, with where their evidence is.
    fn findings(&self) -> &[Finding];

    /// Device `dev` as messages name it (`cuda:1`).
    fn device_name(&self, dev: usize) -> Option<String>;

    /// The device shown first.
    fn first_device(&self) -> usize {
        0
    }

    /// The status line's account of the capture: ` file │ device │ cursor`.
    fn status(&self, dev: usize, cursor: Option<usize>) -> String;

    /// The keys of this kind of capture, for the help overlay.
    fn help(&self) -> &'static Page;

    /// Keeps what its views share in step with the app (a snapshot's allocator state at the
    /// cursor), before the views sync their own state.
    fn sync(&mut self, _c: &Ctx) {}

    /// A capture key (`s`, `f`, `c`, `a`) that none of its views takes: what it does.
    fn unclaimed(&self, _a: Action) -> Effect {
        Effect::None
    }
}
