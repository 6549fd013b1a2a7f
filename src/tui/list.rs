//! A list with its explanation below it, the building block of the overview, the leaks and the
//! graph views: the selection, and the explanation's scroll, which starts at the top for each
//! new selection. Depends only on [`super::action`], [`super::data`]'s `Jump` and
//! [`super::widgets`]' `Scroll`.

use super::action::{cycle, found, move_sel, Action, Effect};
use super::data::Jump;
use super::widgets::Scroll;

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

    /// `n`/`N` with query `query` over a list of `n` items: the next item (or the previous one,
    /// wrapping) that `hit` accepts is selected; what the status line says.
    pub fn search(
        &mut self,
        query: &str,
        n: usize,
        forward: bool,
        hit: impl Fn(usize) -> bool,
    ) -> Effect {
        let f = cycle(self.sel, n, forward, hit);
        if let Some(i) = f {
            self.select(i);
        }
        found(query, f.is_some())
    }
}
