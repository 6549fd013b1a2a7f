//! Issue 39, session 17: captures that start mid-run. A log recorded after warm-up steps starts
//! from a layout (blocks alive, segments the warm-up cached) that depends on the batch; until
//! session 17 the plan replayed the first capture's layout as fixed at every size, so the
//! second capture's own replay came out 12.8% over in reserved on holdout 6's hf_llama_ckpt
//! (b4 and b8) and 1.6% on dit_fp16_scaler (b16 and b32), and that error was the band. Asserted
//! here: the layouts are paired across the captures, each capture replays from its own, the
//! band takes the replay from the other capture's layout instead, and the largest batch moves
//! toward the card's. Also the diagnosis of holdout 2's gpt_fp16_scaler, whose b8 replay is
//! off 7.9%: its two layouts are alike to the byte, so its error is not the layout's.

use std::path::{Path, PathBuf};

use memscope::analysis::plan::{self, Ask, Other, Plan, Shape};
use memscope::analysis::whatif::AllocConf;
use memscope::model::Snapshot;

fn dir(set: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/plan")
        .join(set)
}

fn truth(set: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir(set).join("truth.json")).unwrap()).unwrap()
}

fn snap(set: &str, name: &str) -> Snapshot {
    memscope::load::load_snapshot_sized(&dir(set).join(name))
        .unwrap()
        .0
}

/// The card's largest reserved peak at batch `b` under the cap, over the trials that fitted.
fn card_reserved(wl: &serde_json::Value, b: u64) -> u64 {
    let cap = &wl["cap"];
    let trials = [&cap["attempts"], &cap["repeats"]];
    trials
        .iter()
        .filter_map(|t| t.as_array())
        .flatten()
        .filter(|r| r["batch"].as_u64() == Some(b) && r["fits"].as_bool() == Some(true))
        .filter_map(|r| r["max_memory_reserved"].as_u64())
        .max()
        .unwrap()
}

/// The plan of `w` (set `set`) from b0 and 2*b0, under the card's cap, at the card's largest
/// batch; with the workload's truth.
fn plan_two(set: &str, w: &str) -> (Plan, serde_json::Value) {
    let t = truth(set);
    let wl = t["workloads"][w].clone();
    let (b0, seq) = (wl["b0"].as_u64().unwrap(), wl["seq"].as_u64());
    let p = dir(set).join(format!("{w}_b{b0}.pickle.gz"));
    let (s, len) = memscope::load::load_snapshot_sized(&p).unwrap();
    let a = memscope::analysis::analyze_snapshot(&s, &p, len);
    let real = wl["cap"]["max_batch"].as_u64().unwrap();
    let ask = Ask {
        recorded: Shape { batch: b0, seq },
        at: vec![
            Shape { batch: real, seq },
            Shape {
                batch: real - 1,
                seq,
            },
        ],
        cap: wl["cap"]["cap_bytes"].as_u64(),
        conf: AllocConf::default(),
    };
    let o = snap(set, &format!("{w}_b{}.pickle.gz", 2 * b0));
    let os = [Other {
        snap: &o,
        shape: Shape { batch: 2 * b0, seq },
    }];
    (plan::plan_all(&s, &a, &ask, &os).unwrap().remove(0), wl)
}

#[test]
fn each_capture_replays_from_its_own_layout_and_the_band_from_the_others() {
    for w in ["hf_llama_ckpt", "dit_fp16_scaler"] {
        let (p, _) = plan_two("holdout6", w);
        assert!(p.starts_mid_run, "{w}");
        let f = p
            .prelog
            .as_ref()
            .expect("two captures of a mid-run log: paired");
        assert!(f.blocks_paired > 0 && f.segments_fitted > 0, "{w}: {f:?}");
        let ev = &p.band_evidence;
        // The second capture's own replay: 12.8% (llama) and 1.6% (dit) off before.
        let second = ev.replays[1];
        assert!(second.error() < 0.001, "{w}: {second:?}");
        // The band's check: each capture from the other's layout.
        assert_eq!(ev.layout_replays.len(), 2, "{w}");
        assert!(p.band.under >= ev.layout_error(), "{w}: {:?}", p.band);
    }
}

#[test]
fn the_largest_batch_moves_toward_the_card() {
    // hf_llama_ckpt: the card fits 20 (3 of 3, tried after the first reading: raw/run2),
    // failed 21 (2 of 2) and fitted 22. Before, a band of 12.8% (the b8 replay from b4's
    // layout); now the layout's own error (2.4%). The reserved peak at 19 within 1% of the
    // card's; at 20 the card reserved less than at 19 (2,059 against 2,103 MB: not monotonic),
    // and the plan is within 10% of it, over.
    let (p, wl) = plan_two("holdout6", "hf_llama_ckpt");
    let real = wl["cap"]["max_batch"].as_u64().unwrap();
    assert_eq!(real, 20);
    let card = card_reserved(&wl, real - 1);
    let at = p.predictions[1].peak_reserved_bytes;
    assert!(at.abs_diff(card) * 100 < card, "{at} against {card} at 19");
    let card = card_reserved(&wl, real);
    let at = p.predictions[0].peak_reserved_bytes;
    assert!(
        at >= card && (at - card) * 10 < card,
        "{at} against {card} at 20"
    );
    assert!(p.band.under < 0.05, "{:?}", p.band);
    let m = p.max_batch.as_ref().unwrap().batch;
    assert!((real - 1..=real).contains(&m), "{m} against {real}");
    // dit_fp16_scaler: reserved at the card's largest batch 7.2% over before (the b16 layout's
    // segments kept at every size), now under 6%.
    let (p, wl) = plan_two("holdout6", "dit_fp16_scaler");
    let real = wl["cap"]["max_batch"].as_u64().unwrap();
    let card = card_reserved(&wl, real);
    let at = p.predictions[0].peak_reserved_bytes;
    assert!(
        at >= card && (at - card) * 100 < card * 6,
        "{at} against {card}"
    );
    assert!(p.max_batch.as_ref().unwrap().batch <= real);
}

#[test]
fn alike_layouts_pair_whole_and_data_dependent_ones_stay_as_recorded() {
    // gpt_fp16_scaler is recorded after the model and optimizer are made: both captures start
    // from the same 56 blocks in 10 segments, all paired, none fitted. Its b8 replay is off
    // (7.9% reserved) for another reason: that log makes 128 requests more than b4's.
    let (p, _) = plan_two("holdout2", "gpt_fp16_scaler");
    let f = p.prelog.as_ref().unwrap();
    assert_eq!((f.blocks, f.segments), (56, 10), "{f:?}");
    assert_eq!((f.blocks_paired, f.segments_paired), (56, 10), "{f:?}");
    assert_eq!((f.blocks_fitted, f.segments_fitted), (0, 0), "{f:?}");
    assert_eq!(
        (f.others_unpaired_blocks, f.others_unpaired_segments),
        (0, 0)
    );
    assert!(p.band_evidence.layout_error() == 0.0);
    // The mixture of experts asks other sizes from one iteration to the next: the segments
    // cached before recording follow no batch term, and its layout stays as recorded.
    let (p, _) = plan_two("holdout6", "moe_bf16");
    assert!(p.step_sizes.data_dependent && p.starts_mid_run);
    assert!(p.prelog.is_none() && p.band_evidence.layout_replays.is_empty());
}
