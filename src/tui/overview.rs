//! The overview of a snapshot and of a trace: the verdict, the per-device figures and what
//! explains them, in a text pane that scrolls, above the findings list.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::widgets::Widget;

use super::components::ListText;
use super::data::Data;
use super::layout::{list_offset, overview_list};
use super::trace::TraceData;
use super::widgets::{bold, dim, put, sel_style, table, Align, TextPane};
use crate::analysis::figures::{Bound, Counter, Figure};
use crate::units::{bytes, signed_bytes};

/// Verdict, figures, the OOM explained (a text pane that scrolls), findings: the snapshot mode's
/// overview list drawn over the snapshot's data.
pub struct OverviewView<'a>(pub &'a ListText, pub &'a Data);

impl Widget for OverviewView<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let (list, data) = (self.0, self.1);
        let a = &data.analysis;
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
        lines.extend(device_table(&rows, area.width));
        // The OOM that ended the run, explained.
        let oom = a.last_oom();
        if let Some((dev, o)) = oom {
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
            for e in &o.evidence {
                lines.push((format!("  - {e}"), Style::default()));
            }
            for r in &o.remedies {
                lines.push((
                    format!("  fix: {}", r.action),
                    Style::default().fg(Color::Green),
                ));
            }
        }
        lines.extend(super::overview_summary::summary_lines(a));
        overview_pane(list, data.findings.len(), lines, area, buf);
        findings_list(list, &data.findings, &["OOM"], area, buf);
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
    findings: &[super::data::Finding],
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

/// Verdict, per-device figures, the graph (a text pane that scrolls), findings.
pub fn trace_overview(list: &ListText, t: &TraceData, area: Rect, buf: &mut Buffer) {
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
            .and_then(|i| t.mem.devices.get(t.devs[i].mem));
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
        lines.extend(device_table(&rows, area.width));
    }
    lines.push((String::new(), Style::default()));
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
        lines.push((format!("note: {n}"), dim()));
    }
    lines.extend(super::overview_summary::summary_lines(a));
    overview_pane(list, t.findings.len(), lines, area, buf);
    findings_list(list, &t.findings, &["graph growth", "leak"], area, buf);
}
