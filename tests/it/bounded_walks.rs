//! Costs a command line sets (issue 37): a job directory's walk ends whatever links it holds
//! and stops at a file cap with a clear error; `plan`'s shapes stay in a range where 2, 4 and
//! 8 times the batch are three different predictions.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("memscope-walk37-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs memscope with `args`; fails the test if it has not ended in 120 s (the walks this
/// file tests ran without end before).
fn memscope(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_memscope"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("memscope {args:?} still runs after 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_job_directory_with_self_links_or_a_link_to_root_is_walked_once() {
    let d = scratch("links");
    let ranks = d.join("ranks");
    std::fs::create_dir_all(&ranks).unwrap();
    std::fs::copy(fixture("clean.pickle"), ranks.join("rank0.pickle")).unwrap();
    std::fs::copy(fixture("clean.pickle"), ranks.join("rank1.pickle")).unwrap();
    std::os::unix::fs::symlink(".", ranks.join("again")).unwrap();
    std::os::unix::fs::symlink("..", ranks.join("up")).unwrap();
    std::os::unix::fs::symlink("/", ranks.join("root")).unwrap();
    let out = memscope(&[
        "analyze",
        "--format",
        "json",
        "--rank-pattern",
        r"rank(\d+)\.pickle",
        d.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["data"]["ranks"].as_array().unwrap().len(), 2, "{v}");
}

#[test]
fn a_job_directory_past_the_file_cap_is_refused_by_name() {
    let d = scratch("many");
    for i in 0..=100_000 {
        std::fs::File::create(d.join(format!("r{i}.pickle"))).unwrap();
    }
    let out = memscope(&["analyze", d.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("more than 100000 captures under it"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn plan_refuses_shapes_it_cannot_tell_apart() {
    let f = fixture("plan/mlp_b256.pickle.gz");
    let f = f.to_str().unwrap();
    for (args, says) in [
        (
            vec!["plan", "--batch", "18446744073709551615", f],
            "1 to 4294967296",
        ),
        (vec!["plan", "--batch", "4294967297", f], "1 to 4294967296"),
        (
            vec!["plan", "--batch", "256", "--at", "4294967297", f],
            "1 to 4294967296",
        ),
        (
            vec![
                "plan",
                "--batch",
                "256",
                "--with",
                f,
                "--with-batch",
                "0",
                f,
            ],
            "1 to 4294967296",
        ),
        (
            vec!["plan", "--batch", "256", "--with", f, "--with-seq", "0", f],
            "1 to 4294967296",
        ),
        (vec!["plan", "--batch", "0", f], "at least 1"),
        (vec!["plan", "--batch", "256", "--at", "0", f], "at least 1"),
        (
            vec!["plan", "--batch", "256", "--seq", "0", f],
            "at least 1",
        ),
    ] {
        let out = memscope(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    // The largest batch allowed still gives three different predictions.
    let out = memscope(&["plan", "--batch", "4294967296", "--format", "json", f]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = v.to_string();
    for b in ["8589934592", "17179869184", "34359738368"] {
        assert!(text.contains(b), "{b} missing");
    }
}

/// `tools/crafted_inputs.py plan_segments N`: N requests of 12 MiB, none freed, each in a
/// segment of its own.
fn plan_segments(n: i64) -> Vec<u8> {
    use serde_pickle::{HashableValue as H, Value as V};
    let d = |pairs: Vec<(&str, V)>| {
        V::Dict(
            pairs
                .into_iter()
                .map(|(k, v)| (H::String(k.into()), v))
                .collect(),
        )
    };
    let frame = d(vec![
        ("filename", V::String("train.py".into())),
        ("line", V::I64(10)),
        ("name", V::String("step".into())),
    ]);
    let size = 12i64 << 20;
    let ev = |action: &str, addr: i64, t: i64| {
        d(vec![
            ("action", V::String(action.into())),
            ("addr", V::I64(addr)),
            ("size", V::I64(size)),
            ("stream", V::I64(0)),
            ("time_us", V::I64(t)),
            ("frames", V::List(vec![frame.clone()])),
        ])
    };
    let base = 0x7f00_0000_0000i64;
    let trace: Vec<V> = (0..n)
        .flat_map(|i| {
            [
                ev("segment_alloc", base + i * size, 2 * i),
                ev("alloc", base + i * size, 2 * i + 1),
            ]
        })
        .collect();
    let doc = d(vec![
        ("segments", V::List(vec![])),
        ("device_traces", V::List(vec![V::List(trace)])),
    ]);
    serde_pickle::value_to_vec(&doc, serde_pickle::SerOptions::new()).unwrap()
}

#[test]
fn plan_places_thousands_of_segments_without_overlap() {
    // The placement is read from the end of the segment map (issue 37: it scanned every
    // segment per new one); each request still gets a segment of its own, so the replay
    // reserves exactly what was recorded, and twice the batch twice that.
    let n = 3000;
    let d = scratch("segments");
    let f = d.join("segments.pickle");
    std::fs::write(&f, plan_segments(n)).unwrap();
    let out = memscope(&[
        "plan",
        "--batch",
        "8",
        "--format",
        "json",
        f.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let dev = &v["data"]["devices"][0];
    let recorded = n as u64 * (12 << 20);
    assert_eq!(dev["recorded_peak_reserved_bytes"], recorded, "{dev}");
    assert_eq!(dev["model_peak_reserved_bytes"], recorded, "{dev}");
    assert_eq!(dev["predictions"][0]["batch"], 16);
    assert_eq!(dev["predictions"][0]["peak_reserved_bytes"], 2 * recorded);
}
