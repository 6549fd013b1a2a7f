//! Every example output in README.md is the tool's real output on a bundled file.
//!
//! An example is a ```` ```text ```` block right after a marker line
//! `<!-- example: memscope ARGS [| head -n N] -->`. This test runs each command (from the
//! repository root, without colour) and compares its stdout with the block; with
//! `UPDATE_README=1` it rewrites the blocks instead (after an intended change of output).

use std::path::Path;
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

fn examples(lines: &[&str]) -> Vec<Example> {
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(rest) = l.strip_prefix(MARKER) else {
            continue;
        };
        let command = rest
            .strip_suffix(" -->")
            .unwrap_or_else(|| panic!("README.md:{}: marker without ` -->`", i + 1))
            .to_string();
        assert_eq!(
            lines.get(i + 1).copied(),
            Some("```text"),
            "README.md:{}: the marker must be followed by a ```text block",
            i + 1
        );
        let end = (i + 2..lines.len())
            .find(|&j| lines[j] == "```")
            .unwrap_or_else(|| panic!("README.md:{}: unterminated block", i + 1));
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
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let found = examples(&lines);
    assert!(found.len() >= 4, "the README's examples are marked");
    let update = std::env::var_os("UPDATE_README").is_some_and(|v| v == "1");
    let mut rewritten: Vec<String> = Vec::new();
    let mut next = 0;
    let mut stale = Vec::new();
    for ex in &found {
        let got = output_of(&ex.command);
        let have = lines[ex.start..ex.end].join("\n");
        if got != have {
            stale.push(format!(
                "README.md:{}: `{}` prints\n{got}\n--- but the README shows ---\n{have}",
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
            std::fs::write(&path, new).unwrap();
        }
        return;
    }
    assert!(
        stale.is_empty(),
        "{}\n\nrun `UPDATE_README=1 cargo test --locked --test readme_examples` after an intended change",
        stale.join("\n\n")
    );
}
