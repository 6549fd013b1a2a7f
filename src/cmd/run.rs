//! `memscope run -o DIR -- python train.py ARGS`: the user's program, unchanged, with the CUDA
//! allocator's history recorded and a snapshot written when an `OutOfMemoryError` escapes.
//!
//! The recording happens inside the program's Python processes, so this side only prepares them:
//! it writes the recorder (`python/memscope/_recorder.py`, embedded here so a binary installed
//! without the Python package works too) as `sitecustomize.py` into a fresh temporary directory,
//! puts that directory first on `PYTHONPATH` (the recorder runs any `sitecustomize` it hides),
//! passes the settings as `MEMSCOPE_*` variables, runs the command, and afterwards lists what the
//! processes wrote and the command to run next. The exit code is the program's.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::Context;

use crate::cmd::cli::{RecordStacks, RunArgs, SnapshotOn};

/// The recorder, written as `_memscope_recorder.py` beside the boot file.
const RECORDER: &str = include_str!("../../python/memscope/_recorder.py");

/// The boot file, written as `sitecustomize.py` for every Python the program starts: any
/// Python can parse it; it loads the recorder where the interpreter can run it, and otherwise
/// steps aside (runs the hidden `sitecustomize`, records nothing).
const BOOT: &str = include_str!("../../python/memscope/_boot.py");

/// The program runs in a process group of its own, which memscope makes the terminal's
/// foreground group while it runs (as a shell does for a job): Ctrl-C and Ctrl-\ reach the
/// program and its workers, not memscope. SIGTERM, SIGHUP, SIGINT or SIGQUIT sent to memscope
/// itself are passed on to that group (`memscope::signals`), and memscope waits for the program,
/// removes its temporary directory and reports as usual; the program is never orphaned.
struct ProgramGroup {
    /// The terminal (stdin) memscope handed to the program, if it had it.
    handed_terminal: std::cell::Cell<bool>,
}

impl ProgramGroup {
    /// Whether memscope's group holds the terminal (stdin): then the program's group gets it.
    fn in_foreground() -> bool {
        // SAFETY: isatty, tcgetpgrp and getpgrp only read.
        unsafe { libc::isatty(0) == 1 && libc::tcgetpgrp(0) == libc::getpgrp() }
    }

    /// For `Command::pre_exec`: the child makes its own group and, when memscope held the
    /// terminal, takes it before it runs anything (so it never reads the terminal from the
    /// background). The parent does the same after the spawn; whichever runs first wins.
    fn child_setup(foreground: bool) -> std::io::Result<()> {
        // SAFETY: setpgid, signal and tcsetpgrp are async-signal-safe; SIGTTOU's disposition is
        // put back before exec.
        unsafe {
            if libc::setpgid(0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if foreground {
                with_sigttou_ignored(|| libc::tcsetpgrp(0, libc::getpid()));
            }
        }
        Ok(())
    }

    /// After the spawn: the group is made (if the child has not yet), gets the terminal, and
    /// the signals go to it.
    fn start(pid: u32, foreground: bool) -> ProgramGroup {
        let pgid = pid as libc::pid_t;
        // SAFETY: setpgid on our own child; tcsetpgrp on stdin with SIGTTOU ignored meanwhile.
        unsafe {
            libc::setpgid(pgid, pgid);
            if foreground {
                with_sigttou_ignored(|| libc::tcsetpgrp(0, pgid));
            }
        }
        memscope::signals::forward_to_group(pgid);
        ProgramGroup {
            handed_terminal: std::cell::Cell::new(foreground),
        }
    }
}

/// Runs `f` with SIGTTOU ignored: a background group may then take the terminal back.
unsafe fn with_sigttou_ignored<T>(f: impl FnOnce() -> T) -> T {
    let old = libc::signal(libc::SIGTTOU, libc::SIG_IGN);
    let r = f();
    libc::signal(libc::SIGTTOU, old);
    r
}

impl ProgramGroup {
    /// Waits for the program to end. When it is stopped (Ctrl-Z reaches its group, the
    /// foreground one), memscope takes the terminal back and stops too, so the shell gets its
    /// prompt as it would for a program run without memscope; continued (`fg`), it hands the
    /// terminal over again and continues the program.
    fn wait(&self, pid: u32) -> std::io::Result<std::process::ExitStatus> {
        use std::os::unix::process::ExitStatusExt;
        let pgid = pid as libc::pid_t;
        loop {
            let mut status = 0;
            // SAFETY: waits for our own child.
            let r = unsafe { libc::waitpid(pgid, &mut status, libc::WUNTRACED) };
            if r < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if !libc::WIFSTOPPED(status) {
                return Ok(std::process::ExitStatus::from_raw(status));
            }
            // SAFETY: terminal hand-over as a shell does it; SIGSTOP stops this process until
            // SIGCONT; then the program's group is continued.
            unsafe {
                if self.handed_terminal.get() {
                    with_sigttou_ignored(|| libc::tcsetpgrp(0, libc::getpgrp()));
                }
                libc::raise(libc::SIGSTOP);
                // Continued in the foreground (`fg`, also of a job started in the background):
                // the program gets the terminal.
                let fg = Self::in_foreground();
                if fg {
                    with_sigttou_ignored(|| libc::tcsetpgrp(0, pgid));
                }
                self.handed_terminal.set(fg);
                libc::kill(-pgid, libc::SIGCONT);
            }
        }
    }
}

impl Drop for ProgramGroup {
    fn drop(&mut self) {
        memscope::signals::forward_to_group(0);
        if self.handed_terminal.get() {
            // SAFETY: gives the terminal back to memscope's own group.
            unsafe { with_sigttou_ignored(|| libc::tcsetpgrp(0, libc::getpgrp())) };
        }
    }
}

/// A temporary directory, removed when dropped.
struct BootDir(PathBuf);

impl BootDir {
    fn create() -> anyhow::Result<Self> {
        let base = std::env::temp_dir();
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = base.join(format!("memscope-run-{}-{nanos}", std::process::id()));
        std::fs::create_dir(&dir).with_context(|| {
            format!("{}: cannot create the recorder's directory", dir.display())
        })?;
        for (name, text) in [
            ("sitecustomize.py", BOOT),
            ("_memscope_recorder.py", RECORDER),
        ] {
            let file = dir.join(name);
            std::fs::write(&file, text)
                .with_context(|| format!("{}: cannot write the recorder", file.display()))?;
        }
        Ok(BootDir(dir))
    }
}

impl Drop for BootDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The environment the program gets on top of this process's.
pub fn recorder_env(
    args: &RunArgs,
    out_dir: &Path,
    boot: &Path,
    pythonpath: Option<OsString>,
) -> Vec<(&'static str, OsString)> {
    let mut path = OsString::from(boot);
    if let Some(old) = pythonpath.filter(|p| !p.is_empty()) {
        path.push(":");
        path.push(old);
    }
    let mut env = vec![
        ("PYTHONPATH", path),
        ("MEMSCOPE_RUN_DIR", out_dir.into()),
        (
            "MEMSCOPE_SNAPSHOT_ON",
            match args.snapshot_on {
                SnapshotOn::Oom => "oom",
                SnapshotOn::Exit => "exit",
                SnapshotOn::Both => "both",
            }
            .into(),
        ),
        ("MEMSCOPE_MAX_ENTRIES", args.max_entries.to_string().into()),
        (
            "MEMSCOPE_STACKS",
            match args.stacks {
                RecordStacks::Python => "python",
                RecordStacks::All => "all",
            }
            .into(),
        ),
    ];
    if let Some((a, b)) = args.profile_steps {
        env.push(("MEMSCOPE_PROFILE_STEPS", format!("{a}:{b}").into()));
    }
    if let Some(n) = args.max_steps {
        env.push(("MEMSCOPE_MAX_STEPS", n.to_string().into()));
    }
    env
}

/// The `memscope-*` files in `dir` and their modification times.
fn outputs(dir: &Path) -> HashMap<PathBuf, Option<SystemTime>> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return HashMap::new();
    };
    rd.filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            // The recorder's names: `memscope-KIND[-rankR][-pidP].pickle|json`, one extension.
            // A file the program writes beside them (`memscope-exit-rank0.truth.json`) is not one.
            let one_ext = |ext: &str| {
                name.strip_suffix(ext)
                    .is_some_and(|stem| !stem.contains('.'))
            };
            name.starts_with("memscope-") && (one_ext(".pickle") || one_ext(".json"))
        })
        .map(|e| (e.path(), e.metadata().and_then(|m| m.modified()).ok()))
        .collect()
}

pub fn run(args: &RunArgs) -> anyhow::Result<u8> {
    // Elsewhere `-o -` is stdout; here the output is a directory of files, one per rank and kind.
    if args.output.as_os_str() == "-" {
        anyhow::bail!(
            "-o -: memscope run writes its snapshots and traces (one file per rank) into a directory, not to stdout; give one, e.g. -o mem/"
        );
    }
    // The directory is made by the recorder when it writes a file: a command that does not
    // exist, or a program that never uses CUDA, leaves no empty directory behind.
    let out_dir = match std::fs::metadata(&args.output) {
        Ok(m) if !m.is_dir() => anyhow::bail!(
            "{}: exists and is not a directory (memscope run writes its files into a directory)",
            args.output.display()
        ),
        Ok(_) => std::fs::canonicalize(&args.output).with_context(|| {
            format!(
                "{}: cannot resolve the output directory",
                args.output.display()
            )
        })?,
        Err(_) => std::env::current_dir()
            .context("the current directory")?
            .join(&args.output),
    };
    let before = outputs(&out_dir);
    let boot = BootDir::create()?;
    let (program, rest) = args
        .command
        .split_first()
        .context("no command to run after `--`")?;
    let mut cmd = std::process::Command::new(program);
    cmd.args(rest);
    for (k, v) in recorder_env(args, &out_dir, &boot.0, std::env::var_os("PYTHONPATH")) {
        cmd.env(k, v);
    }
    let foreground = ProgramGroup::in_foreground();
    // SAFETY: the pre_exec hook only makes async-signal-safe calls.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(move || ProgramGroup::child_setup(foreground));
    }
    let status = {
        let child = cmd
            .spawn()
            .with_context(|| format!("{}: cannot run it", Path::new(program).display()))?;
        let group = ProgramGroup::start(child.id(), foreground);
        group.wait(child.id()).context("waiting for the program")?
    };
    let no_torch = pythons_without_torch(&boot.0);
    let used_cuda = boot_markers(&boot.0, "cuda-").len();
    drop(boot);
    let code = exit_code(&status);
    let mut written: Vec<PathBuf> = outputs(&out_dir)
        .into_iter()
        .filter(|(p, t)| before.get(p).is_none_or(|old| old != t))
        .map(|(p, _)| p)
        .collect();
    written.sort();
    eprint!(
        "{}",
        summary(&written, code, args.snapshot_on, &no_torch, used_cuda)
    );
    Ok(code)
}

/// The Pythons of the program that could not import torch (the recorder left a
/// `no-torch-PID` file holding the interpreter's path), sorted, without repeats.
fn pythons_without_torch(boot: &Path) -> Vec<String> {
    let mut v = boot_markers(boot, "no-torch-");
    v.sort();
    v.dedup();
    v
}

/// The contents of the recorder's marker files named `PREFIX<pid>` in the boot directory
/// (`cuda-PID` when a process first used CUDA, `no-torch-PID`), at most 4096 of them.
fn boot_markers(boot: &Path, prefix: &str) -> Vec<String> {
    std::fs::read_dir(boot)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .take(4096)
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .map(|s| s.trim().chars().take(500).collect())
        .collect()
}

/// The program's exit code, as a shell reports it (128+N for a signal N).
fn exit_code(status: &std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => (c & 0xff) as u8,
        (None, Some(sig)) => (128 + sig).min(255) as u8,
        _ => 1,
    }
}

/// What `memscope run` prints on stderr after the program ended.
pub fn summary(
    written: &[PathBuf],
    code: u8,
    on: SnapshotOn,
    no_torch: &[String],
    used_cuda: usize,
) -> String {
    let mut s = String::new();
    let shell = |p: &Path| shell_quote(&p.display().to_string());
    if written.is_empty() {
        let why = if !no_torch.is_empty() {
            format!(
                "torch cannot be imported by {}: run the program with a Python that has torch",
                no_torch.join(", ")
            )
        } else if code > 128 {
            // Killed by a signal: a killed process runs no exit handler, whatever the setting.
            format!(
                "it was killed by signal {} before it could write one; a killed process runs no exit handlers",
                code - 128
            )
        } else if used_cuda > 0 {
            // The recorder marked the process when it first used CUDA: it did, and ended
            // without running its exit hooks or without an OOM to dump.
            format!(
                "{used_cuda} process(es) used CUDA but wrote none: {}",
                match on {
                    SnapshotOn::Oom => "no OOM escaped them; --snapshot-on both also writes one at exit and at os._exit",
                    _ => "they ended without running exit hooks (a signal, or a hard exit the recorder could not see)",
                }
            )
        } else {
            match on {
                SnapshotOn::Oom =>
                    "no OutOfMemoryError escaped it, or it never used CUDA; --snapshot-on both also writes one at exit".to_owned(),
                _ => "it never used CUDA".to_owned(),
            }
        };
        s.push_str(&format!(
            "memscope: the program exited with code {code}; no snapshot was written ({why})\n"
        ));
        return s;
    }
    s.push_str(&format!(
        "memscope: the program exited with code {code}; written:\n"
    ));
    for p in written {
        s.push_str(&format!("  {}\n", p.display()));
    }
    let snapshots: Vec<&PathBuf> = written
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "pickle"))
        .collect();
    // Each process writes one snapshot at most; one that used CUDA and wrote none under
    // exit/both ended without its exit hooks: seen on two GPUs when NCCL failed on both ranks
    // and torchrun stopped rank 0 (SIGTERM) while rank 1's failure was reported first.
    let missing = used_cuda.saturating_sub(snapshots.len());
    if missing > 0 && on != SnapshotOn::Oom {
        s.push_str(&format!(
            "memscope: {missing} more process(es) used CUDA but wrote no snapshot: they ended without running exit hooks (a signal, e.g. torchrun stopping the other ranks after one failed, or a hard exit the recorder could not see)\n"
        ));
    }
    s.push_str("next:\n");
    for p in written {
        s.push_str(&format!("  memscope analyze {}\n", shell(p)));
    }
    if snapshots.len() > 1 {
        let all: Vec<String> = snapshots.iter().map(|p| shell(p)).collect();
        s.push_str(&format!(
            "  memscope check {}    # all ranks side by side\n",
            all.join(" ")
        ));
    }
    s
}

fn shell_quote(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two ranks used CUDA, one wrote its snapshot (the other was stopped by torchrun: the
    /// device41 `ncclx_cumemalloc` run): the summary says one more used CUDA and wrote none;
    /// with `--snapshot-on oom` a process without an OOM writes none, and nothing is said.
    #[test]
    fn processes_that_used_cuda_and_wrote_nothing_are_counted() {
        let written = [PathBuf::from("out/memscope-oom-rank1.pickle")];
        let s = summary(&written, 1, SnapshotOn::Both, &[], 2);
        assert!(
            s.contains("memscope: 1 more process(es) used CUDA but wrote no snapshot"),
            "{s}"
        );
        assert!(!summary(&written, 1, SnapshotOn::Oom, &[], 2).contains("more process"));
        assert!(!summary(&written, 1, SnapshotOn::Both, &[], 1).contains("more process"));
    }
}
