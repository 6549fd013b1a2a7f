//! A snapshot's allocator map, sites and leaks views.
//!
//! Each view is a [`Widget`] over its component ([`MapState`], [`SitesState`], [`ListText`]) and
//! the snapshot's [`Data`] (with the allocator state at the cursor where it shows it), never the
//! app, so it renders into any buffer (a terminal's, or a test's);
//! [`SnapshotMode::render_view`] draws the view shown.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::widgets::Widget;

use super::overview_summary::no_leaks_text;
use super::widgets::chart::step_bars;
use super::widgets::{put_pieces, wrap, TextPane};

use super::app::{list_offset, map_list_area, parts, App, View, MAP_LABEL_W};
use super::components::{ListText, MapState};
use super::data::Data;
use super::overview::OverviewView;
use super::sites::{short, short_cpp};
pub use super::sites_view::SitesView;
use super::sites_view::{at_label, no_log};
use super::snapshot_mode::{leak_items, Cursor, SnapshotMode};
use super::timeline::TimelineView;
use crate::analysis::categories::Category;
use crate::model::{BlockState, FrameKind, Pool};
use crate::units::bytes;

use super::widgets::{bold, dim, put, sel_style};

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

/// Every segment at the cursor as a bar of its blocks, and the selected block in full.
pub struct MapView<'a> {
    pub map: &'a MapState,
    pub data: &'a Data,
    /// The allocator state at the cursor.
    pub cache: &'a Cursor,
    pub dev: usize,
    /// Library and native frames of the block's stack shown (`f`), else folded into one line.
    pub unfold: bool,
}

impl Widget for MapView<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let (map, data, cache) = (self.map, self.data, self.cache);
        let st = &cache.state;
        let c = &st.counters;
        let free_reserved = c.reserved.saturating_sub(c.active);
        let largest = st
            .segments
            .values()
            .map(|s| s.largest_free())
            .max()
            .unwrap_or(0);
        let at = at_label(cache, data);
        put(
            buf,
            area,
            0,
            &format!(
                "{at}: {} segments, reserved {}, allocated {}, free {}, largest hole {}",
                st.segments.len(),
                bytes(c.reserved),
                bytes(c.allocated),
                bytes(free_reserved),
                bytes(largest)
            ),
            bold(),
        );
        // At an OOM: the failed request against the holes it could have used.
        let oom = data.timelines.get(self.dev).and_then(|tl| {
            tl.ooms
                .iter()
                .find(|o| Some(o.event.0 as usize) == cache.event)
        });
        match oom {
            Some(o) => {
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
                        o.stream,
                    ),
                    Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
                );
            }
            None => {
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
                let items: &[(&str, Style)] = if map.by_category { &by_cat } else { &by_state };
                put_pieces(buf, area, 1, items);
            }
        }
        let list = map_list_area(area);
        let off = list_offset(map.seg, list.height as usize);
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
            let on = i == map.seg;
            let used = (seg.active_bytes * 100).checked_div(seg.size).unwrap_or(0);
            let label = format!(
                "{}{:>10} {}{} s{:<2}{:>4}% ",
                if on { "›" } else { " " },
                bytes(seg.size),
                match seg.pool {
                    Pool::Small => 'S',
                    Pool::Large => 'L',
                },
                if seg.expandable { 'e' } else { ' ' },
                seg.stream,
                used
            );
            buf.set_stringn(list.x, y, &label, MAP_LABEL_W as usize, sel_style(on));
            if bar_w == 0 || seg.size == 0 {
                continue;
            }
            let ps = parts(seg);
            let mut pi = 0;
            for cx in 0..bar_w {
                let a0 = seg.address + (cx as u128 * seg.size as u128 / bar_w as u128) as u64;
                let a1 = (seg.address
                    + ((cx + 1) as u128 * seg.size as u128 / bar_w as u128) as u64)
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
                    if on && k == map.part {
                        selected_here = true;
                    }
                    k += 1;
                }
                let p = ps.get(best.1);
                let cat = p
                    .and_then(|p| p.block)
                    .filter(|_| map.by_category)
                    .and_then(|b| cache.cats.as_ref()?.get(&b.address));
                let (ch, mut s) = match p.and_then(|p| p.block) {
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
                        Style::default().fg(if best.1 % 2 == 0 {
                            Color::Green
                        } else {
                            Color::LightGreen
                        }),
                    ),
                    Some(_) => ('▓', Style::default().fg(Color::Yellow)),
                    None => ('·', dim()),
                };
                if selected_here {
                    s = s.add_modifier(Modifier::REVERSED);
                }
                if let Some(cell) = buf.cell_mut((list.x + MAP_LABEL_W + cx as u16, y)) {
                    cell.set_char(ch).set_style(s);
                }
            }
        }
        // Details of the selection.
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
        let Some(seg) = cache.state.segments.values().nth(map.seg) else {
            put(buf, det, 0, "no segments at this point of the log", dim());
            return;
        };
        let ps = parts(seg);
        let stacks = &data.snap.stacks;
        let mut lines: Vec<(String, Style)> = Vec::new();
        lines.push((
            format!(
                "segment 0x{:x} ({}{} s{}): {} {} pool, stream {}{}, {} blocks, largest hole {}",
                seg.address,
                match seg.pool {
                    Pool::Small => 'S',
                    Pool::Large => 'L',
                },
                if seg.expandable { "e" } else { "" },
                seg.stream,
                bytes(seg.size),
                seg.pool.name(),
                seg.stream,
                if seg.expandable { ", expandable" } else { "" },
                seg.blocks.len(),
                bytes(seg.largest_free())
            ),
            dim(),
        ));
        match ps.get(map.part) {
            Some(p) => match p.block {
                Some(b) => {
                    let state = match b.state {
                        BlockState::ActiveAllocated => "allocated",
                        BlockState::ActivePendingFree => "pending free",
                        BlockState::Inactive => "free",
                    };
                    lines.push((
                        format!(
                            "block {}/{} 0x{:x}: {state}, size {}, requested {}, stream {}, pool {}, allocated at {}",
                            map.part + 1,
                            ps.len(),
                            b.address,
                            bytes(b.size),
                            bytes(b.requested),
                            b.stream,
                            seg.pool.name(),
                            b.alloc_event.map(|e| format!("event {}", e.0)).unwrap_or_else(|| if no_log(data) { "(unknown: no allocation log)".into() } else { "(before the log)".into() })
                        ),
                        bold(),
                    ));
                    if let Some((c, rule)) = cache
                        .cats
                        .as_ref()
                        .filter(|_| map.by_category)
                        .and_then(|m| m.get(&b.address))
                    {
                        lines.push((format!("  {}: {rule}", c.name()), cat_style(*c)));
                    }
                    let frames = stacks.frames(b.stack);
                    lines.push(("allocation stack (innermost first):".to_owned(), dim()));
                    if frames.is_empty() {
                        lines.push(("  (no stack recorded)".to_owned(), dim()));
                    }
                    stack_lines(stacks, frames, self.unfold, &mut lines);
                }
                None => lines.push((
                    format!(
                        "part {}/{} 0x{:x}: free range of {}",
                        map.part + 1,
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
            scroll: &map.text,
        }
        .render(det, buf);
    }
}

/// Leak findings and growth.
pub struct LeaksView<'a>(pub &'a ListText, pub &'a Data);

impl Widget for LeaksView<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let (list, data) = (self.0, self.1);
        put(
            buf,
            area,
            0,
            "LEAKS AND GROWTH (Enter: jump to the evidence on the timeline)",
            bold(),
        );
        // No finding: judged clean, or why leaks could not be judged, wrapped.
        let mut y0 = 1;
        if data.analysis.leaks.is_empty() {
            let (text, judged) = no_leaks_text(
                &data.analysis.verdict.leak_judgement,
                "no site's survivors grow from step to step",
            );
            let st = if judged {
                Style::default().fg(Color::Green)
            } else {
                Style::default().fg(Color::Yellow)
            };
            for l in wrap(&text, area.width.saturating_sub(1) as usize) {
                put(buf, area, y0, &l, st);
                y0 += 1;
            }
        }
        let items = leak_items(data);
        let list_h = (items.len() as u16)
            .min(area.height.saturating_sub(2) / 2)
            .max(1);
        let off = list_offset(list.sel(), list_h as usize);
        for (k, (label, _)) in items.iter().enumerate().skip(off).take(list_h as usize) {
            let on = k == list.sel();
            put(
                buf,
                area,
                y0 + (k - off) as u16,
                &format!("{} {label}", if on { "›" } else { " " }),
                sel_style(on),
            );
        }
        // The selected leak in full: why it is one, how to fix it, where it is allocated.
        let Some(l) = data.analysis.leaks.get(list.sel()) else {
            return;
        };
        let mut dy = y0 + list_h + 1;
        if dy >= area.height {
            return;
        }
        if let Some((names, series)) = data.leak_series.get(list.sel()) {
            let rest = area.height - dy;
            if series.len() >= 2 && rest >= 10 {
                let chart_h = (rest / 3).clamp(4, 8);
                step_bars(
                    buf,
                    Rect::new(area.x, area.y + dy, area.width, chart_h),
                    "bytes live from these sites at the end of each step (allocations in the log)",
                    series,
                    &bytes,
                    (
                        names.first().map(|s| s.as_str()).unwrap_or(""),
                        names.last().map(|s| s.as_str()).unwrap_or(""),
                    ),
                );
                dy += chart_h;
            }
        }
        let mut lines = vec![
            (
                format!(
                    "growth from {} to {} (events {}..{}), r² {:.2}",
                    l.leak.first_step,
                    l.leak.last_step,
                    l.leak.window_start_event.0,
                    l.leak.window_end_event.0,
                    l.leak.r2
                ),
                dim(),
            ),
            (crate::wording::leak_explanation(&l.leak), Style::default()),
            (
                format!("fix: {}", crate::wording::leak_fix(&l.leak)),
                Style::default().fg(Color::Green),
            ),
        ];
        if let Some(c) = &l.leak.cause_site {
            lines.push((format!("kept alive by {c} (the keeper's line)"), bold()));
        }
        if !l.leak.stack.is_empty() {
            lines.push((
                "allocation stack (where the leaked memory is allocated, innermost first):".into(),
                dim(),
            ));
        }
        for f in &l.leak.stack {
            lines.push((format!("  {f}"), dim()));
        }
        TextPane {
            lines,
            scroll: list.text(),
        }
        .render(
            Rect::new(area.x, area.y + dy, area.width, area.height - dy),
            buf,
        );
    }
}

impl SnapshotMode {
    /// Draws the view shown: the snapshot's own, or the overview and the timeline over it.
    pub fn render_view(&self, app: &App, area: Rect, buf: &mut Buffer) {
        match app.view() {
            View::Overview => OverviewView(&self.overview, &self.data).render(area, buf),
            View::Timeline => TimelineView(&self.data, app.timeline_at()).render(area, buf),
            View::Map | View::Sites => {
                let Some(cache) = &self.cache else { return };
                if app.view() == View::Map {
                    MapView {
                        map: &self.map,
                        data: &self.data,
                        cache,
                        dev: app.dev(),
                        unfold: self.sites.unfold,
                    }
                    .render(area, buf)
                } else {
                    SitesView {
                        sites: &self.sites,
                        data: &self.data,
                        cache,
                    }
                    .render(area, buf)
                }
            }
            View::Leaks => LeaksView(&self.leaks, &self.data).render(area, buf),
            View::Steps | View::Graph => {}
        }
    }
}

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
                format!("  {}", stacks.frame_label(fr)),
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
