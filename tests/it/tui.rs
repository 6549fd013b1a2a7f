//! The TUI driven without a terminal: actions in, `TestBackend` screens out.

use std::path::Path;

use memscope::tui::{map_key, Action, App, View};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::common;

use crate::truth;
use common::{code, key, load, screen};

#[test]
fn overview_fragmentation_oom() {
    let mut app = load("fragmentation_oom.pickle");
    let s = screen(&mut app, 100, 30);
    // PyTorch's own OOM message and memory_stats(): the request, allocated now / at the peak.
    let n = "fragmentation_oom";
    truth::says(&s, &format!("{} requested", truth::oom_request(n)));
    let cur = truth::human(truth::stat(n, "allocated_bytes.all.current"));
    let peak = truth::human(truth::stat(n, "allocated_bytes.all.peak"));
    truth::says(&s, &format!("{cur} / {peak}"));
    insta::assert_snapshot!(s);
}

#[test]
fn timeline_leak_oom() {
    let mut app = load("leak_oom.pickle");
    key(&mut app, '2');
    let s = screen(&mut app, 100, 30);
    // The cursor on the last event: allocated as memory_stats() read it after the dump.
    let cur = truth::stat("leak_oom", "allocated_bytes.all.current");
    truth::says(&s, &format!("alloc {}", truth::human(cur)));
    insta::assert_snapshot!(s);
}

#[test]
fn map_fragmentation_oom() {
    let mut app = load("fragmentation_oom.pickle");
    key(&mut app, '3');
    let s = screen(&mut app, 100, 30);
    let n = "fragmentation_oom";
    let cur = truth::stat(n, "allocated_bytes.all.current");
    truth::says(&s, &format!("allocated {}", truth::human(cur)));
    truth::says(
        &s,
        &format!("OOM here: {} does not fit", truth::oom_request(n)),
    );
    insta::assert_snapshot!(s);
}

#[test]
fn sites_leak_oom() {
    let mut app = load("leak_oom.pickle");
    key(&mut app, '4');
    code(&mut app, KeyCode::Enter);
    code(&mut app, KeyCode::Down);
    code(&mut app, KeyCode::Enter);
    let s = screen(&mut app, 100, 30);
    // The bytes live at the end (memory_stats()), and the leak's line in the generator's function.
    let cur = truth::stat("leak_oom", "allocated_bytes.all.current");
    truth::says(&s, &format!(": {} in ", truth::human(cur)));
    let function = truth::meta("leak_oom")["function"]
        .as_str()
        .unwrap()
        .to_string();
    truth::says(&s, &format!("fixtures/generate.py:150 {function}"));
    insta::assert_snapshot!(s);
}

#[test]
fn leaks_view_leak_oom() {
    let mut app = load("leak_oom.pickle");
    key(&mut app, '5');
    let s = screen(&mut app, 100, 30);
    let peak = truth::stat("leak_oom", "allocated_bytes.all.peak");
    truth::says(&s, &format!("the {} peak", truth::human(peak)));
    insta::assert_snapshot!(s);
}

#[test]
fn help_overlay() {
    let mut app = load("clean.pickle");
    key(&mut app, '?');
    // Behind the overlay, the product holds memory_stats()' figures: no OOM, the bytes live.
    let d = &app.data().unwrap().analysis.devices[0];
    assert_eq!(d.ooms.len() as u64, truth::stat("clean", "num_ooms"));
    let cur = truth::stat("clean", "allocated_bytes.all.current");
    assert_eq!(d.allocated_bytes, Some(cur));
    insta::assert_snapshot!(screen(&mut app, 80, 24));
}

#[test]
fn enter_on_the_oom_finding_jumps_the_cursor_to_the_oom() {
    let mut app = load("fragmentation_oom.pickle");
    key(&mut app, '2');
    key(&mut app, 'g');
    assert!(screen(&mut app, 100, 30).contains("event 0/696"));
    key(&mut app, '1');
    code(&mut app, KeyCode::Enter);
    assert_eq!(app.view(), View::Timeline);
    let s = screen(&mut app, 100, 30);
    assert!(s.contains("event 696/696"), "{s}");
    assert!(s.contains("here: OOM requesting 512.0 MiB"), "{s}");
    // Esc goes back to where the jump came from.
    code(&mut app, KeyCode::Esc);
    assert_eq!(app.view(), View::Overview);
}

#[test]
fn peak_key_moves_to_the_peak_and_the_map_follows() {
    let mut app = load("fragmentation_oom.pickle");
    key(&mut app, '2');
    key(&mut app, 'g');
    key(&mut app, 'p');
    let s = screen(&mut app, 100, 30);
    assert!(s.contains("event 347/696"), "{s}");
    assert!(s.contains("here: peak 1.5 GiB allocated"), "{s}");
    code(&mut app, KeyCode::Enter);
    assert_eq!(app.view(), View::Map);
    let s = screen(&mut app, 100, 30);
    assert!(s.contains("after event 347:"), "{s}");
    assert!(!s.contains("OOM here"), "{s}");
    // At the OOM the map sets the failed request against the largest hole.
    key(&mut app, 'o');
    let s = screen(&mut app, 100, 30);
    assert!(
        s.contains("OOM here: 512.0 MiB does not fit, largest hole 10.0 MiB"),
        "{s}"
    );
}

#[test]
fn tab_cycles_views_and_numbers_select_them() {
    let mut app = load("clean.pickle");
    let order: Vec<View> = (0..5)
        .map(|_| {
            code(&mut app, KeyCode::Tab);
            app.view()
        })
        .collect();
    assert_eq!(
        order,
        vec![
            View::Timeline,
            View::Map,
            View::Sites,
            View::Leaks,
            View::Overview
        ]
    );
    key(&mut app, '4');
    assert_eq!(app.view(), View::Sites);
}

#[test]
fn zoom_and_pan_the_timeline() {
    let mut app = load("leak_oom.pickle");
    key(&mut app, '2');
    key(&mut app, '+');
    key(&mut app, '+');
    let s = screen(&mut app, 100, 30);
    assert!(s.contains("×4.0"), "{s}");
    key(&mut app, 'g');
    let s = screen(&mut app, 100, 30);
    assert!(s.contains("event 0/3666"), "{s}");
    assert!(s.contains("events 0..916"), "{s}");
    key(&mut app, '-');
    key(&mut app, '-');
    key(&mut app, '-');
    assert!(screen(&mut app, 100, 30).contains("×1.0"));
}

#[test]
fn search_jumps_to_matching_allocations_and_sites() {
    let mut app = load("fragmentation_oom.pickle");
    key(&mut app, '2');
    key(&mut app, 'g');
    key(&mut app, '/');
    assert!(app.typing().is_some());
    for c in "generate.py:178".chars() {
        app.apply(Action::SearchChar(c));
    }
    assert!(screen(&mut app, 100, 30).contains("/generate.py:178"));
    app.apply(Action::SearchSubmit);
    let s = screen(&mut app, 100, 30);
    assert!(
        s.contains("event 696/696"),
        "the only allocation from line 178 is the OOM: {s}"
    );
    // In the sites view the same query selects the site.
    let mut app = load("leak_oom.pickle");
    key(&mut app, '4');
    key(&mut app, '/');
    for c in "data".chars() {
        app.apply(Action::SearchChar(c));
    }
    app.apply(Action::SearchSubmit);
    let s = screen(&mut app, 100, 30);
    let sel = s
        .lines()
        .find(|l| l.contains("▾ fixtures/generate.py:120 data"));
    assert!(sel.is_some(), "{s}");
}

#[test]
fn map_enter_drills_into_the_blocks_site() {
    let mut app = load("leak_oom.pickle");
    key(&mut app, '3');
    // Move to the first allocated block of the first segment.
    for _ in 0..4 {
        if app.selected_part_block().is_some() {
            break;
        }
        code(&mut app, KeyCode::Right);
    }
    assert!(app.selected_part_block().is_some());
    let s = screen(&mut app, 100, 30);
    assert!(s.contains("allocated, size"), "{s}");
    code(&mut app, KeyCode::Enter);
    assert_eq!(app.view(), View::Sites);
    let s = screen(&mut app, 100, 30);
    assert!(s.contains(" ▾ "), "{s}");
}

#[test]
fn mouse_clicks_select_tabs_and_move_the_cursor() {
    let mut app = load("leak_oom.pickle");
    screen(&mut app, 100, 30);
    // " 1 Overview  2 Timeline ": the second tab starts at column 11.
    app.apply(Action::Click(14, 0));
    assert_eq!(app.view(), View::Timeline);
    // Click on the chart's first column: the cursor goes to the first event.
    app.apply(Action::Click(10, 10));
    assert_eq!(app.cursor(), Some(0));
    app.apply(Action::Scroll(1, 10, 10));
    assert!(app.cursor().unwrap() > 0);
}

#[test]
fn every_view_renders_at_80x24_and_survives_tiny_terminals() {
    for f in [
        "fragmentation_oom.pickle",
        "leak_oom.pickle",
        "two_streams.pickle",
        "expandable.pickle",
    ] {
        let mut app = load(f);
        for v in ['1', '2', '3', '4', '5'] {
            key(&mut app, v);
            let s = screen(&mut app, 80, 24);
            assert_eq!(s.lines().count(), 24);
            assert!(s.lines().last().unwrap().contains(f), "{s}");
            for (w, h) in [(20, 5), (1, 1), (40, 10)] {
                screen(&mut app, w, h);
            }
        }
    }
}

#[test]
fn quit_and_ctrl_c() {
    let mut app = load("clean.pickle");
    key(&mut app, 'q');
    assert!(app.quit());
    let mut app = load("clean.pickle");
    app.apply(map_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)).unwrap());
    assert!(app.quit());
}

#[test]
fn loading_screen_comes_before_the_data() {
    let mut app = App::loading("big.pickle");
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("loading big.pickle"), "{s}");
    key(&mut app, 'q');
    assert!(app.quit());
}

#[test]
fn leak_finding_enter_jumps_to_the_end_of_its_growth_window() {
    let mut app = load("leak_oom.pickle");
    key(&mut app, '2');
    key(&mut app, 'g');
    key(&mut app, '5');
    code(&mut app, KeyCode::Enter);
    assert_eq!(app.view(), View::Timeline);
    assert!(screen(&mut app, 100, 30).contains("event 3666/3666"));
    // A capture whose leaks could not be judged says why rather than "no leak findings".
    let mut app = load("fragmentation_oom.pickle");
    key(&mut app, '5');
    let s = screen(&mut app, 100, 30);
    assert!(s.contains("leaks not judged: the log is one pass"), "{s}");
    assert!(!s.contains("no leak findings"), "{s}");
    // One judged clean says so.
    let mut app = load("clean.pickle");
    key(&mut app, '5');
    let s = screen(&mut app, 100, 30);
    assert!(
        s.contains("no leak findings over 12 steps: no site's survivors grow"),
        "{s}"
    );
}

#[test]
fn loading_screen_shows_how_far_the_decoder_got() {
    use memscope::load::Progress;
    use std::sync::atomic::Ordering;
    let p = Progress::default();
    p.total.store(100 << 20, Ordering::Relaxed);
    p.done.store(45 << 20, Ordering::Relaxed);
    p.kind.store(Progress::SNAPSHOT, Ordering::Relaxed);
    let mut app = App::loading("big.pickle");
    app.set_loading_note(memscope::tui::loading_note(
        &p,
        std::time::Duration::from_millis(1200),
    ));
    let s = screen(&mut app, 100, 24);
    assert!(
        s.contains("decoding the snapshot: 45% (45.0 MiB of 100.0 MiB), 1.2 s"),
        "{s}"
    );
    // A real load reports its kind and ends with everything decoded.
    for (f, kind) in [
        ("leak_oom.pickle", Progress::SNAPSHOT),
        ("trace_clean.trace.json.gz", Progress::TRACE),
    ] {
        let p = Progress::default();
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures")
            .join(f);
        memscope::tui::Loaded::load_with_progress(&path, &p).unwrap();
        assert_eq!(p.kind.load(Ordering::Relaxed), kind);
        let total = p.total.load(Ordering::Relaxed);
        assert!(
            total > std::fs::metadata(&path).unwrap().len() as usize / 2,
            "{f}"
        );
        assert_eq!(p.done.load(Ordering::Relaxed), total);
        assert!(memscope::tui::loading_note(&p, Default::default()).starts_with("analysing the"));
    }
}

#[test]
fn map_by_category_agrees_with_the_reports_categories_at_the_peak() {
    use memscope::analysis::categories::Category;
    use memscope::model::BlockState;
    for f in [
        "leak_oom.pickle",
        "clean.pickle",
        "fragmentation_oom.pickle",
    ] {
        let mut app = load(f);
        key(&mut app, 'p');
        key(&mut app, '3');
        key(&mut app, 'c');
        assert!(app.map_by_category());
        let want = app.data().unwrap().analysis.devices[0]
            .categories_at_peak
            .clone()
            .expect("categories at the peak");
        let c = app.cache().unwrap();
        let cats = c.cats.as_ref().expect("classified at the cursor");
        let mut got = [0u64; 9];
        for b in c.state.live_blocks() {
            if b.state == BlockState::ActiveAllocated {
                got[cats[&b.address].0 as usize] += b.size;
            }
        }
        for (i, cat) in [
            Category::Parameter,
            Category::OptimizerState,
            Category::Gradient,
            Category::Activation,
            Category::Temporary,
            Category::BeforeRecording,
            Category::KvCache,
            Category::Output,
            Category::Other,
        ]
        .into_iter()
        .enumerate()
        {
            assert_eq!(got[i], want.bytes(cat), "{f}: {}", cat.name());
        }
        // The screen says which colour is which, and the selected block's category and rule.
        let s = screen(&mut app, 100, 30);
        assert!(
            s.contains("█ parameter █ optimizer █ gradient █ activation"),
            "{s}"
        );
        key(&mut app, 'c');
        assert!(!app.map_by_category());
        assert!(screen(&mut app, 100, 30).contains("█ allocated"));
    }
}

#[test]
fn time_axis_spreads_columns_over_time_and_clicks_land_in_their_column() {
    use memscope::tui::timeline::{column_of_bucket, time_buckets};
    let mut app = load("leak_oom.pickle");
    key(&mut app, '2');
    key(&mut app, 't');
    assert!(app.by_time());
    let times = app.time_axis().expect("leak_oom records times").to_vec();
    let n = times.len();
    let buckets = time_buckets(&times, 0, n, 90);
    assert_eq!(buckets.len(), 90);
    // The buckets tile the window in order, each an equal span of time.
    assert_eq!(buckets[0].0, 0);
    assert_eq!(buckets[89].1, n);
    assert!(buckets.windows(2).all(|w| w[0].1 == w[1].0));
    let dt = times[n - 1] / 90.0;
    for (c, &(a, b)) in buckets.iter().enumerate() {
        for &t in &times[a..b] {
            assert!(t >= dt * c as f64 - 1e-9 && (c == 89 || t < dt * (c + 1) as f64 + 1e-9));
        }
        if a < b {
            assert_eq!(column_of_bucket(a, &buckets), Some(c));
        }
    }
    // A click on a column puts the cursor on an event of that column's time span.
    let s = screen(&mut app, 100, 30);
    assert!(s.contains("time axis, events 0..3667"), "{s}");
    assert!(s.contains("+0.000 s"), "{s}");
    let chart_x = 10u16;
    let cols = 90usize;
    let b = time_buckets(&times, 0, n, cols);
    let col = (0..cols).rev().find(|&c| b[c].0 < b[c].1).unwrap();
    app.apply(Action::Click(chart_x + col as u16, 10));
    let cur = app.cursor().unwrap();
    assert!(
        cur >= b[col].0 && cur < b[col].1,
        "{cur} not in {:?}",
        b[col]
    );
    key(&mut app, 't');
    assert!(!app.by_time());
    assert!(screen(&mut app, 100, 30).contains("  events 0..3667"));
}

#[test]
fn the_leak_explanation_scrolls_to_its_fix_with_keys_and_the_wheel() {
    let mut app = load("leak_oom.pickle");
    key(&mut app, '5');
    let first = screen(&mut app, 80, 24);
    assert!(!first.contains("fix: "), "{first}");
    // PgDn scrolls the text, not the list, a page at a time, down to the fix.
    let mut pages = 0;
    let mut s = first.clone();
    while !s.contains("fix: ") && pages < 5 {
        code(&mut app, KeyCode::PageDown);
        pages += 1;
        s = screen(&mut app, 80, 24);
    }
    assert!(s.contains("fix: "), "{s}");
    assert!(pages >= 1, "{s}");
    assert!(
        s.contains("› leak (retained_graph"),
        "the list kept its selection:\n{s}"
    );
    for _ in 0..pages {
        code(&mut app, KeyCode::PageUp);
    }
    assert_eq!(screen(&mut app, 80, 24), first);
    // Focused (→), j scrolls the text a line at a time; ← gives j back to the list.
    key(&mut app, 'l');
    key(&mut app, 'j');
    let s = screen(&mut app, 80, 24);
    assert_ne!(s, first);
    assert!(!s.contains("growth from step 2"), "{s}");
    key(&mut app, 'k');
    assert_eq!(screen(&mut app, 80, 24), first);
    key(&mut app, 'h');
    key(&mut app, 'j');
    assert_eq!(app.leaks_sel(), 1);
    key(&mut app, 'k');
    // The wheel over the text scrolls it; the fix comes into view.
    let s = screen(&mut app, 80, 24);
    let y = s
        .lines()
        .position(|l| l.starts_with("growth from"))
        .unwrap() as u16;
    let mut s = first.clone();
    for _ in 0..10 {
        if s.contains("fix: ") {
            break;
        }
        app.apply(Action::Scroll(1, 10, y + 2));
        s = screen(&mut app, 80, 24);
    }
    assert!(s.contains("fix: "), "{s}");
    assert_eq!(app.leaks_sel(), 0);
}

#[test]
fn the_timeline_scales_to_allocated_memory_and_r_overlays_reserved() {
    let mut app = load("fragmentation_oom.pickle");
    key(&mut app, '2');
    let s = screen(&mut app, 100, 30);
    // 1.5 GiB peak allocated; 1.7 GiB reserved is not what the axis is scaled to.
    assert!(!s.contains('░'), "{s}");
    let ticks: Vec<&str> = s
        .lines()
        .filter_map(|l| l.get(..9).map(str::trim))
        .filter(|t| t.ends_with("iB") || *t == "0 B")
        .collect();
    assert_eq!(ticks, ["1.5 GiB", "1 GiB", "512 MiB", "0 B"], "{s}");
    key(&mut app, 'r');
    let s = screen(&mut app, 100, 30);
    assert!(s.contains('░'), "{s}");
    assert!(s.contains("░ reserved (r hides)"), "{s}");
}

#[test]
fn sites_children_never_read_the_same() {
    let mut app = load("leak_oom.pickle");
    key(&mut app, '4');
    code(&mut app, KeyCode::Enter);
    for (w, h) in [(80, 24), (200, 60)] {
        let s = screen(&mut app, w, h);
        let kids: Vec<&str> = s
            .lines()
            .filter(|l| l.contains("    ▸ ") || l.contains("    ▾ "))
            .map(|l| l.split(['▸', '▾']).nth(1).unwrap())
            .collect();
        assert!(kids.len() >= 2, "{s}");
        let distinct: std::collections::HashSet<_> = kids.iter().collect();
        assert_eq!(distinct.len(), kids.len(), "{s}");
    }
}
