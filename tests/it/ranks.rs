//! Several captures of one job read together (issue #28): `analyze`, `report`, `tui` and
//! `baseline --format jsonl` over the per-rank captures in fixtures/ranks/, which the GPU
//! generator (fixtures/ranks/generate.py) wrote under torchrun (gloo, one GPU, uneven batches)
//! with each rank's `torch.cuda.memory_stats()` at the dump beside it (`*.truth.json`, written
//! before memscope read anything). Every figure here is checked against those files.

use crate::common;
use crate::common::ranks::{root, truth_of, u};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use memscope::job::{identify, Job};
use memscope::tui::job::JobView;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use serde_json::Value;

fn ranks_dir(job: &str) -> PathBuf {
    root().join("fixtures/ranks").join(job)
}

fn memscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memscope"))
        .args(args)
        .current_dir(root())
        .env("NO_COLOR", "1")
        .output()
        .expect("memscope runs")
}

fn ok_stdout(args: &[&str]) -> String {
    let o = memscope(args);
    assert!(
        o.status.success(),
        "memscope {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn job_json(args: &[&str]) -> Value {
    let mut a = vec!["analyze", "--format", "json"];
    a.extend_from_slice(args);
    common::envelope::data(ok_stdout(&a).as_bytes())
}

const JOBS: [&str; 3] = ["titan", "bridge", "verl"];

#[test]
fn per_rank_figures_are_exact_against_memory_stats() {
    for job in JOBS {
        let j = job_json(&[&format!("fixtures/ranks/{job}")]);
        let ranks = j["ranks"].as_array().unwrap();
        assert_eq!(ranks.len(), job_truth(job).len(), "{job}: one row per rank");
        for r in ranks {
            let t = truth_of(r["path"].as_str().unwrap());
            let s = &t["stats"];
            assert_eq!(u(&r["rank"]), u(&t["rank"]), "{job}: rank");
            assert_eq!(
                u(&r["peak_allocated_bytes"]),
                u(&t["max_memory_allocated"]),
                "{job} rank {}: peak allocated",
                r["rank"]
            );
            assert_eq!(
                u(&r["peak_allocated_bytes"]),
                u(&s["allocated_bytes.all.peak"])
            );
            assert_eq!(
                u(&r["peak_reserved_bytes"]),
                u(&t["max_memory_reserved"]),
                "{job} rank {}: peak reserved",
                r["rank"]
            );
            assert_eq!(
                u(&r["peak_reserved_bytes"]),
                u(&s["reserved_bytes.all.peak"])
            );
            assert_eq!(
                u(&r["end_allocated_bytes"]),
                u(&s["allocated_bytes.all.current"]),
                "{job} rank {}: live at the end",
                r["rank"]
            );
            assert_eq!(
                u(&r["end_reserved_bytes"]),
                u(&s["reserved_bytes.all.current"])
            );
            assert_eq!(u(&r["ooms"]), u(&s["num_ooms"]), "{job}: OOMs");
            assert_eq!(r["rank_from"], "file_name");
        }
    }
}

/// The truth of every rank of a job: (rank, max allocated, oom).
fn job_truth(job: &str) -> Vec<(u64, u64, bool)> {
    let mut v = Vec::new();
    let mut dirs = vec![ranks_dir(job)];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.to_string_lossy().ends_with(".truth.json") {
                let t: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
                v.push((
                    u(&t["rank"]),
                    u(&t["max_memory_allocated"]),
                    !t["oom"].is_null(),
                ));
            }
        }
    }
    v.sort();
    v
}

#[test]
fn peak_rank_oom_ranks_and_imbalance_follow_the_truth() {
    for job in JOBS {
        let j = job_json(&[&format!("fixtures/ranks/{job}")]);
        let truth = job_truth(job);
        let max = truth
            .iter()
            .max_by_key(|t| (t.1, std::cmp::Reverse(t.0)))
            .unwrap();
        let min = truth.iter().min_by_key(|t| (t.1, t.0)).unwrap();
        assert_eq!(u(&j["peak_rank"]), max.0, "{job}: peak_rank");
        let ooms: Vec<u64> = truth.iter().filter(|t| t.2).map(|t| t.0).collect();
        let got: Vec<u64> = j["oom_ranks"].as_array().unwrap().iter().map(u).collect();
        assert_eq!(got, ooms, "{job}: oom_ranks");
        let i = &j["imbalance"];
        assert_eq!(u(&i["max"]["rank"]), max.0);
        assert_eq!(u(&i["max"]["bytes"]), max.1);
        assert_eq!(u(&i["min"]["rank"]), min.0);
        assert_eq!(u(&i["min"]["bytes"]), min.1);
        let sum: u64 = truth.iter().map(|t| t.1).sum();
        assert_eq!(u(&i["mean_bytes"]), sum / truth.len() as u64);
        let ratio = i["max_over_min"].as_f64().unwrap();
        assert!((ratio - max.1 as f64 / min.1 as f64).abs() < 1e-12);
    }
    // Megatron-Bridge: rank 2 ran under a cap and hit the OOM; it peaked highest too.
    let j = job_json(&["fixtures/ranks/bridge"]);
    assert_eq!(j["oom_ranks"], serde_json::json!([2]));
    assert_eq!(j["peak_rank"], 2);
    assert_eq!(j["ranks"][2]["oom_cause"], "capacity");
}

#[test]
fn leak_is_flagged_on_verl_rank_1_only() {
    let j = job_json(&["fixtures/ranks/verl"]);
    assert_eq!(j["leak_ranks"], serde_json::json!([1]));
    assert_eq!(j["ranks"][0]["leaks"], 0);
    assert_eq!(j["ranks"][1]["leaks"], 1);
    assert!(u(&j["ranks"][1]["leak_live_bytes"]) > 0);
    // The clean job: judged, and no leak anywhere.
    let t = job_json(&["fixtures/ranks/titan"]);
    assert_eq!(t["leak_ranks"], serde_json::json!([]));
    assert!(t["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["leaks"] == 0));
}

#[test]
fn json_shape() {
    let j = job_json(&[
        "fixtures/ranks/titan/iteration_6/rank1_memory_snapshot.pickle.gz",
        "fixtures/ranks/titan/iteration_6/rank0_memory_snapshot.pickle.gz",
    ]);
    assert_eq!(j["schema"], "memscope.job/1");
    let ranks = j["ranks"].as_array().unwrap();
    // Sorted by rank, whatever the order given.
    assert_eq!(ranks[0]["rank"], 0);
    assert_eq!(ranks[1]["rank"], 1);
    for r in ranks {
        for k in [
            "rank",
            "peak_allocated_bytes",
            "peak_reserved_bytes",
            "end_allocated_bytes",
            "end_reserved_bytes",
            "ooms",
            "leaks",
            "path",
            "verdict",
        ] {
            assert!(r.get(k).is_some(), "rank object lacks {k}");
        }
    }
    for k in ["peak_rank", "oom_ranks", "imbalance", "sites"] {
        assert!(j.get(k).is_some(), "job lacks {k}");
    }
    assert_eq!(j["sites"]["high_rank"], 1);
    assert_eq!(j["sites"]["low_rank"], 0);
}

#[test]
fn text_of_a_multi_rank_set() {
    let text = ok_stdout(&["analyze", "fixtures/ranks/bridge"]);
    let truth = job_truth("bridge");
    let ratio = truth[2].1 as f64 / truth[0].1 as f64;
    assert!(
        text.starts_with("memscope job of 3 ranks (snapshot)\n"),
        "{text}"
    );
    assert!(
        text.contains("VERDICT rank 2 hit an OOM (cause: capacity)"),
        "{text}"
    );
    assert!(text.contains("  oom_ranks: rank 2\n"), "{text}");
    assert!(text.contains("  peak_rank: 2\n"), "{text}");
    assert!(
        text.contains(&format!("IMBALANCE of peak allocated: max/min {ratio:.2}x")),
        "{text}"
    );
    assert!(text
        .contains("SITES THAT DIFFER live at the peak, rank 2 (highest) against rank 0 (lowest)"));
    // The batch line grew the most: rank 2 ran 8192 rows, rank 0 256.
    let first_change = text
        .lines()
        .skip_while(|l| !l.starts_with("SITES THAT DIFFER"))
        .nth(1)
        .unwrap();
    assert!(
        first_change.contains("grown") && first_change.contains("generate.py:56"),
        "{first_change}"
    );
    for r in 0..3 {
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with(&format!("{r} "))),
            "row of rank {r}: {text}"
        );
    }
}

#[test]
fn sites_that_differ_are_the_batch_lines() {
    // generate.py:54 is `x = torch.randn(b, 1024)` (float32) and :55 `y = torch.randint(1000,
    // (b,))` (int64): between the highest and the lowest rank they differ by the batches'
    // difference, as each rank's truth file records its batch.
    for job in JOBS {
        let j = job_json(&[&format!("fixtures/ranks/{job}")]);
        let batch = |rank: &Value| {
            let r = j["ranks"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| &r["rank"] == rank)
                .unwrap();
            u(&truth_of(r["path"].as_str().unwrap())["batch"]) as i64
        };
        let s = &j["sites"];
        let (hi, lo) = (batch(&s["high_rank"]), batch(&s["low_rank"]));
        let change = |line: u64| {
            s["changes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| {
                    c["site"]["line"] == line
                        && c["site"]["file"].as_str().unwrap().ends_with("generate.py")
                })
                .map(|c| c["delta_bytes"].as_i64().unwrap())
        };
        assert_eq!(change(54), Some((hi - lo) * 1024 * 4), "{job}: line 54");
        assert_eq!(change(55), Some((hi - lo) * 8), "{job}: line 55");
    }
}

/// A scratch directory, removed at the end of the test.
struct Scratch(PathBuf);
impl Scratch {
    fn new(name: &str) -> Scratch {
        let p = std::env::temp_dir().join(format!("memscope-ranks-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }
    fn copy(&self, from: &str, to: &str) -> String {
        let dest = self.0.join(to);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(root().join(from), &dest).unwrap();
        dest.display().to_string()
    }
}
impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn refusals_exit_2_with_the_reason() {
    // Two rank 0s: torchtitan's and verl's.
    let o = memscope(&[
        "analyze",
        "fixtures/ranks/titan/iteration_6/rank0_memory_snapshot.pickle.gz",
        "fixtures/ranks/verl/actor_rank0_pid532.pickle.gz",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("are both rank 0 (from the file name)"),
        "{err}"
    );
    assert!(o.stdout.is_empty());
    // Names without a rank, both on cuda:0: the device cannot tell them apart.
    let s = Scratch::new("refuse");
    let a = s.copy("fixtures/ranks/bridge/snapshot_0.pickle.gz", "a.pickle.gz");
    let b = s.copy("fixtures/ranks/bridge/snapshot_1.pickle.gz", "b.pickle.gz");
    let o = memscope(&["analyze", &a, &b]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("are both rank 0 (from the one CUDA device the snapshot uses)"),
        "{err}"
    );
    // Profiler traces with no rank in their name or their content.
    let o = memscope(&[
        "analyze",
        "fixtures/trace_clean.trace.json.gz",
        "fixtures/trace_total_loss.trace.json.gz",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cannot tell which rank this is"), "{err}");
    // A pattern that is no regular expression, or holds no group.
    for p in ["rank(\\d+", "rank\\d+"] {
        let o = memscope(&["analyze", "--rank-pattern", p, "fixtures/ranks/titan"]);
        assert_eq!(o.status.code(), Some(2), "{p}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("--rank-pattern"));
    }
    // The same file twice is the same rank twice.
    let f = "fixtures/ranks/bridge/snapshot_0.pickle.gz";
    assert_eq!(memscope(&["analyze", f, f]).status.code(), Some(2));
}

#[test]
fn rank_pattern_numbers_the_files() {
    let s = Scratch::new("pattern");
    let a = s.copy(
        "fixtures/ranks/bridge/snapshot_0.pickle.gz",
        "node3/mem.pickle.gz",
    );
    let b = s.copy(
        "fixtures/ranks/bridge/snapshot_oom_rank-2.pickle.gz",
        "node5/mem.pickle.gz",
    );
    let j = job_json(&["--rank-pattern", r"node(?P<rank>\d+)/", &a, &b]);
    let ranks: Vec<u64> = j["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| u(&r["rank"]))
        .collect();
    assert_eq!(ranks, [3, 5]);
    assert_eq!(j["ranks"][0]["rank_from"], "pattern");
    assert_eq!(j["oom_ranks"], serde_json::json!([5]));
    // `check` numbers them the same way: one run of two ranks.
    let o = memscope(&["check", "--rank-pattern", r"node(\d+)/", &a, &b]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("SNAPSHOT RANKS\n"), "{text}");
    assert!(
        text.lines().any(|l| l.trim_start().starts_with("5 ")),
        "{text}"
    );
    // A directory: walked for captures.
    let j = job_json(&["--rank-pattern", r"node(\d+)", &s.0.display().to_string()]);
    assert_eq!(j["ranks"].as_array().unwrap().len(), 2);
}

#[test]
fn check_groups_megatron_bridge_names_as_one_run() {
    let files: Vec<String> = ["snapshot_0", "snapshot_1", "snapshot_oom_rank-2"]
        .iter()
        .map(|n| format!("fixtures/ranks/bridge/{n}.pickle.gz"))
        .collect();
    let mut args = vec!["check"];
    args.extend(files.iter().map(String::as_str));
    let o = memscope(&args);
    assert_eq!(o.status.code(), Some(1), "rank 2's OOM fails the check");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("SNAPSHOT RANKS (SNAPSHOT_*)"), "{text}");
    assert!(!text.contains("ranks in the order given"), "{text}");
}

/// Each line one flat JSON object, the same keys with the same JSON types on every line.
fn assert_flat_lines(text: &str) -> Vec<serde_json::Map<String, Value>> {
    let kind = |v: &Value| match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_u64() => "uint",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    let mut rows = Vec::new();
    let mut shape: Option<Vec<(String, &str)>> = None;
    for l in text.lines() {
        let v: Value = serde_json::from_str(l).expect("each line is JSON");
        let o = v.as_object().expect("each line is an object").clone();
        let s: Vec<(String, &str)> = o.iter().map(|(k, v)| (k.clone(), kind(v))).collect();
        for (k, t) in &s {
            assert!(
                !matches!(*t, "null" | "array" | "object"),
                "column {k} is {t}, not a scalar"
            );
        }
        match &shape {
            None => shape = Some(s),
            Some(first) => assert_eq!(first, &s, "every line has the same columns and types"),
        }
        rows.push(o);
    }
    rows
}

#[test]
fn rank_lines_are_a_table_and_reduce_to_the_same_job() {
    let s = Scratch::new("lines");
    for job in JOBS {
        let out = s.0.join(format!("{job}.jsonl"));
        let mut files: Vec<String> = Vec::new();
        let mut dirs = vec![ranks_dir(job)];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.to_string_lossy().ends_with(".pickle.gz") {
                    files.push(p.strip_prefix(root()).unwrap().display().to_string());
                }
            }
        }
        files.sort();
        // One `memscope baseline` per rank, as a launcher or a Slurm array runs them.
        let mut all = String::new();
        for (i, f) in files.iter().enumerate() {
            let one = s.0.join(format!("{job}-{i}.jsonl"));
            ok_stdout(&["baseline", f, "-o", &one.display().to_string()]);
            all.push_str(&std::fs::read_to_string(&one).unwrap());
        }
        std::fs::write(&out, &all).unwrap();
        let rows = assert_flat_lines(&all);
        assert_eq!(rows.len(), files.len());
        for r in &rows {
            let t = truth_of(r["path"].as_str().unwrap());
            assert_eq!(u(&r["rank"]), u(&t["rank"]));
            assert_eq!(u(&r["peak_allocated_bytes"]), u(&t["max_memory_allocated"]));
            assert_eq!(u(&r["peak_reserved_bytes"]), u(&t["max_memory_reserved"]));
            assert_eq!(u(&r["end_allocated_bytes"]), u(&t["memory_allocated"]));
            assert_eq!(r["schema"], "memscope.rank/1");
        }
        // Reduced on one machine: the same job as from the captures.
        let from_lines = job_json(&[&out.display().to_string()]);
        let from_captures = job_json(&[&format!("fixtures/ranks/{job}")]);
        let strip = |mut j: Value| {
            for r in j["ranks"].as_array_mut().unwrap() {
                r.as_object_mut().unwrap().remove("rank_from");
            }
            j
        };
        assert_eq!(strip(from_lines), strip(from_captures), "{job}");
        // `check` reduces the same lines: one run, its ranks as the lines number them.
        let o = memscope(&["check", "--no-config", &out.display().to_string()]);
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains("SNAPSHOT RANKS\n"), "{job}: {text}");
        assert!(!text.contains("ranks in the order given"), "{job}: {text}");
        assert_eq!(
            o.status.code(),
            Some(if job == "titan" { 0 } else { 1 }),
            "{job}: {text}"
        );
    }
    // Python's json module reads every line as one flat object, where Python is installed.
    let all = s.0.join("bridge.jsonl");
    if let Ok(o) = Command::new("python3")
        .args([
            "-c",
            "import json,sys\nrows=[json.loads(l) for l in open(sys.argv[1])]\nassert all(not isinstance(v,(dict,list)) for r in rows for v in r.values())\nassert len({tuple(r) for r in rows})==1\nprint(len(rows))",
            &all.display().to_string(),
        ])
        .output()
    {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "3");
    }
}

#[test]
fn rank_lines_need_a_rank() {
    let s = Scratch::new("norank");
    let a = s.copy("fixtures/ranks/bridge/snapshot_0.pickle.gz", "a.pickle.gz");
    let out = s.0.join("a.jsonl").display().to_string();
    // No rank in the name: the device's (cuda:0) stands; --rank overrides it.
    ok_stdout(&["baseline", &a, "-o", &out, "--rank", "7"]);
    let rows = assert_flat_lines(&std::fs::read_to_string(&out).unwrap());
    assert_eq!(rows[0]["rank"], 7);
    // --rank numbers one capture only.
    let o = memscope(&["baseline", &a, &a, "-o", &out, "--rank", "7"]);
    assert_eq!(o.status.code(), Some(2));
    // And only rank lines.
    let o = memscope(&["baseline", &a, "-o", "-", "--rank", "7", "--format", "json"]);
    assert_eq!(o.status.code(), Some(2));
}

fn load_job(dir: &str) -> Job {
    let d = ranks_dir(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&d)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".pickle.gz"))
        .collect();
    files.sort();
    let per = memscope::inputs::load_summaries_per_file(&files, true, &|_| {}).unwrap();
    let mut summaries: Vec<_> = per.into_iter().flatten().collect();
    for s in &mut summaries {
        s.path = Path::new(&s.path)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
    }
    Job::new(&identify(summaries, None).unwrap())
}

fn screen(view: &JobView, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| f.render_widget(view, f.area())).unwrap();
    let buf = t.backend().buffer().clone();
    let mut out = String::new();
    for y in 0..h {
        let line: String = (0..w).map(|x| buf[(x, y)].symbol()).collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[test]
fn tui_shows_the_ranks_at_two_sizes() {
    let mut view = JobView::new(load_job("bridge"));
    let wide = screen(&view, 160, 30);
    assert!(wide.contains("memscope: job of 3 ranks"), "{wide}");
    assert!(wide.contains("VERDICT rank 2 hit an OOM"), "{wide}");
    assert!(wide.contains("snapshot_oom_rank-2.pickle.gz"), "{wide}");
    assert!(wide.contains("IMBALANCE max/min 2.56x"), "{wide}");
    assert!(wide.contains("SITES THAT DIFFER"), "{wide}");
    // The selected rank's detail line; Down moves to rank 1, End to rank 2.
    assert!(
        wide.contains("rank 0 (from the file name): peak >= 263.0 MiB allocated"),
        "{wide}"
    );
    view.key(KeyEvent::new(KeyCode::Down, KeyModifiers::NONE));
    assert!(screen(&view, 160, 30).contains("rank 1 (from the file name)"));
    view.key(KeyEvent::new(KeyCode::End, KeyModifiers::NONE));
    view.key(KeyEvent::new(KeyCode::Down, KeyModifiers::NONE));
    assert_eq!(view.selected, 2);
    // Small: the selected row stays in view, and nothing panics.
    let small = screen(&view, 60, 9);
    assert!(small.contains("> "), "{small}");
    assert!(
        small.lines().any(|l| l.contains("> ") && l.contains('2')),
        "{small}"
    );
    // Enter asks for the selected rank's capture.
    view.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    assert_eq!(view.open.as_deref(), Some("snapshot_oom_rank-2.pickle.gz"));
    view.open = None;
    view.message = Some("not here".into());
    assert!(screen(&view, 80, 12).contains("not here"));
    view.key(KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE));
    assert!(view.quit);
    let tiny = screen(&view, 10, 2);
    assert_eq!(tiny.lines().count(), 2);
}

/// The ranks list's keys agree with its header and with the rank views (issue 42): the header
/// says q quits and that q in an opened rank comes back; Esc, "back one step" everywhere, has no
/// step to go back to here and does not quit.
#[test]
fn the_ranks_list_quits_on_q_only_as_its_header_says() {
    let mut view = JobView::new(load_job("bridge"));
    let s = screen(&view, 160, 30);
    assert!(s.contains("q there comes back; q here quits"), "{s}");
    view.key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    assert!(!view.quit);
    view.key(KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE));
    assert!(view.quit);
}

#[test]
fn report_writes_a_page_of_the_job() {
    let s = Scratch::new("report");
    let out = s.0.join("job.html");
    let o = memscope(&[
        "report",
        "fixtures/ranks/verl",
        "-o",
        &out.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(html.contains("job of 2 ranks"));
    assert!(html.contains("rank 1 leaks"));
    assert!(html.contains("actor_rank1_pid533.pickle.gz"));
}

#[test]
fn one_file_keeps_the_one_capture_report() {
    // One file is today's report, not a job of one rank.
    let text = ok_stdout(&[
        "analyze",
        "fixtures/ranks/bridge/snapshot_oom_rank-2.pickle.gz",
    ]);
    assert!(
        text.starts_with("memscope fixtures/ranks/bridge/snapshot_oom_rank-2.pickle.gz (snapshot")
    );
    assert!(!text.contains("RANKS"));
}
