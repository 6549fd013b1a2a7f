//! The gate's rules on real captures: read from the analysis' own typed fields (this file
//! does not compile if a field a rule reads is renamed), SKIP where a capture cannot support a
//! judgement, errors where a limit the user set has nothing to measure, and ranks grouped by
//! run and kind (a snapshot and a trace are two views, not two ranks).
//!
//! Truth for each capture is written beside its use: from `fixtures/README.md` (what the
//! generator did) or from the file's own text (`distributedInfo`, read with `zcat | grep`).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use memscope::analysis::{Analysis, NotJudged};
use memscope::check::rules::{
    FragmentationRule, GraphGrowthRule, GrowthPerStepRule, LeakRule, OomRule, PeakRule, Rule,
    RuleId,
};
use memscope::check::summary::{RankInfo, RankSource};
use memscope::check::{self, Measurable, Status};
use memscope::inputs::Loaded;

use crate::shared;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn own(name: &str) -> PathBuf {
    root().join("fixtures").join(name)
}

/// How a baseline names `rel` (a path from the checkout's root): from the repository root
/// in a git checkout, else by its file name.
fn repo_path(rel: &str) -> String {
    if root().join(".git").exists() {
        rel.to_owned()
    } else {
        rel.rsplit('/').next().unwrap().to_owned()
    }
}

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memscope"));
    c.env_remove("GITHUB_ACTIONS")
        .env_remove("GITHUB_STEP_SUMMARY")
        .env("NO_COLOR", "1")
        .arg("check")
        .arg("--no-config");
    c
}

fn run(cmd: &mut Command) -> (i32, String, String) {
    let o = cmd.output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8(o.stderr).unwrap(),
    )
}

fn json(cmd: &mut Command) -> (i32, serde_json::Value) {
    let (code, out, err) = run(cmd.args(["--format", "json"]));
    assert!(code == 0 || code == 1, "exit {code}: {err}");
    (code, common::envelope::data_str(&out))
}

fn analysis(p: &Path) -> Analysis {
    match memscope::inputs::load(p, false).unwrap() {
        Loaded::Analysis(a) => *a,
        _ => panic!("{} is a snapshot", p.display()),
    }
}

fn peak(a: &Analysis, reserved: bool) -> u64 {
    a.devices
        .iter()
        .map(|d| {
            if reserved {
                d.peak_reserved_bytes
                    .or(d.observed_peak_reserved_bytes)
                    .max(d.reserved_bytes)
                    .unwrap()
            } else {
                d.peak_allocated_bytes
                    .unwrap_or(d.observed_peak_allocated_bytes)
                    .max(d.allocated_bytes.unwrap())
            }
        })
        .max()
        .unwrap()
}

/// Each rule's measurement is the analysis' typed field: renaming `peak_allocated_bytes`,
/// `growth_bytes_per_step`, `leak_judgement`, `ooms`, ... breaks this test's build.
#[test]
fn rules_measure_the_analysis_own_fields() {
    // leak_val_no_grad: a validation leak of about 22 MiB per batch (fixtures/README.md).
    let a = analysis(&own("leak_val_no_grad.pickle"));
    let s = check::summarize(&a);
    assert!(a.verdict.leak_judgement.judged);
    for reserved in [false, true] {
        let r = PeakRule { limit: 0, reserved }.apply(&s);
        assert_eq!(r.measured, Some(peak(&a, reserved) as f64), "{r:?}");
        assert_eq!(r.status, Status::Fail);
    }
    let worst = a
        .leaks
        .iter()
        .max_by(|x, y| {
            x.leak
                .growth_bytes_per_step
                .total_cmp(&y.leak.growth_bytes_per_step)
        })
        .expect("the fixture leaks");
    let g = GrowthPerStepRule { limit: 1 << 20 }.apply(&s);
    assert_eq!(g.measured, Some(worst.leak.growth_bytes_per_step));
    assert_eq!(g.site, worst.leak.site);
    assert_eq!(g.status, Status::Fail);
    let mib = worst.leak.growth_bytes_per_step / (1u64 << 20) as f64;
    assert!((18.0..26.0).contains(&mib), "{mib} MiB/step");
    let l = LeakRule.apply(&s);
    assert_eq!(l.status, Status::Fail);
    assert_eq!(l.measured, Some(a.leaks.len() as f64));
    let o = OomRule.apply(&s);
    let ooms: usize = a.devices.iter().map(|d| d.ooms.len()).sum();
    assert_eq!((o.measured, o.status), (Some(ooms as f64), Status::Pass));
    // A snapshot has no autograd graph: the rule does not apply to it.
    let gr = GraphGrowthRule {
        id: RuleId::GraphGrowth,
        limit: 0.0,
    };
    assert!(matches!(gr.measurable(&s), Measurable::NotThisKind(_)));
    assert_eq!(gr.apply(&s).status, Status::Skip);

    // fn_forward: three forward passes whose outputs are all kept (fixtures/attribution/
    // README.md): memory rises at the end of each of the 3 steps, too few rising steps to tell a
    // leak from warm-up: SKIP with that reason, never PASS.
    let a = analysis(&own("attribution/fn_forward.pickle.gz"));
    let s = check::summarize(&a);
    let j = a.verdict.leak_judgement;
    assert!(!j.judged);
    assert_eq!((j.reason, j.steps), (Some(NotJudged::RisingTooFewSteps), 3));
    let l = LeakRule.apply(&s);
    assert_eq!(l.status, Status::Skip, "{l:?}");
    assert!(
        l.message.contains("3 complete steps")
            && l.message.contains(&format!(
                "needs {} rising steps",
                memscope::analysis::leaks::MIN_RISING_STEPS
            )),
        "{}",
        l.message
    );
    assert!(matches!(
        GrowthPerStepRule { limit: 0 }.measurable(&s),
        Measurable::Nothing(_)
    ));
    // huge_request_oom: four correct steps, then an 8 GiB request (fixtures/README.md).
    let a = analysis(&own("huge_request_oom.pickle"));
    let s = check::summarize(&a);
    let o = OomRule.apply(&s);
    assert_eq!(o.status, Status::Fail);
    assert_eq!(o.site, a.devices[0].ooms[0].site);
}

#[test]
fn unjudged_captures_skip_and_explicit_limits_with_nothing_to_measure_are_errors() {
    let short = own("attribution/fn_forward.pickle.gz");
    // Without limits: the leak rule SKIPs, and nothing fails.
    let (code, out, _) = run(bin().arg(&short));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.lines()
            .any(|l| l.contains("SKIP leak") && l.contains("3 complete steps")),
        "{out}"
    );
    // A growth limit on a capture too short to judge growth: exit 2, naming the file and why.
    let (code, _, err) = run(bin().args(["--max-growth-per-step", "1MiB"]).arg(&short));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--max-growth-per-step") && err.contains("fn_forward.pickle.gz"),
        "{err}"
    );
    // A graph limit where no input has a graph (snapshots only): exit 2.
    let (code, _, err) = run(bin()
        .args(["--max-graph-growth", "0"])
        .arg(own("clean.pickle")));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no autograd graph"), "{err}");
    // ... but beside a trace it applies to the trace and SKIPs the snapshot.
    let (code, v) = json(
        bin()
            .args(["--max-graph-growth", "0"])
            .arg(own("clean.pickle"))
            .arg(own("trace_clean.trace.json.gz")),
    );
    assert_eq!(code, 0, "{v}");
    let Some(hta) = shared::corpus("traces/hta/trace_filter/sampled_rank-0.json.gz") else {
        return;
    };
    // A trace recorded without profile_memory: no memory events (checked with
    // `zcat | grep -c '\[memory\]'` = 0). Leaks SKIP; a peak limit is an error.
    let (code, out, _) = run(bin().arg(&hta));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.lines()
            .any(|l| l.contains("SKIP leak") && l.contains("no memory events")),
        "{out}"
    );
    // Two profiled steps (the analysis' note says so): graph growth is not judged either.
    assert!(
        out.lines()
            .any(|l| l.contains("SKIP graph-growth") && l.contains("2 profiled steps")),
        "{out}"
    );
    let (code, _, err) = run(bin().args(["--max-graph-growth", "0"]).arg(&hta));
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run(bin().args(["--max-peak", "1GiB"]).arg(&hta));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no device memory recorded"), "{err}");
}

/// `leak_total_loss.pickle` and `trace_total_loss.trace.json.gz` record one workload
/// (`total_loss += loss`) as a snapshot and as a trace (fixtures/README.md): the snapshot
/// shows no GPU growth, the trace one never-backpropagated `aten::add_` per step.
#[test]
fn snapshot_and_trace_of_one_run_are_checked_side_by_side() {
    let (code, v) = json(
        bin()
            .args(["--fail-on", "oom,leak,graph-growth"])
            .arg(own("leak_total_loss.pickle"))
            .arg(own("trace_total_loss.trace.json.gz")),
    );
    assert_eq!(code, 1);
    assert_eq!(v["groups"], serde_json::json!([]), "no ranks: {v}");
    assert_eq!(v["ranks_rules"], serde_json::json!([]));
    let rule = |f: usize, id: &str| {
        v["files"][f]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["rule"] == id)
            .unwrap_or_else(|| panic!("no {id} in {}", v["files"][f]))
            .clone()
    };
    assert_eq!(v["files"][0]["kind"], "snapshot");
    assert_eq!(rule(0, "leak")["status"], "pass");
    assert_eq!(rule(0, "graph-growth")["status"], "skip");
    assert_eq!(v["files"][1]["kind"], "trace");
    let g = rule(1, "graph-growth");
    assert_eq!(g["status"], "fail");
    assert!(g["message"].as_str().unwrap().contains("aten::add_"), "{g}");
    // And an imbalance limit has no ranks to compare here: an error, not a PASS.
    let (code, _, err) = run(bin()
        .args(["--max-imbalance", "10%"])
        .arg(own("leak_total_loss.pickle"))
        .arg(own("trace_total_loss.trace.json.gz")));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no two inputs are ranks"), "{err}");
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn ranks_from_distributed_info_file_names_and_flags() {
    let hta = "traces/hta/";
    let (Some(r0), Some(r1), Some(t1), Some(c3), Some(cpu), Some(none), Some(norank)) = (
        shared::corpus(&format!("{hta}trace_filter/sampled_rank-0.json.gz")),
        shared::corpus(&format!("{hta}trace_filter/sampled_rank-1.json.gz")),
        shared::corpus(&format!("{hta}trace_diff/test/test.json.gz")),
        shared::corpus(&format!("{hta}trace_diff/control/control.json.gz")),
        shared::corpus(&format!(
            "{hta}cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
        )),
        shared::corpus(&format!(
            "{hta}distributed_info_unavailable/distributed_info_not_found.json.gz"
        )),
        shared::corpus(&format!("{hta}rank_unavailable/rank_not_found.json.gz")),
    ) else {
        return;
    };
    // `zcat FILE | grep -o '"distributedInfo"[^}]*}'`:
    //   sampled_rank-0: {"backend": "nccl", "rank": 0, "world_size": 128}; -1: rank 1.
    //   trace_diff/test: rank 1, world_size 2; trace_diff/control: rank 3, world_size 8.
    //   cpu_only: rank 34, world_size 300, with a nested pg_config.
    //   distributed_info_not_found: none; rank_not_found: {"backend": "nccl"} (no rank).
    let rank = |p: &Path| {
        memscope::inputs::load_summaries(&[p], false).unwrap()[0]
            .rank
            .clone()
    };
    let di = |rank, world_size| {
        Some(RankInfo {
            rank,
            world_size,
            source: RankSource::DistributedInfo,
        })
    };
    assert_eq!(rank(&r1), di(1, Some(128)));
    assert_eq!(rank(&cpu), di(34, Some(300)));
    assert_eq!(rank(&c3), di(3, Some(8)));
    assert_eq!(rank(&none), None);
    assert_eq!(rank(&norank), None);

    // Given in reverse order: ranked by distributedInfo, one run of world size 128.
    let (_, v) = json(bin().arg(&r1).arg(&r0));
    let g = &v["groups"];
    assert_eq!(g.as_array().unwrap().len(), 1, "{v}");
    assert_eq!(g[0]["kind"], "trace");
    assert_eq!(g[0]["run"], "world size 128");
    let ranks = g[0]["ranks"].as_array().unwrap();
    assert_eq!(
        (ranks[0]["rank"].as_u64(), ranks[0]["input"].as_u64()),
        (Some(0), Some(1))
    );
    assert_eq!(
        (ranks[1]["rank"].as_u64(), ranks[1]["input"].as_u64()),
        (Some(1), Some(0))
    );
    assert!(ranks.iter().all(|r| r["source"] == "distributed_info"));
    // These traces hold no memory events: the imbalance limit has nothing to measure.
    let (code, _, err) = run(bin().args(["--max-imbalance", "10%"]).arg(&r1).arg(&r0));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("recorded no device memory"), "{err}");
    // Leaks are not judged: the table says "-", not 0.
    assert!(ranks.iter().all(|r| r["leaks"].is_null()), "{v}");

    // Ranks of two different runs (world sizes 2 and 8) are not compared.
    let (_, v) = json(bin().arg(&t1).arg(&c3));
    assert_eq!(v["groups"], serde_json::json!([]), "{v}");

    // Without distributedInfo ranks: `--rank N=FILE` numbers them ...
    let arg = |n: u32, p: &Path| format!("{n}={}", p.display());
    let (_, v) = json(
        bin()
            .arg("--rank")
            .arg(arg(5, &none))
            .arg("--rank")
            .arg(arg(2, &norank)),
    );
    let ranks = v["groups"][0]["ranks"].as_array().unwrap().clone();
    assert_eq!(ranks.len(), 2, "{v}");
    assert_eq!(
        (ranks[0]["rank"].as_u64(), ranks[0]["source"].as_str()),
        (Some(2), Some("explicit"))
    );
    assert!(ranks[0]["path"]
        .as_str()
        .unwrap()
        .ends_with("rank_not_found.json.gz"));
    assert_eq!(ranks[1]["rank"].as_u64(), Some(5));
    // One rank given to two files is a contradiction: exit 2, naming both.
    let (code, _, err) = run(bin()
        .arg("--rank")
        .arg(arg(0, &none))
        .arg("--rank")
        .arg(arg(0, &norank)));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--rank 0 is given to two files")
            && err.contains("distributed_info_not_found")
            && err.contains("rank_not_found"),
        "{err}"
    );
    // ... and without anything, they are ranks in the order given, and the table says so.
    let (_, out, _) = run(bin().arg(&none).arg(&norank));
    assert!(out.contains("ranks in the order given"), "{out}");
}

/// Summaries (`memscope baseline` files) are accepted wherever captures are, and a check over
/// them gives the verdicts of the check over the captures.
#[test]
fn summaries_check_like_their_captures() {
    let mut caps = vec![
        own("clean.pickle"),
        own("leak_val_no_grad.pickle"),
        own("huge_request_oom.pickle"),
        own("trace_total_loss.trace.json.gz"),
    ];
    if let (Some(a), Some(b)) = (
        shared::corpus("traces/hta/trace_filter/sampled_rank-0.json.gz"),
        shared::corpus("traces/hta/trace_filter/sampled_rank-1.json.gz"),
    ) {
        caps.extend([a, b]);
    }
    let dir = std::env::temp_dir().join(format!("memscope-gate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut sums = Vec::new();
    for (i, c) in caps.iter().enumerate() {
        let out = dir.join(format!("s{i}.json"));
        let st = Command::new(env!("CARGO_BIN_EXE_memscope"))
            .arg("baseline")
            .arg(c)
            .arg("-o")
            .arg(&out)
            .status()
            .unwrap();
        assert!(st.success());
        sums.push(out);
    }
    let flags = ["--fail-on", "oom,leak,fragmentation,graph-growth"];
    let (c1, over_caps) = json(bin().args(flags).args(&caps));
    let (c2, over_sums) = json(bin().args(flags).args(&sums));
    assert_eq!(c1, c2);
    // The summaries store paths from the repository root (or the file name): a committed
    // file never holds this machine's absolute paths.
    let strip = |v: &serde_json::Value| {
        let mut v = v["files"].clone();
        for f in v.as_array_mut().unwrap() {
            let p = f["path"].as_str().unwrap().to_owned();
            let name = p.rsplit('/').next().unwrap().to_owned();
            f["path"] = name.into();
        }
        v
    };
    assert_eq!(
        over_sums["files"][0]["path"],
        repo_path("fixtures/clean.pickle")
    );
    assert_eq!(strip(&over_caps), strip(&over_sums));
    let ranks = |v: &serde_json::Value| -> Vec<(u64, u64)> {
        v["groups"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["ranks"].as_array().unwrap().clone())
            .map(|r| (r["rank"].as_u64().unwrap(), r["input"].as_u64().unwrap()))
            .collect()
    };
    assert_eq!(ranks(&over_caps), ranks(&over_sums));
    assert_eq!(over_caps["passed"], over_sums["passed"]);
    std::fs::remove_dir_all(&dir).ok();
}

/// `leak_hook.pickle` records `fixtures/generate.py` (line 437, `out = model(x)` under the
/// hook; fixtures/README.md), `trace_total_loss` the same file through the profiler, whose
/// lines are where a frame was entered. Annotations land in a temporary checkout whose files
/// end like the recorded paths, and a trace finding is annotated at file level.
#[test]
fn annotations_land_in_the_checkout() {
    let ws = std::env::temp_dir().join(format!("memscope-gate-ws-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&ws);
    std::fs::create_dir_all(ws.join("src/fixtures")).unwrap();
    std::fs::write(ws.join("src/fixtures/generate.py"), "# moved checkout\n").unwrap();
    let gha = |extra: &[&str], file: &Path| {
        let mut c = bin();
        c.env("GITHUB_ACTIONS", "true")
            .env("GITHUB_WORKSPACE", &ws)
            .current_dir(&ws)
            .args(["--fail-on", "leak,graph-growth"])
            .args(extra)
            .arg(file);
        let (code, _, err) = run(&mut c);
        assert_eq!(code, 1, "{err}");
        err.lines()
            .filter(|l| l.starts_with("::error"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let hook = own("leak_hook.pickle");
    // Not under the workspace root as recorded: no file, and the message says where it was.
    let a = gha(&[], &hook);
    assert!(!a[0].contains("file="), "{a:?}");
    assert!(a[0].contains("not found in the checkout"), "{a:?}");
    // With the source root: the longest suffix that exists, from the repository root.
    let src = ws.join("src");
    let a = gha(&["--source-root", src.to_str().unwrap()], &hook);
    assert!(
        a[0].starts_with("::error file=src/fixtures/generate.py,line=437,"),
        "{a:?}"
    );
    // A prefix to strip wins over the suffix search.
    std::fs::write(ws.join("src/generate.py"), "# flat copy\n").unwrap();
    let a = gha(
        &[
            "--source-root",
            src.to_str().unwrap(),
            "--strip-prefix",
            "fixtures/",
        ],
        &hook,
    );
    assert!(
        a[0].starts_with("::error file=src/generate.py,line=437,"),
        "{a:?}"
    );
    // A trace finding: the file, the function in the title, no line.
    let a = gha(
        &["--source-root", src.to_str().unwrap()],
        &own("trace_total_loss.trace.json.gz"),
    );
    let g = a.iter().find(|l| l.contains("graph-growth")).unwrap();
    assert!(
        g.starts_with("::error file=src/fixtures/generate.py,title=")
            && g.contains("(in sc_trace_total_loss)")
            && !g.contains("line="),
        "{g}"
    );
    std::fs::remove_dir_all(&ws).ok();
}

/// Two captures of one workload from two versions of a script (fixtures/motion/v1.py and
/// v2.py, run as the same file on the GPU machine): v2 inserts lines above the loop, moves
/// `make_batch` below `train_step`, and keeps a 16 MiB scratch buffer at line 43 in `run`.
/// Truth from the captures' stats.json: allocated at the end 93 347 840 -> 110 125 056 and
/// the peak 114 335 744 -> 131 112 960, both +16 777 216 bytes. The diff must show the
/// scratch buffer as the one new site and every other site as moved: nothing gone.
#[test]
fn diff_is_robust_to_code_motion() {
    let (v1, v2) = (
        own("motion/motion_v1.pickle.gz"),
        own("motion/motion_v2.pickle.gz"),
    );
    let o = Command::new(env!("CARGO_BIN_EXE_memscope"))
        .current_dir(root())
        .args([
            "diff",
            "--format",
            "json",
            "fixtures/motion/motion_v1.pickle.gz",
            "fixtures/motion/motion_v2.pickle.gz",
        ])
        .output()
        .unwrap();
    assert!(o.status.success());
    let d = common::envelope::data(&o.stdout);
    // The inputs as given.
    assert_eq!(d["before"], "fixtures/motion/motion_v1.pickle.gz");
    let dev = &d["devices"][0];
    assert_eq!(dev["peak_allocated"]["delta"], 16_777_216);
    assert_eq!(dev["end_allocated"]["delta"], 16_777_216);
    for list in ["sites_at_peak", "sites_at_end"] {
        let changes = dev[list].as_array().unwrap();
        let new: Vec<_> = changes.iter().filter(|c| c["status"] == "new").collect();
        assert_eq!(new.len(), 1, "{list}: {changes:?}");
        assert_eq!(new[0]["site"]["line"], 43);
        assert_eq!(new[0]["site"]["function"], "run");
        assert_eq!(new[0]["after_bytes"], 16_777_216);
        for c in changes.iter().filter(|c| c["status"] != "new") {
            assert_eq!(c["status"], "moved", "{list}: {c}");
            assert_eq!(c["delta_bytes"], 0, "{c}");
            assert_eq!(c["site"]["function"], c["moved_from"]["function"], "{c}");
        }
    }
    // The batch of the step at the peak, from the moved function.
    assert!(dev["sites_at_peak"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["site"]["function"] == "make_batch" && c["status"] == "moved"));
    assert_eq!(d["largest_growth"]["site"]["line"], 43);
    // Steps aligned by index: eight on each side, each 16 MiB higher.
    let steps = d["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 8);
    assert!(steps.iter().all(|s| s["delta"] == 16_777_216), "{steps:?}");

    // A step present in one run only is reported as such, not as growth from nothing.
    let sum = |p: &Path| {
        memscope::inputs::load_summaries(&[p], false)
            .unwrap()
            .remove(0)
    };
    let (b, mut a) = (sum(&v1), sum(&v2));
    a.steps.as_mut().unwrap().pop();
    let d = check::diff::diff(&b, &a);
    let only: Vec<_> = d.steps.iter().filter(|s| s.after.is_none()).collect();
    assert_eq!(only.len(), 1);
    assert_eq!(only[0].delta, 0);
    assert_eq!(d.steps.len(), 8);
}

#[test]
fn baselines_store_repository_paths_and_the_version() {
    let o = Command::new(env!("CARGO_BIN_EXE_memscope"))
        .current_dir(root())
        .arg("baseline")
        .arg(own("clean.pickle"))
        .args(["-o", "-"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let b: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(b["inputs"][0]["path"], repo_path("fixtures/clean.pickle"));
    assert_eq!(
        b["generator"],
        concat!("memscope ", env!("CARGO_PKG_VERSION"))
    );
}

/// What a capture could not have recorded is not judged: ranks without device memory have no
/// figures (not zeros) and no imbalance, and a capture that could not have recorded an OOM
/// does not PASS `oom`.
#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn what_was_not_recorded_is_not_judged() {
    let hta = "traces/hta/trace_filter/";
    let (Some(r0), Some(r1), Some(torch20), Some(verl)) = (
        shared::corpus(&format!("{hta}sampled_rank-0.json.gz")),
        shared::corpus(&format!("{hta}sampled_rank-1.json.gz")),
        shared::corpus("snapshots/llm_inference_oom.pickle"),
        shared::corpus("snapshots/verl_pending_free.pickle"),
    ) else {
        return;
    };
    // The two HTA ranks: no `[memory]` events (`zcat | grep -c '\[memory\]'` = 0), so
    // neither an OOM nor a peak could have been recorded.
    let (code, v) = json(bin().arg(&r0).arg(&r1));
    assert_eq!(code, 0, "{v}");
    let g = &v["groups"][0];
    assert!(g["imbalance"].is_null(), "{g}");
    assert!(g["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["has_memory"] == false));
    for f in v["files"].as_array().unwrap() {
        let oom = f["rules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["rule"] == "oom")
            .unwrap();
        assert_eq!(oom["status"], "skip", "{oom}");
        assert!(
            oom["message"]
                .as_str()
                .unwrap()
                .contains("no memory events"),
            "{oom}"
        );
    }
    let (_, out, _) = run(bin().arg(&r0).arg(&r1));
    assert!(
        out.contains("imbalance: not measured (2 of 2 ranks recorded no device memory)"),
        "{out}"
    );
    let row = out
        .lines()
        .find(|l| l.trim_start().starts_with("0 ") && l.contains("sampled_rank-0"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(!row.contains(" B "), "no byte figures for rank 0: {row}");
    assert_eq!(
        row.split_whitespace().take(4).collect::<Vec<_>>(),
        ["0", "-", "-", "-"],
        "{row}"
    );
    // Two snapshots without allocation history (corpus/README.md: llm_inference_oom is a
    // torch 2.0 layout holding one `snapshot` trace entry, verl_pending_free has no event
    // history): a snapshot records OOMs in that history, so `oom` and `fragmentation` SKIP.
    for p in [&torch20, &verl] {
        let a = analysis(p);
        assert!(a
            .devices
            .iter()
            .all(|d| !d.has_history && d.ooms.is_empty()));
        let s = check::summarize(&a);
        for rule in [&OomRule as &dyn Rule, &FragmentationRule] {
            assert!(
                matches!(rule.measurable(&s), Measurable::Nothing(_)),
                "{}",
                p.display()
            );
            let r = rule.apply(&s);
            assert_eq!(r.status, Status::Skip, "{r:?}");
            assert!(r.message.contains("no allocation history"), "{r:?}");
        }
    }
    let (code, out, _) = run(bin()
        .args(["--fail-on", "oom,fragmentation"])
        .arg(&torch20)
        .arg(own("fragmentation_oom.pickle")));
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("SKIP oom") && out.contains("FAIL fragmentation"),
        "{out}"
    );
    // A snapshot with history and no OOM (fixtures/README.md: clean.pickle, 14 steps) earns
    // its PASS.
    let s = check::summarize(&analysis(&own("clean.pickle")));
    assert_eq!(OomRule.apply(&s).status, Status::Pass);
    assert_eq!(FragmentationRule.apply(&s).status, Status::Pass);
    // A baseline of a trace without memory says why there is nothing to compare.
    let dir = std::env::temp_dir().join(format!("memscope-gate-nomem-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let base = dir.join("base.json");
    let st = Command::new(env!("CARGO_BIN_EXE_memscope"))
        .arg("baseline")
        .arg(&r0)
        .arg("-o")
        .arg(&base)
        .status()
        .unwrap();
    assert!(st.success());
    let (code, out, _) = run(bin().arg("--baseline").arg(&base).arg(&r0));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.lines().any(|l| l.contains("SKIP baseline-peak")
            && l.contains("no device memory recorded, here or in the baseline")),
        "{out}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// A native site (no Python frame; `cs336_silmont_mem.pickle` holds 512 MiB blocks whose
/// frames are all C++ with line 0: `python3 -c 'import pickle; ...'` over `device_traces`)
/// has no file and no line: never annotated at one, in any format.
#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn native_sites_name_the_function_not_a_file() {
    let Some(p) = shared::corpus("snapshots/cs336_silmont_mem.pickle") else {
        return;
    };
    let (code, out, _) = run(bin().args(["--max-peak", "1MiB"]).arg(&p));
    assert_eq!(code, 1, "{out}");
    let at = out
        .lines()
        .find(|l| l.trim_start().starts_with("at "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        // Named by the autograd node that allocated, not by ATen's allocation helper.
        at.contains("DivBackward0::apply") && at.ends_with("(native; no Python frame)"),
        "{at}"
    );
    assert!(!out.contains(":0 in"), "{out}");
    let o = bin()
        .args(["--max-peak", "1MiB", "--format", "junit"])
        .arg(&p)
        .output()
        .unwrap();
    let xml = String::from_utf8(o.stdout).unwrap();
    let case = xml
        .lines()
        .find(|l| l.contains("<testcase name=\"max-peak\""))
        .unwrap();
    assert!(!case.contains("file=") && !case.contains("line="), "{case}");
    let ws = std::env::temp_dir().join(format!("memscope-gate-native-{}", std::process::id()));
    std::fs::create_dir_all(&ws).unwrap();
    let o = bin()
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_WORKSPACE", &ws)
        .args(["--max-peak", "1MiB"])
        .arg(&p)
        .output()
        .unwrap();
    let err = String::from_utf8(o.stderr).unwrap();
    let a = err.lines().find(|l| l.starts_with("::error")).unwrap();
    assert!(
        a.starts_with("::error title=") && !a.contains("not found in the checkout"),
        "{a}"
    );
    std::fs::remove_dir_all(&ws).ok();
}

/// A recorded absolute path of another machine lands in the checkout:
/// `octree_nca_b_segment_free.pickle` peaks at
/// `/gris/gris-f/homestud/nlemke/NCA/src/models/Model_BasicNCA3D.py:77` (its top site at the
/// peak, `memscope analyze`; the path is in the pickle's frames), and a trace's JUnit case
/// names the file but never the frame's stale line.
#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn absolute_recorded_paths_land_and_trace_lines_stay_unknown() {
    let Some(p) = shared::corpus("snapshots/octree_nca_b_segment_free.pickle") else {
        return;
    };
    let ws = std::env::temp_dir().join(format!("memscope-gate-abs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&ws);
    std::fs::create_dir_all(ws.join("NCA/src/models")).unwrap();
    std::fs::create_dir_all(ws.join("other/models")).unwrap();
    std::fs::write(ws.join("NCA/src/models/Model_BasicNCA3D.py"), "# here\n").unwrap();
    std::fs::write(ws.join("other/models/Model_BasicNCA3D.py"), "# a decoy\n").unwrap();
    let annotate = |workspace: &Path, extra: &[&str]| {
        let o = bin()
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_WORKSPACE", workspace)
            .current_dir(workspace)
            .args(["--max-peak", "1MiB"])
            .args(extra)
            .arg(&p)
            .output()
            .unwrap();
        let err = String::from_utf8(o.stderr).unwrap();
        err.lines()
            .find(|l| l.starts_with("::error"))
            .unwrap_or_else(|| panic!("{err}"))
            .to_owned()
    };
    // The longest suffix that exists wins over the decoy with a shorter one.
    let a = annotate(&ws, &[]);
    assert!(
        a.starts_with("::error file=NCA/src/models/Model_BasicNCA3D.py,line=77,"),
        "{a}"
    );
    // The repository is NCA/: the path is written from its root.
    let a = annotate(&ws.join("NCA"), &[]);
    assert!(
        a.starts_with("::error file=src/models/Model_BasicNCA3D.py,line=77,"),
        "{a}"
    );
    let a = annotate(
        &ws.join("NCA"),
        &["--strip-prefix", "/gris/gris-f/homestud/nlemke/NCA/"],
    );
    assert!(
        a.starts_with("::error file=src/models/Model_BasicNCA3D.py,line=77,"),
        "{a}"
    );
    std::fs::remove_dir_all(&ws).ok();

    // trace_total_loss: graph growth in sc_trace_total_loss (fixtures/README.md).
    let o = bin()
        .args(["--format", "junit"])
        .arg(own("trace_total_loss.trace.json.gz"))
        .output()
        .unwrap();
    let xml = String::from_utf8(o.stdout).unwrap();
    let case = xml
        .lines()
        .find(|l| l.contains("<testcase name=\"graph-growth\""))
        .unwrap();
    assert!(
        case.contains("file=\"fixtures/generate.py\"") && !case.contains("line="),
        "{case}"
    );
}

/// A trace whose memory events are all on the CPU: `kineto_resnet50_torch19_mem` (corpus)
/// with its CUDA memory events (`"Device Type": 1`) removed at test time. Leaks are not
/// judged (SKIP), and limits on device memory or growth have nothing to measure (exit 2).
#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn cpu_only_memory_is_not_judged() {
    let Some(src) = shared::corpus("traces/other/kineto_resnet50_torch19_mem.pt.trace.json.gz")
    else {
        return;
    };
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::GzDecoder::new(std::fs::File::open(&src).unwrap()),
        &mut text,
    )
    .unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let events = v["traceEvents"].as_array_mut().unwrap();
    let before = events.len();
    let cuda = |e: &serde_json::Value| e["name"] == "[memory]" && e["args"]["Device Type"] == 1;
    let cpu = events
        .iter()
        .filter(|e| e["name"] == "[memory]" && !cuda(e))
        .count();
    events.retain(|e| !cuda(e));
    assert!(cpu > 0 && events.len() < before, "{cpu} CPU events");
    let dir = std::env::temp_dir().join(format!("memscope-gate-cpu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("cpu_only_mem.json");
    std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
    let (code, out, _) = run(bin().arg(&p));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.lines()
            .any(|l| l.contains("SKIP leak") && l.contains("all on the CPU")),
        "{out}"
    );
    for limit in [["--max-growth-per-step", "1MiB"], ["--max-peak", "1MiB"]] {
        let (code, _, err) = run(bin().args(limit).arg(&p));
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains(limit[0]) && err.contains("nothing to measure"),
            "{err}"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Profiler traces record memory events without stacks: a diff of two (trace_clean and
/// trace_val_no_grad, fixtures/README.md) cannot name a site that grew, and says so instead
/// of "no site holds more memory"; two snapshots can.
#[test]
fn diff_of_traces_does_not_claim_no_site_grew() {
    let diff = |a: &str, b: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_memscope"))
            .env("NO_COLOR", "1")
            .arg("diff")
            .arg(own(a))
            .arg(own(b))
            .output()
            .unwrap();
        assert!(o.status.success());
        String::from_utf8(o.stdout).unwrap()
    };
    let out = diff("trace_clean.trace.json.gz", "trace_val_no_grad.trace.json");
    assert!(
        out.contains("LARGEST GROWTH unknown: neither side records memory by site"),
        "{out}"
    );
    let sum = |p: &str| {
        memscope::inputs::load_summaries(&[own(p)], false)
            .unwrap()
            .remove(0)
    };
    let d = check::diff::diff(
        &sum("trace_clean.trace.json.gz"),
        &sum("trace_val_no_grad.trace.json"),
    );
    assert!(!d.sites_recorded && d.largest_growth.is_none());
    assert!(d.devices[0].peak_allocated.delta > 0, "{:?}", d.devices[0]);
    let d = check::diff::diff(&sum("clean.pickle"), &sum("leak_val_no_grad.pickle"));
    assert!(d.sites_recorded && d.largest_growth.is_some());
}

/// `memscope.check/3`'s `reason`: each message's outcome as a stable code, typed where the
/// message is words. The OOM rule's code follows the capture's own `num_ooms`
/// (`torch.cuda.memory_stats()`, in `fixtures/*.stats.json`); a limit's code follows its status;
/// a SKIP's code names why, as its message does.
#[test]
fn every_rule_result_carries_its_typed_reason() {
    let names = ["clean", "leak_oom", "fragmentation_oom"];
    let mut cmd = bin();
    cmd.args(["--fail-on", "oom,leak,fragmentation,graph-growth"]);
    for n in names {
        cmd.arg(own(&format!("{n}.pickle")));
    }
    cmd.arg(own("attribution/fn_forward.pickle.gz"))
        .arg(own("trace_clean.trace.json.gz"));
    let (code, v) = json(&mut cmd);
    assert_eq!(code, 1, "{v}");
    let files = v["files"].as_array().unwrap();
    let rule = |file: usize, id: &str| -> serde_json::Value {
        files[file]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["rule"] == id)
            .unwrap_or_else(|| panic!("{id} in {}", files[file]["path"]))
            .clone()
    };
    for (i, n) in names.iter().enumerate() {
        let stats: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(own(&format!("{n}.stats.json"))).unwrap(),
        )
        .unwrap();
        let ooms = stats["num_ooms"].as_u64().unwrap();
        let r = rule(i, "oom");
        assert_eq!(
            r["reason"],
            if ooms > 0 { "oom_recorded" } else { "no_oom" },
            "{n}: {r}"
        );
        // Snapshots have no autograd graph: the rule SKIPs, and says why in code and words.
        let g = rule(i, "graph-growth");
        assert_eq!(
            (g["status"].as_str(), g["reason"].as_str()),
            (Some("skip"), Some("no_autograd_graph")),
            "{g}"
        );
        assert!(
            g["message"].as_str().unwrap().contains("no autograd graph"),
            "{g}"
        );
    }
    // fragmentation_oom.pickle's one OOM is fragmentation's; leak_oom's is the leak's.
    assert_eq!(rule(2, "fragmentation")["reason"], "fragmentation_oom");
    assert_eq!(rule(1, "fragmentation")["reason"], "no_fragmentation_oom");
    assert_eq!(rule(1, "leak")["reason"], "leak_found");
    // fn_forward's three rising steps cannot support a leak judgement: a SKIP, not a PASS.
    let l = rule(3, "leak");
    assert_eq!(
        (l["status"].as_str(), l["reason"].as_str()),
        (Some("skip"), Some("leaks_not_judged")),
        "{l}"
    );
    // The trace's graph is judged: a limit, within it.
    assert_eq!(rule(4, "graph-growth")["reason"], "within_limit");
    // A limit's code is its status; every result has one.
    for f in files {
        for r in f["rules"].as_array().unwrap() {
            let (status, reason) = (r["status"].as_str().unwrap(), r["reason"].as_str().unwrap());
            match reason {
                "within_limit" => assert_eq!(status, "pass", "{r}"),
                "over_limit" => assert_eq!(status, "fail", "{r}"),
                _ => assert!(
                    reason.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                    "{r}"
                ),
            }
        }
    }
    // Limits: over on one capture, within on another.
    let (_, v) = json(
        bin()
            .args(["--max-peak", "1GiB"])
            .arg(own("clean.pickle"))
            .arg(own("leak_oom.pickle")),
    );
    let reasons: Vec<&str> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let r = f["rules"].as_array().unwrap().iter();
            r.filter(|r| r["rule"] == "max-peak")
                .map(|r| r["reason"].as_str().unwrap())
                .next()
                .unwrap()
        })
        .collect();
    let peaks: Vec<u64> = ["clean", "leak_oom"]
        .iter()
        .map(|n| peak(&analysis(&own(&format!("{n}.pickle"))), false))
        .collect();
    for (p, r) in peaks.iter().zip(&reasons) {
        assert_eq!(
            *r,
            if *p > 1 << 30 {
                "over_limit"
            } else {
                "within_limit"
            },
            "{peaks:?} {reasons:?}"
        );
    }
}
