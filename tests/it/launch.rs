//! A command's own peak RSS, measured from a small parent: the test binary run again as a
//! launcher.
//!
//! Why: `wait4`'s `ru_maxrss` counts what the child started with. Forked (std's `Command` with
//! a pre-exec hook, how the tests set `RLIMIT_AS`), the child is a copy of the test process and
//! its peak starts at the test process's resident set; vforked (no hook), the kernel carries
//! the test process's own peak over at `exec`. Either way, in the parallel suite, where the test
//! process holds tens of MB, a 64 MiB bound failed on a `memscope` that used 6 MiB (session 17:
//! 68,980,736 B read for `analyze /dev/zero`, 6,300 KiB alone). So [`run`] starts this test
//! binary again with only [`launch_entry`] selected and `MEMSCOPE_IT_LAUNCH` naming a spec
//! file: that fresh process (a few MB) forks the command, sets its limit, reaps it with
//! `wait4` and writes the outcome to a file. The command inherits the launcher's few MB, not
//! the suite's.
//!
//! The spec and the outcome are JSON files in a folder of the run's own; arguments, paths and
//! environment values travel as hex bytes, so any `OsStr` survives.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const VAR: &str = "MEMSCOPE_IT_LAUNCH";

/// What a measured run gave.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// The exit code, `None` when a signal ended it.
    pub(crate) code: Option<i32>,
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: String,
    /// The command's peak resident set (bytes), from `wait4` in the launcher.
    pub(crate) max_rss: u64,
    /// Wall-clock seconds, as the launcher timed them.
    pub(crate) secs: f64,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> OsString {
    let b: Vec<u8> = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect();
    OsString::from_vec(b)
}

fn hexed(v: &Value) -> OsString {
    unhex(v.as_str().unwrap())
}

/// Runs `cmd` (its program, arguments, environment changes and folder) through the launcher,
/// under an address-space limit when given, with `stdin` as its input (or none), killing it
/// past `timeout` (then this panics with its stderr).
pub(crate) fn run(
    cmd: &Command,
    as_limit: Option<u64>,
    stdin: Option<&[u8]>,
    timeout: Duration,
) -> Outcome {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "launch-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    if let Some(input) = stdin {
        std::fs::write(dir.join("stdin"), input).unwrap();
    }
    let envs: Vec<Value> = cmd
        .get_envs()
        .map(|(k, v)| json!([hex(k.as_bytes()), v.map(|v| hex(v.as_bytes()))]))
        .collect();
    let spec = json!({
        "program": hex(cmd.get_program().as_bytes()),
        "args": cmd.get_args().map(|a| hex(a.as_bytes())).collect::<Vec<_>>(),
        "envs": envs,
        "cwd": cmd.get_current_dir().map(|d| hex(d.as_os_str().as_bytes())),
        "as_limit": as_limit,
        "stdin": stdin.is_some(),
        "timeout_ms": timeout.as_millis() as u64,
    });
    std::fs::write(dir.join("spec.json"), spec.to_string()).unwrap();
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "launch::launch_entry", "--nocapture"])
        .args(["--test-threads", "1"])
        .env(VAR, &dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .status()
        .unwrap();
    assert!(status.success(), "the launcher failed: {status:?}");
    let out: Value =
        serde_json::from_slice(&std::fs::read(dir.join("outcome.json")).unwrap()).unwrap();
    let stderr = String::from_utf8_lossy(&std::fs::read(dir.join("stderr")).unwrap()).into_owned();
    if out["timed_out"].as_bool().unwrap() {
        panic!("{cmd:?} still running after {timeout:?}; stderr: {stderr}");
    }
    let o = Outcome {
        code: out["code"].as_i64().map(|c| c as i32),
        stdout: std::fs::read(dir.join("stdout")).unwrap(),
        stderr,
        max_rss: out["max_rss"].as_u64().unwrap(),
        secs: out["secs"].as_f64().unwrap(),
    };
    let _ = std::fs::remove_dir_all(&dir);
    o
}

/// The launcher's side: does nothing unless this process was started by [`run`].
#[test]
fn launch_entry() {
    let Some(dir) = std::env::var_os(VAR) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let spec: Value =
        serde_json::from_slice(&std::fs::read(dir.join("spec.json")).unwrap()).unwrap();
    let outcome = launch(&dir, &spec);
    std::fs::write(dir.join("outcome.json"), outcome.to_string()).unwrap();
}

#[allow(clippy::zombie_processes)] // reaped by wait4 below, which std's Child does not see
fn launch(dir: &Path, spec: &Value) -> Value {
    let mut cmd = Command::new(hexed(&spec["program"]));
    for a in spec["args"].as_array().unwrap() {
        cmd.arg(hexed(a));
    }
    for kv in spec["envs"].as_array().unwrap() {
        let k = hexed(&kv[0]);
        match kv[1].as_str() {
            Some(v) => cmd.env(&k, unhex(v)),
            None => cmd.env_remove(&k),
        };
    }
    if let Some(d) = spec["cwd"].as_str() {
        cmd.current_dir(unhex(d));
    }
    if let Some(limit) = spec["as_limit"].as_u64() {
        // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let r = libc::rlimit {
                    rlim_cur: limit,
                    rlim_max: limit,
                };
                if libc::setrlimit(libc::RLIMIT_AS, &r) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let file = |name: &str| std::fs::File::create(dir.join(name)).unwrap();
    let input = if spec["stdin"].as_bool().unwrap() {
        Stdio::from(std::fs::File::open(dir.join("stdin")).unwrap())
    } else {
        Stdio::null()
    };
    let mut child = cmd
        .stdin(input)
        .stdout(file("stdout"))
        .stderr(file("stderr"))
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {:?}: {e}", OsStr::new(cmd.get_program())));
    let timeout = Duration::from_millis(spec["timeout_ms"].as_u64().unwrap());
    let pid = child.id() as libc::pid_t;
    let start = Instant::now();
    let mut status = 0;
    let mut timed_out = false;
    // SAFETY: zeroed rusage is a valid out-parameter.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: waits for our own child, with valid out-pointers.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break;
        }
        assert!(r == 0, "wait4 failed");
        if start.elapsed() > timeout {
            timed_out = true;
            let _ = child.kill();
            // SAFETY: as above, now blocking until the killed child is gone.
            unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    json!({
        "code": code,
        "max_rss": usage.ru_maxrss as u64 * 1024,
        "secs": start.elapsed().as_secs_f64(),
        "timed_out": timed_out,
    })
}

/// The launcher's own start is what a measured command inherits: a run of `memscope --version`
/// through it stays far under the tens of MB of a loaded test process.
#[test]
fn a_measured_command_starts_from_the_launcher_not_the_suite() {
    // Hold 96 MiB resident here, as a busy suite's process would.
    let ballast: Vec<u8> = vec![1u8; 96 << 20];
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_memscope"));
    cmd.arg("--version");
    let o = run(&cmd, Some(1 << 30), None, Duration::from_secs(60));
    assert_eq!(o.code, Some(0), "{o:?}");
    assert!(o.stdout.starts_with(b"memscope "), "{o:?}");
    assert!(o.max_rss < 32 << 20, "peak RSS {} B", o.max_rss);
    assert!(std::hint::black_box(&ballast).iter().all(|&b| b == 1));
}
