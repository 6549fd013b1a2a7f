//! Hostile and unlucky inputs and outputs, run through the binary as users run it: every one
//! ends with exit 2 and a one-line error naming the file, within a bounded peak RSS under an
//! address-space limit (`setrlimit(RLIMIT_AS)` in `pre_exec`, what `prlimit --as` does).
//!
//! The big inputs are cheap to make: the 3 GiB file is sparse, the gzip bomb is one small
//! member of zeros repeated (a gzip file may hold many), and a bomb is cut by the budget or by
//! the address-space limit long before it expands. FUZZING.md lists each case's peak memory.

use crate::common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const MIB: u64 = 1 << 20;

pub(crate) fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memscope"));
    c.env("NO_COLOR", "1").env_remove("GITHUB_ACTIONS");
    c
}

pub(crate) fn unit(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// A fresh folder for one test.
pub(crate) fn tmpdir(tag: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("bounded-{tag}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub(crate) use crate::launch::Outcome;

/// Runs `cmd` under an address-space limit (if any) and a wall-clock limit, measuring its own
/// peak RSS from a small launcher (see `launch`: a child of the test process itself starts
/// with the test process's pages counted).
pub(crate) fn run(cmd: Command, as_limit: Option<u64>, timeout: Duration) -> Outcome {
    crate::launch::run(&cmd, as_limit, None, timeout)
}

/// Exit 2, one line on stderr that names `file` and says `what`, and nothing on stdout.
pub(crate) fn assert_refused(o: &Outcome, file: &Path, what: &str) {
    let name = file.file_name().unwrap().to_string_lossy();
    assert_eq!(o.code, Some(2), "{o:?}");
    let line = o.stderr.trim_end();
    assert_eq!(line.lines().count(), 1, "one line: {line}");
    assert!(line.starts_with("memscope: error: "), "{line}");
    assert!(line.contains(&*name), "names {name}: {line}");
    assert!(line.contains(what), "says {what:?}: {line}");
    assert!(o.stdout.is_empty(), "nothing on stdout");
}

pub(crate) fn analyze(file: &Path) -> Command {
    let mut c = bin();
    c.arg("analyze").arg(file);
    c
}

/// `members` copies of a gzip member holding `chunk` zero bytes, after a member holding a
/// protocol-4 pickle header: a small file that expands to `members * chunk` bytes.
fn gzip_bomb(path: &Path, chunk: usize, members: usize) {
    let gz = |data: &[u8]| {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    };
    let zeros = gz(&vec![0u8; chunk]);
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    f.write_all(&gz(b"\x80\x04\x95")).unwrap();
    for _ in 0..members {
        f.write_all(&zeros).unwrap();
    }
    f.flush().unwrap();
}

#[test]
fn gzip_bomb_stops_at_the_budget_and_at_the_address_space_limit() {
    let dir = tmpdir("bomb");
    let bomb = dir.join("bomb.pickle.gz");
    // About 5 MB that expands to 5 GiB.
    gzip_bomb(&bomb, 8 << 20, 640);
    assert!(std::fs::metadata(&bomb).unwrap().len() < 16 * MIB);

    // The budget (lowered so the test decompresses little): checked while decompressing.
    let mut c = analyze(&bomb);
    c.env("MEMSCOPE_MAX_INPUT", "32MiB");
    let o = run(c, Some(1 << 30), Duration::from_secs(120));
    assert_refused(
        &o,
        &bomb,
        "expands to more than 32.0 MiB, over memscope's input limit",
    );
    assert!(o.max_rss < 128 * MIB, "peak RSS {}", o.max_rss);

    // The real 4 GiB budget under a 384 MiB address space: the buffer's growth is a
    // try_reserve, so the refusal is an error naming the file, not an abort.
    let o = run(analyze(&bomb), Some(384 * MIB), Duration::from_secs(300));
    assert_refused(&o, &bomb, "out of memory after reading");
    assert!(o.max_rss < 384 * MIB, "peak RSS {}", o.max_rss);
}

#[test]
fn a_gzip_trailer_that_lies_about_the_size_costs_no_memory() {
    let dir = tmpdir("isize");
    let raw = std::fs::read(unit("fixtures/clean.pickle")).unwrap();
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(&raw).unwrap();
    let mut gz = e.finish().unwrap();
    let n = gz.len();
    // ISIZE, the last 4 bytes, says 4 GiB - 16: only a hint, and a wrong one.
    gz[n - 4..].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    let p = dir.join("liar.pickle.gz");
    std::fs::write(&p, &gz).unwrap();
    // Room for the 4 GiB reservation (address space only): none of it may become resident.
    let o = run(analyze(&p), Some(8 << 30), Duration::from_secs(60));
    assert_refused(&o, &p, "gzip stream is damaged");
    assert!(o.max_rss < 96 * MIB, "peak RSS {}", o.max_rss);
}

#[test]
fn none_opcode_pickle_stops_at_the_stack_limit_or_its_memory() {
    let dir = tmpdir("none");
    let p = dir.join("nones.pickle");
    let mut data = b"\x80\x04".to_vec();
    data.resize(2 + (20 << 20), b'N');
    data.push(b'.');
    std::fs::write(&p, &data).unwrap();
    // Room for the 2^24-value stack (512 MiB): the limit, checked before the growth.
    let o = run(analyze(&p), Some(1 << 30), Duration::from_secs(120));
    assert_refused(
        &o,
        &p,
        "limit exceeded: values on the pickle stack (limit 16777216)",
    );
    assert!(o.max_rss < 768 * MIB, "peak RSS {}", o.max_rss);
    // No room: the growth is refused with an error, not an abort.
    let o = run(analyze(&p), Some(200 * MIB), Duration::from_secs(120));
    assert_refused(
        &o,
        &p,
        "out of memory: values on the pickle stack would need",
    );
    assert!(o.max_rss < 200 * MIB, "peak RSS {}", o.max_rss);
}

#[test]
fn sparse_file_with_a_pickle_header_reserves_nothing_it_cannot_have() {
    let dir = tmpdir("sparse");
    let p = dir.join("sparse.pickle");
    let mut f = std::fs::File::create(&p).unwrap();
    f.write_all(b"\x80\x04\x95").unwrap();
    f.set_len(3 << 30).unwrap();
    drop(f);
    let o = run(analyze(&p), Some(4 << 30), Duration::from_secs(60));
    assert_refused(&o, &p, "unknown pickle opcode 0x00");
    assert!(o.max_rss < 128 * MIB, "peak RSS {}", o.max_rss);
    // Past 4 GiB there is no ceiling (issue 43): the file is mapped and read under an address
    // space of twice the file plus 2 GB, and ends in the same one-line error.
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(5 << 30).unwrap();
    drop(f);
    let o = run(
        analyze(&p),
        Some(2 * (5 << 30) + 2_000_000_000),
        Duration::from_secs(60),
    );
    assert_refused(&o, &p, "unknown pickle opcode 0x00");
    assert!(o.max_rss < 128 * MIB, "peak RSS {}", o.max_rss);
    let _ = std::fs::remove_file(&p);
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

#[test]
fn fifo_without_a_writer_gives_up_after_the_timeout() {
    let dir = tmpdir("fifo");
    let fifo = dir.join("capture.pickle");
    mkfifo(&fifo);
    let mut cmd = analyze(&fifo);
    cmd.env("MEMSCOPE_PIPE_TIMEOUT", "0.3");
    let o = run(cmd, Some(1 << 30), Duration::from_secs(30));
    assert_refused(&o, &fifo, "a FIFO with no writer?");
    // The same as a baseline.
    let mut cmd = bin();
    cmd.env("MEMSCOPE_PIPE_TIMEOUT", "0.3")
        .args(["check", "--no-config", "--baseline"])
        .arg(&fifo)
        .arg(unit("fixtures/clean.pickle"));
    let o = run(cmd, Some(1 << 30), Duration::from_secs(30));
    assert_refused(&o, &fifo, "nothing came through for 300ms");
}

#[test]
fn devices_and_directories_are_refused_at_once() {
    let zero = Path::new("/dev/zero");
    for dev in ["/dev/zero", "/dev/urandom"] {
        let o = run(
            analyze(Path::new(dev)),
            Some(1 << 30),
            Duration::from_secs(30),
        );
        assert_refused(&o, Path::new(dev), "is a device, not a capture file");
        assert!(o.max_rss < 64 * MIB, "peak RSS {}", o.max_rss);
    }
    let mut cmd = bin();
    cmd.args(["check", "--no-config", "--baseline"])
        .arg(zero)
        .arg(unit("fixtures/clean.pickle"));
    let o = run(cmd, Some(1 << 30), Duration::from_secs(30));
    assert_refused(&o, zero, "is a device");
    let mut cmd = bin();
    cmd.args(["baseline", "/dev/zero", "-o", "-"]);
    let o = run(cmd, Some(1 << 30), Duration::from_secs(30));
    assert_refused(&o, zero, "is a device");

    let dir = tmpdir("dir");
    let o = run(analyze(&dir), None, Duration::from_secs(30));
    assert_refused(&o, &dir, "is a directory, not a capture file");
}

#[test]
fn a_pipe_is_read_and_reports_its_bytes() {
    let file = unit("fixtures/clean.pickle");
    let len = std::fs::metadata(&file).unwrap().len();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "cat '{}' | '{}' analyze --format json -",
            file.display(),
            env!("CARGO_BIN_EXE_memscope")
        ))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v = common::envelope::data(&out.stdout);
    assert_eq!(v["input"]["bytes"], len);
    assert_eq!(v["input"]["kind"], "snapshot");
    // Over the budget, through a pipe.
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "cat '{}' | MEMSCOPE_MAX_INPUT=64KiB '{}' analyze -",
            file.display(),
            env!("CARGO_BIN_EXE_memscope")
        ))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("-: the input is more than 64.0 KiB"), "{err}");
}

/// A copy of a real capture in `dir`, with its bytes.
fn capture_in(dir: &Path) -> (PathBuf, Vec<u8>) {
    let bytes = std::fs::read(unit("fixtures/clean.pickle")).unwrap();
    let p = dir.join("run.pickle");
    std::fs::write(&p, &bytes).unwrap();
    (p, bytes)
}

#[test]
fn outputs_that_are_the_input_by_another_name_are_refused() {
    let dir = tmpdir("links");
    let (cap, bytes) = capture_in(&dir);
    let hard = dir.join("out.html");
    std::fs::hard_link(&cap, &hard).unwrap();
    let soft = dir.join("soft.json");
    std::os::unix::fs::symlink(&cap, &soft).unwrap();
    for out in [&hard, &soft] {
        for cmd in ["flamegraph", "report", "export"] {
            let mut c = bin();
            c.arg(cmd).arg(&cap).arg("-o").arg(out);
            let o = run(c, None, Duration::from_secs(60));
            assert_refused(&o, out, "refusing to overwrite the input file");
            assert_eq!(
                std::fs::read(&cap).unwrap(),
                bytes,
                "{cmd} left the capture alone"
            );
        }
        // `baseline FILE -o FILE` (by another name, and by the same name).
        for target in [out.as_path(), cap.as_path()] {
            let mut c = bin();
            c.arg("baseline").arg(&cap).arg("-o").arg(target);
            let o = run(c, None, Duration::from_secs(60));
            assert_refused(&o, target, "refusing to overwrite the input file");
            assert_eq!(std::fs::read(&cap).unwrap(), bytes);
        }
    }
    // No temporary file was left behind.
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
}

#[test]
fn concurrent_writers_never_mix_their_bytes() {
    let dir = tmpdir("concurrent");
    let (cap, _) = capture_in(&dir);
    let out = dir.join("trace.json");
    for round in 0..6 {
        let spawn = || {
            bin()
                .arg("export")
                .arg(&cap)
                .arg("-o")
                .arg(&out)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (a, b) = (spawn(), spawn());
        for c in [a, b] {
            let o = c.wait_with_output().unwrap();
            assert_eq!(o.status.code(), Some(0), "{o:?}");
        }
        let text = std::fs::read(&out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&text)
            .unwrap_or_else(|e| panic!("round {round}: the output is not one whole JSON: {e}"));
        assert!(v["traceEvents"].as_array().is_some_and(|a| !a.is_empty()));
    }
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "no temporary file left: {names:?}");
}

#[test]
fn a_file_cut_short_while_it_is_read_is_reported() {
    let dir = tmpdir("shrink");
    // A valid pickle that takes a while to decode: MARK, 999 NONEs, POP_MARK, many times.
    let mut block = vec![b'('];
    block.extend(std::iter::repeat_n(b'N', 999));
    block.push(b'1');
    let mut data = b"\x80\x04".to_vec();
    for _ in 0..40_000 {
        data.extend_from_slice(&block);
    }
    data.extend_from_slice(b"N.");
    let p = dir.join("redumped.pickle");
    let mut seen = Vec::new();
    for delay_ms in [150u64, 400, 1000, 2500] {
        std::fs::write(&p, &data).unwrap();
        let mut c = analyze(&p);
        c.stdout(Stdio::null()).stderr(Stdio::piped());
        let child = c.spawn().unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        // What a training job re-dumping the snapshot does first: truncate it.
        let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        f.set_len(4096).unwrap();
        drop(f);
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.code().is_some(), "killed by a signal: {o:?}");
        if err.contains("the file changed while it was read") {
            assert_eq!(o.status.code(), Some(2));
            assert_eq!(err.trim_end().lines().count(), 1, "{err}");
            assert!(err.contains("redumped.pickle"), "{err}");
            return;
        }
        // Truncated before memscope opened it, or read whole before the cut: try later.
        assert_eq!(o.status.code(), Some(2), "{err}");
        seen.push(err);
    }
    panic!("never caught the file changing: {seen:?}");
}

#[test]
fn write_errors_name_the_output_and_dash_is_stdout() {
    let dir = tmpdir("outputs");
    let (cap, _) = capture_in(&dir);
    let mut c = bin();
    c.arg("export").arg(&cap).args(["-o", "/dev/full"]);
    let o = run(c, None, Duration::from_secs(60));
    assert_refused(
        &o,
        Path::new("/dev/full"),
        "/dev/full: cannot write: No space left",
    );

    for cmd in ["export", "flamegraph", "report", "baseline"] {
        let mut c = bin();
        c.current_dir(&dir).arg(cmd).arg(&cap).args(["-o", "-"]);
        let o = run(c, None, Duration::from_secs(60));
        assert_eq!(o.code, Some(0), "{cmd}: {o:?}");
        assert!(o.stdout.len() > 100, "{cmd} wrote to stdout");
        assert!(!dir.join("-").exists(), "{cmd} made a file named -");
    }
}

#[test]
fn a_closed_pipe_on_stdout_ends_quietly_for_every_format() {
    let cap = unit("fixtures/clean.pickle");
    let cases: Vec<Vec<&str>> = vec![
        vec!["analyze", "--format", "json"],
        vec!["analyze", "--format", "text"],
        vec!["export", "-o", "-"],
        vec!["report", "-o", "-"],
        vec!["check", "--no-config", "--format", "json"],
        vec!["check", "--no-config", "--format", "junit"],
    ];
    for args in cases {
        let mut c = bin();
        c.args(&args)
            .arg(&cap)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
        assert!(!err.contains("error"), "{args:?}: {err}");
    }
}

#[test]
fn a_malformed_config_is_one_line() {
    let dir = tmpdir("config");
    let cfg = dir.join("memscope.toml");
    std::fs::write(&cfg, "[check\nmax_peak = 3\n").unwrap();
    let mut c = bin();
    c.arg("check")
        .arg("--config")
        .arg(&cfg)
        .arg(unit("fixtures/clean.pickle"));
    let o = run(c, None, Duration::from_secs(60));
    assert_refused(&o, &cfg, "line 1, column 7: unclosed table");
}

#[test]
fn stdin_redirected_from_the_capture_is_the_input_too() {
    // `memscope export - -o run.pickle < run.pickle`: stdin is the capture itself (same
    // device and inode), so writing `-o` there would replace the only copy with its JSON.
    let dir = tmpdir("stdin-same");
    let (cap, bytes) = capture_in(&dir);
    let hard = dir.join("also.pickle");
    std::fs::hard_link(&cap, &hard).unwrap();
    for (cmd, out) in [
        ("export", &cap),
        ("report", &hard),
        ("flamegraph", &cap),
        ("baseline", &hard),
    ] {
        let mut c = bin();
        c.arg(cmd).arg("-").arg("-o").arg(out);
        let c = c
            .stdin(std::fs::File::open(&cap).unwrap())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&c.stderr);
        assert_eq!(c.status.code(), Some(2), "{cmd}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{cmd}: {err}");
        assert!(
            err.contains("refusing to overwrite the input file -"),
            "{cmd}: {err}"
        );
        assert_eq!(
            std::fs::read(&cap).unwrap(),
            bytes,
            "{cmd} kept the capture"
        );
    }
    // Piped (a pipe is not the file): the output is written, and a hard link of the capture
    // named as -o is replaced by the output, the capture left alone.
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "cat '{}' | '{}' export - -o '{}'",
            cap.display(),
            env!("CARGO_BIN_EXE_memscope"),
            hard.display()
        ))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(std::fs::read(&cap).unwrap(), bytes);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&hard).unwrap()).unwrap();
    assert!(v["traceEvents"].as_array().is_some_and(|a| !a.is_empty()));
}

#[test]
fn an_output_that_is_a_symbolic_link_is_written_through() {
    // `-o latest.json` where latest.json -> runs/real.json: the file the link points to gets
    // the output (as a shell's `>` would do), the link stays a link, nothing is left beside.
    let dir = tmpdir("symlink-out");
    let (cap, _) = capture_in(&dir);
    std::fs::create_dir(dir.join("runs")).unwrap();
    let link = dir.join("latest.json");
    std::os::unix::fs::symlink("runs/real.json", &link).unwrap();
    for round in 0..2 {
        // Round 0: the target does not exist yet (a dangling link); round 1: it does.
        let mut c = bin();
        c.arg("export").arg(&cap).arg("-o").arg(&link);
        let o = run(c, None, Duration::from_secs(60));
        assert_eq!(o.code, Some(0), "round {round}: {o:?}");
        let m = std::fs::symlink_metadata(&link).unwrap();
        assert!(m.file_type().is_symlink(), "round {round}: the link stays");
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("runs/real.json")).unwrap()).unwrap();
        assert!(v["traceEvents"].as_array().is_some_and(|a| !a.is_empty()));
    }
    let names = |d: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(&dir), ["latest.json", "run.pickle", "runs"]);
    assert_eq!(names(&dir.join("runs")), ["real.json"]);
    // A link to the capture is still the capture.
    let to_cap = dir.join("cap-link.json");
    std::os::unix::fs::symlink("run.pickle", &to_cap).unwrap();
    let mut c = bin();
    c.arg("export").arg(&cap).arg("-o").arg(&to_cap);
    let o = run(c, None, Duration::from_secs(60));
    assert_refused(&o, &to_cap, "refusing to overwrite the input file");
}

#[test]
fn a_gzip_capture_rewritten_after_it_was_decompressed_is_not_a_change() {
    // The compressed bytes are done with once decompressed: a training job writing its next
    // dump over the file then does not make the load fail (it did: the size and mtime were
    // compared only at the end of the analysis). A change before that still counts.
    let dir = tmpdir("gz-rewrite");
    let raw = std::fs::read(unit("fixtures/clean.pickle")).unwrap();
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(&raw).unwrap();
    let gz = e.finish().unwrap();
    let p = dir.join("dump.pickle.gz");
    std::fs::write(&p, &gz).unwrap();
    let input = memscope::load::input::read(&p).unwrap();
    assert_eq!(&input[..], &raw[..]);
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(&p, &gz[..gz.len() / 2]).unwrap();
    let r = input.settle(&p, memscope::load::snapshot_from_bytes(&p, &input));
    let snap = r.unwrap_or_else(|e| panic!("decompressed before the rewrite: {e}"));
    assert!(!snap.devices.is_empty());

    // Uncompressed, the map is the data: the same rewrite is "the file changed".
    let p = dir.join("dump.pickle");
    std::fs::write(&p, &raw).unwrap();
    let input = memscope::load::input::read(&p).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(raw.len() as u64 + 1).unwrap();
    drop(f);
    let r = input.settle(&p, Ok(()));
    assert!(
        matches!(r, Err(memscope::load::LoadError::Changed { .. })),
        "{:?}",
        r.err().map(|e| e.to_string())
    );
}

#[test]
fn piped_input_reports_its_bytes_in_the_html_report() {
    let file = unit("fixtures/clean.pickle");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "cat '{}' | '{}' report - -o -",
            file.display(),
            env!("CARGO_BIN_EXE_memscope")
        ))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let html = String::from_utf8_lossy(&out.stdout);
    // The sub-title names the input, its kind and its size: 195,722 bytes, not 0 B.
    let sub = html
        .split("<div class=sub>")
        .nth(1)
        .and_then(|s| s.split("</div>").next())
        .unwrap_or_default();
    assert!(sub.contains("- · snapshot · 191.1 KiB"), "{sub}");
}

/// A sparse file holding `pickle` with its first `needle` (a protocol-4 SHORT_BINUNICODE
/// `str`) replaced by a BINUNICODE of `n` zero bytes, which take no disk.
fn sparse_with_huge_str(path: &Path, pickle: &[u8], needle: &[u8], n: u32) {
    let i = pickle
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("the needle");
    let mut head = pickle[..i].to_vec();
    head.push(b'X');
    head.extend_from_slice(&n.to_le_bytes());
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(&head).unwrap();
    use std::io::Seek;
    f.seek(std::io::SeekFrom::Start(head.len() as u64 + n as u64))
        .unwrap();
    f.write_all(&pickle[i + needle.len()..]).unwrap();
}

#[test]
fn a_gigabyte_string_in_a_snapshot_is_never_copied_whole() {
    // A 3 GiB file (sparse) where a frame's file name, or the top-level dict's key, is one
    // 3 GiB string: copied into the model (twice, by the interner) or into the error message,
    // it aborted under a 4 GiB address-space limit ("memory allocation of 3221221376 bytes
    // failed", signal 6). Such strings are cut at 64 KiB now.
    let dir = tmpdir("hugestr");
    let n = (3u32 << 30) - 4096;
    let real = std::fs::read(unit("fixtures/clean.pickle")).unwrap();
    let p = dir.join("name.pickle");
    sparse_with_huge_str(&p, &real, b"\x8c\x14fixtures/generate.py", n);
    let mut c = bin();
    c.args(["analyze", "--format", "json"]).arg(&p);
    let o = run(c, Some(4 << 30), Duration::from_secs(120));
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(o.max_rss < 256 * MIB, "peak RSS {}", o.max_rss);
    let v = common::envelope::data(&o.stdout);
    let len = std::fs::metadata(&p).unwrap().len();
    assert_eq!(v["input"]["bytes"].as_u64(), Some(len));
    assert!(
        o.stdout.len() < 4 << 20,
        "names cut: {} bytes",
        o.stdout.len()
    );
    let _ = std::fs::remove_file(&p);

    // The top-level dict's only key: the error describes the dict by its first characters.
    let p = dir.join("key.pickle");
    sparse_with_huge_str(&p, b"\x80\x04}\x8c\x01kNs.", b"\x8c\x01k", n);
    let o = run(analyze(&p), Some(4 << 30), Duration::from_secs(120));
    assert_refused(&o, &p, "the pickle holds dict with keys [");
    assert!(o.max_rss < 256 * MIB, "peak RSS {}", o.max_rss);
    let _ = std::fs::remove_file(&p);
}

#[test]
fn a_huge_name_in_a_trace_is_never_copied_whole() {
    // An op named by 256 MiB of text: the model interned it (two copies), which needed more
    // than a 400 MiB address space holds and aborted; names are cut at 64 KiB now.
    let dir = tmpdir("hugename");
    let p = dir.join("name.trace.json");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&p).unwrap());
    f.write_all(br#"{"traceEvents":[{"ph":"X","cat":"cpu_op","name":""#)
        .unwrap();
    let chunk = vec![b'a'; 1 << 20];
    for _ in 0..256 {
        f.write_all(&chunk).unwrap();
    }
    f.write_all(
        br#"","pid":1,"tid":1,"ts":1,"dur":2,"args":{}},{"ph":"i","cat":"cpu_instant_event","name":"[memory]","pid":1,"tid":1,"ts":1,"s":"t","args":{"Addr":1,"Bytes":512,"Total Allocated":512,"Total Reserved":2097152,"Device Id":0,"Device Type":1}}]}"#,
    )
    .unwrap();
    f.flush().unwrap();
    drop(f);
    let o = run(analyze(&p), Some(400 * MIB), Duration::from_secs(120));
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("(trace, 256.0 MiB"),
        "{}",
        String::from_utf8_lossy(&o.stdout[..o.stdout.len().min(300)])
    );
    let _ = std::fs::remove_file(&p);
}
