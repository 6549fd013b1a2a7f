//! The TUI's state and the one function that changes it, [`App::apply`].
//!
//! The app holds what every capture has (the view, the device, the timeline's cursors and
//! windows, the jump history, the search, the status message) and the
//! [`Mode`]: the capture by kind, with the state of its own views. Keys that belong to a view
//! go to the mode's component for it, which answers with an [`Effect`] the app carries out.

pub use super::action::{cycle, move_sel, Action, View};
use super::action::{Ctx, Effect};
use super::components::ListText;
use super::data::{Data, Jump, MarkerKind};
use super::layout::TimelineAt;
pub use super::layout::{
    body, chart_area, list_offset, map_list_area, overview_list, Window, AXIS_W, MAP_LABEL_W,
};
use super::loaded::Loaded;
use super::sites::{Row, SiteNode};
use super::snapshot_mode::SnapshotMode;
pub use super::snapshot_mode::{parts, Cursor, Part};
use super::trace::{OpRow, OpSort, StepOps, TraceData};
use super::trace_mode::TraceMode;
use super::widgets::Scroll;
use crate::analysis::replay::{LiveBlock, SegState};

/// The capture the app shows, by kind.
pub enum Mode {
    Loading,
    Snapshot(Box<SnapshotMode>),
    Trace(Box<TraceMode>),
}

impl Mode {
    pub fn data(&self) -> Option<&Data> {
        match self {
            Mode::Snapshot(s) => Some(&s.data),
            _ => None,
        }
    }
    pub fn snapshot_mode(&self) -> Option<&SnapshotMode> {
        match self {
            Mode::Snapshot(s) => Some(s),
            _ => None,
        }
    }
    pub fn trace(&self) -> Option<&TraceData> {
        match self {
            Mode::Trace(t) => Some(&t.data),
            _ => None,
        }
    }
    pub fn trace_mode(&self) -> Option<&TraceMode> {
        match self {
            Mode::Trace(t) => Some(t),
            _ => None,
        }
    }
    /// The overview's findings list and the text above them (none while loading).
    pub fn overview(&self) -> Option<&ListText> {
        match self {
            Mode::Snapshot(s) => Some(&s.overview),
            Mode::Trace(t) => Some(&t.overview),
            Mode::Loading => None,
        }
    }
    fn overview_mut(&mut self) -> Option<&mut ListText> {
        match self {
            Mode::Snapshot(s) => Some(&mut s.overview),
            Mode::Trace(t) => Some(&mut t.overview),
            Mode::Loading => None,
        }
    }
}

/// The whole TUI state.
pub struct App {
    path: String,
    /// The capture, by kind: what decides the views and what they act on.
    mode: Mode,
    error: Option<String>,
    view: View,
    help: super::help::Help,
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
}

impl App {
    /// An app still loading `path`.
    pub fn loading(path: &str) -> App {
        App {
            path: path.to_owned(),
            mode: Mode::Loading,
            error: None,
            view: View::Overview,
            help: super::help::Help::default(),
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
            reserved_shown: false,
        }
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

    /// The allocator state at the cursor, once built.
    pub fn cache(&self) -> Option<&Cursor> {
        self.mode.snapshot_mode()?.cache.as_ref()
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
    pub fn help_state(&self) -> super::help::Help {
        self.help
    }

    /// While loading: how far it has got.
    pub fn loading_note(&self) -> &str {
        &self.loading_note
    }

    /// Whether the timeline draws reserved memory behind the allocated curve.
    pub fn reserved_shown(&self) -> bool {
        self.reserved_shown
    }

    /// What the timeline of the device shown draws of the app.
    pub fn timeline_at(&self) -> TimelineAt {
        TimelineAt {
            dev: self.dev,
            cursor: self.cursor(),
            window: self.window(),
            by_time: self.by_time,
            reserved_shown: self.reserved_shown,
        }
    }

    /// The overview's findings list and the text above them (none while loading).
    pub fn overview(&self) -> Option<&ListText> {
        self.mode.overview()
    }

    /// The capture, by kind, with its views' state.
    pub fn mode(&self) -> &Mode {
        &self.mode
    }

    /// The file shown in the title.
    pub fn set_path(&mut self, path: String) {
        self.path = path;
    }

    /// While loading: how far it has got.
    pub fn set_loading_note(&mut self, note: String) {
        self.loading_note = note;
    }

    /// An app showing a snapshot or a trace.
    pub fn with(loaded: Loaded) -> App {
        let path = match &loaded {
            Loaded::Snapshot(d) => d.path.display().to_string(),
            Loaded::Trace(t) => t.path.display().to_string(),
        };
        let mut app = App::loading(&path);
        app.set_loaded(loaded);
        app
    }

    pub fn set_loaded(&mut self, loaded: Loaded) {
        match loaded {
            Loaded::Snapshot(d) => self.set_data(d),
            Loaded::Trace(t) => self.set_trace(t),
        }
    }

    /// Shows a trace, with the cursor at the end of each device's memory events.
    pub fn set_trace(&mut self, t: TraceData) {
        self.start_at_end(t.devs.iter().map(|d| d.events.len()));
        self.mode = Mode::Trace(Box::new(TraceMode::new(t)));
    }

    /// One cursor and window per device, of `lens` events each: the whole log in view, the
    /// cursor on its last event (what the capture shows).
    fn start_at_end(&mut self, lens: impl Iterator<Item = usize> + Clone) {
        self.cursors = lens.clone().map(|n| n.checked_sub(1)).collect();
        self.windows = lens.map(|n| Window { lo: 0, hi: n }).collect();
    }

    /// The loaded snapshot, if the capture is one.
    pub fn data(&self) -> Option<&Data> {
        self.mode.data()
    }

    /// The loaded trace, if the capture is one.
    pub fn trace(&self) -> Option<&TraceData> {
        self.mode.trace()
    }

    /// Whether a capture is loaded (a snapshot or a trace).
    pub fn loaded(&self) -> bool {
        !matches!(self.mode, Mode::Loading)
    }

    /// The views of the loaded capture, in tab order.
    pub fn views(&self) -> &'static [View] {
        match self.mode {
            Mode::Trace(_) => &View::TRACE,
            _ => &View::ALL,
        }
    }

    fn view_index(&self) -> usize {
        self.views()
            .iter()
            .position(|&v| v == self.view)
            .unwrap_or(0)
    }

    /// Shows a snapshot, with the cursor at the end of each device's log.
    pub fn set_data(&mut self, data: Data) {
        self.start_at_end(data.snap.devices.iter().map(|d| d.events.len()));
        // The device that ran out of memory comes first: the last OOM's, as the verdict says.
        let oom_device = data.analysis.last_oom().map(|(d, _)| d);
        if let Some(i) =
            oom_device.and_then(|d| data.snap.devices.iter().position(|x| x.index == d))
        {
            self.dev = i;
        }
        self.mode = Mode::Snapshot(Box::new(SnapshotMode::new(data)));
        self.sync();
    }

    pub fn set_error(&mut self, e: String) {
        self.error = Some(e);
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

    pub(super) fn events_len(&self) -> usize {
        if let Some(t) = self.mode.trace() {
            return t.devs.get(self.dev).map(|d| d.events.len()).unwrap_or(0);
        }
        self.mode
            .data()
            .and_then(|d| d.snap.devices.get(self.dev))
            .map(|d| d.events.len())
            .unwrap_or(0)
    }

    fn chart_width(&self) -> usize {
        chart_area(body(self.width, self.height)).width.max(1) as usize
    }

    /// The sites tree at the cursor, once built.
    pub fn tree(&self) -> &[SiteNode] {
        self.mode.snapshot_mode().map_or(&[], |s| s.tree())
    }

    pub fn rows(&self) -> Vec<Row> {
        self.mode
            .snapshot_mode()
            .map(|s| s.rows())
            .unwrap_or_default()
    }

    /// Keeps the mode's state in step with the cursor, the device and the view.
    fn sync(&mut self) {
        let c = self.ctx();
        match &mut self.mode {
            Mode::Trace(tm) => tm.sync(c.dev),
            Mode::Snapshot(sm) => sm.sync(c),
            Mode::Loading => {}
        }
    }

    pub(super) fn set_cursor(&mut self, ev: usize) {
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

    pub(super) fn push_history(&mut self) {
        self.history
            .push((self.view, self.dev, self.cursors.clone()));
        if self.history.len() > 64 {
            self.history.remove(0);
        }
    }

    pub(super) fn jump(&mut self, j: &Jump) {
        match j {
            Jump::Event { dev, event } => {
                self.push_history();
                self.dev = *dev;
                self.set_cursor(*event);
                self.view = View::Timeline;
            }
            Jump::Site { dev, label } => {
                self.push_history();
                self.dev = *dev;
                let n = self.events_len();
                if n > 0 {
                    self.set_cursor(n - 1);
                }
                self.view = View::Sites;
                self.sync();
                if let Mode::Snapshot(sm) = &mut self.mode {
                    sm.show_site(label);
                }
            }
            Jump::Graph(_) | Jump::Leak(_) | Jump::Steps { .. } | Jump::StepOps { .. } => {
                let Mode::Trace(tm) = &mut self.mode else {
                    return;
                };
                self.history
                    .push((self.view, self.dev, self.cursors.clone()));
                if self.history.len() > 64 {
                    self.history.remove(0);
                }
                self.view = match j {
                    Jump::Graph(_) => View::Graph,
                    Jump::Leak(_) => View::Leaks,
                    _ => View::Steps,
                };
                if let Jump::Steps { dev } | Jump::StepOps { dev, .. } = j {
                    self.dev = *dev;
                }
                if let Some(m) = tm.jump(j) {
                    self.message = m;
                }
            }
            Jump::None => {}
        }
    }

    /// Applies one action.
    pub fn apply(&mut self, a: Action) {
        self.message.clear();
        if let Action::Resize(w, h) = a {
            self.width = w;
            self.height = h;
            return;
        }
        if a == Action::Quit {
            self.quit = true;
            return;
        }
        if self.help.open {
            // The scrolling keys scroll the help; any other closes it.
            let trace = self.trace().is_some();
            self.help.handle(a, trace, self.width, self.height);
            return;
        }
        if self.typing.is_some() {
            self.apply_typing(a);
            self.sync();
            return;
        }
        if !self.loaded() {
            return;
        }
        let views = self.views();
        let before = self.mode.snapshot_mode().map(|s| (s.map.seg, s.map.part));
        match a {
            Action::Help => self.help.show(),
            Action::View(v) => {
                if views.contains(&v) {
                    self.view = v
                }
            }
            Action::Tab(i) => {
                if let Some(&v) = views.get(i) {
                    self.view = v
                }
            }
            Action::NextView => self.view = views[(self.view_index() + 1) % views.len()],
            Action::PrevView => {
                self.view = views[(self.view_index() + views.len() - 1) % views.len()]
            }
            Action::Back if self.mode_back() => {}
            Action::Back => {
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
            Action::NextDevice => {
                let n = match (self.mode.data(), self.mode.trace()) {
                    (Some(d), _) => d.snap.devices.len(),
                    (_, Some(t)) => t.devs.len(),
                    _ => 0,
                };
                if n > 0 {
                    self.dev = (self.dev + 1) % n;
                }
            }
            Action::Peak => self.jump_marker(MarkerKind::Peak),
            Action::Oom => self.jump_marker(MarkerKind::Oom),
            Action::NextMarker => self.step_marker(true),
            Action::PrevMarker => self.step_marker(false),
            Action::Search => self.typing = Some(String::new()),
            Action::SearchNext => self.search_step(true),
            Action::SearchPrev => self.search_step(false),
            Action::SortToggle => match &mut self.mode {
                Mode::Trace(tm) => {
                    let e = tm.sort(self.view);
                    self.effect(e)
                }
                Mode::Snapshot(sm) => sm.sort(),
                Mode::Loading => {}
            },
            Action::FoldToggle => {
                if let Mode::Snapshot(sm) = &mut self.mode {
                    sm.sites.unfold = !sm.sites.unfold
                }
            }
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
            Action::CategoryToggle => {
                let on = match &mut self.mode {
                    Mode::Snapshot(sm) => {
                        sm.map.by_category = !sm.map.by_category;
                        sm.map.by_category
                    }
                    _ => true,
                };
                if on && self.view != View::Map {
                    self.message = "c colours the allocator map by category (view 3)".into();
                }
            }
            Action::AllocEvent => {
                let e = match &self.mode {
                    Mode::Trace(tm) => tm.alloc_event(self.ctx()),
                    Mode::Snapshot(sm) => sm.alloc_event(),
                    Mode::Loading => Effect::None,
                };
                self.effect(e)
            }
            Action::Scroll(d, x, y) if self.text(self.view).is_some_and(|t| t.contains(x, y)) => {
                if let Some(t) = self.text(self.view) {
                    t.by(3 * d as i32)
                }
            }
            Action::Click(x, y) => self.click(x, y),
            Action::Scroll(d, _, _) => {
                let act = if d < 0 { Action::Up } else { Action::Down };
                match self.view {
                    View::Timeline => {
                        self.apply_view(if d < 0 { Action::Left } else { Action::Right })
                    }
                    _ => self.apply_view(act),
                }
            }
            other => self.apply_view(other),
        }
        // A new block shows its details from the top.
        if let Mode::Snapshot(sm) = &mut self.mode {
            if Some((sm.map.seg, sm.map.part)) != before {
                sm.map.text.reset()
            }
        }
        self.sync();
    }

    /// The text pane of view `v`, where it has one.
    pub fn text(&self, v: View) -> Option<&Scroll> {
        match v {
            View::Overview => Some(self.mode.overview()?.text()),
            View::Leaks => match &self.mode {
                Mode::Trace(tm) => Some(tm.leaks.text()),
                Mode::Snapshot(sm) => Some(sm.leaks.text()),
                Mode::Loading => None,
            },
            View::Graph => Some(self.mode.trace_mode()?.graph.text()),
            View::Map => Some(&self.mode.snapshot_mode()?.map.text),
            _ => None,
        }
    }

    /// Whether the map colours blocks by category.
    pub fn map_by_category(&self) -> bool {
        self.mode.snapshot_mode().is_some_and(|s| s.map.by_category)
    }

    /// The step selected in the steps view.
    pub fn steps_sel(&self) -> usize {
        self.mode.trace_mode().map_or(0, |tm| tm.steps.sel)
    }

    /// The ops of the step the steps view is drilled into.
    pub fn step_ops(&self) -> Option<&StepOps> {
        self.mode.trace_mode()?.steps.ops.as_ref()
    }

    /// The op selected in a step's ops.
    pub fn ops_sel(&self) -> usize {
        self.mode.trace_mode().map_or(0, |tm| tm.steps.ops_sel)
    }

    /// How a step's ops are ordered.
    pub fn op_sort(&self) -> OpSort {
        self.mode
            .trace_mode()
            .map_or(OpSort::Allocated, |tm| tm.steps.sort)
    }

    /// Whether the selected op's allocations are listed.
    pub fn op_open(&self) -> bool {
        self.mode.trace_mode().is_some_and(|tm| tm.steps.op_open)
    }

    /// The leak selected in the leaks view.
    pub fn leaks_sel(&self) -> usize {
        match &self.mode {
            Mode::Trace(tm) => tm.leaks.sel(),
            Mode::Snapshot(sm) => sm.leaks.sel(),
            Mode::Loading => 0,
        }
    }

    /// The op row selected in the open step of a trace.
    pub fn selected_op(&self) -> Option<&OpRow> {
        self.mode.trace_mode()?.selected_op()
    }

    /// The device event selected in the open op's event list.
    pub fn selected_op_event(&self) -> Option<usize> {
        self.mode.trace_mode()?.selected_op_event()
    }

    /// What the components need to know of the app.
    fn ctx(&self) -> Ctx {
        Ctx {
            view: self.view,
            dev: self.dev,
            cursor: self.cursor(),
            page: self.page(),
        }
    }

    /// Does what a component asked for.
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
            Effect::Show(v) => {
                self.push_history();
                self.view = v;
            }
        }
    }

    /// `Esc`: the mode closes a level of its own first (the steps' drill-down).
    fn mode_back(&mut self) -> bool {
        match &mut self.mode {
            Mode::Trace(tm) => tm.back(self.view),
            _ => false,
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
                if let Mode::Snapshot(sm) = &mut self.mode {
                    sm.compute_matches(&self.query);
                }
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
            Mode::Trace(tm) => tm.search(c, &self.query, forward),
            Mode::Snapshot(sm) => sm.search(c, &self.query, forward),
            Mode::Loading => Effect::None,
        };
        self.effect(e)
    }

    pub(super) fn markers(&self) -> &[super::data::Marker] {
        if let Some(t) = self.mode.trace() {
            return t
                .devs
                .get(self.dev)
                .map(|d| d.markers.as_slice())
                .unwrap_or(&[]);
        }
        self.mode
            .data()
            .and_then(|d| d.markers.get(self.dev))
            .map(|v| v.as_slice())
            .unwrap_or(&[])
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
                if !matches!(self.view, View::Timeline | View::Map | View::Sites) {
                    self.view = View::Timeline;
                }
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

    /// `o` on a device without an OOM: moves to the next device that has one, at its first OOM.
    fn oom_elsewhere(&mut self) -> bool {
        let Some(markers) = self.mode.data().map(|d| &d.markers) else {
            return false;
        };
        let n = markers.len();
        let found = (1..n).map(|k| (self.dev + k) % n).find_map(|d| {
            markers[d]
                .iter()
                .find(|m| m.kind == MarkerKind::Oom)
                .map(|m| (d, m.event))
        });
        let Some((d, e)) = found else {
            return false;
        };
        self.push_history();
        self.dev = d;
        self.set_cursor(e);
        if !matches!(self.view, View::Timeline | View::Map | View::Sites) {
            self.view = View::Timeline;
        }
        let name = self
            .mode
            .data()
            .and_then(|x| x.snap.devices.get(d))
            .map_or(d as u32, |x| x.index);
        self.message = format!("no OOM on this device: the OOM is on cuda:{name}");
        true
    }

    fn step_marker(&mut self, forward: bool) {
        let cur = self.cursor().unwrap_or(0);
        let ms = self.markers();
        let t = if forward {
            ms.iter().find(|m| m.event > cur)
        } else {
            ms.iter().rev().find(|m| m.event < cur)
        };
        match t.map(|m| m.event) {
            Some(e) => self.set_cursor(e),
            None => self.message = "no further marker".into(),
        }
    }

    pub(super) fn page(&self) -> usize {
        (self.height as usize).saturating_sub(8).max(1)
    }

    /// Each event's time in seconds from the first, for the current device, when the timeline's
    /// x axis is time.
    pub fn time_axis(&self) -> Option<&[f64]> {
        if !self.by_time {
            return None;
        }
        match (self.mode.data(), self.mode.trace()) {
            (Some(d), _) => d.times.get(self.dev)?.as_deref(),
            (_, Some(t)) => t.devs.get(self.dev).map(|d| d.times.as_slice()),
            _ => None,
        }
    }

    /// The overview's findings (snapshot or trace).
    pub fn findings(&self) -> &[super::data::Finding] {
        match (self.mode.data(), self.mode.trace()) {
            (Some(d), _) => &d.findings,
            (_, Some(t)) => &t.findings,
            _ => &[],
        }
    }

    fn apply_view(&mut self, a: Action) {
        match self.view {
            View::Overview => {
                let n = self.findings().len();
                if a == Action::Enter {
                    if let Some(f) = self
                        .mode
                        .overview()
                        .and_then(|o| self.findings().get(o.sel()))
                        .map(|f| f.jump.clone())
                    {
                        self.jump(&f);
                    }
                } else {
                    let page = self.page();
                    if let Some(o) = self.mode.overview_mut() {
                        o.handle(a, n, page);
                    }
                }
            }
            View::Timeline => self.apply_timeline(a),
            view => {
                // The mode's own views: the component of the view shown takes the key.
                let c = self.ctx();
                let e = match (&mut self.mode, view) {
                    (Mode::Trace(tm), View::Steps) => tm.apply_steps(a, c),
                    (Mode::Trace(tm), View::Graph) => tm.apply_graph(a, c),
                    (Mode::Trace(tm), View::Leaks) => tm.apply_leaks(a, c),
                    (Mode::Snapshot(sm), View::Map) => sm.apply_map(a, c),
                    (Mode::Snapshot(sm), View::Sites) => {
                        sm.apply_sites(a, c);
                        Effect::None
                    }
                    (Mode::Snapshot(sm), View::Leaks) => sm.apply_leaks(a, c),
                    _ => Effect::None,
                };
                self.effect(e)
            }
        }
    }
    /// A snapshot's leak findings and the OOMs blamed on a leak, with where Enter goes.
    pub fn leak_items(&self) -> Vec<(String, Jump)> {
        self.mode
            .snapshot_mode()
            .map(|s| s.leak_items())
            .unwrap_or_default()
    }

    fn apply_timeline(&mut self, a: Action) {
        let n = self.events_len();
        if n == 0 {
            return;
        }
        let cur = self.cursor().unwrap_or(0);
        let w = self.window();
        let span = (w.hi - w.lo).max(1);
        let col = span.div_ceil(self.chart_width()).max(1);
        match a {
            Action::Left => self.set_cursor(cur.saturating_sub(col)),
            Action::Right => self.set_cursor(cur + col),
            Action::FineLeft => self.set_cursor(cur.saturating_sub(1)),
            Action::FineRight => self.set_cursor(cur + 1),
            Action::PageUp => self.set_cursor(cur.saturating_sub(span / 4 + 1)),
            Action::PageDown => self.set_cursor(cur + span / 4 + 1),
            Action::Top => self.set_cursor(0),
            Action::Bottom => self.set_cursor(n - 1),
            Action::Down => self.step_marker(true),
            Action::Up => self.step_marker(false),
            Action::ZoomIn | Action::ZoomOut => {
                let new_span = if a == Action::ZoomIn {
                    (span / 2).max(16.min(n))
                } else {
                    (span * 2).min(n)
                };
                // Keep the cursor at the same relative position on screen.
                let rel = (cur.saturating_sub(w.lo)) as u128 * new_span as u128 / span as u128;
                let lo = cur.saturating_sub(rel as usize).min(n - new_span);
                if let Some(win) = self.windows.get_mut(self.dev) {
                    *win = Window {
                        lo,
                        hi: lo + new_span,
                    };
                }
            }
            Action::Enter => {
                let c = self.ctx();
                let e = match &mut self.mode {
                    Mode::Trace(tm) => tm.open_step_at_cursor(c),
                    // The allocator map at the cursor.
                    _ => Effect::Show(View::Map),
                };
                self.effect(e)
            }
            _ => {}
        }
    }

    /// The segment selected in the map.
    pub fn selected_segment(&self) -> Option<&SegState> {
        self.mode.snapshot_mode()?.selected_segment()
    }

    /// The block selected in the map's segment (none on a free range).
    pub fn selected_part_block(&self) -> Option<&LiveBlock> {
        self.mode.snapshot_mode()?.selected_part_block()
    }

    fn click(&mut self, x: u16, y: u16) {
        if y == 0 {
            // The tab bar: ` 1 Overview  2 Timeline ...`.
            let mut cx = 0u16;
            for (i, v) in self.views().iter().enumerate() {
                let w = tab_label(i, *v).chars().count() as u16;
                if x >= cx && x < cx + w {
                    self.view = *v;
                    return;
                }
                cx += w;
            }
            return;
        }
        let b = body(self.width, self.height);
        match self.view {
            View::Timeline => {
                let c = chart_area(b);
                if x >= c.x && x < c.x + c.width && y >= c.y && y < b.y + b.height {
                    let w = self.window();
                    let ev = super::widgets::chart::event_at_column(
                        self.time_axis(),
                        w.lo,
                        w.hi,
                        c.width.max(1) as usize,
                        (x - c.x) as usize,
                    );
                    self.set_cursor(ev);
                }
            }
            View::Map => {
                if let Mode::Snapshot(sm) = &mut self.mode {
                    sm.click_map(map_list_area(b), x, y)
                }
            }
            View::Sites => {
                if let Mode::Snapshot(sm) = &mut self.mode {
                    sm.click_sites(b, y)
                }
            }
            View::Overview => {
                let (list_y, h) = overview_list(b, self.findings().len());
                let n = self.findings().len();
                if let (true, Some(o)) = (y >= list_y && y < list_y + h, self.mode.overview_mut()) {
                    let off = list_offset(o.sel(), h as usize);
                    let i = off + (y - list_y) as usize;
                    if i < n {
                        o.select(i);
                    }
                }
            }
            View::Steps => {
                if let Mode::Trace(tm) = &mut self.mode {
                    tm.click_steps(b, y)
                }
            }
            View::Leaks | View::Graph => {}
        }
    }
}

pub fn tab_label(i: usize, v: View) -> String {
    format!(" {} {} ", i + 1, v.title())
}

pub use super::data::leak_label;
