//! The allocator model against real captures.
//!
//! Validation: replaying each capture's requests under its OWN recorded settings (and cap, from
//! meta.json) must put every block where the log has it (offset in its segment), produce the
//! same segment allocations, the same OOMs, and `memory_stats()` figures (reserved peak and
//! current, segments, num_alloc_retries, num_ooms). Prediction: the requests of one capture
//! replayed under another capture's settings, against the real run of that setting.

use std::path::{Path, PathBuf};

use memscope::analysis::whatif::{self, AllocConf};

fn own() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn json(p: &Path) -> Option<serde_json::Value> {
    serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()
}

fn stat(s: &serde_json::Value, k: &str) -> u64 {
    s.get(k).and_then(|v| v.as_u64()).unwrap_or_else(|| panic!("stats lack {k}"))
}

fn cap_of(meta: &Option<serde_json::Value>) -> Option<u64> {
    meta.as_ref()?.get("cap_bytes")?.as_u64()
}

fn gpu_total(meta: &Option<serde_json::Value>) -> Option<u64> {
    meta.as_ref()?.get("gpu_total_memory")?.as_u64()
}

struct Row {
    name: String,
    allocs: usize,
    same_offset: usize,
    same_seg: usize,
    seg_events_same: bool,
    peak_model: u64,
    peak_real: u64,
    cur_model: u64,
    cur_real: u64,
    segs_ok: bool,
    retries: (u64, u64),
    ooms: (u64, u64),
    oom_same_event: bool,
}

/// Every capture of the project with a history from the start, under its own settings.
#[test]
fn model_reproduces_recorded_runs() {
    let mut names: Vec<PathBuf> = std::fs::read_dir(own())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pickle"))
        .collect();
    names.sort();
    let mut rows = Vec::new();
    for p in &names {
        let stem = p.file_stem().unwrap().to_string_lossy().to_string();
        let Some(stats) = json(&own().join(format!("{stem}.stats.json"))) else { continue };
        let meta = json(&own().join(format!("{stem}.meta.json")));
        let snap = memscope::load::load_snapshot(p).unwrap();
        let dev = &snap.devices[0];
        let tl = memscope::analysis::replay::replay(dev, &snap.settings);
        if !whatif::log_starts_empty(dev) {
            eprintln!("{stem}: log starts mid-run, not replayable as requests (expected for ring_overflow)");
            assert_eq!(stem, "ring_overflow");
            continue;
        }
        let cfg = whatif::config(&snap.settings, cap_of(&meta), gpu_total(&meta));
        let r = whatif::simulate(&snap, dev, cfg);
        let rec_ooms: Vec<u32> = tl.ooms.iter().map(|o| o.event.0).collect();
        let model_ooms: Vec<u32> = r.ooms.iter().map(|o| o.event).collect();
        let expandable = snap.settings.expandable_segments == Some(true);
        rows.push(Row {
            name: stem.clone(),
            allocs: r.placement.allocs_compared,
            same_offset: r.placement.same_offset,
            same_seg: r.placement.same_segment_size,
            seg_events_same: r.placement.segment_events_same,
            peak_model: r.stats.peak_reserved,
            peak_real: stat(&stats, "reserved_bytes.all.peak"),
            cur_model: r.stats.reserved,
            cur_real: stat(&stats, "reserved_bytes.all.current"),
            segs_ok: expandable
                || (r.stats.segments == stat(&stats, "segment.all.current")
                    && r.stats.peak_segments == stat(&stats, "segment.all.peak")),
            retries: (r.stats.num_alloc_retries, stat(&stats, "num_alloc_retries")),
            ooms: (r.stats.num_ooms, stat(&stats, "num_ooms")),
            oom_same_event: rec_ooms == model_ooms,
        });
        if let Some(d) = &r.placement.first_difference {
            eprintln!("{stem}: first difference: {d}");
        }
    }
    eprintln!(
        "\n{:<22} {:>7} {:>9} {:>9} {:>7} {:>14} {:>14} {:>6} {:>8} {:>6} {:>8}",
        "capture", "allocs", "offset%", "segsize%", "segev", "peak model", "peak real", "segs", "retries", "ooms", "oom-ev"
    );
    for r in &rows {
        eprintln!(
            "{:<22} {:>7} {:>8.2}% {:>8.2}% {:>7} {:>14} {:>14} {:>6} {:>8} {:>6} {:>8}",
            r.name,
            r.allocs,
            100.0 * r.same_offset as f64 / r.allocs.max(1) as f64,
            100.0 * r.same_seg as f64 / r.allocs.max(1) as f64,
            if r.seg_events_same { "same" } else { "DIFF" },
            r.peak_model,
            r.peak_real,
            if r.segs_ok { "ok" } else { "DIFF" },
            format!("{}/{}", r.retries.0, r.retries.1),
            format!("{}/{}", r.ooms.0, r.ooms.1),
            if r.oom_same_event { "same" } else { "DIFF" },
        );
    }
    assert!(rows.len() >= 13, "captures missing: {}", rows.len());
    for r in &rows {
        assert_eq!(r.same_offset, r.allocs, "{}: every block at its recorded offset", r.name);
        assert_eq!(r.same_seg, r.allocs, "{}: every block in a segment of the recorded size", r.name);
        assert!(r.seg_events_same, "{}: segment allocations/frees as recorded", r.name);
        assert_eq!(r.peak_model, r.peak_real, "{}: reserved peak", r.name);
        assert_eq!(r.cur_model, r.cur_real, "{}: reserved current", r.name);
        assert!(r.segs_ok, "{}: segment counts", r.name);
        assert_eq!(r.retries.0, r.retries.1, "{}: num_alloc_retries", r.name);
        assert_eq!(r.ooms.0, r.ooms.1, "{}: num_ooms", r.name);
        assert!(r.oom_same_event, "{}: OOM at the same event", r.name);
    }
}

#[test]
fn alloc_conf_parsing() {
    let c = whatif::parse_alloc_conf("expandable_segments:True,max_split_size_mb:128,garbage_collection_threshold:0.6").unwrap();
    assert_eq!(c.expandable_segments, Some(true));
    assert_eq!(c.max_split_size, Some(Some(128 << 20)));
    assert_eq!(c.garbage_collection_threshold, Some(0.6));
    let c = whatif::parse_alloc_conf("roundup_power2_divisions:[256:1,512:2,>:8]").unwrap();
    let d = c.roundup_power2_divisions.unwrap();
    assert_eq!(d[8], 1);
    assert_eq!(d[9], 2);
    assert_eq!(d[10], 8);
    assert_eq!(d[0], 1);
    assert_eq!(whatif::parse_alloc_conf("roundup_power2_divisions:4").unwrap().roundup_power2_divisions.unwrap(), vec![4; 16]);
    assert!(whatif::parse_alloc_conf("max_split_size_mb:10").is_err());
    assert!(whatif::parse_alloc_conf("expandable_segments").is_err());
    assert_eq!(AllocConf::default().apply(&Default::default()), Default::default());
}
