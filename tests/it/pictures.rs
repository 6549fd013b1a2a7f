//! Flamegraph, HTML report and Perfetto export: content checks on real captures, the CLI's
//! `-o` rules, and a headless-browser render of the report when chromium is installed (under CI,
//! which installs it, a missing chromium fails).

use std::path::{Path, PathBuf};
use std::process::Command;

use memscope::analysis::replay::{self, Timeline};
use memscope::model::Snapshot;
use memscope::report::{self, flamegraph as fg, Render};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

fn load(name: &str) -> (PathBuf, Snapshot, Vec<Timeline>) {
    let p = fixture(name);
    let raw = memscope::load::read_input(&p).unwrap();
    let snap = memscope::load::snapshot_from_bytes(&p, &raw).unwrap();
    let tls = snap
        .devices
        .iter()
        .map(|d| replay::replay(d, &snap.settings))
        .collect();
    (p, snap, tls)
}

/// The analysis product of a fixture: what the pictures are drawn from.
fn analyzed(name: &str) -> (Snapshot, memscope::analysis::Analyzed) {
    let (p, snap, _) = load(name);
    let len = std::fs::metadata(&p).unwrap().len();
    let a = memscope::analysis::analyze_snapshot(&snap, &p, len);
    (snap, a)
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_memscope"))
}

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("memscope-pictures-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn folded_stacks_add_up_to_allocated_at_the_oom() {
    let (snap, a) = analyzed("leak_oom.pickle");
    let dev = &snap.devices[0];
    let m = a.resolve(&snap, 0, fg::At::Oom).unwrap();
    let st = a.state_at(&snap, 0, m);
    let c = &a.per_device[0].classifier;
    let tl = &a.per_device[0].timeline;
    let e = m.event.unwrap().0 as usize;
    for by in [fg::By::Stack, fg::By::Site, fg::By::Category] {
        let f = fg::fold(&snap, dev, &st, by, c);
        let sum: u64 = f.lines.iter().map(|l| l.1).sum();
        assert_eq!(sum, tl.series.allocated[e], "{by:?}");
        assert_eq!(f.total_bytes, sum);
        let mut text = Vec::new();
        fg::Lines
            .render(&f, &report::Options::default(), &mut text)
            .unwrap();
        let text = String::from_utf8(text).unwrap();
        for line in text.lines() {
            let (stack, n) = line.rsplit_once(' ').unwrap();
            assert!(n.parse::<u64>().is_ok(), "{line}");
            assert!(!stack.is_empty());
        }
    }
    // Outermost first: the heaviest stack starts at the script's module level, not in torch.
    let f = fg::fold(&snap, dev, &st, fg::By::Stack, c);
    let (top, _) = f.lines.iter().max_by_key(|l| l.1).unwrap();
    assert!(
        top.starts_with("<module>") && top.contains("generate.py") && !top.starts_with("_"),
        "{top}"
    );
    let cats = fg::fold(&snap, dev, &st, fg::By::Category, c);
    assert!(
        cats.lines.iter().all(|(s, _)| !s.starts_with('<')),
        "category comes first"
    );
}

#[test]
fn flamegraph_svg_colours_user_frames() {
    let (snap, a) = analyzed("leak_oom.pickle");
    let dev = &snap.devices[0];
    let m = a.resolve(&snap, 0, fg::At::Peak).unwrap();
    let st = a.state_at(&snap, 0, m);
    let c = &a.per_device[0].classifier;
    let f = fg::fold(&snap, dev, &st, fg::By::Stack, c);
    let mut svg = Vec::new();
    let o = fg::Svg {
        title: "t".into(),
        subtitle: None,
        no_javascript: false,
        width: None,
    };
    o.render(&f, &report::Options::default(), &mut svg).unwrap();
    let svg = String::from_utf8(svg).unwrap();
    assert!(svg.contains("<svg"));
    assert!(svg.contains(" KiB, "), "counts in binary units");
    assert!(svg.contains("fill=\"rgb(230,"), "user frames highlighted");
    assert!(
        svg.contains("fill=\"rgb(19") || svg.contains("fill=\"rgb(20"),
        "torch frames dimmed"
    );
}

#[test]
fn cli_flamegraph_writes_only_to_output_and_refuses_the_input() {
    let d = tmpdir("cli");
    let input = d.join("cap.pickle");
    std::fs::copy(fixture("leak_oom.pickle"), &input).unwrap();
    let before = std::fs::read(&input).unwrap();
    for args in [
        vec!["flamegraph"],
        vec!["report"],
        vec!["export", "--format", "perfetto"],
    ] {
        let out = bin()
            .args(&args)
            .arg(&input)
            .arg("-o")
            .arg(&input)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("refusing to overwrite"));
        assert_eq!(std::fs::read(&input).unwrap(), before);
    }
    let svg = d.join("live.svg");
    let out = bin()
        .args(["flamegraph", "--at", "oom", "--by", "site"])
        .arg(&input)
        .arg("-o")
        .arg(&svg)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty(), "writes only to -o");
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
    let folded = d.join("live.folded");
    let out = bin()
        .args(["flamegraph", "--folded"])
        .arg(&input)
        .arg("-o")
        .arg(&folded)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(std::fs::read_to_string(&folded)
        .unwrap()
        .lines()
        .all(|l| l.rsplit_once(' ').is_some()));
    let out = bin()
        .args(["flamegraph", "--at", "999999999"])
        .arg(&input)
        .arg("-o")
        .arg(&folded)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&d);
}

fn html_of(name: &str) -> String {
    let (snap, a) = analyzed(name);
    let h = report::html::Html {
        snap: &snap,
        product: &a,
        extra: "",
    };
    report::to_string(&h, &a, &report::Options::default())
}

/// No network: nothing loaded from a URL, no external fonts or stylesheets.
fn assert_self_contained(html: &str) {
    let lower = html.to_ascii_lowercase();
    for bad in [
        "src=\"http",
        "src='http",
        "href=\"http",
        "href='http",
        "@import",
        "url(http",
        "<link",
        "@font-face",
        "xlink:href=\"http",
    ] {
        assert!(!lower.contains(bad), "external reference {bad}");
    }
}

#[test]
fn html_report_is_self_contained_with_key_sections() {
    let html = html_of("leak_oom.pickle");
    assert_self_contained(&html);
    for id in [
        "id=\"verdict\"",
        "id=\"memory-0\"",
        "id=\"ms-chart-0\"",
        "id=\"allocator-map-0\"",
        "id=\"sites-0\"",
        "id=\"flamegraph-0\"",
        "id=\"leaks-0\"",
    ] {
        assert!(html.contains(id), "missing {id}");
    }
    assert!(html.contains("OOM"));
    assert!(html.contains("MiB"));
    assert!(!html.contains("<?xml"), "the inline SVG lost its prolog");
    let clean = html_of("clean.pickle");
    assert_self_contained(&clean);
    assert!(clean.contains("id=\"allocator-map-0\""));
    assert!(
        !clean.contains("id=\"leaks-0\""),
        "no leak section without findings"
    );
}

#[test]
fn perfetto_export_parses_and_matches_the_replay() {
    for name in [
        "leak_oom.pickle",
        "fragmentation_oom.pickle",
        "unit/tiny_p3.pickle",
    ] {
        let (p, snap, tls) = load(name);
        let mut buf = Vec::new();
        let trace =
            report::perfetto::document(&snap, &tls, &p.display().to_string(), &Default::default());
        report::perfetto::Json
            .render(&trace, &report::Options::default(), &mut buf)
            .unwrap();
        let sum = trace.summary;
        let v: serde_json::Value = serde_json::from_slice(&buf).unwrap();
        let evs = v["traceEvents"].as_array().unwrap();
        for tl in &tls {
            let max = |k: &str| {
                evs.iter()
                    .filter(|e| e["ph"] == "C" && e["pid"] == tl.device)
                    .map(|e| e["args"][k].as_u64().unwrap())
                    .max()
                    .unwrap_or(0)
            };
            assert_eq!(max("allocated"), tl.peaks.allocated.bytes, "{name}");
            assert_eq!(max("reserved"), tl.peaks.reserved.bytes, "{name}");
            assert_eq!(max("active"), tl.peaks.active.bytes, "{name}");
        }
        let mut slices = 0;
        for e in evs.iter().filter(|e| e["ph"] == "X") {
            assert!(e["dur"].as_f64().unwrap() >= 0.0);
            assert!(e["args"]["size_bytes"].as_u64().is_some());
            slices += 1;
        }
        assert_eq!(slices, sum.slices);
        assert_eq!(
            evs.iter()
                .filter(|e| e["ph"] == "i" && e["name"].as_str().unwrap_or("").starts_with("OOM"))
                .count(),
            tls.iter().map(|t| t.ooms.len()).sum::<usize>()
        );
        let base = v["metadata"]["time_base"].as_str().unwrap();
        let untimed = snap
            .devices
            .iter()
            .any(|d| !d.events.is_empty() && d.events.iter().all(|e| e.time_us().is_none()));
        assert_eq!(base.starts_with("event index"), untimed, "{name}: {base}");
    }
}

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MEMSCOPE_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|n| {
            let out = Command::new("which").arg(n).output().ok()?;
            out.status
                .success()
                .then(|| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
        })
}

#[test]
fn html_report_renders_in_a_headless_browser() {
    let Some(chrome) = chromium() else {
        assert!(
            !crate::shared::ci(),
            "no chromium, and CI runs the browser test (.ci/run installs chromium)"
        );
        eprintln!("skipped: no chromium on this machine (apt-get install chromium to run it)");
        return;
    };
    let d = tmpdir("browser");
    let page = d.join("report.html");
    std::fs::write(&page, html_of("leak_oom.pickle")).unwrap();
    let profile = d.join("profile");
    let base = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
    ];
    let url = format!("file://{}", page.display());
    let out = Command::new(&chrome)
        .args(base)
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(["--virtual-time-budget=3000", "--dump-dom"])
        .arg(&url)
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        dom.contains("data-ms-js=\"ok\""),
        "script did not finish: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !dom.contains("data-ms-js-error=\""),
        "JS error in the page: {dom}"
    );
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report.png");
    let out = Command::new(&chrome)
        .args(base)
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", shot.display()))
        .args(["--window-size=1400,2000", "--hide-scrollbars"])
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        shot.exists(),
        "no screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("screenshot: {}", shot.display());
    let _ = std::fs::remove_dir_all(&d);
}

/// A frame too narrow for its whole label keeps the function name (`forward transf..`), never
/// only the end of the file name (`..sformer.py:22`): in the static text and in the script's
/// redraw after a zoom.
#[test]
fn flamegraph_truncation_keeps_the_function_name() {
    let (snap, a) = analyzed("leak_oom.pickle");
    let dev = &snap.devices[0];
    let m = a.resolve(&snap, 0, fg::At::Oom).unwrap();
    let st = a.state_at(&snap, 0, m);
    let c = &a.per_device[0].classifier;
    let f = fg::fold(&snap, dev, &st, fg::By::Stack, c);
    for no_javascript in [true, false] {
        let mut svg = Vec::new();
        let o = fg::Svg {
            title: "t".into(),
            subtitle: None,
            no_javascript,
            width: Some(600),
        };
        o.render(&f, &report::Options::default(), &mut svg).unwrap();
        let svg = String::from_utf8(svg).unwrap();
        if !no_javascript {
            assert!(
                svg.contains("var truncate_text_right = true;"),
                "zoom redraw"
            );
        }
        // Each frame: `<g><title>function file:line (N KiB, x%)</title><rect .../><text ...>label</text>`.
        let (mut cut, mut whole_name) = (0, 0);
        for g in svg.split("<g><title>").skip(1) {
            let title = &g[..g.find("</title>").unwrap()];
            let Some(t) = g.find("<text") else { continue };
            let t = &g[t..];
            let label = &t[t.find('>').unwrap() + 1..t.find("</text>").unwrap()];
            let Some(kept) = label.strip_suffix("..") else {
                continue;
            };
            cut += 1;
            assert!(!label.starts_with(".."), "cut from the left: {label}");
            assert!(
                title.starts_with(kept),
                "{label} is not the start of {title}"
            );
            let function = title.split(' ').next().unwrap();
            if kept.len() >= function.len() {
                assert!(kept.starts_with(function), "{label} lost {function}");
                whole_name += 1;
            }
        }
        assert!(cut >= 5, "600 px leaves some labels cut ({cut})");
        assert!(
            whole_name >= 1,
            "a cut label still holds its function's name"
        );
    }
}

/// A flamegraph of a capture with an OOM draws the OOM by default (what filled the memory when
/// it ran out), and one without draws the end.
#[test]
fn flamegraph_draws_the_oom_by_default() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for (name, want) in [
        ("fixtures/leak_oom.pickle", "live at the OOM (event 3654)"),
        ("fixtures/clean.pickle", "live at the end of the capture"),
    ] {
        let d = tmpdir("default-at");
        let svg = d.join(format!("{}.svg", name.replace('/', "_")));
        let _ = std::fs::remove_file(&svg);
        let out = bin()
            .arg("flamegraph")
            .arg(root.join(name))
            .arg("-o")
            .arg(&svg)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{name}: {err}");
        assert!(err.contains(want), "{name}: {err}");
    }
}
