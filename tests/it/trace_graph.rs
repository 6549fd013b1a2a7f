//! Profiler Chrome traces: loading real files (whole, cut short, defective), the memory
//! timeline, and autograd-graph growth on the shared fixtures and the HTA corpus.

use std::path::{Path, PathBuf};

use memscope::analysis::{graph, trace_memory};
use memscope::load::{self, chrome, LoadError};
use memscope::model::LoadNote;

use crate::shared;

fn fixture(name: &str) -> Option<PathBuf> {
    shared::fixture(name)
}

fn hta() -> PathBuf {
    shared::root().join("corpus/traces/hta")
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn total_loss_grows_one_add_per_step_in_profile_loop() {
    let Some(p) = fixture("trace_total_loss.trace.json") else {
        return;
    };
    let t = load::load_trace(&p).unwrap();
    assert!(!t.truncated);
    assert_eq!(t.steps.len(), 12);
    assert_eq!(t.steps[0].number, 2);
    assert_eq!(t.steps[11].number, 13);
    assert_eq!(t.counts.gpu_step_duplicates, 12);
    assert_eq!(t.flows.len(), 180);

    let r = graph::growth(&t);
    assert_eq!(r.steps, 12);
    assert_eq!(r.unconsumed_nodes, 12);
    assert_eq!(r.findings.len(), 1, "{:#?}", r.findings);
    let f = &r.findings[0];
    assert_eq!(f.op, "aten::add_");
    assert_eq!(f.per_step, vec![1; 12]);
    assert_eq!(f.steps, 12);
    assert!((f.nodes_per_step - 1.0).abs() < 1e-9);
    let site = f.site.as_ref().unwrap();
    assert_eq!(site.function, "profile_loop");
    assert_eq!(site.file, "scenarios.py");
    // What the trace recorded (the prof.step() line), never the real line 221.
    assert_eq!(site.line, 227);
    assert!(!f.line_known);
    assert!(f.started_before_profiling);
    let why = memscope::wording::graph_explanation(f);
    assert!(why.contains("already running"), "{why}");
    let fix = memscope::wording::graph_fix(f);
    assert!(fix.contains(".item()"), "{fix}");

    // Memory hardly grows: no live-allocation growth.
    let m = trace_memory::analyze(&t);
    let cuda = m.devices.iter().find(|d| d.device.is_cuda()).unwrap();
    assert!(cuda.growth.is_empty(), "{:#?}", cuda.growth);
    assert_eq!(cuda.steps.len(), 12);
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn clean_trace_has_no_growth() {
    let Some(p) = fixture("trace_clean.trace.json") else {
        return;
    };
    let t = load::load_trace(&p).unwrap();
    assert_eq!(t.steps.len(), 12);
    let r = graph::growth(&t);
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
    // 180 nodes with a sequence number; the 120 AccumulateGrad evaluations (`grep -c` of
    // `evaluate_function: torch::autograd::AccumulateGrad` in the file) are counted apart.
    assert_eq!(r.backward_nodes, 180);
    assert_eq!(r.leaf_accumulations, 120);
    let m = trace_memory::analyze(&t);
    for d in &m.devices {
        assert!(d.growth.is_empty(), "{}: {:#?}", d.label, d.growth);
    }
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn fixture_memory_timeline() {
    let Some(p) = fixture("trace_clean.trace.json") else {
        return;
    };
    let t = load::load_trace(&p).unwrap();
    let m = trace_memory::analyze(&t);
    let labels: Vec<&str> = m.devices.iter().map(|d| d.label.as_str()).collect();
    assert_eq!(labels, vec!["cpu", "cuda:0"]);
    let cuda = &m.devices[1];
    assert_eq!(cuda.events, 1032);
    let peak = cuda.peak.as_ref().unwrap();
    assert_eq!(peak.allocated_bytes, 153_537_024);
    assert!(peak.op.is_some());
    // Every step of the steady loop peaks and ends at the same level.
    for s in &cuda.steps {
        assert_eq!(
            s.peak_allocated_bytes,
            Some(153_537_024),
            "step {}",
            s.number
        );
        assert_eq!(
            s.end_allocated_bytes,
            Some(136_677_376),
            "step {}",
            s.number
        );
    }
    // Only the last step's allocations outlive the trace.
    let live: Vec<u64> = cuda.steps.iter().map(|s| s.live_at_end_bytes).collect();
    assert!(live[..11].iter().all(|&b| b == 0), "{live:?}");
    assert!(live[11] > 0);
    assert!(serde_json::to_string(&m).is_ok());
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn truncated_fixture_loads_what_precedes_the_cut() {
    let Some(p) = fixture("trace_total_loss.trace.json") else {
        return;
    };
    let bytes = std::fs::read(&p).unwrap();
    let whole = chrome::parse(&bytes).unwrap();
    let total = whole.counts.events;
    for frac in [0.1, 0.37, 0.5, 0.81, 0.999] {
        let cut = (bytes.len() as f64 * frac) as usize;
        let t = chrome::parse(&bytes[..cut]).unwrap();
        assert!(t.truncated, "cut at {cut}");
        assert!(
            t.load_notes.iter().any(|n| matches!(
                n,
                LoadNote::CutInsideEvent { .. } | LoadNote::TraceUnclosed { .. }
            )),
            "{:?}",
            t.load_notes
        );
        // Events are of similar size: the count is close to the same fraction of the whole.
        let n = t.counts.events as f64;
        let expect = total as f64 * frac;
        assert!(
            (n - expect).abs() < total as f64 * 0.1 + 5.0,
            "cut {frac}: {n} events of {total}"
        );
        let _ = graph::growth(&t);
        let _ = trace_memory::analyze(&t);
    }
    // Through the public loader, via a temporary file.
    let dir = std::env::temp_dir().join(format!("memscope-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cut_path = dir.join("cut.trace.json");
    std::fs::write(&cut_path, &bytes[..bytes.len() / 2]).unwrap();
    let t = load::load_trace(&cut_path).unwrap();
    assert!(t.truncated);
    // And a gzip stream cut short.
    let gz_path = dir.join("cut.trace.json.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut enc, &bytes).unwrap();
    let gz = enc.finish().unwrap();
    std::fs::write(&gz_path, &gz[..gz.len() / 2]).unwrap();
    let t = load::load_trace(&gz_path).unwrap();
    assert!(t.truncated);
    assert!(
        matches!(t.load_notes[0], LoadNote::GzipDamaged { .. }),
        "{:?}",
        t.load_notes
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn raw_control_characters_are_tolerated() {
    let Some(p) = fixture("trace_total_loss.trace.json") else {
        return;
    };
    let bytes = std::fs::read(&p).unwrap();
    let text = String::from_utf8(bytes).unwrap();
    let damaged = text
        .replace("\"aten::mse_loss\"", "\"aten::mse\tloss\"")
        .replace("profile_loop\"", "profile_loop\n\"");
    assert!(serde_json::from_str::<serde::de::IgnoredAny>(&damaged).is_err());
    let t = chrome::parse(damaged.as_bytes()).unwrap();
    assert!(t.counts.repaired > 12, "{}", t.counts.repaired);
    assert!(t
        .load_notes
        .iter()
        .any(|n| matches!(n, LoadNote::RawControlCharacters { .. })));
    let r = graph::growth(&t);
    assert_eq!(r.findings.len(), 1);
    assert_eq!(
        r.findings[0].site.as_ref().unwrap().function,
        "profile_loop "
    );
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn df_index_resolver_memory_events() {
    let Some(p) = shared::corpus("traces/hta/df_index_resolver/df_index_resolver.json.gz") else {
        return;
    };
    let t = load::load_trace(&p).unwrap();
    assert_eq!(t.memory.len(), 28_010);
    assert_eq!(t.steps.len(), 5);
    let m = trace_memory::analyze(&t);
    let events: usize = m.devices.iter().map(|d| d.events).sum();
    assert_eq!(events, 28_010);
    for d in &m.devices {
        assert_eq!(d.steps.len(), 5);
        let peak = d.peak.as_ref().map(|p| p.allocated_bytes);
        for s in &d.steps {
            assert!(s.peak_allocated_bytes <= peak, "{}", d.label);
        }
    }
    let _ = graph::growth(&t);
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn every_hta_file_loads_or_says_what_it_is() {
    let Some(root) = shared::corpus("traces/hta") else {
        return;
    };
    let root = root.as_path();
    let mut files = Vec::new();
    files_under(root, &mut files);
    files.sort();
    assert!(files.len() >= 20);
    let mut loaded = 0;
    for p in &files {
        let name = p.strip_prefix(root).unwrap().display().to_string();
        match load::load_trace(p) {
            Ok(t) => {
                loaded += 1;
                assert!(t.counts.events > 0, "{name}");
                assert_eq!(t.counts.skipped, 0, "{name}: {:?}", t.load_notes);
                let m = trace_memory::analyze(&t);
                let g = graph::growth(&t);
                assert!(serde_json::to_string(&m).is_ok());
                assert!(serde_json::to_string(&g).is_ok());
                // None of these public traces accumulates a tensor across steps.
                assert!(g.findings.is_empty(), "{name}: {:#?}", g.findings);
            }
            Err(LoadError::Trace {
                err: chrome::TraceError::NotATrace { what },
                ..
            }) => {
                let expected = if name.contains("execution_trace/benchmark_simple_add_et") {
                    "execution trace"
                } else if name.contains("memory_timeline.raw") {
                    "memory-timeline"
                } else {
                    panic!("{name} refused: {what}");
                };
                assert!(what.contains(expected), "{name}: {what}");
            }
            Err(e) => panic!("{name}: {e}"),
        }
    }
    assert_eq!(loaded, files.len() - 2);
}

/// Load and analysis times; run with `cargo test --release --test it trace_graph::timings -- --ignored --nocapture`.
#[test]
#[ignore]
fn timings() {
    let fx = shared::root().join("fixtures");
    let files = [
        fx.join("trace_total_loss.trace.json"),
        fx.join("trace_clean.trace.json"),
        hta().join("mtia_trace_single_rank/mtia_rank_0.json.gz"),
        hta().join("df_index_resolver/df_index_resolver.json.gz"),
    ];
    for f in files {
        let p = f.as_path();
        if !p.exists() {
            continue;
        }
        let t0 = std::time::Instant::now();
        let bytes = load::read_input(p).unwrap();
        let t1 = t0.elapsed();
        let t = chrome::parse(&bytes).unwrap();
        let t2 = t0.elapsed();
        let m = trace_memory::analyze(&t);
        let t3 = t0.elapsed();
        let g = graph::growth(&t);
        let t4 = t0.elapsed();
        eprintln!(
            "{}: {} bytes, {} events; read+gunzip {t1:?}, parse+build {:?}, memory {:?}, graph {:?}; {} devices, {} findings",
            f.display(),
            bytes.len(),
            t.counts.events,
            t2 - t1,
            t3 - t2,
            t4 - t3,
            m.devices.len(),
            g.findings.len()
        );
    }
}

/// The project's own realistic trace pair (fixtures/realistic/README.md): evaluation without
/// `no_grad` keeping each batch's loss, and the same loop under `no_grad` with `.item()`.
fn own(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/realistic")
        .join(name)
}

#[test]
fn one_retained_graph_is_one_finding_and_its_clean_twin_has_none() {
    let p = own("trace_eval_leak.trace.json.gz");
    let t = load::load_trace(&p).unwrap();
    let a = memscope::analysis::analyze_trace(&t, &p, 0);
    // Survivors made at four sites (the blocks' forward, the loss, the embeddings, the token
    // batch), all kept by the loop of sc_trace_eval_leak: one finding, the others its sites.
    assert_eq!(a.leaks.len(), 1, "{:#?}", a.leaks);
    let l = &a.leaks[0].leak;
    assert_eq!(l.kind, memscope::analysis::leaks::LeakKind::RetainedGraph);
    assert!(!l.line_known);
    assert_eq!(l.related_sites.len(), 3);
    let keeper = l.cause_site.as_ref().expect("the keeping loop's function");
    assert_eq!(keeper.function, "sc_trace_eval_leak");
    assert_eq!(l.steps, 8);
    // A trace line is never given as the line to change.
    let why = memscope::wording::leak_explanation(l);
    assert!(why.contains("cannot give that line"), "{why}");

    let p = own("trace_eval_clean.trace.json.gz");
    let t = load::load_trace(&p).unwrap();
    let a = memscope::analysis::analyze_trace(&t, &p, 0);
    assert!(a.leaks.is_empty(), "{:#?}", a.leaks);
    assert_eq!(a.verdict.kind, memscope::analysis::VerdictKind::Ok);
    assert_eq!(a.steps.len(), 8);
}

/// Backward nodes are the nodes autograd's engine evaluated for the forward graph: the HTA
/// `df_index_resolver` trace runs 5 backward passes of 2 nodes (`SumBackward0`,
/// `CompiledFunctionBackward`); its 2020 `AccumulateGrad` evaluations (404 parameters' `.grad`
/// per backward) are counted apart, and `Optimizer.zero_grad`'s `aten::zero_` ops are neither.
#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn backward_nodes_are_the_engines_graph_nodes_not_leaf_accumulations() {
    let Some(p) = shared::corpus("traces/hta/df_index_resolver/df_index_resolver.json.gz") else {
        return;
    };
    let t = load::load_trace(&p).unwrap();
    let r = graph::growth(&t);
    assert_eq!(r.backward_nodes, 10);
    assert_eq!(r.leaf_accumulations, 2020);
    assert_eq!(r.forward_nodes, 10);
}

/// Where no op carries a sequence number the graph cannot be followed: the verdict says graph
/// growth was not judged, never that none was found.
#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn a_graph_that_cannot_be_followed_is_not_judged_in_the_verdict() {
    let Some(p) = shared::corpus("traces/other/kernelforge_transformer.pt.trace.json") else {
        return;
    };
    let t = load::load_trace(&p).unwrap();
    let bytes = std::fs::metadata(&p).unwrap().len();
    let a = memscope::analysis::trace_report::analyze_trace(&t, &p, bytes);
    let s = &memscope::wording::verdict(&a.verdict);
    assert!(s.contains("graph growth not judged"), "{s}");
    assert!(!s.contains("no autograd graph growth found"), "{s}");
}
