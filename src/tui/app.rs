//! The TUI's state and the one function that changes it, [`App::apply`].
//!
//! Everything a view draws is either in [`Data`] (computed once) or in the cursor cache here
//! (the allocator state at the cursor, rebuilt from the nearest replay checkpoint only when the
//! cursor moves). Rendering therefore never replays, and a keypress costs at most one
//! checkpoint-to-cursor replay, whatever the size of the log.

use rustc_hash::FxHashMap as HashMap;

pub use super::action::{cycle, move_sel, Action, View};
use super::components::{ListText, MapState, SitesState};
use super::data::{Data, Jump, MarkerKind};
pub use super::layout::{
    body, chart_area, list_offset, map_list_area, overview_list, Window, AXIS_W, MAP_LABEL_W,
};
use super::loaded::Loaded;
use super::sites::{self, Row, SiteNode, SortBy};
use super::trace::{OpRow, OpSort, StepOps, TraceData};
use super::trace_mode::{Ctx, Effect, TraceMode};
use super::widgets::Scroll;
use crate::analysis::categories::{Category, Classifier};
use crate::analysis::replay::{LiveBlock, SegState, State};
use crate::model::{Action as EvAction, StackId};

/// The allocator state at the cursor and what is derived from it.
pub struct Cursor {
    pub dev: usize,
    pub event: Option<usize>,
    pub state: State,
    /// Built on demand (sites view, searches): `None` until then.
    pub tree: Option<(SortBy, Vec<SiteNode>)>,
    /// Built on demand (the map coloured by category): each live block's category and the
    /// rule that put it there, by address.
    pub cats: Option<HashMap<u64, (Category, &'static str)>>,
}

/// One part of a segment in address order: a live block or a free range.
#[derive(Clone, Copy, Debug)]
pub struct Part<'a> {
    pub addr: u64,
    pub size: u64,
    pub block: Option<&'a LiveBlock>,
}

/// A segment's parts, blocks and holes interleaved in address order.
pub fn parts(seg: &SegState) -> Vec<Part<'_>> {
    let mut out: Vec<Part<'_>> = seg
        .blocks
        .values()
        .map(|b| Part {
            addr: b.address,
            size: b.size,
            block: Some(b),
        })
        .chain(seg.free_ranges().map(|(a, e)| Part {
            addr: a,
            size: e - a,
            block: None,
        }))
        .collect();
    out.sort_by_key(|p| p.addr);
    out
}

/// The capture the app shows, by kind.
pub enum Mode {
    Loading,
    Snapshot(Box<Data>),
    Trace(Box<TraceMode>),
}

impl Mode {
    pub fn data(&self) -> Option<&Data> {
        match self {
            Mode::Snapshot(d) => Some(d),
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
}

/// The whole TUI state.
pub struct App {
    pub(super) path: String,
    /// The capture, by kind: what decides the views and what they act on.
    pub(super) mode: Mode,
    pub(super) error: Option<String>,
    pub(super) view: View,
    pub(super) help: bool,
    pub(super) quit: bool,
    pub(super) width: u16,
    pub(super) height: u16,
    pub(super) dev: usize,
    /// Timeline cursor per device (`None`: the device has no events).
    pub(super) cursors: Vec<Option<usize>>,
    pub(super) windows: Vec<Window>,
    pub(super) cache: Option<Cursor>,
    /// The overview's findings and the text above them.
    pub(super) overview: ListText,
    /// The allocator map: its segment, block, colouring and details pane.
    pub(super) map: MapState,
    /// The sites tree: its row, order, folding and what is open.
    pub(super) sites: SitesState,
    /// The timeline's x axis is time (equal spans of time per column), not events.
    pub(super) by_time: bool,
    /// The timeline draws reserved memory behind the allocated curve (and scales to it).
    pub(super) reserved_shown: bool,
    /// The device whose classifier is built, and the classifier (built on first use).
    classifier: Option<(usize, Classifier)>,
    /// The snapshot's leaks list and the selected leak's explanation.
    pub(super) leaks: ListText,
    /// The query being typed, while typing.
    pub(super) typing: Option<String>,
    pub(super) query: String,
    /// Per stack id: whether one of its frames matches the query.
    matches: Vec<bool>,
    pub(super) message: String,
    /// While loading: how far it has got.
    pub(super) loading_note: String,
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
            help: false,
            quit: false,
            width: 80,
            height: 24,
            dev: 0,
            cursors: Vec::new(),
            windows: Vec::new(),
            cache: None,
            overview: ListText::default(),
            map: MapState::default(),
            sites: SitesState::default(),
            by_time: false,
            classifier: None,
            leaks: ListText::default(),
            typing: None,
            query: String::new(),
            matches: Vec::new(),
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
        self.cache.as_ref()
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
        self.mode = Mode::Snapshot(Box::new(data));
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

    /// The tree at the cursor, built if needed.
    pub fn tree(&self) -> &[SiteNode] {
        self.cache
            .as_ref()
            .and_then(|c| c.tree.as_ref())
            .map(|t| t.1.as_slice())
            .unwrap_or(&[])
    }

    pub fn rows(&self) -> Vec<Row> {
        match self.mode.data() {
            Some(d) => sites::rows(
                self.tree(),
                &d.snap.stacks,
                &self.sites.open_sites,
                &self.sites.open_stacks,
                self.sites.unfold,
            ),
            None => Vec::new(),
        }
    }

    /// Rebuilds the cursor cache if the cursor or device moved, and the tree if the view needs it.
    fn sync(&mut self) {
        if let Mode::Trace(tm) = &mut self.mode {
            return tm.sync(self.dev);
        }
        let data = match &self.mode {
            Mode::Loading | Mode::Trace(_) => return,
            Mode::Snapshot(d) => d,
        };
        let (dev, event) = (self.dev, self.cursor());
        let stale = self
            .cache
            .as_ref()
            .is_none_or(|c| c.dev != dev || c.event != event);
        if stale {
            let (Some(d), Some(tl)) = (data.snap.devices.get(dev), data.timelines.get(dev)) else {
                return;
            };
            let state = tl.state_after(d, &data.snap.settings, event);
            self.cache = Some(Cursor {
                dev,
                event,
                state,
                tree: None,
                cats: None,
            });
        }
        if self.view == View::Map && self.map.by_category {
            if self.classifier.as_ref().is_none_or(|c| c.0 != dev) {
                if let (Some(d), Some(r)) = (data.snap.devices.get(dev), data.step_ranges.get(dev))
                {
                    let c = Classifier::from_ranges(&data.snap, d, r.clone());
                    self.classifier = Some((dev, c));
                }
            }
            if let (Some(c), Some((_, cl)), Some(d)) = (
                &mut self.cache,
                &mut self.classifier,
                data.snap.devices.get(dev),
            ) {
                if c.cats.is_none() {
                    c.cats = Some(
                        c.state
                            .live_blocks()
                            .map(|b| (b.address, cl.classify(&data.snap, d, b)))
                            .collect(),
                    );
                }
            }
        }
        let want_tree = self.view == View::Sites;
        if let Some(c) = &mut self.cache {
            if want_tree && c.tree.as_ref().is_none_or(|t| t.0 != self.sites.sort) {
                c.tree = Some((
                    self.sites.sort,
                    sites::build(&data.snap.stacks, &c.state, self.sites.sort),
                ));
            }
        }
        let nseg = self
            .cache
            .as_ref()
            .map(|c| c.state.segments.len())
            .unwrap_or(0);
        self.map.seg = self.map.seg.min(nseg.saturating_sub(1));
        let nrows = self.rows().len();
        self.sites.sel = self.sites.sel.min(nrows.saturating_sub(1));
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
                if let Some(i) = self.tree().iter().position(|s| &s.label == label) {
                    let lab = self.tree()[i].label.clone();
                    self.sites.open_sites.insert(lab);
                    self.sites.sel = self
                        .rows()
                        .iter()
                        .position(|r| *r == Row::Site(i))
                        .unwrap_or(0);
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
        if self.help {
            // Any key closes the help.
            self.help = false;
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
        let before = (self.map.seg, self.map.part);
        match a {
            Action::Help => self.help = true,
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
                _ => {
                    self.sites.sort = match self.sites.sort {
                        SortBy::Bytes => SortBy::Count,
                        SortBy::Count => SortBy::Bytes,
                    }
                }
            },
            Action::FoldToggle => self.sites.unfold = !self.sites.unfold,
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
                self.map.by_category = !self.map.by_category;
                if self.map.by_category && self.view != View::Map {
                    self.message = "c colours the allocator map by category (view 3)".into();
                }
            }
            Action::AllocEvent => match self.mode.trace_mode() {
                Some(tm) => {
                    let e = tm.alloc_event(self.ctx());
                    self.effect(e)
                }
                None => {
                    if let Some(ev) = self.selected_part_block().and_then(|b| b.alloc_event) {
                        self.push_history();
                        self.set_cursor(ev.0 as usize);
                        self.view = View::Timeline;
                    } else {
                        self.message = "no allocating event in the log for this selection".into();
                    }
                }
            },
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
        if (self.map.seg, self.map.part) != before {
            self.map.text.reset()
        }
        self.sync();
    }

    /// The text pane of view `v`, where it has one.
    pub fn text(&self, v: View) -> Option<&Scroll> {
        match v {
            View::Overview => Some(self.overview.text()),
            View::Leaks => Some(match self.mode.trace_mode() {
                Some(tm) => tm.leaks.text(),
                None => self.leaks.text(),
            }),
            View::Graph => Some(self.mode.trace_mode()?.graph.text()),
            View::Map => Some(&self.map.text),
            _ => None,
        }
    }

    /// Whether the map colours blocks by category.
    pub fn map_by_category(&self) -> bool {
        self.map.by_category
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
        match self.mode.trace_mode() {
            Some(tm) => tm.leaks.sel(),
            None => self.leaks.sel(),
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
                self.compute_matches();
                self.search_step(true);
            }
            _ => {}
        }
    }

    fn compute_matches(&mut self) {
        let Some(d) = self.mode.data() else { return };
        let q = self.query.to_lowercase();
        let st = &d.snap.stacks;
        self.matches = (0..st.stack_count())
            .map(|i| {
                !q.is_empty()
                    && st.frames(StackId(i as u32)).iter().any(|&f| {
                        let f = st.frame(f);
                        st.frame_label(f).to_lowercase().contains(&q)
                    })
            })
            .collect();
    }

    fn stack_matches(&self, s: StackId) -> bool {
        self.matches.get(s.0 as usize).copied().unwrap_or(false)
    }

    fn search_step(&mut self, forward: bool) {
        if self.query.is_empty() {
            self.message = "no search: press / to search".into();
            return;
        }
        let c = self.ctx();
        if let Mode::Trace(tm) = &mut self.mode {
            let overview = &mut self.overview;
            let from = overview.sel();
            let e = tm.search(c, &self.query, forward, from, &mut |i| overview.select(i));
            return self.effect(e);
        }
        let q = self.query.to_lowercase();
        match self.view {
            View::Overview => {
                let n = self.mode.data().map(|d| d.findings.len()).unwrap_or(0);
                let found = cycle(self.overview.sel(), n, forward, |i| {
                    self.mode
                        .data()
                        .is_some_and(|d| d.findings[i].label.to_lowercase().contains(&q))
                });
                self.found(found, |s, i| s.overview.select(i));
            }
            View::Sites => {
                self.sync();
                let tree_len = self.tree().len();
                let cur_site = match self.rows().get(self.sites.sel) {
                    Some(
                        Row::Site(i)
                        | Row::Stack(i, _)
                        | Row::Frame(i, _, _)
                        | Row::Folded(i, _, _, _),
                    ) => *i,
                    None => 0,
                };
                let found = cycle(cur_site, tree_len, forward, |i| {
                    let s = &self.tree()[i];
                    s.label.to_lowercase().contains(&q)
                        || s.stacks.iter().any(|k| self.stack_matches(k.stack))
                });
                if let Some(i) = found {
                    let lab = self.tree()[i].label.clone();
                    self.sites.open_sites.insert(lab);
                    self.sites.sel = self
                        .rows()
                        .iter()
                        .position(|r| *r == Row::Site(i))
                        .unwrap_or(0);
                }
                self.found(found, |_, _| {});
            }
            View::Timeline | View::Map | View::Leaks | View::Steps | View::Graph => {
                let Some(d) = self.mode.data() else { return };
                let Some(dev) = d.snap.devices.get(self.dev) else {
                    return;
                };
                let n = dev.events.len();
                let cur = self.cursor().unwrap_or(0);
                let hit = |i: usize| {
                    let e = &dev.events[i];
                    matches!(e.action, EvAction::Alloc | EvAction::Oom)
                        && self.stack_matches(e.stack)
                };
                let found = if forward {
                    (cur + 1..n).find(|&i| hit(i))
                } else {
                    (0..cur.min(n)).rev().find(|&i| hit(i))
                };
                if let Some(i) = found {
                    self.set_cursor(i);
                    self.message = format!("/{}: event {i}", self.query);
                } else {
                    self.message = format!("/{}: no further allocation matches", self.query);
                }
            }
        }
    }

    pub(super) fn found(&mut self, found: Option<usize>, set: impl FnOnce(&mut App, usize)) {
        match found {
            Some(i) => {
                set(self, i);
                self.message = format!("/{}", self.query);
            }
            None => self.message = format!("/{}: no match", self.query),
        }
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
                        .findings()
                        .get(self.overview.sel())
                        .map(|f| f.jump.clone())
                    {
                        self.jump(&f);
                    }
                } else {
                    let page = self.page();
                    self.overview.handle(a, n, page);
                }
            }
            View::Timeline => self.apply_timeline(a),
            View::Map => self.apply_map(a),
            View::Sites => self.apply_sites(a),
            View::Steps | View::Graph | View::Leaks if self.mode.trace_mode().is_some() => {
                let c = self.ctx();
                let Mode::Trace(tm) = &mut self.mode else {
                    return;
                };
                let e = match self.view {
                    View::Steps => tm.apply_steps(a, c),
                    View::Graph => tm.apply_graph(a, c),
                    _ => tm.apply_leaks(a, c),
                };
                self.effect(e)
            }
            View::Steps | View::Graph => {}
            View::Leaks => {
                let n = self.leak_items().len();
                if a == Action::Enter {
                    if let Some(j) = self.leak_items().get(self.leaks.sel()).map(|x| x.1.clone()) {
                        self.jump(&j);
                    }
                } else {
                    let page = self.page();
                    self.leaks.handle(a, n, page);
                }
            }
        }
    }

    /// The analysis's leak findings (Enter: the end of the growth window on the timeline), then
    /// OOMs the diagnosis blames on a leak.
    pub fn leak_items(&self) -> Vec<(String, Jump)> {
        let Some(d) = self.mode.data() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for l in &d.analysis.leaks {
            let dev = d
                .snap
                .devices
                .iter()
                .position(|x| x.index == l.device)
                .unwrap_or(0);
            out.push((
                leak_label(l),
                Jump::Event {
                    dev,
                    event: l.leak.window_end_event.0 as usize,
                },
            ));
        }
        for (di, dr) in d.analysis.devices.iter().enumerate() {
            for o in dr.ooms.iter().filter(|o| o.cause.name() == "leak") {
                out.push((
                    format!("cuda:{} OOM at event {}: {}", dr.device, o.event, o.summary),
                    Jump::Event {
                        dev: di,
                        event: o.event as usize,
                    },
                ));
            }
        }
        out
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
                    _ => Effect::Show(View::Map),
                };
                self.effect(e)
            }
            _ => {}
        }
    }

    /// The segment selected in the map, and its parts.
    pub fn selected_segment(&self) -> Option<&SegState> {
        self.cache
            .as_ref()?
            .state
            .segments
            .values()
            .nth(self.map.seg)
    }

    pub fn selected_part_block(&self) -> Option<&LiveBlock> {
        let seg = self.selected_segment()?;
        parts(seg).get(self.map.part).and_then(|p| p.block)
    }

    fn apply_map(&mut self, a: Action) {
        let nseg = self
            .cache
            .as_ref()
            .map(|c| c.state.segments.len())
            .unwrap_or(0);
        let nparts = self.selected_segment().map(|s| parts(s).len()).unwrap_or(0);
        match a {
            Action::Left => self.map.part = self.map.part.saturating_sub(1),
            Action::Right => self.map.part = (self.map.part + 1).min(nparts.saturating_sub(1)),
            Action::Enter => {
                // Drill into who allocated the selected block: its site in the sites view.
                let Some(b) = self.selected_part_block() else {
                    self.message = "a free range: nothing allocated it".into();
                    return;
                };
                let stack = b.stack;
                self.push_history();
                self.view = View::Sites;
                self.sync();
                if let Some(i) = self
                    .tree()
                    .iter()
                    .position(|s| s.stacks.iter().any(|k| k.stack == stack))
                {
                    let lab = self.tree()[i].label.clone();
                    self.sites.open_sites.insert(lab);
                    let ki = self.tree()[i]
                        .stacks
                        .iter()
                        .position(|k| k.stack == stack)
                        .unwrap_or(0);
                    self.sites.sel = self
                        .rows()
                        .iter()
                        .position(|r| *r == Row::Stack(i, ki))
                        .unwrap_or(0);
                }
            }
            other => {
                let before = self.map.seg;
                self.map.seg = move_sel(self.map.seg, nseg, other, self.page());
                if before != self.map.seg {
                    self.map.part = 0;
                }
            }
        }
    }

    fn apply_sites(&mut self, a: Action) {
        let rows = self.rows();
        let Some(row) = rows.get(self.sites.sel).cloned() else {
            return;
        };
        let tree_label = |s: &App, i: usize| s.tree().get(i).map(|x| x.label.clone());
        match a {
            Action::Enter | Action::Right => match row {
                Row::Site(i) => {
                    if let Some(l) = tree_label(self, i) {
                        if a == Action::Enter && self.sites.open_sites.contains(&l) {
                            self.sites.open_sites.remove(&l);
                        } else {
                            self.sites.open_sites.insert(l);
                        }
                    }
                }
                Row::Stack(i, k) => {
                    if let Some(s) = self
                        .tree()
                        .get(i)
                        .and_then(|x| x.stacks.get(k))
                        .map(|x| x.stack)
                    {
                        if a == Action::Enter && self.sites.open_stacks.contains(&s) {
                            self.sites.open_stacks.remove(&s);
                        } else {
                            self.sites.open_stacks.insert(s);
                        }
                    }
                }
                Row::Folded(..) => self.sites.unfold = true,
                Row::Frame(..) => {}
            },
            Action::Left => match row {
                Row::Site(i) => {
                    if let Some(l) = tree_label(self, i) {
                        self.sites.open_sites.remove(&l);
                    }
                }
                Row::Stack(i, k) => {
                    let s = self
                        .tree()
                        .get(i)
                        .and_then(|x| x.stacks.get(k))
                        .map(|x| x.stack);
                    if let Some(s) = s.filter(|s| self.sites.open_stacks.contains(s)) {
                        self.sites.open_stacks.remove(&s);
                    } else {
                        self.sites.sel = rows.iter().position(|r| *r == Row::Site(i)).unwrap_or(0);
                    }
                }
                Row::Frame(i, k, _) | Row::Folded(i, k, _, _) => {
                    self.sites.sel = rows
                        .iter()
                        .position(|r| *r == Row::Stack(i, k))
                        .unwrap_or(0);
                }
            },
            other => self.sites.sel = move_sel(self.sites.sel, rows.len(), other, self.page()),
        }
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
                let l = map_list_area(b);
                if y >= l.y && y < l.y + l.height {
                    let off = list_offset(self.map.seg, l.height as usize);
                    let nseg = self
                        .cache
                        .as_ref()
                        .map(|c| c.state.segments.len())
                        .unwrap_or(0);
                    let i = off + (y - l.y) as usize;
                    if i < nseg {
                        self.map.seg = i;
                        self.map.part = 0;
                        // Select the part under the click within the bar.
                        let bar_x = l.x + MAP_LABEL_W;
                        let bar_w = l.width.saturating_sub(MAP_LABEL_W).max(1);
                        if x >= bar_x {
                            if let Some(seg) = self.selected_segment() {
                                let at = seg.address + (x - bar_x) as u64 * seg.size / bar_w as u64;
                                let ps = parts(seg);
                                self.map.part = ps
                                    .iter()
                                    .position(|p| at >= p.addr && at < p.addr + p.size)
                                    .unwrap_or(0);
                            }
                        }
                    }
                }
            }
            View::Sites => {
                let list_y = b.y + 1;
                let h = b.height.saturating_sub(1) as usize;
                if y >= list_y {
                    let off = list_offset(self.sites.sel, h);
                    let i = off + (y - list_y) as usize;
                    if i < self.rows().len() {
                        self.sites.sel = i;
                    }
                }
            }
            View::Overview => {
                let (list_y, h) = overview_list(b, self.findings().len());
                if y >= list_y && y < list_y + h {
                    let off = list_offset(self.overview.sel(), h as usize);
                    let i = off + (y - list_y) as usize;
                    if i < self.findings().len() {
                        self.overview.select(i);
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
