//! Issue #41: the device beyond the allocator, against the truth each workload wrote (from
//! nvidia-smi and torch) before memscope read anything. Captures in fixtures/device41/.

use crate::common::envelope::data;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const MIB: i64 = 1 << 20;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/device41")
}

fn analyze(bin: &str, file: &Path) -> (Value, String) {
    let out = |fmt: &str| {
        Command::new(bin)
            .args(["analyze", "--format", fmt])
            .arg(file)
            .output()
            .unwrap()
            .stdout
    };
    (data(&out("json")), String::from_utf8(out("text")).unwrap())
}

fn truth(case: &str, mode: &str, rank: u32) -> Value {
    let p = dir()
        .join(case)
        .join(format!("truth-{mode}-rank{rank}.json"));
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

fn capture(case: &str, kind: &str, rank: Option<u32>) -> PathBuf {
    let r = rank.map(|r| format!("-rank{r}")).unwrap_or_default();
    dir()
        .join(case)
        .join(format!("memscope-{kind}{r}.pickle.gz"))
}

fn i(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

/// The process's own device's accounting.
fn own(d: &Value) -> &Value {
    let cur = d["current_device"].as_u64();
    d["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| cur.is_none_or(|c| a["device"].as_u64() == Some(c)))
        .unwrap()
}

/// total, reserved and free against torch's figures; the context against nvidia-smi's.
fn check_accounting(case: &str, mode: &str, rank: u32, kind: &str) -> Value {
    let t = truth(case, mode, rank);
    let (j, _) = analyze(
        env!("CARGO_BIN_EXE_memscope"),
        &capture(case, kind, Some(rank)),
    );
    let d = &j["device"];
    assert_eq!(d["state"], "accounted", "{case} rank {rank}: {d}");
    let a = own(d).clone();
    assert_eq!(
        i(&a["total"]["bytes"]),
        i(&t["mem_get_info"]["total"]),
        "{case}"
    );
    assert_eq!(
        i(&a["reserved"]["bytes"]),
        i(&t["reserved"]),
        "{case}: reserved"
    );
    // Free moves by what NCCL or the driver took between the truth and the dump.
    let df = (i(&a["free"]["bytes"]) - i(&t["mem_get_info"]["free"])).abs();
    assert!(df <= 64 * MIB, "{case}: free differs by {df}");
    // The parts: total = reserved + outside + free, exactly.
    assert_eq!(
        i(&a["total"]["bytes"]),
        i(&a["reserved"]["bytes"]) + i(&a["outside"]["bytes"]) + i(&a["free"]["bytes"])
    );
    a
}

fn have(case: &str) -> bool {
    let ok = dir().join(case).exists();
    if !ok {
        eprintln!("SKIP: fixtures/device41/{case} not generated");
    }
    ok
}

#[test]
fn ddp_and_fsdp_accounting_matches_the_truth() {
    for (case, mode) in [
        ("ddp_default", "ddp"),
        ("ddp_buff16m", "ddp"),
        ("fsdp_buff1m", "fsdp"),
    ] {
        if !have(case) {
            continue;
        }
        for rank in 0..2 {
            let a = check_accounting(case, mode, rank, "exit");
            let t = truth(case, mode, rank);
            // NCCL's measured bytes (what the process gained on its GPU beyond the allocator's
            // growth across communicator setup and the steps, nvidia-smi) lie in the
            // estimate's range: its channel buffers at least, the unexplained bytes at most.
            let n = &a["nccl"];
            let m = i(&t["nccl_measured"]);
            assert!(
                i(&n["low_bytes"]) <= m && m <= i(&n["high_bytes"]),
                "{case} rank {rank}: NCCL measured {m} outside {n}"
            );
            assert_eq!(
                i(&n["high_bytes"]),
                i(&a["unexplained_bytes"]),
                "{case}: {a}"
            );
            // No other process on this GPU, as nvidia-smi says.
            assert_eq!(
                i(&a["other_processes"]["bytes"]),
                i(&t["smi_others"]),
                "{case}"
            );
        }
    }
}

#[test]
fn another_process_on_the_gpu_is_seen() {
    if !have("hog_20g") {
        return;
    }
    let t = truth("hog_20g", "hog", 0);
    let (j, text) = analyze(
        env!("CARGO_BIN_EXE_memscope"),
        &capture("hog_20g", "exit", None),
    );
    let a = own(&j["device"]);
    let d = (i(&a["other_processes"]["bytes"]) - i(&t["hog_smi"])).abs();
    assert!(d <= 4 * MIB, "other processes differ from the hog by {d}");
    assert_eq!(i(&t["smi_others"]), i(&t["hog_smi"]));
    assert!(text.contains("other processes"), "{text}");
}

#[test]
fn an_nccl_oom_gets_its_own_cause_with_the_accounting() {
    if !have("ncclo_fill") {
        return;
    }
    for rank in 0..2 {
        let f = capture("ncclo_fill", "oom", Some(rank));
        let (j, text) = analyze(env!("CARGO_BIN_EXE_memscope"), &f);
        assert_eq!(j["verdict"]["kind"], "oom_outside_allocator", "{text}");
        assert_eq!(j["device"]["outside_oom"]["source"], "nccl");
        assert!(
            text.starts_with("memscope")
                && text.contains("VERDICT OOM raised outside the allocator by NCCL"),
            "{text}"
        );
        let t = truth("ncclo_fill", "ncclo", rank);
        let a = own(&j["device"]);
        assert_eq!(i(&a["reserved"]["bytes"]), i(&t["reserved"]));
        assert_eq!(i(&a["total"]["bytes"]), i(&t["mem_get_info"]["total"]));
        // Before: the binary of main@00ef801 reads the same capture without the device
        // figures, and calls the fill's caught OOMs the cause (see the README).
        let a_free = i(&a["free"]["bytes"]);
        assert!(a_free < 64 * MIB, "the GPU was full: {a_free}");
    }
    // The job view (and the summaries made from its rows) gives each rank the cause that ended
    // it, not the last of the allocator OOMs that the fill loop caught on purpose.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_memscope"))
        .args(["analyze", "--format", "json"])
        .arg(dir().join("ncclo_fill"))
        .output()
        .unwrap();
    let job: Value = serde_json::from_slice(&out.stdout).unwrap();
    let causes: Vec<&Value> = job["data"]["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["oom_cause"])
        .collect();
    assert_eq!(causes, ["outside_allocator", "outside_allocator"], "{job}");
    // The gate fails on it with its own reason, not with the caught allocator OOMs' cause.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_memscope"))
        .args(["check", "--format", "json"])
        .arg(capture("ncclo_fill", "oom", Some(0)))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let gate: Value = serde_json::from_slice(&out.stdout).unwrap();
    let oom = gate["data"]["files"][0]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rule"] == "oom")
        .unwrap();
    assert_eq!(oom["status"], "fail", "{oom}");
    assert_eq!(oom["reason"], "oom_outside_allocator", "{oom}");
}

#[test]
fn a_snapshot_without_device_figures_says_so_in_one_line() {
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/leak_oom.pickle");
    let (j, text) = analyze(env!("CARGO_BIN_EXE_memscope"), &f);
    assert_eq!(j["device"]["state"], "no_device_figures");
    assert_eq!(text.lines().filter(|l| l.starts_with("device")).count(), 1);
}

// -- second round (gen2.sh): `memscope run` itself, the CUDA context measured ------------------

/// The accounting of a second-round capture, with its truth.
fn round2(case: &str, mode: &str, rank: u32, kind: &str) -> Option<(Value, Value, String)> {
    if !have(case) {
        return None;
    }
    let (j, text) = analyze(
        env!("CARGO_BIN_EXE_memscope"),
        &capture(
            case,
            kind,
            if matches!(mode, "cublas" | "cudnn") {
                None
            } else {
                Some(rank)
            },
        ),
    );
    Some((own(&j["device"]).clone(), truth(case, mode, rank), text))
}

/// Every second-round capture: the context the recorder measured right after `set_device`
/// (NVML's bytes for the process less reserved) against nvidia-smi's figure for the process
/// after its first allocation, less reserved (MiB granularity): 518 MiB on each H200.
#[test]
fn the_cuda_context_is_measured_and_matches_nvidia_smi() {
    let cases = [
        ("ctx_ddp", "ddp", 0, "exit"),
        ("ctx_ddp", "ddp", 1, "exit"),
        ("ctx_ddp_buff16m", "ddp", 0, "exit"),
        ("ctx_ddp_buff16m", "ddp", 1, "exit"),
        ("ctx_fsdp_buff1m", "fsdp", 0, "exit"),
        ("ctx_fsdp_buff1m", "fsdp", 1, "exit"),
        ("nccle_empty", "nccle", 0, "oom"),
        ("nccle_empty", "nccle", 1, "oom"),
        ("ncclx_cumemalloc", "ncclx", 1, "oom"),
        ("cublas_fill", "cublas", 0, "oom"),
    ];
    for (case, mode, rank, kind) in cases {
        let Some((a, t, text)) = round2(case, mode, rank, kind) else {
            continue;
        };
        let c = &a["context"];
        assert_eq!(c["source"], "nvml_process_less_reserved", "{case}: {a}");
        assert_eq!(a["context_moment"], "set_device", "{case}");
        let d = (i(&c["bytes"]) - i(&t["context_smi_pid"])).abs();
        assert!(
            d <= 2 * MIB,
            "{case} rank {rank}: context differs from nvidia-smi by {d}"
        );
        // cudaMemGetInfo's view of the same moment (device-wide) is within 16 MiB of it.
        let d = (i(&c["bytes"]) - i(&t["context_meminfo"])).abs();
        assert!(d <= 16 * MIB, "{case}: {d}");
        assert!(
            text.contains("CUDA context 518.0 MiB (NVML's bytes for the process less reserved, right after set_device)"),
            "{text}"
        );
    }
}

/// With the context measured, NCCL's range ends at the outside bytes no measured part
/// explains: within 64 MiB above NCCL's measured growth (nvidia-smi), where the first
/// round's captures, without the context, ended it 500 MiB and more above.
#[test]
fn with_the_context_measured_the_nccl_range_is_tight_around_the_truth() {
    for (case, mode) in [
        ("ctx_ddp", "ddp"),
        ("ctx_ddp_buff16m", "ddp"),
        ("ctx_fsdp_buff1m", "fsdp"),
    ] {
        if !have(case) {
            continue;
        }
        for rank in 0..2 {
            let a = check_accounting(case, mode, rank, "exit");
            let t = truth(case, mode, rank);
            let n = &a["nccl"];
            let m = i(&t["nccl_measured"]);
            assert!(
                i(&n["low_bytes"]) <= m && m <= i(&n["high_bytes"]),
                "{case} rank {rank}: NCCL measured {m} outside {n}"
            );
            let over = i(&n["high_bytes"]) - m;
            assert!(over <= 64 * MIB, "{case} rank {rank}: high is {over} above");
            assert_eq!(
                i(&a["outside"]["bytes"]),
                i(&a["context"]["bytes"]) + i(&a["unexplained_bytes"])
            );
        }
    }
    // Before: the same workloads, no context recorded.
    for (case, mode) in [("ddp_default", "ddp"), ("fsdp_buff1m", "fsdp")] {
        if !have(case) {
            continue;
        }
        let a = check_accounting(case, mode, 0, "exit");
        assert!(a["context"].is_null());
        let over = i(&a["nccl"]["high_bytes"]) - i(&truth(case, mode, 0)["nccl_measured"]);
        assert!(over >= 500 * MIB, "{case}: {over}");
    }
}

/// NCCL fails first: one `torch.empty` left 64 MiB free, so the allocator never failed
/// (memory_stats: no OOM), then the first all_reduce. The verdict is the outside cause with the
/// accounting; `check` fails with its own reason and counts that one OOM only.
#[test]
fn an_nccl_oom_without_allocator_ooms() {
    for rank in 0..2 {
        let Some((a, t, text)) = round2("nccle_empty", "nccle", rank, "oom") else {
            return;
        };
        assert_eq!(i(&t["num_ooms"]), 0);
        assert!(
            text.contains("VERDICT OOM raised outside the allocator by NCCL")
                && text.contains("the CUDA context 518.0 MiB, other processes 0 B, the rest"),
            "{text}"
        );
        assert_eq!(i(&a["reserved"]["bytes"]), i(&t["reserved"]));
        // What NCCL took before failing: the free bytes the workload saw before the all_reduce
        // less those at the dump. The estimate's range holds it.
        let took = i(&t["mem_get_info"]["free"]) - i(&a["free"]["bytes"]);
        let n = &a["nccl"];
        assert!(took > 0, "{took}");
        assert!(
            i(&n["low_bytes"]) <= took && took <= i(&n["high_bytes"]),
            "NCCL took {took}, outside {n}"
        );
        let out = Command::new(env!("CARGO_BIN_EXE_memscope"))
            .args(["check", "--format", "json"])
            .arg(capture("nccle_empty", "oom", Some(rank)))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let gate: Value = serde_json::from_slice(&out.stdout).unwrap();
        let oom = gate["data"]["files"][0]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["rule"] == "oom")
            .unwrap()
            .clone();
        assert_eq!(
            (oom["status"].as_str(), oom["reason"].as_str()),
            (Some("fail"), Some("oom_outside_allocator")),
            "{oom}"
        );
        assert_eq!(oom["measured"].as_f64(), Some(1.0), "{oom}");
    }
}

/// Memory taken outside the allocator by the program itself (cuMemAlloc) is what no figure
/// explains: the accounting shows it as such (and the NCCL range may reach all of it), the
/// cause of the NCCL and cuBLAS failures on the full card is the outside one.
#[test]
fn memory_the_program_took_outside_the_allocator_is_unexplained() {
    for (case, mode, lib) in [
        ("ncclx_cumemalloc", "ncclx", "nccl"),
        ("cublas_fill", "cublas", "cublas"),
    ] {
        let Some((a, t, text)) = round2(case, mode, if lib == "nccl" { 1 } else { 0 }, "oom")
        else {
            continue;
        };
        assert_eq!(i(&t["num_ooms"]), 0);
        let fill = i(&t["cumemalloc_bytes"]);
        let beyond = i(&a["unexplained_bytes"]) - fill;
        // Beyond the fill: kernels loaded lazily, and what NCCL took before failing.
        assert!((0..=256 * MIB).contains(&beyond), "{case}: {beyond}");
        let (j, _) = analyze(
            env!("CARGO_BIN_EXE_memscope"),
            &capture(case, "oom", (lib == "nccl").then_some(1)),
        );
        assert_eq!(j["verdict"]["kind"], "oom_outside_allocator");
        assert_eq!(j["device"]["outside_oom"]["source"], lib);
        if lib == "cublas" {
            // One process: no NCCL estimate, and the rest is not called NCCL's.
            assert!(a["nccl"].is_null(), "{a}");
            assert!(
                text.contains("CUBLAS_STATUS_ALLOC_FAILED")
                    && text.contains("the rest 139.3 GiB: what no figure explains"),
                "{text}"
            );
        }
    }
}

/// cuDNN on a full card (cuMemAlloc left 3.1 MiB free) says only `CUDNN_STATUS_INTERNAL_ERROR`
/// at its first convolution. Before, the recorder wrote no OOM snapshot (log-before.txt: the
/// exit snapshot only, and `analyze` said "no OOM recorded"); now the error is read as an OOM
/// outside the allocator, with the free bytes at the error as its evidence. Also the capture's
/// origin, recorded by the real torch.
#[test]
fn cudnns_internal_error_on_a_full_card_is_an_outside_oom_with_its_evidence() {
    let Some((a, t, text)) = round2("cudnn_fill", "cudnn", 0, "oom") else {
        return;
    };
    assert_eq!(i(&t["num_ooms"]), 0);
    let before = std::fs::read_to_string(dir().join("cudnn_fill/log-before.txt")).unwrap();
    assert!(
        before.contains("CUDNN_STATUS_INTERNAL_ERROR") && before.contains("memscope-exit.pickle")
    );
    let (j, _) = analyze(
        env!("CARGO_BIN_EXE_memscope"),
        &capture("cudnn_fill", "oom", None),
    );
    assert_eq!(j["verdict"]["kind"], "oom_outside_allocator", "{text}");
    let o = &j["device"]["outside_oom"];
    assert_eq!(o["source"], "cudnn");
    let r = &o["reading"]["internal_error_on_full_card"];
    let free = i(&r["free_bytes"]);
    assert!(free < i(&r["threshold_bytes"]), "{o}");
    // The free bytes at the error against the workload's own reading before the convolution.
    assert!(
        (free - i(&t["mem_get_info"]["free"])).abs() <= 2 * MIB,
        "{o} {t}"
    );
    assert_eq!(i(&a["free"]["bytes"]), free);
    assert!(
        text.contains("VERDICT OOM raised outside the allocator by cuDNN")
            && text.contains("cuDNN named no failed allocation, only an internal error")
            && text.contains("taken with torch 2.11.0+cu130, CUDA 13.0, on host vm"),
        "{text}"
    );
    // An allocation failure named by the library keeps its plain reading.
    let (j, _) = analyze(
        env!("CARGO_BIN_EXE_memscope"),
        &capture("cublas_fill", "oom", None),
    );
    assert_eq!(j["device"]["outside_oom"]["reading"], "allocation_failed");
}

/// Where the capture has device figures but no context figure (the first round's recorder), the
/// accounting says the context is inside the unexplained bytes; where it was measured, it is not.
#[test]
fn an_unmeasured_context_is_said_to_be_in_the_unexplained_bytes() {
    let note = "the CUDA context was not measured, so it is counted here";
    for (case, measured) in [("ddp_default", false), ("ctx_ddp", true)] {
        if !have(case) {
            continue;
        }
        let (_, text) = analyze(
            env!("CARGO_BIN_EXE_memscope"),
            &capture(case, "exit", Some(0)),
        );
        assert_eq!(!text.contains(note), measured, "{case}: {text}");
        assert!(text.contains("unexplained"), "{case}: {text}");
    }
}
