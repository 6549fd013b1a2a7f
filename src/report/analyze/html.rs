//! One self-contained HTML page to attach to a bug report or a chat thread.
//!
//! The person who has to act on an OOM is often not the one who ran memscope, and may not
//! have it installed; a single file that opens in any browser, offline, carries the whole
//! case: the verdict, the memory curve with the peak and OOM marked, the allocator's layout at
//! the moment that mattered, the sites, the leaks and the flamegraph. Everything is inline
//! (CSS, SVG drawn here, a few lines of script for the chart's hover readout) so it works from
//! an email attachment or an air-gapped cluster. The page summarises: a million-event log is
//! drawn as ~2000 buckets of min/max, and the allocator map shows the largest segments, so the
//! page stays small and quick however large the capture.

use std::fmt::Write as _;
use std::io::{self, Write};

use crate::analysis::leaks::Leak;
use crate::analysis::replay::{State, Timeline};
use crate::analysis::sites::SiteTotal;
use crate::analysis::steps::Step;
use crate::analysis::Analyzed;
use crate::analysis::{Analysis, DeviceReport, StepReport};
use crate::model::{BlockState, Device, Snapshot};
use crate::report::chart::{self, Anchor};
use crate::report::flamegraph::{self, At, By, Svg};
use crate::report::{Options, Render};
use crate::units::bytes;

/// Points per counter in the memory chart (each bucket keeps its min and max).
pub const CHART_BUCKETS: usize = 2000;
/// Segments drawn in the allocator map (largest first); the rest are summarised.
pub const MAP_SEGMENTS: usize = 32;

/// The HTML view needs the replayed timelines and the snapshot besides the analysis.
pub struct Html<'a> {
    pub snap: &'a Snapshot,
    /// One per device, in the snapshot's device order.
    /// The analysis product: the report, and per device the timeline, steps and classifier
    /// the charts, the allocator map and the flamegraph are drawn from.
    pub product: &'a Analyzed,
    /// Sections the caller built, after the devices' sections and before the notes
    /// (`memscope report --batch`'s capacity plan), HTML already escaped there; empty for none.
    pub extra: &'a str,
}

/// Escapes text for HTML (the one rule is [`crate::escape::html`]).
pub use crate::escape::html as esc;

pub(crate) const CSS: &str = r#"
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
main{max-width:1320px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:22px;margin:8px 0 2px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d5d9e0;padding-bottom:4px}
h3{font-size:15px;margin:16px 0 6px}
.sub{color:#5b6475;font-size:13px}
.verdict{padding:12px 16px;border-radius:6px;font-size:16px;margin:12px 0;border-left:6px solid}
.verdict.ok{background:#e9f7ee;border-color:#2e9d57}.verdict.bad{background:#fdecea;border-color:#d93025}.verdict.unjudged{background:#fff7e0;border-color:#b8860b}
table{border-collapse:collapse;font-size:13px;background:#fff}
td,th{padding:3px 10px;border-bottom:1px solid #e6e8ec;text-align:left;vertical-align:top}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
code{font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
.card{background:#fff;border:1px solid #dde1e7;border-radius:6px;padding:10px 12px;margin:8px 0;overflow-x:auto}
.ms-chart{display:block;max-width:1150px}.ms-chart text{fill:#3b4252}.ms-leak text{font:11px system-ui,sans-serif}
.legend svg{vertical-align:1px}
.legend span{display:inline-block;margin-right:14px;font-size:12px}.legend span:not(.sub){white-space:nowrap}
.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-2px;border-radius:2px}
#ms-readout{font:12px ui-monospace,monospace;color:#3b4252;min-height:1.4em}
.segrow{display:flex;align-items:center;gap:8px;margin:1px 0;height:14px}
.segrow .bar{flex:1;min-width:0;height:12px}.segrow .bar svg{display:block;min-width:1px}
.segrow .lbl{width:250px;flex:none;font:11px ui-monospace,monospace;color:#3b4252;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.user{color:#b4480f;font-weight:600}.lib{color:#6b7280}
ul.notes li{color:#4b5563;font-size:13px}
details summary{cursor:pointer;color:#374151}
"#;

/// Colours of the three counters.
const C_ALLOC: &str = "#e8743b";
const C_ACTIVE: &str = "#2e9d57";
const C_RES: &str = "#4a78c2";

/// A chart's x coordinate for event `i`.
fn xpos(i: usize, n: usize, x0: f64, w: f64) -> f64 {
    if n <= 1 {
        x0
    } else {
        x0 + w * i as f64 / (n - 1) as f64
    }
}

/// How one counter is drawn.
struct Curve<'a> {
    name: &'static str,
    values: &'a [u64],
    colour: &'static str,
    /// `""`: solid.
    dash: &'static str,
    width: f64,
    band: bool,
}

/// The three counters, in drawing order. Where two are equal their lines coincide, so none may
/// hide another: reserved is drawn wide, allocated narrow over it (reserved shows as an edge
/// on both sides), and active (usually equal to allocated) dashed on top, allocated showing
/// through its gaps.
fn curves(s: &crate::analysis::replay::Series) -> [Curve<'_>; 3] {
    [
        Curve {
            name: "reserved",
            values: &s.reserved,
            colour: C_RES,
            dash: "",
            width: 3.2,
            band: true,
        },
        Curve {
            name: "allocated",
            values: &s.allocated,
            colour: C_ALLOC,
            dash: "",
            width: 1.3,
            band: true,
        },
        Curve {
            name: "active",
            values: &s.active,
            colour: C_ACTIVE,
            dash: "7,5",
            width: 1.4,
            band: false,
        },
    ]
}

/// Text of the chart: monospace so that its width is known (see [`chart::CHAR_EM`]).
fn label(
    out: &mut String,
    class: &str,
    text: &str,
    size: f64,
    (x, y, a): (f64, f64, Anchor),
    style: &str,
) {
    let _ = write!(
        out,
        r#"<text class="{class}" x="{x:.1}" y="{y:.1}" font-size="{size}" text-anchor="{}"{}>{}</text>"#,
        a.svg(),
        if style.is_empty() {
            String::new()
        } else {
            format!(r#" style="{style}""#)
        },
        esc(text)
    );
}

/// Memory-over-time chart: min/max envelopes of allocated and reserved per bucket, active as a
/// dashed line. Every label sits in a margin (axes left and below, steps and markers above), so
/// none covers a curve; round ticks on both axes.
fn chart(out: &mut String, dev: &Device, tl: &Timeline, st: &[Step]) {
    let n = tl.len();
    if n == 0 {
        out.push_str("<p class=sub>No allocation history in this capture: no chart.</p>");
        return;
    }
    let (w, ph, fs, fs_step) = (900.0, 250.0, 12.0, 11.0);
    let b = CHART_BUCKETS.min(n);
    let s = &tl.series;
    let (ystep, ytop) = chart::byte_ticks(tl.peaks.reserved.bytes.max(tl.peaks.allocated.bytes));
    let yticks: Vec<(u64, String)> = (0..=ytop / ystep)
        .map(|k| (k * ystep, chart::tick_bytes(k * ystep)))
        .collect();
    let x0 = yticks
        .iter()
        .map(|t| chart::text_width(&t.1, fs))
        .fold(30.0, f64::max)
        + 12.0;
    let pw = w - x0 - 16.0;
    let xe = |i: usize| xpos(i * b / n, b, x0, pw);

    // Markers above the plot: the OOMs (latest first), then the peak.
    let mut marks: Vec<(chart::Marker, &str, String)> = Vec::new();
    for o in tl.ooms.iter().rev() {
        let text = format!("OOM {} (event {})", bytes(o.rounded_bytes), o.event.0);
        let m = chart::Marker {
            x: xe(o.event.0 as usize),
            text: text.clone(),
        };
        marks.push((m, "#d93025", format!("oom-{}", o.event.0)));
    }
    if let Some(p) = tl.peaks.allocated.event {
        let text = format!("peak {} (event {})", bytes(tl.peaks.allocated.bytes), p.0);
        let m = chart::Marker {
            x: xe(p.0 as usize),
            text,
        };
        marks.push((m, "#7c3aed", "peak".into()));
    }
    let lane_h = fs + 4.0;
    let only: Vec<chart::Marker> = marks.iter().map(|m| m.0.clone()).collect();
    let placed = chart::place_markers(&only, fs, lane_h, 3, 2.0, w - 2.0);
    let lanes = placed
        .iter()
        .flatten()
        .map(|p| p.lane + 1)
        .max()
        .unwrap_or(0);
    let iters: Vec<&Step> = st.iter().filter(|s| s.is_iteration()).collect();
    let step_h = if iters.is_empty() { 0.0 } else { fs_step + 6.0 };
    // The markers' lanes sit above the steps' lane, which sits on the plot.
    // At least room for the top y tick's label, which is centred on the plot's top edge.
    let y0 = (4.0 + lanes as f64 * lane_h + step_h).max(fs);
    let origin = y0 - step_h;
    let yb = y0 + ph;
    let t0 = dev.events.iter().find_map(|e| e.time_us());
    let xt = chart::event_ticks(
        n,
        (pw / (chart::text_width(&format!("event {n}"), fs) + 28.0)) as usize,
    );
    let times = chart::time_labels(
        &xt.iter()
            .map(|&i| Some(dev.events.get(i)?.time_us()? - t0?))
            .collect::<Vec<_>>(),
    );
    let h = yb
        + if times.iter().any(|t| t.is_some()) {
            36.0
        } else {
            22.0
        };
    let yp = |v: u64| yb - ph * v as f64 / ytop as f64;
    let _ = write!(
        out,
        r#"<svg class="ms-chart" id="ms-chart-{}" viewBox="0 0 {w} {h:.0}" width="100%" preserveAspectRatio="xMidYMid meet" role="img" font-family='{}'>"#,
        dev.index,
        chart::FONT
    );
    let _ = write!(
        out,
        r##"<rect class="ms-plot" x="{x0:.1}" y="{y0:.1}" width="{pw:.1}" height="{ph}" fill="#fff" stroke="#c5cad3"/>"##
    );
    for (v, t) in &yticks {
        let y = yp(*v);
        let _ = write!(
            out,
            r##"<line x1="{x0:.1}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="#e3e6ea"/>"##,
            x0 + pw
        );
        label(out, "ms-ytick", t, fs, (x0 - 6.0, y + 4.0, Anchor::End), "");
    }
    // Steps: faint dashed lines in the plot, about 60 at most, labelled above it where a
    // label fits between its neighbours and the markers' leaders.
    let every = (iters.len() / 60).max(1);
    let mut last_box: Option<chart::Rect> = None;
    for s in iters.iter().step_by(every) {
        let x = xe(s.start_event.0 as usize);
        let _ = write!(
            out,
            r##"<line class="ms-step" x1="{x:.1}" x2="{x:.1}" y1="{y0:.1}" y2="{yb:.1}" stroke="#9aa3b2" stroke-dasharray="2,3" stroke-width="0.7"><title>{}</title></line>"##,
            esc(&s.name)
        );
        let bx = chart::text_box(&s.name, fs_step, x + 2.0, y0 - 4.0, Anchor::Start);
        let fits = bx.x2 <= w - 2.0
            && last_box.is_none_or(|l| !bx.hits(&l, 10.0))
            && only.iter().all(|m| m.x < bx.x1 - 2.0 || m.x > bx.x2 + 2.0);
        if fits {
            label(
                out,
                "ms-step-label",
                &s.name,
                fs_step,
                (x + 2.0, y0 - 4.0, Anchor::Start),
                "fill:#5b6475",
            );
            last_box = Some(bx);
        }
    }
    // The curves: each bucket's min-max band, its max as a line.
    let mut data = String::from("[");
    for c in curves(s) {
        let (name, v, col, dash, band) = (c.name, c.values, c.colour, c.dash, c.band);
        let mut hi = Vec::with_capacity(b);
        let mut lo = Vec::with_capacity(b);
        for k in 0..b {
            let (a, e) = (k * n / b, ((k + 1) * n / b).max(k * n / b + 1).min(n));
            let sl = &v[a..e];
            let x = xpos(k, b, x0, pw);
            hi.push(format!(
                "{x:.1},{:.1}",
                yp(sl.iter().copied().max().unwrap_or(0))
            ));
            lo.push(format!(
                "{x:.1},{:.1}",
                yp(sl.iter().copied().min().unwrap_or(0))
            ));
        }
        lo.reverse();
        if band {
            let _ = write!(
                out,
                r#"<polygon class="ms-band" data-series="{name}" points="{} {}" fill="{col}" fill-opacity="0.22" stroke="none"><title>{name}</title></polygon>"#,
                hi.join(" "),
                lo.join(" ")
            );
        }
        let _ = write!(
            out,
            r#"<polyline class="ms-series" data-series="{name}" points="{}" fill="none" stroke="{col}" stroke-width="{}"{}><title>{name}</title></polyline>"#,
            hi.join(" "),
            c.width,
            if dash.is_empty() {
                String::new()
            } else {
                format!(r#" stroke-dasharray="{dash}""#)
            }
        );
    }
    // Hover data: per bucket [first event, allocated max, active max, reserved max].
    for k in 0..b {
        let (a, e) = (k * n / b, ((k + 1) * n / b).max(k * n / b + 1).min(n));
        let m = |v: &Vec<u64>| v[a..e].iter().copied().max().unwrap_or(0);
        let _ = write!(
            data,
            "{}[{a},{},{},{}]",
            if k > 0 { "," } else { "" },
            m(&s.allocated),
            m(&s.active),
            m(&s.reserved)
        );
    }
    data.push(']');
    // Markers: a line through the plot, its label in its lane above, joined by the line.
    // Drawn in reverse so that the OOMs' lines lie over the peak's where they meet.
    for ((m, col, id), p) in marks.iter().zip(&placed).rev() {
        let top = match p {
            Some(p) => origin - (p.lane + 1) as f64 * lane_h + 2.0,
            None => origin,
        };
        let _ = write!(
            out,
            r#"<line class="ms-marker" data-for="{id}" x1="{x:.1}" x2="{x:.1}" y1="{top:.1}" y2="{yb:.1}" stroke="{col}" stroke-width="1.6"><title>{}</title></line>"#,
            esc(&m.text),
            x = m.x
        );
        if let Some(p) = p {
            let y = origin - p.lane as f64 * lane_h - fs * 0.25 - 2.0;
            let _ = write!(
                out,
                r#"<text class="ms-marker-label" data-for="{id}" x="{:.1}" y="{y:.1}" font-size="{fs}" text-anchor="{}" style="fill:{col};font-weight:700">{}</text>"#,
                p.x,
                p.anchor.svg(),
                esc(&m.text)
            );
        }
    }
    // X axis: round event indices; below them, seconds since the first event where the log
    // has times, with the decimals that tell neighbouring ticks apart.
    for (&i, t) in xt.iter().zip(&times) {
        let x = xe(i);
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" x2="{x:.1}" y1="{yb:.1}" y2="{:.1}" stroke="#9aa3b2"/>"##,
            yb + 4.0
        );
        for (class, text, y) in [
            ("ms-xtick", Some(format!("event {i}")), yb + 17.0),
            ("ms-xtime", t.clone(), yb + 31.0),
        ] {
            let Some(text) = text else { continue };
            let half = chart::text_width(&text, fs) / 2.0;
            let x = x.clamp(half + 1.0, w - half - 1.0);
            label(out, class, &text, fs, (x, y, Anchor::Middle), "");
        }
    }
    let _ = write!(
        out,
        r##"<line class="ms-cursor" x1="0" x2="0" y1="{y0:.1}" y2="{yb:.1}" stroke="#111" stroke-width="0.6" visibility="hidden"/></svg>"##
    );
    let swatch = |col: &str, dash: &str| {
        format!(
            r#"<svg width="26" height="10"><line x1="0" x2="26" y1="5" y2="5" stroke="{col}" stroke-width="2.5"{}/></svg>"#,
            if dash.is_empty() {
                String::new()
            } else {
                format!(r#" stroke-dasharray="{dash}""#)
            }
        )
    };
    out.push_str(r#"<div class="legend">"#);
    for c in curves(s) {
        let _ = write!(out, "<span>{} {}</span>", swatch(c.colour, c.dash), c.name);
    }
    let _ = write!(
        out,
        r#"<span class=sub>shaded: each bucket's min–max ({b} buckets over {n} events); dotted lines are steps; x axis: event index{}</span></div><div id="ms-readout-{}" class="ms-readout sub">&nbsp;</div>"#,
        if t0.is_some() {
            " and seconds since the first event"
        } else {
            ""
        },
        dev.index
    );
    let _ = write!(
        out,
        r#"<script type="application/json" class="ms-data" data-dev="{}" data-n="{n}" data-x0="{x0:.1}" data-pw="{pw:.1}" data-w="{w}">{data}</script>"#,
        dev.index
    );
}

/// Allocator map: each segment a bar, its blocks coloured by state, free space left pale.
fn allocator_map(out: &mut String, snap: &Snapshot, state: &State) {
    let mut segs: Vec<_> = state.segments.values().collect();
    segs.sort_by(|a, b| b.size.cmp(&a.size).then(a.address.cmp(&b.address)));
    let total = segs.len();
    let maxsize = segs.first().map(|s| s.size).unwrap_or(1).max(1);
    let bw = 1000.0;
    let _ = write!(
        out,
        r##"<div class="legend"><span><i style="background:{C_ALLOC}"></i>allocated (user site)</span><span><i style="background:#c08a6c"></i>allocated (library site)</span><span><i style="background:#9b59b6"></i>freed, pending on a stream</span><span><i style="background:#e4e7eb;border:1px solid #c5cad3"></i>free (cached)</span><span class=sub>bar length ∝ segment size (largest {} of {total} segments)</span></div>"##,
        MAP_SEGMENTS.min(total)
    );
    // Bars are sized in percent of the row, so their lengths stay proportional to the segments'
    // sizes at any page width; `bw` reference units are the largest segment's length.
    for s in segs.iter().take(MAP_SEGMENTS) {
        let width = bw * s.size as f64 / maxsize as f64;
        let sc = width / s.size.max(1) as f64;
        let free: u64 = s.free_ranges().map(|(a, b)| b - a).sum();
        let _ = write!(
            out,
            r##"<div class="segrow" data-bytes="{}"><div class="lbl" title="0x{:x}">{} {}{}{} · {} free</div><div class="bar"><svg width="{:.3}%" height="12" viewBox="0 0 {width:.3} 12" preserveAspectRatio="none"><rect width="{width:.3}" height="12" fill="#e4e7eb" stroke="#c5cad3" vector-effect="non-scaling-stroke"/>"##,
            s.size,
            s.address,
            bytes(s.size),
            s.pool.name(),
            if s.stream != 0 {
                format!(" stream {}", s.stream)
            } else {
                String::new()
            },
            if s.expandable { " expandable" } else { "" },
            bytes(free),
            100.0 * width / bw,
        );
        // Blocks narrower than a pixel are merged into runs so huge segments stay light.
        let mut run: Option<(f64, f64, &str)> = None;
        let flush = |out: &mut String, r: (f64, f64, &str)| {
            let _ = write!(
                out,
                r#"<rect x="{:.3}" width="{:.3}" height="12" fill="{}"/>"#,
                r.0,
                (r.1 - r.0).max(0.5),
                r.2
            );
        };
        for b in s.blocks.values() {
            let x1 = (b.address - s.address) as f64 * sc;
            let x2 = x1 + b.size as f64 * sc;
            let col = if b.state == BlockState::ActivePendingFree {
                "#9b59b6"
            } else if snap.stacks.user_frame(b.stack).is_some() {
                C_ALLOC
            } else {
                "#c08a6c"
            };
            if x2 - x1 >= 3.0 {
                if let Some(r) = run.take() {
                    flush(out, r);
                }
                let site = crate::analysis::sites::Site::of_stack(&snap.stacks, b.stack)
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| "no stack".into());
                let _ = write!(
                    out,
                    r##"<rect x="{x1:.3}" width="{:.3}" height="12" fill="{col}" stroke="#fff" stroke-width="0.6" vector-effect="non-scaling-stroke"><title>{} at 0x{:x}: {}</title></rect>"##,
                    x2 - x1,
                    bytes(b.size),
                    b.address,
                    esc(&site)
                );
                continue;
            }
            run = match run {
                Some((a, e, c)) if c == col && x1 - e < 1.0 => Some((a, x2, c)),
                Some(r) => {
                    flush(out, r);
                    Some((x1, x2, col))
                }
                None => Some((x1, x2, col)),
            };
        }
        if let Some(r) = run.take() {
            flush(out, r);
        }
        out.push_str("</svg></div></div>");
    }
    if total > MAP_SEGMENTS {
        let rest: u64 = segs.iter().skip(MAP_SEGMENTS).map(|s| s.size).sum();
        let _ = write!(
            out,
            "<p class=sub>and {} smaller segments holding {}</p>",
            total - MAP_SEGMENTS,
            bytes(rest)
        );
    }
}

fn sites_table(out: &mut String, title: &str, sites: &[SiteTotal]) {
    if sites.is_empty() {
        return;
    }
    let _ = write!(
        out,
        "<h3>{}</h3><table><tr><th class=n>bytes</th><th class=n>blocks</th><th>site</th></tr>",
        esc(title)
    );
    for s in sites {
        let site = crate::wording::site_label(s);
        let stack = crate::wording::stack_lines(&s.stack)
            .map(|f| esc(&f))
            .collect::<Vec<_>>()
            .join("<br>");
        let _ = write!(
            out,
            r#"<tr><td class=n>{}</td><td class=n>{}</td><td><details><summary class="{}">{}</summary><code>{stack}</code></details></td></tr>"#,
            bytes(s.bytes),
            s.blocks,
            if s.user_code { "user" } else { "lib" },
            esc(&site)
        );
    }
    out.push_str("</table>");
}

/// Per-step survivors with the leak's growth window highlighted.
fn leak_chart(out: &mut String, it: &[&StepReport], l: &Leak) {
    if it.is_empty() {
        return;
    }
    let (w, h) = (900.0, 140.0);
    let max = it
        .iter()
        .map(|s| s.end_allocated_bytes)
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let bw = (w - 80.0) / it.len() as f64;
    let _ = write!(
        out,
        r#"<svg class="ms-chart ms-leak" viewBox="0 0 {w} {}" width="{w}" height="{}">"#,
        h + 20.0,
        h + 20.0
    );
    let _ = write!(
        out,
        r#"<text x="4" y="12">{}</text><text x="4" y="{h}">0 B</text>"#,
        bytes(max as u64)
    );
    for (k, s) in it.iter().enumerate() {
        // Trace steps carry no event indices: every step is in the window there.
        let in_window = match (s.start_event, s.end_event) {
            (Some(a), Some(b)) => b >= l.window_start_event.0 && a <= l.window_end_event.0,
            _ => true,
        };
        let bh = (h - 10.0) * s.end_allocated_bytes as f64 / max;
        let _ = write!(
            out,
            r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{bh:.1}" fill="{}"><title>{}: {} allocated at its end</title></rect>"#,
            70.0 + k as f64 * bw,
            h - bh,
            (bw - 1.0).max(0.5),
            if in_window { C_ALLOC } else { "#b8c0cc" },
            esc(&s.name),
            bytes(s.end_allocated_bytes)
        );
    }
    let _ = write!(
        out,
        r#"<text x="70" y="{}">memory allocated at the end of each step (orange: the leak's growth window, {} → {})</text></svg>"#,
        h + 16.0,
        esc(&crate::wording::step_label(&l.first_step)),
        esc(&crate::wording::step_label(&l.last_step))
    );
}

const JS: &str = r#"
(function(){
  function fmt(n){ var u=['B','KiB','MiB','GiB','TiB']; var i=0; while(n>=1024&&i<u.length-1){n/=1024;i++;} return (i?n.toFixed(1):n)+' '+u[i]; }
  document.querySelectorAll('script.ms-data').forEach(function(el){
    var d = JSON.parse(el.textContent), dev = el.getAttribute('data-dev');
    var x0 = +el.getAttribute('data-x0'), pw = +el.getAttribute('data-pw'), w = +el.getAttribute('data-w');
    var svg = document.getElementById('ms-chart-' + dev), out = document.getElementById('ms-readout-' + dev);
    if (!svg || !out || !d.length) return;
    var cur = svg.querySelector('.ms-cursor');
    svg.addEventListener('mousemove', function(ev){
      var r = svg.getBoundingClientRect(), x = (ev.clientX - r.left) * w / r.width;
      var k = Math.round((x - x0) / pw * (d.length - 1));
      if (k < 0 || k >= d.length) { cur.setAttribute('visibility','hidden'); return; }
      var p = d[k], cx = x0 + pw * k / Math.max(1, d.length - 1);
      cur.setAttribute('x1', cx); cur.setAttribute('x2', cx); cur.setAttribute('visibility','visible');
      out.textContent = 'from event ' + p[0] + ': allocated ' + fmt(p[1]) + ' · active ' + fmt(p[2]) + ' · reserved ' + fmt(p[3]) + ' (bucket max)';
    });
  });
  document.body.setAttribute('data-ms-js', 'ok');
})();
"#;

fn device_figures(out: &mut String, d: &DeviceReport) {
    use crate::analysis::figures::Bound;
    let ob = |v: Option<u64>| v.map(bytes).unwrap_or_else(|| "—".into());
    out.push_str("<table><tr><th></th><th class=n>current</th><th class=n>peak</th></tr>");
    for f in d.figures() {
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
    let _ = write!(
        out,
        "</table><p class=sub>{} reserved but free; largest free block {}; {} segments; {} events</p>",
        ob(d.free_reserved_bytes),
        ob(d.largest_free_block_bytes),
        d.segments.unwrap_or(0) + d.expandable_segments.unwrap_or(0),
        d.events
    );
}

impl Html<'_> {
    fn device_section(&self, out: &mut String, a: &Analysis, d: &DeviceReport) {
        let snap = self.snap;
        let Some(pos) = self.product.position(snap, d.device) else {
            return;
        };
        let Some((dev, p)) = self.product.device(snap, pos) else {
            return;
        };
        let tl = &p.timeline;
        let st: &[Step] = if tl.is_empty() { &[] } else { &p.steps };
        let _ = write!(
            out,
            r#"<section id="memory-{0}" class="memory"><h2>Memory over time — cuda:{0}</h2>"#,
            d.device
        );
        device_figures(out, d);
        out.push_str(r#"<div class="card">"#);
        chart(out, dev, tl, st);
        out.push_str("</div></section>");
        for o in &d.ooms {
            let _ = write!(
                out,
                r#"<section class="oom"><h3>OOM at event {}: {} requested — cause: {}</h3><p>{}</p><ul>"#,
                o.event,
                bytes(o.rounded_bytes),
                o.cause.name(),
                esc(&crate::wording::oom_summary(o))
            );
            for e in crate::wording::oom_evidence(o) {
                let _ = write!(out, "<li>{}</li>", esc(&e));
            }
            for r in &o.remedies {
                let _ = write!(
                    out,
                    "<li><b>option:</b> {} — <span class=sub>{}</span></li>",
                    esc(crate::wording::remedy_action(r.kind)),
                    esc(&crate::wording::remedy_assessment(o, r))
                );
            }
            out.push_str("</ul></section>");
        }
        // The moment that matters: the last OOM, else the allocated peak, else the end.
        let at = if tl.ooms.is_empty() {
            At::Peak
        } else {
            At::Oom
        };
        let m =
            self.product
                .resolve(snap, pos, at)
                .unwrap_or(crate::analysis::analyzed::Resolved {
                    asked: At::End,
                    event: None,
                });
        let label = flamegraph::moment_label(m);
        let state = self.product.state_at(snap, pos, m);
        let _ = write!(
            out,
            r#"<section id="allocator-map-{0}" class="allocator-map"><h2>Allocator map at {1} — cuda:{0}</h2><div class="card">"#,
            d.device,
            esc(&label)
        );
        allocator_map(out, snap, &state);
        out.push_str("</div></section>");
        let _ = write!(
            out,
            r#"<section id="sites-{}" class="sites"><h2>Top sites</h2>"#,
            d.device
        );
        if let Some(o) = d.ooms.last() {
            sites_table(out, "held at the OOM", &o.top_sites);
        } else {
            sites_table(out, "live at the allocated peak", &d.top_sites_at_peak);
        }
        sites_table(out, "live at the end of the capture", &d.top_sites);
        out.push_str("</section>");
        let found: Vec<&Leak> = a
            .leaks
            .iter()
            .filter(|l| l.device == d.device)
            .map(|l| &l.leak)
            .collect();
        if !found.is_empty() {
            let dev_steps: Vec<&StepReport> =
                a.steps.iter().filter(|s| s.device == d.device).collect();
            let _ = write!(
                out,
                r#"<section id="leaks-{}" class="leaks"><h2>Leak findings</h2>"#,
                d.device
            );
            for l in found {
                let site = l
                    .site
                    .as_ref()
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| "(no stack recorded)".into());
                let _ = write!(
                    out,
                    r#"<div class="card"><h3>{} at <span class="user">{}</span> <span class=sub>({} confidence)</span></h3><p>{} live in {} blocks, growing {} per step over {} steps.</p><p>{}</p><p><b>fix:</b> {}</p>"#,
                    esc(l.kind.id()),
                    esc(&site),
                    esc(l.confidence.name()),
                    bytes(l.live_bytes),
                    l.count,
                    bytes(l.growth_bytes_per_step.max(0.0) as u64),
                    l.steps,
                    esc(&crate::wording::leak_explanation(l)),
                    esc(crate::wording::leak_fix(l))
                );
                leak_chart(out, &dev_steps, l);
                out.push_str("</div>");
            }
            out.push_str("</section>");
        }
        pools_section(out, d);
        reserved_section(out, d);
        for (title, rows) in [
            ("Allocations by user label (user_metadata)", &d.user_labels),
            (
                "Allocations by compiled region (compile_context)",
                &d.compiled_regions,
            ),
        ] {
            if rows.is_empty() {
                continue;
            }
            let _ = write!(
                out,
                r#"<section class="labels"><h2>{title}</h2><table><tr><th>label</th><th class=n>allocations</th><th class=n>allocated</th><th class=n>at peak</th><th class=n>at end</th></tr>"#
            );
            for r in rows.iter() {
                let _ = write!(
                    out,
                    "<tr><td>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td></tr>",
                    // Control characters made visible too: the page is also read as text.
                    esc(&crate::escape::term(&r.label)),
                    r.allocations,
                    bytes(r.allocated_bytes),
                    r.live_bytes_at_peak.map(bytes).unwrap_or_else(|| "?".into()),
                    bytes(r.live_bytes_at_end)
                );
            }
            out.push_str("</table></section>");
        }
        if let Some(c) = a.categories.as_ref().filter(|c| c.device == d.device) {
            let _ = write!(
                out,
                r#"<section id="categories-{}" class="categories"><h2>What the memory was for, at the {}</h2><table><tr><th>category</th><th class=n>bytes</th><th>rule</th></tr>"#,
                d.device,
                c.at.name()
            );
            for b in &c.categories.basis {
                let _ = write!(
                    out,
                    "<tr><td>{}</td><td class=n>{}</td><td class=sub>{}</td></tr>",
                    b.category.name(),
                    bytes(b.bytes),
                    esc(crate::wording::category_rule(b.rule))
                );
            }
            out.push_str("</table><p class=sub>inferred from stacks and lifetimes: heuristics, each with the rule that filled it</p></section>");
        }
        let folded = flamegraph::fold(snap, dev, &state, By::Stack, &p.classifier);
        let mut svg = Vec::new();
        let title = format!(
            "Live memory on cuda:{} at {} ({})",
            d.device,
            label,
            bytes(folded.total_bytes)
        );
        let picture = Svg {
            title,
            subtitle: Some(
                "width = bytes held; orange = your code, grey = PyTorch and libraries".into(),
            ),
            no_javascript: true,
            width: Some(1240),
        };
        let _ = write!(
            out,
            r#"<section id="flamegraph-{}" class="flamegraph"><h2>Flamegraph of live memory at {}</h2><div class="card">"#,
            d.device,
            esc(&label)
        );
        if picture
            .render(&folded, &Options::default(), &mut svg)
            .is_ok()
        {
            let s = String::from_utf8_lossy(&svg);
            // Inline it: drop the XML prolog and DOCTYPE, which are not allowed inside HTML.
            // The script is left out, so its `onload` hook must go too.
            let body = s.find("<svg").map(|i| &s[i..]).unwrap_or("");
            out.push_str(&body.replacen(r#" onload="init(evt)""#, "", 1));
        }
        out.push_str("</div></section>");
    }
}

impl Render<Analysis> for Html<'_> {
    fn render(&self, a: &Analysis, opts: &Options, out: &mut dyn Write) -> io::Result<()> {
        self.page(a, opts, self.extra, out)
    }
}

impl Html<'_> {
    /// The page, with `extra` (see [`Html::extra`]) after the devices' sections.
    fn page(
        &self,
        a: &Analysis,
        _opts: &Options,
        extra: &str,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let mut o = String::new();
        let _ = write!(
            o,
            "<!DOCTYPE html><html lang=en><head><meta charset=utf-8><meta name=viewport content=\"width=device-width\"><title>memscope — {}</title><style>{CSS}</style><script>window.addEventListener('error',function(e){{document.documentElement.setAttribute('data-ms-js-error',String(e.message))}});</script></head><body><main>",
            esc(&a.input.path)
        );
        let _ = write!(
            o,
            r#"<h1>memscope report</h1><div class=sub>{} · {} · {} · {} device(s)</div>"#,
            esc(&a.input.path),
            a.input.kind,
            bytes(a.input.bytes),
            a.devices.len()
        );
        verdict_section(&mut o, &a.verdict);
        ranked_section(&mut o, a);
        // The device whose OOM ended the run comes first, right under the verdict that names it.
        let oom_device = a.last_oom().map(|(d, _)| d);
        let mut order: Vec<&crate::analysis::DeviceReport> = a.devices.iter().collect();
        order.sort_by_key(|d| Some(d.device) != oom_device);
        for d in order {
            self.device_section(&mut o, a, d);
        }
        o.push_str(extra);
        if !a.notes.is_empty() {
            o.push_str(r#"<section id="notes"><h2>Notes</h2><ul class="notes">"#);
            for n in &a.notes {
                let _ = write!(o, "<li>{}</li>", esc(&crate::wording::note(n)));
            }
            o.push_str("</ul></section>");
        }
        let _ = write!(o, "<p class=sub>memscope {} · sizes in binary units (KiB, MiB, GiB)</p></main><script>{JS}</script></body></html>", env!("CARGO_PKG_VERSION"));
        out.write_all(o.as_bytes())?;
        writeln!(out)
    }
}

/// The device's memory pools, where one is private (a capture with the default pool alone
/// reads as before): the same figures and sentences as the text report.
fn pools_section(out: &mut String, d: &DeviceReport) {
    use crate::analysis::pools::PoolKind;
    if !d.pools.iter().any(|p| p.is_private()) {
        return;
    }
    let _ = write!(
        out,
        r#"<section class="pools"><h2>Memory pools</h2><table><tr><th>pool id</th><th>kind</th><th class=n>reserved</th><th class=n>allocated</th><th class=n>peak reserved</th><th class=n>segments</th></tr>"#
    );
    for p in &d.pools {
        let peak = if p.peak_reserved_exact {
            bytes(p.peak_reserved_bytes)
        } else {
            format!(">= {}", bytes(p.peak_reserved_bytes))
        };
        let _ = write!(
            out,
            "<tr><td>({}, {})</td><td>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td></tr>",
            p.pool_id[0],
            p.pool_id[1],
            esc(crate::wording::pool_kind(p.kind)),
            bytes(p.reserved_bytes),
            bytes(p.allocated_bytes),
            esc(&peak),
            p.segments
        );
    }
    out.push_str("</table>");
    let private_free = crate::analysis::pools::private_free_bytes(&d.pools);
    if private_free > 0 {
        let _ = write!(
            out,
            "<p>{}</p>",
            esc(&crate::wording::private_pool_free(private_free))
        );
    }
    if let Some(u) = d.unknown_pool_peak_reserved_bytes {
        let _ = write!(
            out,
            "<p class=sub>{}</p>",
            esc(&crate::wording::unknown_pool(u))
        );
    }
    for p in d.pools.iter().filter(|p| p.ghost_blocks > 0) {
        let _ = write!(
            out,
            "<p class=sub>pool ({}, {}): {}</p>",
            p.pool_id[0],
            p.pool_id[1],
            esc(&crate::wording::ghost_blocks(p.ghost_blocks, p.ghost_bytes))
        );
    }
    if let Some(w) = &d.pool_whatif {
        let graph = d.pools.iter().any(|p| p.kind == PoolKind::Graph);
        let _ = write!(
            out,
            "<p><b>{}</b></p>",
            esc(&crate::wording::pool_whatif(w, graph))
        );
    }
    out.push_str("</section>");
}

/// Reserved far above allocated on the device: the same sentences as the text report.
fn reserved_section(out: &mut String, d: &DeviceReport) {
    let Some(r) = &d.reserved_excess else {
        return;
    };
    let _ = write!(
        out,
        r#"<section class="reserved"><h2>Reserved far above allocated</h2><p>{}</p><p><b>fix:</b> {}</p></section>"#,
        esc(&crate::wording::reserved_excess(r)),
        esc(&crate::wording::reserved_excess_fix(r))
    );
}

/// The findings by bytes at stake, where the report has findings of more than one kind (as the
/// text report).
fn ranked_section(out: &mut String, a: &Analysis) {
    let ranked = a.ranked_findings();
    if !crate::analysis::ranked::mixed(&ranked) {
        return;
    }
    out.push_str(r#"<section id="findings"><h2>Findings by bytes at stake</h2><ol>"#);
    for r in &ranked {
        let _ = write!(
            out,
            "<li>{}</li>",
            esc(&crate::wording::ranked_finding(a, r))
        );
    }
    out.push_str("</ol></section>");
}

/// The verdict banner of a page (a snapshot's or a trace's). Green only for a judged, clean
/// capture; a capture that could not be judged is amber, never a green OK.
pub(crate) fn verdict_section(o: &mut String, v: &crate::analysis::Verdict) {
    let (class, label) = match v.kind {
        crate::analysis::VerdictKind::Ok => ("ok", "OK"),
        crate::analysis::VerdictKind::Unjudged => ("unjudged", "NOT JUDGED"),
        _ => ("bad", "VERDICT"),
    };
    let _ = write!(
        o,
        r#"<section id="verdict"><div class="verdict {class}"><b>{label}</b> {}</div></section>"#,
        esc(&crate::wording::verdict(v))
    );
}
