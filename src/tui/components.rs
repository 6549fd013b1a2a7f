//! The views' state, one struct a view: a list with its explanation ([`ListText`], whose
//! `Enter` opens the selected finding's evidence), the steps' drill-down ([`Steps`]) and the
//! sites tree ([`SitesState`]), which handle their own keys and clicks, and the allocator map
//! ([`MapState`]), which handles its moves. The modes ([`super::snapshot_mode`],
//! [`super::trace_mode`]) own them. Depends only on [`super::action`], [`super::layout`],
//! [`super::widgets`], [`super::data`]'s `Jump` and the models they select in
//! ([`super::sites`], [`super::trace`]).

use super::action::{move_sel, Action, Ctx, Effect, View};
use super::data::Jump;
use super::layout::{list_offset, ops_list_area, steps_list_area};
use ratatui::layout::Rect;
use std::collections::HashSet;

use super::sites::{Row, SiteNode, SortBy};
use super::trace::{OpRow, OpSort, StepOps, TraceData};
use super::widgets::Scroll;
use crate::model::{StackId, Stacks};

/// A list with the selected item's explanation below it (the overview, the leaks and the graph
/// views): the selection, and the explanation's scroll position, which starts at the top for
/// each new selection.
#[derive(Default, Debug)]
pub struct ListText {
    sel: usize,
    text: Scroll,
}

impl ListText {
    pub fn sel(&self) -> usize {
        self.sel
    }

    pub fn text(&self) -> &Scroll {
        &self.text
    }

    /// Selects item `i`; a new item shows its text from the top.
    pub fn select(&mut self, i: usize) {
        if i != self.sel {
            self.sel = i;
            self.text.reset();
        }
    }

    /// Keeps the selection inside a list of `n`.
    pub fn clamp(&mut self, n: usize) {
        self.select(self.sel.min(n.saturating_sub(1)));
    }

    /// The keys of a list with its explanation: `PgUp`/`PgDn` scroll the text; `→`/`l` give
    /// the text the keys (`↑↓`, `j k`, `g G` scroll it), `←`/`h` give them back to the list.
    /// Whether the action was used.
    pub fn handle(&mut self, a: Action, n: usize, page: usize) -> bool {
        let t = &mut self.text;
        match a {
            Action::PageDown => t.page(1),
            Action::PageUp => t.page(-1),
            Action::Right => t.focused = true,
            Action::Left => t.focused = false,
            Action::Down if t.focused => t.by(1),
            Action::Up if t.focused => t.by(-1),
            Action::Top if t.focused => t.reset(),
            Action::Bottom if t.focused => t.by(i32::from(u16::MAX)),
            Action::Up | Action::Down | Action::Top | Action::Bottom => {
                let s = move_sel(self.sel, n, a, page);
                self.select(s);
            }
            _ => return false,
        }
        true
    }

    /// The keys of a list whose items open (the leaks and the graph findings): `Enter` jumps to
    /// the selected item's evidence (`evidence` of its index), or answers `none` where it has
    /// none; the other keys as [`Self::handle`].
    pub fn handle_open(
        &mut self,
        a: Action,
        n: usize,
        page: usize,
        evidence: impl FnOnce(usize) -> Option<Jump>,
        none: Effect,
    ) -> Effect {
        if a == Action::Enter {
            return evidence(self.sel).map_or(none, Effect::Jump);
        }
        self.handle(a, n, page);
        Effect::None
    }
}

/// The trace's steps view, three levels deep: the steps, the ops of the step drilled into, the
/// allocations of the op opened.
#[derive(Debug)]
pub struct Steps {
    pub(super) sel: usize,
    /// The step whose ops are listed (the steps view drilled in).
    pub(super) ops: Option<StepOps>,
    pub(super) ops_sel: usize,
    pub(super) sort: OpSort,
    /// The selected op's memory events are listed.
    pub(super) op_open: bool,
    pub(super) ev_sel: usize,
}

impl Default for Steps {
    fn default() -> Steps {
        Steps {
            sel: 0,
            ops: None,
            ops_sel: 0,
            // A step can run thousands of ops; the ones that allocate most come first.
            sort: OpSort::Allocated,
            op_open: false,
            ev_sel: 0,
        }
    }
}

impl Steps {
    /// The op row selected in the open step.
    pub fn selected_op(&self) -> Option<&OpRow> {
        self.ops.as_ref()?.rows.get(self.ops_sel)
    }

    /// The device event selected in the open op's event list.
    pub fn selected_op_event(&self) -> Option<usize> {
        self.selected_op()?.events.get(self.ev_sel).copied()
    }

    /// Drills into step `step` of device `dev`: its ops, the first selected.
    pub(super) fn open(&mut self, t: &TraceData, dev: usize, step: usize) {
        self.ops = Some(t.step_ops(dev, step, self.sort));
        self.sel = step;
        self.ops_sel = 0;
        self.op_open = false;
        self.ev_sel = 0;
    }

    /// The keys of the steps view, over trace `t`.
    pub(super) fn handle(&mut self, a: Action, t: &TraceData, c: Ctx) -> Effect {
        let page = c.page;
        if self.op_open {
            let n = self.selected_op().map(|r| r.events.len()).unwrap_or(0);
            match a {
                Action::Enter => {
                    if let Some(e) = self.selected_op_event() {
                        return Effect::Event(e, None);
                    }
                }
                Action::Left => self.op_open = false,
                other => self.ev_sel = move_sel(self.ev_sel, n, other, page),
            }
            return Effect::None;
        }
        if let Some(so) = &self.ops {
            let n = so.rows.len();
            match a {
                Action::Enter | Action::Right => {
                    if n > 0 {
                        self.op_open = true;
                        self.ev_sel = 0;
                    }
                }
                Action::Left => self.ops = None,
                other => {
                    let before = self.ops_sel;
                    self.ops_sel = move_sel(self.ops_sel, n, other, page);
                    if before != self.ops_sel {
                        self.ev_sel = 0;
                    }
                }
            }
            return Effect::None;
        }
        let n = t.trace.steps.len();
        match a {
            Action::Enter | Action::Right => {
                if n > 0 {
                    self.open(t, c.dev, self.sel);
                }
            }
            other => self.sel = move_sel(self.sel, n, other, page),
        }
        Effect::None
    }

    /// A click on row `y` of the steps view drawn in `b`.
    pub(super) fn click(&mut self, b: Rect, y: u16, nsteps: usize) {
        if self.op_open {
            let l = ops_list_area(b);
            if y >= l.y && y < l.y + l.height {
                let off = list_offset(self.ev_sel, l.height as usize);
                let i = off + (y - l.y) as usize;
                if self.selected_op().is_some_and(|r| i < r.events.len()) {
                    self.ev_sel = i;
                }
            }
        } else if let Some(so) = &self.ops {
            let l = ops_list_area(b);
            if y >= l.y && y < l.y + l.height {
                let off = list_offset(self.ops_sel, l.height as usize);
                let i = off + (y - l.y) as usize;
                if i < so.rows.len() {
                    self.ops_sel = i;
                }
            }
        } else {
            let l = steps_list_area(b);
            if y >= l.y && y < l.y + l.height {
                let off = list_offset(self.sel, l.height as usize);
                let i = off + (y - l.y) as usize;
                if i < nsteps {
                    self.sel = i;
                }
            }
        }
    }
}

/// The allocator map's state: the selected segment and block (part), the colouring, and the
/// details pane's scroll.
#[derive(Default, Debug)]
pub struct MapState {
    pub(super) seg: usize,
    pub(super) part: usize,
    /// Blocks coloured by category (parameters, activations, ...) instead of by state.
    pub(super) by_category: bool,
    pub(super) text: Scroll,
}

impl MapState {
    /// The map's moves over `nseg` segments, the selected one of `nparts` parts: `←→` the
    /// part, `↑↓ PgUp PgDn g G` the segment (a new segment starts at its first part).
    pub(super) fn handle(&mut self, a: Action, nseg: usize, nparts: usize, page: usize) {
        match a {
            Action::Left => self.part = self.part.saturating_sub(1),
            Action::Right => self.part = (self.part + 1).min(nparts.saturating_sub(1)),
            other => {
                let before = self.seg;
                self.seg = move_sel(self.seg, nseg, other, page);
                if before != self.seg {
                    self.part = 0;
                }
            }
        }
    }
}

/// The sites tree's state: the selected row, the order, library frames shown or folded, and the
/// sites and stacks that are open.
#[derive(Debug)]
pub struct SitesState {
    pub(super) sel: usize,
    pub(super) sort: SortBy,
    pub(super) unfold: bool,
    pub(super) open_sites: HashSet<String>,
    pub(super) open_stacks: HashSet<StackId>,
}

impl SitesState {
    /// The rows of tree `tree` as this state opens it (`stacks`: the capture's frames).
    pub(super) fn rows(&self, tree: &[SiteNode], stacks: &Stacks) -> Vec<Row> {
        super::sites::rows(
            tree,
            stacks,
            &self.open_sites,
            &self.open_stacks,
            self.unfold,
        )
    }

    /// Opens site `i` of tree `tree` and selects its row.
    pub(super) fn open_site(&mut self, tree: &[SiteNode], stacks: &Stacks, i: usize) {
        let Some(s) = tree.get(i) else {
            return;
        };
        self.open_sites.insert(s.label.clone());
        self.sel = self
            .rows(tree, stacks)
            .iter()
            .position(|r| *r == Row::Site(i))
            .unwrap_or(0);
    }

    /// The map's `Enter` on a block allocated at `stack`: the sites view, the site that
    /// allocated it opened and the stack's row selected.
    pub(super) fn show_stack(
        &mut self,
        tree: &[SiteNode],
        stacks: &Stacks,
        stack: StackId,
    ) -> Effect {
        if let Some(i) = tree
            .iter()
            .position(|s| s.stacks.iter().any(|k| k.stack == stack))
        {
            self.open_sites.insert(tree[i].label.clone());
            let ki = tree[i]
                .stacks
                .iter()
                .position(|k| k.stack == stack)
                .unwrap_or(0);
            self.sel = self
                .rows(tree, stacks)
                .iter()
                .position(|r| *r == Row::Stack(i, ki))
                .unwrap_or(0);
        }
        Effect::Show(View::Sites)
    }

    /// The keys of the sites tree, whose nodes are `tree` and rows `rows`.
    pub(super) fn handle(&mut self, a: Action, tree: &[SiteNode], rows: &[Row], page: usize) {
        let Some(row) = rows.get(self.sel).cloned() else {
            return;
        };
        let tree_label = |i: usize| tree.get(i).map(|x| x.label.clone());
        match a {
            Action::Enter | Action::Right => match row {
                Row::Site(i) => {
                    if let Some(l) = tree_label(i) {
                        if a == Action::Enter && self.open_sites.contains(&l) {
                            self.open_sites.remove(&l);
                        } else {
                            self.open_sites.insert(l);
                        }
                    }
                }
                Row::Stack(i, k) => {
                    if let Some(s) = tree.get(i).and_then(|x| x.stacks.get(k)).map(|x| x.stack) {
                        if a == Action::Enter && self.open_stacks.contains(&s) {
                            self.open_stacks.remove(&s);
                        } else {
                            self.open_stacks.insert(s);
                        }
                    }
                }
                Row::Folded(..) => self.unfold = true,
                Row::Frame(..) => {}
            },
            Action::Left => match row {
                Row::Site(i) => {
                    if let Some(l) = tree_label(i) {
                        self.open_sites.remove(&l);
                    }
                }
                Row::Stack(i, k) => {
                    let s = tree.get(i).and_then(|x| x.stacks.get(k)).map(|x| x.stack);
                    if let Some(s) = s.filter(|s| self.open_stacks.contains(s)) {
                        self.open_stacks.remove(&s);
                    } else {
                        self.sel = rows.iter().position(|r| *r == Row::Site(i)).unwrap_or(0);
                    }
                }
                Row::Frame(i, k, _) | Row::Folded(i, k, _, _) => {
                    self.sel = rows
                        .iter()
                        .position(|r| *r == Row::Stack(i, k))
                        .unwrap_or(0);
                }
            },
            other => self.sel = move_sel(self.sel, rows.len(), other, page),
        }
    }

    /// A click on row `y` of the sites tree drawn in `b`.
    pub(super) fn click(&mut self, b: Rect, y: u16, nrows: usize) {
        let l = super::layout::sites_list_area(b);
        let (list_y, h) = (l.y, l.height as usize);
        if y >= list_y {
            let off = list_offset(self.sel, h);
            let i = off + (y - list_y) as usize;
            if i < nrows {
                self.sel = i;
            }
        }
    }
}

impl Default for SitesState {
    fn default() -> SitesState {
        SitesState {
            sel: 0,
            sort: SortBy::Bytes,
            unfold: false,
            open_sites: HashSet::new(),
            open_stacks: HashSet::new(),
        }
    }
}
