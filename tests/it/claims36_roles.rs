//! Categories follow what the memory did, not the outermost frame (issue 36, item 3), judged on
//! GPU captures of `fixtures/claims36/` (made by its generate.py on an H200 with PyTorch 2.11,
//! Lightning 2.6, transformers 5.17) against each workload's own truth (`truth.bytes` in
//! meta.json: parameters, gradients, the optimizer's `state`, and what autograd saved in the last
//! forward, measured by the workload before memscope read anything).
//!
//! `optimizer.step(closure)` runs the model's forward and its backward inside the optimizer's
//! frame (Lightning's automatic optimization, LBFGS, a user's closure). What the closure makes is
//! activations and gradients; optimizer state is what the optimizer's own code keeps. Before
//! frame roles, every block under a `torch/optim/` frame was optimizer state: on the Lightning
//! GPT, 52.1 MiB of "optimizer state" and no activations at the peak, for 19.1 MiB of AdamW state.

use std::path::{Path, PathBuf};

use memscope::analysis::categories::{self, Categories};
use memscope::analysis::{replay, steps};
use memscope::model::Snapshot;
use serde_json::Value;

const MIB: u64 = 1 << 20;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/claims36")
}

/// The capture, or `None` (said) where the directory is absent.
fn capture(stem: &str) -> Option<(Snapshot, Value)> {
    let p = dir().join(format!("{stem}.pickle.gz"));
    if !p.exists() {
        eprintln!("SKIP {stem}: {} is absent", p.display());
        return None;
    }
    let snap = memscope::load::load_snapshot(&p).unwrap();
    let meta: Value = serde_json::from_str(
        &std::fs::read_to_string(dir().join(format!("{stem}.meta.json"))).unwrap(),
    )
    .unwrap();
    Some((snap, meta["truth"].clone()))
}

fn truth_bytes(t: &Value, key: &str) -> u64 {
    t["bytes"][key]
        .as_u64()
        .unwrap_or_else(|| panic!("truth.bytes.{key}: {}", t["bytes"]))
}

/// Categories at the log's end (the dump) and at the allocated peak.
fn states(snap: &Snapshot) -> (Categories, Categories) {
    let dev = &snap.devices[0];
    let tl = replay::replay(dev, &snap.settings);
    let st = steps::split(snap, dev, &tl);
    let end = categories::at_state(snap, dev, &st, &tl.end, None);
    let ev = tl.peaks.allocated.event.expect("the peak lies in the log");
    let peak = categories::at_event(snap, dev, &tl, &st, ev);
    (end, peak)
}

fn show(stem: &str, what: &str, c: &Categories) {
    eprintln!(
        "{stem} {what}: param {} opt {} grad {} act {} tmp {} before {} other {}",
        c.parameter,
        c.optimizer_state,
        c.gradient,
        c.activation,
        c.temporary,
        c.before_recording,
        c.other
    );
}

/// AdamW's state: `exp_avg` and `exp_avg_sq` per parameter (the truth), and a step counter per
/// parameter when it lives on the GPU (`capturable`, `fused`), at most 512 B each.
fn adamw_state_bounds(t: &Value) -> (u64, u64) {
    let state = truth_bytes(t, "optimizer_state");
    let tensors = t["bytes"]["param_tensors"].as_u64().unwrap_or(0);
    (state, state + tensors * 512)
}

#[test]
fn memory_made_inside_a_closure_is_the_models() {
    // `closure_user`: opt.step(closure) with zero_grad, forward and backward inside the closure;
    // `lit_gpt`: Lightning 2.6's automatic optimization. Both train the same GPT with AdamW; the
    // allocated peak falls at the end of the forward, inside the optimizer's frame.
    for stem in ["closure_user", "lit_gpt"] {
        let Some((snap, t)) = capture(stem) else {
            continue;
        };
        let (end, peak) = states(&snap);
        show(stem, "end", &end);
        show(stem, "peak", &peak);
        let (lo, hi) = adamw_state_bounds(&t);
        assert!(
            (lo..=hi).contains(&peak.optimizer_state),
            "{stem}: optimizer state at the peak {} against AdamW's {lo}..={hi}",
            peak.optimizer_state
        );
        assert_eq!(peak.parameter, truth_bytes(&t, "params"), "{stem}");
        // What autograd saved in the forward is alive at the peak: activations, within 2%
        // (the truth counts storages the forward made; the categories count blocks, rounded to
        // 512 B, and the batch's embedding lookups).
        let saved = truth_bytes(&t, "activations_saved_in_last_forward");
        assert!(
            peak.activation.abs_diff(saved) * 50 <= saved,
            "{stem}: activations at the peak {} against {saved} saved",
            peak.activation
        );
        if stem == "closure_user" {
            // At the dump (after the last step): the parameters, their .grad and AdamW's state.
            assert!(
                (lo..=hi).contains(&end.optimizer_state),
                "{stem}: optimizer state at the end {}",
                end.optimizer_state
            );
            assert_eq!(end.parameter, truth_bytes(&t, "params"), "{stem}");
            // Its twin without a closure (the same GPT, AdamW, steps): the same categories at
            // the dump, byte for byte.
            if let Some((twin, _)) = capture("opt_adamw_foreach") {
                let (twin_end, _) = states(&twin);
                for (a, b) in end.named().into_iter().zip(twin_end.named()) {
                    assert_eq!(a, b, "closure_user against opt_adamw_foreach at the dump");
                }
            }
        }
    }
}

#[test]
fn lbfgs_history_is_optimizer_state_and_its_closure_is_the_models() {
    let Some((snap, t)) = capture("opt_lbfgs") else {
        return;
    };
    let (end, peak) = states(&snap);
    show("opt_lbfgs", "end", &end);
    show("opt_lbfgs", "peak", &peak);
    let state = truth_bytes(&t, "optimizer_state");
    // At the dump: LBFGS's state (its history, direction, previous flat gradient) is optimizer
    // state, and nothing the closure made is.
    assert!(
        end.optimizer_state >= state && end.optimizer_state <= state + MIB,
        "optimizer state at the end {} against {state}",
        end.optimizer_state
    );
    assert_eq!(end.parameter, truth_bytes(&t, "params"));
    assert!(peak.activation > 0, "the closure's forward: activations");
}

#[test]
fn optimizers_without_a_closure_keep_their_state() {
    // The twins with no closure: AdamW (foreach, for-loop) and a hand-written AdamW (user code,
    // not torch/optim: its state is not recognisable by frames, and must not be called
    // optimizer state from an outer frame either).
    for stem in ["opt_adamw_foreach", "opt_adamw_forloop", "hf_trainer"] {
        let Some((snap, t)) = capture(stem) else {
            continue;
        };
        let (end, peak) = states(&snap);
        show(stem, "end", &end);
        show(stem, "peak", &peak);
        let (lo, hi) = adamw_state_bounds(&t);
        assert!(
            (lo..=hi).contains(&peak.optimizer_state),
            "{stem}: optimizer state at the peak {} against {lo}..={hi}",
            peak.optimizer_state
        );
    }
    if let Some((snap, t)) = capture("opt_hand_adamw") {
        let (end, peak) = states(&snap);
        show("opt_hand_adamw", "end", &end);
        show("opt_hand_adamw", "peak", &peak);
        // Its exp_avg / exp_avg_sq are made in the user's own code: left in `other`, never taken
        // for activations, gradients or parameters.
        let state = truth_bytes(&t, "optimizer_state");
        assert!(end.other >= state, "{} other against {state}", end.other);
        assert_eq!(end.parameter, truth_bytes(&t, "params"));
    }
}

/// The Lightning captures of `fixtures/loops/` (Lightning 2.6.6 on an H100, AdamW over a decoder
/// LM, fp32): AdamW keeps `exp_avg` and `exp_avg_sq` per parameter, twice the parameters' bytes
/// (plus a step counter per parameter tensor, on the CPU unless `capturable`). Before roles, the
/// forward run by Lightning's closure made 93.1 MiB of "optimizer state" for 30.1 MiB of
/// parameters.
#[test]
fn lightning_loops_optimizer_state_is_adamws() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/loops");
    for stem in ["lightning_step_clean", "lightning_step_leak"] {
        let snap = memscope::load::load_snapshot(&root.join(format!("{stem}.pickle.gz"))).unwrap();
        let (_, peak) = states(&snap);
        show(stem, "peak", &peak);
        let p = peak.parameter;
        assert!(p > 0, "{stem}");
        assert!(
            peak.optimizer_state >= 2 * p && peak.optimizer_state <= 2 * p + 64 * 1024,
            "{stem}: optimizer state {} for {p} B of parameters",
            peak.optimizer_state
        );
        assert!(
            peak.activation > 0,
            "{stem}: the closure's forward made activations"
        );
    }
}
