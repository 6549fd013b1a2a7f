//! The trace loader reads large files on several threads, each from a guessed event boundary.
//! Whatever the guesses, the trace must come out exactly as the one-thread reading gives it:
//! checked here on every real trace at hand (fixtures, the shared fixtures, the HTA corpus),
//! with work items so small that splits land inside strings and `args`, and on traces cut
//! short or holding raw control characters.

use std::path::{Path, PathBuf};

use memscope::load::{self, chrome};

use crate::shared;

fn traces() -> Vec<PathBuf> {
    shared::files_under(&shared::capture_dirs(&["traces"]), |name| {
        name.ends_with(".json") || name.ends_with(".json.gz")
    })
}

/// The whole result, errors included, as text (floats print exactly).
fn shown(r: Result<memscope::model::trace::Trace, chrome::TraceError>) -> String {
    match r {
        Ok(t) => format!("{t:?}"),
        Err(e) => format!("error: {e}"),
    }
}

fn assert_same(bytes: &[u8], what: &str) {
    let one = shown(chrome::parse_with_threads(bytes, 1));
    // Work items of a few bytes put a guessed split at nearly every `,{`, including ones in
    // strings and nested objects; larger ones at ordinary places.
    for (chunk, threads) in [(1, 2), (97, 3), (4096, 2)] {
        {
            let many = shown(chrome::parse_with_chunks(bytes, threads, chunk));
            assert!(
                one == many,
                "{what}: {threads} threads, {chunk}-byte work items differ from one thread"
            );
        }
    }
}

#[test]
fn parallel_reading_matches_sequential_on_real_traces() {
    let files = traces();
    assert!(!files.is_empty());
    let mut n = 0;
    for p in &files {
        let Ok(bytes) = load::read_input(p) else {
            continue;
        };
        assert_same(&bytes, &p.display().to_string());
        n += 1;
    }
    eprintln!("{n} traces compared");
}

#[test]
fn parallel_reading_matches_sequential_on_cut_and_damaged_traces() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/trace_val_no_grad.trace.json");
    let bytes = std::fs::read(&p).unwrap();
    // Cut short at many places, inside events and between them.
    for k in 1..24 {
        let cut = bytes.len() * k / 24 + k * 7;
        let cut = cut.min(bytes.len());
        assert_same(&bytes[..cut], &format!("cut at {cut}"));
    }
    // Raw control characters inside names (read from a repaired copy), and a name holding
    // what looks like an element boundary.
    let text = String::from_utf8(bytes.clone()).unwrap();
    let damaged = text
        .replacen("aten::add_", "aten::add_\twith\ttab", 50)
        .replacen("aten::empty", "aten::empty, {\\\"ph\\\": \\\"X\\\"}", 50);
    assert_same(damaged.as_bytes(), "damaged");
    // An element that is not an event, and one that is not valid, in the middle.
    let mid = text.len() / 2;
    let at = mid + text[mid..].find("\n  {").unwrap() + 1;
    let mut odd = text.clone();
    odd.insert_str(at, "  [1, 2, {\"a\": 3}],\n  {\"ph\": \"X\" \"cat\"},\n");
    assert_same(odd.as_bytes(), "odd elements");
    // Minified: no newlines at all between events.
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let mini = serde_json::to_vec(&v).unwrap();
    assert_same(&mini, "minified");
}
