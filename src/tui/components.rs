//! The views' state, one struct a view: a list with its explanation ([`ListText`], which
//! handles its own keys), the steps' drill-down, the allocator map's and the sites tree's
//! selections. The modes ([`super::snapshot_mode`], [`super::trace_mode`]) own them and act on
//! them. Depends only on [`super::action`], [`super::widgets`] and the models they select in
//! ([`super::sites`], [`super::trace`]).

use super::action::{move_sel, Action};
use std::collections::HashSet;

use super::sites::SortBy;
use super::trace::{OpSort, StepOps};
use super::widgets::Scroll;
use crate::model::StackId;

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
