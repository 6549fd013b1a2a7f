//! Issue 39 on holdout4's gpt_ctxall_amp, a GPT under bf16 autocast recorded with
//! `context="all", stacks="all"` and `TORCH_SYMBOLIZE_MODE=fast`: its C++ frames name their
//! binary (`/usr/bin/python3.12`, `libstdc++.so.6`) with the code's offset as the line. Read as
//! Python, those frames were every request's "user" frame, and the autocast detector, which
//! splits op calls by their Python frames and asks the innermost Python frame's role, missed
//! 344 weight casts and grew them with the batch (one capture: allocated +2.6% and reserved
//! +2.6% at b128, largest batch 82 against 93, the likelier reading 85).

use std::path::{Path, PathBuf};

use memscope::analysis::plan::{self, Ask, Shape};
use memscope::analysis::whatif::AllocConf;
use memscope::model::FrameKind;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/plan/holdout4")
}

#[test]
fn binaries_in_c_frames_are_native_not_user_code() {
    let p = dir().join("gpt_ctxall_amp_b16.pickle.gz");
    let (s, _) = memscope::load::load_snapshot_sized(&p).unwrap();
    let dev = &s.devices[0];
    let mut users = 0;
    for e in &dev.events {
        if let Some(f) = s.stacks.user_frame(e.stack) {
            users += 1;
            let file = s.stacks.str(f.file);
            assert!(file.ends_with(".py"), "user frame in {file}:{}", f.line);
        }
        for &f in s.stacks.frames(e.stack) {
            let fr = s.stacks.frame(f);
            let file = s.stacks.str(fr.file);
            if file.contains(".so.") || file.ends_with("/python3.12") {
                assert_eq!(fr.kind, FrameKind::Native, "{file}");
            }
        }
    }
    assert!(users > 1000, "{users} requests with a user frame");
}

#[test]
fn one_capture_with_c_frames_finds_the_weight_casts() {
    let t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir().join("truth.json")).unwrap()).unwrap();
    let wl = &t["workloads"]["gpt_ctxall_amp"];
    let (b0, seq) = (wl["b0"].as_u64().unwrap(), wl["seq"].as_u64());
    let pts = crate::plan_sets::points(wl);
    assert!(pts.len() >= 5);
    let p = dir().join(format!("gpt_ctxall_amp_b{b0}.pickle.gz"));
    let (s, len) = memscope::load::load_snapshot_sized(&p).unwrap();
    let a = memscope::analysis::analyze_snapshot(&s, &p, len);
    let ask = Ask {
        recorded: Shape { batch: b0, seq },
        at: pts
            .iter()
            .map(|&(batch, _, _)| Shape { batch, seq })
            .collect(),
        cap: wl["cap"]["cap_bytes"].as_u64(),
        conf: AllocConf::default(),
    };
    let plan = plan::plan_all(&s, &a, &ask, &[]).unwrap().remove(0);
    let err = |x: u64, real: u64| (x as f64 - real as f64) / real as f64;
    for (pr, &(b, al, re)) in plan.predictions.iter().zip(&pts) {
        assert_eq!(pr.batch, b);
        let (ea, er) = (
            err(pr.peak_allocated_bytes, al),
            err(pr.peak_reserved_bytes, re),
        );
        // Before: +1.0% to +2.6% allocated, +1.0% to +2.6% reserved.
        assert!(ea.abs() <= 0.005, "b{b}: allocated {ea:+.4}");
        assert!(er.abs() <= 0.005, "b{b}: reserved {er:+.4}");
    }
    let real = wl["cap"]["max_batch"].as_u64().unwrap();
    let m = plan.max_batch.as_ref().expect("a largest batch");
    // The likelier reading alone finds the card's largest batch (before: 85 against 93); the
    // answer is the largest the fit column calls fits (the unsure requests' upper reading, 5%
    // under the cap: 82; 83 with a 3% margin before session 14), and stays at or under it.
    assert_eq!(m.central_batch, real);
    assert!(
        m.batch <= real && m.batch >= 82,
        "{} against {real}",
        m.batch
    );
}
