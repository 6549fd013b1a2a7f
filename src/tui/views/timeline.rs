//! The Timeline view: the capture's memory over its events, on the shared [`Chart`], at the
//! app's cursor and window (the timeline's state is the app's: the map, the sites and the
//! status line follow the same cursor). One component for both kinds of capture: the moves
//! are the same, `Enter` and the drawing are each kind's (a snapshot's allocator map at the
//! cursor; a trace's step around it).
//!
//! A capture can hold a million events and a terminal has a hundred columns, so each column
//! shows the minimum and maximum of its bucket of events: one pass over the visible window per
//! frame, and a one-event spike (the peak, an OOM's transient) is never averaged away.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::widgets::Widget;

use crate::model::Action as EvAction;
use crate::tui::action::{find_event, next_marker, Action, Ctx, Effect, View};
use crate::tui::capture::Capture;
use crate::tui::component::Component;
use crate::tui::data::{Data, Jump};
use crate::tui::layout::{chart_area, Window};
use crate::tui::sites::short;
use crate::tui::snapshot_mode::Snap;
use crate::tui::trace::TraceData;
pub use crate::tui::widgets::chart::{
    column_of, column_of_bucket, downsample, downsample_buckets, event_at_column, tick_label,
    tick_step, time_buckets, Chart,
};
use crate::tui::widgets::{put, wrap};
use crate::units::bytes;

/// The timeline: no state of its own (the cursor and the window are the app's).
#[derive(Default)]
pub struct Timeline;

/// The timeline's moves over capture `cap`: the cursor by a column, an event, a quarter of the
/// window, to an end or to a marker; the window zoomed about the cursor. `None`: not a move.
fn navigate<C: Capture>(cap: &C, a: Action, c: &Ctx) -> Option<Effect> {
    let n = cap.events(c.dev);
    let cur = c.cursor.unwrap_or(0);
    let w = c.window;
    let span = (w.hi - w.lo).max(1);
    let col = span
        .div_ceil(chart_area(c.body).width.max(1) as usize)
        .max(1);
    Some(match a {
        Action::Left => Effect::Move(cur.saturating_sub(col)),
        Action::Right => Effect::Move(cur + col),
        Action::FineLeft => Effect::Move(cur.saturating_sub(1)),
        Action::FineRight => Effect::Move(cur + 1),
        Action::PageUp => Effect::Move(cur.saturating_sub(span / 4 + 1)),
        Action::PageDown => Effect::Move(cur + span / 4 + 1),
        Action::Top => Effect::Move(0),
        Action::Bottom => Effect::Move(n - 1),
        Action::Down => next_marker(cap.markers(c.dev), c.cursor, true),
        Action::Up => next_marker(cap.markers(c.dev), c.cursor, false),
        Action::ZoomIn | Action::ZoomOut => {
            let new_span = if a == Action::ZoomIn {
                (span / 2).max(16.min(n))
            } else {
                (span * 2).min(n)
            };
            // Keep the cursor at the same relative position on screen.
            let rel = (cur.saturating_sub(w.lo)) as u128 * new_span as u128 / span as u128;
            let lo = cur.saturating_sub(rel as usize).min(n - new_span);
            Effect::Window(Window {
                lo,
                hi: lo + new_span,
            })
        }
        _ => return None,
    })
}

/// A click on the chart: the cursor to the event under it.
fn click_chart<C: Capture>(cap: &C, c: &Ctx, x: u16, y: u16) -> Effect {
    let b = c.body;
    let ch = chart_area(b);
    if x >= ch.x && x < ch.x + ch.width && y >= ch.y && y < b.y + b.height {
        let w = c.window;
        let times = if c.by_time { cap.times(c.dev) } else { None };
        let ev = event_at_column(
            times,
            w.lo,
            w.hi,
            ch.width.max(1) as usize,
            (x - ch.x) as usize,
        );
        return Effect::Move(ev);
    }
    Effect::None
}

/// A snapshot's timeline: `Enter` shows the allocator map at the cursor; `n`/`N` find the next
/// allocation from a stack with a matching frame.
impl Component<Snap> for Timeline {
    fn view(&self) -> View {
        View::Timeline
    }

    fn at_cursor(&self) -> bool {
        true
    }

    fn handle(&mut self, a: Action, cap: &mut Snap, c: &Ctx) -> Effect {
        if cap.events(c.dev) == 0 {
            return Effect::None;
        }
        match a {
            // The allocator map at the cursor.
            Action::Enter => Effect::Show(View::Map),
            _ => navigate(cap, a, c).unwrap_or(Effect::None),
        }
    }

    fn click(&mut self, cap: &mut Snap, c: &Ctx, x: u16, y: u16) -> Effect {
        click_chart(cap, c, x, y)
    }

    fn search(&mut self, cap: &mut Snap, c: &Ctx, query: &str, forward: bool) -> Option<Effect> {
        cap.set_query(query);
        let Some(dev) = cap.data.snap.devices.get(c.dev) else {
            return Some(Effect::None);
        };
        let n = dev.events.len();
        let cur = c.cursor.unwrap_or(0);
        let hit = |i: usize| {
            let e = &dev.events[i];
            matches!(e.action, EvAction::Alloc | EvAction::Oom) && cap.stack_matches(e.stack)
        };
        Some(find_event(query, cur, n, forward, "allocation", hit))
    }

    fn draw(&self, cap: &Snap, c: &Ctx, area: Rect, buf: &mut Buffer) {
        snapshot_timeline(&cap.data, c, area, buf)
    }
}

/// A trace's timeline: `Enter` opens the ops of the step around the cursor; `a` goes from an
/// allocation to its free and back; `n`/`N` find the next event whose op or user frame matches.
impl Component<TraceData> for Timeline {
    fn view(&self) -> View {
        View::Timeline
    }

    fn at_cursor(&self) -> bool {
        true
    }

    fn handle(&mut self, a: Action, t: &mut TraceData, c: &Ctx) -> Effect {
        if t.events(c.dev) == 0 {
            return Effect::None;
        }
        match a {
            Action::Enter => open_step_at_cursor(t, c),
            _ => navigate(t, a, c).unwrap_or(Effect::None),
        }
    }

    /// `a` while the timeline is shown: from the allocation at the cursor to its free, or back.
    fn key(&mut self, a: Action, t: &mut TraceData, c: &Ctx) -> Option<Effect> {
        (a == Action::AllocEvent && c.view == View::Timeline)
            .then(|| alloc_free(t, c.dev, c.cursor))
    }

    fn click(&mut self, t: &mut TraceData, c: &Ctx, x: u16, y: u16) -> Effect {
        click_chart(t, c, x, y)
    }

    fn search(&mut self, t: &mut TraceData, c: &Ctx, query: &str, forward: bool) -> Option<Effect> {
        Some(trace_search(t, c, query, forward))
    }

    fn draw(&self, t: &TraceData, c: &Ctx, area: Rect, buf: &mut Buffer) {
        trace_timeline(t, c, area, buf)
    }
}

/// Timeline `Enter` on a trace: the ops of the step around the cursor, the cursor's op selected.
fn open_step_at_cursor(t: &TraceData, c: &Ctx) -> Effect {
    let Some(cur) = c.cursor else {
        return Effect::None;
    };
    let Some(step) = t.step_of_event(c.dev, cur) else {
        return Effect::Message("this event is outside any profiled step".into());
    };
    Effect::Jump(Jump::OpOfEvent {
        dev: c.dev,
        step,
        event: cur,
    })
}

/// `a` on a trace's event `at` of device `dev` (the timeline's cursor, or an op's event): from
/// an allocation to its free, or from a free to its allocation, on the timeline.
pub fn alloc_free(t: &TraceData, dev: usize, at: Option<usize>) -> Effect {
    let Some(at) = at else {
        return Effect::Message(
            "a: on the timeline or an op's event, jumps between an allocation and its free".into(),
        );
    };
    let Some(m) = t.event(dev, at) else {
        return Effect::None;
    };
    let alloc = m.bytes > 0;
    let target = if alloc {
        t.freed_at(dev, at)
    } else {
        t.allocated_at(dev, at)
    };
    match target {
        Some(e) => Effect::Event(
            e,
            Some(if alloc {
                format!("the free of the block allocated at event {at}")
            } else {
                format!("the allocation of the block freed at event {at}")
            }),
        ),
        None => Effect::Message(if alloc {
            "this block is never freed in the trace: alive at the end".into()
        } else {
            "this block was allocated before the trace began".into()
        }),
    }
}

/// `n`/`N` on a trace's timeline: the next memory event whose op or user frame matches.
fn trace_search(t: &TraceData, c: &Ctx, query: &str, forward: bool) -> Effect {
    let q = super::Query::new(query);
    let Some(d) = t.devs.get(c.dev) else {
        return Effect::None;
    };
    let n = d.events.len();
    let cur = c.cursor.unwrap_or(0);
    let mut memo: rustc_hash::FxHashMap<(u32, bool), bool> = Default::default();
    let hit = |i: usize| {
        let m = &t.trace.memory[d.events[i] as usize];
        let op = m.op.is_some_and(|o| {
            let name = t.trace.op(o).name;
            *memo
                .entry((name.0, true))
                .or_insert_with(|| q.matches(t.trace.stacks.str(name)))
        });
        op || *memo
            .entry((m.stack.0, false))
            .or_insert_with(|| q.site(&t.trace.user_site(m.stack)))
    };
    find_event(query, cur, n, forward, "event", hit)
}

/// A snapshot's memory over its event log, at the app's cursor and window.
fn snapshot_timeline(data: &Data, at: &Ctx, area: Rect, buf: &mut Buffer) {
    let Some((dev, p)) = data.device(&data.snap, at.dev) else {
        buf.set_string(
            area.x,
            area.y,
            "no devices in this capture",
            Style::default(),
        );
        return;
    };
    let n = dev.events.len();
    if n == 0 {
        let msg = "this capture has no event history (recorded without _record_memory_history, or torch 2.0): nothing to plot";
        let w = area.width.saturating_sub(1) as usize;
        for (k, l) in wrap(msg, w).iter().enumerate() {
            put(buf, area, k as u16, l, Style::default());
        }
        return;
    }
    let cur = at.cursor.unwrap_or(0);
    let s = &p.timeline.series;
    // Header: the figures at the cursor.
    let e = &dev.events[cur];
    let t = data
        .rel_time_us(at.dev, cur)
        .map(|t| format!(" +{:.3} s", t as f64 / 1e6))
        .unwrap_or_default();
    let site = data
        .snap
        .stacks
        .site_frame(e.stack)
        .map(|f| format!(" at {}:{}", short(data.snap.stacks.str(f.file)), f.line))
        .unwrap_or_default();
    let header = format!(
        "event {cur}/{}{t}  {} {}{site}  │ alloc {} active {} reserved {}",
        n - 1,
        e.action.name(),
        bytes(e.size),
        bytes(s.allocated.get(cur).copied().unwrap_or(0)),
        bytes(s.active.get(cur).copied().unwrap_or(0)),
        bytes(s.reserved.get(cur).copied().unwrap_or(0)),
    );
    Chart {
        header,
        allocated: &s.allocated,
        active: Some(&s.active),
        reserved: Some(&s.reserved),
        window: at.window,
        cursor: cur,
        markers: data
            .markers
            .get(at.dev)
            .map(|v| v.as_slice())
            .unwrap_or(&[]),
        marker_legend: "│ step/annotation",
        hints: "p: peak  o: OOM  [ ]: markers +/- zoom t: time axis Enter: map",
        times: if at.by_time {
            data.times.get(at.dev).and_then(|t| t.as_deref())
        } else {
            None
        },
        reserved_shown: at.reserved_shown,
        axis_from_start: None,
    }
    .render(area, buf);
}

/// The memory curve of the trace's device shown, at the app's cursor and window.
fn trace_timeline(t: &TraceData, at: &Ctx, area: Rect, buf: &mut Buffer) {
    let Some(d) = t.devs.get(at.dev) else {
        put(
            buf,
            area,
            0,
            &crate::wording::no_memory_events(t.analysis.verdict.cut),
            Style::default(),
        );
        return;
    };
    let n = d.events.len();
    if n == 0 {
        return;
    }
    let cur = at.cursor.unwrap_or(0).min(n - 1);
    let m = t.event(at.dev, cur);
    let (inner, top) = t.event_ops(at.dev, cur);
    let op = match (inner, top) {
        (Some(a), Some(b)) if a != b => format!(" {a} in {b}"),
        (Some(a), _) => format!(" {a}"),
        _ => String::new(),
    };
    let site = t
        .event_site(at.dev, cur)
        .map(|s| format!(" at {}:{}", short(&s.file), s.line))
        .unwrap_or_default();
    let from = if d.from_start.is_some() {
        " from the trace's start"
    } else {
        ""
    };
    let header = format!(
        "event {cur}/{} +{:.3} s  {} {}{op}{site}  │ alloc {}{from} reserved {}",
        n - 1,
        t.rel_time_us(at.dev, cur).unwrap_or(0.0) / 1e6,
        if m.is_some_and(|m| m.bytes < 0) {
            "free"
        } else {
            "alloc"
        },
        bytes(m.map(|m| m.bytes.unsigned_abs()).unwrap_or(0)),
        d.curve_words(d.allocated[cur]),
        d.reserved_words(cur),
    );
    Chart {
        header,
        allocated: &d.allocated,
        active: None,
        reserved: d.reserved.as_deref(),
        window: at.window,
        cursor: cur,
        markers: &d.markers,
        marker_legend: "│ step",
        hints: "p: peak  [ ]: steps  +/- zoom  t: time axis  a: alloc↔free  Enter: the step's ops",
        times: if at.by_time {
            t.devs.get(at.dev).map(|d| d.times.as_slice())
        } else {
            None
        },
        reserved_shown: at.reserved_shown,
        axis_from_start: d.from_start,
    }
    .render(area, buf);
}
