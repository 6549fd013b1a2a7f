//! The charts every view shares: memory over the event log ([`Chart`], downsampled to the
//! screen) and one bar per step ([`step_bars`]).
//!
//! A capture can hold a million events and a terminal has a hundred columns, so each column
//! shows the minimum and maximum of its bucket of events: one pass over the visible window per
//! frame, and a one-event spike (the peak, an OOM's transient) is never averaged away.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::widgets::Widget;

use super::{dim, put, put_pieces};
use crate::tui::data::{Marker, MarkerKind};
use crate::tui::layout::{chart_area, Window, AXIS_W};

/// Min and max of `series[lo..hi]` per column, `cols` columns.
pub fn downsample(series: &[u64], lo: usize, hi: usize, cols: usize) -> Vec<(u64, u64)> {
    let hi = hi.min(series.len());
    if cols == 0 || lo >= hi {
        return Vec::new();
    }
    let span = hi - lo;
    (0..cols)
        .map(|c| {
            let a = lo + c * span / cols;
            let b = (lo + (c + 1) * span / cols).max(a + 1).min(hi);
            let s = &series[a.min(hi - 1)..b.max(a.min(hi - 1) + 1)];
            let mut mn = u64::MAX;
            let mut mx = 0;
            for &v in s {
                mn = mn.min(v);
                mx = mx.max(v);
            }
            (mn, mx)
        })
        .collect()
}

/// Column of event `ev` in a window of `cols` columns.
pub fn column_of(ev: usize, lo: usize, hi: usize, cols: usize) -> Option<usize> {
    if ev < lo || ev >= hi || hi <= lo {
        return None;
    }
    Some(((ev - lo) as u128 * cols as u128 / (hi - lo) as u128) as usize)
}

/// The event range `[a, b)` of each of `cols` columns of `lo..hi` when the x axis is time:
/// equal spans of time, so idle stretches show as flat runs and bursts as steep ones. A column
/// with no event is empty (`a == b`); `times` is sorted.
pub fn time_buckets(times: &[f64], lo: usize, hi: usize, cols: usize) -> Vec<(usize, usize)> {
    let hi = hi.min(times.len());
    if cols == 0 || lo >= hi {
        return Vec::new();
    }
    let (t0, t1) = (times[lo], times[hi - 1]);
    let dt = (t1 - t0) / cols as f64;
    let mut out = Vec::with_capacity(cols);
    let mut a = lo;
    for c in 0..cols {
        let b = if c + 1 == cols || dt <= 0.0 {
            hi
        } else {
            let edge = t0 + dt * (c + 1) as f64;
            a + times[a..hi].partition_point(|&t| t < edge)
        };
        out.push((a, b));
        a = b;
    }
    out
}

/// Min and max of a series per bucket; an empty bucket holds the value of the event before it
/// (the state after an event lasts until the next one).
pub fn downsample_buckets(series: &[u64], buckets: &[(usize, usize)]) -> Vec<(u64, u64)> {
    buckets
        .iter()
        .map(|&(a, b)| {
            if a < b {
                series[a..b]
                    .iter()
                    .fold((u64::MAX, 0), |(mn, mx), &v| (mn.min(v), mx.max(v)))
            } else {
                let v = series.get(a.saturating_sub(1)).copied().unwrap_or(0);
                (v, v)
            }
        })
        .collect()
}

/// Column of event `ev` in time buckets.
pub fn column_of_bucket(ev: usize, buckets: &[(usize, usize)]) -> Option<usize> {
    let i = buckets.partition_point(|&(_, b)| b <= ev);
    buckets
        .get(i)
        .filter(|&&(a, b)| ev >= a && ev < b)
        .map(|_| i)
}

/// The event a chart column stands for: the first of its bucket (time axis), or its share of the
/// window (event axis).
pub fn event_at_column(
    times: Option<&[f64]>,
    lo: usize,
    hi: usize,
    cols: usize,
    col: usize,
) -> usize {
    match times {
        Some(t) => {
            let b = time_buckets(t, lo, hi, cols);
            // An empty column: the event that holds there, the last one before it.
            b.get(col)
                .map(|&(a, e)| {
                    if a < e {
                        a
                    } else {
                        a.saturating_sub(1).max(lo)
                    }
                })
                .unwrap_or(lo)
        }
        None => lo + col * (hi - lo) / cols.max(1),
    }
}

const EIGHTHS: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// What the chart draws: the series, the window on them, the cursor and the markers.
pub struct Chart<'a> {
    /// The first line: the figures at the cursor.
    pub header: String,
    pub allocated: &'a [u64],
    /// Snapshots only (a trace logs no `active` total).
    pub active: Option<&'a [u64]>,
    /// `None` where the capture records no reserved total (a torch 1.9-era trace).
    pub reserved: Option<&'a [u64]>,
    pub window: Window,
    pub cursor: usize,
    pub markers: &'a [Marker],
    /// The legend's last item (what `│` stands for).
    pub marker_legend: &'a str,
    /// Keys worth knowing here, after what the cursor is on.
    pub hints: &'a str,
    /// Each event's time in seconds from the first, when the x axis is time.
    pub times: Option<&'a [f64]>,
    /// Reserved memory drawn (and scaled to) behind the allocated curve; off, the scale is
    /// what is allocated, so the memory that matters fills the chart.
    pub reserved_shown: bool,
    /// Where the curve is of changes from the trace's start: what its 0 is, as a change (the
    /// lowest change, 0 or below). The axis then reads signed changes (`+512 MiB`), not bytes
    /// in use.
    pub axis_from_start: Option<i64>,
}

/// A round step for a bytes axis whose top is `top`, giving at most `ticks` steps: a power of
/// two of B, KiB, MiB, GiB or TiB (`0, 256 MiB, 512 MiB`).
pub fn tick_step(top: u64, ticks: u64) -> u64 {
    let ticks = ticks.max(1);
    let mut step = 1u64;
    while top.div_ceil(step) > ticks {
        step = step.saturating_mul(2);
    }
    step
}

/// A tick's label: whole units without a decimal (`256 MiB`), else one decimal.
pub fn tick_label(v: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut u = 0;
    let mut x = v as f64;
    while x >= 1024.0 && u + 1 < UNITS.len() {
        x /= 1024.0;
        u += 1;
    }
    if x.fract() == 0.0 {
        format!("{x:.0} {}", UNITS[u])
    } else {
        format!("{x:.1} {}", UNITS[u])
    }
}

/// A y-axis label: bytes, or where the curve counts from the trace's start (`from_start`, the
/// change at the axis' 0), the signed change the tick stands for.
fn axis_label(v: u64, from_start: Option<i64>) -> String {
    match from_start {
        None => tick_label(v),
        Some(lo) => {
            let change = (v as i64).saturating_add(lo);
            let sign = if change < 0 { "-" } else { "+" };
            format!("{sign}{}", tick_label(change.unsigned_abs()))
        }
    }
}

/// The chart's columns: the window of events each shows (equal spans of events, or of time).
struct Columns {
    window: Window,
    cols: usize,
    /// With a time axis: each column's range of events.
    buckets: Option<Vec<(usize, usize)>>,
}

impl Columns {
    /// Min and max of `s` in each column.
    fn series(&self, s: &[u64]) -> Vec<(u64, u64)> {
        match &self.buckets {
            Some(b) => downsample_buckets(s, b),
            None => downsample(s, self.window.lo, self.window.hi, self.cols),
        }
    }

    /// The column showing event `ev`, if in the window.
    fn of(&self, ev: usize) -> Option<usize> {
        match &self.buckets {
            Some(b) => column_of_bucket(ev, b),
            None => column_of(ev, self.window.lo, self.window.hi, self.cols),
        }
    }
}

impl Widget for Chart<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let c = self;
        let w = c.window;
        put(
            buf,
            area,
            0,
            &c.header,
            Style::default().add_modifier(Modifier::BOLD),
        );
        c.legend(area, buf);
        let chart = chart_area(area);
        if chart.width == 0 || chart.height == 0 {
            return;
        }
        let cols = chart.width as usize;
        let columns = Columns {
            window: w,
            cols,
            buckets: c.times.map(|t| time_buckets(t, w.lo, w.hi, cols)),
        };
        let cur_col = columns.of(c.cursor);
        c.plot(area, chart, &columns, cur_col, buf);
        // Markers, one row under the chart; then the event axis, then what the cursor is on.
        let my = chart.y + chart.height;
        if my < area.y + area.height {
            c.marker_row(area, chart, &columns, buf);
        }
        if my + 1 < area.y + area.height {
            c.event_axis(chart, my + 1, cur_col, buf);
        }
        if my + 2 < area.y + area.height {
            c.cursor_info(area, my + 2, buf);
        }
    }
}

impl Chart<'_> {
    /// Whether the reserved curve is drawn (asked for, and recorded).
    fn reserved_drawn(&self) -> bool {
        self.reserved_shown && self.reserved.is_some()
    }

    /// Row 1: the curves' colours, the markers', the window.
    fn legend(&self, area: Rect, buf: &mut Buffer) {
        let c = self;
        let w = c.window;
        let n = c.allocated.len();
        let zoom = n as f64 / (w.hi - w.lo).max(1) as f64;
        let mut legend_items: Vec<(&str, Style)> =
            vec![("█ allocated ", Style::default().fg(Color::Green))];
        if c.active.is_some() {
            legend_items.push(("▒ active ", Style::default().fg(Color::Yellow)));
        }
        if c.reserved.is_none() {
            legend_items.push((
                "reserved: not recorded  ",
                Style::default().fg(Color::DarkGray),
            ));
        } else if c.reserved_drawn() {
            legend_items.push(("░ reserved (r hides)  ", Style::default().fg(Color::Blue)));
        } else {
            legend_items.push(("r: reserved  ", Style::default().fg(Color::Blue)));
        }
        legend_items.push(("P peak ", Style::default().fg(Color::Magenta)));
        if c.active.is_some() {
            legend_items.push(("X OOM ", Style::default().fg(Color::Red)));
        }
        let marker_legend = format!("{}  ", c.marker_legend);
        legend_items.push((&marker_legend, Style::default().fg(Color::Cyan)));
        let win = match c.times {
            Some(_) => format!("time axis, events {}..{} ×{zoom:.1}", w.lo, w.hi),
            None => format!("events {}..{} ×{zoom:.1}", w.lo, w.hi),
        };
        legend_items.push((&win, Style::default().fg(Color::DarkGray)));
        put_pieces(buf, area, 1, &legend_items);
    }

    /// The curves in `chart`, a column each (the cursor's reversed), and the y axis' labels
    /// left of it.
    fn plot(
        &self,
        area: Rect,
        chart: Rect,
        columns: &Columns,
        cur_col: Option<usize>,
        buf: &mut Buffer,
    ) {
        let c = self;
        let reserved_shown = c.reserved_drawn();
        let alloc = columns.series(c.allocated);
        let active = c.active.map(|s| columns.series(s));
        let reserved = c.reserved.map(|s| columns.series(s));
        let shown_max = active
            .iter()
            .flatten()
            .chain(alloc.iter())
            .chain(reserved.iter().flatten().filter(|_| reserved_shown))
            .map(|x| x.1)
            .max()
            .unwrap_or(0)
            .max(1);
        let h = chart.height as u64;
        let top = shown_max;
        let level = |v: u64| -> u64 { ((v as u128 * (h as u128 * 8)) / top as u128) as u64 };
        for col in 0..columns.cols.min(alloc.len()) {
            let (amin, amax) = alloc[col];
            let levels = Levels {
                max: level(amax),
                min: level(amin),
                active: active.as_ref().map(|a| level(a[col].1)).unwrap_or(0),
                reserved: reserved.as_ref().map(|r| level(r[col].1)).unwrap_or(0),
            };
            for r in 0..h {
                let (mut ch, mut st) = levels.cell(r * 8, reserved_shown);
                if cur_col == Some(col) {
                    if ch == ' ' {
                        ch = '│';
                        st = Style::default().fg(Color::White);
                    } else {
                        st = st.add_modifier(Modifier::REVERSED);
                    }
                }
                let y = chart.y + chart.height - 1 - r as u16;
                if let Some(cell) = buf.cell_mut((chart.x + col as u16, y)) {
                    cell.set_char(ch).set_style(st);
                }
            }
        }
        // The data fills the chart; round ticks, about one every four rows, label it.
        let step = tick_step(shown_max, (h / 4).max(1));
        self.y_axis(area, chart, top, step, buf);
    }

    /// Y axis: a label at each round tick of `step` up to `top`, where the ticks are rows apart.
    fn y_axis(&self, area: Rect, chart: Rect, top: u64, step: u64, buf: &mut Buffer) {
        let h = chart.height as u64;
        let mut last_row = None;
        let mut v = 0;
        while v <= top {
            // The row whose cells reach `v`.
            let row = ((v as u128 * h as u128 / top as u128) as u64).min(h - 1);
            if last_row.is_none_or(|l: u64| row >= l + 2) && row < h {
                buf.set_stringn(
                    area.x,
                    chart.y + chart.height - 1 - row as u16,
                    format!("{:>8} ", axis_label(v, self.axis_from_start)),
                    AXIS_W as usize - 1,
                    Style::default().fg(Color::DarkGray),
                );
                last_row = Some(row);
            }
            v += step;
        }
    }

    /// The markers in the window, on the row under the chart; OOM and peak win over steps and
    /// annotations.
    fn marker_row(&self, area: Rect, chart: Rect, columns: &Columns, buf: &mut Buffer) {
        let my = chart.y + chart.height;
        let (w, ms) = (self.window, self.markers);
        buf.set_string(
            area.x,
            my,
            "  markers ",
            Style::default().fg(Color::DarkGray),
        );
        let lo_i = ms.partition_point(|m| m.event < w.lo);
        for m in ms[lo_i..].iter().take_while(|m| m.event < w.hi) {
            let Some(col) = columns.of(m.event) else {
                continue;
            };
            let (ch, st) = match m.kind {
                MarkerKind::Oom => (
                    'X',
                    Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
                ),
                MarkerKind::Peak => (
                    'P',
                    Style::default()
                        .fg(Color::Magenta)
                        .add_modifier(Modifier::BOLD),
                ),
                MarkerKind::Annotation | MarkerKind::Step => {
                    ('│', Style::default().fg(Color::Cyan))
                }
            };
            if let Some(cell) = buf.cell_mut((chart.x + col as u16, my)) {
                if matches!(m.kind, MarkerKind::Annotation | MarkerKind::Step)
                    && matches!(cell.symbol(), "X" | "P")
                {
                    continue;
                }
                cell.set_char(ch).set_style(st);
            }
        }
    }

    /// Event axis on row `ay`: the window's first and last event (or time), and a caret under
    /// the cursor's column.
    fn event_axis(&self, chart: Rect, ay: u16, cur_col: Option<usize>, buf: &mut Buffer) {
        let w = self.window;
        let (l, r) = match self.times {
            Some(t) => (
                format!("+{:.3} s", t.get(w.lo).copied().unwrap_or(0.0)),
                format!(
                    "+{:.3} s",
                    t.get(w.hi.saturating_sub(1)).copied().unwrap_or(0.0)
                ),
            ),
            None => (format!("{}", w.lo), format!("{}", w.hi.saturating_sub(1))),
        };
        // One column short of the edge, like every text.
        let rx = (chart.x + chart.width).saturating_sub(r.len() as u16 + 1);
        let cx = cur_col.map(|col| chart.x + col as u16);
        // Edge labels give way to the cursor's caret.
        if cx.is_none_or(|cx| cx >= chart.x + l.len() as u16) {
            buf.set_string(chart.x, ay, &l, Style::default().fg(Color::DarkGray));
        }
        if cx.is_none_or(|cx| cx < rx) {
            buf.set_string(rx, ay, &r, Style::default().fg(Color::DarkGray));
        }
        if let Some(cx) = cx {
            buf.set_string(cx, ay, "^", Style::default().fg(Color::White));
        }
    }

    /// Row `iy`: what the cursor is on (the markers there, or the step or annotation it is in),
    /// then the keys.
    fn cursor_info(&self, area: Rect, iy: u16, buf: &mut Buffer) {
        let (cur, ms) = (self.cursor, self.markers);
        let at = ms.partition_point(|m| m.event < cur);
        let here: Vec<&str> = ms[at..]
            .iter()
            .take_while(|m| m.event == cur)
            .map(|m| m.label.as_str())
            .collect();
        let prev = ms[..ms.partition_point(|m| m.event <= cur)]
            .iter()
            .rev()
            .find(|m| matches!(m.kind, MarkerKind::Annotation | MarkerKind::Step));
        let mut info = String::new();
        if !here.is_empty() {
            info.push_str(&format!("here: {}", here.join(", ")));
        } else if let Some(p) = prev {
            info.push_str(&format!("in: {} (from event {})", p.label, p.event));
        }
        let info = format!("{info}   {}", self.hints);
        put(buf, area, iy - area.y, &info, Style::default());
    }
}

/// One column's curves, in eighths of a row from the chart's bottom.
struct Levels {
    /// The allocated curve's highest and lowest point in the column.
    max: u64,
    min: u64,
    active: u64,
    reserved: u64,
}

impl Levels {
    /// The cell whose bottom is at level `base`: allocated (solid where even its lowest point
    /// covers it, an eighth block at its top), else active, else reserved (where drawn).
    fn cell(&self, base: u64, reserved_shown: bool) -> (char, Style) {
        if self.max >= base + 8 {
            let colr = if self.min >= base + 8 {
                Color::Green
            } else {
                Color::LightGreen
            };
            ('█', Style::default().fg(colr))
        } else if self.max > base {
            (
                EIGHTHS[(self.max - base) as usize],
                Style::default().fg(Color::LightGreen),
            )
        } else if self.active > base {
            ('▒', Style::default().fg(Color::Yellow))
        } else if reserved_shown && self.reserved > base {
            ('░', Style::default().fg(Color::Blue))
        } else {
            (' ', Style::default())
        }
    }
}

/// A bar of `w` cells for `v` out of `max`.
pub fn bar(v: u64, max: u64, w: usize) -> String {
    if max == 0 || w == 0 {
        return " ".repeat(w);
    }
    let eighths = (v as u128 * (w as u128 * 8) / max as u128) as usize;
    let mut s = "█".repeat(eighths / 8);
    if !eighths.is_multiple_of(8) && s.chars().count() < w {
        s.push(['▏', '▎', '▍', '▌', '▋', '▊', '▉'][eighths % 8 - 1]);
    }
    while s.chars().count() < w {
        s.push(' ');
    }
    s
}

/// Per-step values as vertical bars, with the maximum on the axis.
pub fn step_bars(
    buf: &mut Buffer,
    area: Rect,
    title: &str,
    values: &[u64],
    fmt: &dyn Fn(u64) -> String,
    (first, last): (&str, &str),
) {
    if area.height < 3 || area.width <= AXIS_W + 2 {
        return;
    }
    put(buf, area, 0, title, dim());
    let chart = Rect::new(
        area.x + AXIS_W,
        area.y + 1,
        area.width - AXIS_W,
        area.height - 2,
    );
    let n = values.len();
    if n == 0 || chart.height == 0 {
        return;
    }
    let avail = chart.width as usize;
    // One bar per step, up to 3 cells wide; more steps than cells: the max per cell.
    let (cols, per): (Vec<u64>, usize) = if n <= avail {
        let w = (avail / n).clamp(1, 3);
        (values.to_vec(), w)
    } else {
        (
            (0..avail)
                .map(|c| {
                    let a = c * n / avail;
                    let b = ((c + 1) * n / avail).max(a + 1).min(n);
                    values[a..b].iter().copied().max().unwrap_or(0)
                })
                .collect(),
            1,
        )
    };
    let top = cols.iter().copied().max().unwrap_or(0).max(1);
    let h = chart.height as u64;
    const EIGHTHS: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    for (c, &v) in cols.iter().enumerate() {
        let lv = (v as u128 * (h as u128 * 8) / top as u128) as u64;
        for r in 0..h {
            let base = r * 8;
            let ch = if lv >= base + 8 {
                '█'
            } else if lv > base {
                EIGHTHS[(lv - base) as usize]
            } else {
                continue;
            };
            for k in 0..per.saturating_sub(if per > 1 { 1 } else { 0 }).max(1) {
                let x = chart.x + (c * per + k) as u16;
                let y = chart.y + chart.height - 1 - r as u16;
                if x < chart.x + chart.width {
                    if let Some(cell) = buf.cell_mut((x, y)) {
                        cell.set_char(ch)
                            .set_style(Style::default().fg(Color::Yellow));
                    }
                }
            }
        }
    }
    buf.set_stringn(
        area.x,
        chart.y,
        format!("{:>9}", fmt(top)),
        AXIS_W as usize - 1,
        dim(),
    );
    buf.set_stringn(
        area.x,
        chart.y + chart.height - 1,
        format!("{:>9}", fmt(0)),
        AXIS_W as usize - 1,
        dim(),
    );
    let axis = format!(
        "{first}{:>w$}",
        last,
        w = (cols.len() * per)
            .min(chart.width as usize - 1)
            .saturating_sub(first.chars().count())
            .max(last.chars().count() + 2)
    );
    buf.set_stringn(
        chart.x,
        chart.y + chart.height,
        axis,
        chart.width as usize,
        dim(),
    );
}
