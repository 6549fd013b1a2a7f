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
    // After a top-level flag and its value too.
    let (code, _, err) = run(&["--color", "never", "reprot", "x.pickle"]);
    assert_eq!(code, Some(2));
    assert_eq!(
        err,
        "memscope: error: `reprot` is neither a subcommand nor a file; did you mean `report`?\n"
    );
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
    // A directory is not a capture either (one with captures under it is a job's ranks:
    // tests/it/ranks.rs).
    let dir = std::env::temp_dir().join(format!("memscope-empty-dir-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dir = dir.display().to_string();
    let (code, _, err) = run(&["tui", &dir]);
    let _ = std::fs::remove_dir(&dir);
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

/// `memscope check ... | head`: a closed pipe cuts the report, not the verdict. The exit code is
/// still the check's (1 for a failed gate, so `set -o pipefail` still fails the job), nothing is
/// said about the pipe, and under GitHub Actions the annotations still reach stderr.
#[test]
fn check_into_a_closed_pipe_keeps_its_verdict() {
    let closed = |file: &str, format: &str, gha: bool| {
        let mut c = bin();
        c.args(["check", "--no-config", "--format", format, &fixture(file)])
            .env_remove("GITHUB_ACTIONS")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if gha {
            c.env("GITHUB_ACTIONS", "true")
                .env_remove("GITHUB_STEP_SUMMARY");
        }
        let mut child = c.spawn().unwrap();
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    for format in ["text", "json", "junit"] {
        assert_eq!(
            closed("leak_oom.pickle", format, false),
            (Some(1), String::new()),
            "{format}: a failed check"
        );
        assert_eq!(
            closed("clean.pickle", format, false),
            (Some(0), String::new()),
            "{format}: a passed check"
        );
    }
    let (code, err) = closed("leak_oom.pickle", "text", true);
    assert_eq!(code, Some(1));
    assert!(
        err.starts_with("::error"),
        "annotations still written: {err}"
    );
    assert!(!err.contains("pipe"), "{err}");
}

/// A directory, a FIFO nobody writes to and a file without read permission, given to every
/// command that reads a capture: one line on stderr that names the file, exit 2. Root reads a
/// mode-000 file regardless, so under root the commands run as `nobody` (uid and gid 65534,
/// dropped in the child before `exec`): the permission check is then the kernel's, as for a user.
/// `nobody` may not reach the checkout (a clone in a private directory), so the binary and the
/// readable capture are copied into a world-readable directory under the system's temp dir.
#[test]
fn unreadable_inputs_get_one_line_naming_the_file() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let dir = std::env::temp_dir().join(format!("memscope-unreadable-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("captures.pickle")).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = dir.join("memscope");
    std::fs::copy(env!("CARGO_BIN_EXE_memscope"), &exe).unwrap();
    let clean = dir.join("clean.pickle");
    std::fs::copy(fixture("clean.pickle"), &clean).unwrap();
    for f in [&exe, &clean] {
        let mode = if *f == exe { 0o755 } else { 0o644 };
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let clean = clean.to_str().unwrap().to_string();
    let fifo = dir.join("fifo.pickle");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0);
    let locked = dir.join("locked.pickle");
    std::fs::copy(fixture("clean.pickle"), &locked).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let cases = [
        (
            dir.join("captures.pickle"),
            "is a directory, not a capture file",
        ),
        (
            fifo,
            "nothing came through for 300ms (a FIFO with no writer?)",
        ),
        (locked.clone(), "cannot read: Permission denied"),
    ];
    for (input, why) in &cases {
        let input = input.to_str().unwrap();
        for args in [
            vec!["analyze", input],
            vec![input],
            vec!["check", "--no-config", input],
            vec!["baseline", input, "-o", "-"],
            vec!["diff", &clean, input],
            vec!["whatif", input],
            vec!["flamegraph", input, "-o", "-"],
            vec!["report", input, "-o", "-"],
            vec!["export", input, "-o", "-"],
        ] {
            let mut c = Command::new(&exe);
            c.args(&args)
                .current_dir(&dir)
                .env("MEMSCOPE_PIPE_TIMEOUT", "0.3")
                .stdin(Stdio::null());
            if root {
                // SAFETY: only async-signal-safe calls between fork and exec.
                unsafe {
                    c.pre_exec(|| {
                        if libc::setgroups(0, std::ptr::null()) != 0
                            || libc::setgid(65534) != 0
                            || libc::setuid(65534) != 0
                        {
                            return Err(std::io::Error::last_os_error());
                        }
                        Ok(())
                    });
                }
            }
            let o = c.output().unwrap_or_else(|e| {
                panic!("{args:?}: cannot run {} as nobody: {e}", exe.display())
            });
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
            assert_eq!(
                err,
                format!("memscope: error: {input}: {why}{}\n", tail(why)),
                "{args:?}"
            );
            assert!(o.stdout.is_empty(), "{args:?}");
        }
    }
    // The file itself was fine: with permission it reads.
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (code, _, err) = run(&["analyze", locked.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// What follows each reason on its line.
fn tail(why: &str) -> &'static str {
    match why {
        w if w.contains("FIFO") => " (MEMSCOPE_PIPE_TIMEOUT sets the wait in seconds)",
        w if w.contains("Permission") => " (os error 13)",
        _ => "",
    }
}

/// `--rank N=FILE` numbers one capture; a summary of several inputs keeps its entries' ranks, and
/// the flag, doing nothing there, says so (once, naming the file), while the check still runs.
#[test]
fn rank_on_a_summary_of_several_inputs_says_it_does_nothing() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("rank_on_summary");
    std::fs::create_dir_all(&dir).unwrap();
    let two = dir.join("two.json");
    let one = dir.join("one.json");
    let (clean, leak) = (fixture("clean.pickle"), fixture("leak_val_no_grad.pickle"));
    let (code, _, err) = run(&["baseline", &clean, &leak, "-o", two.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = run(&["baseline", &clean, "-o", one.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    let arg = format!("3={}", two.display());
    let (code, out, err) = run(&["check", "--no-config", "--rank", &arg]);
    assert_eq!(code, Some(1), "the leak still fails: {out}");
    assert_eq!(
        err,
        format!(
            "memscope: note: --rank {arg} does nothing: that summary holds 2 inputs, which keep their own ranks\n"
        )
    );
    assert!(
        out.contains("\n     0 ") && out.contains("\n     1 "),
        "{out}"
    );
    assert!(!out.contains("\n     3 "), "{out}");
    // A one-input summary takes the rank: no note.
    let arg = format!("5={}", one.display());
    let (code, out, err) = run(&["check", "--no-config", "--rank", &arg, &leak]);
    assert!(err.is_empty(), "{err}");
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("\n     5 "), "{out}");
}

/// `-` as input and `-o -` as output are in each command's help where they work.
#[test]
fn help_says_where_dash_means_stdin_or_stdout() {
    for (cmd, stdin, stdout) in [
        ("analyze", true, false),
        ("whatif", true, false),
        ("flamegraph", true, true),
        ("report", true, true),
        ("export", true, true),
        ("baseline", false, true),
    ] {
        let (code, help, _) = run(&[cmd, "--help"]);
        assert_eq!(code, Some(0));
        assert_eq!(help.contains("`-` reads stdin"), stdin, "{cmd}: {help}");
        assert_eq!(help.contains("`-` for stdout"), stdout, "{cmd}: {help}");
    }
}
