//! Issue #42, item 1: a profiler trace in every view that can show it (`report`, `flamegraph`,
//! `export`), and the refusal of the views that cannot (`whatif`, `plan`), on the committed
//! traces and the public corpus's.
//!
//! The figures are checked against the analysis (`analyze --format json`) of the same file:
//! the flamegraph at a moment adds up to the allocator's total there, byte for byte; the export
//! keeps every event of the trace and adds memscope's.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::common::envelope::data;
use crate::shared;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_memscope"))
}

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(rel)
}

fn tmp(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("trace_views42");
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn run(args: &[&std::ffi::OsStr]) -> Output {
    bin().args(args).output().unwrap()
}

/// The committed traces whose allocated totals are bytes in use, and their profiled steps.
const TRACES: [(&str, u64); 3] = [
    ("trace_clean.trace.json.gz", 10),
    ("trace_hook_cache.trace.json.gz", 10),
    ("trace_total_loss.trace.json.gz", 10),
];

fn analysis(f: &Path) -> Value {
    let out = run(&[
        "analyze".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        f.as_os_str(),
    ]);
    data(&out.stdout)
}

fn folded_sum(text: &str) -> u64 {
    text.lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum()
}

fn folded(f: &Path, extra: &[&str], name: &str) -> String {
    let out_path = tmp(name);
    let mut args: Vec<&std::ffi::OsStr> = vec!["flamegraph".as_ref(), "--folded".as_ref()];
    args.extend(extra.iter().map(|s| std::ffi::OsStr::new(*s)));
    args.extend([f.as_os_str(), "-o".as_ref(), out_path.as_os_str()]);
    let out = run(&args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(out_path).unwrap()
}

#[test]
fn trace_flamegraph_adds_up_to_the_allocated_total_at_the_peak_and_each_steps_peak() {
    for (name, steps) in TRACES {
        let f = fixture(name);
        let a = analysis(&f);
        let peak = a["devices"][0]["peak_allocated_bytes"].as_u64().unwrap();
        let text = folded(&f, &[], &format!("{name}.peak.folded"));
        assert_eq!(folded_sum(&text), peak, "{name} at the peak");
        // Python frames, then the ops: the allocating op ends some stack.
        assert!(
            text.lines().any(|l| l.contains(";aten::")),
            "{name}: no op frames"
        );
        let listed: Vec<&Value> = a["steps"].as_array().unwrap().iter().collect();
        assert_eq!(listed.len() as u64, steps, "{name}");
        for s in listed {
            let n: u64 = s["name"]
                .as_str()
                .unwrap()
                .trim_start_matches("ProfilerStep#")
                .parse()
                .unwrap();
            let text = folded(
                &f,
                &["--step", &n.to_string()],
                &format!("{name}.{n}.folded"),
            );
            assert_eq!(
                folded_sum(&text),
                s["peak_allocated_bytes"].as_u64().unwrap(),
                "{name} at the peak of step {n}"
            );
        }
    }
}

#[test]
fn trace_flamegraph_svg_and_its_options() {
    let f = fixture("trace_hook_cache.trace.json.gz");
    let svg = tmp("hook.svg");
    let out = run(&[
        "flamegraph".as_ref(),
        f.as_os_str(),
        "-o".as_ref(),
        svg.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.starts_with("<?xml") || text.starts_with("<svg"),
        "{}",
        &text[..80]
    );
    assert!(text.contains("Live memory on cuda:0 at the allocated peak (in ProfilerStep#11)"));
    assert!(text.contains("[allocated before the trace began]"));
    // A step the trace did not profile, and a snapshot's moment, are refused with exit 2.
    for bad in [&["--step", "99"][..], &["--at", "oom"][..]] {
        let mut args: Vec<&std::ffi::OsStr> = vec!["flamegraph".as_ref()];
        args.extend(bad.iter().map(|s| std::ffi::OsStr::new(*s)));
        args.extend([f.as_os_str(), "-o".as_ref(), svg.as_os_str()]);
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
    }
    // By site: one frame per line, the same total.
    let by_site = folded(&f, &["--by", "site"], "hook.site.folded");
    let by_stack = folded(&f, &[], "hook.stack.folded");
    assert_eq!(folded_sum(&by_site), folded_sum(&by_stack));
    assert!(by_site.lines().all(|l| !l.contains(';')));
}

#[test]
fn trace_report_is_a_page_with_the_timeline_steps_ops_and_findings() {
    for (name, steps) in TRACES {
        let f = fixture(name);
        let html = tmp(&format!("{name}.html"));
        let out = run(&[
            "report".as_ref(),
            f.as_os_str(),
            "-o".as_ref(),
            html.as_os_str(),
        ]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let page = std::fs::read_to_string(&html).unwrap();
        let a = analysis(&f);
        for want in [
            "Memory over time",
            "<h3>Steps</h3>",
            "Top ops by bytes allocated",
            "Flamegraph at the peak",
            "Autograd graph",
            "<polyline",
        ] {
            assert!(page.contains(want), "{name}: {want} missing");
        }
        // One row per profiled step, and no external resource.
        assert_eq!(
            page.matches("<tr><td>ProfilerStep#").count() as u64,
            steps,
            "{name}"
        );
        assert!(!page.contains("src=\"http") && !page.contains("href=\"http"));
        let leaks = a["leaks"].as_array().unwrap().len();
        assert_eq!(
            page.contains(r#"<section id="leaks">"#),
            leaks > 0,
            "{name}"
        );
    }
    // The leak's words are the analysis' own.
    let f = fixture("trace_hook_cache.trace.json.gz");
    let a = analysis(&f);
    let page = std::fs::read_to_string(tmp("trace_hook_cache.trace.json.gz.html")).unwrap();
    let why = a["leaks"][0]["explanation"].as_str().unwrap();
    let esc = why
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    assert!(page.contains(&esc), "{why}");
    assert!(page.contains("autograd::engine::evaluate_function: AddmmBackward0"));
}

#[test]
fn trace_export_keeps_every_event_and_adds_the_findings() {
    let f = fixture("trace_hook_cache.trace.json.gz");
    let json = tmp("hook.json");
    let out = run(&[
        "export".as_ref(),
        f.as_os_str(),
        "-o".as_ref(),
        json.as_os_str(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let mut raw = Vec::new();
    use std::io::Read;
    flate2::read::GzDecoder::new(std::fs::File::open(&f).unwrap())
        .read_to_end(&mut raw)
        .unwrap();
    let orig: Value = serde_json::from_slice(&raw).unwrap();
    let (ev, orig_ev) = (
        doc["traceEvents"].as_array().unwrap(),
        orig["traceEvents"].as_array().unwrap(),
    );
    let ours: Vec<&Value> = ev.iter().filter(|e| e["pid"] == 2_000_000_000i64).collect();
    assert_eq!(ev.len(), orig_ev.len() + ours.len());
    // The trace's events, in order, untouched; its other keys too.
    let theirs: Vec<&Value> = ev.iter().filter(|e| e["pid"] != 2_000_000_000i64).collect();
    assert!(theirs.iter().zip(orig_ev).all(|(a, b)| *a == b));
    assert_eq!(doc["deviceProperties"], orig["deviceProperties"]);
    let a = analysis(&f);
    let peak = a["devices"][0]["peak_allocated_bytes"].as_u64().unwrap();
    let peak_ev = ours
        .iter()
        .find(|e| e["ph"] == "i" && e["s"] == "g")
        .unwrap();
    assert_eq!(peak_ev["args"]["allocated_bytes"].as_u64(), Some(peak));
    let leak = ours
        .iter()
        .find(|e| e["ph"] == "X")
        .expect("the leak's slice");
    assert_eq!(leak["args"]["why"], a["leaks"][0]["explanation"]);
    let counters = ours.iter().filter(|e| e["ph"] == "C").count();
    assert!(counters > 500, "{counters}");
}

#[test]
fn whatif_and_plan_refuse_a_trace_naming_the_snapshot_to_take() {
    let f = fixture("claims36/prof_trace.trace.json.gz");
    for args in [
        vec!["whatif".as_ref(), f.as_os_str()],
        vec![
            "plan".as_ref(),
            "--batch".as_ref(),
            "8".as_ref(),
            f.as_os_str(),
        ],
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        for want in [
            "profiler trace",
            "address",
            "segments",
            "_record_memory_history",
            "memscope run",
        ] {
            assert!(err.contains(want), "{want}: {err}");
        }
    }
    // In an envelope, the refusal is typed as before (the wrong kind of capture).
    let out = run(&[
        "whatif".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        f.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["errors"][0]["kind"], "not_a_capture");
    assert!(doc["errors"][0]["message"]
        .as_str()
        .unwrap()
        .contains("_dump_snapshot"));
    // memscope's own JSON is not called a trace.
    let report = tmp("report.json");
    std::fs::write(
        &report,
        run(&[
            "analyze".as_ref(),
            "--format".as_ref(),
            "json".as_ref(),
            f.as_os_str(),
        ])
        .stdout,
    )
    .unwrap();
    let out = run(&["whatif".as_ref(), report.as_os_str()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("_record_memory_history"));
    // A file that is neither keeps its own error.
    let out = run(&["whatif".as_ref(), fixture("README.md").as_os_str()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("profiler trace"));
}

#[test]
fn every_trace_view_works_on_the_cut_trace_and_the_corpus_traces() {
    let mut files = vec![
        fixture("claims36/prof_trace.trace.json.gz"),
        fixture("claims36/prof_trace_truncated.trace.json.gz"),
        fixture("trace_val_no_grad.trace.json"),
    ];
    for rel in [
        "traces/other/parT_a100_bs512.pt.trace.json",
        "traces/other/kineto_resnet50_torch19_mem.pt.trace.json.gz",
        "traces/other/kernelforge_transformer.pt.trace.json",
        "traces/hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
        "traces/hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    ] {
        if let Some(p) = shared::corpus(rel) {
            files.push(p);
        }
    }
    for f in &files {
        for cmd in ["report", "flamegraph", "export"] {
            let o = tmp(&format!("any.{cmd}"));
            let out = run(&[cmd.as_ref(), f.as_os_str(), "-o".as_ref(), o.as_os_str()]);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{cmd} {}: {}",
                f.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            let n = std::fs::metadata(&o).unwrap().len();
            assert!(n > 0, "{cmd} {}", f.display());
            if cmd == "export" && !f.to_string_lossy().contains("truncated") {
                let doc: Value = serde_json::from_slice(&std::fs::read(&o).unwrap())
                    .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
                assert!(doc["traceEvents"].as_array().is_some_and(|v| !v.is_empty()));
            }
        }
    }
}
