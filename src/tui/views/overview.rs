//! The Overview view, of a snapshot and of a trace: the verdict, the per-device figures and
//! what explains them, in a text pane that scrolls, above the findings list, whose `Enter`
//! jumps to a finding's evidence. One component for both kinds of capture: each says what its
//! text is ([`Overviewed`]).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};

use crate::analysis::figures::{Bound, Counter, Figure};
use crate::tui::action::{Action, Ctx, Effect, View};
use crate::tui::capture::Capture;
use crate::tui::component::Component;
use crate::tui::data::Finding;
use crate::tui::layout::{list_offset, overview_list};
use crate::tui::list::ListText;
use crate::tui::overview_summary::summary_lines;
use crate::tui::snapshot_mode::Snap;
use crate::tui::trace::TraceData;
use crate::tui::widgets::{bold, dim, put, sel_style, table, Align, Scroll, TextPane};
use crate::units::{bytes, signed_bytes};

/// The overview: its findings list and the text above it.
#[derive(Default)]
pub struct Overview {
    list: ListText,
}

/// What the overview shows of a capture besides its findings.
pub trait Overviewed: Capture {
    /// Findings whose label starts with one of these are drawn in red.
    const ALARMS: &'static [&'static str];

    /// The text above the findings, for a view `w` cells wide.
    fn overview_lines(&self, w: u16) -> Vec<(String, Style)>;
}

impl<C: Overviewed + 'static> Component<C> for Overview {
    fn view(&self) -> View {
        View::Overview
    }

    /// `Enter` jumps to the selected finding's evidence; the other keys move in the list or
    /// scroll the text.
    fn handle(&mut self, a: Action, cap: &mut C, c: &Ctx) -> Effect {
        let fs = cap.findings();
        if a == Action::Enter {
            return fs
                .get(self.list.sel())
                .map_or(Effect::None, |f| Effect::Jump(f.jump.clone()));
        }
        self.list.handle(a, fs.len(), c.page);
        Effect::None
    }

    fn click(&mut self, cap: &mut C, c: &Ctx, _x: u16, y: u16) -> Effect {
        let n = cap.findings().len();
        let (list_y, h) = overview_list(c.body, n);
        if y >= list_y && y < list_y + h {
            let off = list_offset(self.list.sel(), h as usize);
            let i = off + (y - list_y) as usize;
            if i < n {
                self.list.select(i);
            }
        }
        Effect::None
    }

    fn search(&mut self, cap: &mut C, _c: &Ctx, query: &str, forward: bool) -> Option<Effect> {
        let q = super::Query::new(query);
        let fs = cap.findings();
        Some(
            self.list
                .search(query, fs.len(), forward, |i| q.matches(&fs[i].label)),
        )
    }

    fn text(&self) -> Option<&Scroll> {
        Some(self.list.text())
    }

    fn draw(&self, cap: &C, _c: &Ctx, area: Rect, buf: &mut Buffer) {
        let lines = cap.overview_lines(area.width);
        overview_pane(&self.list, cap.findings().len(), lines, area, buf);
        findings_list(&self.list, cap.findings(), C::ALARMS, area, buf);
    }
}

/// Verdict, figures, the OOM explained, what `analyze` says besides.
impl Overviewed for Snap {
    const ALARMS: &'static [&'static str] = &["OOM"];

    fn overview_lines(&self, w: u16) -> Vec<(String, Style)> {
        let a = &self.data.analysis;
        let mut lines = vec![verdict_line(&a.verdict)];
        let mut rows = vec![vec![
            "device".to_owned(),
            "allocated cur/peak".to_owned(),
            "reserved cur/peak".to_owned(),
            "free reserved/hole".to_owned(),
            "events".to_owned(),
        ]];
        for d in &a.devices {
            rows.push(vec![
                format!("cuda:{}", d.device),
                figure_cell(&d.figure(Counter::Allocated)),
                figure_cell(&d.figure(Counter::Reserved)),
                format!(
                    "{} / {}",
                    d.free_reserved_bytes
                        .map_or_else(|| "unknown".into(), bytes),
                    d.largest_free_block_bytes
                        .map(bytes)
                        .unwrap_or_else(|| "?".into())
                ),
                d.events.to_string(),
            ]);
        }
        lines.extend(device_table(&rows, w));
        oom_lines(a, &mut lines);
        lines.extend(summary_lines(a));
        lines
    }
}

/// The OOM that ended the run, explained.
fn oom_lines(a: &crate::analysis::Analysis, lines: &mut Vec<(String, Style)>) {
    let Some((dev, o)) = a.last_oom() else {
        return;
    };
    lines.push((String::new(), Style::default()));
    lines.push((
        format!(
            "OOM on cuda:{dev} at event {}: {} requested ({} rounded), cause: {}",
            o.event,
            bytes(o.requested_bytes),
            bytes(o.rounded_bytes),
            o.cause.name()
        ),
        bold().fg(Color::Red),
    ));
    lines.push((
        format!(
            "  {} allocated, {} reserved, {} reserved but free, largest free block {}",
            bytes(o.allocated_bytes),
            bytes(o.reserved_bytes),
            bytes(o.free_reserved_bytes),
            bytes(o.largest_free_block_bytes)
        ),
        Style::default(),
    ));
    if let Some(s) = &o.site {
        lines.push((format!("  failing request from {s}"), Style::default()));
    }
    for e in crate::wording::oom_evidence(o) {
        lines.push((format!("  - {e}"), Style::default()));
    }
    for r in &o.remedies {
        lines.push((
            format!("  fix: {}", crate::wording::remedy_action(r.kind)),
            Style::default().fg(Color::Green),
        ));
    }
}

/// The verdict, green when all is well.
pub fn verdict_line(v: &crate::analysis::Verdict) -> (String, Style) {
    let style = match v.kind {
        crate::analysis::VerdictKind::Ok => bold().fg(Color::Green),
        crate::analysis::VerdictKind::Unjudged => bold().fg(Color::Yellow),
        _ => bold().fg(Color::Red),
    };
    (format!("VERDICT {}", crate::wording::verdict(v)), style)
}

/// The overview's device table: a header and one row per device, columns from their content.
pub fn device_table(rows: &[Vec<String>], w: u16) -> Vec<(String, Style)> {
    let mut align = vec![Align::Left];
    align.extend(std::iter::repeat_n(Align::Right, rows[0].len() - 1));
    table(rows, &align, (w as usize).saturating_sub(1))
        .into_iter()
        .enumerate()
        .map(|(k, l)| (l, if k == 0 { dim() } else { Style::default() }))
        .collect()
}

/// The overview's text, above its list of `n` findings.
pub fn overview_pane(
    list: &ListText,
    n: usize,
    lines: Vec<(String, Style)>,
    area: Rect,
    buf: &mut Buffer,
) {
    let (ly, _) = overview_list(area, n);
    let h = ly.saturating_sub(area.y + 1);
    TextPane {
        lines,
        scroll: list.text(),
    }
    .render(Rect::new(area.x, area.y, area.width, h), buf);
}

/// The overview's findings list, those whose label starts with one of `alarms` in red.
pub fn findings_list(
    list: &ListText,
    findings: &[Finding],
    alarms: &[&str],
    area: Rect,
    buf: &mut Buffer,
) {
    let (ly, lh) = overview_list(area, findings.len());
    if ly > area.y {
        put(
            buf,
            area,
            ly - area.y - 1,
            "FINDINGS (Enter: jump to the evidence)",
            bold(),
        );
    }
    let off = list_offset(list.sel(), lh as usize);
    for (k, f) in findings.iter().enumerate().skip(off).take(lh as usize) {
        let on = k == list.sel();
        let st = if alarms.iter().any(|a| f.label.starts_with(a)) {
            Style::default().fg(Color::Red)
        } else {
            Style::default()
        };
        let text = format!("{} {}", if on { "›" } else { " " }, f.label);
        put(
            buf,
            area,
            ly - area.y + (k - off) as u16,
            &text,
            st.patch(sel_style(on)),
        );
    }
    if findings.is_empty() {
        put(buf, area, ly - area.y, "  no findings", dim());
    }
}

/// A counter's `current / peak` cell: bytes in use (a peak known only from below as `≥`), or
/// unknown, or, where the capture gives only changes from the trace's start, those changes.
fn figure_cell(f: &Figure) -> String {
    if let Some(c) = f.from_start {
        return format!(
            "{} / {} from start",
            signed_bytes(c.current),
            signed_bytes(c.peak)
        );
    }
    let peak = match f.peak {
        Bound::Exact(v) => bytes(v),
        Bound::AtLeast(v) => format!("≥{}", bytes(v)),
        Bound::Unknown => "unknown".into(),
    };
    format!(
        "{} / {peak}",
        f.current.map_or_else(|| "unknown".into(), bytes)
    )
}

/// Verdict, per-device figures, the graph, the trace's counts and notes.
impl Overviewed for TraceData {
    const ALARMS: &'static [&'static str] = &["graph growth", "leak"];

    fn overview_lines(&self, w: u16) -> Vec<(String, Style)> {
        let t = self;
        let a = &t.analysis;
        let mut lines = vec![verdict_line(&a.verdict)];
        let mut rows = vec![vec![
            "device".to_owned(),
            "allocated end/peak".to_owned(),
            "reserved end/peak".to_owned(),
            "alive at end".to_owned(),
            "events".to_owned(),
        ]];
        for d in &a.devices {
            let dm = t
                .dev_of_cuda(d.device)
                .and_then(|i| t.memory.devices.get(t.devs[i].mem));
            rows.push(vec![
                format!("cuda:{}", d.device),
                figure_cell(&d.figure(Counter::Allocated)),
                figure_cell(&d.figure(Counter::Reserved)),
                dm.map(|m| bytes(m.live_at_end_bytes)).unwrap_or_default(),
                d.events.to_string(),
            ]);
        }
        if a.devices.is_empty() {
            // No row of zeros: nothing was recorded.
            lines.push((
                "memory: not recorded (the trace has no CUDA [memory] events)".into(),
                dim(),
            ));
        } else {
            lines.extend(device_table(&rows, w));
        }
        lines.push((String::new(), Style::default()));
        trace_lines(t, &mut lines);
        lines.extend(summary_lines(a));
        lines
    }
}

/// The trace's graph, its counts and the analysis' notes.
fn trace_lines(t: &TraceData, lines: &mut Vec<(String, Style)>) {
    let a = &t.analysis;
    if let Some(g) = &a.graph {
        lines.push((format!(
            "autograd graph: {} forward ops with grad history, {} backward, {} never backpropagated, over {} steps",
            g.forward_nodes, g.backward_nodes, g.unconsumed_nodes, g.steps
        ), Style::default()));
    }
    let counts = &t.trace.counts;
    lines.push((
        format!(
            "trace: {} events ({} ops, {} memory events, {} steps){}",
            counts.events,
            t.trace.ops.len(),
            t.trace.memory.len(),
            t.trace.steps.len(),
            if t.trace.truncated {
                ", truncated: read up to where it was cut"
            } else {
                ""
            }
        ),
        dim(),
    ));
    for n in &a.notes {
        lines.push((format!("note: {}", crate::wording::note(n)), dim()));
    }
}
