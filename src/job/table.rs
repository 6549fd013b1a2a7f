//! The job's rank table as cells and aligned lines, for the text report, the HTML page and the
//! TUI alike (here, beside the [`Job`] they lay out, so the TUI needs no `report`); the words
//! of its cells are [`crate::wording::job`]'s.

use super::{Job, RankFigures};
use crate::units::bytes;
use crate::wording::job as words;

/// How many site changes the text and the page list.
pub const SITE_ROWS: usize = 10;

/// The table's rows as cells, for the text and the TUI: rank, peak allocated, peak reserved,
/// live at the end, reserved at the end, OOMs, leaks, verdict, rank from, file.
pub fn rank_cells(r: &RankFigures) -> [String; 10] {
    [
        r.rank.to_string(),
        words::peak_cell(r.peak_exact, r.peak_allocated_bytes),
        words::peak_cell(r.peak_exact, r.peak_reserved_bytes),
        bytes(r.end_allocated_bytes),
        bytes(r.end_reserved_bytes),
        r.ooms.to_string(),
        words::leak_cell(r.leaks),
        r.verdict.id().to_owned(),
        words::rank_from_cell(r.rank_from).to_owned(),
        r.path.clone(),
    ]
}

/// The table's headings, in [`rank_cells`]' order.
pub const HEADINGS: [&str; 10] = [
    "rank",
    "peak alloc",
    "peak reserved",
    "live at end",
    "reserved at end",
    "OOMs",
    "leaks",
    "verdict",
    "from",
    "file",
];

/// The rank table as aligned text lines (numbers right-aligned, the last two columns left).
pub fn table_lines(job: &Job) -> Vec<String> {
    let rows: Vec<[String; 10]> = job.ranks.iter().map(rank_cells).collect();
    let mut width = HEADINGS.map(str::len);
    for row in &rows {
        for (w, c) in width.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: [&str; 10]| -> String {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            let pad = width[i].saturating_sub(c.chars().count());
            if i >= 7 {
                s.push_str(c);
                if i < 9 {
                    s.push_str(&" ".repeat(pad));
                }
            } else {
                s.push_str(&" ".repeat(pad));
                s.push_str(c);
            }
            if i < 9 {
                s.push_str("  ");
            }
        }
        s.trim_end().to_owned()
    };
    let mut out = vec![line(HEADINGS)];
    for row in &rows {
        out.push(line(std::array::from_fn(|i| row[i].as_str())));
    }
    out
}
