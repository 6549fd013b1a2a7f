//! `memscope summarize` and `memscope analyze OUT/` (issue #40): the map step's rows, read back
//! into the job view, show what the job view of the captures shows, byte for byte, on the real
//! rank captures of fixtures/ranks/ (torchrun on an H100, with their `memory_stats()` truth), in
//! both formats; a capture that cannot be read is a row with its status; the files are the same
//! on a second run; and a hostile summaries file is refused, not trusted.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use memscope::summarize::{self, read, Given, Status};
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn memscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memscope"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run memscope")
}

/// The job's captures, as paths relative to the repository (as `analyze DIR` shows them).
fn captures(job: &str) -> Vec<String> {
    let dir = root().join("fixtures/ranks").join(job);
    let mut out = Vec::new();
    for e in walk(&dir) {
        let name = e.to_string_lossy().into_owned();
        if name.ends_with(".pickle.gz") {
            let rel = e.strip_prefix(root()).unwrap();
            out.push(rel.display().to_string());
        }
    }
    out.sort();
    out
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "memscope-it-summarize-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[test]
fn the_job_view_of_the_summaries_is_the_job_view_of_the_captures() {
    for job in ["bridge", "verl", "titan"] {
        let caps = captures(job);
        let dir = format!("fixtures/ranks/{job}");
        let text = ok(&memscope(&["analyze", &dir]));
        let json = common::envelope::data(&memscope(&["analyze", "--format", "json", &dir]).stdout);
        for format in ["parquet", "jsonl"] {
            let out = tmp(&format!("{job}-{format}"));
            let o = out.to_str().unwrap();
            let mut args = vec!["summarize", "-o", o, "--format", format, "--job", job];
            args.extend(caps.iter().map(String::as_str));
            ok(&memscope(&args));
            assert_eq!(ok(&memscope(&["analyze", o])), text, "{job} {format}");
            let j = common::envelope::data(&memscope(&["analyze", "--format", "json", o]).stdout);
            assert_eq!(j, json, "{job} {format}");
            // The job's own directory reads the same.
            let sub = out.join(format!("job={job}")).join("step=0");
            assert_eq!(ok(&memscope(&["analyze", sub.to_str().unwrap()])), text);
            std::fs::remove_dir_all(&out).unwrap();
        }
    }
}

#[test]
fn rows_carry_the_truths_figures_and_the_oom() {
    let caps = captures("bridge");
    let given = Given {
        job: "j".into(),
        step: "0".into(),
        ..Given::default()
    };
    for c in &caps {
        let rows = summarize::summarize_file(&root().join(c), &given);
        let r = &rows.rank[0];
        assert_eq!(r.status, Status::Ok);
        let truth: Value = serde_json::from_slice(
            &std::fs::read(root().join(c.replace(".pickle.gz", ".truth.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(r.rank, truth["rank"].as_u64().map(|n| n as u32));
        // What was live at the dump is exact: memory_allocated() at the dump.
        assert_eq!(r.end_allocated_bytes, truth["memory_allocated"].as_u64());
        assert_eq!(r.end_reserved_bytes, truth["memory_reserved"].as_u64());
        assert_eq!(r.ooms, Some(u64::from(!truth["oom"].is_null())));
        if r.ooms == Some(1) {
            assert!(r.first_oom_time_us.is_some() && r.oom_requested_bytes.is_some());
        }
        assert_eq!(rows.sites.len() as u64, r.sites_listed.unwrap());
        // Every site of a user line has an identity that leaves the checkout's path out.
        for s in rows.sites.iter().filter(|s| s.file.is_some()) {
            assert_eq!(s.rel_path.as_deref(), Some("generate.py"));
            assert_eq!(s.site_id.as_ref().unwrap().len(), 16);
        }
    }
}

#[test]
fn an_unreadable_capture_is_a_row_and_the_batch_goes_on() {
    let out = tmp("bad");
    std::fs::create_dir_all(&out).unwrap();
    let cut = out.join("rank5_memory_snapshot.pickle");
    let whole = std::fs::read(root().join("fixtures/clean.pickle")).unwrap();
    std::fs::write(&cut, &whole[..whole.len() / 2]).unwrap();
    let junk = out.join("rank6_memory_snapshot.pickle");
    std::fs::write(&junk, b"not a snapshot").unwrap();
    let missing = out.join("rank7_memory_snapshot.pickle");
    let nameless = out.join("capture.pickle");
    std::fs::write(&nameless, b"junk").unwrap();
    let o = out.join("rows");
    let caps = captures("bridge");
    let mut args: Vec<&str> = vec![
        "summarize",
        "-o",
        o.to_str().unwrap(),
        "--format",
        "jsonl",
        "--rows",
    ];
    args.extend(caps.iter().map(String::as_str));
    let paths = [&cut, &junk, &missing, &nameless].map(|p| p.to_str().unwrap().to_owned());
    args.extend(paths.iter().map(String::as_str));
    let stdout = ok(&memscope(&args));
    let rows: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let status: Vec<(Value, &str)> = rows
        .iter()
        .map(|r| (r["rank"].clone(), r["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        status,
        vec![
            (0.into(), "ok"),
            (1.into(), "ok"),
            (2.into(), "ok"),
            (5.into(), "truncated"),
            (6.into(), "invalid"),
            (7.into(), "missing"),
            (Value::Null, "invalid"),
        ]
    );
    // The job view reads the three ranks with figures and names the others on stderr.
    let a = memscope(&["analyze", o.to_str().unwrap()]);
    let text = ok(&a);
    assert_eq!(text, ok(&memscope(&["analyze", "fixtures/ranks/bridge"])));
    let err = String::from_utf8_lossy(&a.stderr);
    assert!(err.contains("rank 5") && err.contains("truncated"), "{err}");
    assert!(err.contains("rank unknown"), "{err}");
    // Idempotent: a second run leaves the same bytes.
    let before: Vec<(PathBuf, Vec<u8>)> = walk(&o)
        .into_iter()
        .map(|p| (p.clone(), std::fs::read(p).unwrap()))
        .collect();
    ok(&memscope(&args));
    let mut after: Vec<(PathBuf, Vec<u8>)> = walk(&o)
        .into_iter()
        .map(|p| (p.clone(), std::fs::read(p).unwrap()))
        .collect();
    let mut before = before;
    before.sort();
    after.sort();
    assert_eq!(before, after);
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn hostile_summaries_are_refused() {
    let out = tmp("hostile");
    let dir = out.join("job=x").join("step=0").join("rank=0");
    std::fs::create_dir_all(&dir).unwrap();
    // Not Parquet behind a Parquet name.
    std::fs::write(dir.join("rank_summary-0.parquet"), b"PAR1 garbage PAR1").unwrap();
    let e = read::read_dir(&out).unwrap_err().to_string();
    assert!(e.contains("parquet"), "{e}");
    std::fs::remove_file(dir.join("rank_summary-0.parquet")).unwrap();
    // Another schema's rows.
    std::fs::write(
        dir.join("rank_summary-0.jsonl"),
        br#"{"schema":"memscope.summaries/99","job":"x","step":"0","rank":0}"#,
    )
    .unwrap();
    let e = read::read_dir(&out).unwrap_err().to_string();
    assert!(e.contains("not a memscope.summaries/1 row"), "{e}");
    let o = memscope(&["analyze", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    // Two jobs in one directory are refused: give one.
    let caps = captures("verl");
    for job in ["a", "b"] {
        let mut args = vec!["summarize", "-o", out.to_str().unwrap(), "--job", job];
        args.extend(caps.iter().map(String::as_str));
        ok(&memscope(&args));
    }
    std::fs::remove_dir_all(out.join("job=x")).unwrap();
    let o = memscope(&["analyze", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("several jobs or steps"));
    ok(&memscope(&["analyze", out.join("job=a").to_str().unwrap()]));
    // A job name is a directory's name: nothing that climbs out.
    let o = memscope(&[
        "summarize",
        "-o",
        out.to_str().unwrap(),
        "--job",
        "../x",
        &caps[0],
    ]);
    assert_eq!(o.status.code(), Some(2));
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn damaged_parquet_is_an_error_never_a_crash() {
    let out = tmp("damaged");
    let caps = captures("bridge");
    let mut args = vec!["summarize", "-o", out.to_str().unwrap()];
    args.extend(caps.iter().map(String::as_str));
    ok(&memscope(&args));
    let file = walk(&out)
        .into_iter()
        .find(|p| {
            p.to_string_lossy().contains("rank=2") && p.to_string_lossy().contains("rank_summary")
        })
        .unwrap();
    let good = std::fs::read(&file).unwrap();
    let (mut refused, mut read_back) = (0, 0);
    // A fixed generator: the same damage on every run.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..300 {
        let mut bad = good.clone();
        if i % 3 == 0 {
            bad.truncate((next() as usize) % good.len());
        } else {
            for _ in 0..1 + i % 4 {
                let at = (next() as usize) % bad.len();
                bad[at] = next() as u8;
            }
        }
        std::fs::write(&file, &bad).unwrap();
        match read::read_dir(&out) {
            Ok(_) => read_back += 1,
            Err(_) => refused += 1,
        }
    }
    assert!(refused > 100, "{refused} refused, {read_back} read");
    std::fs::remove_dir_all(&out).unwrap();
}
