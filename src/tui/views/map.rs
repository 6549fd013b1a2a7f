//! The Allocator map view of a snapshot: every segment at the cursor as a bar of its blocks,
//! and the selected block in full (its state, its category, its allocation stack). `←→` pick a
//! block, `↑↓` a segment, `Enter` opens the block's stack in the sites view, `a` goes to the
//! event that allocated it, `c` colours the blocks by category (classified on first use, then
//! at each cursor the view is shown at).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};

use crate::analysis::categories::{Category, Classifier};
use crate::analysis::replay::{LiveBlock, SegState};
use crate::model::{BlockState, FrameKind, Pool};
use crate::tui::action::{move_sel, Action, Ctx, Effect, View};
use crate::tui::component::Component;
use crate::tui::data::Jump;
use crate::tui::layout::{list_offset, map_list_area, MAP_LABEL_W};
use crate::tui::sites::{short, short_cpp};
use crate::tui::snapshot_mode::{parts, Cursor, Snap};
use crate::tui::widgets::{bold, dim, put, put_pieces, sel_style, Scroll, TextPane};
use crate::units::bytes;

#[allow(non_upper_case_globals)]
impl View {
    pub const Map: View = View::new("Allocator map");
}

/// The map's state: the selected segment and block (part), the colouring, the details pane's
/// scroll, and a copy of the device's block classifier.
#[derive(Default)]
pub struct Map {
    seg: usize,
    part: usize,
    /// Blocks coloured by category (parameters, activations, ...) instead of by state.
    by_category: bool,
    text: Scroll,
    /// The device whose classifier is copied, and the copy (made on first use).
    classifier: Option<(usize, Classifier)>,
    /// The selection when the action began: a new block shows its details from the top.
    before: (usize, usize),
}

impl Component<Snap> for Map {
    fn view(&self) -> View {
        View::Map
    }

    fn at_cursor(&self) -> bool {
        true
    }

    fn sync(&mut self, cap: &mut Snap, c: &Ctx) {
        if c.view == View::Map && self.by_category {
            self.classify(cap, c.dev);
        }
        self.seg = self.seg.min(cap.nseg().saturating_sub(1));
    }

    fn begin(&mut self) {
        self.before = (self.seg, self.part);
    }

    fn settle(&mut self) {
        if (self.seg, self.part) != self.before {
            self.text.reset()
        }
    }

    fn handle(&mut self, a: Action, cap: &mut Snap, c: &Ctx) -> Effect {
        if a == Action::Enter {
            // Drill into who allocated the selected block: its site in the sites view.
            return match self.selected_part_block(cap) {
                Some(b) => Effect::Jump(Jump::Stack(b.stack)),
                None => Effect::Message("a free range: nothing allocated it".into()),
            };
        }
        let nseg = cap.nseg();
        let nparts = cap.segment(self.seg).map(|s| parts(s).len()).unwrap_or(0);
        self.moves(a, nseg, nparts, c.page);
        Effect::None
    }

    /// `c` colours the blocks by category or by state; `a` goes to the event that allocated the
    /// selected block (from any view: the selection stays the map's).
    fn key(&mut self, a: Action, cap: &mut Snap, c: &Ctx) -> Option<Effect> {
        match a {
            Action::CategoryToggle => {
                self.by_category = !self.by_category;
                Some(if self.by_category && c.view != View::Map {
                    Effect::Message("c colours the allocator map by category (view 3)".into())
                } else {
                    Effect::None
                })
            }
            Action::AllocEvent => Some(
                match self.selected_part_block(cap).and_then(|b| b.alloc_event) {
                    Some(ev) => Effect::Event(ev.0 as usize, None),
                    None => {
                        Effect::Message("no allocating event in the log for this selection".into())
                    }
                },
            ),
            _ => None,
        }
    }

    fn click(&mut self, cap: &mut Snap, c: &Ctx, x: u16, y: u16) -> Effect {
        self.click_list(cap, map_list_area(c.body), x, y);
        Effect::None
    }

    fn text(&self) -> Option<&Scroll> {
        Some(&self.text)
    }

    fn draw(&self, cap: &Snap, c: &Ctx, area: Rect, buf: &mut Buffer) {
        let Some(cache) = &cap.cache else { return };
        summary(cap, cache, area, buf);
        self.legend(cap, cache, c.dev, area, buf);
        self.bars(cap, cache, area, buf);
        self.details(cap, cache, area, buf);
    }
}

impl Map {
    /// Whether blocks are coloured by category.
    pub fn by_category(&self) -> bool {
        self.by_category
    }

    /// The block selected in the selected segment (none on a free range).
    pub fn selected_part_block<'a>(&self, cap: &'a Snap) -> Option<&'a LiveBlock> {
        let seg = cap.segment(self.seg)?;
        parts(seg).get(self.part).and_then(|p| p.block)
    }

    /// The map's moves over `nseg` segments, the selected one of `nparts` parts: `←→` the
    /// part, `↑↓ PgUp PgDn g G` the segment (a new segment starts at its first part).
    fn moves(&mut self, a: Action, nseg: usize, nparts: usize, page: usize) {
        match a {
            Action::Left => self.part = self.part.saturating_sub(1),
            Action::Right => self.part = (self.part + 1).min(nparts.saturating_sub(1)),
            other => {
                let before = self.seg;
                self.seg = move_sel(self.seg, nseg, other, page);
                if before != self.seg {
                    self.part = 0;
                }
            }
        }
    }

    /// A click at (`x`, `y`) in the segment list drawn at `l`: the segment, and the part under
    /// the click within its bar.
    fn click_list(&mut self, cap: &Snap, l: Rect, x: u16, y: u16) {
        if y < l.y || y >= l.y + l.height {
            return;
        }
        let off = list_offset(self.seg, l.height as usize);
        let i = off + (y - l.y) as usize;
        if i >= cap.nseg() {
            return;
        }
        self.seg = i;
        self.part = 0;
        let bar_x = l.x + MAP_LABEL_W;
        let bar_w = l.width.saturating_sub(MAP_LABEL_W).max(1);
        if x >= bar_x {
            if let Some(seg) = cap.segment(self.seg) {
                let at = seg.address + (x - bar_x) as u64 * seg.size / bar_w as u64;
                self.part = parts(seg)
                    .iter()
                    .position(|p| at >= p.addr && at < p.addr + p.size)
                    .unwrap_or(0);
            }
        }
    }

    /// Classifies the blocks at the cursor of device `dev`, with a copy of the classifier the
    /// analysis judged the device's categories with (it memoizes as it goes).
    fn classify(&mut self, cap: &mut Snap, dev: usize) {
        let Snap { data, cache, .. } = cap;
        if self.classifier.as_ref().is_none_or(|c| c.0 != dev) {
            if let Some(p) = data.per_device.get(dev) {
                self.classifier = Some((dev, p.classifier.clone()));
            }
        }
        if let (Some(c), Some((_, cl)), Some(d)) =
            (cache, &mut self.classifier, data.snap.devices.get(dev))
        {
            if c.cats.is_none() {
                c.cats = Some(
                    c.state
                        .live_blocks()
                        .map(|b| (b.address, cl.classify(&data.snap, d, b)))
                        .collect(),
                );
            }
        }
    }

    /// Row 1: at an OOM, the failed request against the holes it could have used; else the
    /// colours' legend and the keys.
    fn legend(&self, cap: &Snap, cache: &Cursor, dev: usize, area: Rect, buf: &mut Buffer) {
        let oom = cap.data.per_device.get(dev).and_then(|p| {
            p.timeline
                .ooms
                .iter()
                .find(|o| Some(o.event.0 as usize) == cache.event)
        });
        if let Some(o) = oom {
            let fits = o.largest_free_block_bytes >= o.rounded_bytes;
            put(
                buf,
                area,
                1,
                &format!(
                    "OOM here: {} {}, largest hole {} ({} pool, stream {})",
                    bytes(o.rounded_bytes),
                    if fits {
                        "fits (see the diagnosis)"
                    } else {
                        "does not fit"
                    },
                    bytes(o.largest_free_block_bytes),
                    o.pool.name(),
                    cap.data.stream_label(dev, o.stream),
                ),
                Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
            );
            return;
        }
        let by_state = [
            ("█ allocated  ", Style::default().fg(Color::Green)),
            ("▓ pending free  ", Style::default().fg(Color::Yellow)),
            ("· free  ", dim()),
            (SEGMENT_LEGEND, dim()),
            (
                "←→ block ↑↓ segment Enter: site a: alloc event c: by category",
                dim(),
            ),
        ];
        let by_cat = [
            ("█ parameter ", cat_style(Category::Parameter)),
            ("█ optimizer ", cat_style(Category::OptimizerState)),
            ("█ gradient ", cat_style(Category::Gradient)),
            ("█ activation ", cat_style(Category::Activation)),
            ("█ KV cache ", cat_style(Category::KvCache)),
            ("█ output ", cat_style(Category::Output)),
            ("█ temporary ", cat_style(Category::Temporary)),
            ("█ pre-log ", cat_style(Category::BeforeRecording)),
            ("█ other ", cat_style(Category::Other)),
            ("· free  c: by state  ", dim()),
            (SEGMENT_LEGEND, dim()),
        ];
        let private = cache
            .state
            .segments
            .values()
            .any(|s| private_mark(s).is_some());
        let mut items: Vec<(&str, Style)> = if self.by_category {
            by_cat.to_vec()
        } else {
            by_state.to_vec()
        };
        if private {
            let at = items
                .iter()
                .position(|i| i.0 == SEGMENT_LEGEND)
                .unwrap_or(0);
            items.insert(at + 1, (POOL_LEGEND, dim()));
        }
        let items = &items[..];
        put_pieces(buf, area, 1, items);
    }

    /// The segments' rows: a label, then the segment as a bar of its parts.
    fn bars(&self, cap: &Snap, cache: &Cursor, area: Rect, buf: &mut Buffer) {
        let st = &cache.state;
        let list = map_list_area(area);
        let off = list_offset(self.seg, list.height as usize);
        let bar_w = list.width.saturating_sub(MAP_LABEL_W) as u64;
        for (row, (i, seg)) in st
            .segments
            .values()
            .enumerate()
            .skip(off)
            .take(list.height as usize)
            .enumerate()
        {
            let y = list.y + row as u16;
            let on = i == self.seg;
            let used = (seg.active_bytes * 100).checked_div(seg.size).unwrap_or(0);
            let label = format!(
                "{}{:>10} {}{} {:<3}{:>4}% ",
                if on { "›" } else { " " },
                bytes(seg.size),
                pool_letter(seg),
                private_mark(seg).unwrap_or(if seg.expandable { 'e' } else { ' ' }),
                cap.data.stream_label(cache.dev, seg.stream),
                used
            );
            buf.set_stringn(list.x, y, &label, MAP_LABEL_W as usize, sel_style(on));
            if bar_w == 0 || seg.size == 0 {
                continue;
            }
            self.bar(cache, seg, on, (list.x + MAP_LABEL_W, y), bar_w, buf);
        }
    }

    /// Segment `seg` as a bar of `bar_w` cells from `at`: each cell the part covering most of
    /// it, by state or by category, the selected part reversed.
    fn bar(
        &self,
        cache: &Cursor,
        seg: &SegState,
        on: bool,
        at: (u16, u16),
        bar_w: u64,
        buf: &mut Buffer,
    ) {
        let ps = parts(seg);
        let mut pi = 0;
        for cx in 0..bar_w {
            let a0 = seg.address + (cx as u128 * seg.size as u128 / bar_w as u128) as u64;
            let a1 = (seg.address + ((cx + 1) as u128 * seg.size as u128 / bar_w as u128) as u64)
                .max(a0 + 1);
            while pi + 1 < ps.len() && ps[pi].addr + ps[pi].size <= a0 {
                pi += 1;
            }
            // The part covering most of this cell.
            let mut best = (0u64, pi);
            let mut selected_here = false;
            let mut k = pi;
            while k < ps.len() && ps[k].addr < a1 {
                let ov = (ps[k].addr + ps[k].size)
                    .min(a1)
                    .saturating_sub(ps[k].addr.max(a0));
                if ov > best.0 {
                    best = (ov, k);
                }
                if on && k == self.part {
                    selected_here = true;
                }
                k += 1;
            }
            let block = ps.get(best.1).and_then(|p| p.block);
            let (ch, mut s) = self.cell(cache, block, best.1);
            if selected_here {
                s = s.add_modifier(Modifier::REVERSED);
            }
            if let Some(cell) = buf.cell_mut((at.0 + cx as u16, at.1)) {
                cell.set_char(ch).set_style(s);
            }
        }
    }

    /// The character and colour of a cell showing `block` (part `k` of its segment; `None`: a
    /// free range).
    fn cell(&self, cache: &Cursor, block: Option<&LiveBlock>, k: usize) -> (char, Style) {
        let cat = block
            .filter(|_| self.by_category)
            .and_then(|b| cache.cats.as_ref()?.get(&b.address));
        match block {
            Some(b) if cat.is_some() => (
                if b.state == BlockState::ActiveAllocated {
                    '█'
                } else {
                    '▓'
                },
                cat_style(cat.map(|c| c.0).unwrap_or(Category::Other)),
            ),
            Some(b) if b.state == BlockState::ActiveAllocated => (
                '█',
                Style::default().fg(if k.is_multiple_of(2) {
                    Color::Green
                } else {
                    Color::LightGreen
                }),
            ),
            Some(_) => ('▓', Style::default().fg(Color::Yellow)),
            None => ('·', dim()),
        }
    }

    /// Below the bars: the selected segment and the selected block in full.
    fn details(&self, cap: &Snap, cache: &Cursor, area: Rect, buf: &mut Buffer) {
        let list = map_list_area(area);
        let dy = list.y + list.height;
        let det = Rect::new(
            area.x,
            dy,
            area.width,
            (area.y + area.height).saturating_sub(dy),
        );
        if det.height == 0 {
            return;
        }
        let Some(seg) = cache.state.segments.values().nth(self.seg) else {
            put(buf, det, 0, "no segments at this point of the log", dim());
            return;
        };
        let mut lines: Vec<(String, Style)> = vec![(
            segment_line(seg, &cap.data.stream_label(cache.dev, seg.stream)),
            dim(),
        )];
        let ps = parts(seg);
        match ps.get(self.part) {
            Some(p) => match p.block {
                Some(b) => self.block_lines(cap, cache, seg, (self.part, ps.len()), b, &mut lines),
                None => lines.push((
                    format!(
                        "part {}/{} 0x{:x}: free range of {}",
                        self.part + 1,
                        ps.len(),
                        p.addr,
                        bytes(p.size)
                    ),
                    bold(),
                )),
            },
            None => lines.push(("empty segment".to_owned(), Style::default())),
        }
        TextPane {
            lines,
            scroll: &self.text,
        }
        .render(det, buf);
    }

    /// Block `b`, part `k.0` of `k.1` of segment `seg`: its figures, its category where the
    /// map is coloured by them, its allocation stack.
    fn block_lines(
        &self,
        cap: &Snap,
        cache: &Cursor,
        seg: &SegState,
        k: (usize, usize),
        b: &LiveBlock,
        lines: &mut Vec<(String, Style)>,
    ) {
        let state = match b.state {
            BlockState::ActiveAllocated => "allocated",
            BlockState::ActivePendingFree => "pending free",
            BlockState::Inactive => "free",
        };
        let at = b
            .alloc_event
            .map(|e| format!("event {}", e.0))
            .unwrap_or_else(|| {
                if cap.no_log() {
                    "(unknown: no allocation log)".into()
                } else {
                    "(before the log)".into()
                }
            });
        lines.push((
            format!(
                "block {}/{} 0x{:x}: {state}, size {}, requested {}, stream {}, pool {}, allocated at {at}",
                k.0 + 1,
                k.1,
                b.address,
                bytes(b.size),
                bytes(b.requested),
                cap.data.stream_label(cache.dev, b.stream),
                seg.pool.name(),
            ),
            bold(),
        ));
        if let Some((c, rule)) = cache
            .cats
            .as_ref()
            .filter(|_| self.by_category)
            .and_then(|m| m.get(&b.address))
        {
            lines.push((
                format!("  {}: {}", c.name(), crate::wording::category_rule(*rule)),
                cat_style(*c),
            ));
        }
        let stacks = &cap.data.snap.stacks;
        let frames = stacks.frames(b.stack);
        lines.push(("allocation stack (innermost first):".to_owned(), dim()));
        if frames.is_empty() {
            lines.push(("  (no stack recorded)".to_owned(), dim()));
        }
        stack_lines(stacks, frames, cap.unfold, lines);
    }
}

/// Row 0: where the state is taken, and its segments and totals.
fn summary(cap: &Snap, cache: &Cursor, area: Rect, buf: &mut Buffer) {
    let st = &cache.state;
    let c = &st.counters;
    let free_reserved = c.reserved.saturating_sub(c.active);
    let largest = st
        .segments
        .values()
        .map(|s| s.largest_free())
        .max()
        .unwrap_or(0);
    put(
        buf,
        area,
        0,
        &format!(
            "{}: {} segments, reserved {}, allocated {}, free {}, largest hole {}",
            cap.at_label(cache),
            st.segments.len(),
            bytes(c.reserved),
            bytes(c.allocated),
            bytes(free_reserved),
            bytes(largest)
        ),
        bold(),
    );
}

/// A segment's pool: `L`arge or `S`mall.
fn pool_letter(seg: &SegState) -> char {
    match seg.pool {
        Pool::Small => 'S',
        Pool::Large => 'L',
    }
}

/// A segment of a private pool: `g` a CUDA graph's own pool (`(n, 0)`), `p` a pool the
/// program or torch.compile made (`(0, n)`: a `MemPool`, or CUDA graph trees). It takes the
/// place of `e` in the label (the details line still says expandable).
fn private_mark(seg: &SegState) -> Option<char> {
    match seg.pool_id? {
        (0, 0) => None,
        (_, 0) => Some('g'),
        _ => Some('p'),
    }
}

/// The private pool a segment is in, for its details line.
fn private_pool_words(seg: &SegState) -> String {
    match (private_mark(seg), seg.pool_id) {
        (Some('g'), Some((a, b))) => format!(", CUDA graph pool ({a}, {b}): held by design"),
        (Some(_), Some((a, b))) => {
            format!(", private pool ({a}, {b}) (MemPool or CUDA graph trees): held by design")
        }
        _ => String::new(),
    }
}

/// A stream in the details: its short name, and its handle where it is not the default one.
fn stream_words(label: &str, handle: u64) -> String {
    if handle == 0 {
        format!("{label} (the default stream)")
    } else {
        format!("{label} (handle {handle})")
    }
}

/// The selected segment in one line.
fn segment_line(seg: &SegState, stream: &str) -> String {
    format!(
        "segment 0x{:x} ({}{} {}): {} {} pool, stream {}{}, {} blocks, largest hole {}{}",
        seg.address,
        pool_letter(seg),
        private_mark(seg)
            .map(String::from)
            .unwrap_or_else(|| if seg.expandable {
                "e".into()
            } else {
                String::new()
            }),
        stream,
        bytes(seg.size),
        seg.pool.name(),
        stream_words(stream, seg.stream),
        if seg.expandable { ", expandable" } else { "" },
        seg.blocks.len(),
        bytes(seg.largest_free()),
        private_pool_words(seg)
    )
}

/// A category's colour in the map.
fn cat_style(c: Category) -> Style {
    Style::default().fg(match c {
        Category::Parameter => Color::Blue,
        Category::OptimizerState => Color::Magenta,
        Category::Gradient => Color::Red,
        Category::Activation => Color::Green,
        Category::Temporary => Color::Yellow,
        Category::BeforeRecording => Color::Cyan,
        Category::KvCache => Color::LightMagenta,
        Category::Output => Color::LightGreen,
        Category::Other => Color::Gray,
    })
}

/// The segment labels (`L`/`S`, `e`, `s0`, `%`), on the legend row where it has room (the help
/// has them too, `?`).
const SEGMENT_LEGEND: &str = "L/S large/small pool, e expandable  ";

/// The private pools' marks, on the legend row where the map shows one.
const POOL_LEGEND: &str = "g CUDA graph pool, p private pool  ";

/// A block's stack, innermost first: the user's frames in full and in colour; library and native
/// frames by file name, C++ template arguments collapsed (`wrap_kernel_functor_unboxed_<…>::call(…)`),
/// and unless `unfold`, runs of two or more of them folded into one line (`f` shows them).
fn stack_lines(
    stacks: &crate::model::Stacks,
    frames: &[crate::model::FrameId],
    unfold: bool,
    lines: &mut Vec<(String, Style)>,
) {
    let mut i = 0;
    while i < frames.len() {
        let fr = stacks.frame(frames[i]);
        if fr.kind == FrameKind::User {
            lines.push((
                format!("  {}", crate::tui::sites::frame_label(stacks, fr)),
                bold().fg(Color::Cyan),
            ));
            i += 1;
            continue;
        }
        let run = frames[i..]
            .iter()
            .take_while(|&&f| stacks.frame(f).kind != FrameKind::User)
            .count();
        if run >= 2 && !unfold {
            lines.push((
                format!("  … {run} library and native frames (f shows them)"),
                dim(),
            ));
        } else {
            for &f in &frames[i..i + run] {
                let fr = stacks.frame(f);
                let name = short_cpp(stacks.str(fr.name));
                lines.push((
                    format!("  {}:{} {name}", short(stacks.str(fr.file)), fr.line),
                    dim(),
                ));
            }
        }
        i += run;
    }
}
