//! What tests and tools read of a loaded capture and of its views' state: thin accessors on
//! [`App`] that look the capture or a view's component up by its concrete type. The app itself
//! never looks inside a capture or a view; only these do, and only to read.

use std::any::Any;

use super::action::View;
use super::app::App;
use super::data::Data;
use super::snapshot_mode::{Cursor, Snap};
use super::trace::{OpRow, OpSort, StepOps, TraceData};
use super::views::{leaks::Leaks, map::Map, plan::PlanView, steps::Steps};
use crate::analysis::plan::Plan;
use crate::analysis::replay::LiveBlock;

impl App {
    fn capture_as<T: Any>(&self) -> Option<&T> {
        self.mode()?.capture_any().downcast_ref()
    }

    fn view_as<T: Any>(&self, v: View) -> Option<&T> {
        self.mode()?.component(v)?.downcast_ref()
    }

    /// The loaded snapshot, if the capture is one.
    pub fn data(&self) -> Option<&Data> {
        Some(&self.capture_as::<Snap>()?.data)
    }

    /// The loaded trace, if the capture is one.
    pub fn trace(&self) -> Option<&TraceData> {
        self.capture_as::<TraceData>()
    }

    /// A snapshot's allocator state at the cursor, once built.
    pub fn cache(&self) -> Option<&Cursor> {
        self.capture_as::<Snap>()?.cache.as_ref()
    }

    /// Whether the allocator map colours blocks by category.
    pub fn map_by_category(&self) -> bool {
        self.view_as::<Map>(View::Map)
            .is_some_and(|m| m.by_category())
    }

    /// The block selected in the allocator map (none on a free range).
    pub fn selected_part_block(&self) -> Option<&LiveBlock> {
        let snap = self.capture_as::<Snap>()?;
        self.view_as::<Map>(View::Map)?.selected_part_block(snap)
    }

    /// The capacity plan the Plan view shows (`--batch`): every device's, or why there is none;
    /// `None` without a Plan view.
    pub fn plans(&self) -> Option<Result<&[Plan], &str>> {
        Some(self.view_as::<PlanView>(View::Plan)?.plans())
    }

    /// The leak selected in the leaks view.
    pub fn leaks_sel(&self) -> usize {
        self.view_as::<Leaks>(View::Leaks).map_or(0, |l| l.sel())
    }

    fn steps(&self) -> Option<&Steps> {
        self.view_as::<Steps>(View::Steps)
    }

    /// The step selected in the steps view.
    pub fn steps_sel(&self) -> usize {
        self.steps().map_or(0, |s| s.sel())
    }

    /// The ops of the step the steps view is drilled into.
    pub fn step_ops(&self) -> Option<&StepOps> {
        self.steps()?.ops()
    }

    /// The op selected in a step's ops.
    pub fn ops_sel(&self) -> usize {
        self.steps().map_or(0, |s| s.ops_sel())
    }

    /// How a step's ops are ordered.
    pub fn op_sort(&self) -> OpSort {
        self.steps().map_or(OpSort::Allocated, |s| s.sort())
    }

    /// Whether the selected op's allocations are listed.
    pub fn op_open(&self) -> bool {
        self.steps().is_some_and(|s| s.op_open())
    }

    /// The op row selected in the open step of a trace.
    pub fn selected_op(&self) -> Option<&OpRow> {
        self.steps()?.selected_op()
    }

    /// The device event selected in the open op's event list.
    pub fn selected_op_event(&self) -> Option<usize> {
        self.steps()?.selected_op_event()
    }
}
