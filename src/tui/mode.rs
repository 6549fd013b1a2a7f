//! A capture mode: the capture and its views, which is all the app holds of a capture
//! ([`CaptureMode`], a trait object, so the app never asks which kind it holds).
//!
//! [`Mode`] is the one implementation, for any capture: it keeps the views in tab order and
//! hands each key, click, search, jump and drawing to the component of the view concerned.
//! What differs between a snapshot and a trace is in the capture ([`Capture`]) and in the
//! components registered for it ([`super::views`]).
//!
//! Depends on [`super::component`] and [`super::capture`] (and the vocabulary below them).

use std::any::Any;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

use super::action::{Action, Ctx, Effect, View};
use super::capture::Capture;
use super::component::Component;
use super::data::Jump;
use super::widgets::Scroll;

/// A loaded capture with its views, as the app drives it.
pub trait CaptureMode {
    /// The capture: its devices, events, markers, findings, status line and help.
    fn capture(&self) -> &dyn Capture;

    /// The capture as its concrete type (tests read it).
    fn capture_any(&self) -> &dyn Any;

    /// The views, in tab order.
    fn views(&self) -> &[View];

    /// The component of view `v`, as its concrete type (tests read its state).
    fn component(&self, v: View) -> Option<&dyn Any>;

    /// Keeps the capture and every view in step with the app.
    fn sync(&mut self, c: &Ctx);

    /// Before an action (see [`Component::begin`]).
    fn begin(&mut self);

    /// After an action: what changed (see [`Component::settle`]), then the sync.
    fn settle(&mut self, c: &Ctx);

    /// A key for the view shown.
    fn handle(&mut self, a: Action, c: &Ctx) -> Effect;

    /// A capture key (`s`, `f`, `c`, `a`), whatever view is shown.
    fn key(&mut self, a: Action, c: &Ctx) -> Effect;

    /// A click in the view shown.
    fn click(&mut self, c: &Ctx, x: u16, y: u16) -> Effect;

    /// `n`/`N` in the view shown.
    fn search(&mut self, c: &Ctx, query: &str, forward: bool) -> Effect;

    /// View `v`'s text pane, where it has one.
    fn text(&self, v: View) -> Option<&Scroll>;

    /// `Esc` in the view shown: whether the view closed a level of its own.
    fn back(&mut self, c: &Ctx) -> bool;

    /// Whether view `v` shows the timeline's cursor.
    fn at_cursor(&self, v: View) -> bool;

    /// The view that shows jump `j`'s target, if this capture has one.
    fn jump_view(&self, j: &Jump) -> Option<View>;

    /// Shows jump `j`'s target, once the app shows its view: what it says.
    fn show(&mut self, j: &Jump, c: &Ctx) -> Option<String>;

    /// Draws the view shown.
    fn draw(&self, c: &Ctx, area: Rect, buf: &mut Buffer);
}

/// A capture `C` and its views, in tab order.
pub struct Mode<C> {
    cap: C,
    views: Vec<Box<dyn Component<C>>>,
    tabs: Vec<View>,
}

impl<C: Capture + 'static> Mode<C> {
    /// Capture `cap` shown through `views`, the tabs in their order.
    pub fn new(cap: C, views: Vec<Box<dyn Component<C>>>) -> Mode<C> {
        let tabs = views.iter().map(|v| v.view()).collect();
        Mode { cap, views, tabs }
    }

    fn find(&self, v: View) -> Option<&dyn Component<C>> {
        self.views
            .iter()
            .find(|x| x.view() == v)
            .map(|x| x.as_ref())
    }

    /// View `v`'s component, with the capture it acts on.
    fn with(&mut self, v: View) -> Option<(&mut dyn Component<C>, &mut C)> {
        let comp = self.views.iter_mut().find(|x| x.view() == v)?;
        Some((comp.as_mut(), &mut self.cap))
    }
}

impl<C: Capture + 'static> CaptureMode for Mode<C> {
    fn capture(&self) -> &dyn Capture {
        &self.cap
    }

    fn capture_any(&self) -> &dyn Any {
        &self.cap
    }

    fn views(&self) -> &[View] {
        &self.tabs
    }

    fn component(&self, v: View) -> Option<&dyn Any> {
        let comp: &dyn Any = self.find(v)?;
        Some(comp)
    }

    fn sync(&mut self, c: &Ctx) {
        self.cap.sync(c);
        for v in &mut self.views {
            v.sync(&mut self.cap, c);
        }
    }

    fn begin(&mut self) {
        for v in &mut self.views {
            v.begin();
        }
    }

    fn settle(&mut self, c: &Ctx) {
        for v in &mut self.views {
            v.settle();
        }
        self.sync(c);
    }

    fn handle(&mut self, a: Action, c: &Ctx) -> Effect {
        match self.with(c.view) {
            Some((v, cap)) => v.handle(a, cap, c),
            None => Effect::None,
        }
    }

    fn key(&mut self, a: Action, c: &Ctx) -> Effect {
        for v in &mut self.views {
            if let Some(e) = v.key(a, &mut self.cap, c) {
                return e;
            }
        }
        self.cap.unclaimed(a)
    }

    fn click(&mut self, c: &Ctx, x: u16, y: u16) -> Effect {
        match self.with(c.view) {
            Some((v, cap)) => v.click(cap, c, x, y),
            None => Effect::None,
        }
    }

    fn search(&mut self, c: &Ctx, query: &str, forward: bool) -> Effect {
        let own = self
            .with(c.view)
            .and_then(|(v, cap)| v.search(cap, c, query, forward));
        if let Some(e) = own {
            return e;
        }
        // The views without a search of their own search the timeline's events.
        self.with(View::Timeline)
            .and_then(|(v, cap)| v.search(cap, c, query, forward))
            .unwrap_or(Effect::None)
    }

    fn text(&self, v: View) -> Option<&Scroll> {
        self.find(v)?.text()
    }

    fn back(&mut self, c: &Ctx) -> bool {
        self.with(c.view).is_some_and(|(v, _)| v.back())
    }

    fn at_cursor(&self, v: View) -> bool {
        self.find(v).is_some_and(|x| x.at_cursor())
    }

    fn jump_view(&self, j: &Jump) -> Option<View> {
        self.views.iter().find(|v| v.shows(j)).map(|v| v.view())
    }

    fn show(&mut self, j: &Jump, c: &Ctx) -> Option<String> {
        // The view's state is built for where the app now is (a sites tree at the cursor).
        self.sync(c);
        let (v, cap) = self.with(c.view)?;
        v.show(j, cap, c)
    }

    fn draw(&self, c: &Ctx, area: Rect, buf: &mut Buffer) {
        if let Some(v) = self.find(c.view) {
            v.draw(&self.cap, c, area, buf)
        }
    }
}
