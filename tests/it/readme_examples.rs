//! Every example output in README.md and docs/*.md is the tool's real output on a bundled file.
//!
//! An example is a ```` ```text ```` block right after a marker line
//! `<!-- example: memscope ARGS [| head -n N] -->`. This test runs each command (from the
//! repository root, without colour) and compares its stdout with the block; with
//! `UPDATE_README=1` it rewrites the blocks instead (after an intended change of output).
//!
//! Output memscope printed elsewhere (on the GPU machine, by `memscope run`) is a ```` ```text ````
//! block after `<!-- log: PATH -->`: its lines are lines of that bundled log, in order (a line
//! ending in ` [...]` stands for a line of the log that starts with what precedes it). Every
//! ```` ```text ```` block in the README is one or the other (in docs/, a block without a marker is
//! left alone: the JSON schema's, for one).

use std::path::{Path, PathBuf};

/// README.md, then docs/*.md in name order, with the name errors give them.
fn documents() -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    let mut out = vec![("README.md".to_owned(), root.join("README.md"))];
    for p in docs {
        let name = format!("docs/{}", p.file_name().unwrap().to_string_lossy());
        out.push((name, p));
    }
    out
}
use std::process::Command;

const MARKER: &str = "<!-- example: ";

struct Example {
    /// Line index of the marker.
    line: usize,
    command: String,
    /// Line indices of the block's body: `start..end` (the fences excluded).
    start: usize,
    end: usize,
}

fn examples(doc: &str, lines: &[&str]) -> Vec<Example> {
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(rest) = l.strip_prefix(MARKER) else {
            continue;
        };
        let command = rest
            .strip_suffix(" -->")
            .unwrap_or_else(|| panic!("{doc}:{}: marker without ` -->`", i + 1))
            .to_string();
        assert_eq!(
            lines.get(i + 1).copied(),
            Some("```text"),
            "{doc}:{}: the marker must be followed by a ```text block",
            i + 1
        );
        let end = (i + 2..lines.len())
            .find(|&j| lines[j] == "```")
            .unwrap_or_else(|| panic!("{doc}:{}: unterminated block", i + 1));
        out.push(Example {
            line: i,
            command,
            start: i + 2,
            end,
        });
    }
    out
}

/// Runs `memscope ARGS [| head -n N]` and returns its stdout.
fn output_of(command: &str) -> String {
    let (cmd, head) = match command.split_once(" | head -n ") {
        Some((c, n)) => (c, Some(n.trim().parse::<usize>().expect("head -n N"))),
        None => (command, None),
    };
    let mut words = cmd.split_whitespace();
    assert_eq!(words.next(), Some("memscope"), "{command}");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(env!("CARGO_BIN_EXE_memscope"))
        .args(words)
        .current_dir(root)
        .env("NO_COLOR", "1")
        .env_remove("GITHUB_ACTIONS")
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{command}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let keep = head.unwrap_or(lines.len()).min(lines.len());
    lines[..keep].join("\n")
}

#[test]
fn readme_examples_are_real_output() {
    let update = std::env::var_os("UPDATE_README").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    let mut found = 0;
    for (doc, path) in documents() {
        found += check_examples(&doc, &path, update, &mut stale);
    }
    assert!(found >= 4, "the README's examples are marked");
    assert!(
        stale.is_empty(),
        "{}\n\nrun `UPDATE_README=1 cargo test --locked --test it readme_examples::` after an intended change",
        stale.join("\n\n")
    );
}

/// Compares (or, with `update`, rewrites) the examples of one document; returns how many.
fn check_examples(doc: &str, path: &Path, update: bool, stale: &mut Vec<String>) -> usize {
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let found = examples(doc, &lines);
    let mut rewritten: Vec<String> = Vec::new();
    let mut next = 0;
    for ex in &found {
        let got = output_of(&ex.command);
        let have = lines[ex.start..ex.end].join("\n");
        if got != have {
            stale.push(format!(
                "{doc}:{}: `{}` prints\n{got}\n--- but the document shows ---\n{have}",
                ex.line + 1,
                ex.command
            ));
        }
        rewritten.extend(lines[next..ex.start].iter().map(|s| s.to_string()));
        if !got.is_empty() {
            rewritten.push(got);
        }
        next = ex.end;
    }
    rewritten.extend(lines[next..].iter().map(|s| s.to_string()));
    if update {
        let mut new = rewritten.join("\n");
        new.push('\n');
        if new != text {
            std::fs::write(path, new).unwrap();
        }
        stale.clear();
    }
    found.len()
}

const LOG_MARKER: &str = "<!-- log: ";

/// Whether `block` is an excerpt of `log`: its lines appear there in order.
fn excerpt_of(block: &[&str], log: &str) -> Result<(), String> {
    let mut rest = log.lines();
    for want in block {
        let found = match want.strip_suffix(" [...]") {
            Some(prefix) => rest.any(|l| l.starts_with(prefix)),
            None => rest.any(|l| l == *want),
        };
        if !found {
            return Err(format!(
                "{want:?} is not in the log (after the lines before it)"
            ));
        }
    }
    Ok(())
}

#[test]
fn readme_logs_are_excerpts_of_the_bundled_logs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    for (doc, path) in documents() {
        checked += check_logs(root, &doc, &path);
    }
    assert!(
        checked >= 1,
        "the README or docs/ quote memscope run's output"
    );
}

/// Checks the log excerpts of one document; returns how many.
fn check_logs(root: &Path, doc: &str, path: &Path) -> usize {
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut checked = 0;
    for (i, l) in lines.iter().enumerate() {
        if *l != "```text" {
            continue;
        }
        let before = if i > 0 { lines[i - 1] } else { "" };
        if before.starts_with(MARKER) {
            continue; // an example: `readme_examples_are_real_output`
        }
        let Some(log) = before
            .strip_prefix(LOG_MARKER)
            .and_then(|r| r.strip_suffix(" -->"))
        else {
            assert!(
                doc != "README.md",
                "{doc}:{}: a ```text block with neither `{MARKER}memscope ... -->` nor `{LOG_MARKER}PATH -->` before it",
                i + 1
            );
            continue;
        };
        let end = (i + 1..lines.len())
            .find(|&j| lines[j] == "```")
            .unwrap_or_else(|| panic!("{doc}:{}: unterminated block", i + 1));
        let log_text = std::fs::read_to_string(root.join(log))
            .unwrap_or_else(|e| panic!("{doc}:{}: {log}: {e}", i));
        if let Err(e) = excerpt_of(&lines[i + 1..end], &log_text) {
            panic!("{doc}:{}: not what {log} holds: {e}", i + 1);
        }
        checked += 1;
    }
    checked
}

#[test]
fn an_excerpt_must_follow_the_log() {
    let log = "a\nb b b\nc\n";
    assert!(excerpt_of(&["a", "c"], log).is_ok());
    assert!(excerpt_of(&["b b [...]", "c"], log).is_ok());
    assert!(excerpt_of(&["c", "a"], log).is_err(), "order counts");
    assert!(excerpt_of(&["a", "d"], log).is_err());
    assert!(
        excerpt_of(&["b b"], log).is_err(),
        "a whole line, unless it ends in [...]"
    );
}
