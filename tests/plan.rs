//! `memscope plan` against ground truth made on a GPU (fixtures/plan/truth.json): five
//! workloads, each recorded at a small batch b0 (and 2*b0), their real peaks at 1-8x b0 and
//! their real largest batch under a cap, all measured in fresh processes by the workload itself
//! (fixtures/plan/generate.py), never derived from memscope.
//!
//! What is asserted is what the plan promises: the largest batch is never above the real one;
//! the model reproduces the recorded run; with a second capture the peaks are within the
//! accuracy the issue asks (5% allocated, 10% reserved) where the program makes the same
//! requests at every size, and within the bounds ACCURACY.md reports elsewhere.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use memscope::analysis::plan::{self, Ask, NoMaxBatch, Other, Plan, Shape};
use memscope::analysis::whatif::AllocConf;
use memscope::model::Snapshot;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/plan")
}

fn truth() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir().join("truth.json")).unwrap()).unwrap()
}

fn load(name: &str) -> (Snapshot, memscope::analysis::Analyzed) {
    let p = dir().join(name);
    let (snap, len) = memscope::load::load_snapshot_sized(&p).unwrap();
    let a = memscope::analysis::analyze_snapshot(&snap, &p, len);
    (snap, a)
}

/// One workload's truth points at the recorded sequence length: (batch, allocated, reserved).
struct Truth {
    name: String,
    b0: u64,
    seq: Option<u64>,
    cap: u64,
    max_batch: u64,
    points: Vec<(u64, u64, u64)>,
}

fn workloads() -> Vec<Truth> {
    let t = truth();
    let mut out = Vec::new();
    for (name, w) in t["workloads"].as_object().unwrap() {
        let seq = w["seq"].as_u64();
        let points = w["truth"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["fits"].as_bool() == Some(true) && p["seq"].as_u64() == seq)
            .map(|p| {
                (
                    p["batch"].as_u64().unwrap(),
                    p["max_memory_allocated"].as_u64().unwrap(),
                    p["max_memory_reserved"].as_u64().unwrap(),
                )
            })
            .collect();
        out.push(Truth {
            name: name.clone(),
            b0: w["b0"].as_u64().unwrap(),
            seq,
            cap: w["cap"]["cap_bytes"].as_u64().unwrap(),
            max_batch: w["cap"]["max_batch"].as_u64().unwrap(),
            points,
        });
    }
    assert_eq!(out.len(), 5, "the five workloads of fixtures/plan");
    out
}

fn plan_of(w: &Truth, with: bool) -> Plan {
    let (snap, a) = load(&format!("{}_b{}.pickle.gz", w.name, w.b0));
    let other = with.then(|| load(&format!("{}_b{}.pickle.gz", w.name, 2 * w.b0)).0);
    let ask = Ask {
        recorded: Shape {
            batch: w.b0,
            seq: w.seq,
        },
        at: w
            .points
            .iter()
            .map(|p| Shape {
                batch: p.0,
                seq: w.seq,
            })
            .collect(),
        cap: Some(w.cap),
        conf: AllocConf::default(),
    };
    let o = other.as_ref().map(|s| Other {
        snap: s,
        shape: Shape {
            batch: 2 * w.b0,
            seq: w.seq,
        },
    });
    let mut plans = plan::plan(&snap, &a, &ask, o.as_ref()).unwrap();
    assert_eq!(plans.len(), 1);
    plans.remove(0)
}

fn err(pred: u64, real: u64) -> f64 {
    (pred as f64 - real as f64) / real as f64
}

#[test]
fn the_largest_batch_is_never_above_the_real_one() {
    for w in workloads() {
        for with in [false, true] {
            let p = plan_of(&w, with);
            let m = p.max_batch.as_ref().unwrap();
            assert!(
                m.batch <= w.max_batch,
                "{} (two captures: {with}): predicted {} > real {}",
                w.name,
                m.batch,
                w.max_batch
            );
            // One capture under autocast cannot tell every 16-bit weight cast from a 16-bit
            // activation of the same size (transformer_sdpa: 8 against 12): the answer is
            // rounded down, never up.
            assert!(
                m.batch * 10 >= w.max_batch * 6,
                "{} (two captures: {with}): predicted {} is far below the real {}",
                w.name,
                m.batch,
                w.max_batch
            );
            assert!(m.central_batch >= m.batch);
        }
    }
}

#[test]
fn the_model_reproduces_the_recorded_run() {
    for w in workloads() {
        let p = plan_of(&w, false);
        assert!(
            err(
                p.model_peak_allocated_bytes,
                p.recorded_peak_allocated_bytes
            )
            .abs()
                < 0.01,
            "{}",
            w.name
        );
        assert!(
            err(p.model_peak_reserved_bytes, p.recorded_peak_reserved_bytes).abs() < 0.03,
            "{}",
            w.name
        );
    }
}

#[test]
fn two_captures_predict_the_peaks() {
    for w in workloads() {
        let p = plan_of(&w, true);
        // cuDNN picks convolution algorithms (and workspaces) by batch size: the CNN's requests
        // differ between sizes, so its bounds are ACCURACY.md's, not the issue's.
        let (alloc_tol, res_tol) = if w.name == "cnn" {
            (0.10, 0.25)
        } else {
            (0.05, 0.10)
        };
        for (pred, &(batch, alloc, res)) in p.predictions.iter().zip(&w.points) {
            assert_eq!(pred.batch, batch);
            assert!(
                err(pred.peak_allocated_bytes, alloc).abs() <= alloc_tol,
                "{} batch {batch}: allocated {} against {alloc}",
                w.name,
                pred.peak_allocated_bytes
            );
            assert!(
                err(pred.peak_reserved_bytes, res).abs() <= res_tol,
                "{} batch {batch}: reserved {} against {res}",
                w.name,
                pred.peak_reserved_bytes
            );
        }
    }
}

#[test]
fn one_capture_sorts_what_grows() {
    // Without autocast, the one-capture peaks of the MLP and the fp32 transformers are within
    // the bounds at 2x-8x: what grows was told apart from weights, gradients,
    // optimizer state and workspaces.
    for w in workloads() {
        if !["mlp", "transformer", "transformer_ckpt"].contains(&w.name.as_str()) {
            continue;
        }
        let p = plan_of(&w, false);
        for (pred, &(batch, alloc, _)) in p.predictions.iter().zip(&w.points) {
            assert!(
                err(pred.peak_allocated_bytes, alloc).abs() <= 0.05,
                "{} batch {batch}: allocated {} against {alloc}",
                w.name,
                pred.peak_allocated_bytes
            );
        }
        assert!(p.split.grows_bytes > 0 && p.split.fixed_bytes > p.split.grows_bytes);
    }
}

#[test]
fn a_capture_that_ends_in_an_oom_promises_no_batch() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/leak_oom.pickle");
    let (snap, len) = memscope::load::load_snapshot_sized(&p).unwrap();
    let a = memscope::analysis::analyze_snapshot(&snap, &p, len);
    let ask = Ask {
        recorded: Shape {
            batch: 8,
            seq: None,
        },
        at: vec![Shape {
            batch: 4,
            seq: None,
        }],
        cap: None,
        conf: AllocConf::default(),
    };
    let plans = plan::plan(&snap, &a, &ask, None).unwrap();
    assert_eq!(plans[0].max_batch, Err(NoMaxBatch::EndsInOom));
    assert!(plans[0].ends_in_oom);
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_memscope"))
}

#[test]
fn the_cli_says_the_plan_and_refuses_bad_shapes() {
    let f = dir().join("transformer_b2.pickle.gz");
    let out = bin()
        .args(["plan", f.to_str().unwrap(), "--batch", "2", "--seq", "256"])
        .args(["--cap", "1694MiB", "--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = common::envelope::data(&out.stdout);
    assert_eq!(v["schema"], "memscope.plan/1");
    assert!(v["max_batch"].as_u64().is_some());
    let preds = v["predictions"].as_array().unwrap();
    assert_eq!(preds.len(), 3, "2x, 4x and 8x by default");
    for p in preds {
        assert!(p["peak_allocated_bytes"].as_u64().is_some());
        assert!(p["peak_reserved_bytes"].as_u64().is_some());
        assert!(p["oom"].as_bool().is_some());
    }
    let text = bin()
        .args([
            "plan",
            f.to_str().unwrap(),
            "--batch",
            "2",
            "--cap",
            "1694MiB",
        ])
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&text.stdout);
    assert!(s.contains("MAX BATCH"), "{s}");
    assert!(s.contains("AT THE RECORDED PEAK"), "{s}");
    for bad in [
        vec!["--at", "0"],
        vec!["--at", "4x"],
        vec!["--at", "8x512"], // a sequence length without --seq
        vec!["--batch", "0"],
        // Scaled past any device: said, not a crash of the allocator model.
        vec!["--at", "18446744073709551615"],
    ] {
        let out = bin()
            .args(["plan", f.to_str().unwrap(), "--batch", "2"])
            .args(&bad)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
    }
    let same = bin()
        .args(["plan", f.to_str().unwrap(), "--batch", "2", "--with"])
        .arg(f.to_str().unwrap())
        .output()
        .unwrap();
    assert_eq!(same.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&same.stderr).contains("same shape"));
}

/// `memscope run` records each device's memory size beside torch's snapshot; with no `--cap`
/// and no OOM to bound it, the plan takes it as the cap. Without it there is no cap, and no
/// largest batch (said, not guessed).
#[test]
fn the_device_size_a_run_records_is_the_default_cap() {
    let ask = |batch| Ask {
        recorded: Shape { batch, seq: None },
        at: vec![Shape {
            batch: 2 * batch,
            seq: None,
        }],
        cap: None,
        conf: AllocConf::default(),
    };
    let (snap, a) = load("mlp_b256_run.pickle.gz");
    assert_eq!(snap.device_total(0), Some(85_017_493_504));
    let p = plan::plan(&snap, &a, &ask(256), None).unwrap().remove(0);
    assert_eq!(p.cap.bytes, Some(85_017_493_504));
    assert_eq!(
        p.cap.source,
        memscope::analysis::whatif::CapSource::DeviceTotal
    );
    assert!(p.max_batch.is_ok());
    assert_eq!(p.predictions[0].oom, Some(false));

    let (snap, a) = load("mlp_b256.pickle.gz");
    assert_eq!(snap.device_total(0), None);
    let p = plan::plan(&snap, &a, &ask(256), None).unwrap().remove(0);
    assert_eq!(p.cap.bytes, None);
    assert_eq!(p.max_batch, Err(NoMaxBatch::NoCap));
}
