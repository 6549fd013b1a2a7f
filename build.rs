//! Puts the git commit into `memscope --version` (`MEMSCOPE_GIT_COMMIT`).
//!
//! Reads git when it is there (a clone, `pip install .` from one); otherwise (a source archive,
//! no git installed) the commit is `unknown` and the build goes on. The script re-runs only when
//! `HEAD` or the branch it points to moves, so edits do not rebuild the crate.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=MEMSCOPE_GIT_COMMIT");
    let commit = std::env::var("MEMSCOPE_GIT_COMMIT")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_string());
    // Watch HEAD and the ref it names (a worktree's HEAD lives in its own git dir, the branch
    // refs in the common one).
    if let Some(dir) = git(&["rev-parse", "--path-format=absolute", "--git-dir"]) {
        println!(
            "cargo:rerun-if-changed={}",
            PathBuf::from(&dir).join("HEAD").display()
        );
    }
    if let (Some(common), Some(head_ref)) = (
        git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]),
        git(&["symbolic-ref", "-q", "HEAD"]),
    ) {
        let common = PathBuf::from(common);
        // Only files that exist: cargo re-runs the script on every build for a missing one.
        for f in [common.join(&head_ref), common.join("packed-refs")] {
            if f.exists() {
                println!("cargo:rerun-if-changed={}", f.display());
            }
        }
    }
    println!("cargo:rustc-env=MEMSCOPE_GIT_COMMIT={commit}");
}
