//! The Leaks view, of a snapshot and of a trace: the leak findings, the selected one's growth
//! step by step and its explanation, and `Enter` to its evidence (a snapshot's: the end of the
//! growth window on the timeline; a trace's: the allocations of the first step that leaks).
//! Where there is no finding it says why: judged clean, or why leaks could not be judged.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};

use crate::tui::action::{Action, Ctx, Effect, View};
use crate::tui::component::Component;
use crate::tui::data::{leak_label, Data, Jump};
use crate::tui::layout::list_offset;
use crate::tui::list::ListText;
use crate::tui::snapshot_mode::Snap;
use crate::tui::trace::TraceData;
use crate::tui::widgets::chart::step_bars;
use crate::tui::widgets::{bold, dim, put, sel_style, text_pane, wrap, Scroll, TextPane};
use crate::units::bytes;

#[allow(non_upper_case_globals)]
impl View {
    pub const Leaks: View = View::new("Leaks");
}

/// The leaks list and the selected leak's explanation.
#[derive(Default)]
pub struct Leaks {
    list: ListText,
}

impl Leaks {
    /// The leak selected.
    pub fn sel(&self) -> usize {
        self.list.sel()
    }
}

/// A snapshot's leaks, then the OOMs blamed on a leak; `n`/`N` search the timeline.
impl Component<Snap> for Leaks {
    fn view(&self) -> View {
        View::Leaks
    }

    fn handle(&mut self, a: Action, cap: &mut Snap, c: &Ctx) -> Effect {
        let items = leak_items(&cap.data);
        self.list.handle_open(
            a,
            items.len(),
            c.page,
            |i| items.get(i).map(|x| x.1.clone()),
            Effect::None,
        )
    }

    fn text(&self) -> Option<&Scroll> {
        Some(self.list.text())
    }

    fn draw(&self, cap: &Snap, _c: &Ctx, area: Rect, buf: &mut Buffer) {
        snapshot_leaks(&self.list, &cap.data, area, buf)
    }
}

/// A trace's leaks; the overview's leak findings jump here.
impl Component<TraceData> for Leaks {
    fn view(&self) -> View {
        View::Leaks
    }

    fn sync(&mut self, t: &mut TraceData, _c: &Ctx) {
        self.list.clamp(t.analysis.leaks.len());
    }

    fn handle(&mut self, a: Action, t: &mut TraceData, c: &Ctx) -> Effect {
        let n = t.analysis.leaks.len();
        self.list.handle_open(
            a,
            n,
            c.page,
            |i| leak_evidence(t, i),
            Effect::Message("no leak finding to open".into()),
        )
    }

    fn search(
        &mut self,
        t: &mut TraceData,
        _c: &Ctx,
        query: &str,
        forward: bool,
    ) -> Option<Effect> {
        let q = super::Query::new(query);
        let ls = &t.analysis.leaks;
        Some(
            self.list
                .search(query, ls.len(), forward, |i| q.matches(&leak_label(&ls[i]))),
        )
    }

    fn text(&self) -> Option<&Scroll> {
        Some(self.list.text())
    }

    fn shows(&self, j: &Jump) -> bool {
        matches!(j, Jump::Leak(_))
    }

    fn show(&mut self, j: &Jump, _t: &mut TraceData, _c: &Ctx) -> Option<String> {
        if let Jump::Leak(i) = j {
            self.list.select(*i);
        }
        None
    }

    fn draw(&self, t: &TraceData, _c: &Ctx, area: Rect, buf: &mut Buffer) {
        trace_leaks(&self.list, t, area, buf)
    }
}

/// A snapshot's leak findings and the OOMs blamed on a leak, then the selected one in full.
fn snapshot_leaks(list: &ListText, data: &Data, area: Rect, buf: &mut Buffer) {
    put(
        buf,
        area,
        0,
        "LEAKS AND GROWTH (Enter: jump to the evidence on the timeline)",
        bold(),
    );
    // No finding: judged clean, or why leaks could not be judged, wrapped.
    let mut y0 = 1;
    if data.analysis.leaks.is_empty() {
        let (text, judged) = crate::wording::no_leaks(
            &data.analysis.verdict.leak_judgement,
            "no site's survivors grow from step to step",
        );
        let st = if judged {
            Style::default().fg(Color::Green)
        } else {
            Style::default().fg(Color::Yellow)
        };
        for l in wrap(&text, area.width.saturating_sub(1) as usize) {
            put(buf, area, y0, &l, st);
            y0 += 1;
        }
    }
    let items = leak_items(data);
    let list_h = (items.len() as u16)
        .min(area.height.saturating_sub(2) / 2)
        .max(1);
    let off = list_offset(list.sel(), list_h as usize);
    for (k, (label, _)) in items.iter().enumerate().skip(off).take(list_h as usize) {
        let on = k == list.sel();
        put(
            buf,
            area,
            y0 + (k - off) as u16,
            &format!("{} {label}", if on { "›" } else { " " }),
            sel_style(on),
        );
    }
    detail(list, data, y0 + list_h + 1, area, buf);
}

/// The selected leak in full, from row `dy`: why it is one, how to fix it, where it is
/// allocated.
fn detail(list: &ListText, data: &Data, mut dy: u16, area: Rect, buf: &mut Buffer) {
    let Some(l) = data.analysis.leaks.get(list.sel()) else {
        return;
    };
    if dy >= area.height {
        return;
    }
    if let Some(crate::analysis::leaks::series::LeakSeries {
        steps: names,
        live_bytes: series,
    }) = data.leak_series.get(list.sel())
    {
        let rest = area.height - dy;
        if series.len() >= 2 && rest >= 10 {
            let chart_h = (rest / 3).clamp(4, 8);
            step_bars(
                buf,
                Rect::new(area.x, area.y + dy, area.width, chart_h),
                "bytes live from these sites at the end of each step (allocations in the log)",
                series,
                &bytes,
                (
                    names.first().map(|s| s.as_str()).unwrap_or(""),
                    names.last().map(|s| s.as_str()).unwrap_or(""),
                ),
            );
            dy += chart_h;
        }
    }
    let mut lines = vec![
        (
            format!(
                "growth from {} to {} (events {}..{}), r² {:.2}",
                crate::wording::step_label(&l.leak.first_step),
                crate::wording::step_label(&l.leak.last_step),
                l.leak.window_start_event.0,
                l.leak.window_end_event.0,
                l.leak.r2
            ),
            dim(),
        ),
        (crate::wording::leak_explanation(&l.leak), Style::default()),
        (
            format!("fix: {}", crate::wording::leak_fix(&l.leak)),
            Style::default().fg(Color::Green),
        ),
    ];
    if let Some(c) = &l.leak.cause_site {
        lines.push((format!("kept alive by {c} (the keeper's line)"), bold()));
    }
    if !l.leak.stack.is_empty() {
        lines.push((
            "allocation stack (where the leaked memory is allocated, innermost first):".into(),
            dim(),
        ));
    }
    for f in &l.leak.stack {
        lines.push((format!("  {f}"), dim()));
    }
    TextPane {
        lines,
        scroll: list.text(),
    }
    .render(
        Rect::new(area.x, area.y + dy, area.width, area.height - dy),
        buf,
    );
}

/// A snapshot's leak findings (Enter: the end of the growth window on the timeline), then the
/// OOMs the diagnosis blames on a leak: the leaks view's items, with their evidence.
pub fn leak_items(d: &Data) -> Vec<(String, Jump)> {
    let mut out = Vec::new();
    for l in &d.analysis.leaks {
        let dev = d
            .snap
            .devices
            .iter()
            .position(|x| x.index == l.device)
            .unwrap_or(0);
        out.push((
            leak_label(l),
            Jump::Event {
                dev,
                event: l.leak.window_end_event.0 as usize,
            },
        ));
    }
    for (di, dr) in d.analysis.devices.iter().enumerate() {
        for o in dr
            .ooms
            .iter()
            .filter(|o| o.cause == crate::analysis::oom::Cause::Leak)
        {
            out.push((
                format!(
                    "cuda:{} OOM at event {}: {}",
                    dr.device,
                    o.event,
                    crate::wording::oom_summary(o)
                ),
                Jump::Event {
                    dev: di,
                    event: o.event as usize,
                },
            ));
        }
    }
    out
}

/// The evidence of leak `i`: the first step whose allocations from its site survive.
fn leak_evidence(t: &TraceData, i: usize) -> Option<Jump> {
    let l = t.analysis.leaks.get(i)?;
    let (dev, series) = (t.leak_devs.get(i)?, t.leak_series.get(i)?);
    let step = series.iter().position(|&b| b > 0)?;
    let op = t.devs.get(*dev).and_then(|d| {
        t.memory.devices.get(d.mem)?.growth.iter().find_map(|g| {
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

/// A trace's leaks: allocations from earlier steps still alive at the end, each with its bytes
/// per step and its explanation.
fn trace_leaks(list: &ListText, t: &TraceData, area: Rect, buf: &mut Buffer) {
    put(
        buf,
        area,
        0,
        "LEAKS (Enter: the allocations of the first step that leaks)",
        bold(),
    );
    let ls = &t.analysis.leaks;
    if ls.is_empty() {
        let (text, judged) = crate::wording::no_leaks(
            &t.analysis.verdict.leak_judgement,
            "no site's allocations from earlier steps are still alive at the end",
        );
        let st = Style::default().fg(if judged { Color::Green } else { Color::Yellow });
        for (y, l) in wrap(&text, area.width.saturating_sub(1) as usize)
            .iter()
            .enumerate()
        {
            put(buf, area, 1 + y as u16, l, st);
        }
        return;
    }
    let list_h = (ls.len() as u16)
        .min(area.height.saturating_sub(2) / 3)
        .max(1);
    let off = list_offset(list.sel(), list_h as usize);
    for (k, l) in ls.iter().enumerate().skip(off).take(list_h as usize) {
        let on = k == list.sel();
        put(
            buf,
            area,
            1 + (k - off) as u16,
            &format!("{} {}", if on { "›" } else { " " }, leak_label(l)),
            sel_style(on),
        );
    }
    let mut y = 2 + list_h;
    let Some(l) = ls.get(list.sel()) else {
        return;
    };
    let rest = area.height.saturating_sub(y);
    if let Some(series) = t.leak_series.get(list.sel()) {
        let chart_h = (rest / 2).clamp(4, 10).min(rest);
        step_bars(
            buf,
            Rect::new(area.x, area.y + y, area.width, chart_h),
            "bytes allocated in each step at the finding's main site, still alive at the end",
            series,
            &bytes,
            t.step_names(),
        );
        y += chart_h;
    }
    // A trace's leak carries no stack (the analysis records none for traces): its
    // explanation names the sites and the loop that keeps them.
    let lines = vec![
        (crate::wording::leak_explanation(&l.leak), Style::default()),
        (
            format!("fix: {}", crate::wording::leak_fix(&l.leak)),
            Style::default().fg(Color::Green),
        ),
    ];
    text_pane(list.text(), lines, area, y, buf);
}
