//! `memscope run` prepares every Python the program may start (issue 24): an interpreter too
//! old for the recorder steps aside and the user's own `sitecustomize` still runs; the `-o`
//! directory is made only when a file is written.

use std::path::{Path, PathBuf};
use std::process::Command;

fn scratch(tag: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("run-boot-{tag}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Pythons on this machine: the current `python3` and, where pyenv has them, 3.6 and 2.7.
fn pythons() -> Vec<PathBuf> {
    let mut v = Vec::new();
    if Command::new("python3").arg("-V").output().is_ok() {
        v.push(PathBuf::from("python3"));
    } else {
        println!("SKIP: python3 is not installed");
    }
    if let Some(home) = std::env::var_os("HOME") {
        let root = Path::new(&home).join(".pyenv/versions");
        for (prefix, exe) in [("3.6", "python3.6"), ("2.7", "python2.7")] {
            let found = std::fs::read_dir(&root)
                .into_iter()
                .flatten()
                .filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
                .map(|e| e.path().join("bin").join(exe))
                .find(|p| p.exists());
            match found {
                Some(p) => v.push(p),
                None => println!("SKIP: no Python {prefix} under ~/.pyenv/versions"),
            }
        }
    }
    v
}

#[test]
fn every_python_runs_with_the_users_sitecustomize_and_no_syntax_error() {
    let d = scratch("pythons");
    let site = d.join("site");
    std::fs::create_dir_all(&site).unwrap();
    std::fs::write(
        site.join("sitecustomize.py"),
        "print('USER-SITECUSTOMIZE')\n",
    )
    .unwrap();
    for py in pythons() {
        let out = d.join("out");
        let o = Command::new(env!("CARGO_BIN_EXE_memscope"))
            .args(["run", "-o"])
            .arg(&out)
            .arg("--")
            .arg(&py)
            .args(["-c", "print('ran')"])
            .env("PYTHONPATH", &site)
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
        );
        assert_eq!(o.status.code(), Some(0), "{}: {stderr}", py.display());
        assert_eq!(
            stdout.split_whitespace().collect::<Vec<_>>(),
            ["USER-SITECUSTOMIZE", "ran"],
            "{}: {stderr}",
            py.display()
        );
        assert!(
            !stderr.contains("SyntaxError"),
            "{}: {stderr}",
            py.display()
        );
        assert!(
            !out.exists(),
            "{}: -o made with nothing written",
            py.display()
        );
    }
}

#[test]
fn a_command_that_does_not_exist_makes_no_output_directory() {
    let d = scratch("missing");
    let out = d.join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_memscope"))
        .args(["run", "-o"])
        .arg(&out)
        .args(["--", "/nonexistent/memscope-test-command"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(!out.exists());
}
