//! What the keys do in a trace's views.
//!
//! The steps view is a drill-down of three levels (steps, the ops of one step, the memory
//! events of one op), and `Esc` climbs it before it goes back through the jump history, so a
//! jump from a finding into a step's ops can be undone level by level.

use ratatui::layout::Rect;

use super::app::{cycle, list_offset, move_sel, Action, App, View};
use super::data::Jump;
use super::layout::{ops_list_area, steps_list_area};
use super::trace::{OpRow, OpSort, TraceData};

impl App {
    fn tr(&self) -> Option<&TraceData> {
        self.trace()
    }

    /// The op row selected in the open step.
    pub fn selected_op(&self) -> Option<&OpRow> {
        self.steps.ops.as_ref()?.rows.get(self.steps.ops_sel)
    }

    /// The device event selected in the open op's event list.
    pub fn selected_op_event(&self) -> Option<usize> {
        self.selected_op()?.events.get(self.steps.ev_sel).copied()
    }

    pub(super) fn sync_trace(&mut self) {
        let Some(t) = self.mode.trace() else { return };
        self.steps.sel = self.steps.sel.min(t.trace.steps.len().saturating_sub(1));
        if let Some(so) = &self.steps.ops {
            if so.dev != self.dev || so.sort != self.steps.sort {
                // Re-sorted or another device: keep the same op selected where it still is.
                let keep = self.selected_op().map(|r| r.op);
                let step = so.step;
                let fresh = t.step_ops(self.dev, step, self.steps.sort);
                self.steps.ops_sel = keep
                    .and_then(|k| fresh.rows.iter().position(|r| r.op == k))
                    .unwrap_or(0);
                self.steps.ops = Some(fresh);
            }
        }
        let nrows = self.steps.ops.as_ref().map(|s| s.rows.len()).unwrap_or(0);
        self.steps.ops_sel = self.steps.ops_sel.min(nrows.saturating_sub(1));
        if nrows == 0 {
            self.steps.op_open = false;
        }
        let nev = self.selected_op().map(|r| r.events.len()).unwrap_or(0);
        self.steps.ev_sel = self.steps.ev_sel.min(nev.saturating_sub(1));
        let ngraph = t
            .analysis
            .graph
            .as_ref()
            .map(|g| g.growth.len())
            .unwrap_or(0);
        self.graph.clamp(ngraph);
        let nleaks = t.analysis.leaks.len();
        self.leaks.clamp(nleaks);
    }

    fn open_step(&mut self, step: usize) {
        let Some(t) = self.mode.trace() else { return };
        self.steps.ops = Some(t.step_ops(self.dev, step, self.steps.sort));
        self.steps.sel = step;
        self.steps.ops_sel = 0;
        self.steps.op_open = false;
        self.steps.ev_sel = 0;
    }

    pub(super) fn jump_trace(&mut self, j: &Jump) {
        match j {
            Jump::Graph(i) => {
                self.push_history();
                self.view = View::Graph;
                self.graph.select(*i);
            }
            Jump::Leak(i) => {
                self.push_history();
                self.view = View::Leaks;
                self.leaks.select(*i);
            }
            Jump::Steps { dev } => {
                self.push_history();
                self.dev = *dev;
                self.view = View::Steps;
                self.steps.ops = None;
            }
            Jump::StepOps {
                dev,
                step,
                op,
                live,
            } => {
                self.push_history();
                self.dev = *dev;
                self.view = View::Steps;
                if *live {
                    self.steps.sort = OpSort::LiveAtEnd;
                }
                self.open_step(*step);
                let Some(op) = op else { return };
                let (Some(t), Some(so)) = (self.mode.trace(), &self.steps.ops) else {
                    return;
                };
                let by_name = so.rows.iter().position(|r| &r.name == op);
                // The op may run inside another (`aten::add_` under a module call): look for
                // the row whose events it made.
                let inner = || {
                    so.rows.iter().position(|r| {
                        r.events
                            .iter()
                            .any(|&e| t.event_ops(so.dev, e).0 == Some(op.as_str()))
                    })
                };
                match by_name.or_else(inner) {
                    Some(i) => self.steps.ops_sel = i,
                    None => {
                        let step_name = t
                            .trace
                            .steps
                            .get(*step)
                            .map(|s| s.name.as_str())
                            .unwrap_or("the step");
                        let dev = t.devs.get(*dev).map(|d| d.label.as_str()).unwrap_or("");
                        self.message = format!(
                            "`{op}` made no allocation on {dev} in {step_name}; sorted by {}",
                            self.steps.sort.name()
                        );
                    }
                }
            }
            _ => {}
        }
    }

    /// `Esc` in the steps view closes a drill-down level first.
    pub(super) fn trace_back(&mut self) -> bool {
        if self.trace().is_none() || self.view != View::Steps {
            return false;
        }
        if self.steps.op_open {
            self.steps.op_open = false;
            return true;
        }
        if self.steps.ops.is_some() {
            self.steps.ops = None;
            return true;
        }
        false
    }

    pub(super) fn trace_sort(&mut self) {
        if self.view == View::Steps && self.steps.ops.is_some() {
            self.steps.sort = self.steps.sort.next();
            self.message = format!("ops sorted by {}", self.steps.sort.name());
        } else {
            self.message = "s sorts the ops of a step (Enter on a step lists them)".into();
        }
    }

    /// `a`: from an allocation to its free and back, on the timeline.
    pub(super) fn trace_alloc_event(&mut self) {
        let Some(t) = self.mode.trace() else { return };
        let at = match self.view {
            View::Steps if self.steps.op_open => self.selected_op_event(),
            View::Timeline => self.cursor(),
            _ => None,
        };
        let Some(at) = at else {
            self.message =
                "a: on the timeline or an op's event, jumps between an allocation and its free"
                    .into();
            return;
        };
        let Some(m) = t.event(self.dev, at) else {
            return;
        };
        let target = if m.bytes > 0 {
            t.freed_at(self.dev, at)
        } else {
            t.allocated_at(self.dev, at)
        };
        let alloc = m.bytes > 0;
        match target {
            Some(e) => {
                self.push_history();
                self.set_cursor(e);
                self.view = View::Timeline;
                self.message = if alloc {
                    format!("the free of the block allocated at event {at}")
                } else {
                    format!("the allocation of the block freed at event {at}")
                };
            }
            None => {
                self.message = if alloc {
                    "this block is never freed in the trace: alive at the end".into()
                } else {
                    "this block was allocated before the trace began".into()
                }
            }
        }
    }

    /// Timeline `Enter`: the ops of the step around the cursor, the cursor's op selected.
    pub(super) fn open_step_at_cursor(&mut self) {
        let Some(cur) = self.cursor() else { return };
        let Some(step) = self.tr().and_then(|t| t.step_of_event(self.dev, cur)) else {
            self.message = "this event is outside any profiled step".into();
            return;
        };
        self.push_history();
        self.view = View::Steps;
        self.open_step(step);
        if let Some(so) = &self.steps.ops {
            if let Some(i) = so.rows.iter().position(|r| r.events.contains(&cur)) {
                self.steps.ops_sel = i;
                let k = so.rows[i].events.iter().position(|&e| e == cur);
                self.steps.ev_sel = k.unwrap_or(0);
            }
        }
    }

    pub(super) fn apply_steps(&mut self, a: Action) {
        let page = self.page();
        if self.steps.op_open {
            let n = self.selected_op().map(|r| r.events.len()).unwrap_or(0);
            match a {
                Action::Enter => {
                    if let Some(e) = self.selected_op_event() {
                        self.push_history();
                        self.set_cursor(e);
                        self.view = View::Timeline;
                    }
                }
                Action::Left => self.steps.op_open = false,
                other => self.steps.ev_sel = move_sel(self.steps.ev_sel, n, other, page),
            }
            return;
        }
        if let Some(so) = &self.steps.ops {
            let n = so.rows.len();
            match a {
                Action::Enter | Action::Right => {
                    if n > 0 {
                        self.steps.op_open = true;
                        self.steps.ev_sel = 0;
                    }
                }
                Action::Left => self.steps.ops = None,
                other => {
                    let before = self.steps.ops_sel;
                    self.steps.ops_sel = move_sel(self.steps.ops_sel, n, other, page);
                    if before != self.steps.ops_sel {
                        self.steps.ev_sel = 0;
                    }
                }
            }
            return;
        }
        let n = self.tr().map(|t| t.trace.steps.len()).unwrap_or(0);
        match a {
            Action::Enter | Action::Right => {
                if n > 0 {
                    self.open_step(self.steps.sel);
                }
            }
            other => self.steps.sel = move_sel(self.steps.sel, n, other, page),
        }
    }

    /// The evidence of graph finding `i`: the ops of the last step it grew in.
    fn graph_evidence(&self, i: usize) -> Option<Jump> {
        let t = self.tr()?;
        let f = t.analysis.graph.as_ref()?.growth.get(i)?;
        // The last step's nodes may still be waiting for a backward when the trace ends: the
        // evidence is the last step before it that grew.
        let complete = &f.per_step[..f.per_step.len().saturating_sub(1)];
        let step = complete
            .iter()
            .rposition(|&c| c > 0)
            .or_else(|| f.per_step.iter().rposition(|&c| c > 0))?;
        Some(Jump::StepOps {
            dev: t.devs.iter().position(|d| d.key.is_cuda()).unwrap_or(0),
            step,
            op: Some(f.op.clone()),
            live: false,
        })
    }

    /// The evidence of leak `i`: the first step whose allocations from its site survive.
    fn leak_evidence(&self, i: usize) -> Option<Jump> {
        let t = self.tr()?;
        let l = t.analysis.leaks.get(i)?;
        let (dev, series) = t.leak_series.get(i)?;
        let step = series.iter().position(|&b| b > 0)?;
        let op = t.devs.get(*dev).and_then(|d| {
            t.mem.devices.get(d.mem)?.growth.iter().find_map(|g| {
                (g.site == l.leak.site && g.per_step_bytes.get(step).is_some_and(|&b| b > 0))
                    .then(|| g.op.clone())
                    .flatten()
            })
        });
        // The growth groups allocations by their innermost op; the ops view lists top-level
        // ops, and `jump_trace` finds the row that holds the inner op's events.
        Some(Jump::StepOps {
            dev: *dev,
            step,
            op,
            live: true,
        })
    }

    pub(super) fn apply_graph(&mut self, a: Action) {
        let n = self
            .tr()
            .and_then(|t| t.analysis.graph.as_ref())
            .map(|g| g.growth.len())
            .unwrap_or(0);
        if a == Action::Enter {
            match self.graph_evidence(self.graph.sel()) {
                Some(j) => self.jump(&j),
                None => self.message = "no graph growth finding to open".into(),
            }
        } else {
            let page = self.page();
            self.graph.handle(a, n, page);
        }
    }

    pub(super) fn apply_trace_leaks(&mut self, a: Action) {
        let n = self.tr().map(|t| t.analysis.leaks.len()).unwrap_or(0);
        if a == Action::Enter {
            match self.leak_evidence(self.leaks.sel()) {
                Some(j) => self.jump(&j),
                None => self.message = "no leak finding to open".into(),
            }
        } else {
            let page = self.page();
            self.leaks.handle(a, n, page);
        }
    }

    pub(super) fn click_steps(&mut self, b: Rect, y: u16) {
        if self.steps.op_open {
            let l = ops_list_area(b);
            if y >= l.y && y < l.y + l.height {
                let off = list_offset(self.steps.ev_sel, l.height as usize);
                let i = off + (y - l.y) as usize;
                if self.selected_op().is_some_and(|r| i < r.events.len()) {
                    self.steps.ev_sel = i;
                }
            }
        } else if let Some(so) = &self.steps.ops {
            let l = ops_list_area(b);
            if y >= l.y && y < l.y + l.height {
                let off = list_offset(self.steps.ops_sel, l.height as usize);
                let i = off + (y - l.y) as usize;
                if i < so.rows.len() {
                    self.steps.ops_sel = i;
                }
            }
        } else {
            let l = steps_list_area(b);
            if y >= l.y && y < l.y + l.height {
                let off = list_offset(self.steps.sel, l.height as usize);
                let i = off + (y - l.y) as usize;
                if self.tr().is_some_and(|t| i < t.trace.steps.len()) {
                    self.steps.sel = i;
                }
            }
        }
    }

    pub(super) fn trace_search(&mut self, forward: bool) {
        let q = self.query.to_lowercase();
        let Some(t) = self.mode.trace() else { return };
        let has = |s: &str| s.to_lowercase().contains(&q);
        let site_has = |s: &Option<crate::model::Site>| {
            s.as_ref().is_some_and(|s| has(&s.function) || has(&s.file))
        };
        match self.view {
            View::Overview => {
                let fs = &t.findings;
                let found = cycle(
                    self.overview.sel(),
                    fs.len(),
                    forward,
                    |i| has(&fs[i].label),
                );
                self.found(found, |s, i| s.overview.select(i));
            }
            View::Graph => {
                let g = t
                    .analysis
                    .graph
                    .as_ref()
                    .map(|g| g.growth.as_slice())
                    .unwrap_or(&[]);
                let found = cycle(self.graph.sel(), g.len(), forward, |i| {
                    has(&g[i].op) || site_has(&g[i].site)
                });
                self.found(found, |s, i| s.graph.select(i));
            }
            View::Leaks => {
                let ls = &t.analysis.leaks;
                let found = cycle(self.leaks.sel(), ls.len(), forward, |i| {
                    has(&super::app::leak_label(&ls[i]))
                });
                self.found(found, |s, i| s.leaks.select(i));
            }
            View::Steps => match &self.steps.ops {
                Some(so) => {
                    let rows = &so.rows;
                    let found = cycle(self.steps.ops_sel, rows.len(), forward, |i| {
                        has(&rows[i].name)
                            || site_has(&rows[i].site)
                            || rows[i]
                                .events
                                .iter()
                                .any(|&e| t.event_ops(so.dev, e).0.is_some_and(has))
                    });
                    self.found(found, |s, i| {
                        s.steps.ops_sel = i;
                        s.steps.op_open = false;
                    });
                }
                None => {
                    let steps = &t.trace.steps;
                    let found = cycle(
                        self.steps.sel,
                        steps.len(),
                        forward,
                        |i| has(&steps[i].name),
                    );
                    self.found(found, |s, i| s.steps.sel = i);
                }
            },
            _ => {
                // The timeline: the next memory event whose op or user frame matches.
                let dev = self.dev;
                let Some(d) = t.devs.get(dev) else { return };
                let n = d.events.len();
                let cur = self.cursor().unwrap_or(0);
                let mut memo: rustc_hash::FxHashMap<(u32, bool), bool> = Default::default();
                let mut hit = |i: usize| {
                    let m = &t.trace.memory[d.events[i] as usize];
                    let op = m.op.is_some_and(|o| {
                        let name = t.trace.op(o).name;
                        *memo
                            .entry((name.0, true))
                            .or_insert_with(|| has(t.trace.stacks.str(name)))
                    });
                    op || *memo
                        .entry((m.stack.0, false))
                        .or_insert_with(|| site_has(&t.trace.user_site(m.stack)))
                };
                let found = if forward {
                    (cur + 1..n).find(|&i| hit(i))
                } else {
                    (0..cur.min(n)).rev().find(|&i| hit(i))
                };
                match found {
                    Some(i) => {
                        self.set_cursor(i);
                        self.message = format!("/{}: event {i}", self.query);
                    }
                    None => self.message = format!("/{}: no further event matches", self.query),
                }
            }
        }
    }
}
