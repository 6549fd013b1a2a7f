//! Where the tests find `../shared` (the real captures made on the project's GPU machine and the
//! public corpus), and what they do when it is missing.
//!
//! On a contributor's machine without `../shared`, the tests that need it are `ignored` (build.rs
//! sets `cfg(memscope_no_shared)`; cargo lists them as `ignored, needs ../shared ...` and counts
//! them), and the tests that read it only in part say what they skipped on the terminal (a `SKIP`
//! line, written past the test harness's capture so it is seen).
//! CI sets `MEMSCOPE_REQUIRE_SHARED=1` (see `.ci/run`): there a missing file is a failure, so a
//! test that needs real captures can never pass by skipping.
#![allow(dead_code)] // each test crate uses its own part

use std::path::{Path, PathBuf};

/// The `../shared` folder beside the checkout (never an absolute path).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared")
}

/// Whether a missing shared file must fail the test (CI) rather than skip it.
pub fn required() -> bool {
    std::env::var_os("MEMSCOPE_REQUIRE_SHARED").is_some_and(|v| !v.is_empty() && v != "0")
}

/// `../shared/REL` when it exists. When it does not: `None` with a message on a contributor's
/// machine, a panic under `MEMSCOPE_REQUIRE_SHARED`.
pub fn path(rel: &str) -> Option<PathBuf> {
    let p = root().join(rel);
    if p.exists() {
        return Some(p);
    }
    if required() {
        panic!(
            "{} is missing and MEMSCOPE_REQUIRE_SHARED is set: the real captures are required here",
            p.display()
        );
    }
    skip(&p);
    None
}

/// One `SKIP` line on the real stderr (not the harness's captured one): the test, and what it lacks.
pub fn skip(p: &Path) {
    use std::io::Write;
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("?");
    let _ = writeln!(
        std::io::stderr(),
        "SKIP {}::{test}: {} is absent (the real captures; CI requires them)",
        env!("CARGO_CRATE_NAME"),
        p.display()
    );
}

/// `../shared/fixtures/NAME`.
pub fn fixture(name: &str) -> Option<PathBuf> {
    path(&format!("fixtures/{name}"))
}

/// `../shared/corpus/REL`.
pub fn corpus(rel: &str) -> Option<PathBuf> {
    path(&format!("corpus/{rel}"))
}

/// `../shared/fixtures/NAME.pickle`.
pub fn fixture_pickle(name: &str) -> Option<PathBuf> {
    fixture(&format!("{name}.pickle"))
}

/// Whether this is CI (`MEMSCOPE_REQUIRE_SHARED` or `CI=true`): there a test that needs a tool
/// `.ci/run` installs (tmux, chromium) fails without it instead of skipping.
pub fn ci() -> bool {
    required() || std::env::var_os("CI").is_some_and(|v| v == "true" || v == "1")
}

/// Every file under `dirs` (recursively, in path order) whose name `keep` accepts: the one
/// walker of the tests that run on every capture at hand.
pub fn files_under(dirs: &[PathBuf], keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut walk: Vec<PathBuf> = dirs.to_vec();
    while let Some(dir) = walk.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk.push(p);
            } else if p.file_name().is_some_and(|n| keep(&n.to_string_lossy())) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The repo's `fixtures/`, with `../shared/fixtures` and each `../shared/corpus/REL` where
/// they are (skipped visibly where not).
pub fn capture_dirs(corpus_parts: &[&str]) -> Vec<PathBuf> {
    let mut dirs = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")];
    dirs.extend(path("fixtures"));
    for rel in corpus_parts {
        dirs.extend(corpus(rel));
    }
    dirs
}

/// Part `part` of `parts` of `all` (every `parts`-th file from `part` on): the committed
/// captures cut so that the harness runs a long every-capture test as several side by side.
pub fn part_of(all: Vec<PathBuf>, part: usize, parts: usize) -> Vec<PathBuf> {
    all.into_iter()
        .enumerate()
        .filter(|(i, _)| i % parts == part)
        .map(|(_, p)| p)
        .collect()
}
