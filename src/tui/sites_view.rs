//! A snapshot's Sites view: live bytes by site, then by stack and frame, at the cursor, under
//! column headers. Its own file because narrow terminals change its columns: below 60 columns
//! a path loses its directories, below 50 the blocks column goes, so that at 40x12 a row still
//! reads `128.1 MiB  ▸ generate.py:232 clean_loop`.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::widgets::Widget;

use super::components::SitesState;
use super::data::Data;
use super::layout::{list_offset, sites_list_area, sites_narrow};
use super::sites::{short, Row, SiteNode, SortBy};
use super::snapshot_mode::Cursor;
use super::widgets::{bold, dim, put, sel_style};
use crate::model::{FrameKind, Stacks};
use crate::units::bytes;

/// Live bytes by site and stack at the cursor.
pub struct SitesView<'a> {
    pub sites: &'a SitesState,
    pub data: &'a Data,
    /// The allocator state at the cursor, with its sites tree.
    pub cache: &'a Cursor,
}

/// The columns the width allows.
#[derive(Clone, Copy)]
struct Cols {
    /// Below 60 columns: narrower numbers, paths without directories.
    narrow: bool,
    /// Below 50 columns: no blocks column.
    tiny: bool,
}

impl Cols {
    fn of(area: Rect) -> Cols {
        Cols {
            narrow: sites_narrow(area),
            tiny: area.width < 50,
        }
    }

    /// Column widths: bytes, blocks, and the frames' indent.
    fn widths(self) -> (usize, usize, usize) {
        if self.narrow {
            (9, 6, 4)
        } else {
            (10, 7, 18)
        }
    }

    /// The header row: what the two numbers are.
    fn header(self) -> String {
        if self.tiny {
            format!("{:>9}  site (Enter opens)", "bytes")
        } else if self.narrow {
            format!("{:>9} {:>6}  site (Enter: its stacks)", "bytes", "blocks")
        } else {
            format!(
                "{:>10} {:>7}  site, then its stacks and frames (Enter opens)",
                "bytes", "blocks"
            )
        }
    }

    /// `bytes blocks` (or `bytes` alone when tiny), right-aligned.
    fn numbers(self, b: u64, n: u64) -> String {
        let (bw, cw, _) = self.widths();
        if self.tiny {
            format!("{:>bw$}", bytes(b))
        } else {
            format!("{:>bw$} {n:>cw$}", bytes(b))
        }
    }

    fn label(self, l: &str) -> String {
        if self.narrow {
            short_path(l)
        } else {
            l.to_owned()
        }
    }
}

impl Widget for SitesView<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let (sites, data, cache) = (self.sites, self.data, self.cache);
        let tree = cache.tree.as_ref().map_or(&[][..], |t| t.1.as_slice());
        let cols = Cols::of(area);
        put(buf, area, 0, &self.title(tree, area.width), bold());
        put(buf, area, 1, &cols.header(), dim());
        let list = sites_list_area(area);
        let rows = sites.rows(tree, &data.snap.stacks);
        let h = list.height as usize;
        let off = list_offset(sites.sel, h);
        for (k, r) in rows.iter().enumerate().skip(off).take(h) {
            let on = k == sites.sel;
            let (text, st) = row_text(sites, tree, &data.snap.stacks, r, cols);
            put(buf, list, (k - off) as u16, &text, st.patch(sel_style(on)));
        }
        if rows.is_empty() {
            put(
                buf,
                list,
                0,
                "  nothing allocated at this point of the log",
                dim(),
            );
        }
    }
}

impl SitesView<'_> {
    /// `after event N: 1.4 GiB in 235 blocks, 6 sites │ s: sort by bytes │ f: ...`, as much of
    /// it as fits in `w` columns.
    fn title(&self, tree: &[SiteNode], w: u16) -> String {
        let (sites, cache) = (self.sites, self.cache);
        let total: u64 = tree.iter().map(|s| s.bytes).sum();
        let blocks: u64 = tree.iter().map(|s| s.count).sum();
        let at = at_label(cache, self.data);
        let hint = format!(
            "s: sort by {} │ f: library frames {}",
            match sites.sort {
                SortBy::Bytes => "bytes",
                SortBy::Count => "count",
            },
            if sites.unfold { "shown" } else { "folded" }
        );
        let summary = format!(
            "{at}: {} in {blocks} blocks, {} sites",
            bytes(total),
            tree.len()
        );
        let wide = format!("{summary} │ {hint}");
        if wide.chars().count() < w as usize {
            wide
        } else if summary.chars().count() < w as usize {
            summary
        } else {
            let at = cache.event.map(|e| format!("event {e}")).unwrap_or(at);
            format!("{at}: {} in {blocks} blocks", bytes(total))
        }
    }
}

/// One row of the tree: a site, one of its stacks, a frame, or folded library frames.
fn row_text(
    sites: &SitesState,
    tree: &[SiteNode],
    stacks: &Stacks,
    r: &Row,
    cols: Cols,
) -> (String, Style) {
    let (_, _, indent) = cols.widths();
    let mark = |open: bool| if open { '▾' } else { '▸' };
    match *r {
        Row::Site(i) => {
            let s = &tree[i];
            let open = mark(sites.open_sites.contains(&s.label));
            let st = if s.user { bold() } else { Style::default() };
            let nums = cols.numbers(s.bytes, s.count);
            (format!("{nums}  {open} {}", cols.label(&s.label)), st)
        }
        Row::Stack(i, j) => {
            let n = &tree[i].stacks[j];
            let open = mark(sites.open_stacks.contains(&n.stack));
            let nums = cols.numbers(n.bytes, n.count);
            (
                format!("{nums}    {open} {}", cols.label(&n.label)),
                Style::default(),
            )
        }
        Row::Frame(i, j, f) => {
            let fid = stacks.frames(tree[i].stacks[j].stack)[f];
            let fr = stacks.frame(fid);
            let st = if fr.kind == FrameKind::User {
                Style::default().fg(Color::Cyan)
            } else {
                dim()
            };
            (
                format!(
                    "{:>indent$}      {}:{} {}",
                    "",
                    short(stacks.str(fr.file)),
                    fr.line,
                    stacks.str(fr.name)
                ),
                st,
            )
        }
        Row::Folded(_, _, _, n) => (
            format!(
                "{:>indent$}      … {n} library frames (f or Enter shows them)",
                ""
            ),
            dim(),
        ),
    }
}

/// `dir/file.py:12 fn` as `file.py:12 fn`: the first word's directories dropped, for narrow
/// screens.
fn short_path(label: &str) -> String {
    match label.split_once(' ') {
        Some((first, rest)) => format!("{} {rest}", short(first)),
        None => short(label).to_owned(),
    }
}

/// Whether the snapshot holds no allocation log at all (only the state at the dump).
pub(crate) fn no_log(data: &Data) -> bool {
    data.snap.devices.iter().all(|d| d.events.is_empty())
}

/// Where the state shown is taken: after an event, before the log's first one, or at the dump
/// of a capture that has no log (which has no "before").
pub(crate) fn at_label(cache: &Cursor, data: &Data) -> String {
    match cache.event {
        Some(e) => format!("after event {e}"),
        None if no_log(data) => "at the dump (no allocation log)".to_owned(),
        None => "before the log".to_owned(),
    }
}
