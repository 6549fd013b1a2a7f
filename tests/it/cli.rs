//! The binary as users run it: exit codes, one-line errors, formats, broken pipes.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_memscope"))
}

use crate::shared;

fn shared(name: &str) -> Option<PathBuf> {
    shared::fixture(name)
}

fn unit(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/unit")
        .join(name)
}

#[test]
fn analyze_text_and_json() {
    let out = bin()
        .args(["analyze"])
        .arg(unit("tiny_p4.pickle"))
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("VERDICT no OOM recorded; leaks not judged: the log is one pass"),
        "{text}"
    );
    assert!(text.contains("train.py:12 in step"), "{text}");
    assert!(!text.contains('\x1b'), "no colour when piped");

    let out = bin()
        .args(["analyze", "--format", "json"])
        .arg(unit("tiny_p4.pickle"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v = common::envelope::data(&out.stdout);
    assert_eq!(v["schema"], "memscope.report/1");
    assert_eq!(v["input"]["kind"], "snapshot");
    let d = &v["devices"][0];
    assert_eq!(d["allocated_bytes"], 1024);
    assert_eq!(d["peak_allocated_bytes"], 1024 + 4096);
    assert_eq!(d["reserved_bytes"], 2 << 20);
    assert_eq!(d["replay_consistent"], true);
    assert_eq!(d["top_sites"][0]["site"]["file"], "train.py");
    assert_eq!(d["top_sites"][0]["site"]["line"], 12);
    assert_eq!(d["top_sites"][0]["bytes"], 1024);
}

#[test]
fn bare_file_argument_prints_the_report_when_piped() {
    let out = bin().arg(unit("tiny_p4.pickle")).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("VERDICT"));
}

#[test]
fn errors_are_one_line_with_exit_code_2() {
    let dir = std::env::temp_dir().join(format!("memscope-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = dir.join("notes.txt");
    std::fs::write(&text, "hello\n").unwrap();
    let trunc = dir.join("trunc.pickle");
    let data = std::fs::read(unit("tiny_p4.pickle")).unwrap();
    std::fs::write(&trunc, &data[..data.len() / 2]).unwrap();
    let cases: Vec<(PathBuf, &str)> = vec![
        (text, "not a pickle"),
        (trunc, "truncated"),
        (dir.join("missing.pickle"), "cannot read"),
        (unit("not_snapshot.pickle"), "not a memory snapshot"),
        (unit("hostile/reduce_p4.pickle"), "STACK_GLOBAL"),
        (unit("hostile/reduce_p0.pickle"), "GLOBAL"),
    ];
    for (path, expect) in cases {
        let out = bin().arg("analyze").arg(&path).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", path.display());
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains(expect) && err.contains(&*path.file_name().unwrap().to_string_lossy()),
            "{err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    let out = bin()
        .args(["analyze", "--format", "yaml", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn broken_pipe_is_not_an_error() {
    let Some(p) = shared("val_no_grad_oom.pickle") else {
        return;
    };
    let mut child = bin()
        .args(["analyze", "--stacks"])
        .arg(p)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close the read end at once.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn inputs_are_never_written() {
    let Some(p) = shared("fragmentation_oom.pickle") else {
        return;
    };
    let before = std::fs::metadata(&p).unwrap().modified().unwrap();
    let bytes = std::fs::read(&p).unwrap();
    let out = bin().arg("analyze").arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(std::fs::metadata(&p).unwrap().modified().unwrap(), before);
    assert_eq!(std::fs::read(&p).unwrap(), bytes);
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn analyze_reads_profiler_traces_into_the_same_schema() {
    let Some(leaky) = shared("trace_total_loss.trace.json") else {
        return;
    };
    let out = bin()
        .args(["analyze", "--format", "json"])
        .arg(&leaky)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = common::envelope::data(&out.stdout);
    assert_eq!(v["schema"], "memscope.report/1");
    assert_eq!(v["input"]["kind"], "trace");
    assert_eq!(v["verdict"]["kind"], "graph_growth");
    let g = &v["graph"]["growth"];
    assert_eq!(g.as_array().unwrap().len(), 1, "{g}");
    assert_eq!(g[0]["op"], "aten::add_");
    assert_eq!(g[0]["nodes_per_step"], 1.0);
    assert_eq!(g[0]["steps"], 12);
    assert_eq!(g[0]["site"]["function"], "profile_loop");
    assert_eq!(g[0]["line_known"], false);
    assert_eq!(v["steps"].as_array().unwrap().len(), 12);
    let d = &v["devices"][0];
    assert!(d["peak_allocated_bytes"].as_u64().unwrap() >= d["allocated_bytes"].as_u64().unwrap());
    assert!(
        d["active_bytes"].is_null(),
        "traces do not record active bytes"
    );

    let clean = shared("trace_clean.trace.json").unwrap();
    let out = bin()
        .args(["analyze", "--format", "json"])
        .arg(&clean)
        .output()
        .unwrap();
    let v = common::envelope::data(&out.stdout);
    assert_eq!(v["verdict"]["kind"], "ok");
    assert!(v["graph"]["growth"].as_array().unwrap().is_empty());
    assert!(v["leaks"].as_array().unwrap().is_empty());

    // The text report of the leaky trace names the function and says the line is not known.
    let out = bin()
        .arg("analyze")
        .arg(&leaky)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("in profile_loop") && text.contains("the line is not known"),
        "{text}"
    );
}

/// `analyze --stacks` on a capture with C++ stacks (`stacks="all"`) shows C++ names with their
/// template arguments collapsed: the corpus' select_n capture has frames of about 1000
/// characters as recorded; no printed line reaches 300.
#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn analyze_stacks_collapses_cpp_templates() {
    let Some(p) = shared::corpus("snapshots/select_n_t21_b.pickle") else {
        return;
    };
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_memscope"))
        .args(["analyze", "--stacks"])
        .arg(&p)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text.contains("<…>") || text.contains("(…)"),
        "collapsed names shown"
    );
    let longest = text.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    assert!(longest < 300, "a line of {longest} characters");
    // Python frames keep their names (`<module>`), never collapsed.
    assert!(text.contains("<module>"));
    assert!(!text.lines().any(|l| l.ends_with(" <…>")));
}
