//! The Steps view of a trace, three levels deep: the profiler steps with their memory, the ops
//! of one step, the memory events of one op. `Enter` drills in (and, on an event, shows it on
//! the timeline), `Esc` climbs back a level before it goes back through the jump history, so a
//! jump from a finding into a step's ops can be undone level by level; `s` sorts a step's ops,
//! `a` goes from an op's allocation to its free.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};

use super::timeline::alloc_free;
use crate::analysis::trace_memory::StepMemory;
use crate::tui::action::{cycle, found, move_sel, Action, Ctx, Effect, View};
use crate::tui::component::Component;
use crate::tui::data::Jump;
use crate::tui::layout::{list_offset, ops_list_area, steps_list_area};
use crate::tui::trace::{site_text, OpRow, OpSort, StepOps, TraceData, TraceDev};
use crate::tui::widgets::chart::{bar, step_bars};
use crate::tui::widgets::{bold, dim, put, sel_style};
use crate::units::bytes;

#[allow(non_upper_case_globals)]
impl View {
    pub const Steps: View = View::new("Steps");
}

/// The trace's steps view, three levels deep: the steps, the ops of the step drilled into, the
/// allocations of the op opened.
#[derive(Debug)]
pub struct Steps {
    sel: usize,
    /// The step whose ops are listed (the steps view drilled in).
    ops: Option<StepOps>,
    ops_sel: usize,
    sort: OpSort,
    /// The selected op's memory events are listed.
    op_open: bool,
    ev_sel: usize,
}

impl Default for Steps {
    fn default() -> Steps {
        Steps {
            sel: 0,
            ops: None,
            ops_sel: 0,
            // A step can run thousands of ops; the ones that allocate most come first.
            sort: OpSort::Allocated,
            op_open: false,
            ev_sel: 0,
        }
    }
}

impl Steps {
    /// The step selected.
    pub fn sel(&self) -> usize {
        self.sel
    }

    /// The ops of the step drilled into.
    pub fn ops(&self) -> Option<&StepOps> {
        self.ops.as_ref()
    }

    /// The op selected in the step's ops.
    pub fn ops_sel(&self) -> usize {
        self.ops_sel
    }

    /// How a step's ops are ordered.
    pub fn sort(&self) -> OpSort {
        self.sort
    }

    /// Whether the selected op's memory events are listed.
    pub fn op_open(&self) -> bool {
        self.op_open
    }

    /// The op row selected in the open step.
    pub fn selected_op(&self) -> Option<&OpRow> {
        self.ops.as_ref()?.rows.get(self.ops_sel)
    }

    /// The device event selected in the open op's event list.
    pub fn selected_op_event(&self) -> Option<usize> {
        self.selected_op()?.events.get(self.ev_sel).copied()
    }

    /// Drills into step `step` of device `dev`: its ops, the first selected.
    fn open(&mut self, t: &TraceData, dev: usize, step: usize) {
        self.ops = Some(t.step_ops(dev, step, self.sort));
        self.sel = step;
        self.ops_sel = 0;
        self.op_open = false;
        self.ev_sel = 0;
    }

    /// The keys of the steps view, over trace `t`.
    fn keys(&mut self, a: Action, t: &TraceData, c: &Ctx) -> Effect {
        let page = c.page;
        if self.op_open {
            let n = self.selected_op().map(|r| r.events.len()).unwrap_or(0);
            match a {
                Action::Enter => {
                    if let Some(e) = self.selected_op_event() {
                        return Effect::Event(e, None);
                    }
                }
                Action::Left => self.op_open = false,
                other => self.ev_sel = move_sel(self.ev_sel, n, other, page),
            }
            return Effect::None;
        }
        if let Some(so) = &self.ops {
            let n = so.rows.len();
            match a {
                Action::Enter | Action::Right => {
                    if n > 0 {
                        self.op_open = true;
                        self.ev_sel = 0;
                    }
                }
                Action::Left => self.ops = None,
                other => {
                    let before = self.ops_sel;
                    self.ops_sel = move_sel(self.ops_sel, n, other, page);
                    if before != self.ops_sel {
                        self.ev_sel = 0;
                    }
                }
            }
            return Effect::None;
        }
        let n = t.trace.steps.len();
        match a {
            Action::Enter | Action::Right => {
                if n > 0 {
                    self.open(t, c.dev, self.sel);
                }
            }
            other => self.sel = move_sel(self.sel, n, other, page),
        }
        Effect::None
    }

    /// A click on row `y` of the steps view drawn in `b`.
    fn click_rows(&mut self, b: Rect, y: u16, nsteps: usize) {
        if self.op_open {
            let l = ops_list_area(b);
            if y >= l.y && y < l.y + l.height {
                let off = list_offset(self.ev_sel, l.height as usize);
                let i = off + (y - l.y) as usize;
                if self.selected_op().is_some_and(|r| i < r.events.len()) {
                    self.ev_sel = i;
                }
            }
        } else if let Some(so) = &self.ops {
            let l = ops_list_area(b);
            if y >= l.y && y < l.y + l.height {
                let off = list_offset(self.ops_sel, l.height as usize);
                let i = off + (y - l.y) as usize;
                if i < so.rows.len() {
                    self.ops_sel = i;
                }
            }
        } else {
            let l = steps_list_area(b);
            if y >= l.y && y < l.y + l.height {
                let off = list_offset(self.sel, l.height as usize);
                let i = off + (y - l.y) as usize;
                if i < nsteps {
                    self.sel = i;
                }
            }
        }
    }

    /// Keeps the selections inside what device `dev` of trace `t` shows.
    fn clamp(&mut self, t: &TraceData, dev: usize) {
        self.sel = self.sel.min(t.trace.steps.len().saturating_sub(1));
        if let Some(so) = &self.ops {
            if so.dev != dev || so.sort != self.sort {
                // Re-sorted or another device: keep the same op selected where it still is.
                let keep = self.selected_op().map(|r| r.op);
                let step = so.step;
                let fresh = t.step_ops(dev, step, self.sort);
                self.ops_sel = keep
                    .and_then(|k| fresh.rows.iter().position(|r| r.op == k))
                    .unwrap_or(0);
                self.ops = Some(fresh);
            }
        }
        let nrows = self.ops.as_ref().map(|s| s.rows.len()).unwrap_or(0);
        self.ops_sel = self.ops_sel.min(nrows.saturating_sub(1));
        if nrows == 0 {
            self.op_open = false;
        }
        let nev = self.selected_op().map(|r| r.events.len()).unwrap_or(0);
        self.ev_sel = self.ev_sel.min(nev.saturating_sub(1));
    }

    /// The ops of step `at.1` on device `at.0`, sorted by what is alive at the end when `live`,
    /// with op `op` selected: what it says where the op made no allocation there.
    fn show_op(
        &mut self,
        t: &TraceData,
        at: (usize, usize),
        op: Option<&str>,
        live: bool,
    ) -> Option<String> {
        let (dev, step) = at;
        if live {
            self.sort = OpSort::LiveAtEnd;
        }
        self.open(t, dev, step);
        let op = op?;
        let so = self.ops.as_ref()?;
        let by_name = so.rows.iter().position(|r| r.name == op);
        // The op may run inside another (`aten::add_` under a module call): look for the row
        // whose events it made.
        let inner = || {
            so.rows.iter().position(|r| {
                r.events
                    .iter()
                    .any(|&e| t.event_ops(so.dev, e).0 == Some(op))
            })
        };
        match by_name.or_else(inner) {
            Some(i) => self.ops_sel = i,
            None => {
                let step_name = t
                    .trace
                    .steps
                    .get(step)
                    .map(|s| s.name.as_str())
                    .unwrap_or("the step");
                let dev = t.devs.get(dev).map(|d| d.label.as_str()).unwrap_or("");
                return Some(format!(
                    "`{op}` made no allocation on {dev} in {step_name}; sorted by {}",
                    self.sort.name()
                ));
            }
        }
        None
    }

    /// The ops of step `step` on device `dev`, with the op that made event `event` selected
    /// and the event in its list.
    fn show_event(&mut self, t: &TraceData, dev: usize, step: usize, event: usize) {
        self.open(t, dev, step);
        if let Some(so) = &self.ops {
            if let Some(i) = so.rows.iter().position(|r| r.events.contains(&event)) {
                self.ops_sel = i;
                let k = so.rows[i].events.iter().position(|&e| e == event);
                self.ev_sel = k.unwrap_or(0);
            }
        }
    }
}

impl Component<TraceData> for Steps {
    fn view(&self) -> View {
        View::Steps
    }

    fn sync(&mut self, t: &mut TraceData, c: &Ctx) {
        self.clamp(t, c.dev);
    }

    fn handle(&mut self, a: Action, t: &mut TraceData, c: &Ctx) -> Effect {
        self.keys(a, t, c)
    }

    /// `s` sorts a step's ops (elsewhere it says how); `a` goes from the open op's event to
    /// its free or allocation (elsewhere than the timeline, it says where it works).
    fn key(&mut self, a: Action, t: &mut TraceData, c: &Ctx) -> Option<Effect> {
        let shown = c.view == View::Steps;
        match a {
            Action::SortToggle => Some(Effect::Message(if shown && self.ops.is_some() {
                self.sort = self.sort.next();
                format!("ops sorted by {}", self.sort.name())
            } else {
                "s sorts the ops of a step (Enter on a step lists them)".into()
            })),
            Action::AllocEvent if c.view != View::Timeline => {
                let at = (shown && self.op_open)
                    .then(|| self.selected_op_event())
                    .flatten();
                Some(alloc_free(t, c.dev, at))
            }
            _ => None,
        }
    }

    fn click(&mut self, t: &mut TraceData, c: &Ctx, _x: u16, y: u16) -> Effect {
        self.click_rows(c.body, y, t.trace.steps.len());
        Effect::None
    }

    /// In a step's ops: the next op whose name, user frame or inner ops match; else the next
    /// step whose name does.
    fn search(
        &mut self,
        t: &mut TraceData,
        _c: &Ctx,
        query: &str,
        forward: bool,
    ) -> Option<Effect> {
        let q = super::Query::new(query);
        let f = match &self.ops {
            Some(so) => {
                let rows = &so.rows;
                let f = cycle(self.ops_sel, rows.len(), forward, |i| {
                    q.matches(&rows[i].name)
                        || q.site(&rows[i].site)
                        || rows[i]
                            .events
                            .iter()
                            .any(|&e| t.event_ops(so.dev, e).0.is_some_and(|s| q.matches(s)))
                });
                if let Some(i) = f {
                    self.ops_sel = i;
                    self.op_open = false;
                }
                f
            }
            None => {
                let steps = &t.trace.steps;
                let f = cycle(self.sel, steps.len(), forward, |i| {
                    q.matches(&steps[i].name)
                });
                if let Some(i) = f {
                    self.sel = i;
                }
                f
            }
        };
        Some(found(query, f.is_some()))
    }

    /// `Esc` closes the op's events, then the step's ops.
    fn back(&mut self) -> bool {
        if self.op_open {
            self.op_open = false;
            return true;
        }
        if self.ops.is_some() {
            self.ops = None;
            return true;
        }
        false
    }

    fn shows(&self, j: &Jump) -> bool {
        matches!(
            j,
            Jump::Steps { .. } | Jump::StepOps { .. } | Jump::OpOfEvent { .. }
        )
    }

    fn show(&mut self, j: &Jump, t: &mut TraceData, _c: &Ctx) -> Option<String> {
        match j {
            Jump::Steps { .. } => self.ops = None,
            Jump::StepOps {
                dev,
                step,
                op,
                live,
            } => return self.show_op(t, (*dev, *step), op.as_deref(), *live),
            Jump::OpOfEvent { dev, step, event } => self.show_event(t, *dev, *step, *event),
            _ => {}
        }
        None
    }

    fn draw(&self, t: &TraceData, c: &Ctx, area: Rect, buf: &mut Buffer) {
        let Some(d) = t.devs.get(c.dev) else {
            no_memory(t, area, buf);
            return;
        };
        match &self.ops {
            Some(so) if self.op_open => self.op_events(t, so, area, buf),
            Some(so) => self.ops_list(t, so, area, buf),
            None => self.steps_list(t, d, area, buf),
        }
    }
}

/// A list row: yellow where something survives to the end of the trace, reversed if selected.
fn row_style(survives: bool, on: bool) -> Style {
    let st = if survives {
        Style::default().fg(Color::Yellow)
    } else {
        Style::default()
    };
    st.patch(sel_style(on))
}

fn signed(v: i128) -> String {
    if v >= 0 {
        format!("+{}", bytes(v as u64))
    } else {
        format!("-{}", bytes(v.unsigned_abs() as u64))
    }
}

/// One memory event as a line (when, what, under which op, the totals after it, its fate), and
/// whether its block is still alive at the end of the trace (the row is then yellow).
struct EventLine {
    text: String,
    alive_at_end: bool,
}

/// Event `i` of device `dev` as a line.
fn event_line(t: &TraceData, dev: usize, i: usize) -> EventLine {
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

/// The drawing of the three levels.
impl Steps {
    /// The steps with their memory: a row and an end-of-step bar each, then the ends across
    /// the steps (flat, or their growth).
    fn steps_list(&self, t: &TraceData, d: &TraceDev, area: Rect, buf: &mut Buffer) {
        let wide = area.width >= 120;
        let steps = &t.trace.steps;
        if !steps_header(t, d, wide, area, buf) {
            return;
        }
        let l = steps_list_area(area);
        let off = list_offset(self.sel, l.height as usize);
        let sm = t
            .mem
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
                step_row(d, s, m, wide),
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
    fn ops_list(&self, t: &TraceData, so: &StepOps, area: Rect, buf: &mut Buffer) {
        let Some(s) = t.trace.steps.get(so.step) else {
            return;
        };
        let d = &t.devs[so.dev];
        let sm = t.mem.devices.get(d.mem).and_then(|m| m.steps.get(so.step));
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
    fn op_events(&self, t: &TraceData, so: &StepOps, area: Rect, buf: &mut Buffer) {
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

/// Op `r` of step `s` on device `d` as a row: its figures, its name, its user frame.
fn op_row(
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
fn no_memory(t: &TraceData, area: Rect, buf: &mut Buffer) {
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
}

/// The steps list's title and column headers: whether there are steps to list.
fn steps_header(t: &TraceData, d: &TraceDev, wide: bool, area: Rect, buf: &mut Buffer) -> bool {
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
    true
}

/// Step `s` (its memory `m`, where the device records it) as the list's columns.
fn step_row(
    d: &TraceDev,
    s: &crate::model::trace::Step,
    m: Option<&StepMemory>,
    wide: bool,
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
            bytes(m.map(|m| m.live_at_end_bytes).unwrap_or(0)),
        ],
    )
}

/// Below the `shown` rows of steps: the allocated total at each step's end (`ends`), flat or
/// as bars above the lowest, then what the yellow rows mean.
fn step_ends(t: &TraceData, d: &TraceDev, ends: &[i64], shown: u16, area: Rect, buf: &mut Buffer) {
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
