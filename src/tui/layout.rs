//! Where things are on the screen: pure geometry, shared by the views that draw there and the
//! app that maps a mouse click back to what was drawn. Depends on nothing else in `src/tui`.

use ratatui::layout::Rect;

/// Where the timeline looks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub lo: usize,
    /// Exclusive.
    pub hi: usize,
}

/// Rows of the screen: tabs on top, status at the bottom, the view between.
pub fn body(width: u16, height: u16) -> Rect {
    Rect::new(0, 1, width, height.saturating_sub(2))
}

/// Left margin of the timeline chart (the y-axis labels).
pub const AXIS_W: u16 = 10;

/// The timeline's chart area inside the body.
pub fn chart_area(body: Rect) -> Rect {
    Rect::new(
        body.x + AXIS_W,
        body.y + 2,
        body.width.saturating_sub(AXIS_W),
        body.height.saturating_sub(5),
    )
}

/// Segment rows of the map view inside the body (the rest is the summary and block details).
pub fn map_list_area(body: Rect) -> Rect {
    let details = (body.height / 3).max(6).min(body.height.saturating_sub(4));
    Rect::new(
        body.x,
        body.y + 2,
        body.width,
        body.height.saturating_sub(2 + details),
    )
}

/// Width of the map's per-segment label column.
pub const MAP_LABEL_W: u16 = 30;

/// The overview's findings list: first row and height. It takes the bottom of the body, as
/// many rows as there are findings up to half the body; the text pane scrolls above it.
pub fn overview_list(b: Rect, findings: usize) -> (u16, u16) {
    let n = findings.min(u16::MAX as usize) as u16;
    let h = n.clamp(1, (b.height / 2).max(1));
    (b.y + b.height.saturating_sub(h), h)
}

/// The first visible row of a list of `height` rows that keeps `sel` in view (centred paging).
pub fn list_offset(sel: usize, height: usize) -> usize {
    if height == 0 {
        return sel;
    }
    (sel / height) * height
}

/// The steps list inside the body: under the title and the column header.
pub fn steps_list_area(body: Rect) -> Rect {
    Rect::new(
        body.x,
        body.y + 2,
        body.width,
        body.height.saturating_sub(3),
    )
}

/// The ops (or an op's events) list inside the body: under the title and the column header,
/// above the selection's details.
pub fn ops_list_area(body: Rect) -> Rect {
    Rect::new(
        body.x,
        body.y + 2,
        body.width,
        body.height.saturating_sub(2 + 3),
    )
}

/// The sites tree's rows in the body: below its summary line and its column headers.
pub fn sites_list_area(body: Rect) -> Rect {
    let top = 2.min(body.height);
    Rect::new(body.x, body.y + top, body.width, body.height - top)
}

/// Whether the sites tree draws its narrow columns (and file names without directories).
pub fn sites_narrow(body: Rect) -> bool {
    body.width < 60
}
