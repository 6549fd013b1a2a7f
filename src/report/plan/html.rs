//! A plan as one self-contained HTML page: per device, the chart of predicted peak reserved
//! and allocated against the batch size, with the cap and the largest batch drawn in, and the
//! table and notes of the text output. [`chart_svg`] is shared with the analysis report.

use std::fmt::Write as _;
use std::io::{self, Write};

use super::PlanDoc;
use crate::analysis::plan::{Plan, Prediction};
use crate::escape::html as esc;
use crate::report::pictures::chart::{byte_ticks, tick_bytes, FONT};
use crate::report::{Options, Render};
use crate::units::bytes;
use crate::wording;

pub struct Html;

impl Render<PlanDoc<'_>> for Html {
    fn render(&self, doc: &PlanDoc, _opts: &Options, out: &mut dyn Write) -> io::Result<()> {
        let mut o = String::new();
        let _ = write!(
            o,
            "<!doctype html><html><head><meta charset=\"utf-8\"><title>memscope plan: {}</title>\
             <style>body{{font-family:system-ui,sans-serif;margin:24px;color:#111827}}\
             table{{border-collapse:collapse}}td,th{{padding:2px 10px;text-align:right}}\
             th{{border-bottom:1px solid #d1d5db}}li{{color:#4b5563;font-size:13px}}</style></head><body>",
            esc(doc.file)
        );
        for p in doc.plans {
            section(&mut o, doc, p);
        }
        o.push_str("</body></html>\n");
        out.write_all(o.as_bytes())
    }
}

fn section(o: &mut String, doc: &PlanDoc, p: &Plan) {
    let _ = write!(
        o,
        "<h1>memscope plan</h1><p>{} (device {}), recorded at batch {}{}</p>",
        esc(doc.file),
        p.device,
        p.recorded.batch,
        p.recorded
            .seq
            .map(|s| format!(", sequence {s}"))
            .unwrap_or_default()
    );
    let _ = write!(
        o,
        "<p><b>Largest batch:</b> {}</p>",
        match &p.max_batch {
            Ok(m) => m.batch.to_string(),
            Err(r) => format!("unknown: {}", esc(wording::no_max_batch(*r))),
        }
    );
    o.push_str(&chart_svg(p));
    o.push_str("<table><tr><th>batch</th><th>seq</th><th>peak allocated</th><th>upper</th><th>peak reserved</th><th>upper</th><th>under the cap</th></tr>");
    for r in &p.predictions {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            r.batch,
            r.seq.map(|s| s.to_string()).unwrap_or_default(),
            bytes(r.peak_allocated_bytes),
            bytes(r.peak_allocated_upper_bytes),
            bytes(r.peak_reserved_bytes),
            bytes(r.peak_reserved_upper_bytes),
            wording::plan_verdict(r.verdict, p.ends_in_oom)
        );
    }
    o.push_str("</table>");
    let _ = write!(
        o,
        "<p>{}</p><ul>",
        esc(&wording::plan_fit(&p.fit, p.recorded))
    );
    for n in wording::plan_notes(p) {
        let _ = write!(o, "<li>{}</li>", esc(&n));
    }
    o.push_str("</ul>");
}

/// The predictions at the recorded sequence length, by batch.
fn by_batch(p: &Plan) -> Vec<&Prediction> {
    let mut v: Vec<&Prediction> = p
        .predictions
        .iter()
        .filter(|r| r.seq == p.recorded.seq || r.seq.is_none())
        .collect();
    v.sort_by_key(|r| r.batch);
    v
}

/// The chart of peak against batch: reserved (solid) and its upper reading (dashed),
/// allocated, the cap as a red line and the largest batch as a green one. Empty when the plan
/// has fewer than two batch sizes to draw.
pub fn chart_svg(p: &Plan) -> String {
    let pts = by_batch(p);
    if pts.len() < 2 {
        return String::new();
    }
    let (w, h, l, r, t, b) = (720.0, 320.0, 90.0, 20.0, 20.0, 40.0);
    let max_b = pts.iter().map(|r| r.batch).max().unwrap_or(1).max(1);
    let top = pts
        .iter()
        .map(|r| r.peak_reserved_upper_bytes)
        .chain(p.cap.bytes)
        .max()
        .unwrap_or(1);
    let (step, ymax) = byte_ticks(top);
    let x = |v: u64| l + (w - l - r) * v as f64 / max_b as f64;
    let y = |v: u64| t + (h - t - b) * (1.0 - v as f64 / ymax.max(1) as f64);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family='{FONT}' font-size=\"11\">"
    );
    let mut v = 0;
    while v <= ymax {
        let _ = write!(
            s,
            "<line x1=\"{l}\" x2=\"{}\" y1=\"{y0:.1}\" y2=\"{y0:.1}\" stroke=\"#e5e7eb\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            w - r,
            l - 6.0,
            y(v) + 4.0,
            tick_bytes(v),
            y0 = y(v)
        );
        v += step;
    }
    let line = |s: &mut String, f: &dyn Fn(&Prediction) -> u64, color: &str, dash: &str| {
        let d: Vec<String> = pts
            .iter()
            .map(|r| format!("{:.1},{:.1}", x(r.batch), y(f(r))))
            .collect();
        let _ = write!(
            s,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" stroke-dasharray=\"{dash}\" points=\"{}\"/>",
            d.join(" ")
        );
    };
    line(&mut s, &|r| r.peak_reserved_bytes, "#2563eb", "none");
    line(&mut s, &|r| r.peak_reserved_upper_bytes, "#2563eb", "4 3");
    line(&mut s, &|r| r.peak_allocated_bytes, "#9333ea", "none");
    for r in &pts {
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            x(r.batch),
            h - b + 16.0,
            r.batch
        );
    }
    if let Some(c) = p.cap.bytes {
        let _ = write!(
            s,
            "<line x1=\"{l}\" x2=\"{}\" y1=\"{y0:.1}\" y2=\"{y0:.1}\" stroke=\"#dc2626\" stroke-width=\"1.5\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#dc2626\">cap {}</text>",
            w - r,
            w - r,
            y(c) - 4.0,
            esc(&bytes(c)),
            y0 = y(c)
        );
    }
    if let Ok(m) = &p.max_batch {
        if m.batch <= max_b {
            let _ = write!(
                s,
                "<line x1=\"{x0:.1}\" x2=\"{x0:.1}\" y1=\"{t}\" y2=\"{}\" stroke=\"#16a34a\" stroke-dasharray=\"2 2\"/><text x=\"{:.1}\" y=\"{}\" fill=\"#16a34a\">max batch {}</text>",
                h - b,
                x(m.batch) + 4.0,
                t + 12.0,
                m.batch,
                x0 = x(m.batch)
            );
        }
    }
    s.push_str("</svg>");
    s
}
