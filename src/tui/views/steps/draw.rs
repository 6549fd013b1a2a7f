//! The drawing of the Steps view's three levels: the steps with their memory, a step's ops,
//! an op's memory events.

use crate::tui::layout::{list_offset, ops_list_area, steps_list_area};
use crate::tui::trace::{StepOps, TraceData, TraceDev};
use crate::tui::widgets::chart::bar;
use crate::tui::widgets::{bold, dim, put};
use crate::units::bytes;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};

use super::rows::*;
use super::Steps;

impl Steps {
    /// The steps with their memory: a row and an end-of-step bar each, then the ends across
    /// the steps (flat, or their growth).
    pub(super) fn steps_list(&self, t: &TraceData, d: &TraceDev, area: Rect, buf: &mut Buffer) {
        let wide = area.width >= 120;
        let steps = &t.trace.steps;
        if !steps_header(t, d, wide, area, buf) {
            return;
        }
        let l = steps_list_area(area);
        let off = list_offset(self.sel, l.height as usize);
        let sm = t
            .memory
            .devices
            .get(d.mem)
            .map(|m| m.steps.as_slice())
            .unwrap_or(&[]);
        // Bars show the end-of-step total above the lowest one: a creep of 1 MiB a step on top
        // of gigabytes of weights is what matters, and a bar from zero would hide it.
        // Ends in the device's own count (changes from the start, where that is all it gives):
        // the bars show differences, which mean the same either way.
        let ends: Vec<i64> = sm
            .iter()
            .map(|s| s.end_allocated_bytes.unwrap_or(0))
            .collect();
        let min_end = ends.iter().copied().min().unwrap_or(0);
        let max_end = (ends.iter().copied().max().unwrap_or(0) - min_end) as u64;
        let bar_w = steps_bar_w(area, wide);
        for (k, s) in steps.iter().enumerate().skip(off).take(l.height as usize) {
            let on = k == self.sel;
            let m = sm.get(k);
            let end = m.and_then(|m| m.end_allocated_bytes).unwrap_or(min_end);
            let live = m.map(|m| m.live_at_end_bytes).unwrap_or(0);
            let text = format!(
                "{}{}  {}",
                if on { "› " } else { "  " },
                step_row(d, s, m, area.width),
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
        step_ends(t, d, &ends, shown, area, buf);
    }

    /// The ops of a step: a row each (its figures, its name, its user frame), then their counts,
    /// the selected op's frame, and the caveat on lines as recorded.
    pub(super) fn ops_list(&self, t: &TraceData, so: &StepOps, area: Rect, buf: &mut Buffer) {
        let Some(s) = t.trace.steps.get(so.step) else {
            return;
        };
        let d = &t.devs[so.dev];
        let sm = t
            .memory
            .devices
            .get(d.mem)
            .and_then(|m| m.steps.get(so.step));
        let l = ops_list_area(area);
        // Under 120 columns only the figures that matter most keep room for the op's name.
        let wide = area.width >= 120;
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
        let off = list_offset(self.ops_sel, l.height as usize);
        for (k, r) in so.rows.iter().enumerate().skip(off).take(l.height as usize) {
            let on = k == self.ops_sel;
            let text = format!(
                "{}{}",
                if on { "› " } else { "  " },
                op_row(t, s, d, r, wide)
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
        self.ops_footer(t, so, d, area, buf);
    }

    /// Below the ops: how many there are, the selected op's user frame, the caveat on lines as
    /// recorded.
    fn ops_footer(&self, t: &TraceData, so: &StepOps, d: &TraceDev, area: Rect, buf: &mut Buffer) {
        let l = ops_list_area(area);
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
        if let Some(r) = self.selected_op() {
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

    /// The memory events of the open op, then the selected event's user frame.
    pub(super) fn op_events(&self, t: &TraceData, so: &StepOps, area: Rect, buf: &mut Buffer) {
        let Some(s) = t.trace.steps.get(so.step) else {
            return;
        };
        let d = &t.devs[so.dev];
        let l = ops_list_area(area);
        let Some(r) = self.selected_op() else { return };
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
        let off = list_offset(self.ev_sel, l.height as usize);
        for (k, &e) in r
            .events
            .iter()
            .enumerate()
            .skip(off)
            .take(l.height as usize)
        {
            let on = k == self.ev_sel;
            let line = event_line(t, so.dev, e);
            put(
                buf,
                area,
                l.y - area.y + (k - off) as u16,
                &format!("{}{}", if on { "›" } else { " " }, line.text),
                row_style(line.alive_at_end, on),
            );
        }
        let dy = l.y - area.y + l.height;
        if let Some(e) = self.selected_op_event() {
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
    }
}
