//! Replayed figures against `torch.cuda.memory_stats()` read right after each capture was
//! dumped: every counter must agree to the byte, on the shared captures and on the project's own.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use memscope::analysis::{analyze_snapshot, replay};

use crate::shared;

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

/// One `#[test]` per capture `NAME` (`NAME.pickle` beside its `NAME.stats.json` in the folder
/// `$dir(NAME)` finds), and `LISTED`, the names, for the census test below.
macro_rules! per_capture {
    ($dir:path; $($(#[$attr:meta])* $name:ident,)*) => {
        pub(super) const LISTED: &[&str] = &[$(stringify!($name)),*];
        $(
            #[test]
            $(#[$attr])*
            fn $name() {
                if let Some(path) = $dir(stringify!($name)) {
                    super::replays_to_memory_stats(&path);
                }
            }
        )*
    };
}

/// The project's own captures, `fixtures/NAME.pickle`.
fn own_pickle(name: &str) -> Option<PathBuf> {
    Some(Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("fixtures/{name}.pickle")))
}

mod own {
    per_capture! { super::own_pickle;
        clean,
        expandable,
        expandable_frag_oom,
        fragmentation_oom,
        huge_request_oom,
        leak_cache_dict,
        leak_history,
        leak_hook,
        leak_oom,
        leak_preds,
        leak_total_loss,
        leak_val_no_grad,
        ring_overflow,
        two_streams,
        wi_frag_default,
        wi_frag_expandable,
        wi_leak_default,
        wi_leak_expandable,
        wi_mixed_default,
        wi_mixed_expandable,
        wi_mixed_gc05,
        wi_mixed_msplit64,
        wi_mixed_rp2d4,
        wi_spikes_default,
        wi_spikes_expandable,
        wi_spikes_gc05,
        wi_spikes_msplit200,
    }
}

mod shared_fixtures {
    per_capture! { super::shared::fixture_pickle;
        #[cfg_attr(
            memscope_no_shared,
            ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
        )]
        clean_training,
        #[cfg_attr(
            memscope_no_shared,
            ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
        )]
        fragmentation_oom,
        #[cfg_attr(
            memscope_no_shared,
            ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
        )]
        val_no_grad_oom,
    }
}

/// Every capture with a `memory_stats()` beside it has its test above: a capture added to
/// `fixtures/` or `../shared/fixtures` without one fails here.
#[test]
fn replay_reproduces_memory_stats_to_the_byte() {
    let caps = captures();
    assert!(
        caps.len() >= 3,
        "expected the shared fixtures at least, found {}",
        caps.len()
    );
    let own = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let stems = |dir: &Path| -> BTreeSet<String> {
        caps.iter()
            .filter(|(p, _)| p.parent() == Some(dir))
            .map(|(p, _)| p.file_stem().unwrap().to_string_lossy().to_string())
            .collect()
    };
    let listed = |l: &[&str]| {
        l.iter()
            .map(|s| s.to_string())
            .collect::<BTreeSet<String>>()
    };
    assert_eq!(stems(&own), listed(own::LISTED), "fixtures/ vs own::LISTED");
    if let Some(dir) = shared::path("fixtures") {
        assert_eq!(
            stems(&dir),
            listed(shared_fixtures::LISTED),
            "../shared/fixtures vs shared_fixtures::LISTED"
        );
    }
    let own_count = std::fs::read_dir(&own)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            let n = e.file_name().to_string_lossy().to_string();
            n.ends_with(".pickle") && own.join(n.replace(".pickle", ".stats.json")).exists()
        })
        .count();
    assert!(own_count >= 14, "the project's own captures are missing");
    assert!(
        own::LISTED.len() >= own_count,
        "some captures were not checked"
    );
}

/// One capture's replayed figures against the `memory_stats()` read after its dump.
fn replays_to_memory_stats(path: &Path) {
    let stats: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(path.with_extension("stats.json"))
            .unwrap_or_else(|e| panic!("{}: no stats.json: {e}", path.display())),
    )
    .unwrap();
    let path = path.to_path_buf();
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
}
