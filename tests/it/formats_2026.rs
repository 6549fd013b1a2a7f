//! The snapshot fields of 2025–2026 torch (issue #28), on real captures and on captures built
//! from them as upstream PyTorch writes the fields torch 2.11 does not
//! (fixtures/formats/build_upstream.py). Every expected figure comes from the workload's truth
//! files or from reading the pickle here (serde_pickle), never from memscope's own output.

use crate::common;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value as J;
use serde_pickle::{HashableValue as H, Value as V};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memscope"));
    c.env_remove("NO_COLOR")
        .env_remove("GITHUB_ACTIONS")
        .env_remove("GITHUB_STEP_SUMMARY")
        .env_remove("GITHUB_WORKSPACE");
    c
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/formats")
        .join(name)
}

fn truth(name: &str) -> J {
    serde_json::from_slice(&std::fs::read(fixture(name)).unwrap()).unwrap()
}

fn pickle(name: &str) -> V {
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(fixture(name)).unwrap())
        .read_to_end(&mut raw)
        .unwrap();
    serde_pickle::value_from_slice(
        &raw,
        serde_pickle::DeOptions::new().replace_recursive_structures(),
    )
    .unwrap()
}

fn get<'a>(v: &'a V, key: &str) -> Option<&'a V> {
    match v {
        V::Dict(d) => d.get(&H::String(key.into())),
        _ => None,
    }
}

fn text(v: Option<&V>) -> Option<&str> {
    match v {
        Some(V::String(s)) => Some(s),
        _ => None,
    }
}

fn int(v: Option<&V>) -> i64 {
    match v {
        Some(V::I64(i)) => *i,
        _ => panic!("not an int: {v:?}"),
    }
}

/// The trace entries of device 0.
fn entries(p: &V) -> Vec<&V> {
    match get(p, "device_traces") {
        Some(V::List(devs)) => match &devs[0] {
            V::List(es) => es.iter().collect(),
            _ => panic!(),
        },
        _ => panic!(),
    }
}

/// Per value of `key` (torch's "none" left out): (allocations, bytes), read from the pickle.
fn by_key(p: &V, key: &str, none: &[&str]) -> BTreeMap<String, (u64, u64)> {
    let mut out = BTreeMap::new();
    for e in entries(p) {
        if text(get(e, "action")) != Some("alloc") {
            continue;
        }
        let Some(l) = text(get(e, key)).filter(|l| !none.contains(l)) else {
            continue;
        };
        let t = out.entry(l.to_owned()).or_insert((0, 0));
        t.0 += 1;
        t.1 += int(get(e, "size")) as u64;
    }
    out
}

fn run(c: &mut Command) -> Output {
    let o = c.output().unwrap();
    assert!(
        o.status.code().is_some_and(|c| c <= 1),
        "exit {:?}\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn json(name: &str) -> J {
    let o = run(bin()
        .args(["analyze", "--format", "json"])
        .arg(fixture(name)));
    common::envelope::data(&o.stdout)
}

fn analyze_text(name: &str, extra: &[&str]) -> String {
    let o = run(bin()
        .args(["analyze", "--color", "never"])
        .args(extra)
        .arg(fixture(name)));
    String::from_utf8(o.stdout).unwrap()
}

/// A label as memscope keeps it: one line, its breaks made visible.
fn one_line(s: &str) -> String {
    s.replace('\n', "\\n").replace('\r', "\\r")
}

fn rows<'a>(j: &'a J, field: &str) -> Vec<&'a J> {
    j["devices"][0][field]
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

#[test]
fn user_labels_of_a_compiled_run_are_counted_as_the_pickle_says() {
    let t = truth("compiled_meta.truth.json");
    let p = pickle("compiled_meta.pickle.gz");
    let expected = by_key(&p, "user_metadata", &[""]);
    // The workload's labels are all there, and one more: the hostile one.
    for l in t["labels"].as_array().unwrap() {
        let l = l.as_str().unwrap();
        assert!(
            expected.contains_key(l) || !l.contains("forward"),
            "the pickle lacks the forward label {l}"
        );
    }
    let j = json("compiled_meta.pickle.gz");
    let got: BTreeMap<String, (u64, u64)> = rows(&j, "user_labels")
        .iter()
        .map(|r| {
            (
                r["label"].as_str().unwrap().to_owned(),
                (
                    r["allocations"].as_u64().unwrap(),
                    r["allocated_bytes"].as_u64().unwrap(),
                ),
            )
        })
        .collect();
    let expected: BTreeMap<String, (u64, u64)> = expected
        .into_iter()
        .map(|(k, v)| (one_line(&k), v))
        .collect();
    assert_eq!(got, expected);
    for l in t["labels"].as_array().unwrap() {
        let l = l.as_str().unwrap();
        if l.contains("forward") {
            assert!(got.contains_key(l), "{l} missing from {got:?}");
        }
    }
    // The hostile label's one allocation, at the address the workload recorded, is live at
    // the end: its bytes are the label's bytes at the end.
    let hostile_addr = t["hostile_addr"].as_i64().unwrap();
    // The last allocation at that address (addresses are reused).
    let size = entries(&p)
        .into_iter()
        .rev()
        .find(|e| text(get(e, "action")) == Some("alloc") && int(get(e, "addr")) == hostile_addr)
        .map(|e| int(get(e, "size")) as u64)
        .unwrap();
    let hostile = rows(&j, "user_labels")
        .into_iter()
        .find(|r| r["label"].as_str().unwrap().contains("::error::fake"))
        .expect("the hostile label has a row");
    assert_eq!(hostile["live_bytes_at_end"].as_u64(), Some(size));
    // Regions: compile_context other than "N/A".
    let regions = by_key(&p, "compile_context", &["N/A", ""]);
    assert!(!regions.is_empty());
    let got: BTreeMap<String, (u64, u64)> = rows(&j, "compiled_regions")
        .iter()
        .map(|r| {
            (
                r["label"].as_str().unwrap().to_owned(),
                (
                    r["allocations"].as_u64().unwrap(),
                    r["allocated_bytes"].as_u64().unwrap(),
                ),
            )
        })
        .collect();
    assert_eq!(got, regions);
}

#[test]
fn inductor_frames_are_generated_code_and_blame_the_users_line() {
    let out = analyze_text("compiled_meta.pickle.gz", &["--stacks"]);
    let sites: Vec<&str> = out
        .lines()
        .filter(|l| l.contains(" in ") && l.contains(".py:"))
        .collect();
    assert!(!sites.is_empty(), "{out}");
    assert!(
        !sites.iter().any(|l| l.contains("torchinductor_")),
        "a generated file is blamed:\n{out}"
    );
    assert!(
        out.contains("inductor kernel call (generated code"),
        "{out}"
    );
    assert!(out.contains("BY USER LABEL cuda:0"), "{out}");
    assert!(out.contains("BY COMPILED REGION cuda:0"), "{out}");
    assert!(out.contains("Torch-Compiled Region: 0/0"), "{out}");
}

#[test]
fn fx_frames_show_the_node_and_its_source() {
    // Real: torch 2.11 wrote the node's op, name and target, no original trace.
    let out = analyze_text("fx_aot_eager.pickle.gz", &["--stacks"]);
    let fx: Vec<&str> = out
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("FX "))
        .collect();
    assert!(!fx.is_empty(), "{out}");
    for l in &fx {
        assert!(
            l.contains(" (aten.") && l.contains("generated code fx_generated__"),
            "{l}"
        );
    }
    assert!(
        !out.lines().any(|l| l.trim().starts_with("fx_generated__")),
        "a generated file:line shown as a frame:\n{out}"
    );
    // Built from upstream's _augment_frames: the original trace names the model's line.
    let t = truth("upstream.truth.json");
    let out = analyze_text("fx_upstream.pickle.gz", &["--stacks"]);
    // The heaviest stacks shown hold some of the nodes; each shown names its own source line.
    let mut shown = 0;
    for (node, src) in t["fx_upstream"].as_object().unwrap() {
        let file = src["file"].as_str().unwrap();
        let line = src["line"].as_u64().unwrap();
        let label = format!("FX {node} (aten.");
        for l in out.lines().filter(|l| l.contains(&label)) {
            shown += 1;
            assert!(l.ends_with(&format!("from {file}:{line} forward")), "{l}");
        }
    }
    assert!(shown > 0, "no FX node shown:\n{out}");
    let j = json("fx_upstream.pickle.gz");
    let peak_files: Vec<&str> = rows(&j, "top_sites_at_peak")
        .iter()
        .filter_map(|r| r["site"]["file"].as_str())
        .collect();
    assert!(
        peak_files.iter().any(|f| f.ends_with("/mlp.py")),
        "the model's source is blamed: {peak_files:?}"
    );
}

#[test]
fn the_allocators_overflow_flag_is_the_authority() {
    let with = json("ring_upstream.pickle.gz");
    let notes = with["notes"].to_string();
    assert!(notes.contains("trace_alloc_overflowed"), "{notes}");
    assert!(notes.contains("64 entries"), "{notes}");
    let without = json("ring_small.pickle.gz");
    assert!(!without["notes"]
        .to_string()
        .contains("trace_alloc_overflowed"));
    // The flag says no overflow: the log started late, as the allocator says.
    let meta = json("meta_upstream.pickle.gz");
    let notes = meta["notes"].to_string();
    assert!(notes.contains("did not overflow"), "{notes}");
}

#[test]
fn an_annotation_relabels_a_live_block_and_changes_no_memory() {
    let t = truth("upstream.truth.json");
    let m = &t["meta_upstream"];
    let plain = json("compiled_meta.pickle.gz");
    let annotated = json("meta_upstream.pickle.gz");
    for k in [
        "allocated_bytes",
        "reserved_bytes",
        "observed_peak_allocated_bytes",
        "replay_consistent",
    ] {
        assert_eq!(plain["devices"][0][k], annotated["devices"][0][k], "{k}");
    }
    assert_eq!(annotated["devices"][0]["replay_consistent"], J::Bool(true));
    let label = one_line(m["label"].as_str().unwrap());
    let row = rows(&annotated, "user_labels")
        .into_iter()
        .find(|r| r["label"].as_str() == Some(label.as_str()))
        .expect("the annotation is a label");
    assert_eq!(row["live_bytes_at_end"].as_u64(), m["size"].as_u64());
    assert_eq!(row["allocations"].as_u64(), Some(0));
}

#[test]
fn captures_without_labels_say_nothing_of_them() {
    let j = json("ring_small.pickle.gz");
    assert!(j["devices"][0].get("user_labels").is_none());
    assert!(j["devices"][0].get("compiled_regions").is_none());
    let out = analyze_text("ring_small.pickle.gz", &[]);
    assert!(!out.contains("BY USER LABEL"));
}

/// Every byte a terminal would obey is made visible; no line starts a workflow command.
fn assert_terminal_safe(what: &str, bytes: &[u8], sgr: bool, annotations: bool) {
    let s = String::from_utf8_lossy(bytes);
    for (i, c) in s.char_indices() {
        if c == '\x1b' && sgr {
            let rest = &s[i + 1..];
            let end = rest.find('m').unwrap_or(rest.len());
            assert!(
                rest.starts_with('[')
                    && rest[1..end].chars().all(|c| c.is_ascii_digit() || c == ';'),
                "{what}: an ESC that is not SGR at {i}"
            );
            continue;
        }
        assert!(
            !((c < ' ' && c != '\n' && c != '\t') || ('\u{7f}'..='\u{9f}').contains(&c)),
            "{what}: raw {c:?} at {i}"
        );
    }
    for line in s.lines() {
        let t = line.trim_start();
        let ours =
            annotations && (t.starts_with("::error file=") || t.starts_with("::error title="));
        assert!(!t.starts_with("::") || ours, "{what}: {line:?}");
    }
}

#[test]
fn hostile_labels_reach_no_writer_raw() {
    for name in ["compiled_meta.pickle.gz", "meta_upstream.pickle.gz"] {
        for color in ["never", "always"] {
            let o = run(bin()
                .args(["analyze", "--stacks", "--color", color])
                .arg(fixture(name)));
            assert_terminal_safe("analyze", &o.stdout, color == "always", false);
            let s = String::from_utf8_lossy(&o.stdout);
            assert!(
                s.contains("\\x1b]0;pwned") || name != "compiled_meta.pickle.gz",
                "{s}"
            );
        }
        // JSON: the label is data, its control characters escaped by JSON itself.
        let o = run(bin()
            .args(["analyze", "--format", "json"])
            .arg(fixture(name)));
        assert!(!o.stdout.iter().any(|&b| b < 0x20 && b != b'\n'));
        // The HTML report: the label is text.
        let dir = std::env::temp_dir().join(format!("memscope-formats-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let html = dir.join("r.html");
        let o = run(bin().arg("report").arg(fixture(name)).arg("-o").arg(&html));
        assert_eq!(o.status.code(), Some(0));
        let page = std::fs::read_to_string(&html).unwrap();
        assert!(page.contains("step=0 phase=forward"));
        assert!(!page.contains('\x1b'), "a raw ESC on the page");
        // `check` as a GitHub job: annotations on stderr, the job summary.
        let summary = dir.join("summary.md");
        let o = run(bin()
            .args(["check", "--no-config"])
            .arg(fixture(name))
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_STEP_SUMMARY", &summary));
        assert_terminal_safe("check stdout", &o.stdout, false, false);
        assert_terminal_safe("check stderr", &o.stderr, false, true);
        let md = std::fs::read_to_string(&summary).unwrap_or_default();
        assert!(!md.contains('\x1b'));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
