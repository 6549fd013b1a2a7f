//! The Steps view of a trace, three levels deep: the profiler steps with their memory, the ops
//! of one step, the memory events of one op. `Enter` drills in (and, on an event, shows it on
//! the timeline), `Esc` climbs back a level before it goes back through the jump history, so a
//! jump from a finding into a step's ops can be undone level by level; `s` sorts a step's ops,
//! `a` goes from an op's allocation to its free.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

use super::timeline::alloc_free;
use crate::tui::action::{cycle, found, move_sel, Action, Ctx, Effect, View};
use crate::tui::component::Component;
use crate::tui::data::Jump;
use crate::tui::layout::{list_offset, ops_list_area, steps_list_area};
use crate::tui::trace::{OpRow, OpSort, StepOps, TraceData};

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
mod draw;
mod rows;

use rows::no_memory;
