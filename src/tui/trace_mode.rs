//! A trace's mode: the trace, and the state of the views that only a trace has (the steps
//! drill-down, the graph findings, the trace's leaks), with what their keys do.
//!
//! The steps view is a drill-down of three levels (steps, the ops of one step, the memory
//! events of one op), and `Esc` climbs it before it goes back through the jump history, so a
//! jump from a finding into a step's ops can be undone level by level.
//!
//! The components change only their own state; what the app must do besides (jump, move the
//! cursor, say something) comes back as an [`Effect`].

use ratatui::layout::Rect;

use super::action::{cycle, find_event, Action, Ctx, Effect, View};
use super::components::{ListText, Steps};
use super::data::{leak_label, Jump};
use super::trace::{OpRow, OpSort, TraceData};

/// A trace and its views' state.
pub struct TraceMode {
    pub(super) data: TraceData,
    /// The steps view: its step, op and allocation selections.
    pub(super) steps: Steps,
    /// The graph-growth list and the selected finding's explanation.
    pub(super) graph: ListText,
    /// The leaks list and the selected leak's explanation.
    pub(super) leaks: ListText,
    /// The overview's findings and the text above them.
    pub(super) overview: ListText,
}

impl TraceMode {
    pub fn new(data: TraceData) -> TraceMode {
        TraceMode {
            data,
            steps: Steps::default(),
            graph: ListText::default(),
            leaks: ListText::default(),
            overview: ListText::default(),
        }
    }

    /// The op row selected in the open step.
    pub fn selected_op(&self) -> Option<&OpRow> {
        self.steps.selected_op()
    }

    /// The device event selected in the open op's event list.
    pub fn selected_op_event(&self) -> Option<usize> {
        self.steps.selected_op_event()
    }

    /// Keeps the selections inside what device `dev` shows.
    pub(super) fn sync(&mut self, dev: usize) {
        let t = &self.data;
        self.steps.sel = self.steps.sel.min(t.trace.steps.len().saturating_sub(1));
        if let Some(so) = &self.steps.ops {
            if so.dev != dev || so.sort != self.steps.sort {
                // Re-sorted or another device: keep the same op selected where it still is.
                let keep = self.selected_op().map(|r| r.op);
                let step = so.step;
                let fresh = t.step_ops(dev, step, self.steps.sort);
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
        let t = &self.data;
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

    /// Shows a jump's target in this mode's views, once the app has switched to `dev` and the
    /// view: what it says, if anything.
    pub(super) fn jump(&mut self, j: &Jump) -> Option<String> {
        match j {
            Jump::Graph(i) => self.graph.select(*i),
            Jump::Leak(i) => self.leaks.select(*i),
            Jump::Steps { .. } => self.steps.ops = None,
            Jump::StepOps {
                dev,
                step,
                op,
                live,
            } => {
                if *live {
                    self.steps.sort = OpSort::LiveAtEnd;
                }
                self.steps.open(&self.data, *dev, *step);
                let op = op.as_ref()?;
                let (t, so) = (&self.data, self.steps.ops.as_ref()?);
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
                        return Some(format!(
                            "`{op}` made no allocation on {dev} in {step_name}; sorted by {}",
                            self.steps.sort.name()
                        ));
                    }
                }
            }
            _ => {}
        }
        None
    }

    /// `Esc` in the steps view closes a drill-down level first: whether it did.
    pub(super) fn back(&mut self, view: View) -> bool {
        if view != View::Steps {
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

    /// `s`: the order of a step's ops.
    pub(super) fn sort(&mut self, view: View) -> Effect {
        Effect::Message(if view == View::Steps && self.steps.ops.is_some() {
            self.steps.sort = self.steps.sort.next();
            format!("ops sorted by {}", self.steps.sort.name())
        } else {
            "s sorts the ops of a step (Enter on a step lists them)".into()
        })
    }

    /// `a`: from an allocation to its free and back, on the timeline.
    pub(super) fn alloc_event(&self, c: Ctx) -> Effect {
        let t = &self.data;
        let at = match c.view {
            View::Steps if self.steps.op_open => self.selected_op_event(),
            View::Timeline => c.cursor,
            _ => None,
        };
        let Some(at) = at else {
            return Effect::Message(
                "a: on the timeline or an op's event, jumps between an allocation and its free"
                    .into(),
            );
        };
        let Some(m) = t.event(c.dev, at) else {
            return Effect::None;
        };
        let alloc = m.bytes > 0;
        let target = if alloc {
            t.freed_at(c.dev, at)
        } else {
            t.allocated_at(c.dev, at)
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

    /// Timeline `Enter`: the ops of the step around the cursor, the cursor's op selected.
    pub(super) fn open_step_at_cursor(&mut self, c: Ctx) -> Effect {
        let Some(cur) = c.cursor else {
            return Effect::None;
        };
        let Some(step) = self.data.step_of_event(c.dev, cur) else {
            return Effect::Message("this event is outside any profiled step".into());
        };
        self.steps.open(&self.data, c.dev, step);
        if let Some(so) = &self.steps.ops {
            if let Some(i) = so.rows.iter().position(|r| r.events.contains(&cur)) {
                self.steps.ops_sel = i;
                let k = so.rows[i].events.iter().position(|&e| e == cur);
                self.steps.ev_sel = k.unwrap_or(0);
            }
        }
        Effect::Show(View::Steps)
    }

    /// The keys of the steps view.
    pub(super) fn apply_steps(&mut self, a: Action, c: Ctx) -> Effect {
        self.steps.handle(a, &self.data, c)
    }

    /// A click on row `y` of the steps view drawn in `b`.
    pub(super) fn click_steps(&mut self, b: Rect, y: u16) {
        self.steps.click(b, y, self.data.trace.steps.len())
    }

    /// The evidence of graph finding `i`: the ops of the last step it grew in.
    fn graph_evidence(t: &TraceData, i: usize) -> Option<Jump> {
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
    fn leak_evidence(t: &TraceData, i: usize) -> Option<Jump> {
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
        // ops, and `jump` finds the row that holds the inner op's events.
        Some(Jump::StepOps {
            dev: *dev,
            step,
            op,
            live: true,
        })
    }

    /// The keys of the graph view.
    pub(super) fn apply_graph(&mut self, a: Action, c: Ctx) -> Effect {
        let n = self
            .data
            .analysis
            .graph
            .as_ref()
            .map(|g| g.growth.len())
            .unwrap_or(0);
        let data = &self.data;
        self.graph.handle_open(
            a,
            n,
            c.page,
            |i| Self::graph_evidence(data, i),
            Effect::Message("no graph growth finding to open".into()),
        )
    }

    /// The keys of the leaks view.
    pub(super) fn apply_leaks(&mut self, a: Action, c: Ctx) -> Effect {
        let n = self.data.analysis.leaks.len();
        let data = &self.data;
        self.leaks.handle_open(
            a,
            n,
            c.page,
            |i| Self::leak_evidence(data, i),
            Effect::Message("no leak finding to open".into()),
        )
    }

    /// `n`/`N` with query `query`: the next match in the view shown.
    pub(super) fn search(&mut self, c: Ctx, query: &str, forward: bool) -> Effect {
        let q = query.to_lowercase();
        let t = &self.data;
        let has = |s: &str| s.to_lowercase().contains(&q);
        let site_has = |s: &Option<crate::model::Site>| {
            s.as_ref().is_some_and(|s| has(&s.function) || has(&s.file))
        };
        let found = |f: Option<usize>| match f {
            Some(_) => Effect::Message(format!("/{query}")),
            None => Effect::Message(format!("/{query}: no match")),
        };
        match c.view {
            View::Overview => {
                let fs = &t.findings;
                let f = cycle(
                    self.overview.sel(),
                    fs.len(),
                    forward,
                    |i| has(&fs[i].label),
                );
                if let Some(i) = f {
                    self.overview.select(i);
                }
                found(f)
            }
            View::Graph => {
                let g = t
                    .analysis
                    .graph
                    .as_ref()
                    .map(|g| g.growth.as_slice())
                    .unwrap_or(&[]);
                let f = cycle(self.graph.sel(), g.len(), forward, |i| {
                    has(&g[i].op) || site_has(&g[i].site)
                });
                if let Some(i) = f {
                    self.graph.select(i);
                }
                found(f)
            }
            View::Leaks => {
                let ls = &t.analysis.leaks;
                let f = cycle(self.leaks.sel(), ls.len(), forward, |i| {
                    has(&leak_label(&ls[i]))
                });
                if let Some(i) = f {
                    self.leaks.select(i);
                }
                found(f)
            }
            View::Steps => match &self.steps.ops {
                Some(so) => {
                    let rows = &so.rows;
                    let f = cycle(self.steps.ops_sel, rows.len(), forward, |i| {
                        has(&rows[i].name)
                            || site_has(&rows[i].site)
                            || rows[i]
                                .events
                                .iter()
                                .any(|&e| t.event_ops(so.dev, e).0.is_some_and(has))
                    });
                    if let Some(i) = f {
                        self.steps.ops_sel = i;
                        self.steps.op_open = false;
                    }
                    found(f)
                }
                None => {
                    let steps = &t.trace.steps;
                    let f = cycle(
                        self.steps.sel,
                        steps.len(),
                        forward,
                        |i| has(&steps[i].name),
                    );
                    if let Some(i) = f {
                        self.steps.sel = i;
                    }
                    found(f)
                }
            },
            _ => {
                // The timeline: the next memory event whose op or user frame matches.
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
                            .or_insert_with(|| has(t.trace.stacks.str(name)))
                    });
                    op || *memo
                        .entry((m.stack.0, false))
                        .or_insert_with(|| site_has(&t.trace.user_site(m.stack)))
                };
                find_event(query, cur, n, forward, "event", hit)
            }
        }
    }
}
