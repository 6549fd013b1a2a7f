//! The picture commands on captures with nothing to draw (issue #25): `flamegraph` of a snapshot
//! with no device succeeds with a note, like `report` and `export`; `export` of a snapshot with no
//! allocation history warns on stderr (and in the trace's metadata) instead of writing an empty
//! trace silently.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `{'segments': [], 'device_traces': []}`, pickled by Python (protocol 2).
const NO_DEVICE: &[u8] =
    b"\x80\x02}q\x00(X\x08\x00\x00\x00segmentsq\x01]q\x02X\r\x00\x00\x00device_tracesq\x03]q\x04u.";

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("memscope-empty-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(args: &[&str]) -> (Option<i32>, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_memscope"))
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn flamegraph_of_a_snapshot_without_devices_is_a_note_like_report_and_export() {
    let d = tmp("fg");
    let input = d.join("none.pickle");
    std::fs::write(&input, NO_DEVICE).unwrap();
    let svg = d.join("fg.svg");
    let (code, err) = run(&["flamegraph", s(&input), "-o", s(&svg)]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("empty: the snapshot holds no device"), "{err}");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.starts_with("<svg") && text.contains("holds no device"),
        "{text}"
    );
    let folded = d.join("fg.txt");
    let (code, err) = run(&["flamegraph", s(&input), "--folded", "-o", s(&folded)]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(std::fs::read_to_string(&folded).unwrap(), "");
    // An explicit device that is not there stays an error.
    let (code, _) = run(&["flamegraph", s(&input), "--device", "3", "-o", s(&svg)]);
    assert_eq!(code, Some(2));
    for (cmd, out) in [("report", "r.html"), ("export", "e.json")] {
        let (code, err) = run(&[cmd, s(&input), "-o", s(&d.join(out))]);
        assert_eq!(code, Some(0), "{cmd}: {err}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn export_without_history_warns_and_the_trace_says_why() {
    let d = tmp("export");
    let input =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/unit/tiny_nohistory_p4.pickle");
    let out = d.join("t.json");
    let (code, err) = run(&["export", s(&input), "--format", "perfetto", "-o", s(&out)]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("memscope: warning: the snapshot has no allocation history"),
        "{err}"
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert!(doc["metadata"]["warning"]
        .as_str()
        .unwrap()
        .contains("no allocation history"));
    // A capture with a history: no warning.
    let input = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/clean.pickle");
    let (code, err) = run(&["export", s(&input), "--format", "perfetto", "-o", s(&out)]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("warning"), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}
