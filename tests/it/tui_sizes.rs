//! Every tab of a snapshot and of a trace at 40×12, 80×24 and 120×40 (issue #42, item 3): no tab
//! vanishes from the tab bar on a small screen (its label is shortened instead, down to the
//! number that opens it), the tab bar never runs past the screen, the view shown is the one
//! asked for, and the status line is there. Long names (C++ templates, long paths) are collapsed
//! or give way without losing what follows them, the Ranks view's sentences wrap, and Esc and q
//! mean one thing in every mode. With `MEMSCOPE_TUI_DUMP=DIR` the screens, at every size, are
//! also written to DIR (the closing note's pictures).

use ratatui::crossterm::event::KeyCode;

use crate::common::{code, key, load, screen};

const SIZES: [(u16, u16); 3] = [(40, 12), (80, 24), (120, 40)];

fn tab_row(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// With `MEMSCOPE_TUI_DUMP=DIR`, writes the screen to DIR (the closing note's pictures).
fn dump(fixture: &str, what: &str, w: u16, h: u16, s: &str) {
    if let Ok(dir) = std::env::var("MEMSCOPE_TUI_DUMP") {
        let name = format!(
            "{}-{}-{w}x{h}.txt",
            fixture.replace('/', "_"),
            what.to_lowercase().replace(' ', "_")
        );
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(std::path::Path::new(&dir).join(name), s).unwrap();
    }
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
            // A long file name gives way in the status line; the device and event stay.
            assert!(
                last.contains("│ cuda:0 │ event "),
                "{fixture} {title} {w}x{h}: {last:?}"
            );
            // Esc never quits, in every view and size.
            code(&mut app, KeyCode::Esc);
            assert!(!app.quit(), "{fixture} {title} {w}x{h}: Esc quit");
            dump(fixture, title, w, h, &s);
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

/// The ranks of one job (fixtures/ranks/bridge: three ranks, rank 2 ran out of memory), read
/// as `memscope tui` reads several captures.
fn bridge_job() -> memscope::job::Job {
    let d = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/ranks/bridge");
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(&d)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".pickle.gz"))
        .collect();
    files.sort();
    let per = memscope::inputs::load_summaries_per_file(&files, true, &|_| {}).unwrap();
    let mut summaries: Vec<_> = per.into_iter().flatten().collect();
    for s in &mut summaries {
        s.path = std::path::Path::new(&s.path)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
    }
    memscope::job::Job::new(&memscope::job::identify(summaries, None).unwrap())
}

fn job_screen(view: &memscope::tui::job::JobView, w: u16, h: u16) -> String {
    use ratatui::backend::TestBackend;
    let mut t = ratatui::Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| f.render_widget(view, f.area())).unwrap();
    let buf = t.backend().buffer().clone();
    (0..h)
        .map(|y| {
            let l: String = (0..w).map(|x| buf[(x, y)].symbol()).collect();
            format!("{}\n", l.trim_end())
        })
        .collect()
}

/// The rank table keeps its OOMs, leaks and verdict columns at 80 columns (issue 42: they were
/// cut off at the screen's edge); the columns that give way are the less telling ones, and at
/// 120 columns the file names are back. At 40 columns the rank and its peak stay. Rank 2's row
/// says its OOM at every size where the column fits.
#[test]
fn rank_table_columns_give_way_by_priority() {
    let view = memscope::tui::job::JobView::new(bridge_job());
    let heading = |s: &str| -> String {
        s.lines()
            .find(|l| l.trim_start().starts_with("peak "))
            .unwrap_or_else(|| panic!("no heading:\n{s}"))
            .to_owned()
    };
    for (w, h) in SIZES {
        let s = job_screen(&view, w, h);
        assert!(s.lines().all(|l| l.chars().count() <= w as usize), "{s}");
        let head = heading(&s);
        assert!(
            head.contains("rank") && head.contains("peak alloc"),
            "{w}x{h}:\n{s}"
        );
        if w >= 80 {
            for col in ["OOMs", "leaks", "verdict"] {
                assert!(head.contains(col), "{w}x{h}: {col} lost:\n{s}");
            }
            // The rows are in rank order, each behind its bar.
            let row2 = s
                .lines()
                .filter(|l| l.contains('█'))
                .nth(2)
                .unwrap_or_else(|| panic!("{w}x{h}: no row for rank 2:\n{s}"));
            assert!(row2.contains("oom"), "{w}x{h}: {row2:?}\n{s}");
        } else {
            // Given way before anything above it in the priority.
            assert!(!head.contains("reserved at end"), "{w}x{h}:\n{s}");
        }
        if w >= 120 {
            assert!(head.contains("file"), "{w}x{h}:\n{s}");
            assert!(s.contains("snapshot_oom_rank-2"), "{w}x{h}:\n{s}");
        }
        if (w, h) == (80, 24) {
            if let Ok(dir) = std::env::var("MEMSCOPE_TUI_DUMP") {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(
                    std::path::Path::new(&dir).join("ranks-bridge-80x24.txt"),
                    &s,
                )
                .unwrap();
            }
        }
    }
}

/// Tabs 4 and 5 (issue 42: they vanished at 40 columns) on the screen at each size: whole at
/// 80 and 120 columns, at 40 shortened to the first letters of their titles, which still tell
/// them apart, behind the number that opens them.
#[test]
fn tabs_4_and_5_are_on_the_screen_at_every_size() {
    for fixture in ["leak_oom.pickle", "trace_hook_cache.trace.json.gz"] {
        let titles: Vec<&str> = load(fixture).views().iter().map(|v| v.title()).collect();
        for (w, h) in SIZES {
            let mut app = load(fixture);
            let s = screen(&mut app, w, h);
            let row = tab_row(&s);
            for n in [4, 5] {
                let title = titles[n - 1];
                let shown = if w >= 80 {
                    title.to_owned()
                } else {
                    title.chars().take(3).collect()
                };
                assert!(
                    row.contains(&format!(" {n} {shown}")),
                    "{fixture} {w}x{h}: tab {n} ({title}) not shown as {shown:?}: {row:?}"
                );
            }
        }
    }
}

/// A capture whose stacks carry C++ frames with template names of hundreds of characters
/// (fixtures/claims/ft_midrun_allstacks: recorded with `stacks="all"`), and a Lightning capture
/// whose sites are long paths: every tab at every size, and the Sites tab with its first site
/// opened. Templates show collapsed (`name<…>`) wherever a name is shown.
#[test]
fn long_names_wrap_or_shorten_in_every_view() {
    for fixture in [
        "claims/ft_midrun_allstacks.pickle.gz",
        "loops/lightning_callback_alloc_leak.pickle.gz",
    ] {
        check(fixture);
        let titles: Vec<&str> = load(fixture).views().iter().map(|v| v.title()).collect();
        for (w, h) in SIZES {
            for (i, title) in titles.iter().enumerate() {
                let mut app = load(fixture);
                key(&mut app, char::from_digit(i as u32 + 1, 10).unwrap());
                let mut screens = vec![(title.to_string(), screen(&mut app, w, h))];
                // The view's first item opened (a site's stacks, a finding's evidence).
                code(&mut app, KeyCode::Enter);
                screens.push((format!("{title} enter"), screen(&mut app, w, h)));
                key(&mut app, '?');
                screens.push((format!("{title} help"), screen(&mut app, w, h)));
                for (what, s) in screens {
                    dump(fixture, &what, w, h, &s);
                    assert_templates_collapsed(fixture, &what, w, h, &s);
                    // A site too long for the row keeps its function, not the mark alone.
                    for line in s.lines() {
                        let t = line.trim_end();
                        assert!(
                            !t.ends_with("▸ …") && !t.ends_with("▾ …"),
                            "{fixture} {what} {w}x{h}: a site shown as the mark alone:\n{s}"
                        );
                    }
                }
            }
        }
    }
}

/// No C++ template argument list on the screen: a `<` that follows a name is followed by the
/// mark `…` (`name<…>`). Python's pseudo-names (`<module>`, `<string>`, `<frozen os>`) stand
/// alone, and a `<` between spaces is a comparison.
fn assert_templates_collapsed(fixture: &str, what: &str, w: u16, h: u16, s: &str) {
    for line in s.lines() {
        for (i, _) in line.match_indices('<') {
            let rest = &line[i + 1..];
            let before = line[..i].chars().next_back();
            let after_name = before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':');
            let ok = !after_name
                || rest.starts_with('…')
                || rest.starts_with('<')
                || rest.starts_with('=');
            assert!(
                ok,
                "{fixture} {what} {w}x{h}: a template not collapsed: {line:?}\n{s}"
            );
        }
    }
}

/// The lines of the paragraph that starts with `lead`, up to the next empty line, joined.
fn paragraph(s: &str, lead: &str) -> Option<String> {
    let mut lines = s.lines().skip_while(|l| !l.starts_with(lead));
    let first = lines.next()?;
    let rest: Vec<&str> = lines
        .take_while(|l| !l.trim().is_empty() && !l.starts_with("RANKS"))
        .collect();
    Some(
        std::iter::once(first)
            .chain(rest)
            .flat_map(|l| l.split_whitespace())
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// The Ranks view's hint, verdict and imbalance were cut at the screen's edge at 80 columns
/// (issue 42): they are word-wrapped now. At 80 and 120 columns the verdict's and the
/// imbalance's full text is on the screen across their lines, no line is wider than the
/// screen, and no word is cut (every word of the screen's verdict is a word of the sentence).
/// At 40x12 the verdict still starts on the screen, whole words only.
#[test]
fn the_rank_views_sentences_wrap_instead_of_being_cut() {
    let job = bridge_job();
    let verdict = memscope::wording::job::job_verdict(&job.verdict());
    let imbalance = memscope::wording::job::imbalance(&job.imbalance.as_ref().unwrap().spread());
    let view = memscope::tui::job::JobView::new(job);
    let norm = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    for (w, h) in SIZES {
        let s = job_screen(&view, w, h);
        assert!(s.lines().all(|l| l.chars().count() <= w as usize), "{s}");
        assert!(
            s.contains("Up/Down"),
            "{w}x{h}: the keys' hint is gone:\n{s}"
        );
        let shown = paragraph(&s, "VERDICT ").unwrap_or_else(|| panic!("{w}x{h}:\n{s}"));
        let want = norm(&format!("VERDICT {verdict}"));
        if w >= 80 {
            assert_eq!(shown, want, "{w}x{h}:\n{s}");
            let imb = paragraph(&s, "IMBALANCE ").unwrap_or_else(|| panic!("{w}x{h}:\n{s}"));
            // Its explanation follows on the next lines.
            let want = norm(&format!(
                "IMBALANCE {imbalance} imbalance, over each rank's"
            ));
            assert!(imb.starts_with(&want), "{w}x{h}: {imb:?}\n{s}");
            // The keys' hint ends on the screen, not at its edge.
            assert!(s.contains("q here quits)"), "{w}x{h}:\n{s}");
        } else {
            let words: Vec<&str> = want.split(' ').collect();
            for (i, word) in shown.split(' ').enumerate() {
                assert_eq!(Some(&word), words.get(i), "{w}x{h}: a cut word:\n{s}");
            }
        }
    }
}

/// One meaning for Esc and q in every mode (issue 42): Esc goes back one step (closes the help,
/// cancels a search, leaves what Enter opened) and never quits; q leaves the screen (quits, or
/// goes back to the Ranks list when the capture was opened from it, as its status line says). Checked in every view of a
/// snapshot and of a trace, with the help open, while typing a search, and after Enter; and in
/// the Ranks view, where Esc has no step to go back to.
#[test]
fn esc_goes_back_and_q_leaves_in_every_mode() {
    use ratatui::crossterm::event::{Event, KeyEvent, KeyModifiers};
    // As the terminal loop feeds keys: a search's keys while one is typed.
    let press = |app: &mut memscope::tui::App, c: KeyCode| {
        memscope::tui::handle_event(app, Event::Key(KeyEvent::new(c, KeyModifiers::NONE)))
    };
    for fixture in ["leak_oom.pickle", "trace_hook_cache.trace.json.gz"] {
        let n = load(fixture).views().len();
        for i in 0..n {
            let tab = char::from_digit(i as u32 + 1, 10).unwrap();
            let mut app = load(fixture);
            key(&mut app, tab);
            let title = app.view().title();
            press(&mut app, KeyCode::Char('?'));
            assert!(app.help(), "{fixture} {title}: ? opens the help");
            press(&mut app, KeyCode::Esc);
            assert!(
                !app.help() && !app.quit(),
                "{fixture} {title}: Esc in the help"
            );
            press(&mut app, KeyCode::Char('/'));
            assert!(
                app.typing().is_some(),
                "{fixture} {title}: / starts a search"
            );
            press(&mut app, KeyCode::Esc);
            assert!(
                app.typing().is_none() && !app.quit(),
                "{fixture} {title}: Esc in a search"
            );
            press(&mut app, KeyCode::Enter);
            for _ in 0..4 {
                press(&mut app, KeyCode::Esc);
                assert!(!app.quit(), "{fixture} {title}: Esc after Enter quit");
            }
            press(&mut app, KeyCode::Char('q'));
            assert!(app.quit(), "{fixture} {title}: q did not quit");
            // q quits from the help too.
            let mut app = load(fixture);
            key(&mut app, tab);
            press(&mut app, KeyCode::Char('?'));
            press(&mut app, KeyCode::Char('q'));
            assert!(app.quit(), "{fixture} {title}: q in the help");
        }
        // Opened from the Ranks view, the status line says where q goes.
        let mut app = load(fixture);
        app.opened_from_ranks();
        let s = screen(&mut app, 120, 40);
        let status = s.lines().nth(39).unwrap();
        assert!(!status.contains("q:quit"), "{fixture}: {status:?}");
    }
    let mut view = memscope::tui::job::JobView::new(bridge_job());
    view.key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    assert!(!view.quit && view.open.is_none(), "Esc in the Ranks view");
    view.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    assert!(view.open.is_some(), "Enter opens the rank");
    view.key(KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE));
    assert!(view.quit, "q quits the Ranks view");
}
