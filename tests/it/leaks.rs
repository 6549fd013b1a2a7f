//! Leak and step analysis on real captures (`../shared/fixtures`, `fixtures/`).

use std::path::{Path, PathBuf};

use memscope::analysis::leaks::LeakKind;
use memscope::analysis::{categories, leaks, replay, steps};
use memscope::model::{Device, Snapshot};

struct Run {
    snap: Snapshot,
    dev: Device,
    tl: replay::Timeline,
    steps: Vec<steps::Step>,
    leaks: Vec<leaks::Leak>,
}

use crate::shared;

fn shared(name: &str) -> PathBuf {
    shared::root().join("fixtures").join(name)
}

fn run(path: &Path) -> Option<Run> {
    if !path.exists() {
        if shared::required() {
            panic!(
                "{} is missing and MEMSCOPE_REQUIRE_SHARED is set",
                path.display()
            );
        }
        shared::skip(path);
        return None;
    }
    let snap = memscope::load::load_snapshot(path).expect("loads");
    let dev = snap.devices.first().cloned().unwrap_or_default();
    let tl = replay::replay(&dev, &snap.settings);
    let steps = steps::split(&snap, &dev, &tl);
    let leaks = leaks::find(&snap, &dev, &tl, &steps).leaks;
    Some(Run {
        snap,
        dev,
        tl,
        steps,
        leaks,
    })
}

fn show(name: &str, r: &Run) {
    let n_iter = r.steps.iter().filter(|s| s.is_iteration()).count();
    eprintln!("== {name}: {} steps ({n_iter} iterations)", r.steps.len());
    for s in r
        .steps
        .iter()
        .take(3)
        .chain(r.steps.iter().rev().take(3).rev())
    {
        eprintln!("   {:?}", s);
    }
    for l in &r.leaks {
        eprintln!(
            "  leak {} site={:?} cause={:?} growth={:.0} B/step {:.2} t/step steps={} live={} count={} r2={:.3} conf={}",
            l.kind, l.site, l.cause_site, l.growth_bytes_per_step, l.growth_tensors_per_step, l.steps, l.live_bytes, l.count, l.r2, l.confidence
        );
        for rs in &l.related_sites {
            eprintln!(
                "     related {:?} {:.0} B/step {:.2} t/step",
                rs.site, rs.growth_bytes_per_step, rs.growth_tensors_per_step
            );
        }
        eprintln!("     {}", memscope::wording::leak_explanation(l));
    }
}

fn local(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

fn line_of(l: &leaks::Leak) -> Option<u32> {
    l.site.as_ref().map(|s| s.line)
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn val_no_grad_oom_is_a_retained_graph_at_line_60_held_by_line_61() {
    let Some(r) = run(&shared("val_no_grad_oom.pickle")) else {
        return;
    };
    // 5 annotated training steps, then the validation batches found by their pattern.
    let annotated = r
        .steps
        .iter()
        .filter(|s| s.source == steps::StepSource::Annotation)
        .count();
    let pattern: Vec<_> = r
        .steps
        .iter()
        .filter(|s| s.source == steps::StepSource::Loop)
        .collect();
    assert_eq!(annotated, 5);
    // 92 validation batches ran to their end; the 93rd began and the OOM stopped it
    // (../shared/fixtures/README.md: "OOM after 92 validation batches").
    assert_eq!(pattern.len(), 93, "one step per validation batch begun");
    assert_eq!(pattern.iter().filter(|s| s.complete).count(), 92);
    assert!(!pattern[92].complete);
    assert_eq!(r.leaks.len(), 1, "{:#?}", r.leaks);
    let l = &r.leaks[0];
    assert_eq!(l.kind, LeakKind::RetainedGraph);
    let site = l.site.as_ref().expect("site");
    assert_eq!(
        (site.file.as_str(), site.line, site.function.as_str()),
        ("scenarios.py", 60, "sc_val_no_grad_oom")
    );
    let cause = l.cause_site.as_ref().expect("cause");
    assert_eq!(
        (cause.line, cause.function.as_str()),
        (61, "sc_val_no_grad_oom")
    );
    // Six 4 MiB blocks survive per batch (the ReLU outputs autograd saved).
    assert_eq!(l.growth_bytes_per_step, 25_165_824.0);
    assert_eq!(l.growth_tensors_per_step, 6.0);
    // 92 complete batches and the one the OOM interrupted: survivors are also sampled at the OOM.
    assert_eq!(l.steps, 93);
    // At the OOM: the 92 batches' 2_315_288_576 bytes and five 4 MiB activations of the interrupted one.
    assert_eq!(l.live_bytes, 2_315_288_576 + 5 * (4 << 20));
    assert!(l.r2 > 0.999);
    assert!(
        !l.samples.is_empty()
            && l.samples
                .iter()
                .all(|s| s.size == 4 << 20 || s.size == 32768)
    );
    let related: Vec<u32> = l
        .related_sites
        .iter()
        .filter_map(|s| s.site.as_ref().map(|s| s.line))
        .collect();
    assert!(
        related.contains(&59) && related.contains(&61),
        "{related:?}"
    );
    // The OOM diagnosis' question.
    let oom = r.tl.ooms.last().expect("an OOM").event;
    let sig = leaks::leak_signal_before(&r.snap, &r.dev, &r.tl, oom).expect("leak signal");
    assert_eq!(sig.leak, 0);
    assert!(sig.share_of_allocated > 0.8, "{sig:?}");
    // Categories at the OOM: the activations dominate, parameters and AdamW state are exact.
    let c = categories::at_event(&r.snap, &r.dev, &r.tl, &r.steps, oom);
    assert_eq!(
        c.total(),
        r.tl.ooms.last().map(|o| o.counters.allocated).unwrap_or(0)
    );
    assert_eq!(c.parameter, 100_844_032);
    assert_eq!(c.optimizer_state, 2 * c.parameter);
    assert!(c.activation > 2_300_000_000, "{c:?}");
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn clean_training_has_no_findings() {
    let Some(r) = run(&shared("clean_training.pickle")) else {
        return;
    };
    assert!(r.steps.iter().filter(|s| s.is_iteration()).count() >= 300);
    assert!(r.leaks.is_empty(), "{:#?}", r.leaks);
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn fragmentation_is_not_a_leak() {
    let Some(r) = run(&shared("fragmentation_oom.pickle")) else {
        return;
    };
    // A loop that only creates tensors is no model loop: no steps, no findings.
    assert_eq!(r.steps.iter().filter(|s| s.is_iteration()).count(), 0);
    assert!(r.leaks.is_empty());
    for o in &r.tl.ooms {
        assert!(leaks::leak_signal_before(&r.snap, &r.dev, &r.tl, o.event).is_none());
    }
}

/// The marker lines of a capture's meta.json: `(kind, line)`.
fn markers(name: &str) -> Vec<(String, u32)> {
    let p = local(&format!("{name}.meta.json"));
    let Ok(text) = std::fs::read_to_string(p) else {
        return Vec::new();
    };
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    v["markers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|m| Some((m["kind"].as_str()?.to_owned(), m["line"].as_u64()? as u32)))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn local_captures_without_leaks_have_no_findings() {
    for name in [
        "clean",
        "expandable",
        "ring_overflow",
        "two_streams",
        "huge_request_oom",
        "leak_total_loss",
        "fragmentation_oom",
        "expandable_frag_oom",
    ] {
        let Some(r) = run(&local(&format!("{name}.pickle"))) else {
            continue;
        };
        assert!(r.leaks.is_empty(), "{name}: {:#?}", r.leaks);
        for o in &r.tl.ooms {
            assert!(
                leaks::leak_signal_before(&r.snap, &r.dev, &r.tl, o.event).is_none(),
                "{name}"
            );
        }
    }
}

#[test]
fn local_leak_captures_find_the_alloc_line() {
    // (capture, kind, growth per step, whether an OOM ends it)
    let cases = [
        ("leak_cache_dict", LeakKind::TensorCache, 2u64 << 20),
        ("leak_history", LeakKind::KeptOutputs, 2 << 20),
        ("leak_hook", LeakKind::HookCache, 4 << 20),
        ("leak_preds", LeakKind::KeptOutputs, 2 << 20),
        ("leak_oom", LeakKind::RetainedGraph, 36 << 20),
        ("leak_val_no_grad", LeakKind::RetainedGraph, 18 << 20),
    ];
    for (name, kind, growth) in cases {
        let Some(r) = run(&local(&format!("{name}.pickle"))) else {
            continue;
        };
        let m = markers(name);
        let alloc: Vec<u32> = m
            .iter()
            .filter(|(k, _)| k == "ALLOC")
            .map(|(_, l)| *l)
            .collect();
        let leak_lines: Vec<u32> = m
            .iter()
            .filter(|(k, _)| k == "LEAK")
            .map(|(_, l)| *l)
            .collect();
        assert_eq!(r.leaks.len(), 1, "{name}: {:#?}", r.leaks);
        let l = &r.leaks[0];
        assert_eq!(l.kind, kind, "{name}");
        assert!(
            alloc.contains(&line_of(l).unwrap_or(0)),
            "{name}: site {:?}, ALLOC lines {alloc:?}",
            l.site
        );
        if let Some(c) = &l.cause_site {
            assert!(
                leak_lines.contains(&c.line),
                "{name}: cause {c:?}, LEAK lines {leak_lines:?}"
            );
        }
        assert_eq!(l.growth_bytes_per_step, growth as f64, "{name}");
        assert!(l.steps >= 10, "{name}: {} steps", l.steps);
        if name == "leak_oom" {
            assert_eq!(
                l.cause_site.as_ref().map(|c| c.line),
                Some(153),
                "the retain_graph=True backward"
            );
            let oom = r.tl.ooms.last().expect("an OOM").event;
            assert!(
                leaks::leak_signal_before(&r.snap, &r.dev, &r.tl, oom).is_some(),
                "{name}"
            );
        }
    }
}

#[test]
#[ignore = "prints every capture's findings: cargo test --test it leaks:: -- --ignored --nocapture"]
fn print_all() {
    let mut paths: Vec<PathBuf> = [
        "val_no_grad_oom.pickle",
        "clean_training.pickle",
        "fragmentation_oom.pickle",
    ]
    .iter()
    .map(|n| shared(n))
    .collect();
    let mut local: Vec<PathBuf> =
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "pickle"))
            .collect();
    local.sort();
    paths.extend(local);
    for p in paths {
        let n = p.display().to_string();
        if let Some(r) = run(&p) {
            show(&n, &r);
            let at = r.tl.peaks.allocated.event.unwrap();
            let c = categories::at_event(&r.snap, &r.dev, &r.tl, &r.steps, at);
            eprintln!(
                "  categories at peak: {}",
                serde_json::to_string(&c).unwrap()
            );
            for o in &r.tl.ooms {
                eprintln!(
                    "  oom signal: {:?}",
                    leaks::leak_signal_before(&r.snap, &r.dev, &r.tl, o.event)
                );
            }
        }
    }
}

/// Steps begun and steps finished, on captures whose loops are known from their generators
/// (fixtures/realistic/generate.py, fixtures/generate.py), written down before memscope ran.
#[test]
fn steps_are_the_iterations_the_program_ran() {
    let iters = |name: &str| {
        let r = run(&local(name)).expect("a project fixture");
        let it: Vec<(bool, steps::StepSource)> = r
            .steps
            .iter()
            .filter(|s| s.is_iteration())
            .map(|s| (s.complete, s.source))
            .collect();
        it
    };
    // 12 evaluation batches, the last one ending at the dump: all 12 complete.
    let v = iters("realistic/eval_clean.pickle.gz");
    assert_eq!(v.len(), 12);
    assert!(v.iter().all(|(c, _)| *c));
    // 6 training steps (Optimizer.step marks their ends), then a 64 x 2048 batch whose forward
    // OOMs: 7 steps begun, the 7th not finished.
    let v = iters("realistic/long_batch_oom.pickle.gz");
    assert_eq!(v.len(), 7);
    assert!(v[..6].iter().all(|(c, _)| *c) && !v[6].0);
    // 10 steps, each ending with side-stream work after opt.step(): that work after the last
    // optimizer step is the end of step 10, not an 11th step.
    assert_eq!(iters("two_streams.pickle").len(), 10);
    // for i in range(50): model(x) under no_grad: one line, 50 calls, each freeing what it made.
    let v = iters("realistic/fwd_bench.pickle.gz");
    assert_eq!(v.len(), 50);
    assert!(v.iter().all(|(c, s)| *c && *s == steps::StepSource::Loop));
    // One forward of a 32-block model: the blocks are not steps.
    assert!(iters("realistic/single_pass_32.pickle.gz").is_empty());
    // 12 training steps with validation (3 batches) every 4 steps: the validation after the
    // last step is part of step 12, not 3 more steps.
    assert_eq!(iters("clean.pickle").len(), 12);
}
