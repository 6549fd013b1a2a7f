//! A view as a component, the way gitui's `Component` and `DrawableComponent` do it: one value
//! that owns the view's state, handles the view's keys, clicks and searches, and draws the view.
//!
//! A component is generic over the capture it shows (`C`: a snapshot's
//! [`Snap`](super::snapshot_mode::Snap) or a [`TraceData`](super::trace::TraceData)): what
//! the views of one capture share lives there, what one view alone needs lives in its component.
//! A component never sees the app: it is told what it needs of it ([`Ctx`]) and answers with an
//! [`Effect`] (jump, move the cursor, say something) that the app carries out. So a view
//! renders into any buffer and can be driven without a terminal.
//!
//! Depends on [`super::action`], [`super::data`]'s `Jump` and [`super::widgets`]' `Scroll`.

use std::any::Any;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

use super::action::{Action, Ctx, Effect, View};
use super::data::Jump;
use super::widgets::Scroll;

/// One view of a capture `C`.
pub trait Component<C>: Any {
    /// The view this is: its tab.
    fn view(&self) -> View;

    /// Whether the view shows the timeline's cursor: jumping to a marker keeps it shown
    /// (any other view gives way to the timeline).
    fn at_cursor(&self) -> bool {
        false
    }

    /// Keeps its state in step with the app and the capture (the selection inside what the
    /// cursor's state holds, what the view shown needs built). Runs after every action.
    fn sync(&mut self, _cap: &mut C, _c: &Ctx) {}

    /// Before an action: notes what [`Self::settle`] compares against.
    fn begin(&mut self) {}

    /// After an action, before the sync: what changed since [`Self::begin`] (a new block
    /// shows its details from the top).
    fn settle(&mut self) {}

    /// A key while the view is shown.
    fn handle(&mut self, a: Action, cap: &mut C, c: &Ctx) -> Effect;

    /// A capture key (`s`, `f`, `c`, `a`) that acts on this view whatever view is shown:
    /// what it does, or `None` where it is not this view's.
    fn key(&mut self, _a: Action, _cap: &mut C, _c: &Ctx) -> Option<Effect> {
        None
    }

    /// A click at (`x`, `y`) inside the view (`c.body`).
    fn click(&mut self, _cap: &mut C, _c: &Ctx, _x: u16, _y: u16) -> Effect {
        Effect::None
    }

    /// `n`/`N` with query `query`: the next match in this view, or `None` where the view has no
    /// search of its own (the timeline's search of events then answers).
    fn search(&mut self, _cap: &mut C, _c: &Ctx, _query: &str, _forward: bool) -> Option<Effect> {
        None
    }

    /// The view's scrolling text pane, where it has one (the mouse wheel over it scrolls it).
    fn text(&self) -> Option<&Scroll> {
        None
    }

    /// `Esc`: closes a level of the view's own first (a drill-down): whether it did.
    fn back(&mut self) -> bool {
        false
    }

    /// Whether this view shows jump `j`'s target.
    fn shows(&self, _j: &Jump) -> bool {
        false
    }

    /// Shows jump `j`'s target, once the app shows this view (and the jump's device): what it
    /// says, if anything.
    fn show(&mut self, _j: &Jump, _cap: &mut C, _c: &Ctx) -> Option<String> {
        None
    }

    /// Draws the view in `area`.
    fn draw(&self, cap: &C, c: &Ctx, area: Rect, buf: &mut Buffer);
}
