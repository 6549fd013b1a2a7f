//! Issue #42: `flamegraph --step N` on a snapshot. A trace draws `ProfilerStep#N`'s peak; a
//! snapshot whose log is complete enough has steps too (the analysis finds them, from
//! annotations or from the repeating loop), and `--step N` draws the live memory at the peak of
//! the analysis's `step N`. The folded total equals that step's `peak_allocated_bytes` in
//! `analyze --format json`, to the byte, for every step of real captures (annotated steps and
//! loop-found ones). A step outside the recorded history, or a snapshot with no steps, is
//! refused with exit 2 and a message that says what there is; the output is not written.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::envelope::data;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(rel)
}

fn out(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("snapshot_steps42");
    std::fs::create_dir_all(&d).unwrap();
    let p = d.join(name);
    let _ = std::fs::remove_file(&p);
    p
}

fn memscope(args: &[&std::ffi::OsStr]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_memscope"))
        .args(args)
        .output()
        .unwrap()
}

/// Each iteration of device 0 (`step N`) and its peak, from `analyze --format json`.
fn steps(f: &Path) -> Vec<(u64, u64)> {
    let o = memscope(&[
        "analyze".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        f.as_os_str(),
    ]);
    let a: Value = data(&o.stdout);
    a["steps"]
        .as_array()
        .map(|v| v.as_slice())
        .unwrap_or_default()
        .iter()
        .filter(|s| s["device"] == 0)
        .filter_map(|s| {
            let n = s["name"].as_str()?.strip_prefix("step ")?.parse().ok()?;
            Some((n, s["peak_allocated_bytes"].as_u64()?))
        })
        .collect()
}

fn flame_step(f: &Path, n: u64, o: &Path) -> std::process::Output {
    let n = n.to_string();
    memscope(&[
        "flamegraph".as_ref(),
        "--folded".as_ref(),
        "--step".as_ref(),
        n.as_ref(),
        f.as_os_str(),
        "-o".as_ref(),
        o.as_os_str(),
    ])
}

fn folded_sum(text: &str) -> u64 {
    text.lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum()
}

#[test]
fn a_snapshots_step_flamegraph_adds_up_to_the_steps_peak() {
    for (rel, want) in [
        // Annotated steps (Lightning's `Optimizer.step`).
        ("loops/lightning_callback_alloc_leak.pickle.gz", 16),
        // Steps found from the repeating loop (no annotation).
        ("loops/gan_dloss_leak_24.pickle.gz", 24),
        ("leak_hook.pickle", 0),
    ] {
        let f = fixture(rel);
        let listed = steps(&f);
        assert!(listed.len() >= 4, "{rel}: {listed:?}");
        if want > 0 {
            assert_eq!(listed.len(), want, "{rel}");
        }
        let mut peaks = std::collections::BTreeSet::new();
        for (n, peak) in &listed {
            let o = out(&format!("{}.{n}.folded", rel.replace('/', "_")));
            let r = flame_step(&f, *n, &o);
            let err = String::from_utf8_lossy(&r.stderr);
            assert_eq!(r.status.code(), Some(0), "{rel} step {n}: {err}");
            assert!(
                err.contains(&format!("at the peak of step {n} (event ")),
                "{err}"
            );
            let text = std::fs::read_to_string(&o).unwrap();
            assert_eq!(folded_sum(&text), *peak, "{rel}: step {n}'s peak");
            peaks.insert(*peak);
        }
        // The steps are told apart: not one moment drawn for all.
        assert!(peaks.len() > 1, "{rel}: {peaks:?}");
        // Past the recorded history: exit 2, what there is, nothing written.
        let last = listed.last().unwrap().0;
        for n in [0, last + 1] {
            let o = out(&format!("{}.bad.folded", rel.replace('/', "_")));
            let r = flame_step(&f, n, &o);
            let err = String::from_utf8_lossy(&r.stderr);
            assert_eq!(r.status.code(), Some(2), "{rel} --step {n}: {err}");
            assert!(
                err.contains(&format!(
                    "--step {n}: the snapshot's recorded history holds steps 1 to {last}"
                )),
                "{rel}: {err}"
            );
            assert!(!o.exists(), "{rel} --step {n}: wrote {}", o.display());
        }
    }
}

/// A one-pass capture, in which the analysis finds no steps: refused, and told why.
#[test]
fn a_snapshot_without_steps_refuses_step() {
    let f = fixture("loops/one_pass_12_blocks.pickle.gz");
    assert!(steps(&f).is_empty());
    let o = out("onepass.folded");
    let r = flame_step(&f, 1, &o);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(err.contains("the analysis found no steps"), "{err}");
    assert!(!o.exists());
}
