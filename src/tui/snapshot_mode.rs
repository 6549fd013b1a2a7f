//! A snapshot's mode: the snapshot, the allocator state at the cursor, and the state of the
//! views that only a snapshot has (the allocator map, the sites tree, the snapshot's leaks),
//! with what their keys do.
//!
//! Everything a view draws is either in [`Data`] (computed once) or in the cursor cache here
//! (the allocator state at the cursor, rebuilt from the nearest replay checkpoint only when the
//! cursor moves). Rendering therefore never replays, and a keypress costs at most one
//! checkpoint-to-cursor replay, whatever the size of the log.
//!
//! The components change only their own state; what the app must do besides comes back as an
//! [`Effect`].

use rustc_hash::FxHashMap as HashMap;

use super::action::{cycle, find_event, Action, Ctx, Effect, View};
use super::components::{ListText, MapState, SitesState};
use super::data::{leak_label, Data, Jump};
use super::layout::{list_offset, MAP_LABEL_W};
use super::sites::{self, Row, SiteNode, SortBy};
use crate::analysis::categories::{Category, Classifier};
use crate::analysis::replay::{LiveBlock, SegState, State};
use crate::model::{Action as EvAction, StackId};
use ratatui::layout::Rect;

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

/// A snapshot and its views' state.
pub struct SnapshotMode {
    pub(super) data: Data,
    pub(super) cache: Option<Cursor>,
    /// The allocator map: its segment, block, colouring and details pane.
    pub(super) map: MapState,
    /// The sites tree: its row, order, folding and what is open.
    pub(super) sites: SitesState,
    /// The leaks list and the selected leak's explanation.
    pub(super) leaks: ListText,
    /// The device whose classifier is built, and the classifier (built on first use).
    classifier: Option<(usize, Classifier)>,
    /// Per stack id: whether one of its frames matches the query.
    matches: Vec<bool>,
    /// The overview's findings and the text above them.
    pub(super) overview: ListText,
}

impl SnapshotMode {
    pub fn new(data: Data) -> SnapshotMode {
        SnapshotMode {
            data,
            cache: None,
            map: MapState::default(),
            sites: SitesState::default(),
            leaks: ListText::default(),
            overview: ListText::default(),
            classifier: None,
            matches: Vec::new(),
        }
    }

    /// The tree at the cursor, built if needed.
    pub fn tree(&self) -> &[SiteNode] {
        tree_of(&self.cache)
    }

    pub fn rows(&self) -> Vec<Row> {
        self.sites.rows(self.tree(), &self.data.snap.stacks)
    }

    /// Rebuilds the cursor cache if the cursor or device moved, and the tree if the view needs it.
    pub(super) fn sync(&mut self, c: Ctx) {
        let data = &self.data;
        let (dev, event) = (c.dev, c.cursor);
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
        if c.view == View::Map && self.map.by_category {
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
        let want_tree = c.view == View::Sites;
        if let Some(c) = &mut self.cache {
            if want_tree && c.tree.as_ref().is_none_or(|t| t.0 != self.sites.sort) {
                c.tree = Some((
                    self.sites.sort,
                    sites::build(&data.snap.stacks, &c.state, self.sites.sort),
                ));
            }
        }
        let nseg = self.nseg();
        self.map.seg = self.map.seg.min(nseg.saturating_sub(1));
        let nrows = self.rows().len();
        self.sites.sel = self.sites.sel.min(nrows.saturating_sub(1));
    }

    fn nseg(&self) -> usize {
        self.cache
            .as_ref()
            .map(|c| c.state.segments.len())
            .unwrap_or(0)
    }

    /// The sites view on site `label`, opened (the tree is built: the view is the sites').
    pub(super) fn show_site(&mut self, label: &str) {
        if let Some(i) = self.tree().iter().position(|s| s.label == label) {
            self.open_site(i);
        }
    }

    /// Opens site `i` of the tree and selects its row.
    fn open_site(&mut self, i: usize) {
        self.sites
            .open_site(tree_of(&self.cache), &self.data.snap.stacks, i);
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

    /// `s`: sites by bytes or by count.
    pub(super) fn sort(&mut self) {
        self.sites.sort = match self.sites.sort {
            SortBy::Bytes => SortBy::Count,
            SortBy::Count => SortBy::Bytes,
        }
    }

    /// `a`: the event that allocated the selected block.
    pub(super) fn alloc_event(&self) -> Effect {
        match self.selected_part_block().and_then(|b| b.alloc_event) {
            Some(ev) => Effect::Event(ev.0 as usize, None),
            None => Effect::Message("no allocating event in the log for this selection".into()),
        }
    }

    /// The keys of the allocator map.
    pub(super) fn apply_map(&mut self, a: Action, c: Ctx) -> Effect {
        let nseg = self.nseg();
        let nparts = self.selected_segment().map(|s| parts(s).len()).unwrap_or(0);
        match a {
            Action::Enter => {
                // Drill into who allocated the selected block: its site in the sites view.
                let Some(b) = self.selected_part_block() else {
                    return Effect::Message("a free range: nothing allocated it".into());
                };
                let stack = b.stack;
                self.sync(Ctx {
                    view: View::Sites,
                    ..c
                });
                return self
                    .sites
                    .show_stack(tree_of(&self.cache), &self.data.snap.stacks, stack);
            }
            other => self.map.handle(other, nseg, nparts, c.page),
        }
        Effect::None
    }

    /// The keys of the sites tree.
    pub(super) fn apply_sites(&mut self, a: Action, c: Ctx) {
        let rows = self.rows();
        self.sites.handle(a, tree_of(&self.cache), &rows, c.page)
    }

    /// The analysis's leak findings (Enter: the end of the growth window on the timeline), then
    /// OOMs the diagnosis blames on a leak.
    pub fn leak_items(&self) -> Vec<(String, Jump)> {
        leak_items(&self.data)
    }

    /// The keys of the leaks view.
    pub(super) fn apply_leaks(&mut self, a: Action, c: Ctx) -> Effect {
        let items = self.leak_items();
        self.leaks.handle_open(
            a,
            items.len(),
            c.page,
            |i| items.get(i).map(|x| x.1.clone()),
            Effect::None,
        )
    }

    /// A click at (`x`, `y`) in the map's list drawn at `l`.
    pub(super) fn click_map(&mut self, l: Rect, x: u16, y: u16) {
        if y >= l.y && y < l.y + l.height {
            let off = list_offset(self.map.seg, l.height as usize);
            let i = off + (y - l.y) as usize;
            if i < self.nseg() {
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

    /// A click on row `y` of the sites tree drawn in `b`.
    pub(super) fn click_sites(&mut self, b: Rect, y: u16) {
        let n = self.rows().len();
        self.sites.click(b, y, n)
    }

    /// Which stacks have a frame matching `query`.
    pub(super) fn compute_matches(&mut self, query: &str) {
        let q = query.to_lowercase();
        let st = &self.data.snap.stacks;
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

    /// `n`/`N` with query `query`: the next match in the view shown.
    pub(super) fn search(&mut self, c: Ctx, query: &str, forward: bool) -> Effect {
        let q = query.to_lowercase();
        let found = |f: Option<usize>| match f {
            Some(_) => Effect::Message(format!("/{query}")),
            None => Effect::Message(format!("/{query}: no match")),
        };
        match c.view {
            View::Overview => {
                let fs = &self.data.findings;
                let f = cycle(self.overview.sel(), fs.len(), forward, |i| {
                    fs[i].label.to_lowercase().contains(&q)
                });
                if let Some(i) = f {
                    self.overview.select(i);
                }
                found(f)
            }
            View::Sites => {
                self.sync(c);
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
                let f = cycle(cur_site, tree_len, forward, |i| {
                    let s = &self.tree()[i];
                    s.label.to_lowercase().contains(&q)
                        || s.stacks.iter().any(|k| self.stack_matches(k.stack))
                });
                if let Some(i) = f {
                    self.open_site(i);
                }
                found(f)
            }
            View::Timeline | View::Map | View::Leaks | View::Steps | View::Graph => {
                let Some(dev) = self.data.snap.devices.get(c.dev) else {
                    return Effect::None;
                };
                let n = dev.events.len();
                let cur = c.cursor.unwrap_or(0);
                let hit = |i: usize| {
                    let e = &dev.events[i];
                    matches!(e.action, EvAction::Alloc | EvAction::Oom)
                        && self.stack_matches(e.stack)
                };
                find_event(query, cur, n, forward, "allocation", hit)
            }
        }
    }
}

/// The sites tree of cursor cache `cache` (empty before the sites view built it).
fn tree_of(cache: &Option<Cursor>) -> &[SiteNode] {
    cache
        .as_ref()
        .and_then(|c| c.tree.as_ref())
        .map(|t| t.1.as_slice())
        .unwrap_or(&[])
}

/// A snapshot's leak findings (Enter: the end of the growth window on the timeline), then the
/// OOMs the diagnosis blames on a leak: the leaks view's items, with their evidence.
pub fn leak_items(d: &Data) -> Vec<(String, Jump)> {
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
