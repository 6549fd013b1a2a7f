//! The TUI's state and the one function that changes it, [`App::apply`].
//!
//! The app holds what every capture has: the view shown, the device, the timeline's cursor and
//! window per device, the jump history, the search, the status message and the help. The
//! capture itself, with its views, is a [`CaptureMode`]: a trait object, so nothing here asks
//! which kind of capture it is. Keys that belong to a view go to the mode, whose component for
//! the view answers with an [`Effect`] that the app carries out.

use super::action::{next_marker, Ctx, Effect};
pub use super::action::{Action, View};
use super::capture::Capture;
use super::data::{Jump, Marker, MarkerKind};
use super::help::{Help, Page, SNAPSHOT_HELP};
use super::layout::{body, Window};
use super::loaded::Loaded;
use super::mode::CaptureMode;

/// The whole TUI state.
pub struct App {
    path: String,
    /// The capture and its views (`None` while loading).
    mode: Option<Box<dyn CaptureMode>>,
    error: Option<String>,
    view: View,
    help: Help,
    quit: bool,
    width: u16,
    height: u16,
    dev: usize,
    /// Timeline cursor per device (`None`: the device has no events).
    cursors: Vec<Option<usize>>,
    windows: Vec<Window>,
    /// The timeline's x axis is time (equal spans of time per column), not events.
    by_time: bool,
    /// The timeline draws reserved memory behind the allocated curve (and scales to it).
    reserved_shown: bool,
    /// The query being typed, while typing.
    typing: Option<String>,
    query: String,
    message: String,
    /// While loading: how far it has got.
    loading_note: String,
    history: Vec<(View, usize, Vec<Option<usize>>)>,
    /// Opened from the Ranks view: q goes back to it, and the help and the hint say so.
    from_ranks: bool,
}

impl App {
    /// An app still loading `path`.
    pub fn loading(path: &str) -> App {
        App {
            path: path.to_owned(),
            mode: None,
            error: None,
            view: View::Overview,
            help: Help::default(),
            quit: false,
            width: 80,
            height: 24,
            dev: 0,
            cursors: Vec::new(),
            windows: Vec::new(),
            by_time: false,
            typing: None,
            query: String::new(),
            message: String::new(),
            loading_note: String::new(),
            history: Vec::new(),
            from_ranks: false,
            reserved_shown: false,
        }
    }

    /// An app showing a snapshot or a trace.
    pub fn with(loaded: Loaded) -> App {
        let mode = loaded.into_mode();
        let mut app = App::loading(&mode.capture().path().display().to_string());
        app.show(mode);
        app
    }

    /// Shows what the loader loaded.
    pub fn set_loaded(&mut self, loaded: Loaded) {
        self.show(loaded.into_mode());
    }

    /// Shows a capture: the cursor at the end of each device's log, the device the capture
    /// puts first (a snapshot's: the one that ran out of memory).
    fn show(&mut self, mode: Box<dyn CaptureMode>) {
        let cap = mode.capture();
        let lens = (0..cap.devices()).map(|d| cap.events(d));
        self.cursors = lens.clone().map(|n| n.checked_sub(1)).collect();
        self.windows = lens.map(|n| Window { lo: 0, hi: n }).collect();
        self.dev = cap.first_device();
        self.mode = Some(mode);
        self.sync();
    }

    pub fn set_error(&mut self, e: String) {
        self.error = Some(e);
    }

    /// The file shown in the title.
    pub fn set_path(&mut self, path: String) {
        self.path = path;
    }

    /// What the status line says until the next action.
    pub fn set_message(&mut self, m: String) {
        self.message = m;
    }

    /// While loading: how far it has got.
    pub fn set_loading_note(&mut self, note: String) {
        self.loading_note = note;
    }

    /// The view shown.
    pub fn view(&self) -> View {
        self.view
    }

    /// The device shown.
    pub fn dev(&self) -> usize {
        self.dev
    }

    /// Whether the user asked to quit.
    pub fn quit(&self) -> bool {
        self.quit
    }

    /// The status line's message after the last action.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The query being typed, while typing.
    pub fn typing(&self) -> Option<&str> {
        self.typing.as_deref()
    }

    /// Whether the timeline's x axis is time.
    pub fn by_time(&self) -> bool {
        self.by_time
    }

    /// The file shown in the title.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Why the capture could not be opened, if it could not.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// Whether the help is shown.
    pub fn help(&self) -> bool {
        self.help.open
    }

    /// The help overlay's state (open, scrolled).
    pub fn help_state(&self) -> Help {
        self.help
    }

    /// The keys the help shows: the capture's.
    pub fn help_page(&self) -> &'static Page {
        let page = self
            .mode
            .as_ref()
            .map_or(&SNAPSHOT_HELP, |m| m.capture().help());
        if self.from_ranks {
            super::help::from_ranks(page)
        } else {
            page
        }
    }

    /// Marks the capture as opened from the Ranks view: q then closes it back to the list.
    pub fn opened_from_ranks(&mut self) {
        self.from_ranks = true;
    }

    /// Whether the capture was opened from the Ranks view.
    pub fn from_ranks(&self) -> bool {
        self.from_ranks
    }

    /// While loading: how far it has got.
    pub fn loading_note(&self) -> &str {
        &self.loading_note
    }

    /// Whether the timeline draws reserved memory behind the allocated curve.
    pub fn reserved_shown(&self) -> bool {
        self.reserved_shown
    }

    /// The capture with its views, once loaded.
    pub fn mode(&self) -> Option<&dyn CaptureMode> {
        self.mode.as_deref()
    }

    /// Whether a capture is loaded (a snapshot or a trace).
    pub fn loaded(&self) -> bool {
        self.mode.is_some()
    }

    /// The views of the loaded capture, in tab order.
    pub fn views(&self) -> &[View] {
        self.mode.as_ref().map_or(&[], |m| m.views())
    }

    pub fn cursor(&self) -> Option<usize> {
        self.cursors.get(self.dev).copied().flatten()
    }

    pub fn window(&self) -> Window {
        self.windows
            .get(self.dev)
            .copied()
            .unwrap_or(Window { lo: 0, hi: 0 })
    }

    /// Each event's time in seconds from the first, for the current device, when the timeline's
    /// x axis is time.
    pub fn time_axis(&self) -> Option<&[f64]> {
        if !self.by_time {
            return None;
        }
        self.capture()?.times(self.dev)
    }

    /// What the views know of the app.
    pub fn ctx(&self) -> Ctx {
        Ctx {
            view: self.view,
            dev: self.dev,
            cursor: self.cursor(),
            page: (self.height as usize).saturating_sub(8).max(1),
            window: self.window(),
            by_time: self.by_time,
            reserved_shown: self.reserved_shown,
            body: body(self.width, self.height),
        }
    }

    fn capture(&self) -> Option<&dyn Capture> {
        Some(self.mode.as_ref()?.capture())
    }

    fn events_len(&self) -> usize {
        self.capture().map_or(0, |c| c.events(self.dev))
    }

    fn markers(&self) -> &[Marker] {
        self.capture().map_or(&[], |c| c.markers(self.dev))
    }

    /// Keeps the mode's state in step with the cursor, the device and the view.
    fn sync(&mut self) {
        let c = self.ctx();
        if let Some(m) = &mut self.mode {
            m.sync(&c);
        }
    }

    fn set_cursor(&mut self, ev: usize) {
        let n = self.events_len();
        if n == 0 {
            return;
        }
        let ev = ev.min(n - 1);
        if let Some(c) = self.cursors.get_mut(self.dev) {
            *c = Some(ev);
        }
        // Keep the cursor inside the window, panning (not zooming).
        let w = self.window();
        let span = (w.hi - w.lo).max(1);
        let lo = if ev < w.lo {
            ev
        } else if ev >= w.hi {
            (ev + 1).saturating_sub(span)
        } else {
            w.lo
        };
        if let Some(win) = self.windows.get_mut(self.dev) {
            *win = Window {
                lo,
                hi: (lo + span).min(n),
            };
        }
    }

    fn push_history(&mut self) {
        self.history
            .push((self.view, self.dev, self.cursors.clone()));
        if self.history.len() > 64 {
            self.history.remove(0);
        }
    }

    /// Goes where jump `j` points: an event on the timeline, or the view of the mode that
    /// shows the target (which then shows it).
    fn jump(&mut self, j: &Jump) {
        match j {
            Jump::None => {}
            Jump::Event { dev, event } => {
                self.push_history();
                self.dev = *dev;
                self.set_cursor(*event);
                self.view = View::Timeline;
            }
            _ => {
                let Some(view) = self.mode.as_ref().and_then(|m| m.jump_view(j)) else {
                    return;
                };
                self.push_history();
                if let Some(d) = j.dev() {
                    self.dev = d;
                }
                let n = self.events_len();
                if j.at_end() && n > 0 {
                    self.set_cursor(n - 1);
                }
                self.view = view;
                let c = self.ctx();
                if let Some(m) = self.mode.as_mut().and_then(|m| m.show(j, &c)) {
                    self.message = m;
                }
            }
        }
    }

    /// Does what a view asked for.
    fn effect(&mut self, e: Effect) {
        match e {
            Effect::None => {}
            Effect::Message(m) => self.message = m,
            Effect::Jump(j) => self.jump(&j),
            Effect::Event(ev, m) => {
                self.push_history();
                self.set_cursor(ev);
                self.view = View::Timeline;
                if let Some(m) = m {
                    self.message = m;
                }
            }
            Effect::Cursor(ev, m) => {
                self.set_cursor(ev);
                self.message = m;
            }
            Effect::Move(ev) => self.set_cursor(ev),
            Effect::Window(w) => {
                if let Some(win) = self.windows.get_mut(self.dev) {
                    *win = w;
                }
            }
            Effect::Show(v) => {
                self.push_history();
                self.view = v;
            }
        }
    }

    /// Applies one action.
    pub fn apply(&mut self, a: Action) {
        self.message.clear();
        match a {
            Action::Resize(w, h) => {
                self.width = w;
                self.height = h;
                return;
            }
            Action::Quit => {
                self.quit = true;
                return;
            }
            _ => {}
        }
        if self.help.open {
            // The scrolling keys scroll the help; any other closes it.
            let page = self.help_page();
            self.help.handle(a, page, self.width, self.height);
            return;
        }
        if self.typing.is_some() {
            self.apply_typing(a);
            self.sync();
            return;
        }
        let Some(mode) = &mut self.mode else { return };
        mode.begin();
        self.apply_loaded(a);
        let c = self.ctx();
        if let Some(m) = &mut self.mode {
            m.settle(&c);
        }
    }

    /// An action once a capture is loaded, neither typed into a search nor into the help.
    fn apply_loaded(&mut self, a: Action) {
        match a {
            Action::Help => self.help.show(),
            Action::View(_) | Action::Tab(_) | Action::NextView | Action::PrevView => {
                self.switch_view(a)
            }
            Action::Back => self.back(),
            Action::NextDevice => {
                let n = self.capture().map_or(0, |c| c.devices());
                if n > 0 {
                    self.dev = (self.dev + 1) % n;
                }
            }
            Action::Peak => self.jump_marker(MarkerKind::Peak),
            Action::Oom => self.jump_marker(MarkerKind::Oom),
            Action::NextMarker | Action::PrevMarker => {
                let e = next_marker(self.markers(), self.cursor(), a == Action::NextMarker);
                self.effect(e)
            }
            Action::Search => self.typing = Some(String::new()),
            Action::SearchNext => self.search_step(true),
            Action::SearchPrev => self.search_step(false),
            Action::ReservedToggle => {
                self.reserved_shown = !self.reserved_shown;
                if self.view != View::Timeline {
                    self.message = "r shows reserved memory on the timeline (view 2)".into();
                }
            }
            Action::TimeAxisToggle => {
                self.by_time = !self.by_time;
                if self.by_time && self.time_axis().is_none() {
                    self.by_time = false;
                    self.message =
                        "this capture records no event times: the x axis stays events".into();
                }
            }
            // The capture's own keys: the view they act on takes them, whatever view is shown.
            Action::SortToggle
            | Action::FoldToggle
            | Action::CategoryToggle
            | Action::AllocEvent => {
                let c = self.ctx();
                let e = self.mode.as_mut().map_or(Effect::None, |m| m.key(a, &c));
                self.effect(e)
            }
            Action::Scroll(d, x, y) if self.text_at(x, y) => {
                if let Some(t) = self.mode.as_ref().and_then(|m| m.text(self.view)) {
                    t.by(3 * d as i32)
                }
            }
            Action::Click(x, y) => self.click(x, y),
            // The wheel moves the selection; on the timeline, the cursor.
            Action::Scroll(d, _, _) => {
                self.apply_view(match (self.view == View::Timeline, d < 0) {
                    (true, true) => Action::Left,
                    (true, false) => Action::Right,
                    (false, true) => Action::Up,
                    (false, false) => Action::Down,
                })
            }
            other => self.apply_view(other),
        }
    }

    /// The view shown's key.
    fn apply_view(&mut self, a: Action) {
        let c = self.ctx();
        let e = self.mode.as_mut().map_or(Effect::None, |m| m.handle(a, &c));
        self.effect(e)
    }

    /// Whether (`x`, `y`) is over the view shown's text pane.
    fn text_at(&self, x: u16, y: u16) -> bool {
        self.mode
            .as_ref()
            .and_then(|m| m.text(self.view))
            .is_some_and(|t| t.contains(x, y))
    }

    /// Tab, Shift-Tab, the number keys: another of the capture's views.
    fn switch_view(&mut self, a: Action) {
        let views = self.views();
        let at = views.iter().position(|&v| v == self.view).unwrap_or(0);
        let next = match a {
            Action::View(v) => views.contains(&v).then_some(v),
            Action::Tab(i) => views.get(i).copied(),
            Action::NextView => views.get((at + 1) % views.len()).copied(),
            Action::PrevView => views.get((at + views.len() - 1) % views.len()).copied(),
            _ => None,
        };
        if let Some(v) = next {
            self.view = v;
        }
    }

    /// `Esc`: the view closes a level of its own first (the steps' drill-down), else back
    /// through the jump history.
    fn back(&mut self) {
        let c = self.ctx();
        if self.mode.as_mut().is_some_and(|m| m.back(&c)) {
            return;
        }
        if let Some((v, d, c)) = self.history.pop() {
            self.view = v;
            self.dev = d;
            self.cursors = c;
            let cur = self.cursor();
            if let Some(e) = cur {
                self.set_cursor(e);
            }
        }
    }

    fn apply_typing(&mut self, a: Action) {
        let Some(q) = &mut self.typing else { return };
        match a {
            Action::SearchChar(c) => q.push(c),
            Action::SearchBackspace => {
                q.pop();
            }
            Action::SearchCancel => self.typing = None,
            Action::SearchSubmit => {
                self.query = std::mem::take(q);
                self.typing = None;
                self.search_step(true);
            }
            _ => {}
        }
    }

    fn search_step(&mut self, forward: bool) {
        if self.query.is_empty() {
            self.message = "no search: press / to search".into();
            return;
        }
        let c = self.ctx();
        let e = match &mut self.mode {
            Some(m) => m.search(&c, &self.query, forward),
            None => Effect::None,
        };
        self.effect(e)
    }

    fn jump_marker(&mut self, kind: MarkerKind) {
        let cur = self.cursor().unwrap_or(0);
        let ms: Vec<usize> = self
            .markers()
            .iter()
            .filter(|m| m.kind == kind)
            .map(|m| m.event)
            .collect();
        // The next one after the cursor, wrapping: pressing `o` again visits every OOM.
        let target = ms
            .iter()
            .copied()
            .find(|&e| e > cur)
            .or_else(|| ms.first().copied());
        match target {
            Some(e) => {
                self.push_history();
                self.set_cursor(e);
                self.keep_at_cursor();
            }
            None if kind == MarkerKind::Oom && self.oom_elsewhere() => {}
            None => {
                self.message = match kind {
                    MarkerKind::Peak => "no peak in the log".into(),
                    MarkerKind::Oom => "no OOM in the log".into(),
                    MarkerKind::Annotation => "no annotation".into(),
                    MarkerKind::Step => "no step".into(),
                }
            }
        }
    }

    /// After a jump to a marker: a view that shows the cursor stays, any other gives way to the
    /// timeline.
    fn keep_at_cursor(&mut self) {
        if !self.mode.as_ref().is_some_and(|m| m.at_cursor(self.view)) {
            self.view = View::Timeline;
        }
    }

    /// `o` on a device without an OOM: moves to the next device that has one, at its first OOM.
    fn oom_elsewhere(&mut self) -> bool {
        let Some(cap) = self.capture() else {
            return false;
        };
        let n = cap.devices();
        let found = (1..n).map(|k| (self.dev + k) % n).find_map(|d| {
            cap.markers(d)
                .iter()
                .find(|m| m.kind == MarkerKind::Oom)
                .map(|m| (d, m.event))
        });
        let Some((d, e)) = found else {
            return false;
        };
        let name = cap.device_name(d).unwrap_or_else(|| format!("cuda:{d}"));
        self.push_history();
        self.dev = d;
        self.set_cursor(e);
        self.keep_at_cursor();
        self.message = format!("no OOM on this device: the OOM is on {name}");
        true
    }

    fn click(&mut self, x: u16, y: u16) {
        if y == 0 {
            // The tab bar: ` 1 Overview  2 Timeline ...`.
            let mut cx = 0u16;
            let views: Vec<View> = self.views().to_vec();
            for (v, t) in views.iter().zip(tab_labels(&views, self.width)) {
                let w = t.chars().count() as u16;
                if x >= cx && x < cx + w {
                    self.view = *v;
                    return;
                }
                cx += w;
            }
            return;
        }
        let c = self.ctx();
        let e = self
            .mode
            .as_mut()
            .map_or(Effect::None, |m| m.click(&c, x, y));
        self.effect(e)
    }
}

/// The tab bar's labels for a screen `width` columns wide: ` 1 Overview `, or, where the whole
/// bar does not fit, every title cut to the same longest length that fits (` 4 Sit `), down to
/// the bare numbers (` 4 `). No tab vanishes: the number is the key that opens it.
pub fn tab_labels(views: &[View], width: u16) -> Vec<String> {
    let label = |i: usize, v: &View, max: usize| {
        let t: String = v.title().chars().take(max).collect();
        if t.is_empty() {
            format!(" {} ", i + 1)
        } else {
            format!(" {} {} ", i + 1, t.trim_end())
        }
    };
    let longest = views.iter().map(|v| v.title().chars().count()).max();
    for max in (0..=longest.unwrap_or(0)).rev() {
        let labels: Vec<String> = views
            .iter()
            .enumerate()
            .map(|(i, v)| label(i, v, max))
            .collect();
        let total: usize = labels.iter().map(|l| l.chars().count()).sum();
        if total <= width as usize || max == 0 {
            return labels;
        }
    }
    Vec::new()
}
