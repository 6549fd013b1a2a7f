//! The HTML report's pictures, checked by parsing the SVG it emits (no browser): every label of
//! the memory chart sits in a margin, clear of the curves, the markers and the other labels; the
//! time ticks read differently; every counter can be seen; the allocator map's bars are
//! proportional to the segments' sizes. Run on the project's captures, the GPU fixtures in
//! `../shared` and the public corpus.
//!
//! The chart's text is monospace, so a label's box is its character count times 0.6 em (the
//! advance of DejaVu Sans Mono, Menlo and Consolas is at most that), from 0.8 em above the
//! baseline to 0.25 em below it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use memscope::report;

use crate::shared;

/// One element of the SVG: its tag, its attributes and the text up to the next tag.
#[derive(Debug)]
struct El {
    tag: String,
    attrs: HashMap<String, String>,
    text: String,
}

impl El {
    fn a(&self, k: &str) -> &str {
        self.attrs.get(k).map(|s| s.as_str()).unwrap_or("")
    }
    fn f(&self, k: &str) -> f64 {
        self.a(k)
            .parse()
            .unwrap_or_else(|_| panic!("{k} of {self:?}"))
    }
}

/// The start tags of `s` in order (enough for the markup memscope writes: no `>` inside an
/// attribute value).
fn elements(s: &str) -> Vec<El> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(i) = rest.find('<') {
        rest = &rest[i + 1..];
        if rest.starts_with('/') || rest.starts_with('!') {
            continue;
        }
        let end = rest.find('>').expect("unclosed tag");
        let body = rest[..end].trim_end_matches('/');
        let tag: String = body.chars().take_while(|c| !c.is_whitespace()).collect();
        let mut attrs = HashMap::new();
        let mut a = &body[tag.len()..];
        while let Some(eq) = a.find('=') {
            let key = a[..eq].trim().to_string();
            let v = &a[eq + 1..];
            let q = v.chars().next().unwrap();
            if q == '"' || q == '\'' {
                let close = v[1..].find(q).unwrap() + 1;
                attrs.insert(key, v[1..close].to_string());
                a = &v[close + 1..];
            } else {
                let close = v.find(char::is_whitespace).unwrap_or(v.len());
                attrs.insert(key, v[..close].to_string());
                a = &v[close..];
            }
        }
        rest = &rest[end + 1..];
        let text = rest[..rest.find('<').unwrap_or(rest.len())].to_string();
        out.push(El { tag, attrs, text });
    }
    out
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

#[derive(Clone, Copy, Debug)]
struct Box2 {
    x1: f64,
    y1: f64,
    x2: f64,
    y2: f64,
}

impl Box2 {
    fn overlaps(&self, o: &Box2) -> bool {
        self.x1 < o.x2 && o.x1 < self.x2 && self.y1 < o.y2 && o.y1 < self.y2
    }
    /// Whether the segment from `p` to `q` enters the box (Liang-Barsky clipping).
    fn cut_by(&self, p: (f64, f64), q: (f64, f64)) -> bool {
        let (dx, dy) = (q.0 - p.0, q.1 - p.1);
        let (mut t0, mut t1) = (0.0f64, 1.0f64);
        for (pp, qq) in [
            (-dx, p.0 - self.x1),
            (dx, self.x2 - p.0),
            (-dy, p.1 - self.y1),
            (dy, self.y2 - p.1),
        ] {
            if pp == 0.0 {
                if qq < 0.0 {
                    return false;
                }
            } else {
                let r = qq / pp;
                if pp < 0.0 {
                    t0 = t0.max(r);
                } else {
                    t1 = t1.min(r);
                }
            }
        }
        t0 < t1
    }
}

fn text_box(t: &El) -> Box2 {
    let size = t.f("font-size");
    let w = unescape(&t.text).chars().count() as f64 * size * 0.6;
    let x = t.f("x");
    let x1 = match t.a("text-anchor") {
        "middle" => x - w / 2.0,
        "end" => x - w,
        _ => x,
    };
    let y = t.f("y");
    Box2 {
        x1,
        y1: y - 0.8 * size,
        x2: x1 + w,
        y2: y + 0.25 * size,
    }
}

fn points(e: &El) -> Vec<(f64, f64)> {
    e.a("points")
        .split_whitespace()
        .map(|p| {
            let (x, y) = p.split_once(',').unwrap();
            (x.parse().unwrap(), y.parse().unwrap())
        })
        .collect()
}

/// Checks one memory chart; returns how many labels it holds.
fn check_chart(name: &str, svg: &str, ooms: usize, has_peak: bool) -> usize {
    let els = elements(svg);
    let root = &els[0];
    assert!(
        root.a("font-family").contains("monospace"),
        "{name}: the label boxes assume a monospace font"
    );
    let vb: Vec<f64> = root
        .a("viewBox")
        .split(' ')
        .map(|v| v.parse().unwrap())
        .collect();
    let view = Box2 {
        x1: 0.0,
        y1: 0.0,
        x2: vb[2],
        y2: vb[3],
    };
    let plot = els.iter().find(|e| e.a("class") == "ms-plot").unwrap();
    let plot = Box2 {
        x1: plot.f("x"),
        y1: plot.f("y"),
        x2: plot.f("x") + plot.f("width"),
        y2: plot.f("y") + plot.f("height"),
    };
    let texts: Vec<(&El, Box2)> = els
        .iter()
        .filter(|e| e.tag == "text")
        .map(|e| (e, text_box(e)))
        .collect();
    let curves: Vec<(&El, Vec<(f64, f64)>)> = els
        .iter()
        .filter(|e| e.tag == "polyline" || e.tag == "polygon")
        .map(|e| (e, points(e)))
        .collect();
    let markers: Vec<&El> = els.iter().filter(|e| e.a("class") == "ms-marker").collect();
    assert_eq!(
        markers.len(),
        ooms + has_peak as usize,
        "{name}: one marker per OOM and one for the peak"
    );
    for (t, b) in &texts {
        let what = format!("{name}: label {:?} at {b:?}", t.text);
        assert!(
            b.x1 >= view.x1 && b.x2 <= view.x2 && b.y1 >= view.y1 && b.y2 <= view.y2,
            "{what} leaves the picture {view:?}"
        );
        assert!(!b.overlaps(&plot), "{what} is inside the plot {plot:?}");
        for (c, pts) in &curves {
            let mut segs: Vec<_> = pts.windows(2).map(|w| (w[0], w[1])).collect();
            if c.tag == "polygon" {
                segs.push((pts[pts.len() - 1], pts[0]));
                assert!(
                    pts.iter()
                        .all(|&(x, y)| !(b.x1 < x && x < b.x2 && b.y1 < y && y < b.y2)),
                    "{what} covers the band of {}",
                    c.a("data-series")
                );
            }
            for (p, q) in segs {
                assert!(
                    !b.cut_by(p, q),
                    "{what} covers {} at {p:?}-{q:?}",
                    c.a("data-series")
                );
            }
        }
        for m in &markers {
            if m.a("data-for") == t.a("data-for") {
                continue;
            }
            let (p, q) = ((m.f("x1"), m.f("y1")), (m.f("x2"), m.f("y2")));
            assert!(
                !b.cut_by(p, q),
                "{what} crosses the marker {}",
                m.a("data-for")
            );
        }
        for (o, ob) in &texts {
            if !std::ptr::eq(*t, *o) {
                assert!(!b.overlaps(ob), "{what} overlaps the label {:?}", o.text);
            }
        }
    }
    // Every marker is labelled on these captures (at most 3 lanes above the plot are enough).
    let marker_labels = texts
        .iter()
        .filter(|(t, _)| t.a("class") == "ms-marker-label")
        .count();
    assert_eq!(
        marker_labels,
        markers.len(),
        "{name}: a marker lost its label"
    );
    // Ticks: distinct, round, in order.
    for class in ["ms-xtick", "ms-xtime", "ms-ytick"] {
        let ticks: Vec<&str> = texts
            .iter()
            .filter(|(t, _)| t.a("class") == class)
            .map(|(t, _)| t.text.as_str())
            .collect();
        let mut seen = ticks.clone();
        seen.sort();
        seen.dedup();
        assert_eq!(
            seen.len(),
            ticks.len(),
            "{name}: repeated {class}: {ticks:?}"
        );
        if class == "ms-xtick" {
            if ticks == ["event 0"] {
                continue; // a log of one event
            }
            assert!(ticks.len() >= 2, "{name}: {ticks:?}");
            let n: Vec<u64> = ticks
                .iter()
                .map(|t| t.strip_prefix("event ").unwrap().parse().unwrap())
                .collect();
            let step = n[1] - n[0];
            let round = step.to_string();
            assert!(
                round
                    .trim_start_matches(['1', '2', '5'])
                    .chars()
                    .all(|c| c == '0'),
                "{name}: step {step} is not 1, 2 or 5 times a power of ten"
            );
            assert!(n.windows(2).all(|w| w[1] - w[0] == step), "{name}: {n:?}");
        }
        if class == "ms-ytick" {
            assert_eq!(ticks[0], "0", "{name}: the y axis starts at 0");
            let v: Vec<u64> = ticks
                .iter()
                .map(|t| memscope::units::parse_bytes(t).unwrap())
                .collect();
            let step = v[1];
            assert!(
                step.is_power_of_two()
                    && v.iter().enumerate().all(|(k, &b)| b == k as u64 * step)
                    && ticks.iter().all(|t| !t.contains(".0 ")),
                "{name}: y ticks not round: {ticks:?}"
            );
        }
    }
    // Every counter drawn, each in its own colour and dash, and none hidden: a line whose
    // points mostly lie under a later solid line at least as wide would not be seen.
    let lines: Vec<(&El, &Vec<(f64, f64)>)> = curves
        .iter()
        .filter(|(c, _)| c.a("class") == "ms-series")
        .map(|(c, p)| (*c, p))
        .collect();
    let names: Vec<&str> = lines.iter().map(|(c, _)| c.a("data-series")).collect();
    for s in ["allocated", "active", "reserved"] {
        assert!(names.contains(&s), "{name}: no {s} line");
    }
    let styles: Vec<(&str, &str)> = lines
        .iter()
        .map(|(c, _)| (c.a("stroke"), c.a("stroke-dasharray")))
        .collect();
    for (i, s) in styles.iter().enumerate() {
        assert!(!styles[..i].contains(s), "{name}: two series drawn alike");
    }
    for (i, (c, p)) in lines.iter().enumerate() {
        for (d, q) in &lines[i + 1..] {
            if !d.a("stroke-dasharray").is_empty() || d.f("stroke-width") < c.f("stroke-width") {
                continue;
            }
            let under = p
                .iter()
                .zip(q.iter())
                .filter(|(a, b)| a.0 == b.0 && (a.1 - b.1).abs() < 1.5)
                .count();
            assert!(
                under * 2 <= p.len(),
                "{name}: {} lies under the solid {} at {under} of {} points",
                c.a("data-series"),
                d.a("data-series"),
                p.len()
            );
        }
    }
    texts.len()
}

/// Checks the allocator map's bars: each one's width (in % of the row) is its bytes over the
/// largest segment's. Returns `(bytes, width %)` per bar.
fn check_bars(name: &str, html: &str) -> Vec<(u64, f64)> {
    let map = html
        .match_indices(r#"class="allocator-map""#)
        .map(|(i, _)| {
            let s = &html[i..];
            &s[..s.find("</section>").unwrap()]
        })
        .collect::<String>();
    let els = elements(&map);
    let mut bars = Vec::new();
    let mut pending: Option<u64> = None;
    for e in &els {
        if e.a("class") == "segrow" {
            pending = Some(e.a("data-bytes").parse().unwrap());
        } else if e.tag == "svg" {
            if let Some(b) = pending.take() {
                let w = e.a("width");
                let pct: f64 = w
                    .strip_suffix('%')
                    .expect("bar width in %")
                    .parse()
                    .unwrap();
                bars.push((b, pct));
            }
        }
    }
    if let Some(max) = bars.iter().map(|b| b.0).max() {
        for &(b, pct) in &bars {
            let want = 100.0 * b as f64 / max as f64;
            assert!(
                (pct - want).abs() < 0.001,
                "{name}: a {b}-byte bar is {pct}% wide, {want}% expected"
            );
        }
    }
    bars
}

fn report_of(p: &Path) -> (String, Vec<(usize, bool)>) {
    let raw = memscope::load::read_input(p).unwrap();
    let snap = memscope::load::snapshot_from_bytes(p, &raw).unwrap();
    let len = std::fs::metadata(p).unwrap().len();
    let a = memscope::analysis::analyze_snapshot(&snap, p, len);
    let h = report::html::Html {
        snap: &snap,
        product: &a,
        extra: "",
    };
    let marks = a
        .timelines()
        .filter(|t| !t.is_empty())
        .map(|t| (t.ooms.len(), t.peaks.allocated.event.is_some()))
        .collect();
    (report::to_string(&h, &a, &Default::default()), marks)
}

/// The report of `p`, every chart and the allocator map checked.
fn check(p: &Path) -> String {
    let name = p.file_name().unwrap().to_string_lossy().to_string();
    let (html, marks) = report_of(p);
    let charts: Vec<&str> = html
        .match_indices(r#"<svg class="ms-chart" id="#)
        .map(|(i, _)| {
            let s = &html[i..];
            &s[..s.find("</svg>").unwrap()]
        })
        .collect();
    assert_eq!(
        charts.len(),
        marks.len(),
        "{name}: one chart per device with history"
    );
    for (svg, (ooms, peak)) in charts.iter().zip(marks) {
        check_chart(&name, svg, ooms, peak);
    }
    check_bars(&name, &html);
    html
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

#[test]
fn leak_oom_chart_labels_clear_the_data_and_bars_are_proportional() {
    let html = check(&fixture("leak_oom.pickle"));
    // The peak (event 3653) and the OOM (event 3654) fall on one x: both labelled, apart.
    assert!(html.contains(">peak 1.5 GiB (event 3653)</text>"));
    assert!(html.contains(">OOM 16.0 MiB (event 3654)</text>"));
    // All events after the first came within 0.06 s: the times need milliseconds to differ.
    assert!(html.contains(r#"class="ms-xtime""#) && html.contains(">3.667 s<"));
    // 32 MiB and 20 MiB segments: bars in the ratio 1.6, whatever the page width.
    let bars = check_bars("leak_oom", &html);
    let w = |b: u64| bars.iter().find(|x| x.0 == b << 20).unwrap().1;
    assert!((w(32) / w(20) - 1.6).abs() < 1e-3, "{} vs {}", w(32), w(20));
}

#[test]
fn project_captures_chart_labels_clear_the_data() {
    for name in [
        "fragmentation_oom.pickle",
        "clean.pickle",
        "huge_request_oom.pickle",
        "wi_leak_default.pickle",
        "two_streams.pickle",
        "ring_overflow.pickle",
    ] {
        check(&fixture(name));
    }
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn gpu_fixtures_chart_labels_clear_the_data() {
    for name in [
        "clean_training.pickle",
        "fragmentation_oom.pickle",
        "val_no_grad_oom.pickle",
    ] {
        let Some(p) = shared::fixture(name) else {
            return;
        };
        check(&p);
    }
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn corpus_snapshots_chart_labels_clear_the_data() {
    let Some(dir) = shared::corpus("snapshots") else {
        return;
    };
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "pickle") {
            check(&p);
            n += 1;
        }
    }
    assert!(n >= 5, "{n} corpus snapshots");
}
