//! The trace's views: memory timeline, steps (and the ops inside one), graph growth and leaks.
//! The steps, graph and leaks views are widgets over their component ([`Steps`], [`ListText`])
//! and the [`TraceData`] alone (and the device shown), never the app; the timeline is a widget
//! over the trace and what the app shows of it ([`TimelineAt`]).
//! [`TraceMode::render_view`] draws the view shown.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::widgets::Widget;

use super::app::{App, View};
use super::components::{ListText, Steps};
use super::layout::{list_offset, ops_list_area, steps_list_area, TimelineAt};
use super::overview::trace_overview;
use super::sites::short;
use super::trace::{OpRow, TraceData};
use super::trace_mode::TraceMode;
use super::widgets::chart::Chart;
use super::widgets::chart::{bar, step_bars};
use super::widgets::{bold, dim, put, sel_style};
use super::widgets::{Scroll, TextPane};
use crate::units::bytes;

/// A list row: yellow where something survives to the end of the trace, reversed if selected.
fn row_style(survives: bool, on: bool) -> Style {
    let st = if survives {
        Style::default().fg(Color::Yellow)
    } else {
        Style::default()
    };
    st.patch(sel_style(on))
}

fn site_text(s: &Option<crate::model::Site>) -> String {
    s.as_ref()
        .map(|s| format!("{}:{} {}", short(&s.file), s.line, s.function))
        .unwrap_or_default()
}

fn signed(v: i128) -> String {
    if v >= 0 {
        format!("+{}", bytes(v as u64))
    } else {
        format!("-{}", bytes(v.unsigned_abs() as u64))
    }
}

/// One memory event as a line: when, what, under which op, the totals after it, its fate.
fn event_line(t: &TraceData, dev: usize, i: usize) -> String {
    let Some(m) = t.event(dev, i) else {
        return String::new();
    };
    let d = &t.devs[dev];
    let rel = t.rel_time_us(dev, i).unwrap_or(0.0) / 1e3;
    let (inner, top) = t.event_ops(dev, i);
    let op = match (inner, top) {
        (Some(a), Some(b)) if a != b => format!("{a} (in {b})"),
        (Some(a), _) => a.to_owned(),
        _ => "(outside any op)".to_owned(),
    };
    let fate = if m.bytes > 0 {
        match t.freed_at(dev, i) {
            Some(f) => format!(
                "freed {:.3} ms later",
                (t.event(dev, f).map(|x| x.ts).unwrap_or(m.ts) - m.ts) / 1e3
            ),
            None => "ALIVE AT THE END".to_owned(),
        }
    } else {
        match t.allocated_at(dev, i) {
            Some(a) => format!(
                "allocated {:.3} ms earlier",
                (m.ts - t.event(dev, a).map(|x| x.ts).unwrap_or(m.ts)) / 1e3
            ),
            None => "allocated before the trace".to_owned(),
        }
    };
    // The fate before the op: the op's name is long, and a narrow terminal cuts the end.
    format!(
        "{:>10.3} ms {:>11}  {fate:<27} {:>10}  {op}",
        rel,
        signed(m.bytes as i128),
        d.curve_words(d.allocated[i]),
    )
}

/// The memory curve of the trace's device shown, at the app's cursor and window.
pub struct TraceTimelineView<'a>(pub &'a TraceData, pub TimelineAt);

impl Widget for TraceTimelineView<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        trace_timeline(self.0, self.1, area, buf)
    }
}

fn trace_timeline(t: &TraceData, at: TimelineAt, area: Rect, buf: &mut Buffer) {
    let Some(d) = t.devs.get(at.dev) else {
        put(
            buf,
            area,
            0,
            "this trace has no [memory] events: record it with profile_memory=True to see memory",
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

/// The steps with their memory; or the ops of one step; or the memory events of one op.
/// The steps view's component drawn over the trace and the device shown.
pub struct StepsView<'a> {
    pub steps: &'a Steps,
    pub data: &'a TraceData,
    pub dev: usize,
}

impl Widget for StepsView<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        steps_view(self.steps, self.data, self.dev, area, buf)
    }
}

fn steps_view(st: &Steps, t: &TraceData, dev: usize, area: Rect, buf: &mut Buffer) {
    let Some(d) = t.devs.get(dev) else {
        // The steps are the program's, with no memory figures to give them (never 0 B).
        let steps = &t.trace.steps;
        let range = match (steps.first(), steps.last()) {
            (Some(a), Some(b)) => format!(" ({} .. {})", a.name, b.name),
            _ => String::new(),
        };
        put(
            buf,
            area,
            0,
            &format!(
                "{} profiled steps{range}; this trace has no [memory] events: memory per step not recorded (record with profile_memory=True)",
                steps.len()
            ),
            dim(),
        );
        return;
    };
    if let Some(so) = &st.ops {
        ops_view(st, t, so, area, buf);
        return;
    }
    let wide = area.width >= 120;
    let steps = &t.trace.steps;
    let dm = t.mem.devices.get(d.mem);
    put(
        buf,
        area,
        0,
        &format!(
            "{} profiled steps on {}{} │ Enter: the step's ops │ d: next device",
            steps.len(),
            d.label,
            if d.from_start.is_some() {
                " (allocated: changes from the trace's start, not bytes in use)"
            } else {
                ""
            }
        ),
        bold(),
    );
    if steps.is_empty() {
        put(
            buf,
            area,
            1,
            "no ProfilerStep spans: call prof.step() every iteration to see steps",
            dim(),
        );
        return;
    }
    put(
        buf,
        area,
        1,
        &format!(
            "  {}  {}",
            step_columns(
                wide,
                [
                    "step",
                    "ms",
                    "start",
                    "peak",
                    "end",
                    "Δ",
                    "allocated",
                    "freed",
                    "alive@end"
                ]
                .map(String::from)
            ),
            if steps_bar_w(area, wide) >= 26 {
                "end of step (above lowest)"
            } else {
                ""
            }
        ),
        dim(),
    );
    let l = steps_list_area(area);
    let off = list_offset(st.sel, l.height as usize);
    let sm = dm.map(|m| m.steps.as_slice()).unwrap_or(&[]);
    // Bars show the end-of-step total above the lowest one: a creep of 1 MiB a step on top of
    // gigabytes of weights is what matters, and a bar from zero would hide it.
    // Ends in the device's own count (changes from the start, where that is all it gives): the
    // bars show differences, which mean the same either way.
    let ends: Vec<i64> = sm
        .iter()
        .map(|s| s.end_allocated_bytes.unwrap_or(0))
        .collect();
    let min_end = ends.iter().copied().min().unwrap_or(0);
    let max_end = (ends.iter().copied().max().unwrap_or(0) - min_end) as u64;
    let bar_w = steps_bar_w(area, wide);
    for (k, s) in steps.iter().enumerate().skip(off).take(l.height as usize) {
        let on = k == st.sel;
        let m = sm.get(k);
        let v = |f: fn(&crate::analysis::trace_memory::StepMemory) -> Option<i64>| {
            m.and_then(f)
                .map(|x| d.total_words(x))
                .unwrap_or_else(|| "-".into())
        };
        let delta = m
            .and_then(|m| Some(m.end_allocated_bytes? as i128 - m.start_allocated_bytes? as i128))
            .map(signed)
            .unwrap_or_else(|| "-".into());
        let end = m.and_then(|m| m.end_allocated_bytes).unwrap_or(min_end);
        let live = m.map(|m| m.live_at_end_bytes).unwrap_or(0);
        let cols = step_columns(
            wide,
            [
                s.name.clone(),
                format!("{:.1}", s.dur / 1e3),
                v(|m| m.start_allocated_bytes),
                v(|m| m.peak_allocated_bytes),
                v(|m| m.end_allocated_bytes),
                delta,
                bytes(m.map(|m| m.allocated_bytes).unwrap_or(0)),
                bytes(m.map(|m| m.freed_bytes).unwrap_or(0)),
                bytes(live),
            ],
        );
        let text = format!(
            "{}{cols}  {}",
            if on { "› " } else { "  " },
            bar((end - min_end) as u64, max_end, bar_w)
        );
        put(
            buf,
            area,
            l.y - area.y + (k - off) as u16,
            &text,
            row_style(live > 0 && k + 1 < steps.len(), on),
        );
    }
    let shown = (steps.len() - off).min(l.height as usize) as u16;
    let free = l.height - shown;
    let flat = ends.iter().all(|&e| e == min_end);
    if flat && !ends.is_empty() && free >= 2 {
        put(
            buf,
            area,
            l.y - area.y + shown + 1,
            &format!(
                "allocated at each step's end: {}{} in every step, nothing kept across steps",
                d.total_words(min_end),
                if d.from_start.is_some() {
                    " from the trace's start"
                } else {
                    ""
                }
            ),
            Style::default().fg(Color::Green),
        );
    } else if free >= 8 && ends.len() >= 2 {
        let h = free.min(12) - 1;
        let rel: Vec<u64> = ends.iter().map(|e| (e - min_end) as u64).collect();
        step_bars(
            buf,
            Rect::new(area.x, l.y + shown + 1, area.width, h),
            &format!(
                "allocated at each step's end, above the lowest ({}): growth here is memory kept across steps",
                d.total_words(min_end)
            ),
            &rel,
            &|v| format!("+{}", bytes(v)),
            step_range(t),
        );
    }
    let foot = l.y - area.y + l.height;
    put(
        buf,
        area,
        foot,
        "yellow: steps whose allocations are still alive when the trace ends (the last step's may legitimately be)",
        dim(),
    );
}

/// Cells left for the steps list's bars after its columns.
fn steps_bar_w(body: Rect, wide: bool) -> usize {
    let l = steps_list_area(body);
    (l.width as usize).saturating_sub(
        2 + if wide {
            18 + 9 + 11 * 8
        } else {
            18 + 9 + 11 * 4
        } + 2
            + 1,
    )
}

/// The steps list's columns: all nine from 120 columns on; below, the step, its duration, peak,
/// end, change and what is alive at the end.
fn step_columns(wide: bool, v: [String; 9]) -> String {
    let [step, ms, start, peak, end, delta, allocated, freed, alive] = v;
    if wide {
        format!(
            "{step:<17}  {ms:>8} {start:>10} {peak:>10} {end:>10} {delta:>10} {allocated:>10} {freed:>10} {alive:>10}"
        )
    } else {
        format!("{step:<17}  {ms:>8} {peak:>10} {end:>10} {delta:>10} {alive:>10}")
    }
}

/// The ops list's figure columns: all eight from 120 columns on; below, start, bytes
/// allocated, freed and alive at the end.
fn op_columns(wide: bool, v: [String; 8]) -> String {
    let [start, dur, allocs, allocated, frees, freed, alive, peak] = v;
    if wide {
        format!(
            " {start:>8} {dur:>8} {allocs:>6} {allocated:>10} {frees:>6} {freed:>10} {alive:>10} {peak:>10}"
        )
    } else {
        format!(" {start:>8} {allocated:>10} {freed:>10} {alive:>10}")
    }
}

/// An op's name as listed: backward ops without autograd's long prefix, marked `◂bw`.
fn op_name(r: &OpRow) -> String {
    let name = r
        .name
        .strip_prefix("autograd::engine::evaluate_function: ")
        .unwrap_or(&r.name);
    if r.backward {
        format!("{name} ◂bw")
    } else {
        name.to_owned()
    }
}

fn ops_view(st: &Steps, t: &TraceData, so: &super::trace::StepOps, area: Rect, buf: &mut Buffer) {
    let Some(s) = t.trace.steps.get(so.step) else {
        return;
    };
    let d = &t.devs[so.dev];
    let sm = t.mem.devices.get(d.mem).and_then(|m| m.steps.get(so.step));
    let l = ops_list_area(area);
    // Under 120 columns only the figures that matter most keep room for the op's name.
    let wide = area.width >= 120;
    if st.op_open {
        let Some(r) = st.selected_op() else { return };
        put(
            buf,
            area,
            0,
            &format!(
                "{} in {} on {}: {} allocations ({}), {} frees ({}), {} alive at the end │ Enter: on the timeline │ a: alloc↔free │ Esc: ops",
                op_name(r),
                s.name,
                d.label,
                r.allocs,
                bytes(r.alloc_bytes),
                r.frees,
                bytes(r.freed_bytes),
                bytes(r.live_at_end_bytes)
            ),
            bold(),
        );
        put(
            buf,
            area,
            1,
            &format!(
                "{:>13} {:>11}  {:<27} {:>10}  op",
                "time", "bytes", "fate", "total"
            ),
            dim(),
        );
        let off = list_offset(st.ev_sel, l.height as usize);
        for (k, &e) in r
            .events
            .iter()
            .enumerate()
            .skip(off)
            .take(l.height as usize)
        {
            let on = k == st.ev_sel;
            let line = event_line(t, so.dev, e);
            put(
                buf,
                area,
                l.y - area.y + (k - off) as u16,
                &format!("{}{line}", if on { "›" } else { " " }),
                row_style(line.contains("ALIVE AT THE END"), on),
            );
        }
        let dy = l.y - area.y + l.height;
        if let Some(e) = st.selected_op_event() {
            let site = t
                .event_site(so.dev, e)
                .map(|s| {
                    let caveat = if t.line_as_recorded(Some(&s)) {
                        " (the line that frame was at when profiling began, not this op's)"
                    } else {
                        ""
                    };
                    format!("user frame: {s}{caveat}")
                })
                .unwrap_or_else(|| "no user frame recorded for this event".into());
            put(buf, area, dy, &site, Style::default().fg(Color::Cyan));
            put(
                buf,
                area,
                dy + 1,
                &format!("event {e} of {}", d.label),
                dim(),
            );
        }
        return;
    }
    put(
        buf,
        area,
        0,
        &format!(
            "{} on {}: {:.1} ms, peak {}, {} allocated, {} alive at the end │ s: sort by {} │ Enter: allocations │ Esc: steps",
            s.name,
            d.label,
            s.dur / 1e3,
            sm.and_then(|m| m.peak_allocated_bytes)
                .map(|v| d.total_words(v))
                .unwrap_or_else(|| "-".into()),
            bytes(sm.map(|m| m.allocated_bytes).unwrap_or(0)),
            bytes(sm.map(|m| m.live_at_end_bytes).unwrap_or(0)),
            so.sort.name()
        ),
        bold(),
    );
    put(
        buf,
        area,
        1,
        &format!(
            "  {}  op (user frame)",
            op_columns(
                wide,
                [
                    "start ms",
                    "dur ms",
                    "allocs",
                    "allocated",
                    "frees",
                    "freed",
                    "alive@end",
                    "peak"
                ]
                .map(String::from)
            )
        ),
        dim(),
    );
    let off = list_offset(st.ops_sel, l.height as usize);
    for (k, r) in so.rows.iter().enumerate().skip(off).take(l.height as usize) {
        let on = k == st.ops_sel;
        let site = site_text(&r.site);
        let cols = op_columns(
            wide,
            [
                format!("{:.3}", (r.ts - s.ts) / 1e3),
                format!("{:.3}", r.dur / 1e3),
                r.allocs.to_string(),
                bytes(r.alloc_bytes),
                r.frees.to_string(),
                bytes(r.freed_bytes),
                bytes(r.live_at_end_bytes),
                // No memory work on this device: no peak to give.
                if r.events.is_empty() {
                    "-".into()
                } else {
                    d.curve_words(r.peak_allocated)
                },
            ],
        );
        // `file:line*`: the line as recorded (see the caveat below the list).
        let site = match (t.line_as_recorded(r.site.as_ref()), site.split_once(' ')) {
            (true, Some((at, f))) => format!("{at}* {f}"),
            (true, None) => format!("{site}*"),
            _ => site,
        };
        let text = format!(
            "{}{cols}  {}{}",
            if on { "› " } else { "  " },
            op_name(r),
            if site.is_empty() {
                String::new()
            } else {
                format!("  ({site})")
            }
        );
        put(
            buf,
            area,
            l.y - area.y + (k - off) as u16,
            &text,
            row_style(r.live_at_end_bytes > 0, on),
        );
    }
    if so.rows.is_empty() {
        put(
            buf,
            area,
            l.y - area.y,
            &format!("  no memory events on {} in this step", d.label),
            dim(),
        );
    }
    let dy = l.y - area.y + l.height;
    put(
        buf,
        area,
        dy,
        &format!(
            "{} top-level ops in the step, {} with memory work on {} │ ◂bw: backward pass",
            so.rows.len(),
            so.with_memory,
            d.label
        ),
        dim(),
    );
    if let Some(r) = st.selected_op() {
        if let Some(site) = r.site.as_ref() {
            put(
                buf,
                area,
                dy + 1,
                &format!(
                    "{}: user frame{} {site}{}",
                    r.name,
                    if t.line_as_recorded(Some(site)) {
                        "*"
                    } else {
                        ""
                    },
                    if r.backward {
                        " (the forward op this backward differentiates)"
                    } else {
                        ""
                    }
                ),
                Style::default().fg(Color::Cyan),
            );
        }
    }
    // The caveat the Graph view gives: a frame running since before profiling has the line it
    // was at then, the same for every op under it.
    if so.rows.iter().any(|r| t.line_as_recorded(r.site.as_ref())) {
        put(
            buf,
            area,
            dy + 2,
            "line*: where that frame was when profiling began, not this op's line",
            Style::default().fg(Color::Yellow),
        );
    }
}

fn step_range(t: &TraceData) -> (&str, &str) {
    let s = &t.trace.steps;
    (
        s.first().map(|x| x.name.as_str()).unwrap_or(""),
        s.last().map(|x| x.name.as_str()).unwrap_or(""),
    )
}

/// Autograd-graph growth: each finding with its nodes per step.
/// The graph view's component (the findings' list and explanation) drawn over the trace.
pub struct GraphView<'a>(pub &'a ListText, pub &'a TraceData);

impl Widget for GraphView<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        graph_view(self.0, self.1, area, buf)
    }
}

fn graph_view(list: &ListText, t: &TraceData, area: Rect, buf: &mut Buffer) {
    let Some(g) = &t.analysis.graph else {
        put(buf, area, 0, "no autograd graph section", dim());
        return;
    };
    put(
        buf,
        area,
        0,
        &format!(
            "AUTOGRAD GRAPH: {} forward ops with grad history, {} backward, {} never backpropagated, {} steps │ Enter: the ops of the last step it grew in",
            g.forward_nodes, g.backward_nodes, g.unconsumed_nodes, g.steps
        ),
        bold(),
    );
    let mut y = 1u16;
    if g.growth.is_empty() {
        put(
            buf,
            area,
            y,
            "no graph growth: forward ops with grad history are consumed by a backward pass in every step",
            Style::default().fg(Color::Green),
        );
        y += 1;
    }
    let list_h = (g.growth.len() as u16).min(area.height.saturating_sub(2) / 3);
    let off = list_offset(list.sel(), list_h.max(1) as usize);
    for (k, f) in g.growth.iter().enumerate().skip(off).take(list_h as usize) {
        let on = k == list.sel();
        let text = format!(
            "{} `{}` +{} node(s)/step over {} steps, {} attributed, from {}{}",
            if on { "›" } else { " " },
            f.op,
            f.nodes_per_step,
            f.steps,
            bytes(f.bytes_attributed),
            {
                let s = site_text(&f.site);
                if s.is_empty() {
                    "(no user frame)".to_owned()
                } else {
                    s
                }
            },
            if f.line_known {
                ""
            } else {
                " (line as recorded)"
            }
        );
        put(buf, area, y, &text, sel_style(on).fg(Color::Red));
        y += 1;
    }
    y += 1;
    let rest = area.height.saturating_sub(y);
    if let Some(f) = g.growth.get(list.sel()) {
        let chart_h = (rest / 2).clamp(4, 10).min(rest);
        let per: Vec<u64> = f.per_step.iter().map(|&c| c as u64).collect();
        step_bars(
            buf,
            Rect::new(area.x, area.y + y, area.width, chart_h),
            &format!("never-backpropagated `{}` nodes made in each step", f.op),
            &per,
            &|v| v.to_string(),
            step_range(t),
        );
        y += chart_h;
        let lines = vec![
            (f.explanation.clone(), Style::default()),
            (format!("fix: {}", f.fix), Style::default().fg(Color::Green)),
        ];
        text_pane(list.text(), lines, area, y, buf);
    } else {
        let lines = g
            .notes
            .iter()
            .map(|n| (format!("note: {n}"), dim()))
            .collect();
        text_pane(list.text(), lines, area, y, buf);
    }
}

/// The view's text pane, from row `y` of `area` to its bottom.
fn text_pane(s: &Scroll, lines: Vec<(String, Style)>, area: Rect, y: u16, buf: &mut Buffer) {
    if y < area.height {
        TextPane { lines, scroll: s }.render(
            Rect::new(area.x, area.y + y, area.width, area.height - y),
            buf,
        );
    }
}

/// Leaks found in a trace: allocations from earlier steps still alive at the end.
/// The leaks view's component (the findings' list and evidence) drawn over the trace.
pub struct TraceLeaksView<'a>(pub &'a ListText, pub &'a TraceData);

impl Widget for TraceLeaksView<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        trace_leaks_view(self.0, self.1, area, buf)
    }
}

fn trace_leaks_view(list: &ListText, t: &TraceData, area: Rect, buf: &mut Buffer) {
    put(
        buf,
        area,
        0,
        "LEAKS (Enter: the allocations of the first step that leaks)",
        bold(),
    );
    let ls = &t.analysis.leaks;
    if ls.is_empty() {
        let (text, judged) = super::overview_summary::no_leaks_text(
            &t.analysis.verdict.leak_judgement,
            "no site's allocations from earlier steps are still alive at the end",
        );
        let st = Style::default().fg(if judged { Color::Green } else { Color::Yellow });
        for (y, l) in super::widgets::wrap(&text, area.width.saturating_sub(1) as usize)
            .iter()
            .enumerate()
        {
            put(buf, area, 1 + y as u16, l, st);
        }
        return;
    }
    let list_h = (ls.len() as u16)
        .min(area.height.saturating_sub(2) / 3)
        .max(1);
    let off = list_offset(list.sel(), list_h as usize);
    for (k, l) in ls.iter().enumerate().skip(off).take(list_h as usize) {
        let on = k == list.sel();
        put(
            buf,
            area,
            1 + (k - off) as u16,
            &format!(
                "{} {}",
                if on { "›" } else { " " },
                super::app::leak_label(l)
            ),
            sel_style(on),
        );
    }
    let mut y = 2 + list_h;
    let Some(l) = ls.get(list.sel()) else {
        return;
    };
    let rest = area.height.saturating_sub(y);
    if let Some((_, series)) = t.leak_series.get(list.sel()) {
        let chart_h = (rest / 2).clamp(4, 10).min(rest);
        step_bars(
            buf,
            Rect::new(area.x, area.y + y, area.width, chart_h),
            "bytes allocated in each step at the finding's main site, still alive at the end",
            series,
            &bytes,
            step_range(t),
        );
        y += chart_h;
    }
    // A trace's leak carries no stack (the analysis records none for traces): its
    // explanation names the sites and the loop that keeps them.
    let lines = vec![
        (crate::wording::leak_explanation(&l.leak), Style::default()),
        (
            format!("fix: {}", crate::wording::leak_fix(&l.leak)),
            Style::default().fg(Color::Green),
        ),
    ];
    text_pane(list.text(), lines, area, y, buf);
}

/// The status line's cursor part for a trace.
pub fn trace_status(app: &App, t: &TraceData) -> (String, String) {
    let dev = t.devs.get(app.dev());
    let cur = match (app.cursor(), dev) {
        (Some(c), Some(d)) => {
            let step = t
                .step_of_event(app.dev(), c)
                .and_then(|s| t.trace.steps.get(s))
                .map(|s| format!(" {}", s.name))
                .unwrap_or_default();
            format!(
                "event {c}/{} +{:.3}s{step}",
                d.events.len().saturating_sub(1),
                t.rel_time_us(app.dev(), c).unwrap_or(0.0) / 1e6
            )
        }
        _ => "no memory events".to_owned(),
    };
    (dev.map(|d| d.label.clone()).unwrap_or_default(), cur)
}

impl TraceMode {
    /// Draws the view shown: the trace's own, or the overview and the timeline over it.
    pub fn render_view(&self, app: &App, area: Rect, buf: &mut Buffer) {
        match app.view() {
            View::Overview => trace_overview(&self.overview, &self.data, area, buf),
            View::Timeline => TraceTimelineView(&self.data, app.timeline_at()).render(area, buf),
            View::Steps => StepsView {
                steps: &self.steps,
                data: &self.data,
                dev: app.dev(),
            }
            .render(area, buf),
            View::Graph => GraphView(&self.graph, &self.data).render(area, buf),
            View::Leaks => TraceLeaksView(&self.leaks, &self.data).render(area, buf),
            View::Map | View::Sites => {}
        }
    }
}
