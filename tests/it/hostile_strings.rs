//! Names rewritten as an attacker would (terminal escapes, bidi overrides, newlines that start
//! GitHub workflow commands, Markdown and HTML) in committed captures, then every writer that
//! prints names: no raw ESC outside memscope's own colour codes, no bidi control, no line that
//! starts a workflow command, nothing that renders in the job summary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// What an attacker puts in front of every name (the original stays at the end, so files still
/// end in `.py` and classify as before).
const EVIL: &str = "\x1b]0;pwned\x07\x1b]52;c;ZXZpbA==\x07\x1b[2J\u{202e}\u{2066}\r\n::stop-commands::tok\n::error file=x.py::forged\n##[set-env name=A;]x\n  ::add-mask::s\u{2028}<img src=x onerror=alert(1)><details open>`` ` |*b*| [l](http://x) \\ ";

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memscope"));
    c.env_remove("NO_COLOR")
        .env_remove("GITHUB_ACTIONS")
        .env_remove("GITHUB_STEP_SUMMARY")
        .env_remove("GITHUB_WORKSPACE");
    c
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("memscope-hostile-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Every `filename`/`name` string in a pickle's dicts gets [`EVIL`] in front.
fn poison_pickle(v: &mut serde_pickle::Value) {
    use serde_pickle::{HashableValue as H, Value as V};
    match v {
        V::Dict(d) => {
            for (k, x) in d.iter_mut() {
                let key = matches!(k, H::String(s) if s == "filename" || s == "name");
                match x {
                    V::String(s) if key => *s = format!("{EVIL}{s}"),
                    _ => poison_pickle(x),
                }
            }
        }
        V::List(l) | V::Tuple(l) => l.iter_mut().for_each(poison_pickle),
        _ => {}
    }
}

fn poisoned_snapshot(dir: &Path, name: &str) -> PathBuf {
    let data = std::fs::read(fixture(name)).unwrap();
    let mut v = serde_pickle::value_from_slice(
        &data,
        serde_pickle::DeOptions::new().replace_recursive_structures(),
    )
    .unwrap();
    poison_pickle(&mut v);
    let out = dir.join(format!("evil_{name}"));
    let bytes = serde_pickle::value_to_vec(&v, serde_pickle::SerOptions::new()).unwrap();
    std::fs::write(&out, bytes).unwrap();
    out
}

/// Every event name of a trace gets [`EVIL`] in front (ProfilerStep names keep theirs).
fn poisoned_trace(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(fixture("trace_val_no_grad.trace.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    for e in v["traceEvents"].as_array_mut().unwrap() {
        if let Some(serde_json::Value::String(n)) = e.get_mut("name") {
            if !n.starts_with("ProfilerStep") {
                *n = format!("{EVIL}{n}");
            }
        }
    }
    let out = dir.join("evil.trace.json");
    std::fs::write(&out, serde_json::to_vec(&v).unwrap()).unwrap();
    out
}

/// The terminal rules: no raw control character but newline and tab, ESC only in an SGR code
/// when `sgr`, no bidi control, no line starting (after blanks) with `::` unless it is one of
/// memscope's own annotations (`::error file=`/`::error title=` on stderr, when `annotations`).
fn assert_terminal_safe(what: &str, bytes: &[u8], sgr: bool, annotations: bool) {
    let s = String::from_utf8_lossy(bytes);
    for (i, c) in s.char_indices() {
        if c == '\x1b' && sgr {
            let rest = &s[i + 1..];
            let end = rest.find('m').unwrap_or(rest.len());
            assert!(
                rest.starts_with('[')
                    && rest[1..end].chars().all(|c| c.is_ascii_digit() || c == ';'),
                "{what}: an ESC that is not SGR at {i}: {:?}",
                &s[i..(i + 20).min(s.len())]
            );
            continue;
        }
        let bad = (c < ' ' && c != '\n' && c != '\t')
            || ('\u{7f}'..='\u{9f}').contains(&c)
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{61c}' | '\u{2028}' | '\u{2029}');
        assert!(!bad, "{what}: raw {c:?} at {i}");
    }
    for line in s.lines() {
        let t = line.trim_start_matches([' ', '\t']);
        let ours =
            annotations && (t.starts_with("::error file=") || t.starts_with("::error title="));
        assert!(
            !t.starts_with("::") || ours,
            "{what}: a line starts a workflow command: {line:?}"
        );
        assert!(
            !line.contains("##["),
            "{what}: a v1 workflow command: {line:?}"
        );
    }
}

/// Fenced code blocks are checked to be closed only by their own fence, then left out: what
/// is inside renders as text.
fn outside_fences(what: &str, s: &str) -> String {
    let mut out = String::new();
    let mut fence: Option<usize> = None;
    for line in s.lines() {
        let ticks = line.chars().take_while(|&c| c == '`').count();
        match fence {
            None if ticks >= 3 => fence = Some(ticks),
            None => {
                out.push_str(line);
                out.push('\n');
            }
            Some(n) if ticks >= n => {
                assert_eq!(
                    line.len(),
                    ticks,
                    "{what}: a fence line with text: {line:?}"
                );
                fence = None;
            }
            Some(n) => assert!(
                line.trim_start().chars().take_while(|&c| c == '`').count() < n,
                "{what}: a line inside the block could close it: {line:?}"
            ),
        }
    }
    assert!(fence.is_none(), "{what}: a code block left open");
    out
}

/// Code spans (a run of n backticks to the next run of exactly n) left out: their text is
/// literal. A run that never closes is text, as in CommonMark.
fn outside_code_spans(s: &str) -> String {
    let b: Vec<char> = s.chars().collect();
    let run = |i: usize| b[i..].iter().take_while(|&&c| c == '`').count();
    let (mut out, mut i) = (String::new(), 0);
    while i < b.len() {
        if b[i] == '`' && (i == 0 || b[i - 1] != '\\') {
            let n = run(i);
            let mut j = i + n;
            let mut close = None;
            while j < b.len() {
                if b[j] == '`' {
                    let m = run(j);
                    if m == n {
                        close = Some(j + m);
                        break;
                    }
                    j += m;
                } else {
                    j += 1;
                }
            }
            match close {
                Some(end) => {
                    out.push_str("CODE");
                    i = end;
                }
                None => {
                    out.extend(&b[i..i + n]);
                    i += n;
                }
            }
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

fn assert_markdown_safe(what: &str, s: &str) {
    let s = &outside_code_spans(&outside_fences(what, s));
    for bad in ["<img", "<details", "](http", "\x1b", "\u{202e}"] {
        assert!(!s.contains(bad), "{what}: {bad:?} in the Markdown:\n{s}");
    }
    // `<` only in memscope's own `<br>`.
    assert!(
        s.replace("<br>", "").find('<').is_none(),
        "{what}: raw HTML in the Markdown:\n{s}"
    );
}

fn run(what: &str, c: &mut Command) -> Output {
    let o = c.output().unwrap();
    assert!(
        o.status.code().is_some_and(|c| c <= 1),
        "{what}: exit {:?}\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!o.stdout.is_empty(), "{what}: no output");
    o
}

#[test]
fn hostile_names_in_a_snapshot_reach_no_writer_raw() {
    let dir = temp_dir("snap");
    let evil = poisoned_snapshot(&dir, "leak_oom.pickle");
    let clean = fixture("leak_oom.pickle");
    for color in ["never", "always"] {
        let o = run(
            "analyze",
            bin()
                .args(["analyze", "--stacks", "--color", color])
                .arg(&evil),
        );
        assert_terminal_safe("analyze", &o.stdout, color == "always", false);
        assert!(String::from_utf8_lossy(&o.stdout).contains("\\x1b]0;pwned"));
        let o = run(
            "diff",
            bin()
                .args(["diff", "--color", color])
                .arg(&clean)
                .arg(&evil),
        );
        assert_terminal_safe("diff", &o.stdout, color == "always", false);
    }
    let o = run("whatif", bin().arg("whatif").arg(&evil));
    assert_terminal_safe("whatif", &o.stdout, false, false);
    let o = run(
        "flamegraph",
        bin()
            .args(["flamegraph", "--folded", "--at", "peak", "-o", "-"])
            .arg(&evil),
    );
    assert_terminal_safe("flamegraph --folded", &o.stdout, false, false);
    assert_terminal_safe("flamegraph --folded (stderr)", &o.stderr, false, false);
    let o = run(
        "diff markdown",
        bin()
            .args(["diff", "--format", "markdown"])
            .arg(&clean)
            .arg(&evil),
    );
    assert_markdown_safe(
        "diff --format markdown",
        &String::from_utf8_lossy(&o.stdout),
    );
    check_under_github(&dir, &evil);
    xml_and_html_keep_their_escapes(&dir, &evil);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `check` as a GitHub job runs it: text on stdout, annotations on stderr, the job summary.
fn check_under_github(dir: &Path, evil: &Path) {
    let summary = dir.join("summary.md");
    let o = run(
        "check",
        bin()
            .args(["check", "--no-config"])
            .arg(evil)
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_STEP_SUMMARY", &summary),
    );
    assert_eq!(o.status.code(), Some(1), "the leak fails the gate");
    assert_terminal_safe("check stdout", &o.stdout, false, false);
    assert_terminal_safe("check stderr", &o.stderr, false, true);
    assert!(String::from_utf8_lossy(&o.stderr).contains("::error "));
    let md = std::fs::read_to_string(&summary).unwrap();
    assert_markdown_safe("check job summary", &md);
    // Text appended straight to the job summary becomes Markdown by itself.
    let f = std::fs::OpenOptions::new()
        .append(true)
        .open(&summary)
        .unwrap();
    let o = bin()
        .arg("diff")
        .arg(fixture("leak_oom.pickle"))
        .arg(evil)
        .env("GITHUB_STEP_SUMMARY", &summary)
        .stdout(f)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(md.contains("### memscope diff"), "{md}");
    assert_markdown_safe("diff >> job summary", &md);
}

/// JUnit XML and the HTML report: the names' markup is text, and XML holds no character it
/// cannot (control characters other than tab and newline are dropped; newlines are `&#10;`).
fn xml_and_html_keep_their_escapes(dir: &Path, evil: &Path) {
    let o = bin()
        .args(["check", "--no-config", "--format", "junit"])
        .arg(evil)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let xml = String::from_utf8(o.stdout).unwrap();
    assert!(!xml.contains("<img") && !xml.contains("<details"));
    assert!(!xml.chars().any(|c| c < ' ' && c != '\n' && c != '\t'));
    let html = dir.join("r.html");
    let o = bin()
        .arg("report")
        .arg(evil)
        .arg("-o")
        .arg(&html)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("&lt;img src=x"),
        "the names are on the page, escaped"
    );
    assert!(!page.contains("<img src=x") && !page.contains("<details open>"));
}

#[test]
fn hostile_names_in_a_trace_reach_no_writer_raw() {
    let dir = temp_dir("trace");
    let evil = poisoned_trace(&dir);
    let o = run("analyze trace", bin().arg("analyze").arg(&evil));
    assert_terminal_safe("analyze trace", &o.stdout, false, false);
    let summary = dir.join("summary.md");
    let o = bin()
        .args(["check", "--no-config"])
        .arg(&evil)
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .unwrap();
    assert!(o.status.code().is_some_and(|c| c <= 1));
    assert_terminal_safe("check trace stdout", &o.stdout, false, false);
    assert_terminal_safe("check trace stderr", &o.stderr, false, true);
    assert_markdown_safe(
        "check trace summary",
        &std::fs::read_to_string(&summary).unwrap_or_default(),
    );
    // JUnit: the op names are in the failure, as text.
    let o = bin()
        .args(["check", "--no-config", "--format", "junit"])
        .arg(&evil)
        .output()
        .unwrap();
    let xml = String::from_utf8(o.stdout).unwrap();
    assert!(xml.contains("&lt;img src=x"), "{xml}");
    assert!(!xml.contains("<img") && !xml.contains("<details"));
    assert!(!xml.chars().any(|c| c < ' ' && c != '\n'));
    // A summary JSON made from it, used as input, is as untrusted as the trace.
    let base = dir.join("base.json");
    let o = bin()
        .arg("baseline")
        .arg(&evil)
        .arg("-o")
        .arg(&base)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = run(
        "check summary",
        bin().args(["check", "--no-config"]).arg(&base),
    );
    assert_terminal_safe("check from a summary", &o.stdout, false, false);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_dict_key_in_an_error_is_shown_not_obeyed() {
    let dir = temp_dir("key");
    // A protocol-2 pickle: a dict with one key, ESC and a newline and `::error` in it.
    let key = "\x1b]0;x\x07\n::error::k";
    let mut v = std::collections::BTreeMap::new();
    v.insert(
        serde_pickle::HashableValue::String(key.into()),
        serde_pickle::Value::I64(1),
    );
    let p = dir.join("key.pickle");
    let bytes = serde_pickle::value_to_vec(
        &serde_pickle::Value::Dict(v),
        serde_pickle::SerOptions::new(),
    )
    .unwrap();
    std::fs::write(&p, bytes).unwrap();
    let o = bin().arg("analyze").arg(&p).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert_terminal_safe("error", &o.stderr, false, false);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    let _ = std::fs::remove_dir_all(&dir);
}
