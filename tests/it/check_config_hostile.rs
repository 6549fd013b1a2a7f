//! `memscope check` against a hostile or careless `memscope.toml` and captures (issue 24): a
//! gate that checks nothing is an error naming the config, a baseline outside the repository
//! is refused, no error quotes a file's contents, and events the reader had to repair are said
//! (and kept, so a rule's verdict does not change).

use std::path::{Path, PathBuf};
use std::process::Command;

const SECRET: &str = "s3cr3t-t0ken";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

/// A repository (a `.git` folder) with `memscope.toml` holding `config`, and a secret file
/// beside the repository.
fn repo(tag: &str, config: &str) -> PathBuf {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cfg-{tag}"));
    let _ = std::fs::remove_dir_all(&base);
    let repo = base.join("repo");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::write(
        base.join("secret.json"),
        format!("{{\"schema\": \"{SECRET}\"}}"),
    )
    .unwrap();
    std::fs::write(repo.join("memscope.toml"), config).unwrap();
    repo
}

fn check(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_memscope"))
        .current_dir(dir)
        .arg("check")
        .args(args)
        .arg(fixture("clean.pickle"))
        .env_remove("GITHUB_ACTIONS")
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn an_empty_fail_on_is_an_error_naming_the_config() {
    let dir = repo("empty", "[check]\nfail-on = []\n");
    let (code, out, err) = check(&dir, &[]);
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(
        err.contains("memscope.toml") && err.contains("fail-on"),
        "{err}"
    );
    assert!(!out.contains("PASS"), "{out}");
    // With a limit it checks something: allowed.
    let dir = repo(
        "empty-limit",
        "[check]\nfail-on = []\nmax-peak = \"8GiB\"\n",
    );
    assert_eq!(check(&dir, &[]).0, Some(0));
    // Every rule off by the flags: an error too.
    let dir = repo("flags", "[check]\n");
    let (code, _, err) = check(&dir, &["--fail-on", "none"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("no rule to check"), "{err}");
}

#[test]
fn a_baseline_outside_the_repository_is_refused_without_quoting_it() {
    for (tag, path) in [("dotdot", "../secret.json"), ("abs", "/etc/passwd")] {
        let dir = repo(tag, &format!("[check]\nbaseline = \"{path}\"\n"));
        let (code, _, err) = check(&dir, &[]);
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("outside the repository"), "{err}");
        assert!(!err.contains(SECRET) && !err.contains("root:"), "{err}");
    }
    // A symbolic link inside the repository that leads out of it.
    let dir = repo("link", "[check]\nbaseline = \"base.json\"\n");
    std::os::unix::fs::symlink(dir.join("../secret.json"), dir.join("base.json")).unwrap();
    let (code, _, err) = check(&dir, &[]);
    assert_eq!(code, Some(2));
    assert!(err.contains("outside the repository"), "{err}");
    // Inside, a file that is not a baseline: the error says so without quoting it.
    let dir = repo("inside", "[check]\nbaseline = \"ci/base.json\"\n");
    std::fs::create_dir_all(dir.join("ci")).unwrap();
    std::fs::copy(dir.join("../secret.json"), dir.join("ci/base.json")).unwrap();
    let (code, _, err) = check(&dir, &[]);
    assert_eq!(code, Some(2));
    assert!(!err.contains(SECRET), "{err}");
    std::fs::write(dir.join("ci/base.json"), format!("{{\"schema\": \"memscope.baseline/1\", \"inputs\": [{{\"path\": 1, \"x\": \"{SECRET}\"}}], \"generator\": \"{SECRET}\"}}")).unwrap();
    let (code, _, err) = check(&dir, &[]);
    assert_eq!(code, Some(2));
    assert!(!err.contains(SECRET), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn a_lone_surrogate_in_an_op_name_is_said_and_the_op_still_counts() {
    let text = std::fs::read_to_string(fixture("trace_val_no_grad.trace.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut n = 0;
    for e in v["traceEvents"].as_array_mut().unwrap() {
        if e["name"] == "aten::add_" {
            e["name"] = "LONE-SURROGATEaten::add_".into();
            n += 1;
        }
    }
    assert!(n > 0);
    // serde_json cannot write a lone surrogate; the escape is put in the text afterwards.
    let crafted = serde_json::to_string(&v)
        .unwrap()
        .replace("LONE-SURROGATE", "\\ud800");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cfg-surrogate");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("surrogate.trace.json");
    std::fs::write(&p, crafted).unwrap();
    let run = |f: &Path| {
        let o = Command::new(env!("CARGO_BIN_EXE_memscope"))
            .args(["check", "--no-config"])
            .arg(f)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        )
    };
    let (code, out) = run(&p);
    let (code0, out0) = run(&fixture("trace_val_no_grad.trace.json"));
    assert_eq!(code, code0);
    let verdict = |s: &str| {
        s.lines()
            .find(|l| l.contains("graph-growth"))
            .map(|l| l.split_whitespace().next().unwrap_or("").to_owned())
    };
    assert_eq!(verdict(&out), verdict(&out0), "{out}");
    assert_eq!(verdict(&out).as_deref(), Some("FAIL"), "{out}");
    assert!(
        out.contains(&format!("NOTE {n} events held a lone UTF-16 surrogate")),
        "{out}"
    );
}
