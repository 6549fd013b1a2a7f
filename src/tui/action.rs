//! Everything the user can ask for, as values: keys and the mouse map to these (in `input`),
//! and the app and its views act on them; what a view asks of the app in return ([`Effect`]),
//! and what it knows of the app ([`Ctx`]). Depends only on [`super::data`] (`Jump`, `Marker`)
//! and [`super::layout`] (`Window`).

use std::fmt;

use ratatui::layout::Rect;

use super::data::{Jump, Marker};
use super::layout::Window;

/// A view: one tab of a capture's mode, named by its title.
///
/// The app knows two views by name: the overview it opens on and the timeline that an event
/// jump lands on. Every other view names itself in its own file under [`super::views`]
/// (`impl View { pub const Map: View = ... }`), so that a new view is one file and its
/// registration; the consts keep the names of the enum this replaced (`View::Map`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct View(&'static str);

#[allow(non_upper_case_globals)]
impl View {
    pub const Overview: View = View::new("Overview");
    pub const Timeline: View = View::new("Timeline");

    /// The view titled `title` (its tab's label).
    pub const fn new(title: &'static str) -> View {
        View(title)
    }

    pub fn title(self) -> &'static str {
        self.0
    }
}

impl fmt::Debug for View {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// Everything the user can ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Quit,
    Help,
    View(View),
    /// The n-th view of the capture's tab bar (number keys; 0-based).
    Tab(usize),
    NextView,
    PrevView,
    Up,
    Down,
    Left,
    Right,
    /// One event left/right on the timeline.
    FineLeft,
    FineRight,
    PageUp,
    PageDown,
    Top,
    Bottom,
    Enter,
    Back,
    ZoomIn,
    ZoomOut,
    Peak,
    Oom,
    NextMarker,
    PrevMarker,
    /// Jump to the event that allocated the selected block.
    AllocEvent,
    SortToggle,
    FoldToggle,
    /// Map: colour blocks by state or by category.
    CategoryToggle,
    /// Timeline: the x axis is events or time.
    TimeAxisToggle,
    /// Timeline: show reserved memory behind the allocated curve, and scale to it.
    ReservedToggle,
    NextDevice,
    Search,
    SearchChar(char),
    SearchBackspace,
    SearchSubmit,
    SearchCancel,
    SearchNext,
    SearchPrev,
    Click(u16, u16),
    Scroll(i8, u16, u16),
    Resize(u16, u16),
}

/// A list's selection after a movement action (`n` items, `page` rows a page).
pub fn move_sel(sel: usize, n: usize, a: Action, page: usize) -> usize {
    if n == 0 {
        return 0;
    }
    match a {
        Action::Up => sel.saturating_sub(1),
        Action::Down => (sel + 1).min(n - 1),
        Action::PageUp => sel.saturating_sub(page),
        Action::PageDown => (sel + page).min(n - 1),
        Action::Top => 0,
        Action::Bottom => n - 1,
        _ => sel.min(n - 1),
    }
}

/// The next index after (or before) `from`, wrapping, for which `hit` holds.
pub fn cycle(from: usize, n: usize, forward: bool, hit: impl Fn(usize) -> bool) -> Option<usize> {
    (1..=n)
        .map(|k| {
            if forward {
                (from + k) % n
            } else {
                (from + n * 2 - k) % n
            }
        })
        .find(|&i| hit(i))
}

/// What the status line says after a search for `query` in a view's list: the query, or that
/// nothing matches it.
pub fn found(query: &str, hit: bool) -> Effect {
    Effect::Message(if hit {
        format!("/{query}")
    } else {
        format!("/{query}: no match")
    })
}

/// `n`/`N` on the timeline: the next (or previous) event after `cur`, among the first `n`,
/// that `hit` accepts, as a cursor move; `what` names what was searched for when none does.
pub fn find_event(
    query: &str,
    cur: usize,
    n: usize,
    forward: bool,
    what: &str,
    mut hit: impl FnMut(usize) -> bool,
) -> Effect {
    let f = if forward {
        (cur + 1..n).find(|&i| hit(i))
    } else {
        (0..cur.min(n)).rev().find(|&i| hit(i))
    };
    match f {
        Some(i) => Effect::Cursor(i, format!("/{query}: event {i}")),
        None => Effect::Message(format!("/{query}: no further {what} matches")),
    }
}

/// `]`/`[` (and `↓`/`↑` on the timeline): the cursor to the next (or previous) of `markers`.
pub fn next_marker(markers: &[Marker], cursor: Option<usize>, forward: bool) -> Effect {
    let cur = cursor.unwrap_or(0);
    let t = if forward {
        markers.iter().find(|m| m.event > cur)
    } else {
        markers.iter().rev().find(|m| m.event < cur)
    };
    match t.map(|m| m.event) {
        Some(e) => Effect::Move(e),
        None => Effect::Message("no further marker".into()),
    }
}

/// What the app does after a view handled a key.
#[derive(Debug, PartialEq)]
pub enum Effect {
    None,
    Message(String),
    Jump(Jump),
    /// The event on the timeline (a step back in the history), then the message if any.
    Event(usize, Option<String>),
    /// The cursor moves there (no history), and the message.
    Cursor(usize, String),
    /// The cursor moves there (no history, nothing said): the timeline's moves.
    Move(usize),
    /// The timeline of the device shown looks at this window (its zoom).
    Window(Window),
    /// The view is shown (a step back in the history).
    Show(View),
}

/// What a view knows of the app: the view shown, the device, the timeline's cursor and window
/// and how it is drawn, a page's rows, and where the views are drawn.
#[derive(Clone, Copy, Debug)]
pub struct Ctx {
    pub view: View,
    pub dev: usize,
    pub cursor: Option<usize>,
    pub page: usize,
    pub window: Window,
    /// The timeline's x axis is time.
    pub by_time: bool,
    /// The timeline draws reserved memory behind the allocated curve.
    pub reserved_shown: bool,
    /// The views' area on the screen (below the tabs, above the status line): clicks map back
    /// to what was drawn there.
    pub body: Rect,
}
