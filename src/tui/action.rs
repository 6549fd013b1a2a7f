//! Everything the user can ask for, as values: keys and the mouse map to these (in `input`),
//! and the app and its components act on them; and what a component asks of the app in return
//! ([`Effect`]), with what it knows of the app ([`Ctx`]). Depends only on [`super::data`]'s
//! [`Jump`](super::data::Jump).

/// The views, in tab order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    Overview,
    Timeline,
    Map,
    Sites,
    Leaks,
    /// Traces: the profiler steps with their memory, and the ops inside one.
    Steps,
    /// Traces: autograd-graph growth.
    Graph,
}

impl View {
    /// A snapshot's views, in tab order.
    pub const ALL: [View; 5] = [
        View::Overview,
        View::Timeline,
        View::Map,
        View::Sites,
        View::Leaks,
    ];
    /// A trace's views, in tab order.
    pub const TRACE: [View; 5] = [
        View::Overview,
        View::Timeline,
        View::Steps,
        View::Graph,
        View::Leaks,
    ];
    pub fn title(self) -> &'static str {
        match self {
            View::Overview => "Overview",
            View::Timeline => "Timeline",
            View::Map => "Allocator map",
            View::Sites => "Sites",
            View::Leaks => "Leaks",
            View::Steps => "Steps",
            View::Graph => "Graph",
        }
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

/// What the app does after a component handled a key.
#[derive(Debug, PartialEq)]
pub enum Effect {
    None,
    Message(String),
    Jump(super::data::Jump),
    /// The event on the timeline (a step back in the history), then the message if any.
    Event(usize, Option<String>),
    /// The cursor moves there (no history), and the message.
    Cursor(usize, String),
    /// The view is shown (a step back in the history).
    Show(View),
}

/// What the app's components need to know of it: the view shown, the device, the timeline
/// cursor, a page's rows.
#[derive(Clone, Copy, Debug)]
pub struct Ctx {
    pub view: View,
    pub dev: usize,
    pub cursor: Option<usize>,
    pub page: usize,
}
