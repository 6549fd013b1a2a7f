//! The truth of the realistic captures (`fixtures/realistic/*.meta.json`) stays well-formed and
//! tied to the generator that made them.
//!
//! `tools/accuracy.py` scores memscope against these files, so a truth that rots (a field renamed,
//! a marker line moved in `generate.py` without regenerating, a capture deleted) would silently
//! change ACCURACY.md. Each meta.json must have every truth field with an allowed value, name lines
//! that exist in `fixtures/realistic/generate.py` with the code its markers recorded, and sit beside
//! its capture; and each snapshot must be whole (its replay agrees with its `memory_stats()`).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

const SCRIPT: &str = "fixtures/realistic/generate.py";
const LEVELS: &[&str] = &["step", "eval batch", "request", "single pass"];
const CAUSES: &[&str] = &["leak", "fragmentation", "capacity"];
/// What a committed capture may weigh (bytes): one, and all of them together.
const MAX_FILE: u64 = 1 << 20;
const MAX_TOTAL: u64 = 15 << 20;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/realistic")
}

fn metas() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir()).expect("fixtures/realistic exists") {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if let Some(stem) = name.strip_suffix(".meta.json") {
            assert!(
                !stem.ends_with(".smoke"),
                "{name}: a smoke-test output must not be committed"
            );
            let v: Value = serde_json::from_str(&fs::read_to_string(&p).unwrap())
                .unwrap_or_else(|e| panic!("{name}: not JSON: {e}"));
            out.push((stem.to_string(), v));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn source() -> Vec<String> {
    fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(SCRIPT))
        .expect("the generator is committed")
        .lines()
        .map(str::to_string)
        .collect()
}

/// The code on a marked line: the text before its `# KIND-LINE` comment.
fn code_at(src: &[String], line: u64, kind: &str) -> Option<String> {
    let text = src.get(usize::try_from(line).ok()?.checked_sub(1)?)?;
    let tag = format!("{kind}-LINE");
    if !text.contains(&tag) {
        return None;
    }
    let hash = text.find('#')?;
    Some(text[..hash].trim().to_string())
}

fn str_field<'a>(v: &'a Value, key: &str, name: &str) -> &'a str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("{name}: `{key}` must be a string, is {}", v[key]))
}

#[test]
fn every_realistic_truth_is_well_formed_and_matches_the_generator() {
    let src = source();
    let metas = metas();
    assert!(
        metas.len() >= 12,
        "expected the realistic captures, found {} meta.json files",
        metas.len()
    );
    for (stem, m) in &metas {
        let name = stem.as_str();
        assert_eq!(str_field(m, "name", name), name, "{name}: name");
        assert_eq!(
            m["smoke"],
            Value::Bool(false),
            "{name}: made by a smoke run"
        );
        assert_eq!(str_field(m, "script", name), SCRIPT);
        assert_eq!(
            str_field(m, "script_filename_in_frames", name),
            SCRIPT,
            "{name}: frames must name the generator repo-relatively"
        );
        assert!(
            str_field(m, "description", name).len() > 40,
            "{name}: description"
        );
        let kind = str_field(m, "kind", name);
        assert!(kind == "snapshot" || kind == "trace", "{name}: kind {kind}");

        // The function the scenario ran exists in the generator.
        let function = str_field(m, "function", name);
        let def = format!("def {function}(");
        assert!(
            src.iter().any(|l| l.trim_start().starts_with(&def)),
            "{name}: {function} is not defined in {SCRIPT}"
        );

        // Every marker names a line whose code is what was recorded when the capture was made.
        let markers = m["markers"].as_array().expect("markers is a list");
        for mk in markers {
            let kind = str_field(mk, "kind", name);
            let line = mk["line"].as_u64().expect("marker line");
            let code = str_field(mk, "code", name);
            let at = code_at(&src, line, kind).unwrap_or_else(|| {
                panic!("{name}: {SCRIPT}:{line} carries no {kind}-LINE marker any more")
            });
            assert_eq!(
                at, code,
                "{name}: {SCRIPT}:{line} changed since the capture was made"
            );
        }

        // The leak truth and its line.
        let leak = m["leak"]
            .as_bool()
            .unwrap_or_else(|| panic!("{name}: `leak` must be true or false"));
        let line = &m["expect_line"];
        let line_kind = &m["expect_line_kind"];
        if leak {
            let lk = line_kind.as_str().expect("a leak names its line's kind");
            let want = match lk {
                "keeping" => "LEAK",
                "allocating" => "ALLOC",
                other => panic!("{name}: expect_line_kind {other}"),
            };
            assert_eq!(
                str_field(line, "file", name),
                SCRIPT,
                "{name}: expect_line.file"
            );
            let n = line["line"].as_u64().expect("expect_line.line");
            let code = str_field(line, "code", name);
            let func = str_field(line, "function", name);
            let hits: Vec<_> = markers
                .iter()
                .filter(|mk| mk["kind"] == want && mk["line"].as_u64() == Some(n))
                .collect();
            assert_eq!(
                hits.len(),
                1,
                "{name}: expect_line {n} is not the scenario's {want} marker"
            );
            assert_eq!(
                hits[0]["code"].as_str(),
                Some(code),
                "{name}: expect_line.code"
            );
            assert_eq!(hits[0]["function"].as_str(), Some(func), "{name}: function");
            assert_eq!(code_at(&src, n, want).as_deref(), Some(code));
        } else {
            assert!(line.is_null(), "{name}: a clean capture has no expect_line");
            assert!(
                line_kind.is_null(),
                "{name}: a clean capture has no line kind"
            );
        }

        // The OOM truth agrees with what happened.
        let cause = &m["expect_oom_cause"];
        let oom = m["oom"].as_bool().expect("oom");
        match cause.as_str() {
            Some(c) => {
                assert!(CAUSES.contains(&c), "{name}: expect_oom_cause {c}");
                assert!(oom, "{name}: an OOM cause without an OOM");
                // A capacity truth rests on the allocator's own figures at the OOM.
                let check = &m["oom_check"];
                let req = check["request_bytes"]
                    .as_u64()
                    .expect("oom_check.request_bytes");
                let alloc = check["allocated_bytes"]
                    .as_u64()
                    .expect("oom_check.allocated_bytes");
                let cap = check["cap_bytes"].as_u64().expect("oom_check.cap_bytes");
                assert_eq!(check["fits_if_compacted"], Value::Bool(alloc + req <= cap));
                if c == "capacity" {
                    assert!(alloc + req > cap, "{name}: the request would have fitted");
                }
            }
            None => {
                assert!(cause.is_null(), "{name}: expect_oom_cause");
                assert!(!oom, "{name}: an OOM without a cause");
            }
        }

        // Steps: a positive count at a known level, the count the run itself recorded.
        let count = m["steps"]["count"].as_u64().expect("steps.count");
        assert!(count >= 1, "{name}: steps.count");
        let level = str_field(&m["steps"], "level", name);
        assert!(LEVELS.contains(&level), "{name}: steps.level {level}");
        assert_eq!(
            m["result"]["steps"].as_u64(),
            Some(count),
            "{name}: the truth's step count is not the run's"
        );
        assert_eq!(level == "single pass", count == 1, "{name}: single pass");
    }
}

#[test]
fn every_realistic_truth_sits_beside_its_capture() {
    let mut total = 0u64;
    let mut names = BTreeSet::new();
    for (stem, m) in metas() {
        let ext = if m["kind"] == "trace" {
            ".trace.json.gz"
        } else {
            ".pickle.gz"
        };
        for file in [format!("{stem}{ext}"), format!("{stem}.stats.json")] {
            let p = dir().join(&file);
            let len = fs::metadata(&p)
                .unwrap_or_else(|_| panic!("{file} is missing"))
                .len();
            assert!(len <= MAX_FILE, "{file}: {len} bytes, over {MAX_FILE}");
            total += len;
        }
        let head = fs::read(dir().join(format!("{stem}{ext}"))).unwrap();
        assert_eq!(&head[..2], &[0x1f, 0x8b], "{stem}{ext} is not gzipped");
        names.insert(stem);
    }
    assert!(total <= MAX_TOTAL, "captures weigh {total} bytes in all");
    // Both sides of the judgement are represented.
    let leaky = metas().iter().filter(|(_, m)| m["leak"] == true).count();
    let clean = metas().iter().filter(|(_, m)| m["leak"] == false).count();
    assert!(
        leaky >= 3 && clean >= 6,
        "{leaky} leaky and {clean} clean captures"
    );
    // Every leaky capture named NAME_leak* has its clean twin NAME_clean.
    for n in &names {
        if let Some(prefix) = n.split("_leak").next().filter(|_| n.contains("_leak")) {
            if !n.starts_with("trace_") {
                assert!(
                    names.contains(&format!("{prefix}_clean")),
                    "{n} has no clean twin {prefix}_clean"
                );
            }
        }
    }
}

/// A capture is ground truth only if it is whole: memscope's replay of every realistic snapshot
/// must agree with the `memory_stats()` read right after its dump (current figures to the byte,
/// and the observed peak), so no truth rests on a capture with missing history.
#[test]
fn every_realistic_snapshot_replays_to_its_memory_stats() {
    let mut checked = 0;
    for (stem, m) in metas() {
        if m["kind"] != "snapshot" {
            continue;
        }
        let path = dir().join(format!("{stem}.pickle.gz"));
        let stats: Value = serde_json::from_str(
            &fs::read_to_string(dir().join(format!("{stem}.stats.json"))).unwrap(),
        )
        .unwrap();
        let snap = memscope::load::load_snapshot(&path).unwrap();
        let a = memscope::analysis::analyze_snapshot(&snap, &path, 0);
        assert_eq!(a.devices.len(), 1, "{stem}");
        let d = &a.devices[0];
        assert!(d.replay_consistent, "{stem}: {:?}", d.consistency);
        let stat = |k: &str| {
            stats[k]
                .as_u64()
                .unwrap_or_else(|| panic!("{stem}: stats lack {k}"))
        };
        assert_eq!(
            d.allocated_bytes,
            Some(stat("allocated_bytes.all.current")),
            "{stem}"
        );
        assert_eq!(
            d.reserved_bytes,
            Some(stat("reserved_bytes.all.current")),
            "{stem}"
        );
        assert_eq!(
            d.observed_peak_allocated_bytes,
            stat("allocated_bytes.all.peak"),
            "{stem}: the peak happened inside the recorded window"
        );
        assert_eq!(
            m["ring_overflowed"],
            Value::Bool(false),
            "{stem}: the ring buffer overflowed"
        );
        checked += 1;
    }
    assert!(checked >= 12, "checked {checked} snapshots");
}
