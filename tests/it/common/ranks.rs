//! What the rank-job tests (`ranks`, `job40`) share: the repository root, the truth file a GPU
//! generator wrote beside each rank's capture, and unsigned figures out of JSON.

use std::path::PathBuf;

use serde_json::Value;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The truth file beside a capture (`x.pickle.gz` -> `x.truth.json`).
pub fn truth_of(capture: &str) -> Value {
    let p = root().join(capture.replace(".pickle.gz", ".truth.json"));
    serde_json::from_slice(&std::fs::read(&p).expect("truth file")).unwrap()
}

pub fn u(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("not an unsigned integer: {v}"))
}
