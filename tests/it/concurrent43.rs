//! Issue #43: the analysis' independent passes run side by side (`memscope::threads`,
//! `MEMSCOPE_THREADS`). The report must not depend on how many threads ran them: on every
//! committed capture and every real one in `../shared`, the JSON report made on one thread is
//! the one made on four, byte for byte, and on four the passes really ran on other threads
//! (each snapshot device spawns its replay's and its three groups' threads, a trace its memory
//! pass's and its graph's, and the leaks' series theirs), while on one nothing was spawned.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::shared;
use memscope::analysis::{analyze_on, Product};

/// Every capture-like file under `dir` (what `/work/golden` compares too), sorted.
fn captures(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
                continue;
            }
            let name = p
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .to_string();
            let capture_like = [".pickle", ".pickle.gz", ".json", ".json.gz", ".pkl"]
                .iter()
                .any(|x| name.ends_with(x));
            let sidecar = [".meta.json", ".stats.json", ".truth.json"]
                .iter()
                .any(|x| name.ends_with(x));
            if capture_like && !sidecar {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The JSON report of `p` analysed on `threads` threads, the threads spawned for it, and the
/// threads the capture should have spawned on more than one (`None`: the file does not open).
fn report(p: &Path, threads: usize) -> Option<(String, u64, u64)> {
    let opened = memscope::load::open(p).ok()?;
    let before = memscope::threads::spawned_here();
    let product = analyze_on(opened, p, threads);
    let spawned = memscope::threads::spawned_here() - before;
    let expected = match &product {
        // Per device: the replay beside the step search, then the leak search, the
        // classifier's breakdowns and the timeline's passes; each leak's series beside the
        // others' (four runs at most).
        Product::Snapshot(s) => {
            3 * s.snap.devices.len() as u64 + (s.leaks.len().min(threads).max(1) - 1) as u64
        }
        // The memory pass beside the graph, the pairing beside the resolver.
        Product::Trace(_) => 2,
    };
    let doc = memscope::report::analyze::json::document(product.report());
    Some((serde_json::to_string(&doc).unwrap(), spawned, expected))
}

/// Compares one thread with four on each file; returns how many files opened.
fn one_equals_four(files: &[PathBuf]) -> usize {
    let mut opened = 0;
    for p in files {
        let Some((one, spawned_one, _)) = report(p, 1) else {
            assert!(report(p, 4).is_none(), "{}", p.display());
            continue;
        };
        let (four, spawned_four, expected) = report(p, 4).expect("opened once, opens again");
        opened += 1;
        assert_eq!(spawned_one, 0, "{}: one thread spawned some", p.display());
        assert_eq!(
            spawned_four,
            expected,
            "{}: four threads did not take the concurrent path",
            p.display()
        );
        assert!(
            one == four,
            "{}: the report differs on four threads",
            p.display()
        );
    }
    opened
}

fn fixture_captures(part: usize, parts: usize) -> Vec<PathBuf> {
    let all = captures(&Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures"));
    assert!(all.len() > 300, "the committed captures: {}", all.len());
    shared::part_of(all, part, parts)
}

// The committed captures, in four parts so that the harness runs them side by side.
#[test]
fn committed_captures_part_1_one_thread_equals_four() {
    assert!(one_equals_four(&fixture_captures(0, 4)) > 50);
}
#[test]
fn committed_captures_part_2_one_thread_equals_four() {
    assert!(one_equals_four(&fixture_captures(1, 4)) > 50);
}
#[test]
fn committed_captures_part_3_one_thread_equals_four() {
    assert!(one_equals_four(&fixture_captures(2, 4)) > 50);
}
#[test]
fn committed_captures_part_4_one_thread_equals_four() {
    assert!(one_equals_four(&fixture_captures(3, 4)) > 50);
}

#[test]
fn shared_captures_one_thread_equals_four() {
    let (Some(fixtures), Some(corpus)) = (shared::path("fixtures"), shared::path("corpus")) else {
        return;
    };
    let mut files = captures(&fixtures);
    files.extend(captures(&corpus));
    assert!(one_equals_four(&files) >= 20, "{} files", files.len());
}

/// The variable reaches the binary: `MEMSCOPE_THREADS=1` and `=4` print the same report.
#[test]
fn the_binary_prints_the_same_report_for_any_memscope_threads() {
    let files = [
        shared::fixture("clean_training.pickle"),
        shared::fixture("val_no_grad_oom.pickle"),
        shared::fixture("trace_clean.trace.json"),
    ];
    for p in files.iter().flatten() {
        let run = |n: &str| {
            let out = Command::new(env!("CARGO_BIN_EXE_memscope"))
                .args(["analyze", "--format", "json"])
                .arg(p)
                .env("MEMSCOPE_THREADS", n)
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(0), "{}", p.display());
            out.stdout
        };
        let one = run("1");
        assert!(one.len() > 1000);
        assert!(one == run("4"), "{}", p.display());
        assert!(one == run("2"), "{}", p.display());
    }
}
