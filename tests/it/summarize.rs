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

/// fixtures/job40/roots/: rank 0 under /home/alice/proj on node-a, rank 1 under
/// /scratch/j17/proj on node-b, each with `model/generate.py` and `data/generate.py`.
fn roots_capture(name: &str) -> PathBuf {
    root().join("fixtures/job40/roots").join(name)
}

fn given(roots: &[&str]) -> Given {
    Given {
        job: "j".into(),
        step: "0".into(),
        repo_roots: roots.iter().map(|r| r.to_string()).collect(),
        ..Given::default()
    }
}

#[test]
fn a_repo_root_gives_one_id_across_checkouts_and_two_to_files_of_one_name() {
    let a = roots_capture("node-a/rank0_memory_snapshot.pickle.gz");
    let b = roots_capture("node-b/rank1_memory_snapshot.pickle.gz");
    // (site_id, file) of each named site at the peak; line 56 of main is in both files.
    let sites = |cap: &Path, g: &Given| -> Vec<(String, String, u32)> {
        let rows = summarize::summarize_file(cap, g);
        assert_eq!(rows.rank[0].status, Status::Ok);
        rows.sites
            .iter()
            .filter_map(|s| Some((s.site_id.clone()?, s.file.clone()?, s.line?)))
            .collect()
    };
    let at = |v: &[(String, String, u32)], dir: &str, line: u32| -> String {
        v.iter()
            .find(|(_, f, l)| f.ends_with(&format!("/{dir}/generate.py")) && *l == line)
            .unwrap_or_else(|| panic!("no {dir}/generate.py:{line} in {v:?}"))
            .0
            .clone()
    };
    // Without a root: the file's name alone, so the two files of one name share an identity.
    let plain = sites(&a, &given(&[]));
    assert_eq!(at(&plain, "model", 56), at(&plain, "data", 56));
    // With each host's root: the two files part, and each keeps one identity across hosts.
    let ra = sites(&a, &given(&["/home/alice/proj"]));
    let rb = sites(&b, &given(&["/scratch/j17/proj/"]));
    assert_ne!(at(&ra, "model", 56), at(&ra, "data", 56));
    assert_eq!(at(&ra, "model", 56), at(&rb, "model", 56));
    assert_eq!(at(&ra, "data", 56), at(&rb, "data", 56));
    // Both roots in one call (one batch over both hosts' captures) give the same ids.
    let both = given(&["/home/alice/proj", "/scratch/j17/proj"]);
    assert_eq!(sites(&a, &both), ra);
    assert_eq!(sites(&b, &both), rb);
    // The relative path is the one the id hashes: recomputed here as docs/summaries.md says.
    let rows = summarize::summarize_file(&b, &both);
    for s in rows.sites.iter().filter(|s| s.site_id.is_some()) {
        let rel = s.rel_path.as_deref().unwrap();
        assert!(
            rel == "model/generate.py" || rel == "data/generate.py",
            "{rel}"
        );
        let mut h: u64 = 0xcbf29ce484222325;
        let text = format!(
            "{rel}\0{}\0{}",
            s.function.as_deref().unwrap(),
            s.line.unwrap()
        );
        for byte in text.bytes() {
            h ^= u64::from(byte);
            h = h.wrapping_mul(0x100000001b3);
        }
        assert_eq!(s.site_id.as_deref(), Some(format!("{h:016x}").as_str()));
    }
    // A root that holds none of the files changes nothing.
    assert_eq!(sites(&a, &given(&["/elsewhere"])), plain);
}

#[test]
fn the_host_and_torch_version_come_from_the_capture_and_hostile_ones_are_dropped() {
    let rows = |cap: &str, host: Option<&str>| {
        let mut g = given(&[]);
        g.host = host.map(str::to_owned);
        summarize::summarize_file(&roots_capture(cap), &g).rank[0].clone()
    };
    let a = rows("node-a/rank0_memory_snapshot.pickle.gz", None);
    assert_eq!(a.host.as_deref(), Some("node-a"));
    assert_eq!(a.host_from, Some(summarize::HostFrom::Capture));
    assert_eq!(a.torch_version.as_deref(), Some("2.11.0+cu128"));
    assert_eq!(a.cuda_version.as_deref(), Some("12.8"));
    // --host wins over the capture's record, and says so.
    let given_host = rows("node-a/rank0_memory_snapshot.pickle.gz", Some("n7"));
    assert_eq!(given_host.host.as_deref(), Some("n7"));
    assert_eq!(given_host.host_from, Some(summarize::HostFrom::Summary));
    assert_eq!(given_host.torch_version.as_deref(), Some("2.11.0+cu128"));
    // A 10,000-character version, a number, a host name with an escape and a newline: dropped.
    let h = rows("hostile/rank2_memory_snapshot.pickle.gz", None);
    assert_eq!(h.status, Status::Ok);
    assert_eq!((h.host, h.host_from), (None, None));
    assert_eq!((h.torch_version, h.cuda_version), (None, None));
    // A capture that records none (torch's own dump) has none.
    let bridge = summarize::summarize_file(
        &root().join("fixtures/ranks/bridge/snapshot_0.pickle.gz"),
        &given(&[]),
    );
    let r = &bridge.rank[0];
    assert_eq!(
        (&r.host, &r.torch_version, &r.cuda_version),
        (&None, &None, &None)
    );
    // `analyze` says it under the file's line, text and JSON; nothing for the hostile capture.
    let cap = roots_capture("node-a/rank0_memory_snapshot.pickle.gz");
    let text = ok(&memscope(&["analyze", cap.to_str().unwrap()]));
    assert_eq!(
        text.lines().nth(1),
        Some("  taken with torch 2.11.0+cu128, CUDA 12.8, on host node-a")
    );
    let j = common::envelope::data(
        &memscope(&["analyze", "--format", "json", cap.to_str().unwrap()]).stdout,
    );
    assert_eq!(j["input"]["origin"]["host"], "node-a");
    assert_eq!(j["input"]["origin"]["cuda_version"], "12.8");
    let hostile = roots_capture("hostile/rank2_memory_snapshot.pickle.gz");
    let text = ok(&memscope(&["analyze", hostile.to_str().unwrap()]));
    assert_eq!(text.lines().nth(1), Some(""));
    let j = common::envelope::data(
        &memscope(&["analyze", "--format", "json", hostile.to_str().unwrap()]).stdout,
    );
    assert!(j["input"].get("origin").is_none(), "{}", j["input"]);
    // Through the binary, both formats carry the columns.
    for format in ["jsonl", "parquet"] {
        let out = tmp(&format!("origin-{format}"));
        let o = out.to_str().unwrap();
        let cap = roots_capture("node-b/rank1_memory_snapshot.pickle.gz");
        let rows = ok(&memscope(&[
            "summarize",
            "-o",
            o,
            "--format",
            format,
            "--rows",
            cap.to_str().unwrap(),
        ]));
        let v: Value = serde_json::from_str(rows.lines().next().unwrap()).unwrap();
        assert_eq!(
            (
                &v["host"],
                &v["host_from"],
                &v["torch_version"],
                &v["cuda_version"]
            ),
            (
                &"node-b".into(),
                &"capture".into(),
                &"2.11.0+cu128".into(),
                &"12.8".into()
            )
        );
        let back = read::read_dir(&out).unwrap();
        assert_eq!(back.rank[0].host.as_deref(), Some("node-b"));
        assert_eq!(back.rank[0].torch_version.as_deref(), Some("2.11.0+cu128"));
        std::fs::remove_dir_all(&out).unwrap();
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
