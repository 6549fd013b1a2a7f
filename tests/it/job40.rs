//! Issue #40, items 5 and 6: rank directories everywhere, captures of different programs
//! refused as one job, imbalance defined once and named the same in every output, and real
//! two-GPU jobs over NCCL checked rank by rank against each rank's `memory_stats()`.
//!
//! The two-GPU captures are fixtures/ranks/multi40 (DDP and FSDP2, two H200s, NCCL, rank 1 on
//! eight times rank 0's rows, rank 0 keeping every step's logits), each rank's truth written by
//! the workload beside its capture before memscope read anything (its README says how).

use crate::common;
use crate::common::ranks::{root, truth_of, u};

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use memscope::tui::job::JobView;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use serde_json::{json, Value};

fn memscope(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memscope"));
    c.args(args)
        .current_dir(root())
        .env("NO_COLOR", "1")
        .env_remove("GITHUB_ACTIONS")
        .env_remove("GITHUB_STEP_SUMMARY");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("memscope runs")
}

fn stdout_ok(args: &[&str]) -> String {
    let o = memscope(args, &[]);
    assert!(
        o.status.code() == Some(0) || o.status.code() == Some(1),
        "memscope {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn data(args: &[&str]) -> Value {
    common::envelope::data(stdout_ok(args).as_bytes())
}

const MULTI40: [&str; 3] = ["ddp", "fsdp2", "ddp-run"];

#[test]
fn two_gpu_ranks_equal_their_memory_stats() {
    for job in MULTI40 {
        let dir = format!("fixtures/ranks/multi40/{job}");
        let j = data(&["analyze", "--format", "json", &dir]);
        let ranks = j["ranks"].as_array().unwrap();
        assert_eq!(ranks.len(), 2, "{job}: one row per GPU");
        let mut truths = Vec::new();
        for r in ranks {
            let t = truth_of(r["path"].as_str().unwrap());
            let s = &t["stats"];
            let at = format!("{job} rank {}", r["rank"]);
            assert_eq!(r["rank"], t["rank"], "{at}");
            assert_eq!(t["world"], 2, "{at}: two processes");
            assert_eq!(
                r["peak_exact"], true,
                "{at}: recorded from an empty allocator"
            );
            for (ours, theirs, stat) in [
                (
                    "peak_allocated_bytes",
                    "max_memory_allocated",
                    "allocated_bytes.all.peak",
                ),
                (
                    "peak_reserved_bytes",
                    "max_memory_reserved",
                    "reserved_bytes.all.peak",
                ),
                (
                    "end_allocated_bytes",
                    "memory_allocated",
                    "allocated_bytes.all.current",
                ),
                (
                    "end_reserved_bytes",
                    "memory_reserved",
                    "reserved_bytes.all.current",
                ),
            ] {
                assert_eq!(u(&r[ours]), u(&t[theirs]), "{at}: {ours}");
                assert_eq!(u(&r[ours]), u(&s[stat]), "{at}: {ours} against {stat}");
            }
            assert_eq!(u(&r["ooms"]), u(&s["num_ooms"]), "{at}: OOMs");
            truths.push(t);
        }
        // The leak is rank 0's alone, and found there only.
        let leak_rank = u(&truths[0]["leak_rank"]);
        assert_eq!(j["leak_ranks"], json!([leak_rank]), "{job}");
        for r in ranks {
            let leaking = u(&r["rank"]) == leak_rank;
            assert_eq!(r["leaks"], if leaking { 1 } else { 0 }, "{job}: {r}");
            assert_eq!(u(&r["leak_live_bytes"]) > 0, leaking, "{job}");
        }
        // The uneven split: rank 1 ran 8x the rows and peaked highest.
        assert!(u(&truths[1]["batch"]) > u(&truths[0]["batch"]));
        let (p0, p1) = (
            u(&truths[0]["max_memory_allocated"]),
            u(&truths[1]["max_memory_allocated"]),
        );
        assert!(p1 > p0, "{job}");
        assert_eq!(j["peak_rank"], 1, "{job}");
        let i = &j["imbalance"];
        assert_eq!((u(&i["max"]["rank"]), u(&i["max"]["bytes"])), (1, p1));
        assert_eq!((u(&i["min"]["rank"]), u(&i["min"]["bytes"])), (0, p0));
        // JSON's decimal: the same f64 to within a unit in the last place.
        assert!((i["max_over_min"].as_f64().unwrap() - p1 as f64 / p0 as f64).abs() < 1e-12);
        let spread = (p1 - p0) as f64 / p1 as f64 * 100.0;
        assert!((i["spread_percent"].as_f64().unwrap() - spread).abs() < 1e-9);
    }
}

/// The imbalance of the Megatron-Bridge job, as every output states it.
#[test]
fn imbalance_is_one_figure_named_the_same_everywhere() {
    let dir = "fixtures/ranks/bridge";
    let job = data(&["analyze", "--format", "json", dir]);
    let im = &job["imbalance"];
    let (max, min) = (u(&im["max"]["bytes"]), u(&im["min"]["bytes"]));
    let ratio = max as f64 / min as f64;
    let spread = (max - min) as f64 / max as f64 * 100.0;
    assert!((im["max_over_min"].as_f64().unwrap() - ratio).abs() < 1e-12);
    assert!((im["spread_percent"].as_f64().unwrap() - spread).abs() < 1e-9);
    let figures = format!("max/min {ratio:.2}x, spread {spread:.1}%");
    let how = memscope::wording::job::IMBALANCE_HOW;

    // check --format json: the group holds the same object, and the rule measures the spread.
    let check = data(&[
        "check",
        "--format",
        "json",
        "--no-config",
        "--max-imbalance",
        "90%",
        dir,
    ]);
    assert_eq!(check["groups"][0]["imbalance"], *im);
    let rule = &check["ranks_rules"][0];
    assert_eq!(rule["rule"], "max-imbalance");
    assert!((rule["measured"].as_f64().unwrap() - spread / 100.0).abs() < 1e-12);
    assert!(rule["message"]
        .as_str()
        .unwrap()
        .contains("imbalance spread"));
    assert!(rule["evidence"][0].as_str().unwrap().starts_with(&figures));

    // analyze text, check text, JUnit and the GitHub job summary: both figures, and how.
    let text = stdout_ok(&["analyze", dir]);
    assert!(
        text.contains(&format!("IMBALANCE of peak allocated: {figures}\n")),
        "{text}"
    );
    assert_eq!(text.matches(how).count(), 1, "{text}");
    let ctext = stdout_ok(&["check", "--no-config", "--max-imbalance", "90%", dir]);
    assert!(
        ctext.contains(&format!("  imbalance: {figures}: max ")),
        "{ctext}"
    );
    assert_eq!(ctext.matches(how).count(), 1, "{ctext}");
    // JUnit says the figures where the rule fails.
    let junit = stdout_ok(&[
        "check",
        "--format",
        "junit",
        "--no-config",
        "--max-imbalance",
        "10%",
        dir,
    ]);
    assert!(junit.contains(&format!("- {figures}: max ")), "{junit}");
    let summary = std::env::temp_dir().join(format!("job40-summary-{}.md", std::process::id()));
    let _ = std::fs::remove_file(&summary);
    let o = memscope(
        &["check", "--no-config", "--max-imbalance", "90%", dir],
        &[
            ("GITHUB_ACTIONS", "true"),
            ("GITHUB_STEP_SUMMARY", summary.to_str().unwrap()),
        ],
    );
    // Rank 2's OOM fails the gate (exit 1); the summary is written either way.
    assert_eq!(o.status.code(), Some(1));
    let md = std::fs::read_to_string(&summary).unwrap();
    std::fs::remove_file(&summary).unwrap();
    assert!(md.contains(&figures) && md.contains(how), "{md}");

    // The TUI's job view: the same figures as `analyze DIR`.
    let view = JobView::new(library_job(dir).unwrap());
    let s = screen(&view, 240, 40);
    assert!(s.contains(&format!("IMBALANCE {figures}: max ")), "{s}");
    assert!(s.contains(how), "{s}");
    assert!(
        s.contains(&format!("peak_rank: {}", job["peak_rank"])),
        "{s}"
    );
    assert!(s.contains("oom_ranks: rank 2"), "{s}");
}

/// The job of the captures under `dir`, as `analyze`, `report` and `tui` build it.
fn library_job(dir: &str) -> Result<memscope::job::Job, memscope::job::JobError> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains(".pickle"))
        .collect();
    files.sort();
    let summaries = memscope::inputs::load_summaries(&files, true).unwrap();
    memscope::job::identify(summaries, None).map(|m| memscope::job::Job::new(&m))
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
fn check_reads_a_rank_directory_as_analyze_does() {
    let dir = "fixtures/ranks/multi40/fsdp2";
    let job = data(&["analyze", "--format", "json", dir]);
    let check = data(&[
        "check",
        "--format",
        "json",
        "--no-config",
        "--fail-on",
        "oom",
        dir,
    ]);
    assert_eq!(check["files"].as_array().unwrap().len(), 2);
    let g = &check["groups"][0];
    assert_eq!(g["imbalance"], job["imbalance"]);
    for (c, a) in g["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .zip(job["ranks"].as_array().unwrap())
    {
        assert_eq!(c["rank"], a["rank"]);
        assert_eq!(c["path"], a["path"]);
        assert_eq!(c["peak_allocated_bytes"], a["peak_allocated_bytes"]);
        assert_eq!(c["peak_reserved_bytes"], a["peak_reserved_bytes"]);
        assert_eq!(c["end_allocated_bytes"], a["end_allocated_bytes"]);
        assert_eq!(c["leaks"], a["leaks"]);
    }
    // A directory without captures is refused as a directory, as `analyze` refuses it.
    let empty = std::env::temp_dir().join(format!("job40-empty-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let o = memscope(&["check", "--no-config", empty.to_str().unwrap()], &[]);
    std::fs::remove_dir_all(&empty).unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is a directory, not a capture file"));
}

/// Two programs' snapshots named as ranks 0 and 1 of one job: fixtures/generate.py's clean
/// run and fixtures/loops' exit_logits loop (their sites share no source file).
struct TwoPrograms(PathBuf);

impl TwoPrograms {
    fn new(tag: &str) -> TwoPrograms {
        // Under the repository, so that the MCP server's default root (its working directory)
        // admits it.
        let d = root()
            .join("target")
            .join(format!("job40-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::copy(
            root().join("fixtures/clean.pickle"),
            d.join("rank0_memory_snapshot.pickle"),
        )
        .unwrap();
        std::fs::copy(
            root().join("fixtures/loops/both_logits_mlp_clean.pickle.gz"),
            d.join("rank1_memory_snapshot.pickle.gz"),
        )
        .unwrap();
        TwoPrograms(d)
    }
    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TwoPrograms {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn captures_of_two_programs_are_no_job() {
    let two = TwoPrograms::new("cli");
    let dir = two.path();
    // analyze DIR (and report, tui, which load the job the same way): exit 2, and why.
    let o = memscope(&["analyze", dir], &[]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("share no source file"), "{err}");
    assert!(
        err.contains("generate.py") && err.contains("exit_logits.py"),
        "{err}"
    );
    assert!(err.contains("not ranks of one job"), "{err}");
    match library_job(two.0.strip_prefix(root()).unwrap().to_str().unwrap()) {
        Err(memscope::job::JobError::Unrelated(u)) => {
            assert!(u.first.ends_with("rank0_memory_snapshot.pickle"));
            assert!(u.other.ends_with("rank1_memory_snapshot.pickle.gz"));
        }
        other => panic!("{:?}", other.map(|j| j.ranks.len())),
    }
    // check: each file is checked, but they are no rank group and have no imbalance.
    let c = data(&[
        "check",
        "--format",
        "json",
        "--no-config",
        "--fail-on",
        "oom",
        dir,
    ]);
    assert_eq!(c["files"].as_array().unwrap().len(), 2);
    assert_eq!(c["groups"], json!([]));
    assert_eq!(c["not_one_job"].as_array().unwrap().len(), 1);
    let text = stdout_ok(&["check", "--no-config", "--fail-on", "oom", dir]);
    assert!(text.contains("NOT RANKS OF ONE JOB"), "{text}");
    assert!(!text.contains("imbalance: max/min"), "{text}");
    // With a limit on the imbalance, nothing to measure: exit 2, never a PASS.
    let o = memscope(
        &["check", "--no-config", "--max-imbalance", "10%", dir],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--max-imbalance is set, but"));
    // Two profiler traces of two programs (issue #40 saw `check` take such a pair as ranks
    // with an imbalance): a trace's memory events carry no stack, but its leak and graph
    // growth findings name their lines.
    let traces = data(&[
        "check",
        "--format",
        "json",
        "--no-config",
        "--fail-on",
        "oom",
        "fixtures/loops/story/exit_logits_mlp_leak/memscope-trace.json.gz",
        "fixtures/trace_total_loss.trace.json.gz",
    ]);
    assert_eq!(traces["groups"], json!([]));
    let u = &traces["not_one_job"][0];
    assert_eq!(u["first_files"], json!(["exit_logits.py"]));
    assert_eq!(u["other_files"], json!(["generate.py"]));
    // Ranks of one program stay one group.
    let same_program = data(&[
        "check",
        "--format",
        "json",
        "--no-config",
        "--fail-on",
        "oom",
        "fixtures/ranks/multi40/ddp",
    ]);
    assert_eq!(same_program["groups"].as_array().unwrap().len(), 1);
    assert!(same_program.get("not_one_job").is_none());
}

struct Mcp {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    next: i64,
}

impl Mcp {
    fn start() -> Mcp {
        let mut child = Command::new(env!("CARGO_BIN_EXE_memscope"))
            .arg("mcp")
            .current_dir(root())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut m = Mcp {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
            next: 1,
        };
        m.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
        );
        writeln!(
            m.stdin,
            "{}",
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
        )
        .unwrap();
        m
    }
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin, "{msg}").unwrap();
        self.stdin.flush().unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let r: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(r["id"], id, "{r}");
        r
    }
    fn call(&mut self, tool: &str, args: Value) -> Value {
        let r = self.request("tools/call", json!({"name": tool, "arguments": args}));
        assert!(r["error"].is_null(), "{r}");
        r["result"].clone()
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn text_of(r: &Value) -> &str {
    r["content"][0]["text"].as_str().unwrap()
}

#[test]
fn mcp_analyze_reads_a_rank_directory_inside_its_roots_only() {
    let mut m = Mcp::start();
    // The same job as `memscope analyze DIR --format json`, paths as the client wrote them.
    let dir = "fixtures/ranks/multi40/ddp";
    let cli = data(&["analyze", "--format", "json", dir]);
    let r = m.call("analyze", json!({"path": dir}));
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"], cli);
    let t = text_of(&r);
    assert!(t.starts_with("job of 2 ranks\n"), "{t}");
    assert!(t.contains("leak_ranks: [0]"), "{t}");
    assert!(t.contains("imbalance: max/min 1.27x, spread 21.4%"), "{t}");
    assert!(t.contains(memscope::wording::job::IMBALANCE_HOW), "{t}");
    // check over MCP takes the directory too.
    let c = m.call("check", json!({"paths": [dir], "fail_on": ["oom"]}));
    assert_eq!(c["isError"], false, "{c}");
    assert_eq!(
        c["structuredContent"]["groups"][0]["imbalance"],
        cli["imbalance"]
    );

    // Two programs: refused as one job, with the reason.
    let two = TwoPrograms::new("mcp");
    let r = m.call("analyze", json!({"path": two.path()}));
    assert_eq!(r["isError"], true, "{r}");
    assert!(text_of(&r).contains("share no source file"), "{r}");
    // Names read from the captures come quoted, as every capture string in a tool's text.
    assert!(
        text_of(&r).contains("allocates from \"generate.py\""),
        "{r}"
    );

    // Confinement: a directory outside the roots, and a capture in a directory under them that
    // links outside, are refused as a file outside the roots is.
    let outside = std::env::temp_dir().join(format!("job40-outside-{}", std::process::id()));
    std::fs::create_dir_all(&outside).unwrap();
    let target = outside.join("rank0_memory_snapshot.pickle");
    std::fs::copy(root().join("fixtures/clean.pickle"), &target).unwrap();
    let r = m.call("analyze", json!({"path": outside.to_str().unwrap()}));
    assert_eq!(r["isError"], true);
    assert!(text_of(&r).contains("outside the roots"), "{r}");
    let inside = TwoPrograms::new("link");
    std::fs::remove_file(inside.0.join("rank1_memory_snapshot.pickle.gz")).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(&target, inside.0.join("rank1_memory_snapshot.pickle")).unwrap();
    let r = m.call("analyze", json!({"path": inside.path()}));
    assert_eq!(r["isError"], true, "{r}");
    assert!(text_of(&r).contains("outside the roots"), "{r}");
    // A symlinked directory is not followed: the walk finds the one real capture.
    std::fs::remove_file(inside.0.join("rank1_memory_snapshot.pickle")).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(&outside, inside.0.join("more")).unwrap();
    let r = m.call("analyze", json!({"path": inside.path()}));
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["ranks"].as_array().unwrap().len(), 1);
    std::fs::remove_dir_all(&outside).unwrap();
    // `-` and a pipe stay refused, as before.
    let r = m.call("analyze", json!({"path": "-"}));
    assert_eq!(r["isError"], true);
}
