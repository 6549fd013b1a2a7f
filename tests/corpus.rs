//! The public compatibility corpus (`../shared/corpus`, captures written by other people): every
//! snapshot loads and analyses to a sane report, and every trace loads or is refused with the
//! clear words its README expects. Skips with a message when the folder is absent.

use std::path::{Path, PathBuf};

use memscope::report;

fn corpus() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
    if p.is_dir() {
        Some(p)
    } else {
        eprintln!("skipped: {} is absent", p.display());
        None
    }
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
    out.sort();
}

#[test]
fn every_corpus_snapshot_analyses_to_a_sane_report() {
    let Some(root) = corpus() else { return };
    let mut all = Vec::new();
    files(&root.join("snapshots"), &mut all);
    let mut n = 0;
    for path in all
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "pickle" || e == "gz"))
    {
        let snap = memscope::load::load_snapshot(path).unwrap_or_else(|e| panic!("{e}"));
        let a = memscope::analysis::analyze_snapshot(&snap, path, 0);
        assert!(!a.devices.is_empty(), "{}: no device", path.display());
        for d in &a.devices {
            assert!(
                d.replay_consistent,
                "{} cuda:{}: replay inconsistent: {:?}",
                path.display(),
                d.device,
                d.consistency
            );
            assert!(
                !d.top_sites.is_empty(),
                "{} cuda:{}: no top sites",
                path.display(),
                d.device
            );
            assert!(d.allocated_bytes <= d.reserved_bytes, "{}", path.display());
        }
        let text = report::to_string(
            &report::text::Text,
            &a,
            &report::Options {
                color: false,
                stacks: true,
            },
        );
        assert!(text.contains("VERDICT"), "{}", path.display());
        let json = report::to_string(&report::json::Json, &a, &report::Options::default());
        serde_json::from_str::<serde_json::Value>(&json).unwrap();
        n += 1;
    }
    assert!(n >= 4, "only {n} corpus snapshots found");
}

#[test]
fn every_corpus_trace_loads_or_says_what_it_is() {
    let Some(root) = corpus() else { return };
    let mut all = Vec::new();
    files(&root.join("traces"), &mut all);
    let mut loaded = 0;
    for path in &all {
        let name = path.to_string_lossy();
        if !(name.ends_with(".json") || name.ends_with(".json.gz") || name.ends_with(".raw.gz")) {
            continue;
        }
        let res = memscope::load::load_trace(path);
        if name.ends_with("_et.json.gz") || name.contains("memory_timeline.raw") {
            // Not Chrome traces (README): a clear refusal, not a crash or a fake report.
            let err = match res {
                Err(e) => e.to_string(),
                Ok(t) => panic!("{name}: loaded as a trace with {} events", t.counts.events),
            };
            assert!(
                err.contains("not a profiler Chrome trace") || err.contains("not JSON"),
                "{err}"
            );
            continue;
        }
        let t = res.unwrap_or_else(|e| panic!("{e}"));
        assert!(t.counts.events > 0, "{name}: no events");
        loaded += 1;
    }
    assert!(loaded >= 10, "only {loaded} corpus traces loaded");
}
