//! The Ranks view's table at the screen's width (issue 42, item 3): the ten columns of
//! [`crate::job::table`] do not fit 80 columns beside the peak bar, and cutting the line at the
//! screen's edge lost the OOMs, leaks and verdict columns, the ones that say which rank to open.
//! Here the columns give way by a declared priority instead: the most telling are kept first,
//! each only where it fits whole, except the file name, which is cut (with `…`) to the room
//! left. The kept columns stay in the table's own order; cells and headings are the table's.

use crate::job::table::{rank_cells, HEADINGS};
use crate::job::Job;

/// Column indices (into [`HEADINGS`]) from the one kept longest to the one that gives way
/// first: rank, peak allocated, OOMs, leaks, verdict, live at end, file, peak reserved,
/// reserved at end, from. Only the file name is ever cut (to no fewer than [`MIN_FILE`]
/// characters); a figure is shown whole or not at all.
pub const PRIORITY: [usize; 10] = [0, 1, 5, 6, 7, 3, 9, 2, 4, 8];

const FILE: usize = 9;
const GAP: usize = 2;
/// The narrowest cut of a file name worth showing.
const MIN_FILE: usize = 8;

/// The rank table's heading and rows, each at most `width` characters.
pub fn lines(job: &Job, width: usize) -> Vec<String> {
    let rows: Vec<[String; 10]> = job.ranks.iter().map(rank_cells).collect();
    let mut w = HEADINGS.map(|h| h.chars().count());
    for row in &rows {
        for (w, c) in w.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut keep = [false; 10];
    let mut used = 0usize;
    for &i in &PRIORITY {
        let gap = if used == 0 { 0 } else { GAP };
        let room = width.saturating_sub(used + gap);
        if w[i] <= room {
            keep[i] = true;
            used += gap + w[i];
        } else if i == FILE && room >= MIN_FILE {
            // The file name is cut to the room left; the columns after it give way.
            keep[i] = true;
            w[i] = room;
            used = width;
        }
    }
    let line = |cells: [&str; 10]| -> String {
        let mut parts = Vec::new();
        for i in (0..10).filter(|&i| keep[i]) {
            parts.push(cell(cells[i], w[i], i >= 7, i == FILE));
        }
        parts.join(&" ".repeat(GAP)).trim_end().to_owned()
    };
    let mut out = vec![line(HEADINGS)];
    for row in &rows {
        out.push(line(std::array::from_fn(|i| row[i].as_str())));
    }
    out
}

/// One cell padded to `width`: left-aligned for the words (verdict, from, file), right for the
/// figures; cut with `…` where longer: a file name keeps its end (the rank is in the file's
/// name, not in its directories).
fn cell(c: &str, width: usize, left: bool, keep_end: bool) -> String {
    let n = c.chars().count();
    if n > width && keep_end {
        let tail: String = c.chars().skip(n + 1 - width.max(1)).collect();
        return format!("…{tail}");
    }
    if n > width {
        let mut s: String = c.chars().take(width.saturating_sub(1)).collect();
        s.push('…');
        return s;
    }
    let pad = " ".repeat(width - n);
    if left {
        format!("{c}{pad}")
    } else {
        format!("{pad}{c}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_names_every_column_once() {
        let mut seen = PRIORITY.to_vec();
        seen.sort();
        assert_eq!(seen, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn a_cell_is_cut_or_padded_to_its_width() {
        assert_eq!(cell("abcdef", 4, true, false), "abc…");
        assert_eq!(cell("/a/b/rank-2.pickle", 10, true, true), "…-2.pickle");
        assert_eq!(cell("ab", 4, true, false), "ab  ");
        assert_eq!(cell("ab", 4, false, false), "  ab");
    }
}
