//! Issue 39 on fixtures/plan/holdout4: four workloads made for it on an H100 (a Llama-style
//! decoder in bf16 with fused AdamW, a transformers BERT-base under fp16 autocast with
//! GradScaler, a GPT recorded with Python and C++ frames, a ResNet-50 in channels_last). Their
//! peaks and largest batches under a cap were measured by the workloads themselves in fresh
//! processes (holdout4/generate.py, truth.json) before memscope read a capture.
//!
//! Asserted: matching across captures holds whatever frames the stacks hold; the fit/OOM column
//! never calls a batch that failed on the card a fit, nor one that fitted every trial an OOM;
//! one capture whose readings differ names the capture to take next and its command; a third
//! capture is used.

use std::path::{Path, PathBuf};
use std::process::Command;

use memscope::analysis::plan::{self, Ask, Fit, Other, Plan, Shape, Verdict};
use memscope::analysis::whatif::AllocConf;
use memscope::model::{FrameKind, Snapshot};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/plan/holdout4")
}

fn load(name: &str) -> (Snapshot, memscope::analysis::Analyzed) {
    let p = dir().join(name);
    let (snap, len) = memscope::load::load_snapshot_sized(&p).unwrap();
    let a = memscope::analysis::analyze_snapshot(&snap, &p, len);
    (snap, a)
}

fn truth() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir().join("truth.json")).unwrap()).unwrap()
}

/// The plan of workload `w` from its b0 capture and the captures at `others` (batch sizes), at
/// every batch tried under the cap on the card.
fn plan_with(w: &str, others: &[(Snapshot, u64)], at: &[u64]) -> Plan {
    let t = truth();
    let wl = &t["workloads"][w];
    let (b0, seq) = (wl["b0"].as_u64().unwrap(), wl["seq"].as_u64());
    let (snap, a) = load(&format!("{w}_b{b0}.pickle.gz"));
    let ask = Ask {
        recorded: Shape { batch: b0, seq },
        at: at.iter().map(|&batch| Shape { batch, seq }).collect(),
        cap: wl["cap"]["cap_bytes"].as_u64(),
        conf: AllocConf::default(),
    };
    let os: Vec<Other> = others
        .iter()
        .map(|(s, batch)| Other {
            snap: s,
            shape: Shape { batch: *batch, seq },
        })
        .collect();
    plan::plan_all(&snap, &a, &ask, &os).unwrap().remove(0)
}

fn trials(w: &str) -> Vec<(u64, u64, u64)> {
    let t = truth();
    t["workloads"][w]["cap"]["trials_by_batch"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(b, v)| {
            (
                b.parse().unwrap(),
                v["fit"].as_u64().unwrap(),
                v["failed"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn matched(p: &Plan) -> (usize, usize, usize) {
    match &p.fit {
        Fit::TwoCaptures {
            matched,
            by_python_stack,
            requests,
            ..
        } => (*matched, *by_python_stack, *requests),
        Fit::OneCapture => panic!("one capture"),
    }
}

/// The same capture with every native frame dropped from its stacks, as `stacks="python"`
/// records them.
fn python_frames_only(mut s: Snapshot) -> Snapshot {
    let mut events = std::mem::take(&mut s.devices[0].events);
    for e in &mut events {
        let py: Vec<_> = s
            .stacks
            .frames(e.stack)
            .iter()
            .copied()
            .filter(|&f| s.stacks.frame(f).kind != FrameKind::Native)
            .collect();
        e.stack = s.stacks.intern_stack(&py);
    }
    s.devices[0].events = events;
    s
}

#[test]
fn matching_holds_whatever_frames_the_stacks_hold() {
    // gpt_ctxall_amp was recorded with stacks="all": Python and C++ frames.
    let w = "gpt_ctxall_amp";
    let other = load("gpt_ctxall_amp_b32.pickle.gz").0;
    let p = plan_with(w, &[(other, 32)], &[64]);
    let (m, py, n) = matched(&p);
    assert!(m * 100 >= n * 98, "{m} of {n} matched");
    assert_eq!(py, 0, "whole stacks match: {py} by Python frames alone");
    // The other capture's stacks cut to their Python frames (another recording depth): the
    // requests still match, now by their Python frames and log order, and give the same plan.
    let cut = python_frames_only(load("gpt_ctxall_amp_b32.pickle.gz").0);
    let q = plan_with(w, &[(cut, 32)], &[64]);
    let (m2, py2, n2) = matched(&q);
    assert_eq!(n2, n);
    assert!(
        m2 * 100 >= n * 97,
        "{m2} of {n} matched with the frames cut"
    );
    assert!(py2 * 10 >= m2 * 9, "{py2} of {m2} by Python frames alone");
    let (a, b) = (&p.predictions[0], &q.predictions[0]);
    let off = a.peak_allocated_bytes.abs_diff(b.peak_allocated_bytes) as f64
        / a.peak_allocated_bytes as f64;
    assert!(off < 0.01, "{a:?} against {b:?}");
    // And the two-capture prediction meets the goal against the card at 4x.
    let real = truth()["workloads"][w]["truth"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["batch"] == 64)
        .unwrap()["max_memory_allocated"]
        .as_u64()
        .unwrap();
    let e = a.peak_allocated_bytes.abs_diff(real) as f64 / real as f64;
    assert!(
        e < 0.05,
        "allocated at 64: {} against {real}",
        a.peak_allocated_bytes
    );
}

#[test]
fn the_oom_column_never_calls_a_real_fit_an_oom_nor_a_real_oom_a_fit() {
    let t = truth();
    for (w, wl) in t["workloads"].as_object().unwrap() {
        let b0 = wl["b0"].as_u64().unwrap();
        let ts = trials(w);
        let at: Vec<u64> = ts.iter().map(|t| t.0).collect();
        for n in [1, 2] {
            let others: Vec<(Snapshot, u64)> = (n == 2)
                .then(|| (load(&format!("{w}_b{}.pickle.gz", 2 * b0)).0, 2 * b0))
                .into_iter()
                .collect();
            let p = plan_with(w, &others, &at);
            for (r, &(b, fit, failed)) in p.predictions.iter().zip(&ts) {
                assert_eq!(r.batch, b);
                match r.verdict.unwrap() {
                    Verdict::Fits => assert_eq!(failed, 0, "{w} ({n}): {b} said to fit"),
                    Verdict::Oom => assert!(
                        failed > 0 || fit == 0,
                        "{w} ({n}): {b} said OOM, fitted {fit} of {fit}"
                    ),
                    Verdict::WithinBand => {}
                }
            }
        }
    }
}

#[test]
fn bert_at_its_real_largest_batch_is_no_longer_an_oom() {
    // The case: reserved over-predicted by a few percent turned a batch that fits on the
    // card into a predicted OOM. BERT fits 53 (4 of 4 under its cap) and fails 54 (4 of 4).
    let other = load("bert_fp16_scaler_b16.pickle.gz").0;
    let p = plan_with("bert_fp16_scaler", &[(other, 16)], &[53, 54]);
    assert_eq!(p.predictions[0].oom, Some(true), "the bare replay fails");
    assert_eq!(p.predictions[0].verdict, Some(Verdict::WithinBand));
    assert_ne!(p.predictions[1].verdict, Some(Verdict::Fits));
}

#[test]
fn one_capture_names_the_capture_to_take_next() {
    // ResNet-50 from one capture: unsure requests, so the two readings differ.
    let p = plan_with("resnet50_bf16_cl", &[], &[64]);
    assert_ne!(
        p.predictions[0].peak_reserved_bytes,
        p.predictions[0].peak_reserved_upper_bytes
    );
    let n = p.next_capture.expect("a next capture");
    assert_eq!((n.batch, n.steps), (32, 3));
    let out = Command::new(env!("CARGO_BIN_EXE_memscope"))
        .current_dir(dir())
        .args(["plan", "resnet50_bf16_cl_b16.pickle.gz", "--batch", "16"])
        .args(["--cap", "1997MiB", "--color", "never"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let s = String::from_utf8(out.stdout).unwrap();
    assert!(
        s.contains("$ memscope run --snapshot-on exit --max-steps 3 -o capture_b32 -- python train.py --batch 32"),
        "{s}"
    );
    assert!(s.contains("$ memscope plan resnet50_bf16_cl_b16.pickle.gz --batch 16 --with capture_b32/memscope-exit.pickle --with-batch 32"), "{s}");
    // Two captures: nothing to ask for.
    let other = load("resnet50_bf16_cl_b32.pickle.gz").0;
    assert!(plan_with("resnet50_bf16_cl", &[(other, 32)], &[64])
        .next_capture
        .is_none());
}

#[test]
fn a_third_capture_is_fitted_with_the_others() {
    let w = "llama_bf16";
    let others = vec![
        (load("llama_bf16_b4.pickle.gz").0, 4),
        (load("llama_bf16_b12.pickle.gz").0, 12),
    ];
    let p = plan_with(w, &others, &[16]);
    match &p.fit {
        Fit::TwoCaptures {
            more,
            matched,
            requests,
            ..
        } => {
            assert_eq!(more.iter().map(|s| s.batch).collect::<Vec<_>>(), [12]);
            assert!(matched * 100 >= requests * 98, "{matched} of {requests}");
        }
        f => panic!("{f:?}"),
    }
    let t = truth();
    let wl = &t["workloads"][w];
    let real = wl["truth"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["batch"] == 16)
        .unwrap();
    for (pred, key) in [
        (
            p.predictions[0].peak_allocated_bytes,
            "max_memory_allocated",
        ),
        (p.predictions[0].peak_reserved_bytes, "max_memory_reserved"),
    ] {
        let r = real[key].as_u64().unwrap();
        assert!(
            pred.abs_diff(r) as f64 / (r as f64) < 0.01,
            "{key}: {pred} against {r}"
        );
    }
    let m = p.max_batch.as_ref().unwrap();
    // The likelier reading gives the card's largest batch; so does the answer, the largest the
    // fit column calls fits: the three captures pair every request on an exact term and replay
    // each capture's peaks, so the band is the plan's own (1%, session 15), where the measured
    // 5% of session 14 answered one under it (and a 3% margin before, the card's 13).
    let real = wl["cap"]["max_batch"].as_u64().unwrap();
    assert_eq!(m.central_batch, real);
    assert_eq!(p.band.rule, memscope::analysis::plan::BandRule::Explained);
    assert!(p.band.under < memscope::analysis::plan::band::MEASURED);
    assert_eq!(m.batch, real);
    // On the command line: --also with its batch; a missing --also-batch is refused.
    let run = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_memscope"))
            .current_dir(dir())
            .args([
                "plan",
                "llama_bf16_b2.pickle.gz",
                "--batch",
                "2",
                "--seq",
                "1024",
            ])
            .args(["--with", "llama_bf16_b4.pickle.gz", "--with-batch", "4"])
            .args(["--also", "llama_bf16_b12.pickle.gz"])
            .args(extra)
            .args(["--color", "never"])
            .output()
            .unwrap()
    };
    let ok = run(&["--also-batch", "12"]);
    assert_eq!(ok.status.code(), Some(0));
    assert!(String::from_utf8(ok.stdout)
        .unwrap()
        .contains("3 captures (the others at batch 4 and batch 12)"));
    assert_eq!(run(&[]).status.code(), Some(2));
}

/// fixtures/plan/segments39: gpt_ctxall_amp run again on an H100 at b16..b96 with the capture's
/// own settings, its `memory_stats()` peaks written by the workload (runs.jsonl) before memscope
/// read a capture. Item 2 of issue 39: the model's segments at the larger size against a real
/// run's. Placed upwards, the model missed one 384 MiB segment at b48 (the real run's 32 MiB
/// block from the first step splits the newest 384 MiB segment, the lowest); placed as the
/// driver placed them, each capture replays to its own reserved peak and the plan from b16 and
/// b32 gives the real reserved peak at 3x, 4x and 6x b0 (measured: exact; before: -14%).
#[test]
fn the_reserved_peak_at_3_to_6_times_b0_is_the_real_runs() {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/plan/segments39");
    let runs: Vec<serde_json::Value> = std::fs::read_to_string(d.join("runs.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l.strip_prefix("RESULT ").unwrap()).unwrap())
        .collect();
    let real = |b: u64| {
        let r = runs.iter().find(|r| r["batch"] == b).unwrap();
        (
            r["max_memory_allocated"].as_u64().unwrap(),
            r["max_memory_reserved"].as_u64().unwrap(),
        )
    };
    let load = |b: u64| {
        let p = d.join(format!("gpt_ctxall_amp_b{b}.pickle.gz"));
        let (snap, len) = memscope::load::load_snapshot_sized(&p).unwrap();
        let a = memscope::analysis::analyze_snapshot(&snap, &p, len);
        (snap, a)
    };
    let seq = Some(256);
    let ask = |b: u64, at: &[u64]| Ask {
        recorded: Shape { batch: b, seq },
        at: at.iter().map(|&batch| Shape { batch, seq }).collect(),
        cap: None,
        conf: AllocConf::default(),
    };
    for b in [48, 64, 96] {
        let (snap, a) = load(b);
        let p = plan::plan_all(&snap, &a, &ask(b, &[]), &[])
            .unwrap()
            .remove(0);
        assert_eq!(
            p.recorded_peak_reserved_bytes,
            real(b).1,
            "b{b}: the capture"
        );
        assert_eq!(p.model_peak_reserved_bytes, real(b).1, "b{b}: its replay");
    }
    let (s16, a16) = load(16);
    let (s32, _) = load(32);
    let other = Other {
        snap: &s32,
        shape: Shape { batch: 32, seq },
    };
    let p = plan::plan_all(&s16, &a16, &ask(16, &[48, 64, 96]), &[other])
        .unwrap()
        .remove(0);
    for r in &p.predictions {
        let (alloc, reserved) = real(r.batch);
        let e = |p: u64, t: u64| (p as f64 - t as f64).abs() / t as f64;
        assert!(
            e(r.peak_allocated_bytes, alloc) < 0.01,
            "b{}: allocated",
            r.batch
        );
        assert!(
            e(r.peak_reserved_bytes, reserved) < 0.01,
            "b{}: reserved {} against the real {reserved}",
            r.batch,
            r.peak_reserved_bytes
        );
    }
}
