//! `memscope man`: a page for memscope and for every subcommand it names, each with EXIT STATUS and
//! EXAMPLES; and help texts that say what the commands do (no project fixtures in them).

use std::process::Command;

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_memscope"))
        .args(args)
        .output()
        .unwrap();
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (o.status.code(), s(&o.stdout), s(&o.stderr))
}

#[test]
fn every_page_memscope_1_names_is_written_with_exit_status_and_examples() {
    let (code, top, err) = run(&["man"]);
    assert_eq!(code, Some(0), "{err}");
    let dir = std::env::temp_dir().join(format!("memscope-man-{}", std::process::id()));
    let (code, _, err) = run(&["man", "-o", dir.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("pages written"), "{err}");
    let mut named = 0;
    for sub in [
        "analyze",
        "check",
        "baseline",
        "summarize",
        "diff",
        "flamegraph",
        "report",
        "export",
        "tui",
        "whatif",
        "plan",
        "query",
        "mcp",
        "run",
        "completions",
        "man",
    ] {
        assert!(
            top.contains(&format!("memscope\\-{sub}(1)")),
            "{sub}: {top}"
        );
        named += 1;
        let file = std::fs::read_to_string(dir.join(format!("memscope-{sub}.1")))
            .unwrap_or_else(|e| panic!("memscope-{sub}.1: {e}"));
        let (code, printed, _) = run(&["man", sub]);
        assert_eq!(code, Some(0));
        assert_eq!(
            printed, file,
            "`memscope man {sub}` prints the page -o writes"
        );
        assert!(file.contains(&format!(".TH memscope-{sub} 1")), "{file}");
        for section in [".SH \"EXIT STATUS\"", ".SH EXAMPLES", ".SH \"SEE ALSO\""] {
            assert!(file.contains(section), "memscope-{sub}.1 lacks {section}");
        }
        assert_eq!(file.matches(".ds Aq").count(), 2, "one preamble");
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("memscope.1")).unwrap(),
        top
    );
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), named + 1);
    for section in [".SH \"EXIT STATUS\"", ".SH EXAMPLES"] {
        assert!(top.contains(section), "{top}");
    }
    assert!(top.contains("\\fB1\\fR\nA check failed"), "{top}");
    let (code, _, err) = run(&["man", "nope"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("the subcommands are analyze"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn help_says_what_the_commands_open_without_the_projects_fixtures() {
    let (_, tui, _) = run(&["tui", "--help"]);
    assert!(tui.contains("a snapshot or a profiler trace"), "{tui}");
    let (_, top, _) = run(&["--help"]);
    assert!(top.contains("a snapshot or a profiler trace"), "{top}");
    for sub in ["run", "analyze", "check", "tui", "whatif", "man"] {
        let (_, help, _) = run(&[sub, "--help"]);
        assert!(!help.contains("fixtures"), "{sub} --help: {help}");
    }
}
