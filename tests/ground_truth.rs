//! Replayed figures against `torch.cuda.memory_stats()` read right after each capture was
//! dumped: every counter must agree to the byte, on the shared captures and on the project's own.

use std::path::{Path, PathBuf};

use memscope::analysis::{analyze_snapshot, replay};

mod shared;

fn capture_dirs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut v: Vec<PathBuf> = shared::path("fixtures").into_iter().collect();
    v.push(root.join("fixtures"));
    v
}

/// Every `NAME.pickle` that has a `NAME.stats.json` beside it.
fn captures() -> Vec<(PathBuf, serde_json::Value)> {
    let mut out = Vec::new();
    for dir in capture_dirs() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            eprintln!("skipping {}: not present", dir.display());
            continue;
        };
        let mut names: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        names.sort();
        for p in names {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if let Some(stem) = name.strip_suffix(".stats.json") {
                let pickle = dir.join(format!("{stem}.pickle"));
                if pickle.exists() {
                    let stats: serde_json::Value =
                        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
                    out.push((pickle, stats));
                }
            }
        }
    }
    out
}

fn stat(s: &serde_json::Value, k: &str) -> u64 {
    s.get(k)
        .and_then(|v| v.as_u64())
        .unwrap_or_else(|| panic!("stats lack {k}"))
}

#[test]
fn replay_reproduces_memory_stats_to_the_byte() {
    let caps = captures();
    assert!(
        caps.len() >= 3,
        "expected the shared fixtures at least, found {}",
        caps.len()
    );
    let mut checked = 0;
    for (path, stats) in caps {
        let snap = memscope::load::load_snapshot(&path).unwrap();
        let a = analyze_snapshot(&snap, &path, 0);
        let name = path.display().to_string();
        assert_eq!(a.devices.len(), 1, "{name}");
        let d = &a.devices[0];
        let dev = &snap.devices[0];
        let tl = replay::replay(dev, &snap.settings);
        assert!(d.replay_consistent, "{name}: {:?}", d.consistency);
        // Current figures, from the snapshot and from the replay's end state.
        for (k, ours, replayed) in [
            (
                "allocated_bytes.all.current",
                d.allocated_bytes.unwrap(),
                tl.end.counters.allocated,
            ),
            (
                "active_bytes.all.current",
                d.active_bytes.unwrap(),
                tl.end.counters.active,
            ),
            (
                "reserved_bytes.all.current",
                d.reserved_bytes.unwrap(),
                tl.end.counters.reserved,
            ),
            (
                "requested_bytes.all.current",
                d.requested_bytes.unwrap(),
                tl.end.counters.requested,
            ),
            (
                "inactive_split_bytes.all.current",
                d.inactive_split_bytes.unwrap(),
                tl.end.counters.inactive_split,
            ),
            (
                "segment.all.current",
                d.segments.unwrap(),
                tl.end.counters.segments,
            ),
        ] {
            assert_eq!(ours, stat(&stats, k), "{name}: {k} (report)");
            assert_eq!(replayed, stat(&stats, k), "{name}: {k} (replay)");
        }
        // Peaks: exact when the log starts from an empty allocator, else absent (never wrong).
        let peaks = [
            (
                "allocated_bytes.all.peak",
                d.peak_allocated_bytes,
                d.observed_peak_allocated_bytes,
            ),
            (
                "active_bytes.all.peak",
                d.peak_active_bytes,
                d.observed_peak_allocated_bytes,
            ),
            (
                "reserved_bytes.all.peak",
                d.peak_reserved_bytes,
                d.observed_peak_reserved_bytes.unwrap(),
            ),
            ("requested_bytes.all.peak", d.peak_requested_bytes, 0),
            (
                "inactive_split_bytes.all.peak",
                d.peak_inactive_split_bytes,
                0,
            ),
        ];
        for (k, peak, observed) in peaks {
            match peak {
                Some(p) => assert_eq!(p, stat(&stats, k), "{name}: {k}"),
                None => {
                    assert!(!d.peak_exact, "{name}: {k} missing though exact");
                    assert!(
                        observed <= stat(&stats, k),
                        "{name}: observed {k} above the truth"
                    );
                }
            }
        }
        if d.peak_exact {
            assert_eq!(
                tl.peaks.segments.bytes,
                stat(&stats, "segment.all.peak"),
                "{name}: segment peak"
            );
        }
        assert_eq!(
            d.ooms.len() as u64,
            stat(&stats, "num_ooms"),
            "{name}: num_ooms"
        );
        // Shape-specific facts of the project's own captures.
        let stem = path.file_stem().unwrap().to_string_lossy().to_string();
        match stem.as_str() {
            "ring_overflow" => {
                assert!(
                    d.history_starts_mid_run && !d.peak_exact,
                    "{name}: the ring buffer dropped events"
                );
                assert!(d.peak_allocated_bytes.is_none());
            }
            "expandable" | "expandable_frag_oom" => {
                assert!(
                    d.expandable_segments.unwrap() > 0 && d.segments == Some(0),
                    "{name}: expandable segments reported apart"
                );
            }
            "two_streams" => assert!(
                d.active_bytes > d.allocated_bytes,
                "{name}: pending frees on the side stream"
            ),
            _ => {}
        }
        checked += 1;
    }
    eprintln!("checked {checked} captures against memory_stats()");
    let own = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let own_count = std::fs::read_dir(&own)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            let n = e.file_name().to_string_lossy().to_string();
            n.ends_with(".pickle") && own.join(n.replace(".pickle", ".stats.json")).exists()
        })
        .count();
    assert!(own_count >= 14, "the project's own captures are missing");
    assert!(checked >= own_count, "some captures were not checked");
}
