//! Reading memscope's JSON output through its `memscope/1` envelope (docs/json.md): the one
//! helper every test that parses `--format json` calls, so that the envelope is checked in one
//! place and the tests read their document as before.

use serde_json::Value;

/// The envelope of `stdout`, checked: `memscope/1`, the keys it always has.
pub fn envelope(stdout: &[u8]) -> Value {
    let v: Value = serde_json::from_slice(stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}",
            String::from_utf8_lossy(&stdout[..stdout.len().min(400)])
        )
    });
    assert_eq!(v["envelope"], "memscope/1", "not an envelope: {v:#}");
    for k in [
        "command",
        "memscope_version",
        "inputs",
        "data",
        "errors",
        "warnings",
    ] {
        assert!(v.get(k).is_some(), "the envelope has no {k:?}: {v:#}");
    }
    v
}

/// The document in `stdout`'s envelope (`data`), after checking that the command succeeded.
pub fn data(stdout: &[u8]) -> Value {
    let mut v = envelope(stdout);
    assert_eq!(
        v["errors"],
        serde_json::json!([]),
        "the command failed: {v:#}"
    );
    v["data"].take()
}

/// [`data`] of text (a `String` captured from stdout).
pub fn data_str(stdout: &str) -> Value {
    data(stdout.as_bytes())
}
