//! The Sites view of a snapshot: live bytes by site, then by stack and frame, at the cursor,
//! under column headers. `Enter` opens a site (its stacks) and a stack (its frames), `s` sorts
//! by bytes or by count, `f` shows the library frames folded into one line. Narrow terminals
//! change its columns: below 60 columns a path loses its directories, below 50 the blocks
//! column goes, so that at 40x12 a row still reads `128.1 MiB  ▸ generate.py:232 clean_loop`.

use std::collections::HashSet;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};

use crate::model::{FrameKind, StackId, Stacks};
use crate::tui::action::{cycle, found, move_sel, Action, Ctx, Effect, View};
use crate::tui::component::Component;
use crate::tui::data::Jump;
use crate::tui::layout::{list_offset, sites_list_area, sites_narrow};
use crate::tui::sites::{self, short, Row, SiteNode, SortBy};
use crate::tui::snapshot_mode::{Cursor, Snap};
use crate::tui::widgets::{bold, dim, put, sel_style};
use crate::units::bytes;

#[allow(non_upper_case_globals)]
impl View {
    pub const Sites: View = View::new("Sites");
}

/// The sites tree's state: the selected row, the order, and the sites and stacks that are open
/// (whether library frames are shown is the snapshot's: the map's block stack shares it).
#[derive(Debug)]
pub struct Sites {
    sel: usize,
    sort: SortBy,
    open_sites: HashSet<String>,
    open_stacks: HashSet<StackId>,
}

impl Default for Sites {
    fn default() -> Sites {
        Sites {
            sel: 0,
            sort: SortBy::Bytes,
            open_sites: HashSet::new(),
            open_stacks: HashSet::new(),
        }
    }
}

impl Component<Snap> for Sites {
    fn view(&self) -> View {
        View::Sites
    }

    fn at_cursor(&self) -> bool {
        true
    }

    /// Builds the tree at the cursor while the view is shown (in its order), and keeps the
    /// selection inside its rows.
    fn sync(&mut self, cap: &mut Snap, c: &Ctx) {
        let Snap { data, cache, .. } = cap;
        if let Some(cur) = cache {
            if c.view == View::Sites && cur.tree.as_ref().is_none_or(|t| t.0 != self.sort) {
                cur.tree = Some((
                    self.sort,
                    sites::build(&data.snap.stacks, &cur.state, self.sort),
                ));
            }
        }
        let nrows = self.rows(cap).len();
        self.sel = self.sel.min(nrows.saturating_sub(1));
    }

    fn handle(&mut self, a: Action, cap: &mut Snap, c: &Ctx) -> Effect {
        let rows = self.rows(cap);
        if self.keys(a, cap.tree(), &rows, c.page) {
            cap.unfold = true;
        }
        Effect::None
    }

    /// `s` sorts the tree by bytes or by count; `f` shows or folds library frames.
    fn key(&mut self, a: Action, cap: &mut Snap, _c: &Ctx) -> Option<Effect> {
        match a {
            Action::SortToggle => {
                self.sort = match self.sort {
                    SortBy::Bytes => SortBy::Count,
                    SortBy::Count => SortBy::Bytes,
                }
            }
            Action::FoldToggle => cap.unfold = !cap.unfold,
            _ => return None,
        }
        Some(Effect::None)
    }

    fn click(&mut self, cap: &mut Snap, c: &Ctx, _x: u16, y: u16) -> Effect {
        let nrows = self.rows(cap).len();
        let l = sites_list_area(c.body);
        let (list_y, h) = (l.y, l.height as usize);
        if y >= list_y {
            let off = list_offset(self.sel, h);
            let i = off + (y - list_y) as usize;
            if i < nrows {
                self.sel = i;
            }
        }
        Effect::None
    }

    /// The next site whose label, or one of whose stacks' frames, matches: opened.
    fn search(&mut self, cap: &mut Snap, c: &Ctx, query: &str, forward: bool) -> Option<Effect> {
        self.sync(cap, c);
        cap.set_query(query);
        let q = super::Query::new(query);
        let tree = cap.tree();
        let cur_site = match self.rows(cap).get(self.sel) {
            Some(
                Row::Site(i) | Row::Stack(i, _) | Row::Frame(i, _, _) | Row::Folded(i, _, _, _),
            ) => *i,
            None => 0,
        };
        let f = cycle(cur_site, tree.len(), forward, |i| {
            let s = &tree[i];
            q.matches(&s.label) || s.stacks.iter().any(|k| cap.stack_matches(k.stack))
        });
        if let Some(i) = f {
            self.open_site(cap, i);
        }
        Some(found(query, f.is_some()))
    }

    fn shows(&self, j: &Jump) -> bool {
        matches!(j, Jump::Site { .. } | Jump::Stack(_))
    }

    /// A site (a finding's): opened; a stack (the map's block): its site opened and its row
    /// selected.
    fn show(&mut self, j: &Jump, cap: &mut Snap, _c: &Ctx) -> Option<String> {
        match j {
            Jump::Site { label, .. } => {
                if let Some(i) = cap.tree().iter().position(|s| &s.label == label) {
                    self.open_site(cap, i);
                }
            }
            Jump::Stack(stack) => self.show_stack(cap, *stack),
            _ => {}
        }
        None
    }

    fn draw(&self, cap: &Snap, _c: &Ctx, area: Rect, buf: &mut Buffer) {
        let Some(cache) = &cap.cache else { return };
        let stacks = &cap.data.snap.stacks;
        let tree = cache.tree.as_ref().map_or(&[][..], |t| t.1.as_slice());
        let cols = Cols::of(area);
        put(
            buf,
            area,
            0,
            &self.title(cap, cache, tree, area.width),
            bold(),
        );
        put(buf, area, 1, &cols.header(), dim());
        let list = sites_list_area(area);
        let rows = self.rows(cap);
        let h = list.height as usize;
        let off = list_offset(self.sel, h);
        for (k, r) in rows.iter().enumerate().skip(off).take(h) {
            let on = k == self.sel;
            let (text, st) = row_text(self, tree, stacks, r, cols);
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

impl Sites {
    /// The rows of the tree at the cursor as this state opens it.
    fn rows(&self, cap: &Snap) -> Vec<Row> {
        sites::rows(
            cap.tree(),
            &cap.data.snap.stacks,
            &self.open_sites,
            &self.open_stacks,
            cap.unfold,
        )
    }

    /// Opens site `i` of the tree and selects its row.
    fn open_site(&mut self, cap: &Snap, i: usize) {
        let Some(s) = cap.tree().get(i) else {
            return;
        };
        self.open_sites.insert(s.label.clone());
        self.sel = self
            .rows(cap)
            .iter()
            .position(|r| *r == Row::Site(i))
            .unwrap_or(0);
    }

    /// The site that allocated a block at `stack` opened, and the stack's row selected.
    fn show_stack(&mut self, cap: &Snap, stack: StackId) {
        let tree = cap.tree();
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
                .rows(cap)
                .iter()
                .position(|r| *r == Row::Stack(i, ki))
                .unwrap_or(0);
        }
    }

    /// The keys of the sites tree, whose nodes are `tree` and rows `rows`: whether they ask
    /// for the library frames to be shown (`Enter` on folded frames).
    fn keys(&mut self, a: Action, tree: &[SiteNode], rows: &[Row], page: usize) -> bool {
        let Some(row) = rows.get(self.sel).cloned() else {
            return false;
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
                Row::Folded(..) => return true,
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
        false
    }

    /// `after event N: 1.4 GiB in 235 blocks, 6 sites │ s: sort by bytes │ f: ...`, as much of
    /// it as fits in `w` columns.
    fn title(&self, cap: &Snap, cache: &Cursor, tree: &[SiteNode], w: u16) -> String {
        let total: u64 = tree.iter().map(|s| s.bytes).sum();
        let blocks: u64 = tree.iter().map(|s| s.count).sum();
        let at = cap.at_label(cache);
        let hint = format!(
            "s: sort by {} │ f: library frames {}",
            match self.sort {
                SortBy::Bytes => "bytes",
                SortBy::Count => "count",
            },
            if cap.unfold { "shown" } else { "folded" }
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

/// One row of the tree: a site, one of its stacks, a frame, or folded library frames.
fn row_text(
    sites: &Sites,
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
