//! `memscope check`, `baseline` and `diff` on real captures: verdicts, exit codes, the lines
//! named, and every output format (insta snapshots, a JUnit structural validator, GitHub
//! workflow commands).

use crate::common;
use crate::truth;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use memscope::check::{self, diff, CheckConfig, FailOn, InputSummary, Status};
use memscope::report::check::{
    CheckJson, CheckText, DiffText, GithubAnnotations, GithubSummary, Junit,
};
use memscope::report::{to_string, Options};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memscope"));
    c.env_remove("GITHUB_ACTIONS")
        .env_remove("GITHUB_STEP_SUMMARY")
        .env("NO_COLOR", "1");
    c
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

use crate::shared;

/// A capture from `fixtures/` or `../shared/fixtures` (see `shared` for when it is absent).
fn cap(name: &str) -> Option<PathBuf> {
    let own = root().join("fixtures").join(name);
    if own.exists() {
        return Some(own);
    }
    shared::fixture(name)
}

/// Summary with a stable path (the file name), for snapshots.
fn summary(name: &str) -> Option<InputSummary> {
    let p = cap(name)?;
    let mut v = memscope::inputs::load_summaries(&[p], false).unwrap();
    v[0].path = name.to_owned();
    Some(v.remove(0))
}

fn run(cmd: &mut Command) -> (i32, String, String) {
    let o: Output = cmd.output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8(o.stderr).unwrap(),
    )
}

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("memscope-check-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn clean_capture_passes_and_ooms_fail() {
    let Some(clean) = cap("clean.pickle") else {
        return;
    };
    let (code, out, err) = run(bin().arg("check").arg("--no-config").arg(&clean));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("memscope check: PASS"), "{out}");

    for name in ["leak_oom.pickle", "val_no_grad_oom.pickle"] {
        let Some(p) = cap(name) else { continue };
        let (code, out, _) = run(bin()
            .args(["check", "--no-config", "--fail-on", "oom"])
            .arg(&p));
        assert_eq!(code, 1, "{out}");
        let line = out
            .lines()
            .find(|l| l.contains("FAIL oom"))
            .unwrap_or_else(|| panic!("{out}"));
        assert!(line.contains("1 OOM recorded"), "{line}");
        // The failing request's line is named.
        assert!(out.contains("       at "), "{out}");
    }
    // Now that snapshot leak findings are in the analysis, per-step growth fails both OOM captures.
    for (name, line) in [
        ("leak_oom.pickle", ":150 "),
        ("val_no_grad_oom.pickle", ":60 "),
    ] {
        let Some(p) = cap(name) else { continue };
        let (code, out, _) = run(bin()
            .args([
                "check",
                "--no-config",
                "--fail-on",
                "none",
                "--max-growth-per-step",
                "1MiB",
            ])
            .arg(&p));
        assert_eq!(code, 1, "{out}");
        let fail = out
            .lines()
            .skip_while(|l| !l.contains("FAIL max-growth-per-step"))
            .take(2)
            .collect::<Vec<_>>()
            .join("\n");
        assert!(fail.contains(line), "{out}");
    }
    // val_no_grad_oom's OOM is a leak: the leak rule fails on it too, at the leaking line.
    if let Some(p) = cap("val_no_grad_oom.pickle") {
        let (code, out, _) = run(bin()
            .args(["check", "--no-config", "--fail-on", "leak"])
            .arg(&p));
        assert_eq!(code, 1, "{out}");
        assert!(
            out.contains("FAIL leak") && out.contains("scenarios.py:60"),
            "{out}"
        );
    }
}

#[test]
fn baseline_from_clean_passes_itself_and_fails_a_leak() {
    let (Some(clean), Some(leaky)) = (cap("clean.pickle"), cap("leak_val_no_grad.pickle")) else {
        return;
    };
    let dir = tmpdir("baseline");
    let base = dir.join("base.json");
    let (code, _, err) = run(bin().arg("baseline").arg(&clean).arg("-o").arg(&base));
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&base).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["schema"], "memscope.baseline/1");
    assert_eq!(
        v["inputs"][0]["devices"][0]["peak_allocated_bytes"],
        414_371_840u64
    );
    // Stable: the same capture gives the same bytes.
    let (_, again, _) = run(bin().arg("baseline").arg(&clean).args(["-o", "-"]));
    assert_eq!(again, text);

    let (code, out, _) = run(bin()
        .args(["check", "--no-config", "--baseline"])
        .arg(&base)
        .arg(&clean));
    assert_eq!(code, 0, "{out}");
    let (code, out, _) = run(bin()
        .args(["check", "--no-config", "--baseline"])
        .arg(&base)
        .arg(&leaky));
    assert_eq!(code, 1, "{out}");
    let live = out
        .lines()
        .skip_while(|l| !l.contains("FAIL baseline-live"))
        .take(2)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        live.contains("generate.py:414 in sc_leak_val_no_grad"),
        "{out}"
    );
    // ~270 MB more live memory than the clean run.
    let summary = memscope::inputs::load_summaries(&[&leaky], false).unwrap();
    let extra = summary[0].devices[0].end_allocated_bytes - 347_226_112;
    assert!((250_000_000..300_000_000).contains(&extra), "{extra}");
}

#[test]
fn diff_names_the_leak_line_first() {
    let (Some(clean), Some(leaky)) = (cap("clean.pickle"), cap("leak_val_no_grad.pickle")) else {
        return;
    };
    let (code, out, err) = run(bin().arg("diff").arg(&clean).arg(&leaky));
    assert_eq!(code, 0, "{err}");
    let first = out
        .lines()
        .find(|l| l.starts_with("LARGEST GROWTH"))
        .unwrap();
    assert!(
        first.contains("generate.py:414 in sc_leak_val_no_grad"),
        "{out}"
    );
    let meta: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("fixtures/leak_val_no_grad.meta.json")).unwrap(),
    )
    .unwrap();
    let leak_line = meta["markers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["kind"] == "LEAK")
        .unwrap()["line"]
        .as_u64()
        .unwrap();
    let (_, json, _) = run(bin()
        .args(["diff", "--format", "json"])
        .arg(&clean)
        .arg(&leaky));
    let v = common::envelope::data_str(&json);
    assert_eq!(v["schema"], "memscope.diff/1");
    assert_eq!(
        v["largest_growth"]["site"]["line"].as_u64(),
        Some(leak_line)
    );
    assert_eq!(
        v["devices"][0]["sites_at_end"][0]["site"]["line"].as_u64(),
        Some(leak_line)
    );

    // A capture against a baseline works the same way.
    let dir = tmpdir("diff");
    let base = dir.join("base.json");
    assert_eq!(
        run(bin().arg("baseline").arg(&clean).arg("-o").arg(&base)).0,
        0
    );
    let (code, out, _) = run(bin().arg("diff").arg(&base).arg(&leaky));
    assert_eq!(code, 0);
    assert!(
        out.lines()
            .find(|l| l.starts_with("LARGEST GROWTH"))
            .unwrap()
            .contains(":414 "),
        "{out}"
    );
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn traces_graph_growth() {
    let (Some(clean), Some(total)) = (
        cap("trace_clean.trace.json"),
        cap("trace_total_loss.trace.json"),
    ) else {
        return;
    };
    let (code, out, _) = run(bin()
        .args(["check", "--no-config", "--max-graph-growth", "0"])
        .arg(&clean));
    assert_eq!(code, 0, "{out}");
    let (code, out, _) = run(bin()
        .args(["check", "--no-config", "--max-graph-growth", "0"])
        .arg(&total));
    assert_eq!(code, 1, "{out}");
    let fail = out
        .lines()
        .skip_while(|l| !l.contains("FAIL max-graph-growth"))
        .take(2)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        fail.contains("aten::add_") && fail.contains("in profile_loop"),
        "{out}"
    );
    // Both as ranks: a per-rank table.
    let (code, out, _) = run(bin().args(["check", "--no-config"]).arg(&clean).arg(&total));
    assert_eq!(code, 1);
    assert!(out.contains("RANKS") && out.contains("imbalance:"), "{out}");
}

#[test]
fn errors_exit_2() {
    let Some(clean) = cap("clean.pickle") else {
        return;
    };
    let dir = tmpdir("errors");
    let bad_base = dir.join("bad.json");
    std::fs::write(&bad_base, "{\"schema\": \"memscope.report/1\"}").unwrap();
    let cases: Vec<Vec<std::ffi::OsString>> = vec![
        vec![
            "check".into(),
            "--max-peak".into(),
            "8 parsecs".into(),
            clean.clone().into(),
        ],
        vec![
            "check".into(),
            "--fail-on".into(),
            "leak,typo".into(),
            clean.clone().into(),
        ],
        vec![
            "check".into(),
            "--no-config".into(),
            dir.join("missing.pickle").into(),
        ],
        vec![
            "check".into(),
            "--no-config".into(),
            "--baseline".into(),
            bad_base.into(),
            clean.clone().into(),
        ],
        vec!["check".into()],
        vec!["diff".into(), clean.clone().into()],
    ];
    for args in cases {
        let (code, out, err) = run(bin().args(&args));
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn memscope_toml_is_read_and_flags_win() {
    let Some(clean) = cap("clean.pickle") else {
        return;
    };
    let dir = tmpdir("toml");
    std::fs::write(
        dir.join("memscope.toml"),
        "[check]\nmax-peak = \"100MiB\"\nfail-on = [\"oom\"]\n",
    )
    .unwrap();
    let (code, out, _) = run(bin().current_dir(&dir).arg("check").arg(&clean));
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("FAIL max-peak") && out.contains("limit 100.0 MiB"),
        "{out}"
    );
    let (code, out, _) = run(bin()
        .current_dir(&dir)
        .args(["check", "--max-peak", "1GiB"])
        .arg(&clean));
    assert_eq!(code, 0, "{out}");
    let (code, _, _) = run(bin()
        .current_dir(&dir)
        .args(["check", "--no-config"])
        .arg(&clean));
    assert_eq!(code, 0);
    std::fs::write(dir.join("memscope.toml"), "[check]\nmax-peek = 1\n").unwrap();
    let (code, _, err) = run(bin().current_dir(&dir).arg("check").arg(&clean));
    assert_eq!(code, 2);
    assert!(
        err.contains("max-peek") && err.contains("memscope.toml"),
        "{err}"
    );
}

// ---- JUnit ------------------------------------------------------------------------------

/// A minimal XML reader: enough to check the structure CI tools read (elements, attributes,
/// escaping), not a general parser.
#[derive(Debug)]
struct El {
    name: String,
    attrs: Vec<(String, String)>,
    children: Vec<El>,
    text: String,
}

impl El {
    fn attr(&self, k: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(a, _)| a == k)
            .map(|(_, v)| v.as_str())
    }
}

fn unescape(s: &str) -> String {
    assert!(!s.contains('<'), "unescaped < in {s:?}");
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let end = rest[i..]
            .find(';')
            .unwrap_or_else(|| panic!("bare & in {s:?}"))
            + i;
        let ent = &rest[i + 1..end];
        out.push(match ent {
            "amp" => '&',
            "lt" => '<',
            "gt" => '>',
            "quot" => '"',
            "apos" => '\'',
            _ if ent.starts_with('#') => char::from_u32(ent[1..].parse().unwrap()).unwrap(),
            _ => panic!("unknown entity {ent}"),
        });
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

fn parse_el(s: &str, pos: &mut usize) -> El {
    let b = s.as_bytes();
    assert_eq!(b[*pos], b'<');
    let close = s[*pos..].find('>').unwrap() + *pos;
    let tag = &s[*pos + 1..close];
    let self_closing = tag.ends_with('/');
    let tag = tag.trim_end_matches('/');
    let name = tag.split_whitespace().next().unwrap().to_owned();
    let mut attrs = Vec::new();
    let mut rest = tag[name.len()..].trim();
    while !rest.is_empty() {
        let eq = rest
            .find("=\"")
            .unwrap_or_else(|| panic!("bad attribute in <{tag}>"));
        let key = rest[..eq].trim().to_owned();
        let end = rest[eq + 2..].find('"').unwrap() + eq + 2;
        let val = &rest[eq + 2..end];
        assert!(!val.contains('\n'), "raw newline in attribute");
        assert!(
            !attrs.iter().any(|(k, _)| k == &key),
            "duplicate attribute {key}"
        );
        attrs.push((key, unescape(val)));
        rest = rest[end + 1..].trim_start();
    }
    *pos = close + 1;
    let mut el = El {
        name,
        attrs,
        children: Vec::new(),
        text: String::new(),
    };
    if self_closing {
        return el;
    }
    loop {
        let next = s[*pos..].find('<').unwrap() + *pos;
        el.text.push_str(&unescape(&s[*pos..next]));
        *pos = next;
        if s[*pos..].starts_with("</") {
            let end = s[*pos..].find('>').unwrap() + *pos;
            assert_eq!(&s[*pos + 2..end], el.name, "mismatched closing tag");
            *pos = end + 1;
            return el;
        }
        el.children.push(parse_el(s, pos));
    }
}

fn validate_junit(xml: &str) -> El {
    let body = xml
        .strip_prefix("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n")
        .expect("XML declaration");
    let mut pos = 0;
    let root = parse_el(body, &mut pos);
    assert!(body[pos..].trim().is_empty(), "content after the root");
    assert_eq!(root.name, "testsuites");
    let num = |e: &El, k: &str| -> usize {
        e.attr(k)
            .unwrap_or_else(|| panic!("<{}> lacks {k}", e.name))
            .parse()
            .unwrap()
    };
    let (mut tests, mut failures, mut skipped) = (0, 0, 0);
    for suite in &root.children {
        assert_eq!(suite.name, "testsuite");
        assert!(suite.attr("name").is_some_and(|n| !n.is_empty()));
        let (t, f) = (num(suite, "tests"), num(suite, "failures"));
        assert_eq!(num(suite, "errors"), 0);
        // A file's suite: its path as a property, before the cases.
        let cases: Vec<&El> = suite
            .children
            .iter()
            .filter(|c| c.name != "properties")
            .collect();
        if let Some(p) = suite.children.iter().find(|c| c.name == "properties") {
            let prop = &p.children[0];
            assert_eq!(prop.attr("name"), Some("path"));
            assert_eq!(prop.attr("value"), suite.attr("name"));
        }
        assert_eq!(t, cases.len());
        let mut fails = 0;
        let mut skips = 0;
        for case in cases {
            assert_eq!(case.name, "testcase");
            assert!(case.attr("name").is_some_and(|n| !n.is_empty()));
            // Viewers split classnames on dots: none, whatever the path.
            assert!(case
                .attr("classname")
                .is_some_and(|n| !n.is_empty() && !n.contains('.')));
            assert!(case.children.len() <= 1);
            for c in &case.children {
                match c.name.as_str() {
                    "failure" => {
                        fails += 1;
                        assert!(c.attr("message").is_some() && c.attr("type").is_some());
                        assert!(!c.text.is_empty());
                    }
                    "skipped" => skips += 1,
                    other => panic!("unexpected <{other}> in a testcase"),
                }
            }
        }
        assert_eq!(f, fails);
        assert_eq!(num(suite, "skipped"), skips);
        tests += t;
        failures += f;
        skipped += skips;
    }
    assert_eq!(num(&root, "tests"), tests);
    assert_eq!(num(&root, "failures"), failures);
    assert_eq!(num(&root, "skipped"), skipped);
    root
}

#[test]
fn junit_is_valid_and_escaped() {
    let Some(p) = cap("leak_oom.pickle") else {
        return;
    };
    let (code, xml, _) = run(bin()
        .args([
            "check",
            "--no-config",
            "--format",
            "junit",
            "--fail-on",
            "oom,leak,fragmentation,graph-growth",
            "--max-peak",
            "1GiB",
        ])
        .arg(&p));
    assert_eq!(code, 1);
    let root = validate_junit(&xml);
    assert!(root.children[0]
        .children
        .iter()
        .any(|c| c.attr("name") == Some("max-peak") && c.children[0].name == "failure"));

    // Hostile text in a site and a message survives escaping.
    let mut s = summary("leak_oom.pickle").unwrap();
    s.path = "we<ird> & \"path\".pickle".into();
    s.ooms[0].summary = "a <b> & 'c' \"d\"\nnext\u{1}".into();
    let r = check::check(
        &[s],
        &[],
        &CheckConfig {
            fail_on: Some(vec![FailOn::Oom]),
            ..Default::default()
        },
        None,
    )
    .expect("no limit set");
    let xml = to_string(&Junit, &r, &Options::default());
    let root = validate_junit(&xml);
    assert_eq!(
        root.children[0].attr("name"),
        Some("we<ird> & \"path\".pickle")
    );
    let case = root.children[0]
        .children
        .iter()
        .find(|c| c.name == "testcase")
        .unwrap();
    assert!(case.children[0].text.contains("a <b> & 'c' \"d\"\nnext"));
    assert_eq!(case.attr("classname"), Some("we<ird>_&_\"path\"_pickle"));
}

// ---- GitHub Actions ---------------------------------------------------------------------

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn github_annotations_and_step_summary() {
    let (Some(a), Some(b)) = (cap("leak_oom.pickle"), cap("val_no_grad_oom.pickle")) else {
        return;
    };
    let dir = tmpdir("gha");
    let summary_path = dir.join("summary.md");
    std::fs::write(&summary_path, "previous step\n").unwrap();
    let (code, out, err) = run(bin()
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_STEP_SUMMARY", &summary_path)
        .args([
            "check",
            "--no-config",
            "--fail-on",
            "oom",
            "--max-peak",
            "1GiB",
            "--max-reserved",
            "1GiB",
        ])
        .arg(&a)
        .arg(&b));
    assert_eq!(code, 1, "{out}{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 6, "{err}");
    for l in &lines {
        // val_no_grad_oom records `scenarios.py`, which is not in this checkout: no file.
        if l.contains("val_no_grad_oom") {
            assert!(
                !l.contains("file=") && l.contains("not found in the checkout"),
                "{l}"
            );
        } else {
            assert!(l.starts_with("::error file="), "{l}");
        }
        let (props, msg) = l["::error ".len()..].split_once("::").unwrap();
        assert!(!msg.contains('\n') && !msg.contains('\r'));
        for p in props.split(',') {
            let (k, v) = p.split_once('=').unwrap();
            assert!(["file", "line", "title"].contains(&k), "{p}");
            assert!(!v.contains(':') && !v.contains(','), "{p}");
        }
    }
    assert!(
        lines[0].contains("file=fixtures/generate.py,line="),
        "{}",
        lines[0]
    );
    let md = std::fs::read_to_string(&summary_path).unwrap();
    assert!(
        md.starts_with("previous step\n## memscope check ❌ failed"),
        "{md}"
    );
    // Two programs (fixtures/generate.py, scenarios.py): no rank table, and the summary says
    // why (issue #40).
    assert!(!md.contains("| rank | file |"), "{md}");
    assert!(md.contains("Not ranks of one job: "), "{md}");
    assert!(md.contains("share no source file"), "{md}");

    // More than ten failures: ten annotations and a warning.
    let many: Vec<PathBuf> = std::iter::repeat_n(a.clone(), 6).collect();
    let (_, _, err) = run(bin()
        .env("GITHUB_ACTIONS", "true")
        .args([
            "check",
            "--no-config",
            "--fail-on",
            "oom",
            "--max-peak",
            "1GiB",
        ])
        .args(&many));
    assert_eq!(
        err.lines().filter(|l| l.starts_with("::error")).count(),
        10,
        "{err}"
    );
    assert!(
        err.lines().last().unwrap().starts_with("::warning"),
        "{err}"
    );
}

// ---- Snapshots of every format ----------------------------------------------------------

fn sample_report() -> Option<check::CheckReport> {
    let (clean, leaky, oom) = (
        summary("clean.pickle")?,
        summary("leak_val_no_grad.pickle")?,
        summary("leak_oom.pickle")?,
    );
    let base = check::Baseline::new(vec![clean.clone()]);
    let cfg = CheckConfig {
        max_peak: Some(1 << 30),
        max_imbalance: Some(0.5),
        fail_on: Some(vec![FailOn::Oom, FailOn::Fragmentation]),
        ..Default::default()
    };
    let r = check::check(&[clean, leaky, oom], &[], &cfg, Some(("base.json", &base)))
        .expect("every limit has something to measure");
    assert!(!r.passed);
    assert!(r.files[0].passed && !r.files[1].passed && !r.files[2].passed);
    assert!(r.files[0].rules.iter().all(|x| x.status != Status::Fail));
    Some(r)
}

#[test]
fn snapshot_check_text() {
    let Some(r) = sample_report() else { return };
    let s = to_string(&CheckText, &r, &Options::default());
    // Every file's peak, as memory_stats() read it after the dump.
    for n in ["clean", "leak_val_no_grad", "leak_oom"] {
        let peak = truth::stat(n, "allocated_bytes.all.peak");
        truth::says(
            &s,
            &format!("peak allocated on cuda:0 {}", truth::human(peak)),
        );
    }
    insta::assert_snapshot!(s);
}

#[test]
fn snapshot_check_json() {
    let Some(r) = sample_report() else { return };
    let s = to_string(&CheckJson, &r, &Options::default());
    let v: serde_json::Value = serde_json::from_str(&s).unwrap();
    assert_eq!(v["schema"], "memscope.check/3");
    // Every file's peak to the byte, as memory_stats() read it after the dump.
    for n in ["clean", "leak_val_no_grad", "leak_oom"] {
        let peak = truth::stat(n, "allocated_bytes.all.peak");
        truth::says(&s, &format!("\"peak_allocated_bytes\": {peak}"));
    }
    insta::assert_snapshot!(s);
}

#[test]
fn snapshot_check_junit() {
    let Some(r) = sample_report() else { return };
    let s = to_string(&Junit, &r, &Options::default());
    validate_junit(&s);
    // The failing peak, as memory_stats() read it after the dump.
    let peak = truth::stat("leak_oom", "allocated_bytes.all.peak");
    truth::says(&s, &truth::human(peak));
    insta::assert_snapshot!(s);
}

#[test]
fn snapshot_check_github_annotations() {
    let Some(r) = sample_report() else { return };
    let s = to_string(&GithubAnnotations::default(), &r, &Options::default());
    // The failing peak, as memory_stats() read it after the dump.
    let peak = truth::stat("leak_oom", "allocated_bytes.all.peak");
    truth::says(&s, &truth::human(peak));
    insta::assert_snapshot!(s);
}

#[test]
fn snapshot_check_github_summary() {
    let Some(r) = sample_report() else { return };
    let s = to_string(&GithubSummary, &r, &Options::default());
    // The failing peak, as memory_stats() read it after the dump.
    let peak = truth::stat("leak_oom", "allocated_bytes.all.peak");
    truth::says(&s, &truth::human(peak));
    insta::assert_snapshot!(s);
}

#[test]
fn snapshot_diff_text() {
    let (Some(a), Some(b)) = (summary("clean.pickle"), summary("leak_val_no_grad.pickle")) else {
        return;
    };
    let d = diff::diff(&a, &b);
    let s = to_string(&DiffText, &d, &Options::default());
    // Both peaks, as memory_stats() read them after the dumps.
    let [pa, pb] = ["clean", "leak_val_no_grad"]
        .map(|n| truth::human(truth::stat(n, "allocated_bytes.all.peak")));
    truth::says(&s, &format!("peak allocated  {pa} -> {pb}"));
    insta::assert_snapshot!(s);
}

#[test]
fn many_files_load_on_every_core_in_order_with_progress() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let files: Vec<std::path::PathBuf> = [
        "clean.pickle",
        "leak_oom.pickle",
        "trace_clean.trace.json.gz",
        "two_streams.pickle",
        "fragmentation_oom.pickle",
    ]
    .iter()
    .map(|f| root.join(f))
    .collect();
    let calls = std::sync::atomic::AtomicUsize::new(0);
    let last = std::sync::atomic::AtomicUsize::new(0);
    let progress = |done: usize| {
        calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        last.fetch_max(done, std::sync::atomic::Ordering::Relaxed);
    };
    let parallel =
        memscope::inputs::load_summaries_with_progress(&files, false, &progress).unwrap();
    assert_eq!(calls.into_inner(), files.len());
    assert_eq!(last.into_inner(), files.len());
    let paths: Vec<&str> = parallel.iter().map(|s| s.path.as_str()).collect();
    let expected: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
    assert_eq!(paths, expected, "results keep the order of the arguments");
    // The same summaries as one file at a time.
    for (f, s) in files.iter().zip(&parallel) {
        let one = memscope::inputs::load_summaries(std::slice::from_ref(f), false).unwrap();
        assert_eq!(
            serde_json::to_string(&one[0]).unwrap(),
            serde_json::to_string(s).unwrap()
        );
    }
    // An unreadable file among them is an error naming it.
    let mut bad = files.clone();
    bad.insert(2, root.join("missing.pickle"));
    let err = memscope::inputs::load_summaries(&bad, false).unwrap_err();
    assert!(err.to_string().contains("missing.pickle"), "{err}");
}

/// A baseline's chains keep whole frame names, C++ signatures included: before, a C++ frame was
/// cut at the last space of its signature (`bool, bool)` x 2, `const&)` x 13 on select_n), so
/// different frames collided when `diff` matched sites across code motion.
#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn baseline_chains_keep_whole_cpp_names() {
    let Some(p) = shared::corpus("snapshots/select_n_t21_b.pickle") else {
        return;
    };
    let snap = memscope::load::load_snapshot(&p).unwrap();
    let len = std::fs::metadata(&p).unwrap().len();
    let a = memscope::analysis::analyze_snapshot(&snap, &p, len);
    let s = memscope::check::typed::summarize(&a);
    let frames: Vec<&String> = s
        .devices
        .iter()
        .flat_map(|d| d.sites_at_peak.iter().chain(&d.sites_at_end))
        .flat_map(|x| x.chain.iter())
        .collect();
    assert!(
        frames.iter().any(|f| f.contains("::")),
        "C++ frames in the chains"
    );
    for f in frames {
        assert!(
            !f.ends_with(')') || f.contains('('),
            "a frame cut inside its signature: {f:?}"
        );
    }
}

/// One line is one site on both sides, whichever callee its heaviest stack went through (issue
/// 42): `fixtures/claims/README.md`'s `fwd_clean_mlp` and `fwd_oom_mlp` run the same MLP, and the
/// forward's line (generate.py:218) keeps blocks at the end of both, reached through a Linear's
/// `forward` in one and a ReLU's `relu` in the other. Before, the two chains differed and the line
/// was listed as both "new" and "gone".
#[test]
fn diff_lists_one_line_once_whatever_its_heaviest_stack() {
    let (Some(a), Some(b)) = (
        summary("claims/fwd_clean_mlp.pickle.gz"),
        summary("claims/fwd_oom_mlp.pickle.gz"),
    ) else {
        return;
    };
    let d = diff::diff(&a, &b);
    for dev in &d.devices {
        for changes in [&dev.sites_at_peak, &dev.sites_at_end] {
            let mut seen = std::collections::BTreeSet::new();
            for c in changes.iter().filter(|c| c.site.is_some()) {
                let s = c.site.as_ref().unwrap();
                assert!(
                    seen.insert((s.file.clone(), s.line, s.function.clone())),
                    "{}:{} listed twice: {:?}",
                    s.file,
                    s.line,
                    changes.iter().map(|c| c.describe()).collect::<Vec<_>>()
                );
            }
        }
    }
    // The line's change at the end is its whole change, from its bytes on one side to the other's.
    let at_218 = |s: &InputSummary| {
        s.devices[0]
            .sites_at_end
            .iter()
            .find(|x| x.site.as_ref().is_some_and(|s| s.line == 218))
            .map(|x| x.bytes)
    };
    let line = d.devices[0]
        .sites_at_end
        .iter()
        .find(|c| c.site.as_ref().is_some_and(|s| s.line == 218))
        .unwrap();
    assert_eq!(line.status, diff::SiteStatus::Grown, "{}", line.describe());
    assert_eq!(
        (line.before_bytes, line.after_bytes),
        (at_218(&a), at_218(&b))
    );
    assert!(line.before_bytes.is_some());
}

/// `diff` refuses what cannot be compared (issue 23), with exit 2 and the reason, unless
/// `--force`: a trace against a snapshot (fixtures/README.md: `trace_clean` and `clean` are two
/// kinds of capture), and two programs that share no source file (`clean.pickle` is made by
/// `fixtures/generate.py`; `fixtures/loops/` by `fixtures/loops/run/*.py`). Two captures of one
/// script (`clean` and `leak_oom`) are compared as before.
#[test]
fn diff_refuses_what_cannot_be_compared_unless_forced() {
    let own = |n: &str| root().join("fixtures").join(n);
    let (snap, trace) = (own("clean.pickle"), own("trace_clean.trace.json.gz"));
    let (code, out, err) = run(bin().arg("diff").arg(&trace).arg(&snap));
    assert_eq!(code, 2, "{out}{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("a trace and the after side a snapshot") && err.contains("--force"),
        "{err}"
    );
    let (code, out, err) = run(bin().args(["diff", "--force"]).arg(&trace).arg(&snap));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("DEVICE cuda:0"), "{out}");

    let other = own("loops/both_logits_mlp_clean.pickle.gz");
    let (code, _, err) = run(bin().arg("diff").arg(&snap).arg(&other));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("share no source file")
            && err.contains("before allocates from generate.py")
            && err.contains("exit_logits.py"),
        "{err}"
    );
    assert_eq!(
        run(bin().args(["diff", "--force"]).arg(&snap).arg(&other)).0,
        0
    );
    let (code, _, err) = run(bin().arg("diff").arg(&snap).arg(own("leak_oom.pickle")));
    assert_eq!(code, 0, "{err}");
}

/// Two traces without memory events (HTA's trace_diff pair: no `[memory]` event, no
/// `ProfilerStep`) have nothing to compare on memory: the diff says so, instead of blaming
/// missing stacks, and lists what neither side records.
#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn diff_says_what_neither_side_records() {
    let (Some(a), Some(b)) = (
        shared::path("corpus/traces/hta/trace_diff/control/control.json.gz"),
        shared::path("corpus/traces/hta/trace_diff/test/test.json.gz"),
    ) else {
        return;
    };
    let (code, out, err) = run(bin().arg("diff").arg(&a).arg(&b));
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("LARGEST GROWTH unknown: neither side records device memory"),
        "{out}"
    );
    assert!(!out.contains("stack"), "{out}");
    assert!(
        out.contains("device memory: neither side records it"),
        "{out}"
    );
    let (_, json, _) = run(bin().args(["diff", "--format", "json"]).arg(&a).arg(&b));
    let v = common::envelope::data_str(&json);
    let nc = v["not_compared"].as_array().unwrap();
    assert!(
        nc.iter()
            .any(|n| n["record"] == "device_memory" && n["missing_in"] == "neither"),
        "{json}"
    );
}
