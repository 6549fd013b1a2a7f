//! The `memscope/1` envelope (docs/json.md) around every `--format json` output: each command
//! on a bundled capture names itself, its inputs (role, kind, size as stored) and its
//! document's schema; a command that fails still prints an envelope, with `data: null` and its
//! error's kind and message (the one on stderr), and exits 2. The expected values come from
//! the files themselves (their sizes from the file system, their kinds from what they are),
//! not from memscope's output.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::envelope::{data, envelope};
use serde_json::{json, Value};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn fixture(rel: &str) -> String {
    format!("fixtures/{rel}")
}

fn size(rel: &str) -> u64 {
    std::fs::metadata(root().join(rel)).unwrap().len()
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("memscope-envelope-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `memscope ARGS` from the repository root (paths as written in the arguments).
fn memscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memscope"))
        .current_dir(root())
        .args(args)
        .output()
        .unwrap()
}

fn input(path: &str, role: &str, kind: &str) -> Value {
    json!({"path": path, "role": role, "kind": kind, "bytes": size(path)})
}

/// Exit 0 (or 1 for a failed check), an envelope of `command` on `inputs`, a document of
/// `schema`, no error.
fn answers(args: &[&str], command: &str, inputs: Vec<Value>, schema: &str) -> Value {
    let o = memscope(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{args:?}: {err}");
    let e = envelope(&o.stdout);
    assert_eq!(e["command"], command, "{args:?}");
    assert_eq!(e["memscope_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(e["inputs"], Value::Array(inputs), "{args:?}");
    let d = data(&o.stdout);
    assert_eq!(d["schema"], schema, "{args:?}");
    e
}

/// Exit 2, nothing but the error on stderr, and on stdout an envelope of `command` with no
/// data and one error of `kind` whose message is the one on stderr.
fn fails(args: &[&str], command: &str, kind: &str) -> Value {
    let o = memscope(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    let e = envelope(&o.stdout);
    assert_eq!(e["command"], command, "{args:?}");
    assert!(e["data"].is_null(), "{args:?}: {e:#}");
    let errors = e["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{e:#}");
    assert_eq!(errors[0]["kind"], kind, "{args:?}: {e:#}");
    let message = errors[0]["message"].as_str().unwrap();
    assert!(!message.is_empty());
    assert!(
        err.contains(message),
        "{args:?}: stderr {err:?} lacks {message:?}"
    );
    // Without --format json, the same failure prints nothing on stdout (as before).
    let text: Vec<&str> = args
        .iter()
        .map(|a| match *a {
            "json" => "text",
            "--format=json" => "--format=text",
            a => a,
        })
        .collect();
    let t = memscope(&text);
    assert_eq!(t.status.code(), Some(2), "{text:?}");
    assert!(t.stdout.is_empty(), "{text:?}");
    e
}

#[test]
fn analyze_names_the_capture_and_its_kind() {
    let snap = fixture("leak_oom.pickle");
    let e = answers(
        &["analyze", "--format", "json", &snap],
        "analyze",
        vec![input(&snap, "input", "snapshot")],
        "memscope.report/1",
    );
    assert_eq!(e["warnings"], json!([]));
    assert_eq!(e["data"]["input"]["path"], snap.as_str());

    let trace = fixture("trace_total_loss.trace.json.gz");
    let e = answers(
        &["analyze", "--format", "json", "--stacks", &trace],
        "analyze",
        vec![input(&trace, "input", "trace")],
        "memscope.report/1",
    );
    // The note said on stderr is in the envelope too.
    let w = e["warnings"].as_array().unwrap();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].as_str().unwrap().starts_with("--stacks does nothing"));
}

#[test]
fn analyze_of_stdin_counts_its_bytes() {
    let snap = fixture("clean.pickle");
    let o = Command::new(env!("CARGO_BIN_EXE_memscope"))
        .current_dir(root())
        .args(["analyze", "--format", "json", "-"])
        .stdin(std::fs::File::open(root().join(&snap)).unwrap())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let e = envelope(&o.stdout);
    assert_eq!(
        e["inputs"],
        json!([{"path": "-", "role": "input", "kind": "snapshot", "bytes": size(&snap)}])
    );
}

#[test]
fn check_names_captures_baselines_and_the_config() {
    let dir = tmpdir("check");
    let base = dir.join("base.json");
    let base_s = base.to_str().unwrap();
    let clean = fixture("clean.pickle");
    let trace = fixture("trace_clean.trace.json.gz");
    let o = memscope(&["baseline", &clean, "-o", base_s]);
    assert_eq!(o.status.code(), Some(0));
    // The baseline file is memscope.baseline/1 itself, not an envelope (docs/json.md).
    let b: Value = serde_json::from_slice(&std::fs::read(&base).unwrap()).unwrap();
    assert_eq!(b["schema"], "memscope.baseline/1");
    assert!(b.get("envelope").is_none());

    let cfg = dir.join("memscope.toml");
    std::fs::write(&cfg, "[check]\nmax-peak = \"64GiB\"\n").unwrap();
    let cfg_s = cfg.to_str().unwrap();
    let e = answers(
        &[
            "check",
            "--format",
            "json",
            "--config",
            cfg_s,
            "--baseline",
            base_s,
            &clean,
            &trace,
        ],
        "check",
        vec![
            input(&clean, "input", "snapshot"),
            input(&trace, "input", "trace"),
            json!({"path": base_s, "role": "baseline", "kind": "baseline", "bytes": size(base_s)}),
            json!({"path": cfg_s, "role": "config", "kind": "config", "bytes": size(cfg_s)}),
        ],
        "memscope.check/3",
    );
    assert_eq!(e["data"]["passed"], true, "{e:#}");

    // A summary given as an input is a baseline file; a failed check is no error.
    let leak = fixture("leak_oom.pickle");
    let o = memscope(&["check", "--no-config", "--format", "json", base_s, &leak]);
    assert_eq!(o.status.code(), Some(1));
    let e = envelope(&o.stdout);
    assert_eq!(e["errors"], json!([]));
    assert_eq!(e["data"]["passed"], false);
    assert_eq!(
        e["inputs"],
        json!([
            {"path": base_s, "role": "input", "kind": "baseline", "bytes": size(base_s)},
            input(&leak, "input", "snapshot"),
        ])
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_baseline_in_an_envelope_is_read_and_an_envelope_is_no_capture() {
    let dir = tmpdir("wrapped");
    let clean = fixture("clean.pickle");
    let o = memscope(&["baseline", &clean, "-o", "-"]);
    let bare: Value = serde_json::from_slice(&o.stdout).unwrap();
    // Kept whole by a tool that wraps what it is handed: still a baseline.
    let wrapped = dir.join("wrapped.json");
    let env = json!({"envelope": "memscope/1", "command": "baseline", "inputs": [],
                     "data": bare, "errors": [], "warnings": []});
    std::fs::write(&wrapped, serde_json::to_vec_pretty(&env).unwrap()).unwrap();
    let w = wrapped.to_str().unwrap();
    let o = memscope(&[
        "check",
        "--no-config",
        "--format",
        "json",
        "--baseline",
        w,
        &clean,
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(data(&o.stdout)["passed"], true);

    // memscope's own output where a capture is expected: said as such, not read as a trace.
    let report = dir.join("report.json");
    std::fs::write(
        &report,
        memscope(&["analyze", "--format", "json", &clean]).stdout,
    )
    .unwrap();
    let r = report.to_str().unwrap();
    let e = fails(
        &["whatif", "--format", "json", r],
        "whatif",
        "not_a_capture",
    );
    assert_eq!(e["errors"][0]["path"], r);
    fails(
        &[
            "check",
            "--no-config",
            "--format",
            "json",
            "--baseline",
            r,
            &clean,
        ],
        "check",
        "baseline",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn diff_names_before_and_after() {
    let (a, b) = (
        fixture("motion/motion_v1.pickle.gz"),
        fixture("motion/motion_v2.pickle.gz"),
    );
    let e = answers(
        &["diff", "--format", "json", &a, &b],
        "diff",
        vec![
            input(&a, "before", "snapshot"),
            input(&b, "after", "snapshot"),
        ],
        "memscope.diff/1",
    );
    assert_eq!(e["data"]["before"], a.as_str());
}

#[test]
fn plan_names_both_captures() {
    let (a, b) = (
        fixture("plan/mlp_b256.pickle.gz"),
        fixture("plan/mlp_b512.pickle.gz"),
    );
    let e = answers(
        &[
            "plan",
            &a,
            "--batch",
            "256",
            "--with",
            &b,
            "--with-batch",
            "512",
            "--cap",
            "8GiB",
            "--format",
            "json",
        ],
        "plan",
        vec![
            input(&a, "input", "snapshot"),
            input(&b, "with", "snapshot"),
        ],
        "memscope.plan/1",
    );
    assert_eq!(e["data"]["file"], a.as_str());
    assert_eq!(e["data"]["with"], b.as_str());
}

#[test]
fn whatif_has_a_document_of_its_own() {
    let snap = fixture("leak_oom.pickle");
    let e = answers(
        &[
            "whatif",
            "--format",
            "json",
            "--alloc-conf",
            "expandable_segments:True",
            &snap,
        ],
        "whatif",
        vec![input(&snap, "input", "snapshot")],
        "memscope.whatif/1",
    );
    assert_eq!(e["data"]["file"], snap.as_str());
    let devs = e["data"]["devices"].as_array().unwrap();
    assert_eq!(devs.len(), 1);
    assert_eq!(devs[0]["device"], 0);
    assert!(devs[0]["predicted"].is_object());
}

#[test]
fn a_missing_file_fails_in_json() {
    for (args, command) in [
        (
            vec!["analyze", "--format", "json", "nope.pickle"],
            "analyze",
        ),
        (vec!["whatif", "--format", "json", "nope.pickle"], "whatif"),
        (
            vec!["plan", "--format", "json", "--batch", "2", "nope.pickle"],
            "plan",
        ),
        (
            vec!["check", "--no-config", "--format", "json", "nope.pickle"],
            "check",
        ),
        (
            vec![
                "diff",
                "--format",
                "json",
                "nope.pickle",
                "fixtures/clean.pickle",
            ],
            "diff",
        ),
    ] {
        let e = fails(&args, command, "io");
        assert_eq!(e["errors"][0]["path"], "nope.pickle");
        // Named though never read.
        let i = &e["inputs"][0];
        assert_eq!(i["path"], "nope.pickle");
        assert_eq!(i["kind"], "unknown");
        assert!(i["bytes"].is_null());
    }
}

#[test]
fn a_truncated_pickle_fails_in_json() {
    let dir = tmpdir("cut");
    let whole = std::fs::read(root().join("fixtures/leak_oom.pickle")).unwrap();
    let cut = dir.join("cut.pickle");
    std::fs::write(&cut, &whole[..whole.len() / 2]).unwrap();
    let c = cut.to_str().unwrap();
    let e = fails(&["analyze", "--format", "json", c], "analyze", "damaged");
    assert_eq!(e["errors"][0]["path"], c);
    assert_eq!(
        e["inputs"],
        json!([{"path": c, "role": "input", "kind": "unknown", "bytes": whole.len() / 2}])
    );
    fails(
        &["check", "--no-config", "--format", "json", c],
        "check",
        "damaged",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_refused_option_fails_in_json() {
    let snap = "fixtures/leak_oom.pickle";
    // Refused by memscope after the line was parsed.
    fails(
        &[
            "check",
            "--no-config",
            "--fail-on",
            "none",
            "--format",
            "json",
            snap,
        ],
        "check",
        "usage",
    );
    fails(
        &["whatif", "--alloc-conf", "bogus", "--format", "json", snap],
        "whatif",
        "usage",
    );
    fails(
        &["plan", "--batch", "0", "--format", "json", snap],
        "plan",
        "usage",
    );
    // Refused by the parser: the envelope names the command, and no inputs.
    let e = fails(
        &[
            "plan", "--batch", "2", "--cap", "2XB", "--format", "json", snap,
        ],
        "plan",
        "usage",
    );
    assert_eq!(e["inputs"], json!([]));
    assert!(e["errors"][0]["message"].as_str().unwrap().contains("2XB"));
    fails(
        &["analyze", "--format=json", "--bogus", snap],
        "analyze",
        "usage",
    );
}

#[test]
fn what_the_captures_cannot_answer_fails_in_json() {
    fails(
        &[
            "diff",
            "--format",
            "json",
            "fixtures/leak_oom.pickle",
            "fixtures/trace_total_loss.trace.json.gz",
        ],
        "diff",
        "not_comparable",
    );
    fails(
        &[
            "whatif",
            "--format",
            "json",
            "fixtures/unit/tiny_nohistory_p4.pickle",
        ],
        "whatif",
        "cannot_answer",
    );
}

#[test]
fn a_hostile_path_is_escaped_in_the_envelope() {
    let dir = tmpdir("hostile");
    let name = dir.join("a\u{1b}[31m\"\nb.pickle");
    std::fs::copy(root().join("fixtures/clean.pickle"), &name).unwrap();
    let n = name.to_str().unwrap();
    let o = memscope(&["analyze", "--format", "json", n]);
    assert_eq!(o.status.code(), Some(0));
    assert!(!o.stdout.contains(&0x1b), "a raw escape byte on stdout");
    assert_eq!(envelope(&o.stdout)["inputs"][0]["path"], n);
    // And in a failure, on both streams.
    let missing = dir.join("gone\u{1b}]0;x\u{7}.pickle");
    let m = missing.to_str().unwrap();
    let o = memscope(&["analyze", "--format", "json", m]);
    assert_eq!(o.status.code(), Some(2));
    assert!(!o.stdout.contains(&0x1b) && !o.stderr.contains(&0x1b));
    assert_eq!(envelope(&o.stdout)["errors"][0]["path"], m);
    let _ = std::fs::remove_dir_all(&dir);
}

/// docs/json.md names every command's schema and every error kind.
#[test]
fn the_documentation_lists_every_schema_and_error_kind() {
    let doc = std::fs::read_to_string(root().join("docs/json.md")).unwrap();
    for s in [
        "memscope/1",
        "memscope.report/1",
        "memscope.check/3",
        "memscope.diff/1",
        "memscope.plan/1",
        "memscope.whatif/1",
        "memscope.baseline/1",
    ] {
        assert!(doc.contains(&format!("`{s}`")), "docs/json.md lacks {s}");
    }
    for k in memscope::report::envelope::ErrorKind::ALL {
        assert!(
            doc.contains(&format!("`{}`", k.name())),
            "docs/json.md lacks {}",
            k.name()
        );
    }
}
