//! Every tab of a snapshot and of a trace at 40×12, 80×24 and 120×40 (issue #42, item 3): no tab
//! vanishes from the tab bar on a small screen (its label is shortened instead, down to the
//! number that opens it), the tab bar never runs past the screen, the view shown is the one
//! asked for, and the status line is there. With `MEMSCOPE_TUI_DUMP=DIR` the 80×24 screens are
//! also written to DIR (the closing note's pictures).

use ratatui::crossterm::event::KeyCode;

use crate::common::{code, key, load, screen};

const SIZES: [(u16, u16); 3] = [(40, 12), (80, 24), (120, 40)];

fn tab_row(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

fn check(fixture: &str) {
    let app = load(fixture);
    let titles: Vec<&str> = app.views().iter().map(|v| v.title()).collect();
    assert!(titles.len() >= 5, "{fixture}: {titles:?}");
    for (i, title) in titles.iter().enumerate() {
        let k = char::from_digit(i as u32 + 1, 10).unwrap();
        for (w, h) in SIZES {
            let mut app = load(fixture);
            key(&mut app, k);
            assert_eq!(app.view().title(), *title);
            let s = screen(&mut app, w, h);
            let row = tab_row(&s);
            assert!(
                row.chars().count() <= w as usize,
                "{fixture} {w}x{h}: {row:?}"
            );
            for n in 1..=titles.len() {
                assert!(
                    row.contains(&format!(" {n} ")),
                    "{fixture} {title} {w}x{h}: tab {n} vanished: {row:?}"
                );
            }
            if w >= 120 {
                for t in &titles {
                    assert!(
                        row.contains(t),
                        "{fixture} {w}x{h}: {t:?} not whole: {row:?}"
                    );
                }
            }
            let last = s.lines().nth(h as usize - 1).unwrap_or("");
            assert!(
                !last.trim().is_empty(),
                "{fixture} {title} {w}x{h}: no status line\n{s}"
            );
            // Esc never quits, in every view and size.
            code(&mut app, KeyCode::Esc);
            assert!(!app.quit(), "{fixture} {title} {w}x{h}: Esc quit");
            if (w, h) == (80, 24) {
                if let Ok(dir) = std::env::var("MEMSCOPE_TUI_DUMP") {
                    let name = format!(
                        "{fixture}-{}-80x24.txt",
                        title.to_lowercase().replace(' ', "_")
                    );
                    std::fs::create_dir_all(&dir).unwrap();
                    std::fs::write(std::path::Path::new(&dir).join(name), &s).unwrap();
                }
            }
        }
    }
}

#[test]
fn snapshot_tabs_at_three_sizes() {
    check("leak_oom.pickle");
}

#[test]
fn trace_tabs_at_three_sizes() {
    check("trace_hook_cache.trace.json.gz");
}

/// The shortened tab bar: at 40 columns every tab keeps its number.
#[test]
fn tab_labels_shorten_instead_of_vanishing() {
    let app = load("leak_oom.pickle");
    let labels = memscope::tui::app::tab_labels(app.views(), 40);
    let total: usize = labels.iter().map(|l| l.chars().count()).sum();
    assert!(total <= 40, "{labels:?}");
    assert_eq!(labels.len(), app.views().len());
    let full = memscope::tui::app::tab_labels(app.views(), 400);
    assert_eq!(full[0], " 1 Overview ");
}
