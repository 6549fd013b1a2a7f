//! The Plan view of a snapshot (`memscope tui FILE --batch N`): the capacity plan `memscope
//! plan` makes, for the device shown. The predicted peak reserved (and its upper reading, and
//! the peak allocated) against the batch size as a chart, the cap as a horizontal line and the
//! largest batch that fits as a vertical one; the predictions as a table; how the terms were
//! found and the plan's notes in a text pane that scrolls.
//!
//! The plan is made once, at load time, from the same analysis as the other views
//! ([`crate::tui::data::Data::from_product`]), and kept here: drawing never plans.
//! Where the body is short the chart gives way first, then the notes: the largest batch and the
//! predictions stay.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::symbols::Marker;
use ratatui::widgets::canvas::{Canvas, Line};
use ratatui::widgets::Widget;

use crate::analysis::plan::{Plan, Prediction, Verdict};
use crate::tui::action::{Action, Ctx, Effect, View};
use crate::tui::component::Component;
use crate::tui::data::Planned;
use crate::tui::layout::AXIS_W;
use crate::tui::snapshot_mode::Snap;
use crate::tui::widgets::chart::{tick_label, tick_step};
use crate::tui::widgets::{bold, dim, put, put_pieces, table, text_pane, Align, Scroll};
use crate::units::bytes;
use crate::wording;

#[allow(non_upper_case_globals)]
impl View {
    pub const Plan: View = View::new("Plan");
}

/// Colours of the chart: the timeline's for allocated and reserved.
const C_RESERVED: Color = Color::Blue;
const C_UPPER: Color = Color::Cyan;
const C_ALLOCATED: Color = Color::Green;
const C_CAP: Color = Color::Red;
const C_MAX: Color = Color::Yellow;

/// The most rows the chart takes (legend, plot, axis).
const CHART_MAX_H: u16 = 18;
/// The fewest rows worth a chart: the legend, three rows of plot, the batch axis.
const CHART_MIN_H: u16 = 5;

/// The capacity plan made at load time, and the scroll of its notes.
pub struct PlanView {
    plans: Planned,
    notes: Scroll,
}

impl PlanView {
    pub fn new(plans: Planned) -> PlanView {
        PlanView {
            plans,
            notes: Scroll::default(),
        }
    }

    /// Every device's plan, or why there is none.
    pub fn plans(&self) -> Result<&[Plan], &str> {
        match &self.plans {
            Ok(p) => Ok(p),
            Err(e) => Err(e),
        }
    }
}

impl Component<Snap> for PlanView {
    fn view(&self) -> View {
        View::Plan
    }

    /// The keys scroll the notes.
    fn handle(&mut self, a: Action, _cap: &mut Snap, _c: &Ctx) -> Effect {
        let t = &self.notes;
        match a {
            Action::Down => t.by(1),
            Action::Up => t.by(-1),
            Action::PageDown => t.page(1),
            Action::PageUp => t.page(-1),
            Action::Top => t.reset(),
            Action::Bottom => t.by(i32::from(u16::MAX)),
            _ => {}
        }
        Effect::None
    }

    fn text(&self) -> Option<&Scroll> {
        Some(&self.notes)
    }

    fn draw(&self, cap: &Snap, c: &Ctx, area: Rect, buf: &mut Buffer) {
        let plans = match &self.plans {
            Ok(p) => p,
            Err(e) => {
                put(buf, area, 0, "CAPACITY PLAN", bold());
                let lines = vec![(format!("no plan: {e}"), Style::default().fg(Color::Red))];
                text_pane(&self.notes, lines, area, 1, buf);
                return;
            }
        };
        let index = cap.data.snap.devices.get(c.dev).map(|d| d.index);
        let Some(p) = plans.iter().find(|p| Some(p.device) == index) else {
            put(buf, area, 0, "CAPACITY PLAN", bold());
            let planned: Vec<String> = plans.iter().map(|p| format!("cuda:{}", p.device)).collect();
            let lines = vec![(
                format!(
                    "cuda:{} has no allocation history: no plan (planned: {}; d: next device)",
                    index.unwrap_or(0),
                    planned.join(", ")
                ),
                dim(),
            )];
            text_pane(&self.notes, lines, area, 1, buf);
            return;
        };
        draw_plan(p, &self.notes, area, buf);
    }
}

/// A table's `at` cell: `8x256`, or `8`.
fn at_cell(r: &Prediction) -> String {
    match r.seq {
        Some(q) => format!("{}x{q}", r.batch),
        None => r.batch.to_string(),
    }
}

/// The largest batch, or why there is none: its line and its style.
pub fn max_batch_line(p: &Plan) -> (String, Style) {
    match &p.max_batch {
        Ok(m) => {
            let seq = p
                .recorded
                .seq
                .map(|s| format!(" at seq {s}"))
                .unwrap_or_default();
            let limit = if m.at_search_limit {
                crate::wording::plan_search_limit()
            } else {
                String::new()
            };
            let mut how = Vec::new();
            if m.rounded_down_by > 0 {
                how.push(format!(
                    "rounded down by {} from {} (the likelier reading)",
                    m.rounded_down_by, m.central_batch
                ));
            }
            if m.margin_bytes > 0 {
                how.push(format!(
                    "{} kept under the cap for the model's error",
                    bytes(m.margin_bytes)
                ));
            }
            let margin = if how.is_empty() {
                String::new()
            } else {
                format!(" │ {}", how.join(", "))
            };
            (
                format!("MAX BATCH {}{seq}{limit}{margin}", m.batch),
                Style::default().fg(Color::Green),
            )
        }
        Err(r) => (
            format!(
                "MAX BATCH unknown{}: {}",
                p.max_batch_at_most
                    .map(|m| format!(" (at most {m})"))
                    .unwrap_or_default(),
                wording::no_max_batch(*r)
            ),
            Style::default().fg(Color::Yellow),
        ),
    }
}

/// The predictions as table rows, headed; the columns that matter most first (the table drops
/// columns from the right where the pane is narrow). A capture that ends at an OOM never made
/// the rest of its step: its peaks are lower bounds (`≥`).
pub fn prediction_rows(p: &Plan) -> Vec<Vec<String>> {
    let ge = if p.ends_in_oom { "≥ " } else { "" };
    let peak = |v: u64| format!("{ge}{}", bytes(v));
    let mut rows = vec![vec![
        "at".to_owned(),
        "reserved".to_owned(),
        "upper".to_owned(),
        "vs cap".to_owned(),
        "allocated".to_owned(),
        "upper".to_owned(),
    ]];
    for r in &p.predictions {
        rows.push(vec![
            at_cell(r),
            peak(r.peak_reserved_bytes),
            peak(r.peak_reserved_upper_bytes),
            wording::plan_verdict(r.verdict, p.ends_in_oom).to_owned(),
            peak(r.peak_allocated_bytes),
            peak(r.peak_allocated_upper_bytes),
        ]);
    }
    rows
}

/// The notes pane: the recorded run and the model's replay of it, the fit, the notes.
fn note_lines(p: &Plan) -> Vec<(String, Style)> {
    let mut out = vec![(
        format!(
            "recorded at {}: peak allocated {}, peak reserved {}; the allocator model's replay of it: {}, {}",
            p.recorded,
            bytes(p.recorded_peak_allocated_bytes),
            bytes(p.recorded_peak_reserved_bytes),
            bytes(p.model_peak_allocated_bytes),
            bytes(p.model_peak_reserved_bytes)
        ),
        Style::default(),
    )];
    if let Err(r) = &p.max_batch {
        out.push((
            format!("no largest batch: {}", wording::no_max_batch(*r)),
            Style::default().fg(Color::Yellow),
        ));
    }
    out.push((
        format!("fit: {}", wording::plan_fit(&p.fit, p.recorded)),
        dim(),
    ));
    for n in wording::plan_notes(p) {
        out.push((format!("note: {n}"), dim()));
    }
    out
}

fn draw_plan(p: &Plan, notes: &Scroll, area: Rect, buf: &mut Buffer) {
    let cap = match p.cap.bytes {
        Some(c) => format!("cap {} ({})", bytes(c), wording::cap_source(p.cap.source)),
        None => "no cap".to_owned(),
    };
    put(
        buf,
        area,
        0,
        &format!(
            "CAPACITY PLAN cuda:{} │ recorded {} │ {cap}",
            p.device, p.recorded
        ),
        bold(),
    );
    let (line, st) = max_batch_line(p);
    put(buf, area, 1, &line, st);
    let mut y = 2u16;
    let rows = prediction_rows(p);
    let table_h = rows.len() as u16;
    let rest = area.height.saturating_sub(y + table_h);
    // The chart takes what the table leaves, less three rows of notes (at least one, where
    // that is all a chart leaves), when that is enough.
    let pts = chart_points(p);
    let chart_h = rest
        .saturating_sub(3)
        .max(rest.saturating_sub(1).min(CHART_MIN_H))
        .min(CHART_MAX_H);
    if chart_h >= CHART_MIN_H && pts.len() >= 2 && area.width > AXIS_W + 12 {
        chart(
            p,
            &pts,
            Rect::new(area.x, area.y + y, area.width, chart_h),
            buf,
        );
        y += chart_h;
    }
    let w = area.width.saturating_sub(1) as usize;
    let align = [
        Align::Left,
        Align::Right,
        Align::Right,
        Align::Left,
        Align::Right,
        Align::Right,
    ];
    for (k, l) in table(&rows, &align, w).iter().enumerate() {
        let st = if k == 0 {
            dim()
        } else if p.predictions.get(k - 1).and_then(|r| r.verdict) == Some(Verdict::Oom) {
            Style::default().fg(Color::Red)
        } else {
            Style::default()
        };
        put(buf, area, y, l, st);
        y += 1;
    }
    text_pane(notes, note_lines(p), area, y, buf);
}

/// One point of the chart: a batch size and its peaks.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Point {
    batch: u64,
    reserved: u64,
    reserved_upper: u64,
    allocated: u64,
}

/// The chart's points, by batch: the model's replay at the recorded shape, and the predictions
/// at the recorded sequence length.
fn chart_points(p: &Plan) -> Vec<Point> {
    let mut v = vec![Point {
        batch: p.recorded.batch,
        reserved: p.model_peak_reserved_bytes,
        reserved_upper: p.model_peak_reserved_bytes,
        allocated: p.model_peak_allocated_bytes,
    }];
    v.extend(
        p.predictions
            .iter()
            .filter(|r| r.seq == p.recorded.seq || r.seq.is_none())
            .map(|r| Point {
                batch: r.batch,
                reserved: r.peak_reserved_bytes,
                reserved_upper: r.peak_reserved_upper_bytes,
                allocated: r.peak_allocated_bytes,
            }),
    );
    v.sort_by_key(|r| r.batch);
    v.dedup_by_key(|r| r.batch);
    v
}

/// Where the plot's values fall: the canvas' own rounding (a braille cell is 2 x 4 dots), so
/// that what is written over it lines up with its curves.
struct Scale {
    plot: Rect,
    xmax: f64,
    ymax: f64,
}

impl Scale {
    fn col(&self, batch: u64) -> u16 {
        let dots = f64::from(self.plot.width) * 2.0 - 1.0;
        let d = (batch as f64 * dots / self.xmax).round() as u16;
        self.plot.x + (d / 2).min(self.plot.width.saturating_sub(1))
    }

    fn row(&self, v: u64) -> u16 {
        let dots = f64::from(self.plot.height) * 4.0 - 1.0;
        let d = ((self.ymax - v as f64).max(0.0) * dots / self.ymax).round() as u16;
        self.plot.y + (d / 4).min(self.plot.height.saturating_sub(1))
    }
}

/// Whether the cell at (`x`, `y`) holds nothing drawn (lines are drawn under the curves).
fn blank(buf: &Buffer, x: u16, y: u16) -> bool {
    buf.cell((x, y))
        .is_some_and(|c| c.symbol() == " " || c.symbol() == "\u{2800}")
}

/// What the chart marks besides the curves: the largest batch (or the bound a capture that ends
/// at an OOM gives it), its labels, and whether it falls on the chart.
struct Marks {
    max_batch: Option<u64>,
    /// The legend's words for it, and the plot's.
    max_label: String,
    plot_label: String,
    /// The largest batch where it is drawn: near the points (far beyond them, the search's
    /// ceiling, it is only named).
    max_shown: Option<u64>,
}

impl Marks {
    fn of(p: &Plan, pts: &[Point]) -> Marks {
        let (max_batch, bound) = match (&p.max_batch, p.max_batch_at_most) {
            (Ok(m), _) => (Some(m.batch), ""),
            (Err(_), Some(m)) => (Some(m), "≤ "),
            (Err(_), None) => (None, ""),
        };
        let last = pts.last().map_or(1, |r| r.batch).max(1);
        Marks {
            max_batch,
            max_label: max_batch
                .map(|m| format!("max batch {bound}{m}"))
                .unwrap_or_default(),
            plot_label: max_batch
                .map(|m| format!("max {bound}{m}"))
                .unwrap_or_default(),
            max_shown: max_batch.filter(|&m| m <= last.saturating_mul(2)),
        }
    }
}

/// The chart in `area`: the legend, the plot with its bytes axis on the left, the batch axis.
fn chart(p: &Plan, pts: &[Point], area: Rect, buf: &mut Buffer) {
    let upper_differs = pts.iter().any(|r| r.reserved_upper > r.reserved);
    let marks = Marks::of(p, pts);
    let last = pts.last().map_or(1, |r| r.batch).max(1);
    let xmax = last.max(marks.max_shown.unwrap_or(0)) as f64;
    let top = pts
        .iter()
        .map(|r| r.reserved_upper.max(r.allocated))
        .chain(p.cap.bytes)
        .max()
        .unwrap_or(1)
        .max(1);
    let plot = Rect::new(
        area.x + AXIS_W,
        area.y + 1,
        area.width.saturating_sub(AXIS_W + 1),
        area.height.saturating_sub(2),
    );
    let step = tick_step(top, u64::from(plot.height / 2).clamp(1, 6));
    let ymax = top.div_ceil(step).max(1) * step;
    let s = Scale {
        plot,
        xmax,
        ymax: ymax as f64,
    };
    legend(p, &marks, upper_differs, area, buf);
    curves(pts, upper_differs, &s, buf);
    if let Some(c) = p.cap.bytes {
        cap_line(c, &s, buf);
    }
    if let (Some(m), Some(_)) = (marks.max_batch, marks.max_shown) {
        max_line(m, &marks.plot_label, &s, buf);
    }
    bytes_axis(ymax, step, &s, area, buf);
    batch_axis(pts, &marks, &s, area, buf);
}

fn legend(p: &Plan, marks: &Marks, upper_differs: bool, area: Rect, buf: &mut Buffer) {
    let cap_text = p
        .cap
        .bytes
        .map(|c| format!("─ cap {}  ", bytes(c)))
        .unwrap_or_default();
    let max_text = match (marks.max_batch, marks.max_shown) {
        (Some(_), Some(_)) => format!("┊ {}", marks.max_label),
        (Some(_), None) => format!("{} (beyond the chart)", marks.max_label),
        (None, _) => String::new(),
    };
    let mut legend: Vec<(&str, Style)> = vec![
        ("peak vs batch: ", dim()),
        ("⣿ reserved ", Style::default().fg(C_RESERVED)),
    ];
    if upper_differs {
        legend.push(("⣿ upper ", Style::default().fg(C_UPPER)));
    }
    legend.push(("⣿ allocated  ", Style::default().fg(C_ALLOCATED)));
    legend.push((&cap_text, Style::default().fg(C_CAP)));
    legend.push((&max_text, Style::default().fg(C_MAX)));
    put_pieces(buf, area, 0, &legend);
}

/// The curves, the upper reading under the central one.
fn curves(pts: &[Point], upper_differs: bool, s: &Scale, buf: &mut Buffer) {
    let series = |f: fn(&Point) -> u64, color: Color| -> Vec<Line> {
        pts.windows(2)
            .map(|w| Line {
                x1: w[0].batch as f64,
                y1: f(&w[0]) as f64,
                x2: w[1].batch as f64,
                y2: f(&w[1]) as f64,
                color,
            })
            .collect()
    };
    let mut layers = Vec::new();
    if upper_differs {
        layers.push(series(|r| r.reserved_upper, C_UPPER));
    }
    layers.push(series(|r| r.allocated, C_ALLOCATED));
    layers.push(series(|r| r.reserved, C_RESERVED));
    Canvas::default()
        .marker(Marker::Braille)
        .x_bounds([0.0, s.xmax])
        .y_bounds([0.0, s.ymax])
        .paint(|ctx| {
            for layer in &layers {
                for l in layer {
                    ctx.draw(l);
                }
                ctx.layer();
            }
        })
        .render(s.plot, buf);
}

/// The cap, across the plot where nothing is drawn, named where no curve is under it (leftmost
/// first).
fn cap_line(c: u64, s: &Scale, buf: &mut Buffer) {
    let plot = s.plot;
    let y = s.row(c);
    for x in plot.x..plot.x + plot.width {
        if blank(buf, x, y) {
            buf[(x, y)]
                .set_char('─')
                .set_style(Style::default().fg(C_CAP));
        }
    }
    let label = format!(" cap {} ", bytes(c));
    let n = label.chars().count() as u16;
    let end = plot.x + plot.width;
    if let Some(x) = (plot.x + 1..end.saturating_sub(n)).find(|&x| free(buf, x, y, n)) {
        buf.set_string(x, y, &label, Style::default().fg(C_CAP));
    }
}

/// The largest batch, down the plot where nothing is drawn, named at its top: right of the line,
/// else left of it, where no curve is under the name.
fn max_line(m: u64, plot_label: &str, s: &Scale, buf: &mut Buffer) {
    let plot = s.plot;
    let x = s.col(m);
    for y in plot.y..plot.y + plot.height {
        if blank(buf, x, y) {
            buf[(x, y)]
                .set_char('┊')
                .set_style(Style::default().fg(C_MAX));
        } else if buf[(x, y)].symbol() == "─" {
            buf[(x, y)].set_char('┼');
        }
    }
    let n = plot_label.chars().count() as u16;
    let end = plot.x + plot.width;
    let right = (x + 1 + n <= end).then_some(x + 1);
    let left = (x >= plot.x + n).then(|| x - n);
    if let Some(lx) = [right, left]
        .into_iter()
        .flatten()
        .find(|&lx| free(buf, lx, plot.y, n))
    {
        buf.set_string(lx, plot.y, plot_label, Style::default().fg(C_MAX));
    }
}

/// The bytes axis: its ticks, on distinct rows, top first.
fn bytes_axis(ymax: u64, step: u64, s: &Scale, area: Rect, buf: &mut Buffer) {
    let mut used = Vec::new();
    let mut v = ymax;
    loop {
        let y = s.row(v);
        if !used.contains(&y) {
            used.push(y);
            buf.set_stringn(
                area.x,
                y,
                format!("{:>9}", tick_label(v)),
                AXIS_W as usize - 1,
                dim(),
            );
        }
        if v < step {
            break;
        }
        v -= step;
    }
}

/// The batch axis: each point's batch, then the largest batch, where they do not touch.
fn batch_axis(pts: &[Point], marks: &Marks, s: &Scale, area: Rect, buf: &mut Buffer) {
    let plot = s.plot;
    let ay = plot.y + plot.height;
    if ay >= area.y + area.height {
        return;
    }
    buf.set_stringn(
        area.x,
        ay,
        format!("{:>9}", "batch"),
        AXIS_W as usize - 1,
        dim(),
    );
    let mut labels: Vec<(u64, Style)> = pts.iter().map(|r| (r.batch, dim())).collect();
    if let (Some(m), Some(_)) = (marks.max_batch, marks.max_shown) {
        labels.push((m, Style::default().fg(C_MAX)));
    }
    let end = plot.x + plot.width;
    let mut taken: Vec<(u16, u16)> = Vec::new();
    for (b, st) in labels {
        let t = b.to_string();
        let n = t.chars().count() as u16;
        // Centred under its column, kept inside the plot (the last at its right edge).
        let x = s
            .col(b)
            .saturating_sub(n / 2)
            .min(end.saturating_sub(n))
            .max(plot.x);
        // A cell apart from every label placed.
        if x + n > end || taken.iter().any(|&(a, e)| x <= e && a <= x + n) {
            continue;
        }
        buf.set_stringn(x, ay, &t, n as usize, st);
        taken.push((x, x + n));
    }
}

/// Whether the `n` cells from (`x`, `y`) hold no curve: blank, or a line drawn under the
/// curves (a label may go over those).
fn free(buf: &Buffer, x: u16, y: u16, n: u16) -> bool {
    (x..x + n).all(|x| {
        buf.cell((x, y))
            .is_some_and(|c| matches!(c.symbol(), " " | "\u{2800}" | "─" | "┊"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_puts_the_ends_on_the_plot_edges() {
        let s = Scale {
            plot: Rect::new(10, 2, 40, 8),
            xmax: 16.0,
            ymax: 2048.0,
        };
        assert_eq!(s.col(0), 10);
        assert_eq!(s.col(16), 49);
        assert_eq!(s.row(2048), 2);
        assert_eq!(s.row(0), 9);
    }
}
