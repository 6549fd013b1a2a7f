//! The Steps view's rows and headers: one line per step, op or event, their columns and
//! styles, the end-of-step figures.

use crate::analysis::trace_memory::StepMemory;
use crate::tui::layout::steps_list_area;
use crate::tui::trace::{site_text, OpRow, TraceData, TraceDev};
use crate::tui::widgets::chart::step_bars;
use crate::tui::widgets::{bold, dim, put, sel_style};
use crate::units::bytes;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};

pub(super) fn row_style(survives: bool, on: bool) -> Style {
    let st = if survives {
        Style::default().fg(Color::Yellow)
    } else {
        Style::default()
    };
    st.patch(sel_style(on))
}

pub(super) fn signed(v: i128) -> String {
    if v >= 0 {
        format!("+{}", bytes(v as u64))
    } else {
        format!("-{}", bytes(v.unsigned_abs() as u64))
    }
}

/// One memory event as a line (when, what, under which op, the totals after it, its fate), and
/// whether its block is still alive at the end of the trace (the row is then yellow).
pub(super) struct EventLine {
    pub(super) text: String,
    pub(super) alive_at_end: bool,
}

/// Event `i` of device `dev` as a line.
pub(super) fn event_line(t: &TraceData, dev: usize, i: usize) -> EventLine {
    let Some(m) = t.event(dev, i) else {
        return EventLine {
            text: String::new(),
            alive_at_end: false,
        };
    };
    let d = &t.devs[dev];
    let rel = t.rel_time_us(dev, i).unwrap_or(0.0) / 1e3;
    let (inner, top) = t.event_ops(dev, i);
    let op = match (inner, top) {
        (Some(a), Some(b)) if a != b => format!("{a} (in {b})"),
        (Some(a), _) => a.to_owned(),
        _ => "(outside any op)".to_owned(),
    };
    let alive_at_end = m.bytes > 0 && t.freed_at(dev, i).is_none();
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
    let text = format!(
        "{:>10.3} ms {:>11}  {fate:<27} {:>10}  {op}",
        rel,
        signed(m.bytes as i128),
        d.curve_words(d.allocated[i]),
    );
    EventLine { text, alive_at_end }
}

/// Cells left for the steps list's bars after its columns.
pub(super) fn steps_bar_w(body: Rect, wide: bool) -> usize {
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

/// The steps list's columns at a body `cols` wide: all nine from 120 columns on; below, the
/// step, its duration, peak, end, change and what is alive at the end; below [`NARROW`], the
/// step, its peak and what is alive at the end.
pub(super) fn step_columns(cols: u16, v: [String; 9]) -> String {
    let [step, ms, start, peak, end, delta, allocated, freed, alive] = v;
    if cols < NARROW {
        // The step, its peak and what it left alive: the columns that say which step to open
        // (issue 42: at 40 columns the peak was cut mid-figure).
        format!("{step:<14} {peak:>9} {alive:>9}")
    } else if cols >= 120 {
        format!(
            "{step:<17}  {ms:>8} {start:>10} {peak:>10} {end:>10} {delta:>10} {allocated:>10} {freed:>10} {alive:>10}"
        )
    } else {
        format!("{step:<17}  {ms:>8} {peak:>10} {end:>10} {delta:>10} {alive:>10}")
    }
}

/// Below this width the steps list shows only the step, its peak and its bytes alive at the end.
const NARROW: u16 = 60;

/// The ops list's figure columns: all eight from 120 columns on; below, start, bytes
/// allocated, freed and alive at the end.
pub(super) fn op_columns(wide: bool, v: [String; 8]) -> String {
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
pub(super) fn op_name(r: &OpRow) -> String {
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

/// The drawing of the three levels.
/// Op `r` of step `s` on device `d` as a row: its figures, its name, its user frame.
pub(super) fn op_row(
    t: &TraceData,
    s: &crate::model::trace::Step,
    d: &TraceDev,
    r: &OpRow,
    wide: bool,
) -> String {
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
    format!(
        "{cols}  {}{}",
        op_name(r),
        if site.is_empty() {
            String::new()
        } else {
            format!("  ({site})")
        }
    )
}

/// A trace without memory events: its steps are the program's, with no memory figures to give
/// them (never 0 B).
pub(super) fn no_memory(t: &TraceData, area: Rect, buf: &mut Buffer) {
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
            "{} profiled steps{range}; memory per step not recorded: {}",
            steps.len(),
            crate::wording::no_memory_events(t.analysis.verdict.cut)
        ),
        dim(),
    );
}

/// The steps list's title and column headers: whether there are steps to list.
pub(super) fn steps_header(
    t: &TraceData,
    d: &TraceDev,
    wide: bool,
    area: Rect,
    buf: &mut Buffer,
) -> bool {
    let cols = area.width;
    let steps = &t.trace.steps;
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
        return false;
    }
    put(
        buf,
        area,
        1,
        &format!(
            "  {}  {}",
            step_columns(
                cols,
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
    true
}

/// Step `s` (its memory `m`, where the device records it) as the list's columns.
pub(super) fn step_row(
    d: &TraceDev,
    s: &crate::model::trace::Step,
    m: Option<&StepMemory>,
    cols: u16,
) -> String {
    let v = |f: fn(&StepMemory) -> Option<i64>| {
        m.and_then(f)
            .map(|x| d.total_words(x))
            .unwrap_or_else(|| "-".into())
    };
    let delta = m
        .and_then(|m| Some(m.end_allocated_bytes? as i128 - m.start_allocated_bytes? as i128))
        .map(signed)
        .unwrap_or_else(|| "-".into());
    step_columns(
        cols,
        [
            s.name.clone(),
            format!("{:.1}", s.dur / 1e3),
            v(|m| m.start_allocated_bytes),
            v(|m| m.peak_allocated_bytes),
            v(|m| m.end_allocated_bytes),
            delta,
            bytes(m.map(|m| m.allocated_bytes).unwrap_or(0)),
            bytes(m.map(|m| m.freed_bytes).unwrap_or(0)),
            bytes(m.map(|m| m.live_at_end_bytes).unwrap_or(0)),
        ],
    )
}

/// Below the `shown` rows of steps: the allocated total at each step's end (`ends`), flat or
/// as bars above the lowest, then what the yellow rows mean.
pub(super) fn step_ends(
    t: &TraceData,
    d: &TraceDev,
    ends: &[i64],
    shown: u16,
    area: Rect,
    buf: &mut Buffer,
) {
    let l = steps_list_area(area);
    let min_end = ends.iter().copied().min().unwrap_or(0);
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
            t.step_names(),
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
