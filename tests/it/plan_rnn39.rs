//! Issue 39, item 4 on the real captures: holdout3's lstm_fp32 (b16, b32) with
//! fixtures/plan/cudnn39's b64 capture as the third. cuDNN's RNN backward workspace is 39.1,
//! 78.1, 129.4 and 129.4 MiB at b16, b32, b64 and b128: three sizes that fit no exact term.
//!
//! Asserted against the card's `memory_stats()` peaks (cudnn39/runs.jsonl): the workspace is
//! paired across all three captures (a recurrent module's, `Request::recurrent`), so the plan
//! stays above the card (the line through b32 and b64 is the safe side) but nearer: at b64, a
//! captured batch, within 7% (measured +6.0%; before, with the first two's linear term, +9.4%),
//! at b128 within 40% (measured +39.4%; before +46.4%).

use std::path::{Path, PathBuf};

use memscope::analysis::plan::{self, Ask, Other, Shape};
use memscope::analysis::whatif::AllocConf;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/plan")
}

/// Real reserved peaks by batch, from the workload's own RESULT lines.
fn real_reserved(workload: &str) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = crate::plan_cudnn39::real(workload)
        .into_iter()
        .map(|(batch, _, reserved)| (batch, reserved))
        .collect();
    out.sort_unstable();
    out
}

fn shape(batch: u64) -> Shape {
    Shape { batch, seq: None }
}

#[test]
fn lstm_rnn_workspace_is_fitted_from_three_captures() {
    let p = fixtures().join("holdout3/lstm_fp32_b16.pickle.gz");
    let (snap, len) = memscope::load::load_snapshot_sized(&p).unwrap();
    let a = memscope::analysis::analyze_snapshot(&snap, &p, len);
    let load = |f: &str| {
        memscope::load::load_snapshot_sized(&fixtures().join(f))
            .unwrap()
            .0
    };
    let (b32, b64) = (
        load("holdout3/lstm_fp32_b32.pickle.gz"),
        load("cudnn39/lstm_fp32_b64.pickle.gz"),
    );
    let truth = real_reserved("lstm_fp32");
    let at: Vec<(u64, u64)> = truth.iter().copied().filter(|t| t.0 >= 64).collect();
    assert_eq!(at.iter().map(|t| t.0).collect::<Vec<_>>(), [64, 128]);
    let ask = Ask {
        recorded: shape(16),
        at: at.iter().map(|t| shape(t.0)).collect(),
        cap: None,
        conf: AllocConf::default(),
    };
    let os = [
        Other {
            snap: &b32,
            shape: shape(32),
        },
        Other {
            snap: &b64,
            shape: shape(64),
        },
    ];
    let plan = plan::plan_all(&snap, &a, &ask, &os).unwrap().remove(0);
    let err = |x: u64, r: u64| (x as f64 - r as f64) / r as f64;
    let (p64, p128) = (&plan.predictions[0], &plan.predictions[1]);
    assert_eq!((p64.batch, p128.batch), (64, 128));
    let e64 = err(p64.peak_reserved_upper_bytes, at[0].1);
    assert!(
        (0.0..=0.07).contains(&e64),
        "b64: upper reserved off by {e64:+.3}"
    );
    let e128 = err(p128.peak_reserved_upper_bytes, at[1].1);
    assert!(
        (0.0..=0.40).contains(&e128),
        "b128: upper reserved off by {e128:+.3}"
    );
}

/// Two captures (b16, b32) under the card's cap (888 MiB; the card's largest batch is 86, its
/// OOMs at b87 and b88 ask for the RNN workspace, 130 MiB). The backward temporaries paired as
/// recurrent are exact on the line through b16 and b32, so what still fails the replay is the
/// workspace itself (linear from 39.1 and 78.1 MiB, 161 MiB at b66): the first failing request
/// at b73 (said OOM) is a 39.1 MiB one of the b16 capture, and the largest batch stays at or
/// below the card's.
#[test]
fn lstm_two_captures_fail_at_the_rnn_workspace_not_above_the_card() {
    let p = fixtures().join("holdout3/lstm_fp32_b16.pickle.gz");
    let (snap, len) = memscope::load::load_snapshot_sized(&p).unwrap();
    let a = memscope::analysis::analyze_snapshot(&snap, &p, len);
    let b32 =
        memscope::load::load_snapshot_sized(&fixtures().join("holdout3/lstm_fp32_b32.pickle.gz"))
            .unwrap()
            .0;
    let ask = Ask {
        recorded: Shape {
            batch: 16,
            seq: Some(64),
        },
        at: vec![Shape {
            batch: 73,
            seq: Some(64),
        }],
        cap: Some(931_135_488),
        conf: AllocConf::default(),
    };
    let os = [Other {
        snap: &b32,
        shape: Shape {
            batch: 32,
            seq: Some(64),
        },
    }];
    let plan = plan::plan_all(&snap, &a, &ask, &os).unwrap().remove(0);
    let ev = plan.predictions[0]
        .oom_event
        .expect("b73 fails under the cap") as usize;
    assert_eq!(snap.devices[0].events[ev].size, 40_960_000, "event {ev}");
    let max = plan.max_batch.as_ref().unwrap().batch;
    assert!((40..=86).contains(&max), "largest batch {max} (card: 86)");
}
