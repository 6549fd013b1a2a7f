//! The allocator model against real captures.
//!
//! Validation: replaying each capture's requests under its OWN recorded settings (and cap, from
//! meta.json) must put every block where the log has it (offset in its segment), produce the
//! same segment allocations, the same OOMs, and `memory_stats()` figures (reserved peak and
//! current, segments, num_alloc_retries, num_ooms). Prediction: the requests of one capture
//! replayed under another capture's settings, against the real run of that setting.

use std::path::{Path, PathBuf};

use crate::shared;

use memscope::analysis::whatif::{self, AllocConf};

fn own() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn json(p: &Path) -> Option<serde_json::Value> {
    serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()
}

fn stat(s: &serde_json::Value, k: &str) -> u64 {
    s.get(k)
        .and_then(|v| v.as_u64())
        .unwrap_or_else(|| panic!("stats lack {k}"))
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
    // The project's captures, and the shared ones when present (their cap is derived from the OOM).
    let mut names: Vec<PathBuf> = std::iter::once(own())
        .chain(shared::path("fixtures"))
        .collect::<Vec<_>>()
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pickle"))
        .collect();
    names.sort();
    let mut rows = Vec::new();
    for p in &names {
        let stem = p.file_stem().unwrap().to_string_lossy().to_string();
        let dir = p.parent().unwrap();
        let Some(stats) = json(&dir.join(format!("{stem}.stats.json"))) else {
            continue;
        };
        let meta = json(&dir.join(format!("{stem}.meta.json")));
        let snap = memscope::load::load_snapshot(p).unwrap();
        let dev = &snap.devices[0];
        let tl = memscope::analysis::replay::replay(dev, &snap.settings);
        if !whatif::log_starts_empty(dev) {
            eprintln!("{stem}: log starts mid-run, not replayable as requests (expected for ring_overflow)");
            assert_eq!(stem, "ring_overflow");
            continue;
        }
        let cap = cap_of(&meta).or_else(|| whatif::derive_cap(&tl).bytes);
        let cfg = whatif::config(&snap.settings, cap, gpu_total(&meta));
        let r = whatif::simulate(&snap, dev, cfg, &tl.initial);
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
            eprintln!(
                "{stem}: first difference: {}",
                memscope::wording::placement_difference(d)
            );
        }
    }
    eprintln!(
        "\n{:<22} {:>7} {:>9} {:>9} {:>7} {:>14} {:>14} {:>6} {:>8} {:>6} {:>8}",
        "capture",
        "allocs",
        "offset%",
        "segsize%",
        "segev",
        "peak model",
        "peak real",
        "segs",
        "retries",
        "ooms",
        "oom-ev"
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
        assert_eq!(
            r.same_offset, r.allocs,
            "{}: every block at its recorded offset",
            r.name
        );
        assert_eq!(
            r.same_seg, r.allocs,
            "{}: every block in a segment of the recorded size",
            r.name
        );
        assert!(
            r.seg_events_same,
            "{}: segment allocations/frees as recorded",
            r.name
        );
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
    let c = whatif::parse_alloc_conf(
        "expandable_segments:True,max_split_size_mb:128,garbage_collection_threshold:0.6",
    )
    .unwrap();
    assert_eq!(c.expandable_segments, Some(true));
    assert_eq!(c.max_split_size, Some(Some(128 << 20)));
    assert_eq!(c.garbage_collection_threshold, Some(0.6));
    let c = whatif::parse_alloc_conf("roundup_power2_divisions:[256:1,512:2,>:8]").unwrap();
    let d = c.roundup_power2_divisions.unwrap();
    assert_eq!(d[8], 1);
    assert_eq!(d[9], 2);
    assert_eq!(d[10], 8);
    assert_eq!(d[0], 1);
    assert_eq!(
        whatif::parse_alloc_conf("roundup_power2_divisions:4")
            .unwrap()
            .roundup_power2_divisions
            .unwrap(),
        vec![4; 16]
    );
    assert!(whatif::parse_alloc_conf("max_split_size_mb:10").is_err());
    assert!(whatif::parse_alloc_conf("expandable_segments").is_err());
    assert_eq!(
        AllocConf::default().apply(&Default::default()),
        Default::default()
    );
}

/// Reached: 32 of 36 (the misses are predictions into roundup_power2_divisions:4, whose segment sizes
/// differ from the source run's, so the driver's addresses for them, which break best-fit ties, are unknown).
const PEAK_EXACT_AT_LEAST: usize = 32;
/// Reached: 6.83% (expandable -> rp2d4: an expandable log gives no segment addresses at all).
const WORST_PEAK_ERROR: f64 = 0.07;

struct Cap {
    snap: memscope::model::Snapshot,
    stats: serde_json::Value,
    cap: Option<u64>,
    total: Option<u64>,
}

fn load(stem: &str) -> Cap {
    let snap = memscope::load::load_snapshot(&own().join(format!("{stem}.pickle"))).unwrap();
    let stats = json(&own().join(format!("{stem}.stats.json"))).unwrap();
    let meta = json(&own().join(format!("{stem}.meta.json")));
    Cap {
        snap,
        stats,
        cap: cap_of(&meta),
        total: gpu_total(&meta),
    }
}

/// First OOM as a request ordinal, from the recorded log.
fn recorded_oom_request(c: &Cap) -> Option<usize> {
    let mut n = 0;
    for e in &c.snap.devices[0].events {
        match e.action {
            memscope::model::Action::Alloc => n += 1,
            memscope::model::Action::Oom => return Some(n),
            _ => {}
        }
    }
    None
}

/// Predictions from one setting's capture against the real run under another setting.
#[test]
fn cross_setting_predictions_match_real_runs() {
    let groups: [(&str, &[&str]); 4] = [
        ("frag", &["default", "expandable"]),
        ("leak", &["default", "expandable"]),
        ("spikes", &["default", "expandable", "msplit200", "gc05"]),
        (
            "mixed",
            &["default", "expandable", "msplit64", "rp2d4", "gc05"],
        ),
    ];
    eprintln!(
        "\n{:<8} {:<11} {:<11} {:>12} {:>12} {:>8} {:>10} {:>10} {:>8}",
        "workload",
        "from",
        "to",
        "peak pred",
        "peak real",
        "error",
        "OOM pred",
        "OOM real",
        "retries"
    );
    let (mut pairs, mut oom_agree, mut peak_exact, mut retries_agree, mut worst) =
        (0, 0, 0, 0, 0.0f64);
    for (wl, sets) in groups {
        let caps: Vec<(&str, Cap)> = sets
            .iter()
            .map(|s| (*s, load(&format!("wi_{wl}_{s}"))))
            .collect();
        for (from, src) in &caps {
            for (to, dst) in &caps {
                if from == to {
                    continue;
                }
                let cfg = whatif::config(&dst.snap.settings, dst.cap, dst.total);
                let p = whatif::simulate(
                    &src.snap,
                    &src.snap.devices[0],
                    cfg,
                    &memscope::analysis::replay::State::default(),
                );
                let real_peak = stat(&dst.stats, "reserved_bytes.all.peak");
                let err = (p.stats.peak_reserved as f64 - real_peak as f64) / real_peak as f64;
                let pred_oom = p.ooms.first().map(|o| o.request_index);
                let real_oom = recorded_oom_request(dst);
                let real_retries = stat(&dst.stats, "num_alloc_retries");
                pairs += 1;
                oom_agree += usize::from(pred_oom == real_oom);
                peak_exact += usize::from(p.stats.peak_reserved == real_peak);
                worst = worst.max(err.abs());
                let o = |x: Option<usize>| x.map_or("none".to_string(), |r| format!("#{r}"));
                eprintln!(
                    "{wl:<8} {from:<11} {to:<11} {:>12} {:>12} {:>7.2}% {:>10} {:>10} {:>8}",
                    p.stats.peak_reserved,
                    real_peak,
                    100.0 * err,
                    o(pred_oom),
                    o(real_oom),
                    format!("{}/{}", p.stats.num_alloc_retries, real_retries)
                );
                retries_agree += usize::from(p.stats.num_alloc_retries == real_retries);
            }
        }
    }
    eprintln!(
        "{pairs} predictions: OOM agreement {oom_agree}/{pairs}, peak reserved exact {peak_exact}/{pairs}, retries {retries_agree}/{pairs}, worst peak error {:.2}%",
        100.0 * worst
    );
    // The figures reached (see WHATIF.md); a regression in the model shows up here.
    assert_eq!(pairs, 36);
    assert_eq!(oom_agree, pairs, "OOM yes/no and where");
    assert!(
        peak_exact >= PEAK_EXACT_AT_LEAST,
        "peak reserved exact in {peak_exact}/{pairs}"
    );
    assert!(
        worst <= WORST_PEAK_ERROR,
        "worst peak error {:.2}%",
        100.0 * worst
    );
}

/// The committed fixture pair: the same function under default settings and under
/// expandable_segments:True. It sizes its work from memory_reserved(), so the two runs made
/// different numbers of requests (87 and 96 trios): only OOM yes/no is comparable.
#[test]
fn fixture_pair_oom_agreement() {
    for (from, to, expandable) in [
        ("fragmentation_oom", "expandable_frag_oom", true),
        ("expandable_frag_oom", "fragmentation_oom", false),
    ] {
        let src = load(from);
        let dst = load(to);
        let conf = whatif::parse_alloc_conf(if expandable {
            "expandable_segments:True"
        } else {
            "expandable_segments:False"
        })
        .unwrap();
        let cap = whatif::CapInfo {
            bytes: src.cap,
            source: whatif::CapSource::Given,
            range: None,
        };
        let w = whatif::what_if(&src.snap, &conf, Some(cap), src.total).unwrap();
        let p = &w[0].predicted;
        let real_oom = stat(&dst.stats, "num_ooms") > 0;
        eprintln!(
            "{from} -> {to}: predicted OOM {} (peak reserved {}), real OOM {real_oom} (peak reserved {})",
            !p.ooms.is_empty(),
            p.stats.peak_reserved,
            stat(&dst.stats, "reserved_bytes.all.peak")
        );
        assert_eq!(!p.ooms.is_empty(), real_oom, "{from} -> {to}");
        assert_eq!(
            p.ooms[0].event,
            src.snap.devices[0].events.len() as u32 - 1,
            "the 512 MiB request fails"
        );
    }
    // Without meta.json the cap is derived from the OOM; the prediction is the same.
    let src = load("fragmentation_oom");
    let w = whatif::what_if(
        &src.snap,
        &whatif::parse_alloc_conf("expandable_segments:True").unwrap(),
        None,
        None,
    )
    .unwrap();
    assert!(w[0].cap.range.is_some());
    assert_eq!(w[0].predicted.ooms.len(), 1);
    let doc = memscope::report::whatif::Whatif {
        file: "f",
        devices: &w,
    };
    let text =
        memscope::report::to_string(&memscope::report::whatif::Text, &doc, &Default::default());
    assert!(text.contains("still OOMs"), "{text}");
}

fn attribution(stem: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/attribution")
        .join(stem)
}

/// A log that begins after the weights were loaded (fixtures/attribution late_frag_*): the model
/// starts from the layout undone from the end state, and its prediction for the other setting
/// is checked against the real run of the same requests under that setting.
#[test]
fn mid_run_log_predicts_the_other_setting() {
    let src_path = attribution("late_frag_default.pickle.gz");
    let snap = memscope::load::load_snapshot(&src_path).unwrap();
    let meta = json(&attribution("late_frag_default.meta.json"));
    let cap = cap_of(&meta).unwrap();
    assert!(!whatif::log_starts_empty(&snap.devices[0]));
    for (conf, truth) in [
        ("expandable_segments:True", "late_frag_expandable"),
        ("", "late_frag_default"),
    ] {
        let stats = json(&attribution(&format!("{truth}.stats.json"))).unwrap();
        let w = whatif::what_if(
            &snap,
            &whatif::parse_alloc_conf(conf).unwrap(),
            Some(whatif::CapInfo {
                bytes: Some(cap),
                source: whatif::CapSource::Given,
                range: None,
            }),
            None,
        )
        .unwrap();
        let p = &w[0].predicted;
        let real_peak = stat(&stats, "reserved_bytes.all.peak");
        let err = (p.stats.peak_reserved as f64 - real_peak as f64).abs() / real_peak as f64;
        eprintln!(
            "late_frag_default -> {truth}: predicted peak reserved {} (real {real_peak}), OOM {} (real {})",
            p.stats.peak_reserved,
            !p.ooms.is_empty(),
            stat(&stats, "num_ooms")
        );
        assert!(
            err <= 0.05,
            "{truth}: peak reserved off by {:.1}%",
            err * 100.0
        );
        assert_eq!(
            !p.ooms.is_empty(),
            stat(&stats, "num_ooms") > 0,
            "{truth}: OOM"
        );
        assert!(
            w[0].notes
                .iter()
                .map(memscope::wording::whatif_note)
                .any(|n| n.contains("starts mid-run")),
            "the assumption is stated: {:?}",
            w[0].notes
        );
    }
}

fn cli(args: &[&str]) -> (i32, String) {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_memscope"))
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr),
    )
}

#[test]
fn cli_cap_units_unknown_keys_and_no_history() {
    let f = attribution("late_frag_default.pickle.gz");
    let f = f.to_str().unwrap();
    // 1.6 GiB, as the capture's cap (int(1.6 * 2^30) bytes, which the units round to the same).
    let (rc, out) = cli(&[
        "whatif",
        f,
        "--alloc-conf",
        "expandable_segments:True",
        "--cap",
        "1.6GiB",
    ]);
    assert_eq!(rc, 0, "{out}");
    assert!(
        out.contains("the recorded OOM's request would have been served")
            && out.contains("whether the run would then have finished cannot be told"),
        "{out}"
    );
    let (rc, out) = cli(&["whatif", f, "--alloc-conf", "expandable_segment:True"]);
    assert_eq!(rc, 2, "{out}");
    assert!(
        out.contains("unknown key `expandable_segment`") && out.contains("expandable_segments"),
        "{out}"
    );
    let (rc, out) = cli(&["whatif", f, "--cap", "lots"]);
    assert_eq!(rc, 2, "{out}");
    // A snapshot without history cannot predict: an error, not exit 0 with nothing.
    if let Some(p) = shared::corpus("snapshots/sketchkv2_nohistory.pickle") {
        let (rc, out) = cli(&["whatif", p.to_str().unwrap()]);
        assert_eq!(rc, 2, "{out}");
        assert!(out.contains("no prediction can be made"), "{out}");
    }
}

/// `analyze` judges the expandable-segments remedy of a fragmentation OOM from a mid-run log too.
#[test]
fn remedy_assessed_from_a_mid_run_log() {
    let snap = memscope::load::load_snapshot(&attribution("late_frag_default.pickle.gz")).unwrap();
    let dev = &snap.devices[0];
    let tl = memscope::analysis::replay::replay(dev, &snap.settings);
    let oom = tl.ooms[0].event.0;
    let a = whatif::expandable_assessment(&snap, dev, &tl, oom).expect("an assessment");
    assert!(a.from_mid_run, "{a:?}");
    let a = memscope::wording::expandable_prediction(&a);
    // The real run under expandable segments and the 1.6 GiB cap succeeded with 1.54 GiB reserved:
    // the cap the assessment names as enough must lie between the two.
    assert!(a.contains("starts mid-run"), "{a}");
    assert!(
        a.contains("all succeed if the cap was at least 1.5 GiB"),
        "{a}"
    );
}

/// With no OOM and no `--cap`, the allocator's own retries in the log (segment frees, then a
/// segment that fits) bound the limit the run met: the model reproduces the recorded run under
/// that cap, and predicts the other setting's real run from it.
#[test]
fn cap_from_the_allocator_retries() {
    // The project's spikes capture under a 1.6 GiB cap and no OOM; the real run of the same
    // requests under expandable segments is wi_spikes_expandable.
    let snap = memscope::load::load_snapshot(&own().join("wi_spikes_default.pickle")).unwrap();
    let meta = json(&own().join("wi_spikes_default.meta.json"));
    let real_cap = cap_of(&meta).unwrap();
    let w = whatif::what_if(
        &snap,
        &whatif::parse_alloc_conf("expandable_segments:True").unwrap(),
        None,
        None,
    )
    .unwrap();
    let w = &w[0];
    let (low, high) = w.cap.range.expect("a range from the retries");
    assert!(
        w.cap.source == whatif::CapSource::Retries && low <= real_cap && real_cap <= high,
        "{:?} against the real cap {real_cap}",
        w.cap
    );
    let rec = &w.model_recorded_settings;
    assert_eq!(rec.placement.offset_rate(), 1.0);
    assert_eq!(rec.stats.peak_reserved, w.recorded.peak_reserved_bytes);
    let real = json(&own().join("wi_spikes_expandable.stats.json")).unwrap();
    let real_peak = stat(&real, "reserved_bytes.all.peak");
    let err = (w.predicted.stats.peak_reserved as f64 - real_peak as f64).abs() / real_peak as f64;
    assert!(
        err <= 0.05,
        "predicted {} against {real_peak}",
        w.predicted.stats.peak_reserved
    );
    assert!(w.predicted.ooms.is_empty() && stat(&real, "num_ooms") == 0);
    // Under a garbage-collection threshold the frees come before any failure: no cap from them.
    let gc = memscope::load::load_snapshot(&own().join("wi_mixed_gc05.pickle")).unwrap();
    let w = whatif::what_if(&gc, &AllocConf::default(), None, None).unwrap();
    assert!(w[0].cap.bytes.is_none(), "{:?}", w[0].cap);
    // A public capture (3D cellular automaton inference, recording begun mid-run) that released
    // its cache and retried: without the bound the model reserved 23.5 GiB, not 20.7.
    let Some(p) = shared::corpus("snapshots/octree_nca_b_segment_free.pickle") else {
        return;
    };
    let snap = memscope::load::load_snapshot(&p).unwrap();
    let w = whatif::what_if(&snap, &AllocConf::default(), None, None).unwrap();
    let rec = &w[0].model_recorded_settings;
    assert_eq!(
        w[0].cap.source,
        whatif::CapSource::Retries,
        "{:?}",
        w[0].cap
    );
    assert_eq!(rec.stats.peak_reserved, w[0].recorded.peak_reserved_bytes);
    assert!(rec.placement.offset_rate() >= 0.99);
}

/// A cap below what a mid-run log already holds (fixtures/attribution late_recording: 326 MiB
/// reserved when recording began) predicts an OOM at the first request, whatever was cached;
/// and the free memory at the reserved peak, which is that starting state, is the replay's own.
#[test]
fn a_cap_below_what_the_log_starts_with_predicts_an_oom_at_the_first_request() {
    let p = attribution("late_recording.pickle.gz");
    let snap = memscope::load::load_snapshot(&p).unwrap();
    let cap = 100 << 20;
    let w = whatif::what_if(
        &snap,
        &whatif::parse_alloc_conf("").unwrap(),
        Some(whatif::CapInfo {
            bytes: Some(cap),
            source: whatif::CapSource::Given,
            range: None,
        }),
        None,
    )
    .unwrap();
    let m = &w[0].predicted;
    let first = m.ooms.first().expect("an OOM under a cap below the start");
    assert_eq!(first.request_index, 0, "the first request: {first:?}");
    assert!(first.allocated_bytes + first.rounded_bytes > cap);
    // 326 MiB reserved at the start, its free part read from the replayed initial state.
    assert!(w[0].recorded.free_reserved_at_peak_bytes > 0);
    assert_eq!(
        w[0].recorded.free_reserved_at_peak_bytes,
        m.free_reserved_at_peak_bytes
    );
}

/// A log that begins mid-run is seeded with its recorded layout, which under another
/// `max_split_size_mb` can hold an oversize free block beside live ones (torch never makes
/// one): releasing cached blocks for a request must skip it, not free the segment under its
/// live neighbours (it panicked on this capture).
#[test]
fn a_seeded_layout_survives_another_max_split_size() {
    let p = own().join("loops/oom_retry_lm_clean.pickle.gz");
    let snap = memscope::load::load_snapshot(&p).unwrap();
    for conf in [
        "max_split_size_mb:64",
        "max_split_size_mb:21",
        "max_split_size_mb:200",
    ] {
        let c = whatif::parse_alloc_conf(conf).unwrap();
        let w = whatif::what_if(&snap, &c, None, None).unwrap();
        assert!(!w.is_empty(), "{conf}");
    }
}

/// A snapshot `memscope run` wrote records the device's size: with no OOM or retry to bound the
/// cap and none given, what-if takes it, as the plan does.
#[test]
fn the_device_size_a_run_records_is_the_default_cap() {
    let with = memscope::load::load_snapshot(&own().join("plan/mlp_b256_run.pickle.gz")).unwrap();
    let w = whatif::what_if(&with, &AllocConf::default(), None, None).unwrap();
    assert_eq!(w[0].cap.bytes, Some(85_017_493_504));
    assert_eq!(w[0].cap.source, whatif::CapSource::DeviceTotal);
    let without = memscope::load::load_snapshot(&own().join("plan/mlp_b256.pickle.gz")).unwrap();
    let w = whatif::what_if(&without, &AllocConf::default(), None, None).unwrap();
    assert_eq!(w[0].cap.bytes, None);
}
