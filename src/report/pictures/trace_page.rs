//! `memscope report` of a profiler trace: one self-contained HTML page, as for a snapshot.
//!
//! A trace has no allocator state to draw (no segments, no addresses to map), but it has what
//! a snapshot lacks: ops with their stacks, steps with times, and the autograd graph. The page
//! shows the verdict, per CUDA device the memory over time (allocated and reserved, the steps
//! as bands, the peak marked), the steps' figures, the ops that allocated most, the flamegraph
//! of the live memory at the peak (Python stack, then ops), the leaks and the graph growth,
//! each in the words of [`crate::wording`]. Everything comes from the analysis product
//! ([`TraceProduct`]); the page runs no pass of its own.

use std::fmt::Write as _;
use std::io::{self, Write};

use crate::analysis::trace_memory::{DeviceMemory, MemPoint};
use crate::analysis::trace_report::TraceMoment;
use crate::analysis::CountedFrom;
use crate::analysis::{DeviceReport, TraceProduct};
use crate::report::analyze::html::{esc, verdict_section, CSS};
use crate::report::chart::{byte_ticks, tick_bytes};
use crate::report::flamegraph::{self, By, Svg};
use crate::report::{Options, Render};
use crate::units::bytes;

/// Points per counter drawn (each bucket keeps its extremes).
pub const CHART_BUCKETS: usize = 1500;
/// Devices drawn (highest peak first).
pub const MAX_DEVICES: usize = 16;
/// Rows of the ops table.
pub const TOP_OPS: usize = 15;

const C_ALLOC: &str = "#e8743b";
const C_RES: &str = "#4a78c2";

/// The page's input: the trace's product (the report is its `analysis`).
pub struct Page<'a> {
    pub product: &'a TraceProduct,
}

/// A polyline of one counter, bucketed to at most `CHART_BUCKETS` min/max pairs.
fn polyline(
    tl: &[MemPoint],
    v: impl Fn(&MemPoint) -> Option<i64>,
    x: impl Fn(f64) -> f64,
    y: impl Fn(i64) -> f64,
) -> String {
    let n = tl.len();
    let mut pts = String::new();
    let per = n.div_ceil(CHART_BUCKETS).max(1);
    for chunk in tl.chunks(per) {
        let vals: Vec<(f64, i64)> = chunk
            .iter()
            .filter_map(|p| v(p).map(|b| (p.ts, b)))
            .collect();
        let (Some(lo), Some(hi)) = (
            vals.iter().min_by_key(|p| p.1),
            vals.iter().max_by_key(|p| p.1),
        ) else {
            continue;
        };
        let (a, b) = if lo.0 <= hi.0 { (lo, hi) } else { (hi, lo) };
        for p in [a, b] {
            let _ = write!(pts, "{:.1},{:.1} ", x(p.0), y(p.1));
        }
    }
    pts
}

/// The memory of one device over time: reserved and allocated, steps as bands, the peak.
fn chart(out: &mut String, p: &TraceProduct, d: &DeviceMemory) {
    let tl = &d.timeline;
    let (Some(first), Some(last)) = (tl.first(), tl.last()) else {
        out.push_str("<p class=sub>no memory totals in this trace</p>");
        return;
    };
    let (w, h, x0, y0, pw, ph) = (1150.0, 300.0, 78.0, 14.0, 1050.0, 240.0);
    let steps = &p.trace.steps;
    let t0 = steps.first().map_or(first.ts, |s| s.ts.min(first.ts));
    let t1 = steps.last().map_or(last.ts, |s| s.end().max(last.ts));
    let span = (t1 - t0).max(1.0);
    let lo = d.lowest_allocated_bytes.unwrap_or(0).min(0);
    let top = tl
        .iter()
        .map(|q| q.reserved_bytes.unwrap_or(0).max(q.allocated_bytes))
        .max()
        .unwrap_or(0)
        .max(1);
    let (tick, max) = byte_ticks((top - lo) as u64);
    let relative = d.counted_from == CountedFrom::TraceStart;
    let x = |ts: f64| x0 + pw * (ts - t0) / span;
    let y = |b: i64| y0 + ph - ph * (b - lo) as f64 / max.max(1) as f64;
    let _ = write!(
        out,
        r#"<svg class=ms-chart viewBox="0 0 {w} {h}" width="{w}" height="{h}" font-family="system-ui,sans-serif" font-size="11">"#
    );
    for (k, s) in steps.iter().enumerate() {
        let (a, b) = (x(s.ts), x(s.end()));
        let fill = if k % 2 == 0 { "#eef1f6" } else { "#f7f8fb" };
        let _ = write!(
            out,
            r#"<rect x="{a:.1}" y="{y0}" width="{:.1}" height="{ph}" fill="{fill}"><title>{}</title></rect>"#,
            (b - a).max(0.5),
            esc(&s.name)
        );
        if b - a > 26.0 {
            let _ = write!(
                out,
                r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#8a93a3">#{}</text>"##,
                (a + b) / 2.0,
                y0 + ph + 12.0,
                s.number
            );
        }
    }
    let mut v = 0u64;
    while v <= max {
        let yy = y(lo + v as i64);
        let _ = write!(
            out,
            r##"<line x1="{x0}" x2="{:.1}" y1="{yy:.1}" y2="{yy:.1}" stroke="#dde1e7"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            x0 + pw,
            x0 - 6.0,
            yy + 4.0,
            esc(&tick_label(lo, v, relative))
        );
        v += tick.max(1);
    }
    let res = polyline(tl, |q| q.reserved_bytes, x, y);
    if !res.is_empty() {
        let _ = write!(
            out,
            r#"<polyline points="{res}" fill="none" stroke="{C_RES}" stroke-width="2.4"/>"#
        );
    }
    let alloc = polyline(tl, |q| Some(q.allocated_bytes), x, y);
    let _ = write!(
        out,
        r#"<polyline points="{alloc}" fill="none" stroke="{C_ALLOC}" stroke-width="1.3"/>"#
    );
    if let Some(pk) = &d.peak {
        let (px, py) = (x(pk.ts), y(pk.allocated_bytes));
        let anchor = if px > x0 + pw * 0.7 { "end" } else { "start" };
        let dx = if anchor == "end" { -8.0 } else { 8.0 };
        let _ = write!(
            out,
            r##"<circle cx="{px:.1}" cy="{py:.1}" r="4" fill="{C_ALLOC}" stroke="#fff"/><text x="{:.1}" y="{:.1}" text-anchor="{anchor}" font-weight="600">peak {}{}</text>"##,
            px + dx,
            (py - 6.0).max(y0 + 10.0),
            bytes(pk.allocated_bytes.max(0) as u64),
            pk.top_op
                .as_deref()
                .map(|o| format!(" · {}", esc(o)))
                .unwrap_or_default()
        );
    }
    let _ = write!(
        out,
        r##"<text x="{x0}" y="{:.1}" fill="#5b6475">{:.0} ms</text><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#5b6475">{:.0} ms</text></svg>"##,
        h - 4.0,
        0.0,
        x0 + pw,
        h - 4.0,
        span / 1000.0
    );
    let _ = write!(
        out,
        r#"<div class=legend><span><i style="background:{C_ALLOC}"></i>allocated{}</span>"#,
        if relative {
            " (change from the trace's start)"
        } else {
            ""
        }
    );
    if !res.is_empty() {
        let _ = write!(
            out,
            r#"<span><i style="background:{C_RES}"></i>reserved</span>"#
        );
    }
    out.push_str("<span class=sub>bands: profiler steps</span></div>");
}

/// A tick's label: bytes, or where the figures are changes from the trace's start, a signed
/// change.
fn tick_label(lo: i64, v: u64, relative: bool) -> String {
    let b = lo + v as i64;
    match (relative, b) {
        (false, _) => tick_bytes(v),
        (true, b) if b < 0 => format!("-{}", tick_bytes(b.unsigned_abs())),
        (true, 0) => "0".into(),
        (true, b) => format!("+{}", tick_bytes(b as u64)),
    }
}

/// A step's figure: bytes, or a signed change from the trace's start.
fn step_figure(v: Option<i64>, relative: bool) -> String {
    match (v, relative) {
        (None, _) => "—".into(),
        (Some(b), false) => bytes(b.max(0) as u64),
        (Some(b), true) if b < 0 => format!("-{}", bytes(b.unsigned_abs())),
        (Some(0), true) => bytes(0),
        (Some(b), true) => format!("+{}", bytes(b as u64)),
    }
}

fn figures(out: &mut String, d: &DeviceReport) {
    use crate::analysis::figures::Bound;
    out.push_str("<table><tr><th></th><th class=n>at the end</th><th class=n>peak</th></tr>");
    for f in d
        .figures()
        .iter()
        .filter(|f| f.current.is_some() || f.peak != Bound::Unknown)
    {
        let peak = match f.peak {
            Bound::Exact(v) => bytes(v),
            Bound::AtLeast(v) => format!("≥ {}", bytes(v)),
            Bound::Unknown => "unknown".into(),
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td class=n>{}</td><td class=n>{peak}</td></tr>",
            f.counter.name(),
            f.current.map_or_else(|| "unknown".into(), bytes)
        );
    }
    let _ = write!(out, "</table><p class=sub>{} memory events</p>", d.events);
}

fn steps_table(out: &mut String, p: &TraceProduct, d: &DeviceMemory) {
    if d.steps.is_empty() {
        return;
    }
    out.push_str("<h3>Steps</h3><div class=card><table><tr><th>step</th><th class=n>allocated at start</th><th class=n>peak</th><th class=n>at end</th><th class=n>allocated in it</th><th class=n>freed in it</th><th class=n>still alive at the trace's end</th></tr>");
    let relative = d.counted_from == CountedFrom::TraceStart;
    if relative {
        out.push_str("<tr><td class=sub colspan=7>this trace records changes, not bytes in use: the allocated figures are changes from the trace's start</td></tr>");
    }
    let ob = |v: Option<i64>| step_figure(v, relative);
    for s in &d.steps {
        let name = p
            .memory
            .steps
            .iter()
            .find(|x| x.number == s.number)
            .map_or_else(|| format!("#{}", s.number), |x| x.name.clone());
        let _ = write!(out, "<tr><td>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{} ({})</td></tr>",
            esc(&name), ob(s.start_allocated_bytes), ob(s.peak_allocated_bytes), ob(s.end_allocated_bytes),
            bytes(s.allocated_bytes), bytes(s.freed_bytes), bytes(s.live_at_end_bytes), s.live_at_end_count);
    }
    out.push_str("</table></div>");
}

fn ops_table(out: &mut String, p: &TraceProduct, d: &DeviceMemory) {
    let ops = p.top_ops(d.device);
    if ops.is_empty() {
        return;
    }
    let _ = write!(out, "<h3>Top ops by bytes allocated</h3><div class=card><table><tr><th>outermost op</th><th class=n>allocated</th><th class=n>allocations</th><th class=n>alive at the peak</th></tr>");
    for o in ops.iter().take(TOP_OPS) {
        let _ = write!(out, "<tr><td><code>{}</code></td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td></tr>",
            esc(o.op.as_deref().unwrap_or("(outside any op)")), bytes(o.allocated_bytes), o.allocations, bytes(o.live_at_peak_bytes));
    }
    if ops.len() > TOP_OPS {
        let _ = write!(
            out,
            "<tr><td class=sub colspan=4>{} more ops</td></tr>",
            ops.len() - TOP_OPS
        );
    }
    out.push_str("</table></div>");
}

fn flame(out: &mut String, p: &TraceProduct, d: &DeviceMemory) {
    let Some(live) = p.live_at(d.device, TraceMoment::Peak) else {
        return;
    };
    let step = p
        .trace
        .step_at(live.ts)
        .map(|s| p.trace.step(s).name.clone());
    let moment = crate::wording::trace_moment(TraceMoment::Peak, step.as_deref());
    let folded = flamegraph::fold_trace(p, &live, By::Stack);
    let svg = Svg {
        title: crate::wording::trace_flame_title(&d.label, &moment, folded.total_bytes),
        subtitle: Some("width = bytes alive · Python stack, then ops · orange = your code".into()),
        no_javascript: true,
        width: Some(1150),
    };
    let mut buf = Vec::new();
    if svg.render(&folded, &Options::default(), &mut buf).is_ok() {
        let _ = write!(
            out,
            "<h3>Flamegraph at the peak</h3><div class=card>{}</div>",
            String::from_utf8_lossy(&buf)
        );
    }
}

fn device_section(out: &mut String, p: &TraceProduct, d: &DeviceMemory) {
    let _ = write!(out, "<section><h2>{}</h2>", esc(&d.label));
    if let Some(rep) = p
        .analysis
        .devices
        .iter()
        .find(|r| r.device as i64 == d.device.device_id)
    {
        figures(out, rep);
    }
    out.push_str("<h3>Memory over time</h3><div class=card>");
    chart(out, p, d);
    out.push_str("</div>");
    steps_table(out, p, d);
    ops_table(out, p, d);
    flame(out, p, d);
    out.push_str("</section>");
}

fn findings(out: &mut String, p: &TraceProduct) {
    let a = &p.analysis;
    if !a.leaks.is_empty() {
        out.push_str(r#"<section id="leaks"><h2>Leaks</h2>"#);
        for l in &a.leaks {
            let _ = write!(out, "<div class=card><b>cuda:{} · {}</b> ({} confidence) at <span class=user>{}</span><br>grows {} per step over {} steps; {} alive at the end<p>{}</p><p><b>fix:</b> {}</p></div>",
                l.device, esc(l.leak.kind.label()), l.leak.confidence,
                esc(&crate::wording::trace_site(&l.leak.site, l.leak.line_known)),
                bytes(l.leak.growth_bytes_per_step.max(0.0) as u64), l.leak.steps, bytes(l.leak.live_bytes),
                esc(&crate::wording::leak_explanation(&l.leak)), esc(crate::wording::leak_fix(&l.leak)));
        }
        out.push_str("</section>");
    }
    if let Some(g) = &a.graph {
        let _ = write!(
            out,
            r#"<section id="graph"><h2>Autograd graph</h2><p>{} forward nodes, {} backward nodes ({} leaf gradients accumulated), {} never consumed by a backward, over {} steps</p>"#,
            g.forward_nodes, g.backward_nodes, g.leaf_accumulations, g.unconsumed_nodes, g.steps
        );
        for f in &g.growth {
            let _ = write!(out, "<div class=card><b>{} <code>{}</code> node(s) per step never backpropagated</b>, over {} steps<p>{}</p><p><b>fix:</b> {}</p></div>",
                f.nodes_per_step, esc(&f.op), f.steps, esc(&crate::wording::graph_explanation(f)), esc(crate::wording::graph_fix(f)));
        }
        out.push_str("</section>");
    }
}

impl Render<TraceProduct> for Page<'_> {
    fn render(&self, p: &TraceProduct, _o: &Options, out: &mut dyn Write) -> io::Result<()> {
        let a = &p.analysis;
        let mut o = String::new();
        let _ = write!(o, "<!DOCTYPE html><html lang=en><head><meta charset=utf-8><meta name=viewport content=\"width=device-width\"><title>memscope — {}</title><style>{CSS}</style></head><body><main>", esc(&a.input.path));
        let _ = write!(
            o,
            r#"<h1>memscope report</h1><div class=sub>{} · profiler trace · {} · {} steps · {} memory events · {} ops</div>"#,
            esc(&a.input.path),
            bytes(a.input.bytes),
            p.trace.steps.len(),
            p.trace.memory.len(),
            p.trace.ops.len()
        );
        verdict_section(&mut o, &a.verdict);
        findings(&mut o, p);
        // Each section reads the device's events: the devices with the highest peaks get one,
        // so a trace naming thousands of devices costs a bounded number of passes.
        let mut cuda: Vec<&DeviceMemory> = p
            .memory
            .devices
            .iter()
            .filter(|d| d.device.is_cuda())
            .collect();
        cuda.sort_by_key(|d| {
            std::cmp::Reverse(d.peak.as_ref().map_or(i64::MIN, |k| k.allocated_bytes))
        });
        for d in cuda.iter().take(MAX_DEVICES) {
            device_section(&mut o, p, d);
        }
        if cuda.len() > MAX_DEVICES {
            let _ = write!(
                o,
                "<p class=sub>{}</p>",
                esc(&crate::wording::devices_left_out(
                    cuda.len() - MAX_DEVICES,
                    MAX_DEVICES
                ))
            );
        }
        if !a.notes.is_empty() {
            o.push_str(r#"<section id="notes"><h2>Notes</h2><ul class="notes">"#);
            for n in &a.notes {
                let _ = write!(o, "<li>{}</li>", esc(&crate::wording::note(n)));
            }
            o.push_str("</ul></section>");
        }
        let _ = write!(o, "<p class=sub>memscope {} · sizes in binary units (KiB, MiB, GiB) · lines of a trace are those current when a frame was entered</p></main></body></html>", env!("CARGO_PKG_VERSION"));
        out.write_all(o.as_bytes())?;
        writeln!(out)
    }
}
