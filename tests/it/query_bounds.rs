//! `memscope query` bounded (issue 37): rows stream out as SQLite makes them, every statement
//! runs under time, rows and memory limits that end it with a typed error, sorts never spill to
//! disk, a cancel stops a statement, and every format goes through its output boundary. Each
//! hostile query runs through the binary under `prlimit --as=4000000000` (`setrlimit` in
//! `pre_exec`), with its peak RSS measured; FUZZING.md lists the figures before and after.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use memscope::query::render::{self, CsvOptions, CsvSink};
use memscope::query::{open_capture, Cancel, Cell, Limits, QueryError, ResultSet, Stop};

const AS_LIMIT: u64 = 4_000_000_000;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

use crate::launch::Outcome;

/// `memscope query FIXTURE ARGS...` under the address-space limit, with `stdin` given, its
/// own peak RSS measured from a small launcher (see `launch`).
fn query(file: &str, args: &[&str], stdin: Option<&str>, env: &[(&str, &Path)]) -> Outcome {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_memscope"));
    cmd.env("NO_COLOR", "1")
        .arg("query")
        .arg(fixture(file))
        .args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    crate::launch::run(
        &cmd,
        Some(AS_LIMIT),
        Some(stdin.unwrap_or_default().as_bytes()),
        Duration::from_secs(120),
    )
}

/// The envelope on stdout, parsed (it must be valid JSON, whatever stopped the query).
fn envelope(o: &Outcome) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&o.stdout[..o.stdout.len().min(2000)]),
            o.stderr
        )
    })
}

/// Exit 2, one typed error of `kind`, the document closed, and the last result `stopped`
/// by `limit` (when it is a limit).
fn stopped(o: &Outcome, kind: &str, limit: Option<&str>) -> serde_json::Value {
    let v = envelope(o);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert_eq!(v["errors"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["errors"][0]["kind"], kind, "{}", v["errors"]);
    if let Some(l) = limit {
        let last = v["data"]["results"].as_array().unwrap().last().unwrap();
        assert_eq!(last["stopped"]["limit"], l, "{}", last["stopped"]);
        assert_eq!(last["truncated"], true);
    }
    assert_eq!(
        o.stderr.lines().count(),
        1,
        "one line on stderr: {}",
        o.stderr
    );
    assert!(o.max_rss < 2_500_000_000, "peak RSS {} B", o.max_rss);
    v
}

/// Before: the whole result was held, and `SELECT * FROM live --format csv` aborted (134)
/// at 3.1 GB. Now the rows stream out, every one of them.
#[test]
fn rows_stream_out_in_every_format() {
    let db = open_capture(&fixture("leak_oom.pickle")).unwrap();
    let n = db.run("SELECT COUNT(*) FROM live", None).unwrap().rows[0][0].clone();
    let Cell::Int(n) = n else { panic!() };
    let o = query(
        "leak_oom.pickle",
        &["SELECT * FROM live", "--format", "csv"],
        None,
        &[],
    );
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(o.stdout.split(|&b| b == b'\n').count() as i64 - 2, n);
    let o = query(
        "leak_oom.pickle",
        &["SELECT * FROM live", "--format", "json"],
        None,
        &[],
    );
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let v = envelope(&o);
    assert_eq!(
        v["data"]["results"][0]["rows"].as_array().unwrap().len() as i64,
        n
    );
    assert_eq!(v["data"]["results"][0]["stopped"], serde_json::Value::Null);
    assert_eq!(v["errors"], serde_json::json!([]));
}

/// A self-join of `events` (13 M rows): the rows limit ends it, and the JSON is still one
/// closed envelope holding the rows made before, with a `limit` error.
#[test]
fn a_self_join_stops_at_the_rows_limit_with_a_closed_envelope() {
    let sql = "SELECT * FROM events a, events b";
    let o = query(
        "leak_oom.pickle",
        &[sql, "--format", "json", "--max-rows", "1000"],
        None,
        &[],
    );
    let v = stopped(&o, "limit", Some("rows"));
    assert_eq!(
        v["data"]["results"][0]["rows"].as_array().unwrap().len(),
        1000
    );
    assert_eq!(v["data"]["results"][0]["stopped"]["max"], 1000);
    // In CSV, the rows then the error on stderr.
    let o = query(
        "leak_oom.pickle",
        &[sql, "--format", "csv", "--max-rows", "10"],
        None,
        &[],
    );
    assert_eq!(o.code, Some(2));
    assert_eq!(o.stdout.split(|&b| b == b'\n').count(), 12);
    assert!(o.stderr.contains("more than 10 rows"), "{}", o.stderr);
}

/// An unbounded recursive CTE and a 3-way cross join ran forever; now the time limit ends
/// them, soon after it.
#[test]
fn endless_queries_stop_at_the_time_limit() {
    for sql in [
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c",
        "SELECT COUNT(*) FROM events a, events b, events c",
    ] {
        let o = query(
            "leak_oom.pickle",
            &[sql, "--format", "json", "--timeout", "1s"],
            None,
            &[],
        );
        let v = stopped(&o, "limit", Some("time"));
        assert_eq!(v["data"]["results"][0]["stopped"]["seconds"], 1.0);
        assert!(o.secs < 30.0, "{sql}: {} s", o.secs);
    }
}

/// `randomblob(9e8)` four times reached 3.4 GB; now one value past the value limit, or a
/// query past the memory limit, is a `limit` error.
#[test]
fn huge_values_and_memory_stop_at_the_memory_limit() {
    for sql in [
        "SELECT randomblob(9e8), randomblob(9e8), randomblob(9e8), randomblob(9e8)",
        "SELECT length(randomblob(9e8) || randomblob(9e8) || randomblob(9e8) || randomblob(9e8))",
        // Many values each under the value limit, held together by a sort.
        "SELECT x FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c \
         WHERE x < 100) SELECT randomblob(2e8) AS x FROM c) ORDER BY x",
    ] {
        let o = query(
            "leak_oom.pickle",
            &[sql, "--format", "json", "--max-memory", "512MiB"],
            None,
            &[],
        );
        stopped(&o, "limit", Some("memory"));
    }
}

/// A big `ORDER BY` wrote 6.3 GB of SQLite temp files in 30 s. Temp storage is now in
/// memory: with the temp directory unwritable, the sort still runs (to its time limit), and
/// a spill would have been an I/O error instead.
#[test]
fn sorts_never_spill_to_disk() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("query-no-spill");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut p = std::fs::metadata(&dir).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut p, 0o500);
    std::fs::set_permissions(&dir, p).unwrap();
    let env = [("SQLITE_TMPDIR", dir.as_path()), ("TMPDIR", dir.as_path())];
    let o = query(
        "leak_oom.pickle",
        &[
            "SELECT a.idx, b.idx FROM events a, events b ORDER BY random()",
            "--format",
            "json",
            "--timeout",
            "3s",
        ],
        None,
        &env,
    );
    let v = envelope(&o);
    let kind = &v["errors"][0]["kind"];
    assert_eq!(kind, "limit", "{v}");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    // A sort that fits completes, the directory still unwritable.
    let o = query(
        "leak_oom.pickle",
        &[
            "SELECT idx FROM events ORDER BY random()",
            "--format",
            "csv",
        ],
        None,
        &env,
    );
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    // The statement asking to spill is refused, as every setting is.
    let o = query(
        "leak_oom.pickle",
        &["PRAGMA temp_store = FILE", "--format", "json"],
        None,
        &[],
    );
    stopped(&o, "sql", None);
}

/// A cancel from another thread (what MCP `notifications/cancelled` does) stops the running
/// statement with `Stop::Cancelled`. The flag stays set until its owner clears it, so a cancel
/// that comes before a run (MCP's race between a cancel and the call's start) stops that run too.
#[test]
fn a_cancel_stops_the_running_statement() {
    let db = open_capture(&fixture("leak_oom.pickle")).unwrap();
    let cancel = Cancel::new();
    let c = cancel.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        c.cancel();
    });
    let start = Instant::now();
    let limits = Limits {
        timeout: None,
        ..Limits::default()
    };
    let r = db.run_with(
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c",
        None,
        &limits,
        &cancel,
    );
    t.join().unwrap();
    assert!(
        matches!(r, Err(QueryError::Stopped(Stop::Cancelled))),
        "{r:?}"
    );
    assert!(start.elapsed() < Duration::from_secs(20));
    let early = db.run_with(
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c",
        None,
        &limits,
        &cancel,
    );
    assert!(
        matches!(early, Err(QueryError::Stopped(Stop::Cancelled))),
        "{early:?}"
    );
    cancel.reset();
    let rs = db.run_with("SELECT 1", None, &limits, &cancel).unwrap();
    assert_eq!(rs.rows, vec![vec![Cell::Int(1)]]);
}

/// Ctrl-C in the prompt: with the prompt's registration, SIGINT raises the cancel flag and
/// memscope goes on; without it, SIGINT ends memscope as before.
#[test]
fn sigint_cancels_instead_of_ending_while_registered() {
    // As a shell starts a program (a test run under `nohup` would have SIGINT ignored, and
    // memscope leaves an ignored signal ignored).
    // SAFETY: setting the default action of one signal.
    unsafe { libc::signal(libc::SIGINT, libc::SIG_DFL) };
    memscope::signals::install();
    let cancel = Cancel::new();
    {
        let _r = memscope::signals::interrupt_to(cancel.flag().clone());
        // SAFETY: raising a signal whose handler only stores to an atomic.
        unsafe { libc::raise(libc::SIGINT) };
        assert!(cancel.is_cancelled());
    }
}

/// 2 M statements took quadratic time (SQLite copied the rest of the text for each one).
/// Now each is parsed in place: 200 000 statements run in about a second (BENCHMARKS.md has
/// the series).
#[test]
fn many_statements_run_in_one_pass() {
    let n = 200_000;
    let sql = "SELECT 1 AS a;".repeat(n);
    let o = query("leak_oom.pickle", &["--format", "csv"], Some(&sql), &[]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(o.stdout, "a\r\n1\r\n".repeat(n).into_bytes());
}

/// Strings with terminal escapes, and CSV formula cells, in every format.
#[test]
fn every_format_has_its_boundary() {
    let sql = "SELECT char(27) || ']0;pwned' || char(7) || char(27) || '[2J' AS f, \
               '=HYPERLINK(\"http://x\")' AS g, -5 AS n, '-5' AS t, char(155) || 'x' AS c1";
    // CSV to a file or a pipe: formulas defused, numbers not; escapes are data.
    let o = query("leak_oom.pickle", &[sql, "--format", "csv"], None, &[]);
    let out = String::from_utf8(o.stdout).unwrap();
    assert_eq!(
        out.lines().nth(1).unwrap(),
        "\u{1b}]0;pwned\u{7}\u{1b}[2J,\"'=HYPERLINK(\"\"http://x\"\")\",-5,'-5,\u{9b}x"
    );
    let o = query(
        "leak_oom.pickle",
        &[sql, "--format", "csv", "--csv-raw"],
        None,
        &[],
    );
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(
        out.contains(",\"=HYPERLINK(\"\"http://x\"\")\",-5,-5,"),
        "{out}"
    );
    // JSON: valid, the same strings once parsed, nothing raw a terminal acts on.
    let o = query("leak_oom.pickle", &[sql, "--format", "json"], None, &[]);
    let raw = String::from_utf8(o.stdout.clone()).unwrap();
    assert!(!raw.contains(['\u{1b}', '\u{7}', '\u{9b}']), "{raw}");
    let v = envelope(&o);
    assert_eq!(
        v["data"]["results"][0]["rows"][0][0],
        "\u{1b}]0;pwned\u{7}\u{1b}[2J"
    );
    // CSV on a terminal: through the terminal boundary (`script` gives the binary a pty).
    let bin = env!("CARGO_BIN_EXE_memscope");
    let cmdline = format!(
        "{bin} query {} \"$Q\" --format csv",
        fixture("leak_oom.pickle").display()
    );
    let o = Command::new("script")
        .args(["-qec", &cmdline, "/dev/null"])
        .env("Q", sql)
        .stdin(Stdio::null())
        .output();
    if let Some(o) = o.ok().filter(|o| o.status.success()) {
        let tty = String::from_utf8_lossy(&o.stdout);
        assert!(!tty.contains(['\u{1b}', '\u{7}', '\u{9b}']), "{tty:?}");
        assert!(tty.contains("\\x1b]0;pwned\\x07"), "{tty:?}");
    } else {
        eprintln!("skipped: no `script` to give the binary a terminal");
    }
    // The library's CSV sink, both options.
    let rs = ResultSet {
        columns: vec!["=c".into()],
        rows: vec![
            vec![Cell::from("@SUM(A1)")],
            vec![Cell::from("\tx")],
            vec![Cell::Int(-1)],
        ],
        truncated: false,
    };
    assert_eq!(render::csv(&rs), "'=c\r\n'@SUM(A1)\r\n'\tx\r\n-1\r\n");
    let mut raw = Vec::new();
    memscope::query::feed(
        &rs,
        &mut CsvSink::new(
            &mut raw,
            CsvOptions {
                raw: true,
                terminal: true,
            },
        ),
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(raw).unwrap(),
        "=c\n@SUM(A1)\n\"\tx\"\n-1\n"
    );
}

/// The smaller cases: `.tables --format json` is the envelope; an SQL error is kind `sql`,
/// said once; two dot-commands on stdin are two; an integer past 2^63 stays exact.
#[test]
fn dot_commands_errors_and_big_integers() {
    let o = query(
        "leak_oom.pickle",
        &[".tables", "--format", "json"],
        None,
        &[],
    );
    assert_eq!(o.code, Some(0));
    let v = envelope(&o);
    let rows = &v["data"]["results"][0]["rows"];
    assert!(
        rows.as_array()
            .unwrap()
            .contains(&serde_json::json!(["ooms"])),
        "{v}"
    );

    let o = query(
        "leak_oom.pickle",
        &["SELECT * FROM nowhere", "--format", "json"],
        None,
        &[],
    );
    let v = stopped(&o, "sql", None);
    let msg = v["errors"][0]["message"].as_str().unwrap();
    assert_eq!(msg.matches("no such table").count(), 1, "{msg}");
    assert_eq!(o.stderr.matches("no such table").count(), 1, "{}", o.stderr);
    // A syntax error's offset counts from the start of the whole text.
    let db = open_capture(&fixture("leak_oom.pickle")).unwrap();
    match db.run_all("SELECT 1; SELEC 2", None) {
        Err(QueryError::Sql(m)) => assert_eq!(m, "near \"SELEC\": syntax error (at byte 10)"),
        r => panic!("{r:?}"),
    }

    let o = query("leak_oom.pickle", &[], Some(".tables\n.schema ooms\n"), &[]);
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(
        out.starts_with("allocator\n") || out.contains("\nooms\n"),
        "{out}"
    );
    assert!(out.contains("CREATE TABLE ooms"), "{out}");

    // A crafted size of 2^64 - 1, in a copied table and through SQL arithmetic.
    let big = u64::MAX;
    assert_eq!(Cell::from(big), Cell::from("18446744073709551615"));
    let t = memscope::query::schema::table("sites").unwrap();
    let mut row: Vec<Cell> = t.columns.iter().map(|_| Cell::Null).collect();
    row[0] = Cell::from(big);
    let db = memscope::query::Db::open(
        vec![memscope::query::Filled::made("sites", vec![row])],
        false,
    )
    .unwrap();
    let rs = db
        .run(&format!("SELECT {} FROM sites", t.columns[0].name), None)
        .unwrap();
    assert_eq!(rs.rows, vec![vec![Cell::from("18446744073709551615")]]);
}

#[path = "../../fuzz/fuzz_targets/query_render_check.rs"]
mod query_render_check;

/// The `query_render` fuzz target's invariants over seeded random result sets, in every
/// `cargo test`: hostile characters (controls, C1, bidi, quotes, commas, formula starts)
/// drawn often.
/// `.tables` then `.schema ooms` on a trace (issue 42): a trace's database has no `ooms` table,
/// and the second command printed nothing, as if it had been dropped. It now says that the
/// table is a snapshot's, and `.schema` of a table the capture has still prints it.
#[test]
fn schema_of_a_table_the_capture_lacks_says_so() {
    let o = query(
        "trace_clean.trace.json.gz",
        &[],
        Some(".tables\n.schema ooms\n.schema steps\n"),
        &[],
    );
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let out = String::from_utf8(o.stdout).unwrap();
    let tables: Vec<&str> = out.lines().take_while(|l| !l.starts_with("--")).collect();
    assert!(!tables.contains(&"ooms"), "{out}");
    let after = &out[tables.iter().map(|l| l.len() + 1).sum::<usize>()..];
    assert!(after.starts_with("-- no table ooms"), "{out}");
    assert!(after.contains("snapshot"), "{out}");
    assert!(after.contains("CREATE TABLE steps"), "{out}");
    // A name no capture has.
    let o = query("leak_oom.pickle", &[], Some(".schema nope\n"), &[]);
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.starts_with("-- no table nope"), "{out}");
}

#[test]
fn renderers_keep_their_invariants_on_random_result_sets() {
    const PIECES: &[&str] = &[
        "a",
        "=",
        "+",
        "-",
        "@",
        "\t",
        "\r",
        "\n",
        "\r\n",
        ",",
        "\"",
        "'",
        " ",
        "\u{1b}",
        "\u{1b}]0;t\u{7}",
        "\u{9b}",
        "\u{202e}",
        "\u{2028}",
        "\u{7f}",
        "é",
        "::",
        "1",
    ];
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..3000 {
        let mut data = vec![next() as u8];
        for _ in 0..next() % 12 {
            let kind = (next() % 4) as u8;
            data.push(kind);
            if kind == 3 {
                for _ in 0..next() % 5 {
                    data.extend_from_slice(
                        PIECES[(next() % PIECES.len() as u64) as usize].as_bytes(),
                    );
                }
            } else {
                // 0xff separates cells: a number's bytes avoid it.
                data.extend(next().to_le_bytes().map(|b| b.min(0xfe)));
            }
            data.push(0xff);
        }
        let rs = query_render_check::result_set(&data).unwrap();
        query_render_check::check(&rs);
    }
}

/// Ctrl-C in the prompt, on a real terminal (a pty): before, SIGINT ended memscope (status
/// signal 2) and the session's history was lost; now it cancels the running statement, the
/// prompt answers the next one, and the history holds every entry.
#[test]
fn ctrl_c_in_the_prompt_cancels_the_statement_not_the_session() {
    use std::io::Write;
    use std::os::fd::FromRawFd;
    let state = Path::new(env!("CARGO_TARGET_TMPDIR")).join("query-prompt-state");
    let _ = std::fs::remove_dir_all(&state);
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty fills two descriptors, owned below.
    let r = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, 0, "openpty");
    // SAFETY: fresh descriptors from openpty, each owned once.
    let (m, s) = unsafe {
        (
            std::fs::File::from_raw_fd(master),
            std::fs::File::from_raw_fd(slave),
        )
    };
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_memscope"));
    cmd.arg("query")
        .arg(fixture("leak_oom.pickle"))
        .env("XDG_STATE_HOME", &state)
        .env("NO_COLOR", "1")
        .stdin(s.try_clone().unwrap())
        .stdout(s.try_clone().unwrap())
        .stderr(s);
    // SAFETY: setsid and TIOCSCTTY are async-signal-safe; the pty becomes the controlling
    // terminal, so a Ctrl-C byte on it is SIGINT to memscope.
    unsafe {
        cmd.pre_exec(|| {
            // As an interactive shell starts it: SIGINT at its default action (a test run
            // under `nohup` has it ignored, and memscope leaves an ignored signal ignored).
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::setsid();
            libc::ioctl(0, libc::TIOCSCTTY, 0);
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    drop(cmd);
    let mut reader = m.try_clone().unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let s2 = seen.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            s2.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    let wait_for = |what: &str| {
        let start = Instant::now();
        while !String::from_utf8_lossy(&seen.lock().unwrap()).contains(what) {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "no {what:?} in {:?}",
                String::from_utf8_lossy(&seen.lock().unwrap())
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let mut m = m;
    wait_for("memscope>");
    m.write_all(b"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c;\r").unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    m.write_all(b"\x03").unwrap();
    wait_for("the query was cancelled");
    m.write_all(b"SELECT 'still' || ' here';\r").unwrap();
    wait_for("still here\r\n(1 row)");
    m.write_all(b".quit\r").unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    let hist = std::fs::read_to_string(state.join("memscope/query_history")).unwrap();
    assert!(
        hist.contains("WITH RECURSIVE") && hist.contains("still"),
        "{hist}"
    );
}
