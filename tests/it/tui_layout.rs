//! Every view of a snapshot and of a trace at 80×24, 120×40 and 200×60: the screens are
//! snapshots, and each screen is checked for the ways a terminal layout breaks: two columns that
//! touch (`119.9 MiB138.0 MiB`), a word that runs into the screen's edge, and a word cut short
//! (`cause: frag`, `even`): every word on a small screen must be a word the same view shows whole
//! on a very large one.

use std::collections::HashSet;

use memscope::tui::App;
use ratatui::crossterm::event::KeyCode;

use crate::common;
use crate::shared;
use crate::truth;

use common::{code, key, load, screen};

const SIZES: [(u16, u16); 3] = [(80, 24), (120, 40), (200, 60)];

/// A key press: a character or a named key.
#[derive(Clone, Copy)]
enum K {
    C(char),
    Code(KeyCode),
}

/// The views of the capture, each named and reached by keys from a fresh app; then the views
/// one level in (a site's stacks, a step's ops, an op's allocations).
fn views(app: &App) -> Vec<(String, Vec<K>)> {
    let mut out: Vec<(String, Vec<K>)> = app
        .views()
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let k = char::from_digit(i as u32 + 1, 10).unwrap();
            (v.title().to_lowercase().replace(' ', "_"), vec![K::C(k)])
        })
        .collect();
    let (enter, down) = (K::Code(KeyCode::Enter), K::Code(KeyCode::Down));
    if app.trace().is_some() {
        out.push(("step_ops".into(), vec![K::C('3'), down, enter]));
        out.push(("op_events".into(), vec![K::C('3'), down, enter, enter]));
    } else {
        out.push(("sites_open".into(), vec![K::C('4'), enter, down, enter]));
    }
    out
}

fn render(fixture: &str, keys: &[K], w: u16, h: u16) -> String {
    let mut app = load(fixture);
    for k in keys {
        match *k {
            K::C(c) => key(&mut app, c),
            K::Code(c) => code(&mut app, c),
        }
    }
    screen(&mut app, w, h)
}

/// The words (runs of letters) of a screen.
fn words(s: &str) -> impl Iterator<Item = &str> {
    s.split(|c: char| !c.is_alphabetic())
        .filter(|w| !w.is_empty())
}

/// What is wrong with `s`, a `w`-column screen, given the words the view shows whole.
fn problems(s: &str, w: usize, whole: &HashSet<&str>) -> Vec<String> {
    let mut out = Vec::new();
    for (y, line) in s.lines().enumerate() {
        let cells: Vec<char> = line.chars().collect();
        // The timeline's marker row is a row of glyphs (`P` peak, `X` OOM), not of words.
        let glyphs = line.starts_with("  markers ");
        if cells.len() >= w && cells[w - 1].is_alphanumeric() && !glyphs {
            out.push(format!("row {y} runs into the edge: {line:?}"));
        }
        // A unit followed by a letter or digit: two columns that touch.
        for unit in ["iB", "%"] {
            for (i, _) in line.match_indices(unit) {
                let next = line[i + unit.len()..].chars().next();
                if next.is_some_and(|c| c.is_alphanumeric()) {
                    out.push(format!("row {y}: columns touch after {unit:?}: {line:?}"));
                }
            }
        }
        for word in words(line).filter(|_| !glyphs) {
            if !whole.contains(word) {
                out.push(format!("row {y}: {word:?} is not a whole word: {line:?}"));
            }
        }
    }
    out
}

fn check(fixture: &str, snapshots: bool) {
    let app = load(fixture);
    let mut bad = Vec::new();
    for (name, keys) in views(&app) {
        let big = render(fixture, &keys, 400, 150);
        let whole: HashSet<&str> = words(&big).collect();
        for (w, h) in SIZES {
            let s = render(fixture, &keys, w, h);
            for p in problems(&s, w as usize, &whole) {
                bad.push(format!("{fixture} {name} {w}x{h}: {p}"));
            }
            if snapshots {
                insta::assert_snapshot!(format!("{fixture}-{name}-{w}x{h}"), s);
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn snapshot_views_at_three_sizes() {
    check("leak_oom.pickle", true);
    // The overview says PyTorch's OOM request and memory_stats()' bytes allocated at the end.
    let s = render("leak_oom.pickle", &[K::C('1')], 200, 60);
    truth::says(&s, &truth::oom_request("leak_oom"));
    let cur = truth::stat("leak_oom", "allocated_bytes.all.current");
    truth::says(&s, &truth::human(cur));
}

#[test]
fn trace_views_at_three_sizes() {
    check("trace_hook_cache.trace.json.gz", true);
    // The overview says the last profiled step and memory_stats()' peak.
    let n = "trace_hook_cache";
    let s = render("trace_hook_cache.trace.json.gz", &[K::C('1')], 200, 60);
    truth::says(&s, &truth::last_profiled_step(n));
    truth::says(
        &s,
        &truth::human(truth::stat(n, "allocated_bytes.all.peak")),
    );
}

#[test]
fn more_captures_lay_out_cleanly() {
    for f in [
        "fragmentation_oom.pickle",
        "two_streams.pickle",
        "trace_total_loss.trace.json.gz",
    ] {
        check(f, false);
    }
}

/// The checker itself fails on the breakages the issue reports.
#[test]
fn the_checker_catches_touching_columns_and_cut_words() {
    let whole: HashSet<&str> = ["cause", "fragmentation", "MiB", "events"].into();
    assert!(!problems("118.9 MiB / 119.9 MiB138.0 MiB", 80, &whole).is_empty());
    assert!(!problems("cause: frag", 80, &whole).is_empty());
    assert!(!problems("   even", 7, &whole).is_empty());
    assert!(problems("cause: fragmentation  697 events", 80, &whole).is_empty());
}

/// The captures under `dir` (snapshots and traces, compressed or not), recursively.
fn captures(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = rd.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if p.is_dir() {
            captures(&p, out);
        } else if [
            ".pickle",
            ".pickle.gz",
            ".trace.json",
            ".trace.json.gz",
            ".pt.trace.json",
            ".pt.trace.json.gz",
        ]
        .iter()
        .any(|s| name.ends_with(s))
        {
            out.push(p);
        }
    }
}

/// Every view of every capture at 80×24: the project's fixtures, the GPU machine's, the public
/// corpus. One app per capture, each view rendered huge (its whole words) and at 80×24.
#[test]
fn every_capture_lays_out_at_80x24() {
    let mut files = Vec::new();
    captures(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures"),
        &mut files,
    );
    for rel in ["fixtures", "corpus"] {
        if let Some(p) = shared::path(rel) {
            captures(&p, &mut files);
        }
    }
    let mut bad = Vec::new();
    let mut seen = 0;
    for f in &files {
        let Ok(loaded) = memscope::tui::Loaded::load(f) else {
            continue; // a capture the loader refuses is the loader's test's business
        };
        seen += 1;
        let mut app = App::with(loaded);
        app.set_path(f.file_name().unwrap().to_string_lossy().into_owned());
        for i in 0..app.views().len() {
            key(&mut app, char::from_digit(i as u32 + 1, 10).unwrap());
            let big = screen(&mut app, 400, 150);
            let whole: HashSet<&str> = words(&big).collect();
            let s = screen(&mut app, 80, 24);
            for p in problems(&s, 80, &whole) {
                bad.push(format!("{} view {}: {p}", f.display(), i + 1));
            }
        }
    }
    assert!(seen >= 40, "only {seen} captures loaded");
    assert!(bad.is_empty(), "{}\n{} problems", bad.join("\n"), bad.len());
}
