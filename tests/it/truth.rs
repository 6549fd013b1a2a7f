//! Facts from the truth files beside the captures, for the snapshot tests to assert beside their
//! snapshot, so that a snapshot accepted with a wrong figure still fails: `NAME.stats.json` is the
//! `torch.cuda.memory_stats()` read right after the dump, `NAME.meta.json` what the generator did
//! (the OOM message PyTorch raised, the function that ran, the profiled steps).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::shared;

/// `fixtures/NAME.EXT` (the project's own captures).
fn file(name: &str, ext: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("fixtures/{name}.{ext}"))
}

fn read(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap()
}

fn counter(v: &Value, name: &str, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{name}.stats.json lacks {key}"))
}

/// One counter of `fixtures/NAME.stats.json`, e.g. `allocated_bytes.all.peak`.
pub fn stat(name: &str, key: &str) -> u64 {
    counter(&read(&file(name, "stats.json")), name, key)
}

/// One counter of `../shared/fixtures/NAME.stats.json` (the real captures; a name there may
/// also be one of the project's own, another run).
pub fn shared_stat(name: &str, key: &str) -> u64 {
    let p = shared::fixture(&format!("{name}.stats.json")).expect("../shared is present");
    counter(&read(&p), name, key)
}

/// `NAME.meta.json`.
pub fn meta(name: &str) -> Value {
    read(&file(name, "meta.json"))
}

/// Bytes as memscope's text writes them: `B` below a KiB, else one decimal of KiB, MiB or GiB.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", UNITS[u])
}

/// The request of the OOM PyTorch raised (`Tried to allocate 512.00 MiB` in the meta's
/// `oom_message`), written as memscope writes it (`512.0 MiB`).
pub fn oom_request(name: &str) -> String {
    let m = meta(name);
    let msg = m["oom_message"]
        .as_str()
        .expect("the capture ended in an OOM");
    let rest = msg
        .split("Tried to allocate ")
        .nth(1)
        .expect("the OOM message names its request");
    let mut it = rest.split_whitespace();
    let n: f64 = it.next().unwrap().parse().unwrap();
    let unit = it.next().unwrap().trim_end_matches('.');
    format!("{n:.1} {unit}")
}

/// `text` contains `fact` (the figure a truth file gives), or the test fails naming both.
pub fn says(text: &str, fact: &str) {
    assert!(
        text.contains(fact),
        "the output does not say {fact:?} (from the capture's truth):\n{text}"
    );
}

/// The last step the profiler recorded (`ProfilerStep#2 .. ProfilerStep#11` in the meta's
/// `result.profiled_steps`).
pub fn last_profiled_step(name: &str) -> String {
    let m = meta(name);
    let steps = m["result"]["profiled_steps"]
        .as_str()
        .expect("profiled_steps");
    let last = steps.split(" .. ").nth(1).expect("a range of steps");
    last.split_whitespace().next().unwrap().to_string()
}
