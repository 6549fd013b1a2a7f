//! Figures a trace does not record are never written as bytes in use (issue 23, traces).
//!
//! The torch 1.9 trace of a ResNet-50 training (`kineto_resnet50_torch19_mem`) records each
//! allocation's `Bytes` and no total: the running sum on cuda:0, read independently with a
//! Python pass over `traceEvents` (sum of `Bytes` per `(Device Type, Device Id)` in time order),
//! starts at 0, never goes below 0, peaks at 2,791,636,480 bytes and ends at 0. Those are
//! changes from the trace's start, and the trace records no reserved total at all: the report,
//! its JSON, the gate and the baseline say so, never "0 B allocated" or "0 B reserved".
//!
//! HTA's `trace_diff/control` trace has six `ProfilerStep#` spans and no `[memory]` event
//! (`zcat FILE | grep -c '\[memory\]'` is 0): nothing about memory can be said of it.

use std::path::{Path, PathBuf};
use std::process::Command;

use memscope::analysis::notes::{Note, TraceNote};
use memscope::analysis::{analyze_trace, Analysis, CountedFrom};
use memscope::report::{self, json::Json, text::Text, Options};

use crate::shared;

const TORCH19: &str = "traces/other/kineto_resnet50_torch19_mem.pt.trace.json.gz";
const MEMORYLESS: &str = "traces/hta/trace_diff/control/control.json.gz";
/// cuda:0's running sum of `Bytes`: its highest value.
const PEAK_CHANGE: i64 = 2_791_636_480;

fn analysis(p: &Path) -> Analysis {
    let t = memscope::load::load_trace(p).unwrap();
    analyze_trace(&t, p, std::fs::metadata(p).unwrap().len())
}

fn memscope(args: &[&str], p: &PathBuf) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_memscope"))
        .env("NO_COLOR", "1")
        .env_remove("GITHUB_ACTIONS")
        .args(args)
        .arg(p)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8(o.stderr).unwrap(),
    )
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn running_sums_are_changes_from_the_trace_start_in_the_analysis_and_its_json() {
    let Some(p) = shared::corpus(TORCH19) else {
        return;
    };
    let a = analysis(&p);
    let d = a.devices.iter().find(|d| d.device == 0).expect("cuda:0");
    assert_eq!(d.allocated_counted_from, CountedFrom::TraceStart);
    let f = d.from_start.expect("the changes from the trace's start");
    assert_eq!(
        (
            f.allocated_bytes,
            f.peak_allocated_bytes,
            f.lowest_allocated_bytes
        ),
        (0, PEAK_CHANGE, 0)
    );
    // No figure in bytes in use where the trace gives none; the peak is a lower bound.
    assert_eq!(d.allocated_bytes, None);
    assert_eq!(d.peak_allocated_bytes, None);
    assert!(!d.peak_exact);
    assert_eq!(d.observed_peak_allocated_bytes, PEAK_CHANGE as u64);
    assert_eq!(
        (
            d.reserved_bytes,
            d.peak_reserved_bytes,
            d.observed_peak_reserved_bytes,
            d.free_reserved_bytes
        ),
        (None, None, None, None)
    );
    // Every step carries its changes; the running sum is back at 0 at each step's end.
    assert_eq!(a.steps.len(), 6);
    for s in &a.steps {
        let c = s.from_start.expect("a step's changes");
        assert_eq!(c.end_allocated_bytes, 0, "{}", s.name);
    }

    let v: serde_json::Value =
        serde_json::from_str(&report::to_string(&Json, &a, &Options::default())).unwrap();
    let j = &v["devices"][0];
    assert_eq!(j["allocated_counted_from"], "trace_start", "{j}");
    for k in [
        "allocated_bytes",
        "reserved_bytes",
        "observed_peak_reserved_bytes",
        "free_reserved_bytes",
        "peak_reserved_bytes",
    ] {
        assert!(j[k].is_null(), "{k}: {}", j[k]);
    }
    assert_eq!(j["from_start"]["peak_allocated_bytes"], PEAK_CHANGE);
    assert_eq!(j["from_start"]["allocated_bytes"], 0);
    for s in v["steps"].as_array().unwrap() {
        assert_eq!(s["from_start"]["end_allocated_bytes"], 0, "{s}");
    }
    // Snapshots and traces with totals count from zero.
    let snap = memscope::analysis::analyze_snapshot(
        &memscope::load::load_snapshot(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/leak_val_no_grad.pickle"),
        )
        .unwrap(),
        Path::new("leak_val_no_grad.pickle"),
        0,
    );
    assert!(snap
        .devices
        .iter()
        .all(|d| d.allocated_counted_from == CountedFrom::Zero && d.from_start.is_none()));
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn the_text_report_writes_changes_and_unknown_reserved() {
    let Some(p) = shared::corpus(TORCH19) else {
        return;
    };
    let out = report::to_string(&Text, &analysis(&p), &Options::default());
    let line = |start: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with(start))
            .unwrap_or_else(|| panic!("no `{start}` line:\n{out}"))
            .to_owned()
    };
    assert!(
        line("VERDICT").contains("allocated peak +2.6 GiB above the trace's start"),
        "{out}"
    );
    let alloc: Vec<String> = line("allocated ")
        .split_whitespace()
        .map(String::from)
        .collect();
    assert_eq!(alloc[1..], ["+0", "B", "+2.6", "GiB"], "{out}");
    let reserved: Vec<String> = line("reserved")
        .split_whitespace()
        .map(String::from)
        .collect();
    assert_eq!(reserved, ["reserved", "unknown", "unknown"], "{out}");
    assert!(line("allocated:").contains("at least 2.6 GiB"), "{out}");
    let steps = line("STEPS cuda:0");
    assert!(
        steps.contains(
            "allocated at step end (changes from the trace's start): +0 B (ProfilerStep#5) .. +0 B (ProfilerStep#10)"
        ) && steps.contains("highest step peak +2.6 GiB above the trace's start"),
        "{steps}"
    );
    // No figure is written as an absolute zero.
    assert!(
        !out.lines()
            .any(|l| l.contains(" 0 B") && !l.contains("+0 B")),
        "{out}"
    );
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn the_gate_holds_limits_to_the_lower_bound_only() {
    let Some(p) = shared::corpus(TORCH19) else {
        return;
    };
    // The peak was at least 2.6 GiB: over a 1 GiB limit, whatever was in use before.
    let (code, out, err) = memscope(&["check", "--no-config", "--max-peak", "1GiB"], &p);
    assert_eq!(code, 1, "{out}{err}");
    let rule = out.lines().find(|l| l.contains("max-peak")).unwrap();
    assert!(
        rule.contains("FAIL") && rule.contains("2.6 GiB") && rule.contains("lower bound"),
        "{rule}"
    );
    // Under an 8 GiB limit the bound says nothing: SKIP, never PASS.
    let (code, out, err) = memscope(&["check", "--no-config", "--max-peak", "8GiB"], &p);
    assert_eq!(code, 0, "{out}{err}");
    let rule = out.lines().find(|l| l.contains("max-peak")).unwrap();
    assert!(
        rule.contains("SKIP") && rule.contains("change from the trace's start"),
        "{rule}"
    );
    // Reserved is not recorded: a limit on it has nothing to measure.
    let (code, _, err) = memscope(&["check", "--no-config", "--max-reserved", "8GiB"], &p);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no reserved bytes"), "{err}");

    // A baseline of the same trace keeps the fact, and its figures give no limit.
    let dir = std::env::temp_dir().join(format!("memscope-rel-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let base = dir.join("base.json");
    let (code, _, err) = memscope(&["baseline", "-o", base.to_str().unwrap()], &p);
    assert_eq!(code, 0, "{err}");
    let b: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&base).unwrap()).unwrap();
    let entry = &b["inputs"][0];
    assert_eq!(
        entry["allocated_from_trace_start"],
        serde_json::json!(["cuda:0"])
    );
    assert_eq!(entry["reserved_unrecorded"], serde_json::json!(["cuda:0"]));
    let (code, out, err) = memscope(
        &["check", "--no-config", "--baseline", base.to_str().unwrap()],
        &p,
    );
    assert_eq!(code, 0, "{out}{err}");
    for rule in ["baseline-peak", "baseline-reserved", "baseline-live"] {
        let l = out.lines().find(|l| l.contains(rule)).unwrap();
        assert!(l.contains("SKIP"), "{l}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn a_trace_without_memory_events_carries_no_memory_figures() {
    let Some(p) = shared::corpus(MEMORYLESS) else {
        return;
    };
    let a = analysis(&p);
    // Six profiled steps, and no figure for any of them: not a step with 0 B.
    assert_eq!(a.verdict.leak_judgement.steps, 6);
    assert!(a.devices.is_empty() && a.steps.is_empty());
    let v: serde_json::Value =
        serde_json::from_str(&report::to_string(&Json, &a, &Options::default())).unwrap();
    assert_eq!(v["devices"], serde_json::json!([]));
    assert_eq!(v["steps"], serde_json::json!([]));
    assert!(
        a.notes.iter().any(|n| matches!(
            n,
            Note::Trace(TraceNote::StepsWithoutMemory { steps: 6, .. })
        )),
        "{:?}",
        a.notes
    );
    assert_eq!(
        a.notes
            .iter()
            .filter(|n| matches!(n, Note::Trace(TraceNote::NoMemoryEvents)))
            .count(),
        1,
        "said once: {:?}",
        a.notes
    );
    let text = report::to_string(&Text, &a, &Options::default());
    assert!(!text.contains(" B "), "no byte figure at all:\n{text}");
    assert!(text.contains("no memory recorded"), "{text}");

    // The gate: every memory rule SKIPs with the reason; a memory limit is an error.
    let (code, out, err) = memscope(
        &[
            "check",
            "--no-config",
            "--fail-on",
            "oom,fragmentation,leak",
        ],
        &p,
    );
    assert_eq!(code, 0, "{out}{err}");
    for rule in ["oom", "fragmentation", "leak"] {
        let l = out
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(rule))
            .unwrap_or_else(|| panic!("no {rule} in\n{out}"));
        assert!(
            l.contains("SKIP") && l.contains("the trace holds no memory events"),
            "{l}"
        );
    }
    let (code, _, err) = memscope(&["check", "--no-config", "--max-peak", "1GiB"], &p);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no device memory recorded"), "{err}");
}

/// `diff` keeps the standing of each side: changes from a trace's start are lower bounds on the
/// bytes in use, and reserved bytes the trace does not record are "not recorded", never 0 B.
#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn diff_keeps_bounds_and_says_what_is_not_recorded() {
    let Some(p) = shared::corpus(TORCH19) else {
        return;
    };
    let own = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/trace_clean.trace.json.gz");
    let o = Command::new(env!("CARGO_BIN_EXE_memscope"))
        .env("NO_COLOR", "1")
        .arg("diff")
        .arg(&p)
        .arg(&own)
        .output()
        .unwrap();
    assert!(o.status.success());
    let out = String::from_utf8(o.stdout).unwrap();
    let line = |k: &str| out.lines().find(|l| l.contains(k)).unwrap().to_owned();
    assert!(
        line("peak allocated").contains(">= 2.6 GiB -> 128.1 MiB (at most"),
        "{out}"
    );
    assert!(
        line("peak reserved").contains("not recorded -> 134.0 MiB (change unknown)"),
        "{out}"
    );
    assert!(line("live at end").contains(">= 0 B -> "), "{out}");
    assert!(
        !out.contains("-> >= 0 B") && !out.contains("0 B -> 0 B"),
        "{out}"
    );
}
