//! The help overlay: the keys of the capture's mode (a snapshot's views differ from a trace's,
//! so each kind of capture names its [`Page`]), the allocator map's legend for a snapshot, as a
//! popup that scrolls when the terminal is smaller than it (at 40x12 it holds a third of the
//! keys). A component: it owns whether it is open and how far it is scrolled, takes its keys
//! while open, and draws itself.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget};

use super::action::Action;
use super::widgets::wrap;

/// Whether the help is open, and its first line shown.
#[derive(Clone, Copy, Debug, Default)]
pub struct Help {
    pub open: bool,
    pub scroll: usize,
}

impl Help {
    pub fn show(&mut self) {
        *self = Help {
            open: true,
            scroll: 0,
        };
    }

    /// A key while open, on a `w`x`h` screen: the scrolling keys scroll, any other closes.
    pub fn handle(&mut self, a: Action, page: &Page, w: u16, h: u16) {
        let (total, shown) = extent(page, w, h);
        let last = total.saturating_sub(shown);
        let page = shown.max(1);
        self.scroll = match a {
            Action::Up | Action::Scroll(-1, ..) => self.scroll.saturating_sub(1),
            Action::Down | Action::Scroll(1, ..) => self.scroll + 1,
            Action::PageUp => self.scroll.saturating_sub(page),
            Action::PageDown => self.scroll + page,
            Action::Top => 0,
            Action::Bottom => last,
            _ => {
                self.open = false;
                0
            }
        }
        .min(last);
    }
}

/// (key, what it does).
pub type Keys = &'static [(&'static str, &'static str)];

/// The help of one kind of capture: its first line, then its sections (a heading or none, and
/// the keys).
pub struct Page {
    pub title: &'static str,
    pub sections: &'static [(Option<&'static str>, Keys)],
}

/// A snapshot's keys, and the allocator map's labels.
pub static SNAPSHOT_HELP: Page = Page {
    title: "memscope TUI: a snapshot's keys",
    sections: &[
        (None, QUIT_TOP),
        (None, COMMON_KEYS),
        (None, SNAPSHOT),
        (Some("the allocator map's segment labels:"), MAP_LEGEND),
    ],
};

/// A profiler trace's keys.
pub static TRACE_HELP: Page = Page {
    title: "memscope TUI: a profiler trace's keys",
    sections: &[(None, QUIT_TOP), (None, COMMON_KEYS), (None, TRACE)],
};

/// A snapshot opened from the Ranks view (`memscope tui` of several captures): q goes back.
pub static RANK_SNAPSHOT_HELP: Page = Page {
    title: "memscope TUI: a rank's snapshot, opened from the ranks list",
    sections: &[
        (None, RANK_TOP),
        (None, COMMON_KEYS),
        (None, SNAPSHOT),
        (Some("the allocator map's segment labels:"), MAP_LEGEND),
    ],
};

/// A profiler trace opened from the Ranks view.
pub static RANK_TRACE_HELP: Page = Page {
    title: "memscope TUI: a rank's profiler trace, opened from the ranks list",
    sections: &[(None, RANK_TOP), (None, COMMON_KEYS), (None, TRACE)],
};

/// The page of a capture opened from the Ranks view, for the page it has on its own.
pub fn from_ranks(page: &'static Page) -> &'static Page {
    if std::ptr::eq(page, &TRACE_HELP) {
        &RANK_TRACE_HELP
    } else if std::ptr::eq(page, &SNAPSHOT_HELP) {
        &RANK_SNAPSHOT_HELP
    } else {
        page
    }
}

/// One meaning for q and Esc in every mode: q leaves the capture on screen (memscope, or a
/// rank opened from the ranks list, back to that list), Esc goes back one step inside it and
/// never leaves it.
const RANK_TOP: Keys = &[(
    "q, Ctrl-C",
    "close this rank: back to the ranks list (q there quits)",
)];

const QUIT_TOP: Keys = &[("q, Ctrl-C", "quit")];

const COMMON_KEYS: Keys = &[
    (
        "?",
        "this help: ↑↓ PgUp PgDn g G scroll it, any other key closes it",
    ),
    (
        "Esc",
        "back one step (after a jump or a drill-down); never quits",
    ),
    ("↑↓ / jk", "move the selection"),
    ("g / G", "first / last"),
    ("PgUp PgDn", "page; scroll the explanation"),
    ("→ / l", "focus the explanation (↑↓ jk scroll it), ← back"),
];

const SNAPSHOT: Keys = &[
    ("Tab, 1-6", "views: 1 Overview, 2 Timeline, 3 Allocator map, 4 Sites, 5 Leaks, 6 Plan (with --batch)"),
    ("Enter", "drill in: finding → evidence, timeline → map, map block → its site, site → its stacks → frames"),
    ("←→ / hl", "move the timeline cursor; map: the block; sites: collapse / expand"),
    ("+ / -", "zoom the timeline"),
    ("H / L", "one event left / right"),
    ("t / r", "timeline x axis: events / time; reserved memory shown / hidden"),
    ("p / o", "jump to the peak / the OOM"),
    ("] / [", "next / previous marker or step"),
    ("a", "map: the event that allocated the block"),
    ("s", "sort sites by bytes / count"),
    ("f", "show / fold library frames (sites, the map's block stack)"),
    ("c", "map: colour by state / by category"),
    ("d", "next device"),
    ("/ n N", "search sites, files, functions; next / previous match"),
    ("mouse", "click tabs, timeline, rows; wheel scrolls"),
];

/// The allocator map's labels, `›  20.0 MiB Le s0   75% ████`.
const MAP_LEGEND: Keys = &[
    (
        "L / S",
        "a segment of the large pool (requests over 1 MiB) / the small pool (1 MiB and under)",
    ),
    (
        "Le / Se",
        "the same, an expandable segment (expandable_segments:True)",
    ),
    (
        "Lg / Lp",
        "a segment of a private pool: a CUDA graph's own (id (n, 0)) / id (0, n), a MemPool or torch.compile's CUDA graph trees; held by design, not a leak",
    ),
    (
        "s0, 75%",
        "the segment's CUDA stream (s0 the default stream, s1, s2... the others in handle order; the details give the handle); the share of it in use (active blocks)",
    ),
    (
        "█ ▓ ·",
        "allocated, pending free (freed, awaiting another stream's work), free",
    ),
];

const TRACE: Keys = &[
    ("Tab, 1-5", "views: 1 Overview, 2 Timeline, 3 Steps, 4 Graph, 5 Leaks"),
    ("Enter", "drill in: finding → evidence, timeline → the step's ops, step → its ops → an op's allocations → the timeline"),
    ("←→ / hl", "move the timeline cursor"),
    ("+ / -", "zoom the timeline"),
    ("H / L", "one event left / right"),
    ("t / r", "timeline x axis: events / time; reserved memory shown / hidden"),
    ("p", "jump to the peak"),
    ("] / [", "next / previous step"),
    ("a", "an allocation ↔ its free"),
    ("s", "sort a step's ops by time / bytes / survivors"),
    ("d", "next device"),
    ("/ n N", "search ops, files, functions; next / previous match"),
    ("mouse", "click tabs, timeline, rows; wheel scrolls"),
];

/// Width of the key column.
const KEY_W: usize = 10;

/// The help's lines, wrapped to `w` cells: keys beside what they do, or above it when narrow.
pub fn lines(page: &Page, w: usize) -> Vec<String> {
    let mut out = vec![page.title.to_owned()];
    let section = |title: Option<&str>, keys: Keys, out: &mut Vec<String>| {
        if let Some(t) = title {
            out.push(String::new());
            out.push(t.to_owned());
        }
        for (k, d) in keys {
            if w >= KEY_W + 20 {
                for (i, l) in wrap(d, w - KEY_W - 1).into_iter().enumerate() {
                    let key = if i == 0 { *k } else { "" };
                    out.push(format!("{key:<KEY_W$} {l}"));
                }
            } else {
                out.push((*k).to_owned());
                out.extend(
                    wrap(d, w.saturating_sub(2))
                        .into_iter()
                        .map(|l| format!("  {l}")),
                );
            }
        }
    };
    for (title, keys) in page.sections {
        section(*title, keys, &mut out);
    }
    out
}

/// The popup over a `w`x`h` screen.
fn popup(w: u16, h: u16, total: usize) -> Rect {
    let pw = 86.min(w);
    let ph = (total as u16).saturating_add(2).min(h);
    Rect::new((w - pw) / 2, (h - ph) / 2, pw, ph)
}

/// (lines in all, lines shown) on a `w`x`h` screen.
fn extent(page: &Page, w: u16, h: u16) -> (usize, usize) {
    let inner = 86.min(w).saturating_sub(2) as usize;
    let total = lines(page, inner).len();
    let shown = popup(w, h, total).height.saturating_sub(2) as usize;
    (total, shown)
}

/// The help popup, centred on the area it is given.
pub struct HelpView {
    pub help: Help,
    pub page: &'static Page,
}

impl Widget for HelpView {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let inner = 86.min(area.width).saturating_sub(2) as usize;
        let all = lines(self.page, inner);
        let p = popup(area.width, area.height, all.len());
        let r = Rect::new(area.x + p.x, area.y + p.y, p.width, p.height);
        let shown = r.height.saturating_sub(2) as usize;
        let top = self.help.scroll.min(all.len().saturating_sub(shown));
        Clear.render(r, buf);
        let title = if shown < all.len() && r.width < 50 {
            " help: ↑↓ scroll, other keys close "
        } else if shown < all.len() {
            " help: ↑↓ PgUp PgDn scroll, other keys close "
        } else {
            " help (any key closes) "
        };
        let mut block = Block::default().borders(Borders::ALL).title(title);
        if shown < all.len() {
            let more = format!(" lines {}-{} of {} ", top + 1, top + shown, all.len());
            block = block.title_bottom(Line::from(more).right_aligned());
        }
        let text: Vec<Line> = all[top..]
            .iter()
            .take(shown)
            .map(|l| Line::from(l.as_str()))
            .collect();
        Paragraph::new(text).block(block).render(r, buf);
    }
}
