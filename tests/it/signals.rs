//! Signals (issue 24): the TUI killed by SIGTERM, SIGHUP, SIGQUIT or SIGINT gives the terminal
//! back (no alternate screen, no mouse tracking, cursor shown, cooked mode); `memscope run`
//! passes SIGTERM and SIGINT on to its program's process group, waits for it and removes its
//! temporary directory; a `-o` write cut by a signal leaves no temporary file.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_memscope")
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("signals-{tag}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn wait_until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn alive(pid: i32) -> bool {
    // A zombie counts as gone: it has ended, only its parent has not read its status yet.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

fn kill(pid: i32, sig: libc::c_int) {
    // SAFETY: a signal to a process this test started.
    unsafe { libc::kill(pid, sig) };
}

/// The children of `pid` (from /proc).
fn children(pid: u32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        .collect()
}

#[test]
fn run_passes_sigterm_and_sigint_to_the_program_group_and_cleans_up() {
    for (sig, name) in [(libc::SIGTERM, "term"), (libc::SIGINT, "int")] {
        let dir = temp_dir(&format!("run-{name}"));
        let pids = dir.join("pids");
        // A program with a worker in its process group (a background job of the shell).
        let script = format!(
            "sleep 30 & echo $$ $! > '{}.tmp' && mv '{0}.tmp' '{0}'; wait",
            pids.display()
        );
        let mut child = Command::new(bin())
            .args(["run", "-o"])
            .arg(dir.join("out"))
            .args(["--", "sh", "-c", &script])
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_until("the program", Duration::from_secs(20), || pids.exists());
        let text = std::fs::read_to_string(&pids).unwrap();
        let ids: Vec<i32> = text
            .split_whitespace()
            .map(|s| s.parse().unwrap())
            .collect();
        let boot: Vec<PathBuf> = std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(&format!("memscope-run-{}-", child.id()))
            })
            .collect();
        assert_eq!(
            boot.len(),
            1,
            "the recorder's directory exists while it runs"
        );
        kill(child.id() as i32, sig);
        let t = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "memscope run still waits"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(
            status.code(),
            Some(128 + sig),
            "the program's status, as a shell says it"
        );
        // The program ends; so does its worker on SIGTERM (a non-interactive shell starts
        // background jobs with SIGINT ignored, so on SIGINT only the shell is asked of).
        let watched = if sig == libc::SIGTERM {
            &ids[..]
        } else {
            &ids[..1]
        };
        for &p in watched {
            wait_until("the program's group to end", Duration::from_secs(5), || {
                !alive(p)
            });
        }
        kill(ids[1], libc::SIGKILL);
        assert!(!boot[0].exists(), "{} left behind", boot[0].display());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn a_signal_during_an_o_write_leaves_no_temporary_file() {
    if Command::new("python3").arg("-V").output().is_err() {
        println!("SKIP: python3 is not installed (it makes the input)");
        return;
    }
    let dir = temp_dir("o-write");
    let input = dir.join("big.pickle");
    let ok = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/crafted_inputs.py"))
        .args(["segments", "20000"])
        .arg(&input)
        .arg("3000000")
        .status()
        .unwrap();
    assert!(ok.success());
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let mut child = Command::new(bin())
        .arg("export")
        .arg(&input)
        .arg("-o")
        .arg(out.join("trace.json"))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let tmp_seen = || {
        std::fs::read_dir(&out)
            .unwrap()
            .filter_map(Result::ok)
            .any(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
    };
    let t = Instant::now();
    while !tmp_seen() {
        if child.try_wait().unwrap().is_some() || t.elapsed() > Duration::from_secs(60) {
            println!("SKIP: the export ended before its temporary file could be seen");
            let _ = std::fs::remove_dir_all(&dir);
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    kill(child.id() as i32, libc::SIGTERM);
    let status = child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
    // No temporary file; the output itself only if the signal came after its rename (whole).
    let left: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "trace.json")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

struct Tmux(String);

impl Tmux {
    fn cmd(&self, args: &[&str]) -> String {
        let o = Command::new("tmux")
            .args(["-L", &self.0])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.0, "kill-server"])
            .output();
    }
}

#[test]
fn the_tui_gives_the_terminal_back_on_every_fatal_signal() {
    if Command::new("tmux").arg("-V").output().is_err() {
        println!("SKIP: tmux is not installed (apt-get install -y tmux to run this test)");
        return;
    }
    let fixture = format!("{}/fixtures/clean.pickle", env!("CARGO_MANIFEST_DIR"));
    for (sig, name) in [
        (libc::SIGTERM, "TERM"),
        (libc::SIGHUP, "HUP"),
        (libc::SIGQUIT, "QUIT"),
        (libc::SIGINT, "INT"),
    ] {
        let t = Tmux(format!("memscope-sig-{name}-{}", std::process::id()));
        // Under a plain `sh` (no job control): what the terminal is left in is what memscope left.
        let script = format!(
            "'{}' tui '{fixture}'; echo \"exited $?\"; stty -a | tr ' ' '\\n' | grep -x -- '-\\?icanon'; sleep 60",
            bin()
        );
        t.cmd(&[
            "new-session",
            "-d",
            "-x",
            "100",
            "-y",
            "30",
            "-s",
            "s",
            "sh",
            "-c",
            &script,
        ]);
        let shell: u32 = t
            .cmd(&["display", "-p", "-t", "s", "#{pane_pid}"])
            .trim()
            .parse()
            .unwrap();
        let capture = || t.cmd(&["capture-pane", "-p", "-t", "s"]);
        wait_until("the TUI", Duration::from_secs(30), || {
            capture().contains("VERDICT")
        });
        let flags = t.cmd(&[
            "display",
            "-p",
            "-t",
            "s",
            "#{alternate_on} #{mouse_any_flag} #{cursor_flag}",
        ]);
        assert_eq!(flags.trim(), "1 1 0", "the TUI holds the terminal");
        let pid = children(shell)[0];
        kill(pid, sig);
        wait_until("memscope to end", Duration::from_secs(10), || {
            capture().contains("icanon")
        });
        let s = capture();
        assert!(s.contains(&format!("exited {}", 128 + sig)), "{name}: {s}");
        assert!(
            s.lines().any(|l| l.trim() == "icanon"),
            "{name}: raw mode left on:\n{s}"
        );
        let flags = t.cmd(&[
            "display",
            "-p",
            "-t",
            "s",
            "#{alternate_on} #{mouse_any_flag} #{cursor_flag}",
        ]);
        assert_eq!(
            flags.trim(),
            "0 0 1",
            "{name}: alternate screen, mouse tracking, cursor visible"
        );
    }
}

#[test]
fn run_in_an_interactive_shell_reads_the_terminal_and_keeps_job_control() {
    if Command::new("tmux").arg("-V").output().is_err()
        || Command::new("bash").arg("--version").output().is_err()
    {
        println!("SKIP: tmux or bash is not installed");
        return;
    }
    let t = Tmux(format!("memscope-sig-job-{}", std::process::id()));
    t.cmd(&[
        "new-session",
        "-d",
        "-x",
        "150",
        "-y",
        "40",
        "-s",
        "s",
        "bash",
        "--norc",
        "--noprofile",
        "-i",
    ]);
    let capture = || t.cmd(&["capture-pane", "-p", "-t", "s"]);
    let keys = |k: &str| {
        t.cmd(&["send-keys", "-t", "s", k]);
    };
    // As `wait_until`, showing the screen when it times out.
    let wait_until = |what: &str, limit: Duration, f: &dyn Fn() -> bool| {
        let start = Instant::now();
        while !f() {
            assert!(
                start.elapsed() < limit,
                "timed out waiting for {what}; the screen:\n{}",
                capture()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait_until("the shell's prompt", Duration::from_secs(20), &|| {
        capture().contains('#') || capture().contains('$')
    });
    let out = temp_dir("job").join("out");
    // The program reads the terminal (it is the foreground group), then sleeps.
    keys(&format!(
        "'{}' run -o '{}' -- sh -c 'echo ready-to-read$((1+1)); read x; echo got-$x; echo sleeping$((2+2)); sleep 30'",
        bin(),
        out.display()
    ));
    keys("Enter");
    wait_until("the program to start", Duration::from_secs(20), &|| {
        capture().contains("ready-to-read2")
    });
    keys("hello");
    keys("Enter");
    wait_until("the program to read", Duration::from_secs(20), &|| {
        capture().contains("got-hello")
    });
    wait_until("the program to sleep", Duration::from_secs(20), &|| {
        capture().contains("sleeping4")
    });
    std::thread::sleep(Duration::from_millis(300));
    // Ctrl-Z stops the job and gives the shell its prompt back; fg continues it.
    keys("C-z");
    wait_until("the job to stop", Duration::from_secs(20), &|| {
        capture().contains("Stopped")
    });
    keys("fg");
    keys("Enter");
    std::thread::sleep(Duration::from_millis(1500));
    // Ctrl-C ends the program; memscope reports and exits with its status.
    keys("C-c");
    wait_until("memscope to report", Duration::from_secs(20), &|| {
        capture().contains("exited with code 130")
    });
    keys("echo status-$?");
    keys("Enter");
    wait_until("the status", Duration::from_secs(20), &|| {
        capture().contains("status-130")
    });
}
