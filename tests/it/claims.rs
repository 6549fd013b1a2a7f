//! Issue 23's claims, judged on memscope's own GPU captures of each shape (`fixtures/claims/`, made
//! by its generate.py on an H100 with PyTorch 2.11): a forward pass that OOMs under a cap (three
//! models, and the clean twins of two), inference with a KV cache (three caches), and a mid-run log
//! of fine-tuning (Python stacks and C++ stacks).
//!
//! The truth is each capture's meta.json, written by the workload before memscope read anything:
//! what autograd saved for backward (a `saved_tensors_hooks` pack hook that notes storages), the
//! bytes of the weights, optimizer state and gradients, the KV cache's storages, and
//! `torch.cuda.memory_allocated()` just before recording began. These tests assert conclusions
//! (categories, causes, findings), not how they are printed.

use std::path::{Path, PathBuf};

use memscope::analysis::categories::{self, Categories};
use memscope::analysis::oom::Cause;
use memscope::analysis::{replay, steps, Analysis, VerdictKind};
use memscope::model::Snapshot;
use serde_json::Value;

const MIB: u64 = 1 << 20;

fn own(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/claims")
        .join(name)
}

fn json(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(own(name)).unwrap()).unwrap()
}

/// The workload's own facts (`result` in meta.json).
fn truth(stem: &str) -> Value {
    json(&format!("{stem}.meta.json"))["result"].clone()
}

/// A byte count from the truth, by a dotted path (`saved_at_oom.forward_bytes`); absent is 0
/// (`buffer_bytes` of a model without buffers).
fn bytes(v: &Value, path: &str) -> u64 {
    let mut x = v;
    for k in path.split('.') {
        x = &x[k];
    }
    if x.is_null() {
        return 0;
    }
    x.as_u64()
        .unwrap_or_else(|| panic!("{path} is not a byte count: {x}"))
}

fn load(stem: &str) -> (Snapshot, Analysis) {
    let p = own(&format!("{stem}.pickle.gz"));
    let snap = memscope::load::load_snapshot(&p).unwrap();
    let len = std::fs::metadata(&p).unwrap().len();
    let a = memscope::analysis::analyze_snapshot(&snap, &p, len);
    (snap, a.analysis)
}

/// Categories before the log's first entry, at its end (the dump) and at the allocated peak.
struct States {
    initial: Categories,
    end: Categories,
    peak: Categories,
    /// Allocated bytes of the state before the first entry (the replay's own figure).
    initial_allocated: u64,
    starts_mid_run: bool,
}

fn states(snap: &Snapshot) -> States {
    let dev = &snap.devices[0];
    let tl = replay::replay(dev, &snap.settings);
    let st = steps::split(snap, dev, &tl);
    let initial = categories::at_state(snap, dev, &st, &tl.initial, None);
    let end = categories::at_state(snap, dev, &st, &tl.end, None);
    let ev = tl.peaks.allocated.event.expect("the peak lies in the log");
    let peak = categories::at_event(snap, dev, &tl, &st, ev);
    States {
        initial,
        end,
        peak,
        initial_allocated: tl.initial.counters.allocated,
        starts_mid_run: tl.starts_mid_run,
    }
}

fn mib(n: u64) -> String {
    format!("{:.1} MiB", n as f64 / MIB as f64)
}

// ------------------------------------------------------------------------------------------
// A forward pass that OOMs under a cap

/// What the workload knew at its OOM, and the bounds it puts on the categories there.
#[derive(Debug)]
struct ForwardOom {
    /// Storages autograd had saved for backward, made by the forward (not weights, not the batch).
    saved: u64,
    /// Weights and buffers, optimizer state and the previous step's gradients: alive at the OOM.
    params: u64,
    optimizer: u64,
    grads: u64,
    /// The batch (and targets) the user's code made.
    inputs: u64,
    /// Allocated at the OOM. The failing step is the run's largest, so torch's allocated peak is
    /// the allocated memory at its OOM; it is at least what the except block measured (by then the
    /// failing op's C++ temporaries are gone).
    live: u64,
}

impl ForwardOom {
    /// Everything live at the OOM that autograd had not saved: the failing op's input and
    /// temporaries, the cuBLAS workspaces. The one room the categories have for a judgement.
    fn unsaved(&self) -> u64 {
        self.live - self.params - self.optimizer - self.grads - self.inputs - self.saved
    }
}

fn forward_oom_truth(stem: &str, saved_key: &str, inputs_key: &str) -> ForwardOom {
    let r = truth(stem);
    assert_eq!(
        r["oom_phase"], "forward",
        "{stem}: the OOM came in a forward pass"
    );
    let st = json(&format!("{stem}.stats.json"));
    let live = st["allocated_bytes.all.peak"].as_u64().unwrap();
    assert!(live >= bytes(&r, "allocated_at_oom"), "{stem}");
    let t = ForwardOom {
        saved: bytes(&r, &format!("{saved_key}.forward_bytes")),
        params: bytes(&r, "param_bytes") + bytes(&r, "buffer_bytes"),
        optimizer: bytes(&r, "optimizer_state_bytes"),
        grads: bytes(&r, "grad_bytes"),
        inputs: bytes(&r, inputs_key),
        live,
    };
    assert!(t.saved > 100 * MIB, "{stem}: {t:?}");
    t
}

/// The OOM is a capacity OOM on the failing line; at the OOM, what autograd saved for backward is
/// under activations, none of it under temporaries or inference's outputs, and the weights and
/// optimizer state are themselves.
fn check_forward_oom(stem: &str, t: &ForwardOom, a: &Analysis) {
    let r = truth(stem);
    let d = &a.devices[0];
    assert_eq!(d.ooms.len(), 1, "{stem}");
    let o = &d.ooms[0];
    // One forward's activations do not fit: not a leak, not fragmentation.
    assert_eq!(
        o.cause,
        Cause::Capacity,
        "{stem}: {}",
        memscope::wording::oom_summary(o)
    );
    assert_eq!(a.verdict.kind, VerdictKind::OomCapacity, "{stem}");
    assert_eq!(o.allocated_bytes, t.live, "{stem}: allocated at the OOM");
    // The failing line: the innermost frame of this script in the OOM's traceback, else the
    // line marked OOM (the model call, when the traceback's last frames are all torch's).
    let frames: Vec<String> = r["oom_frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect();
    let line = frames
        .iter()
        .rev()
        .find_map(|f| f.strip_prefix("generate.py:"))
        .map(|rest| rest.split(' ').next().unwrap().parse::<u32>().unwrap());
    let meta = json(&format!("{stem}.meta.json"));
    let marked: Vec<u32> = meta["markers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["kind"] == "OOM")
        .map(|m| m["line"].as_u64().unwrap() as u32)
        .collect();
    let site = o
        .site
        .as_ref()
        .expect("the failing request has a user line");
    assert_eq!(site.file, "fixtures/claims/generate.py", "{stem}");
    match line {
        Some(l) => assert_eq!(site.line, l, "{stem}: {frames:?}"),
        None => assert!(
            marked.contains(&site.line),
            "{stem}: {site} not in {marked:?}"
        ),
    }

    let c = o.categories.as_ref().expect("categories at the OOM");
    eprintln!(
        "{stem}: truth {t:?} (unsaved {}); at the OOM {c:?}",
        t.unsaved()
    );
    assert_eq!(c.parameter, t.params, "{stem}: weights and buffers");
    assert_eq!(c.optimizer_state, t.optimizer, "{stem}");
    if bytes(&r, "backward_calls") == 0 {
        assert_eq!(c.gradient, 0, "{stem}: no backward ran anywhere");
    } else {
        assert!(c.gradient >= t.grads, "{stem}: the last step's gradients");
    }
    // A training forward keeps its memory for the backward: it has no inference outputs.
    assert_eq!(
        (c.output, c.kv_cache),
        (0, 0),
        "{stem}: training, not inference"
    );
    // Everything saved is activations; beyond it only what was live and not saved can be.
    assert!(
        c.activation >= t.saved,
        "{stem}: activations {} below the {} autograd saved",
        mib(c.activation),
        mib(t.saved)
    );
    assert!(
        c.activation <= t.saved + t.unsaved(),
        "{stem}: activations {} above saved {} + unsaved {}",
        mib(c.activation),
        mib(t.saved),
        mib(t.unsaved())
    );
    assert!(
        c.temporary <= t.unsaved(),
        "{stem}: temporaries {} hold saved memory (unsaved at the OOM: {})",
        mib(c.temporary),
        mib(t.unsaved())
    );
}

#[test]
fn forward_oom_after_training_steps_puts_saved_memory_under_activations() {
    // A small GPT: three full steps, then a long batch whose forward OOMs in attention. Dumped in
    // the except block, so the failing forward's frames (and its graph) are alive at the dump.
    let t = forward_oom_truth("fwd_oom_gpt", "saved_at_last_forward", "input_bytes");
    let (_, a) = load("fwd_oom_gpt");
    check_forward_oom("fwd_oom_gpt", &t, &a);
}

#[test]
fn forward_oom_of_the_first_step_puts_saved_memory_under_activations() {
    // An MLP whose very first forward OOMs: no backward anywhere in the log. The ReLU outputs the
    // next Linear saved (384 MiB) are activations all the same.
    let t = forward_oom_truth("fwd_oom_mlp", "saved_at_last_forward", "input_bytes");
    let (_, a) = load("fwd_oom_mlp");
    check_forward_oom("fwd_oom_mlp", &t, &a);
}

#[test]
fn forward_oom_caught_by_the_loop_is_activations_freed_as_the_exception_unwound() {
    // A conv net; the loop catches the OOM and skips the batch, so the partial graph is freed
    // inside the log, right after the oom entry, and two more steps run.
    let stem = "fwd_oom_conv_skip";
    let r = truth(stem);
    assert_eq!(r["skipped"], serde_json::json!([3]));
    // The batch alive at the OOM is the skipped one: the images autograd saved (the targets,
    // 1.5 KiB, fall in the unsaved room).
    let t = forward_oom_truth(stem, "saved_at_oom", "saved_at_oom.input_bytes");
    // Truth: unwinding freed the saved memory and the failing op's input, nothing else.
    let freed = bytes(&r, "allocated_at_oom") - bytes(&r, "allocated_after_unwind");
    assert!(
        freed >= t.saved && freed <= t.saved + t.unsaved(),
        "{freed}"
    );
    let (_, a) = load(stem);
    check_forward_oom(stem, &t, &a);
    // The steps after the skipped batch are ordinary training: no finding.
    assert!(a.leaks.is_empty(), "{:?}", a.leaks);
}

#[test]
fn clean_twins_have_no_oom_and_no_leak() {
    for stem in ["fwd_clean_mlp", "fwd_clean_gpt"] {
        let m = json(&format!("{stem}.meta.json"));
        assert_eq!(m["oom"], false, "{stem}");
        assert_eq!(bytes(&m["result"], "steps_done"), 6, "{stem}");
        let (_, a) = load(stem);
        assert!(a.devices.iter().all(|d| d.ooms.is_empty()), "{stem}");
        assert!(
            a.leaks.is_empty(),
            "{stem}: {:?}",
            a.leaks.iter().map(|l| l.leak.kind).collect::<Vec<_>>()
        );
        assert_eq!(
            a.verdict.kind,
            VerdictKind::Ok,
            "{stem}: {}",
            memscope::wording::verdict(&a.verdict)
        );
    }
}

// ------------------------------------------------------------------------------------------
// Inference with a KV cache

/// No backward ran: no activations and no gradients, at the peak or at the end; the weights are
/// parameters; nothing is a leak or an OOM.
fn check_inference(stem: &str) -> States {
    let r = truth(stem);
    assert_eq!(r["backward_ran"], false, "{stem}");
    let (snap, a) = load(stem);
    let s = states(&snap);
    eprintln!("{stem}: end {:?}\n  peak {:?}", s.end, s.peak);
    for (at, c) in [("end", &s.end), ("peak", &s.peak)] {
        assert_eq!(c.activation, 0, "{stem} at the {at}: activations");
        assert_eq!(c.gradient, 0, "{stem} at the {at}: gradients");
    }
    // Parameters are the weights' blocks: at least their storages, and at most 2 MiB and 4 KiB
    // more. The caching allocator hands a free large-pool block out whole when the rest would be
    // 1 MiB or less (the decoder's weights hold two such blocks: 3 MiB for 2 MiB, 9 MiB for
    // 8 MiB), and transformers' rotary inv_freq buffers (2 x 512 B) are not parameters.
    let params = bytes(&r, "param_bytes");
    assert!(
        s.end.parameter >= params && s.end.parameter <= params + 2 * MIB + 4096,
        "{stem}: parameters {} against {params}",
        s.end.parameter
    );
    assert!(a.devices.iter().all(|d| d.ooms.is_empty()), "{stem}");
    assert!(a.leaks.is_empty(), "{stem}");
    s
}

#[test]
fn inference_has_no_activations_and_no_gradients() {
    for stem in ["kv_cat", "kv_static", "kv_hf"] {
        check_inference(stem);
    }
}

/// The cache's bytes at the dump, to the byte: the storages the workload summed are the blocks.
fn check_kv_cache(stem: &str) {
    let s = check_inference(stem);
    let kv = bytes(&truth(stem), "kv_cache_bytes");
    assert_eq!(s.end.kv_cache, kv, "{stem}: KV cache at the dump");
}

#[test]
fn kv_cache_of_a_transformers_dynamic_cache() {
    check_kv_cache("kv_hf");
}

#[test]
fn kv_cache_grown_by_cat_in_attention() {
    check_kv_cache("kv_cat");
}

#[test]
#[ignore = "beyond what the capture shows: the cache is made by a list comprehension in a user \
            function named __init__ (the class, KVCache, is not recorded) and filled in place, \
            which allocates nothing; no frame or allocation pattern tells it from any other user \
            tensor (docs/how-it-decides.md, Categories)"]
fn kv_cache_preallocated_and_updated_in_place() {
    check_kv_cache("kv_static");
}

#[test]
fn a_decoding_loop_is_not_one_pass() {
    // decode() runs `for _ in range(new)` 32 times: model call, argmax, torch.cat, and back.
    for stem in ["kv_cat", "kv_static"] {
        let (_, a) = load(stem);
        assert!(
            !a.devices[0].structure.single_pass,
            "{stem}: {}",
            memscope::wording::verdict(&a.verdict)
        );
    }
}

// ------------------------------------------------------------------------------------------
// A mid-run log of fine-tuning

fn check_mid_run(stem: &str) {
    let r = truth(stem);
    let before = bytes(&r, "allocated_before_recording");
    let grads = bytes(&r, "grad_bytes");
    assert!(before > 900 * MIB && grads < 40 * MIB, "{stem}");
    let (snap, a) = load(stem);
    let s = states(&snap);
    eprintln!(
        "{stem}: initial {:?}\n  end {:?}\n  peak {:?}",
        s.initial, s.end, s.peak
    );
    // The log is complete (the ring did not fill) and starts mid-run: every block alive at its
    // first entry was allocated before recording, to the byte, and none of it is a gradient.
    assert!(
        s.starts_mid_run && a.devices[0].history_starts_mid_run,
        "{stem}"
    );
    assert_eq!(
        s.initial_allocated, before,
        "{stem}: allocated before recording"
    );
    assert_eq!(s.initial.gradient, 0, "{stem}");
    // The previous step's gradients were freed by the first recorded zero_grad; the rest of what
    // predates recording (frozen weights, AdamW state, cuBLAS workspaces) is alive at the dump.
    assert_eq!(
        s.end.before_recording,
        bytes(&r, "before_recording_alive_at_dump"),
        "{stem}"
    );
    // Gradients are only the .grad of the adapters and the head, made by the recorded backward.
    for (at, c) in [("end", &s.end), ("peak", &s.peak)] {
        assert!(
            c.gradient <= grads,
            "{stem} at the {at}: gradients {} above the {} of .grad",
            mib(c.gradient),
            mib(grads)
        );
    }
    assert_eq!(s.end.gradient, grads, "{stem}: the last backward's .grad");
    assert!(a.leaks.is_empty(), "{stem}");
    assert_eq!(a.verdict.kind, VerdictKind::Ok, "{stem}");
}

#[test]
fn mid_run_fine_tuning_log_with_python_stacks() {
    check_mid_run("ft_midrun");
}

#[test]
fn mid_run_fine_tuning_log_with_cpp_stacks() {
    check_mid_run("ft_midrun_allstacks");
}

#[test]
fn every_block_alive_at_the_first_event_was_allocated_before_recording() {
    // "In a complete log, blocks alive at the first event were allocated before recording,
    // whatever else the log holds" (issue 23).
    for stem in ["ft_midrun", "ft_midrun_allstacks"] {
        let before = bytes(&truth(stem), "allocated_before_recording");
        let (snap, _) = load(stem);
        let s = states(&snap);
        eprintln!("{stem}: initial {:?}", s.initial);
        assert_eq!(s.initial.before_recording, before, "{stem}");
    }
}

// ------------------------------------------------------------------------------------------
// C++ stacks name the cuBLAS workspace

#[test]
fn cublas_workspace_is_not_a_gradient_with_cpp_stacks() {
    // With stacks="all", each thread's cuBLAS workspace carries its own frames (32 MiB, and 1 MiB
    // for cuBLASLt on the main thread). At the end, after the last step's backward, the
    // gradients are the conv net's .grad alone, and nothing is an activation (the graph was
    // released; the main thread's workspace was allocated under the first Linear call).
    let stem = "fwd_oom_conv_skip";
    let grads = bytes(&truth(stem), "grad_bytes");
    let (snap, _) = load(stem);
    let s = states(&snap);
    eprintln!("{stem}: end {:?}", s.end);
    assert_eq!(s.end.gradient, grads, "{stem}: the .grad of the last step");
    assert_eq!(
        s.end.activation, 0,
        "{stem}: activations after the last backward"
    );
}

// ------------------------------------------------------------------------------------------
// Figures

const ALL: [&str; 10] = [
    "fwd_oom_mlp",
    "fwd_clean_mlp",
    "fwd_oom_gpt",
    "fwd_clean_gpt",
    "fwd_oom_conv_skip",
    "kv_cat",
    "kv_static",
    "kv_hf",
    "ft_midrun",
    "ft_midrun_allstacks",
];

#[test]
fn figures_match_torchs_own_stats() {
    // torch.cuda.memory_stats() read right after each dump: current figures to the byte; peaks
    // exact where the log is complete from an empty allocator, lower bounds where it starts
    // mid-run.
    for stem in ALL {
        let st = json(&format!("{stem}.stats.json"));
        let stat = |k: &str| st[k].as_u64().unwrap();
        let (_, a) = load(stem);
        let d = &a.devices[0];
        assert_eq!(
            d.allocated_bytes,
            Some(stat("allocated_bytes.all.current")),
            "{stem}"
        );
        assert_eq!(
            d.reserved_bytes,
            Some(stat("reserved_bytes.all.current")),
            "{stem}"
        );
        let peak = stat("allocated_bytes.all.peak");
        if stem.starts_with("ft_midrun") {
            assert_eq!(d.peak_allocated_bytes, None, "{stem}: a lower bound only");
            assert!(d.observed_peak_allocated_bytes <= peak, "{stem}");
        } else {
            assert_eq!(d.peak_allocated_bytes, Some(peak), "{stem}");
            assert_eq!(
                d.peak_reserved_bytes,
                Some(stat("reserved_bytes.all.peak")),
                "{stem}"
            );
        }
    }
}
