//! Command-line conventions: `--version` with the commit, completions and the man page, "did you
//! mean", the TUI without a terminal, `--color` only where there is colour, flags that do nothing.

use std::path::Path;
use std::process::{Command, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_memscope"))
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
        .display()
        .to_string()
}

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let o = bin().args(args).stdin(Stdio::null()).output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn version_has_the_commit() {
    let (code, out, _) = run(&["--version"]);
    assert_eq!(code, Some(0));
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    assert_eq!(
        out,
        format!("memscope {} (commit {commit})\n", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn completions_and_man_page() {
    for (shell, marker) in [
        ("bash", "complete -F _memscope"),
        ("zsh", "#compdef memscope"),
        ("fish", "complete -c memscope"),
    ] {
        let (code, out, err) = run(&["completions", shell]);
        assert_eq!(code, Some(0), "{err}");
        assert!(out.contains(marker), "{shell}: {out}");
        for sub in ["analyze", "check", "run", "whatif"] {
            assert!(out.contains(sub), "{shell} completes {sub}");
        }
    }
    let (code, _, err) = run(&["completions", "tcsh"]);
    assert_eq!(code, Some(2), "{err}");
    let (code, out, _) = run(&["man"]);
    assert_eq!(code, Some(0));
    assert!(out.contains(".TH memscope 1"), "{out}");
    assert!(
        out.contains("memscope\\-run"),
        "subcommands are listed: {out}"
    );
    // Into a closed pipe: quiet, exit 0 (no panic from the generator).
    let mut child = bin()
        .args(["completions", "zsh"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn mistyped_subcommands_get_a_suggestion() {
    for (typo, want) in [
        ("reprot", "report"),
        ("analyse", "analyze"),
        ("chek", "check"),
        ("flamegrpah", "flamegraph"),
    ] {
        let (code, out, err) = run(&[typo, "x.pickle"]);
        assert_eq!(code, Some(2), "{typo}");
        assert!(out.is_empty());
        assert_eq!(
            err,
            format!("memscope: error: `{typo}` is neither a subcommand nor a file; did you mean `{want}`?\n")
        );
    }
    // Far from every name: the ordinary missing-file error, no guess.
    let (code, _, err) = run(&["train_run_42.pickle"]);
    assert_eq!(code, Some(2));
    assert!(!err.contains("did you mean"), "{err}");
    // A file that happens to look like a typo is a file.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("typo_file");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(fixture("clean.pickle"), dir.join("reprot")).unwrap();
    let o = bin()
        .arg("reprot")
        .current_dir(&dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("VERDICT"));
}

#[test]
fn tui_on_a_file_that_cannot_be_opened_says_so_once_before_any_screen() {
    let missing = fixture("no_such_capture.pickle");
    let (code, out, err) = run(&["tui", &missing]);
    assert_eq!(code, Some(2));
    assert!(out.is_empty(), "no alternate screen: {out:?}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!("memscope: error: cannot open {missing}: ")),
        "{err}"
    );
    // A directory is not a capture either.
    let dir = fixture("unit");
    let (code, _, err) = run(&["tui", &dir]);
    assert_eq!(code, Some(2));
    assert_eq!(
        err,
        format!("memscope: error: cannot open {dir}: it is a directory\n")
    );
}

#[test]
fn tui_without_a_terminal_says_so_once() {
    let (code, out, err) = run(&["tui", &fixture("clean.pickle")]);
    assert_eq!(code, Some(2));
    assert!(
        out.is_empty(),
        "nothing on stdout, no alternate screen: {out:?}"
    );
    assert_eq!(
        err,
        format!(
            "memscope: error: the TUI needs a terminal (stdin and stdout); for a text report run `memscope analyze {}`\n",
            fixture("clean.pickle")
        )
    );
}

#[test]
fn color_only_where_there_is_colour() {
    let snap = fixture("clean.pickle");
    for args in [
        vec!["analyze", "--color", "always", &snap],
        vec!["check", "--color", "never", &snap],
        vec!["diff", "--color", "never", &snap, &snap],
        vec![&snap, "--color", "never"],
    ] {
        let (code, _, err) = run(&args);
        assert_eq!(code, Some(0), "{args:?}: {err}");
    }
    let (_, out, _) = run(&["analyze", "--color", "always", &snap]);
    assert!(out.contains('\x1b'), "--color always colours");
    for args in [
        vec!["whatif", "--color", "never", &snap],
        vec!["tui", "--color", "never", &snap],
        vec!["baseline", "--color", "never", &snap, "-o", "-"],
        vec!["report", "--color", "never", &snap, "-o", "/dev/null"],
        vec!["--color", "never", "tui", &snap],
    ] {
        let (code, _, err) = run(&args);
        assert_eq!(code, Some(2), "{args:?}");
        assert!(err.contains("--color"), "{args:?}: {err}");
    }
}

#[test]
fn stacks_on_a_trace_says_it_does_nothing() {
    let trace = fixture("trace_clean.trace.json.gz");
    let (code, with, err) = run(&["analyze", "--stacks", &trace]);
    assert_eq!(code, Some(0));
    assert_eq!(
        err,
        "memscope: note: --stacks does nothing for a profiler trace (its sites come without stacks)\n"
    );
    let (_, without, err) = run(&["analyze", &trace]);
    assert_eq!(with, without, "and indeed it changes nothing");
    assert!(err.is_empty());
    let (_, _, err) = run(&["analyze", "--stacks", &fixture("clean.pickle")]);
    assert!(err.is_empty(), "{err}");
}
