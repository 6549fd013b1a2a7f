//! holdout5's U-Net (fresh set, read here to explain, no rule tuned on it) from three captures
//! (b8, b16, b48): its largest batch, 46, is above the card's 45 because the card is not
//! monotonic there: 46 failed 4 of 4 trials and 47 fitted 3 of 3 (truth.json's
//! `trials_by_batch`). What must hold is the plan's fit column: at no batch the card failed at
//! does the plan say "fits" (46 is within the error band), with one, two or three captures.

use std::path::{Path, PathBuf};

use memscope::analysis::plan::{self, Ask, Other, Shape, Verdict};
use memscope::analysis::whatif::AllocConf;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/plan/holdout5")
}

fn shape(batch: u64) -> Shape {
    Shape { batch, seq: None }
}

#[test]
fn unet_never_said_to_fit_where_the_card_failed() {
    let t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir().join("truth.json")).unwrap()).unwrap();
    let cap = &t["workloads"]["unet_fp16_scaler"]["cap"];
    let failed = crate::plan_maxbatch39::failed_batches(cap);
    assert!(failed.contains(&46), "{failed:?}");
    let load = |f: &str| {
        memscope::load::load_snapshot_sized(&dir().join(f))
            .unwrap()
            .0
    };
    let p = dir().join("unet_fp16_scaler_b8.pickle.gz");
    let (snap, len) = memscope::load::load_snapshot_sized(&p).unwrap();
    let a = memscope::analysis::analyze_snapshot(&snap, &p, len);
    let (b16, b48) = (
        load("unet_fp16_scaler_b16.pickle.gz"),
        load("unet_fp16_scaler_b48.pickle.gz"),
    );
    let ask = Ask {
        recorded: shape(8),
        at: failed.iter().map(|&b| shape(b)).collect(),
        cap: Some(cap["cap_bytes"].as_u64().unwrap()),
        conf: AllocConf::default(),
    };
    let others = [
        Other {
            snap: &b16,
            shape: shape(16),
        },
        Other {
            snap: &b48,
            shape: shape(48),
        },
    ];
    for n in 0..=2 {
        let plan = plan::plan_all(&snap, &a, &ask, &others[..n])
            .unwrap()
            .remove(0);
        for p in &plan.predictions {
            assert_ne!(
                p.verdict,
                Some(Verdict::Fits),
                "{} captures, b{}",
                n + 1,
                p.batch
            );
        }
    }
}
