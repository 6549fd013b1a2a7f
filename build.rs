//! Puts the git commit into `memscope --version` (`MEMSCOPE_GIT_COMMIT`).
//!
//! Reads git when it is there (a clone, `pip install .` from one); otherwise (a source archive,
//! no git installed) the commit is `unknown` and the build goes on. The script re-runs only when
//! `HEAD` or the branch it points to moves, so edits do not rebuild the crate.
//!
//! Also sets `cfg(memscope_no_shared)` when `../shared` (the real captures beside the checkout)
//! is absent and `MEMSCOPE_REQUIRE_SHARED` is not set: the tests that need those captures are then
//! `ignored` with their reason, so `cargo test` on a bare clone passes and counts them. CI sets
//! `MEMSCOPE_REQUIRE_SHARED=1`, which keeps them running (and failing when the files are missing).

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
    shared_cfg();
}

/// `cfg(memscope_no_shared)` for the tests (see the module doc). Decided when the script runs: a
/// `../shared` added later is seen after `touch build.rs` (watching `..` would scan the parent).
fn shared_cfg() {
    println!("cargo:rustc-check-cfg=cfg(memscope_no_shared)");
    println!("cargo:rerun-if-env-changed=MEMSCOPE_REQUIRE_SHARED");
    let required =
        std::env::var_os("MEMSCOPE_REQUIRE_SHARED").is_some_and(|v| !v.is_empty() && v != "0");
    let dir = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
    let present = dir.is_some_and(|d| d.join("../shared").is_dir());
    if !present && !required {
        println!("cargo:rustc-cfg=memscope_no_shared");
    }
}
