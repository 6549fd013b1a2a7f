//! A profiler trace cut short says so: memory events may lie past the cut. It never reads as a
//! trace "recorded without profile_memory=True", and it makes no claim about what is alive at
//! its end (a trace's file is not in time order: its ops, then its memory events, then its
//! Python calls, so a cut drops an unknown part of each, frees included).
//!
//! The captures are cut here, from the committed `fixtures/trace_clean.trace.json.gz` (a clean
//! training loop profiled with `profile_memory=True`), at offsets before, inside and after its
//! memory events, as plain JSON, as a whole gzip stream of the cut JSON, and as a gzip stream
//! itself cut short.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use memscope::analysis::trace_report::analyze_trace;
use memscope::analysis::{Analysis, NotJudged};

fn clean_json() -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/trace_clean.trace.json.gz");
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(p).unwrap())
        .read_to_end(&mut out)
        .unwrap();
    out
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

/// A directory of the test's own (`name`): the tests run side by side in one process, and each
/// removes its directory when done.
fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("memscope-cut-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Loads and analyses a file as `memscope analyze` does.
fn analyze(path: &Path) -> Analysis {
    let t = memscope::load::load_trace(path).unwrap();
    let bytes = std::fs::metadata(path).unwrap().len();
    analyze_trace(&t, path, bytes)
}

/// Every sentence the report says about the capture: its verdict and its notes.
fn sentences(a: &Analysis) -> Vec<String> {
    let mut v = vec![memscope::wording::verdict(&a.verdict)];
    v.extend(a.notes.iter().map(memscope::wording::note));
    v
}

/// What a cut capture must say, and must not.
fn assert_cut(a: &Analysis, what: &str) {
    let said = sentences(a);
    let cut = a
        .verdict
        .cut
        .unwrap_or_else(|| panic!("{what}: no cut in the verdict: {said:?}"));
    for s in &said {
        assert!(
            !s.contains("profile_memory"),
            "{what}: a cut trace is not one recorded without profile_memory: {s}"
        );
    }
    let verdict = &said[0];
    assert!(
        verdict.contains("memory events may lie past"),
        "{what}: {verdict}"
    );
    assert!(!a.verdict.leak_judgement.judged, "{what}: {verdict}");
    assert!(a.leaks.is_empty(), "{what}: a leak claimed on a cut trace");
    let expect = if cut.memory_events == 0 {
        NotJudged::CutBeforeMemoryEvents
    } else {
        NotJudged::CutShort
    };
    assert_eq!(a.verdict.leak_judgement.reason, Some(expect), "{what}");
    let g = a.graph.as_ref().expect("a trace's graph section");
    assert!(
        g.growth.is_empty(),
        "{what}: graph growth claimed on a cut trace"
    );
}

#[test]
fn a_cut_trace_says_memory_events_may_lie_past_the_cut() {
    let json = clean_json();
    let first_mem = memchr::memmem::find(&json, b"\"[memory]\"").unwrap();
    let last_mem = memchr::memmem::rfind(&json, b"\"[memory]\"").unwrap();
    let d = dir("cut");
    // Before any memory event, just before the first one, inside them, past the last one (the
    // Python calls and kernels after them cut off), and near the end.
    let offsets = [
        json.len() / 20,
        first_mem - 40,
        first_mem + (last_mem - first_mem) / 3,
        (first_mem + last_mem) / 2,
        last_mem + 5_000,
        json.len() - 100,
    ];
    let mut with_memory = 0;
    let mut without = 0;
    for &cut in &offsets {
        let part = &json[..cut];
        let plain = d.join(format!("cut{cut}.trace.json"));
        std::fs::write(&plain, part).unwrap();
        let a = analyze(&plain);
        assert_cut(&a, &format!("plain cut at {cut}"));
        let c = a.verdict.cut.unwrap();
        assert_eq!(c.at_byte, cut as u64, "{c:?}: the file ends at {cut}");
        if c.memory_events == 0 {
            without += 1;
        } else {
            with_memory += 1;
        }
        // The same cut JSON in a whole gzip stream reads the same.
        let gz = d.join(format!("cut{cut}.trace.json.gz"));
        std::fs::write(&gz, gzip(part)).unwrap();
        let b = analyze(&gz);
        assert_cut(&b, &format!("gzip of the cut at {cut}"));
        assert_eq!(b.verdict.cut, a.verdict.cut, "gzip of the cut at {cut}");
    }
    assert!(without >= 2 && with_memory >= 3, "{without} {with_memory}");
    // The loader's parallel path finds the same cut as its single-threaded one.
    for &cut in &offsets {
        let part = &json[..cut];
        let one = memscope::load::chrome::parse_with_threads(part, 1).unwrap();
        let many = memscope::load::chrome::parse_with_chunks(part, 4, 16 << 10).unwrap();
        assert_eq!(one.cut_at_byte, Some(cut as u64), "cut at {cut}");
        assert_eq!(many.cut_at_byte, one.cut_at_byte, "cut at {cut}, 4 threads");
        assert_eq!(
            many.memory.len(),
            one.memory.len(),
            "cut at {cut}, 4 threads"
        );
    }
    // A gzip stream itself cut short, at several places.
    let whole = gzip(&json);
    for frac in [0.05, 0.3, 0.6, 0.9] {
        let n = (whole.len() as f64 * frac) as usize;
        let p = d.join(format!("gzcut{n}.trace.json.gz"));
        std::fs::write(&p, &whole[..n]).unwrap();
        assert_cut(
            &analyze(&p),
            &format!("gzip stream cut at {n} of {}", whole.len()),
        );
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_whole_trace_is_not_cut_and_one_without_memory_events_says_profile_memory() {
    let json = clean_json();
    let d = dir("whole");
    let p = d.join("clean.trace.json");
    std::fs::write(&p, &json).unwrap();
    let a = analyze(&p);
    assert_eq!(a.verdict.cut, None);
    assert!(
        a.verdict.leak_judgement.judged,
        "{:?}",
        a.verdict.leak_judgement
    );
    assert!(!memscope::wording::verdict(&a.verdict).contains("cut"));
    // The same trace with its memory events taken out (profile_memory=False): whole, so it
    // says how to record them.
    let mut v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    v["traceEvents"]
        .as_array_mut()
        .unwrap()
        .retain(|e| e["name"] != "[memory]");
    let p = d.join("nomem.trace.json");
    std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
    let a = analyze(&p);
    assert_eq!(a.verdict.cut, None);
    assert_eq!(
        a.verdict.leak_judgement.reason,
        Some(NotJudged::NoMemoryEvents)
    );
    assert!(
        sentences(&a)
            .iter()
            .any(|s| s.contains("profile_memory=True")),
        "{:?}",
        sentences(&a)
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// The GPU capture of `fixtures/claims36/` (made by its generate.py): a profiler trace recorded
/// with `profile_memory=True`, cut 7 bytes before its middle memory event, as a job killed while
/// writing it leaves it. Its truth: where it was cut, and how many memory events lie on each side.
#[test]
fn the_cut_gpu_trace_says_where_and_what_came_before() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/claims36");
    let p = dir.join("prof_trace_truncated.trace.json.gz");
    if !p.exists() {
        eprintln!("SKIP: {} is absent", p.display());
        return;
    }
    let meta: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("prof_trace_truncated.meta.json")).unwrap(),
    )
    .unwrap();
    let truth = &meta["truth"]["truncated_copy"];
    let a = analyze(&p);
    assert_cut(&a, "prof_trace_truncated");
    let c = a.verdict.cut.unwrap();
    assert_eq!(c.at_byte, truth["cut_at_byte"].as_u64().unwrap());
    assert_eq!(
        c.memory_events,
        truth["memory_events_before_cut"].as_u64().unwrap()
    );
    // The JSON document says the same.
    let doc = memscope::report::json::document(&a);
    assert_eq!(doc["verdict"]["cut"]["at_byte"], truth["cut_at_byte"]);
    assert_eq!(doc["verdict"]["leak_judgement"]["reason"], "cut_short");
    // The whole trace is not cut.
    let whole = analyze(&dir.join("prof_trace.trace.json.gz"));
    assert_eq!(whole.verdict.cut, None);
    assert!(memscope::report::json::document(&whole)["verdict"]
        .get("cut")
        .is_none());
}
