//! `memscope plan` against ground truth made on a GPU: fixtures/plan/truth.json (five
//! workloads the plan was tuned on), holdout/ (five more), holdout2/ (six, made in session 8)
//! and, where present, holdout3/. Each workload was recorded at a small batch b0 (and 2*b0);
//! its real peaks at 1-8x b0 and its real largest batch under a cap were measured in fresh
//! processes by the workload itself (each set's generate.py), never derived from memscope.
//!
//! What is asserted is what the plan promises: the largest batch is never above the real one;
//! the model reproduces the recorded run; with a second capture the peaks are within the
//! accuracy the issue asks (5% allocated, 10% reserved) where the program makes the same
//! requests at every size, and within the bounds ACCURACY.md reports elsewhere.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use memscope::analysis::plan::{self, Ask, NoMaxBatch, Other, Plan, Shape};
use memscope::analysis::whatif::AllocConf;
use memscope::model::Snapshot;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/plan")
}

/// The sets of ground truth, by folder under fixtures/plan ("" is the tuned set), with their
/// number of workloads.
const SETS: [(&str, usize); 4] = [("", 5), ("holdout", 5), ("holdout2", 6), ("holdout3", 5)];

fn set_dir(set: &str) -> PathBuf {
    dir().join(set)
}

fn truth(set: &str) -> Option<serde_json::Value> {
    let p = set_dir(set).join("truth.json");
    p.exists()
        .then(|| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
}

fn load(name: &str) -> (Snapshot, memscope::analysis::Analyzed) {
    load_in("", name)
}

fn load_in(set: &str, name: &str) -> (Snapshot, memscope::analysis::Analyzed) {
    let p = set_dir(set).join(name);
    let (snap, len) = memscope::load::load_snapshot_sized(&p).unwrap();
    let a = memscope::analysis::analyze_snapshot(&snap, &p, len);
    (snap, a)
}

/// One workload's truth points at the recorded sequence length: (batch, allocated, reserved).
struct Truth {
    set: &'static str,
    name: String,
    b0: u64,
    seq: Option<u64>,
    cap: u64,
    max_batch: u64,
    points: Vec<(u64, u64, u64)>,
}

fn workloads() -> Vec<Truth> {
    workloads_of("")
}

/// Every set's workloads (the sets present: holdout3 is made after the others).
fn all_workloads() -> Vec<Truth> {
    SETS.iter().flat_map(|(set, _)| workloads_of(set)).collect()
}

fn workloads_of(set: &'static str) -> Vec<Truth> {
    let Some(t) = truth(set) else {
        assert!(
            set == "holdout3",
            "fixtures/plan/{set}/truth.json is missing"
        );
        return Vec::new();
    };
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
            set,
            name: name.clone(),
            b0: w["b0"].as_u64().unwrap(),
            seq,
            cap: w["cap"]["cap_bytes"].as_u64().unwrap(),
            max_batch: w["cap"]["max_batch"].as_u64().unwrap(),
            points,
        });
    }
    let n = SETS.iter().find(|s| s.0 == set).unwrap().1;
    assert_eq!(out.len(), n, "the workloads of fixtures/plan/{set}");
    out
}

fn plan_of(w: &Truth, with: bool) -> Plan {
    let (snap, a) = load_in(w.set, &format!("{}_b{}.pickle.gz", w.name, w.b0));
    let other = with.then(|| load_in(w.set, &format!("{}_b{}.pickle.gz", w.name, 2 * w.b0)).0);
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

/// Workloads whose largest batch the plan puts above the real one, with one capture or two
/// (`false`, `true`), and why. The test fails if one of them stops being above (then it leaves
/// this list) or another joins it.
// holdout2's gpt_amp_collide from one capture answered 11 (real 10) until session 14, when the
// answer became the largest batch the fit column calls fits (its 5% band, not a 3% margin): at
// batch 4 and more the backward's weight-gradient matmuls make split-K workspaces the capture at
// b0 = 2 does not show. None is above now.
const KNOWN_ABOVE: [(&str, &str, bool, &str); 0] = [];

/// One `#[test]` per workload, `TEST = (SET, NAME)`, each checking its largest batch (one test
/// per workload, so they run in parallel and a failure names its workload); and `LISTED`, for
/// the census test below.
macro_rules! per_workload {
    ($($test:ident = ($set:literal, $name:literal),)*) => {
        pub(super) const LISTED: &[(&str, &str)] = &[$(($set, $name)),*];
        $(
            #[test]
            fn $test() {
                super::largest_batch_is_never_above_the_real_one($set, $name);
            }
        )*
    };
}

mod the_largest_batch_is_never_above_the_real_one {
    per_workload! {
        mlp = ("", "mlp"),
        transformer = ("", "transformer"),
        transformer_ckpt = ("", "transformer_ckpt"),
        transformer_sdpa = ("", "transformer_sdpa"),
        cnn = ("", "cnn"),
        mlp_wide = ("holdout", "mlp_wide"),
        gpt_small = ("holdout", "gpt_small"),
        gpt_small_amp = ("holdout", "gpt_small_amp"),
        cnn_amp = ("holdout", "cnn_amp"),
        hf_gpt2 = ("holdout", "hf_gpt2"),
        gpt_amp_collide = ("holdout2", "gpt_amp_collide"),
        mlp_amp = ("holdout2", "mlp_amp"),
        vit_amp = ("holdout2", "vit_amp"),
        hf_bert_amp = ("holdout2", "hf_bert_amp"),
        gpt_fp16_scaler = ("holdout2", "gpt_fp16_scaler"),
        vgg_fp32 = ("holdout2", "vgg_fp32"),
        t5_amp = ("holdout3", "t5_amp"),
        token_mlp_fp32 = ("holdout3", "token_mlp_fp32"),
        resnet_amp = ("holdout3", "resnet_amp"),
        gpt_nobias_amp = ("holdout3", "gpt_nobias_amp"),
        lstm_fp32 = ("holdout3", "lstm_fp32"),
    }
}

/// Every workload of every truth.json has its largest-batch test above: a workload added to a
/// set without one fails here.
#[test]
fn every_workload_has_its_largest_batch_test() {
    let all: std::collections::BTreeSet<(String, String)> = all_workloads()
        .into_iter()
        .map(|w| (w.set.to_string(), w.name))
        .collect();
    let listed = the_largest_batch_is_never_above_the_real_one::LISTED
        .iter()
        .filter(|(set, _)| truth(set).is_some())
        .map(|(set, name)| (set.to_string(), name.to_string()))
        .collect();
    assert_eq!(all, listed, "the workloads vs the largest-batch tests");
}

fn largest_batch_is_never_above_the_real_one(set: &'static str, name: &str) {
    if set == "holdout3" && truth(set).is_none() {
        return; // made after the others: absent from older checkouts (see SETS)
    }
    let w = workloads_of(set)
        .into_iter()
        .find(|w| w.name == name)
        .unwrap_or_else(|| panic!("fixtures/plan/{set}/truth.json has no workload {name}"));
    for with in [false, true] {
        let known = KNOWN_ABOVE
            .iter()
            .any(|k| k.0 == w.set && k.1 == w.name && k.2 == with);
        let p = plan_of(&w, with);
        let m = p.max_batch.as_ref().unwrap();
        let what = format!("{}/{} (two captures: {with})", w.set, w.name);
        if known {
            assert!(
                m.batch == w.max_batch + 1,
                "{what}: predicted {} against the real {}: update KNOWN_ABOVE",
                m.batch,
                w.max_batch
            );
        } else {
            assert!(
                m.batch <= w.max_batch,
                "{what}: predicted {} > real {}",
                m.batch,
                w.max_batch
            );
        }
        // Rounded down, but not far: the answer keeps a margin and checks the batches
        // below it (fixtures/plan/holdout: mlp_wide's real 1856 is past the search's 16x).
        let floor = if w.name == "mlp_wide" { 8 } else { 6 };
        assert!(
            m.batch * 10 >= w.max_batch * floor,
            "{what}: predicted {} is far below the real {}",
            m.batch,
            w.max_batch
        );
        assert!(m.central_batch >= m.batch);
    }
}

/// Under autocast one capture tells each weight's 16-bit cast (made inside the `nn.Linear`
/// call, before its output) from the 16-bit activations of the same size, so the peaks are
/// within the 5% at 2x-8x b0 where the program makes the same requests at every size.
/// Before session 8, transformer_sdpa was 21% low at 8x (every cast of a weight's size was an
/// activation's twin when batch x sequence = width).
#[test]
fn one_capture_tells_weight_casts_from_activations() {
    use memscope::analysis::plan::classify::classify;
    use memscope::analysis::plan::Basis;
    let amp = [
        ("", "transformer_sdpa"),
        ("holdout", "gpt_small_amp"),
        ("holdout2", "hf_bert_amp"),
        ("holdout2", "gpt_fp16_scaler"),
        ("holdout2", "mlp_amp"),
        ("holdout3", "t5_amp"),
        ("holdout3", "gpt_nobias_amp"),
        ("holdout3", "resnet_amp"),
    ];
    for w in all_workloads() {
        let p = plan_of(&w, false);
        let (snap, a) = load_in(w.set, &format!("{}_b{}.pickle.gz", w.name, w.b0));
        let shape = Shape {
            batch: w.b0,
            seq: w.seq,
        };
        let reqs = classify(&snap, &snap.devices[0], &a.per_device[0], shape);
        let casts = reqs.iter().flatten().any(|r| r.basis == Basis::WeightCast);
        let is_amp = amp.iter().any(|a| a.0 == w.set && a.1 == w.name);
        let autocast =
            w.name.contains("amp") || w.name.contains("fp16") || w.name == "transformer_sdpa";
        // mlp_amp's casts (2 MiB at batch 384) are no multiple of the batch: fixed by their
        // size before any cast rule is asked.
        if !autocast {
            assert!(!casts, "{}/{}: fp32, yet weight casts", w.set, w.name);
        } else if w.name != "mlp_amp" {
            assert!(casts, "{}/{}: no weight cast found", w.set, w.name);
        }
        if !is_amp {
            continue;
        }
        for (pred, &(batch, alloc, _)) in p.predictions.iter().zip(&w.points) {
            if batch > 8 * w.b0 {
                continue;
            }
            assert!(
                err(pred.peak_allocated_bytes, alloc).abs() <= 0.05,
                "{}/{} batch {batch}: allocated {} against {alloc}",
                w.set,
                w.name,
                pred.peak_allocated_bytes
            );
        }
    }
}

/// cuDNN's workspaces give way under a cap (it runs another algorithm when one does not fit),
/// so the plan's replay under a cap goes on without them: the CNN's largest batch came from 44
/// to 50 (real 53). Captures without convolutions have none.
#[test]
fn convolution_workspaces_give_way_under_a_cap() {
    use memscope::analysis::plan::classify::conv_workspaces;
    for w in all_workloads() {
        let (snap, _) = load_in(w.set, &format!("{}_b{}.pickle.gz", w.name, w.b0));
        let n = conv_workspaces(&snap.stacks, &snap.devices[0]).len();
        // The captures whose forward frees a request inside a convolution before the next call
        // (read apart from memscope with Python): vit_amp's one patch convolution takes none.
        let convs = ["cnn", "cnn_amp", "vgg_fp32", "resnet_amp"];
        assert_eq!(
            n > 0,
            convs.contains(&w.name.as_str()),
            "{}/{}: {n} workspaces",
            w.set,
            w.name
        );
    }
    let cnn = workloads().into_iter().find(|w| w.name == "cnn").unwrap();
    let m = plan_of(&cnn, false).max_batch.unwrap();
    // 49 since session 14: the largest batch the fit column calls fits (50 with a 3% margin).
    assert!((49..=53).contains(&m.batch), "cnn: {}", m.batch);
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
