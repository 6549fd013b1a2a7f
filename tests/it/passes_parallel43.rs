//! Issue #43, session 16: the snapshot path's passes on any thread count, and the two
//! shortcuts taken to shorten its 2-core critical path.
//!
//! The analysis reads its thread count from one knob (`MEMSCOPE_THREADS`, through
//! `memscope::threads::wanted`, which the binary hands to `analyze_on`). On every snapshot in
//! `fixtures/` and in `../shared`, the JSON report on one thread is the one on 2, 4 and 16,
//! byte for byte, and the binary prints the same bytes under `MEMSCOPE_THREADS=1` and `=16`.
//! The sites pass now asks the log which of the dump's active blocks it allocated by reading
//! the log from its end (`memscope::analysis::sites::live_allocated_in_log`): on every device
//! of those snapshots it must answer as the forward replay of allocs and frees does.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::shared;
use memscope::analysis::{analyze_on, Product};
use memscope::model::{Action, Device};

/// Every snapshot-like file under `dir` (pickles, gzipped or not), sorted.
fn snapshots(dir: &Path) -> Vec<PathBuf> {
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
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            if [".pickle", ".pickle.gz", ".pkl"]
                .iter()
                .any(|x| name.ends_with(x))
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The JSON report of `p` on `threads` threads, `None` where the file does not open as a
/// snapshot.
fn report(p: &Path, threads: usize) -> Option<String> {
    let opened = memscope::load::open(p).ok()?;
    let product = analyze_on(opened, p, threads);
    if !matches!(product, Product::Snapshot(_)) {
        return None;
    }
    let doc = memscope::report::analyze::json::document(product.report());
    Some(serde_json::to_string(&doc).unwrap())
}

/// The forward definition: addresses an alloc of the log left live at its end.
fn forward_live(dev: &Device) -> std::collections::HashSet<u64> {
    let mut live = std::collections::HashSet::new();
    for e in &dev.events {
        match e.action {
            Action::Alloc => {
                live.insert(e.addr);
            }
            Action::FreeRequested | Action::FreeCompleted => {
                live.remove(&e.addr);
            }
            _ => {}
        }
    }
    live
}

/// One thread against 2, 4 and 16 on each file, and the backward reading of the log against
/// the forward one on each device; returns how many files opened as snapshots.
fn check(files: &[PathBuf]) -> usize {
    let mut opened = 0;
    for p in files {
        let Some(one) = report(p, 1) else {
            continue;
        };
        opened += 1;
        for n in [2, 4, 16] {
            let many = report(p, n).expect("opened once, opens again");
            assert!(
                one == many,
                "{}: the report differs on {n} threads",
                p.display()
            );
        }
        let Ok(snap) = memscope::load::load_snapshot(p) else {
            continue;
        };
        for dev in &snap.devices {
            let fwd = forward_live(dev);
            let got = memscope::analysis::sites::live_allocated_in_log(dev);
            for b in dev.segments.iter().flat_map(|s| s.blocks.iter()) {
                if b.state.is_active() {
                    assert_eq!(
                        got.contains(&b.address),
                        fwd.contains(&b.address),
                        "{}: device {} block {:#x}",
                        p.display(),
                        dev.index,
                        b.address
                    );
                }
            }
        }
    }
    opened
}

fn fixture_snapshots(part: usize, parts: usize) -> Vec<PathBuf> {
    let all = snapshots(&Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures"));
    assert!(all.len() > 100, "the committed snapshots: {}", all.len());
    shared::part_of(all, part, parts)
}

// The committed snapshots, in four parts so that the harness runs them side by side.
#[test]
fn committed_snapshots_part_1_one_thread_equals_many() {
    assert!(check(&fixture_snapshots(0, 4)) > 20);
}
#[test]
fn committed_snapshots_part_2_one_thread_equals_many() {
    assert!(check(&fixture_snapshots(1, 4)) > 20);
}
#[test]
fn committed_snapshots_part_3_one_thread_equals_many() {
    assert!(check(&fixture_snapshots(2, 4)) > 20);
}
#[test]
fn committed_snapshots_part_4_one_thread_equals_many() {
    assert!(check(&fixture_snapshots(3, 4)) > 20);
}

#[test]
fn shared_snapshots_one_thread_equals_many() {
    let Some(fixtures) = shared::path("fixtures") else {
        return;
    };
    let mut files = snapshots(&fixtures);
    if let Some(corpus) = shared::path("corpus") {
        files.extend(snapshots(&corpus));
    }
    let opened = check(&files);
    assert!(opened >= 10, "{opened} of {} files opened", files.len());
}

/// The knob reaches the binary: `MEMSCOPE_THREADS=1`, `=2` and `=16` print the same report.
#[test]
fn the_binary_prints_the_same_snapshot_report_for_any_memscope_threads() {
    let files = [
        Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/leak_oom.pickle")),
        shared::fixture("clean_training.pickle"),
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
        assert!(one == run("2"), "{}", p.display());
        assert!(one == run("16"), "{}", p.display());
    }
}
