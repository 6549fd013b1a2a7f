//! The Graph view of a trace: autograd-graph growth, each finding with the never-backpropagated
//! nodes it made in each step and its explanation; `Enter` opens the ops of the last step it
//! grew in, where the op that made them is selected.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};

use crate::tui::action::{Action, Ctx, Effect, View};
use crate::tui::component::Component;
use crate::tui::data::Jump;
use crate::tui::layout::list_offset;
use crate::tui::list::ListText;
use crate::tui::trace::{site_text, TraceData};
use crate::tui::widgets::chart::step_bars;
use crate::tui::widgets::{bold, dim, put, sel_style, text_pane, Scroll};
use crate::units::bytes;

#[allow(non_upper_case_globals)]
impl View {
    pub const Graph: View = View::new("Graph");
}

/// The graph-growth list and the selected finding's explanation.
#[derive(Default)]
pub struct Graph {
    list: ListText,
}

impl Component<TraceData> for Graph {
    fn view(&self) -> View {
        View::Graph
    }

    fn sync(&mut self, t: &mut TraceData, _c: &Ctx) {
        self.list.clamp(growth(t).len());
    }

    fn handle(&mut self, a: Action, t: &mut TraceData, c: &Ctx) -> Effect {
        let n = growth(t).len();
        self.list.handle_open(
            a,
            n,
            c.page,
            |i| graph_evidence(t, i),
            Effect::Message("no graph growth finding to open".into()),
        )
    }

    /// The next finding whose op, or user frame, matches.
    fn search(
        &mut self,
        t: &mut TraceData,
        _c: &Ctx,
        query: &str,
        forward: bool,
    ) -> Option<Effect> {
        let q = super::Query::new(query);
        let g = growth(t);
        Some(self.list.search(query, g.len(), forward, |i| {
            q.matches(&g[i].op) || q.site(&g[i].site)
        }))
    }

    fn text(&self) -> Option<&Scroll> {
        Some(self.list.text())
    }

    fn shows(&self, j: &Jump) -> bool {
        matches!(j, Jump::Graph(_))
    }

    fn show(&mut self, j: &Jump, _t: &mut TraceData, _c: &Ctx) -> Option<String> {
        if let Jump::Graph(i) = j {
            self.list.select(*i);
        }
        None
    }

    fn draw(&self, t: &TraceData, _c: &Ctx, area: Rect, buf: &mut Buffer) {
        graph_view(&self.list, t, area, buf)
    }
}

/// The trace's graph-growth findings (none without a graph section).
fn growth(t: &TraceData) -> &[crate::analysis::graph::GraphGrowth] {
    t.analysis
        .graph
        .as_ref()
        .map(|g| g.growth.as_slice())
        .unwrap_or(&[])
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

/// Autograd-graph growth: each finding with its nodes per step.
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
            t.step_names(),
        );
        y += chart_h;
        let lines = vec![
            (crate::wording::graph_explanation(f), Style::default()),
            (
                format!("fix: {}", crate::wording::graph_fix(f)),
                Style::default().fg(Color::Green),
            ),
        ];
        text_pane(list.text(), lines, area, y, buf);
    } else {
        let lines = g
            .notes
            .iter()
            .map(|n| (format!("note: {}", crate::wording::graph_note(n)), dim()))
            .collect();
        text_pane(list.text(), lines, area, y, buf);
    }
}
