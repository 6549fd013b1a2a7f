//! `memscope run`: the Rust side, with a fake `python` that records what it was given, and end to
//! end with the real `python3` and the stand-in torch of `tests/python/fake_torch`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_memscope"))
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A `python` that writes its arguments, its environment and the recorder it was given into
/// `$LOG_DIR`, writes two rank snapshots where the recorder would, and exits 3.
fn fake_python(dir: &Path) -> PathBuf {
    let p = dir.join("python");
    std::fs::write(
        &p,
        r#"#!/bin/sh
printf '%s\n' "$@" > "$LOG_DIR/args"
env > "$LOG_DIR/env"
first=${PYTHONPATH%%:*}
cp "$first/sitecustomize.py" "$LOG_DIR/sitecustomize.py"
echo "$first" > "$LOG_DIR/bootdir"
cp "$SNAP" "$MEMSCOPE_RUN_DIR/memscope-oom-rank0.pickle"
cp "$SNAP" "$MEMSCOPE_RUN_DIR/memscope-exit-rank1.pickle"
# The program's own file beside the recorder's: not a capture (`run` must not list it).
echo '{}' > "$MEMSCOPE_RUN_DIR/memscope-exit-rank1.truth.json"
exit 3
"#,
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn env_of(log: &Path) -> std::collections::HashMap<String, String> {
    std::fs::read_to_string(log.join("env"))
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn prepares_the_program_runs_it_and_reports() {
    let d = scratch("run_fake");
    let py = fake_python(&d);
    let out_dir = d.join("out");
    // A stale file from an earlier run is not reported as written by this one.
    std::fs::create_dir_all(&out_dir).unwrap();
    std::fs::write(out_dir.join("memscope-oom.pickle"), b"old").unwrap();
    let r = bin()
        .args(["run", "--snapshot-on", "both", "--max-entries", "5000"])
        .args(["--profile-steps", "3:5", "--max-steps", "7", "-o"])
        .arg(&out_dir)
        .arg("--")
        .arg(&py)
        .args(["train.py", "--lr", "0.1", "--", "x y"])
        .env("LOG_DIR", &d)
        .env("SNAP", root().join("fixtures/clean.pickle"))
        .env("PYTHONPATH", "/user/site")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(
        r.status.code(),
        Some(3),
        "the program's exit code: {stderr}"
    );
    // The program's arguments arrive unchanged.
    let args = std::fs::read_to_string(d.join("args")).unwrap();
    assert_eq!(args, "train.py\n--lr\n0.1\n--\nx y\n");
    let env = env_of(&d);
    let out_abs = std::fs::canonicalize(&out_dir).unwrap();
    assert_eq!(env["MEMSCOPE_RUN_DIR"], out_abs.display().to_string());
    assert_eq!(env["MEMSCOPE_SNAPSHOT_ON"], "both");
    assert_eq!(env["MEMSCOPE_MAX_ENTRIES"], "5000");
    assert_eq!(env["MEMSCOPE_STACKS"], "python");
    assert_eq!(env["MEMSCOPE_PROFILE_STEPS"], "3:5");
    assert_eq!(env["MEMSCOPE_MAX_STEPS"], "7");
    // The recorder goes first on PYTHONPATH, the user's path after it.
    let boot = std::fs::read_to_string(d.join("bootdir")).unwrap();
    assert_eq!(env["PYTHONPATH"], format!("{}:/user/site", boot.trim()));
    assert_eq!(
        std::fs::read_to_string(d.join("sitecustomize.py")).unwrap(),
        std::fs::read_to_string(root().join("python/memscope/_boot.py")).unwrap(),
        "the boot file is the package's own file"
    );
    assert!(
        !Path::new(boot.trim()).exists(),
        "the recorder's directory is removed afterwards"
    );
    // What was written, and what to run next.
    let o = out_abs.display();
    assert!(
        stderr.contains(&format!(
            "memscope: the program exited with code 3; written:\n  {o}/memscope-exit-rank1.pickle\n  {o}/memscope-oom-rank0.pickle\n"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "  memscope analyze {o}/memscope-oom-rank0.pickle\n"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "  memscope check {o}/memscope-exit-rank1.pickle {o}/memscope-oom-rank0.pickle"
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("memscope-oom.pickle"), "{stderr}");
}

#[test]
fn nothing_written_and_a_signal_exit() {
    let d = scratch("run_signal");
    let r = bin()
        .args(["run", "-o"])
        .arg(d.join("out"))
        .args(["--", "sh", "-c", "kill -TERM $$"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(128 + 15), "{stderr}");
    assert!(
        stderr.contains("memscope: the program exited with code 143; no snapshot was written (it was killed by signal 15 before it could write one; a killed process runs no exit handlers)"),
        "{stderr}"
    );
    // `--snapshot-on both` cannot help a program that was killed: not suggested.
    assert!(!stderr.contains("--snapshot-on both"), "{stderr}");
}

/// A Python that cannot import torch is named, instead of "it never used CUDA".
#[test]
fn a_python_without_torch_is_named() {
    let has_python = std::process::Command::new("python3")
        .args([
            "-c",
            "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is not None)",
        ])
        .status();
    match has_python {
        Ok(s) if s.success() => {}
        Ok(_) => {
            eprintln!("SKIP run_cmd::a_python_without_torch_is_named: this python3 has torch");
            return;
        }
        Err(_) => {
            eprintln!("SKIP run_cmd::a_python_without_torch_is_named: no python3");
            return;
        }
    }
    let d = scratch("run_no_torch");
    let r = bin()
        .args(["run", "-o"])
        .arg(d.join("out"))
        .args(["--", "python3", "-c", "print('hello')"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("no snapshot was written (torch cannot be imported by ")
            && stderr.contains("run the program with a Python that has torch"),
        "{stderr}"
    );
}

#[test]
fn command_line_handling() {
    let d = scratch("run_cli");
    let run = |args: &[&str]| {
        let r = bin().arg("run").args(args).output().unwrap();
        (
            r.status.code(),
            String::from_utf8_lossy(&r.stderr).into_owned(),
        )
    };
    // The command must come after `--`.
    let (code, err) = run(&["-o", d.to_str().unwrap(), "python", "train.py"]);
    assert_eq!(code, Some(2), "{err}");
    let (code, err) = run(&["-o", d.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("<COMMAND>"), "{err}");
    let (code, err) = run(&["-o", "x", "--profile-steps", "5:2", "--", "true"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("\"5:2\" is not A:B with 1 <= A <= B"), "{err}");
    let (code, err) = run(&["-o", "x", "--snapshot-on", "never", "--", "true"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("[possible values: oom, exit, both]"), "{err}");
    let (code, err) = run(&["-o", "x", "--max-entries", "0", "--", "true"]);
    assert_eq!(code, Some(2), "{err}");
    // `-o -` means stdout elsewhere; here it is refused before the program runs, and no
    // directory named `-` appears.
    let r = bin()
        .current_dir(&d)
        .args(["run", "-o", "-", "--", "sh", "-c", "echo ran"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(r.stdout.is_empty(), "the program did not run");
    assert_eq!(
        err,
        "memscope: error: -o -: memscope run writes its snapshots and traces (one file per rank) into a directory, not to stdout; give one, e.g. -o mem/\n"
    );
    assert!(!d.join("-").exists());
    // `-o` is required; a command that does not exist is an error naming it.
    let (code, _) = run(&["--", "true"]);
    assert_eq!(code, Some(2));
    let (code, err) = run(&["-o", d.to_str().unwrap(), "--", "/nonexistent/python3"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("memscope: error: /nonexistent/python3: cannot run it"),
        "{err}"
    );
    // The help says how steps are counted, without touching the user's code.
    let help = bin().args(["run", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("register_optimizer_step_post_hook"), "{help}");
}

/// The whole path with a real Python: `memscope run -- python3 train.py` with the stand-in torch
/// on the user's PYTHONPATH. The OOM escapes, the recorder writes the snapshot (a copy of a real
/// one), and the snapshot is one memscope reads.
#[test]
fn end_to_end_with_python3_and_a_stand_in_torch() {
    let d = scratch("run_e2e");
    std::fs::write(
        d.join("train.py"),
        "import torch\nx = torch.cuda.empty(16)\nraise torch.OutOfMemoryError('CUDA out of memory')\n",
    )
    .unwrap();
    let r = bin()
        .args(["run", "-o"])
        .arg(d.join("out"))
        .args(["--", "python3"])
        .arg(d.join("train.py"))
        .env("PYTHONPATH", root().join("tests/python/fake_torch"))
        .env(
            "FAKE_TORCH_SNAPSHOT",
            root().join("fixtures/leak_oom.pickle"),
        )
        .env_remove("RANK")
        .env_remove("LOCAL_RANK")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("torch.OutOfMemoryError: CUDA out of memory"),
        "{stderr}"
    );
    let snap = std::fs::canonicalize(d.join("out/memscope-oom.pickle")).unwrap();
    assert!(
        stderr.contains(&format!("memscope analyze {}", snap.display())),
        "{stderr}"
    );
    let a = bin().arg("analyze").arg(&snap).output().unwrap();
    assert_eq!(a.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&a.stdout).contains("VERDICT OOM on cuda:0"));
}

/// Every option of `memscope run` through to the files, with a real `python3`, the stand-in
/// torch, and a `torchrun` stand-in: a launcher that imports torch but never touches CUDA (as
/// torchrun's does) and starts two workers with `RANK`/`LOCAL_RANK` set. Each worker steps an
/// optimizer 5 times and ends cleanly; rank 1 then raises an OOM. Asked for: snapshots on both,
/// 777 entries, a trace of steps 2 to 3.
#[test]
fn options_and_ranks_under_a_torchrun_like_launcher() {
    let d = scratch("run_torchrun");
    let bin_dir = d.join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let launcher = bin_dir.join("torchrun");
    std::fs::write(
        &launcher,
        r#"#!/usr/bin/env python3
import os, subprocess, sys
import torch  # the launcher imports torch, never initialises CUDA
procs = []
for rank in range(2):
    env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2")
    procs.append(subprocess.Popen([sys.executable, *sys.argv[1:]], env=env))
sys.exit(max(p.wait() for p in procs))
"#,
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&launcher, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        d.join("train.py"),
        r#"import os, torch
x = torch.cuda.empty(16)
opt = torch.optim.Optimizer()
for _ in range(5):
    opt.step()
if os.environ["RANK"] == "1":
    raise torch.OutOfMemoryError("CUDA out of memory")
"#,
    )
    .unwrap();
    let out = d.join("out");
    let log = d.join("torch.log");
    let r = bin()
        .args(["run", "--snapshot-on", "both", "--max-entries", "777"])
        .args(["--profile-steps", "2:3", "-o"])
        .arg(&out)
        .arg("--")
        .arg(&launcher)
        .arg(d.join("train.py"))
        .env("PYTHONPATH", root().join("tests/python/fake_torch"))
        .env("FAKE_TORCH_SNAPSHOT", root().join("fixtures/clean.pickle"))
        .env("FAKE_TORCH_LOG", &log)
        .env_remove("RANK")
        .env_remove("LOCAL_RANK")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "rank 1's OOM: {stderr}");
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    // `both`: the exit snapshot where no OOM escaped, the OOM one where it did; the launcher
    // wrote nothing (no `memscope-*.pickle` without a rank).
    assert_eq!(
        names,
        [
            "memscope-exit-rank0.pickle",
            "memscope-oom-rank1.pickle",
            "memscope-trace-rank0.json",
            "memscope-trace-rank1.json",
        ],
        "{stderr}"
    );
    for rank in 0..2 {
        let trace: serde_json::Value = serde_json::from_slice(
            &std::fs::read(out.join(format!("memscope-trace-rank{rank}.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(
            trace["fake_steps"],
            serde_json::json!([2, 3]),
            "rank {rank}"
        );
    }
    // Each worker recorded with the settings asked for; the launcher never did.
    let calls: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let records: Vec<&serde_json::Value> = calls
        .iter()
        .filter(|c| c["event"] == "record" && c["enabled"] == "all")
        .collect();
    assert_eq!(records.len(), 2, "{calls:?}");
    for c in records {
        assert_eq!(c["max_entries"], 777);
        assert_eq!(c["stacks"], "python");
    }
    assert_eq!(calls.iter().filter(|c| c["event"] == "import").count(), 3);
    // What to run next names every file, and the two snapshots together.
    let o = std::fs::canonicalize(&out).unwrap();
    let o = o.display();
    for f in [
        "memscope-exit-rank0.pickle",
        "memscope-oom-rank1.pickle",
        "memscope-trace-rank1.json",
    ] {
        assert!(
            stderr.contains(&format!("  memscope analyze {o}/{f}\n")),
            "{stderr}"
        );
    }
    assert!(
        stderr.contains(&format!(
            "  memscope check {o}/memscope-exit-rank0.pickle {o}/memscope-oom-rank1.pickle    # all ranks side by side\n"
        )),
        "{stderr}"
    );
    // The files memscope run wrote are ones memscope reads.
    let a = bin()
        .args(["check", "--no-config"])
        .arg(out.join("memscope-exit-rank0.pickle"))
        .arg(out.join("memscope-oom-rank1.pickle"))
        .output()
        .unwrap();
    assert_eq!(
        a.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&a.stdout)
    );
}
