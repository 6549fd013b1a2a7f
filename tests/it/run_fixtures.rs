//! What `memscope run` and `memscope.capture()` wrote on a GPU (H100, PyTorch 2.11), read back:
//! the files in `fixtures/run/` (made by `fixtures/run/run_on_gpu.sh`, the logs beside them).
//!
//! The expected figures come from the scripts' workloads and from what the scripts printed
//! (`torch.cuda.memory_allocated()` / `max_memory_allocated()`, in `fixtures/run/logs/`), written
//! down before memscope read the files.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const MIB: u64 = 1 << 20;

fn path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/run")
        .join(rel)
}

fn analyze(rel: &str) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_memscope"))
        .args(["analyze", "--format", "json"])
        .arg(path(rel))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{rel}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    common::envelope::data(&out.stdout)
}

fn dev(v: &Value) -> &Value {
    let devs = v["devices"].as_array().unwrap();
    assert_eq!(devs.len(), 1, "one GPU");
    &devs[0]
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("{v} is not a u64"))
}

/// Within 0.05 MiB of a figure the script printed with one decimal.
fn near_printed_mib(bytes: u64, printed_mib: f64) {
    let got = bytes as f64 / MIB as f64;
    assert!(
        (got - printed_mib).abs() <= 0.05,
        "{got:.3} MiB, the script printed {printed_mib} MiB"
    );
}

/// oom_leak.py keeps each step's `out` (2048 x 4096 fp32 = 32 MiB) until a 1 GiB cap: the
/// recorder wrote the snapshot as the OOM escaped; the request that failed is the weight's
/// gradient (4096 x 4096 fp32 = 64 MiB).
#[test]
fn oom_escaping_a_leaky_loop() {
    let v = analyze("oom/memscope-oom.pickle.gz");
    assert_eq!(v["verdict"]["kind"], "oom_leak");
    let d = dev(&v);
    assert_eq!(d["peak_exact"], true, "recorded from CUDA's start");
    let ooms = d["ooms"].as_array().unwrap();
    assert_eq!(ooms.len(), 1);
    assert_eq!(u(&ooms[0]["requested_bytes"]), 64 * MIB);
    assert_eq!(ooms[0]["cause"], "leak");
    let leaks = v["leaks"].as_array().unwrap();
    assert_eq!(leaks.len(), 1, "{leaks:?}");
    let l = &leaks[0];
    assert_eq!(l["kind"], "kept_outputs");
    assert!(l["site"]["file"].as_str().unwrap().ends_with("oom_leak.py"));
    assert_eq!(l["site"]["line"], 20, "the `out = model(x)` line");
    assert_eq!(
        l["growth_bytes_per_step"].as_f64().unwrap(),
        (32 * MIB) as f64
    );
    // The cap: what was reserved plus the request would have passed 1 GiB.
    assert!(u(&ooms[0]["reserved_bytes"]) + 64 * MIB > 1024 * MIB);
}

/// clean_steps.py under `--snapshot-on exit`: no finding; 505.1 MiB allocated at the end, as the
/// script printed after its last step.
#[test]
fn clean_run_snapshot_at_exit() {
    let v = analyze("clean/memscope-exit.pickle.gz");
    assert_eq!(v["verdict"]["kind"], "ok");
    assert!(v["leaks"].as_array().unwrap().is_empty());
    let d = dev(&v);
    assert!(d["ooms"].as_array().unwrap().is_empty());
    near_printed_mib(u(&d["allocated_bytes"]), 505.1);
}

/// `--profile-steps 3:4` on the same script: a real profiler trace with memory events. This file
/// was written before the recorder gave the profiler a schedule, so it has no `ProfilerStep`
/// spans (the recorder now marks them; tests/python checks that), and memscope says so: with no
/// steps, leaks are not judged.
#[test]
fn profile_steps_trace() {
    let v = analyze("clean/memscope-trace.json.gz");
    assert_eq!(v["input"]["kind"], "trace");
    assert_eq!(v["verdict"]["kind"], "unjudged");
    assert_eq!(v["verdict"]["leak_judgement"]["reason"], "too_few_steps");
    let d = dev(&v);
    // Two steps of a 3-layer MLP with Adam: 144 MiB of parameters and 288 MiB of Adam states
    // were there before the window; the profiled window's peak is above them.
    assert!(u(&d["peak_allocated_bytes"]) > 432 * MIB);
    let notes = v["notes"].as_array().unwrap();
    assert!(
        notes
            .iter()
            .any(|n| n.as_str().unwrap().contains("no ProfilerStep spans")),
        "{notes:?}"
    );
}

/// ddp_gloo.py under torchrun, 2 ranks on one GPU: one file per rank; rank 1 held an extra 64 MiB
/// buffer, and the peaks are what each rank printed (max_memory_allocated).
#[test]
fn torchrun_one_file_per_rank() {
    let r0 = analyze("ddp/memscope-exit-rank0.pickle.gz");
    let r1 = analyze("ddp/memscope-exit-rank1.pickle.gz");
    for v in [&r0, &r1] {
        assert_eq!(v["verdict"]["kind"], "ok");
    }
    let (p0, p1) = (
        u(&dev(&r0)["peak_allocated_bytes"]),
        u(&dev(&r1)["peak_allocated_bytes"]),
    );
    near_printed_mib(p0, 145.0);
    near_printed_mib(p1, 209.0);
    assert_eq!(p1 - p0, 64 * MIB, "rank 1's extra buffer");
    // `check` takes the two files as ranks.
    let out = Command::new(env!("CARGO_BIN_EXE_memscope"))
        .args(["check", "--no-config", "--format", "json"])
        .arg(path("ddp/memscope-exit-rank0.pickle.gz"))
        .arg(path("ddp/memscope-exit-rank1.pickle.gz"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\"passed\": true"), "{text}");
}

/// capture_api.py: `memscope.capture()` around 8 MiB allocations under a 512 MiB cap. Each 8 MiB
/// block takes a 20 MiB segment two at a time, leaving 4 MiB free in each of 25 segments: the OOM
/// is fragmentation (100 MiB free, largest free block 4 MiB) with 50 blocks (400 MiB) allocated.
#[test]
fn capture_context_manager_oom() {
    let v = analyze("api/memscope-oom.pickle.gz");
    assert_eq!(v["verdict"]["kind"], "oom_fragmentation");
    let d = dev(&v);
    assert_eq!(u(&d["allocated_bytes"]), 400 * MIB);
    let o = &d["ooms"][0];
    assert_eq!(u(&o["requested_bytes"]), 8 * MIB);
    assert_eq!(u(&o["largest_free_block_bytes"]), 4 * MIB);
    assert_eq!(u(&o["free_reserved_bytes"]), 100 * MIB);
}

/// `--profile-steps A:B` after the recorder gave the profiler a schedule (a second GPU run of
/// `clean_steps.py` with a binary of merge commit 70a6bc7's tree, `fixtures/run/logs/profile*.log`):
/// the trace marks exactly the steps asked for, so `3:4` gives `ProfilerStep#3` and `#4` (too few
/// to judge leaks), and `2:8` gives seven steps of a loop that keeps nothing: no leak.
#[test]
fn profile_steps_mark_the_steps_asked_for() {
    let v = analyze("profile/steps3_4.trace.json.gz");
    let names: Vec<&str> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ProfilerStep#3", "ProfilerStep#4"]);
    assert_eq!(v["verdict"]["kind"], "unjudged");
    assert_eq!(v["verdict"]["leak_judgement"]["reason"], "too_few_steps");

    let v = analyze("profile/steps2_8.trace.json.gz");
    let names: Vec<String> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_owned())
        .collect();
    let want: Vec<String> = (2..=8).map(|n| format!("ProfilerStep#{n}")).collect();
    assert_eq!(names, want);
    assert_eq!(v["verdict"]["kind"], "ok");
    assert!(v["leaks"].as_array().unwrap().is_empty());
}
