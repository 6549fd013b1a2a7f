//! The TUI points of issue #25, each at 40x12, 80x24 and 120x40: a clean capture's overview says
//! what `analyze` says (steps, sites, categories); the Sites view has column headers and stays
//! readable when narrow; the help is the mode's own and scrolls; the allocator map's segment
//! labels are explained; a block's stack folds its allocator internals (`f`) and shortens C++
//! names; the Leaks view tells "not judged" from "none found"; a capture with no log is not
//! "before the log"; the trace's op list carries the caveat of lines recorded when profiling began.

use memscope::tui::App;
use ratatui::crossterm::event::KeyCode;

use crate::common;

use common::{code, key, load, screen};

const SIZES: [(u16, u16); 3] = [(40, 12), (80, 24), (120, 40)];

fn keys(app: &mut App, ks: &str) {
    for c in ks.chars() {
        match c {
            'E' => code(app, KeyCode::Enter),
            'D' => code(app, KeyCode::Down),
            'P' => code(app, KeyCode::PageDown),
            c => key(app, c),
        }
    }
}

fn at(fixture: &str, ks: &str, w: u16, h: u16) -> String {
    let mut app = load(fixture);
    keys(&mut app, ks);
    screen(&mut app, w, h)
}

#[test]
fn a_clean_captures_overview_has_steps_sites_and_categories() {
    for (w, h) in SIZES {
        // The pane scrolls: page through it and gather what it shows.
        let mut app = load("clean.pickle");
        let mut seen = screen(&mut app, w, h);
        for _ in 0..8 {
            code(&mut app, KeyCode::PageDown);
            seen.push_str(&screen(&mut app, w, h));
        }
        for want in [
            "STEPS cuda:0: 12 steps",
            "top sites at the peak",
            "by category at the peak",
        ] {
            assert!(seen.contains(want), "{w}x{h}: {want}\n{seen}");
        }
        assert!(
            seen.contains("clean_loop"),
            "{w}x{h}: a site's function\n{seen}"
        );
    }
}

#[test]
fn sites_have_column_headers_and_read_at_40x12() {
    for (w, h) in SIZES {
        let s = at("clean.pickle", "4", w, h);
        let header = s.lines().nth(2).unwrap();
        assert!(
            header.contains("bytes") && header.contains("site"),
            "{w}x{h}:\n{s}"
        );
        if w >= 50 {
            assert!(header.contains("blocks"), "{w}x{h}:\n{s}");
        }
        // The biggest site: its bytes, file, line and function, whole.
        let row = s.lines().nth(3).unwrap();
        assert!(row.contains("128.1 MiB"), "{w}x{h}:\n{s}");
        assert!(row.contains("generate.py:232 clean_loop"), "{w}x{h}:\n{s}");
    }
}

/// Every line the help shows, scrolled from top to bottom.
fn whole_help(fixture: &str, w: u16, h: u16) -> String {
    let mut app = load(fixture);
    key(&mut app, '?');
    let mut seen = screen(&mut app, w, h);
    for _ in 0..80 {
        code(&mut app, KeyCode::Down);
        assert!(app.help(), "↓ scrolls the help, it does not close it");
        seen.push_str(&screen(&mut app, w, h));
    }
    code(&mut app, KeyCode::Esc);
    assert!(!app.help(), "another key closes it");
    seen
}

#[test]
fn the_help_is_the_modes_own_and_scrolls_to_its_end() {
    for (w, h) in SIZES {
        let snap = whole_help("clean.pickle", w, h);
        for want in [
            "a snapshot's keys",
            "3 Allocator map",
            "segment labels",
            "Le / Se",
            "expandable",
            "mouse",
        ] {
            assert!(snap.contains(want), "{w}x{h}: {want}\n{snap}");
        }
        let trace = whole_help("trace_hook_cache.trace.json.gz", w, h);
        for want in [
            "a profiler trace's keys",
            "3 Steps",
            "4 Graph",
            "survivors",
            "mouse",
        ] {
            assert!(trace.contains(want), "{w}x{h}: {want}\n{trace}");
        }
        for not in ["Allocator map", "map:", "Le / Se"] {
            assert!(
                !trace.contains(not),
                "{w}x{h}: a trace's help names {not}\n{trace}"
            );
        }
    }
    // At 40x12 it says it scrolls, and where it is.
    let mut app = load("clean.pickle");
    key(&mut app, '?');
    let s = screen(&mut app, 40, 12);
    assert!(
        s.contains("↑↓ scroll") && s.contains("lines 1-10 of"),
        "{s}"
    );
}

#[test]
fn the_maps_segment_labels_are_explained() {
    for (w, h) in SIZES {
        let s = at("expandable.pickle", "3", w, h);
        if w >= 80 {
            assert!(
                s.contains("L/S large/small pool, e expandable"),
                "{w}x{h}:\n{s}"
            );
        }
        // The selected segment's line spells its label out.
        let seen = {
            let mut app = load("expandable.pickle");
            key(&mut app, '3');
            let mut all = screen(&mut app, w, h);
            for _ in 0..4 {
                code(&mut app, KeyCode::PageDown);
                all.push_str(&screen(&mut app, w, h));
            }
            all
        };
        assert!(
            seen.contains("(Le s0)") && seen.contains("large pool"),
            "{w}x{h}:\n{seen}"
        );
    }
}

#[test]
fn a_blocks_stack_folds_allocator_internals_and_shortens_cpp_names() {
    for (w, h) in SIZES {
        let folded = at("unit/tiny_native_p4.pickle", "3", w, h);
        assert!(!folded.contains("CapturedTraceback"), "{w}x{h}:\n{folded}");
        assert!(!folded.contains("unwind"), "{w}x{h}:\n{folded}");
        if h >= 24 {
            assert!(
                folded.contains("… 5 library and native frames (f shows them)"),
                "{w}x{h}:\n{folded}"
            );
            assert!(folded.contains("train.py:12 step"), "{w}x{h}:\n{folded}");
        }
    }
    let shown = at("unit/tiny_native_p4.pickle", "3f", 120, 40);
    assert!(shown.contains("??:0 torch::unwind::unwind()"), "{shown}");
    assert!(
        shown.contains("RegisterCUDA.cpp:0 c10::impl::wrap_kernel_functor_unboxed_<…>::call(…)"),
        "{shown}"
    );
    for l in shown.lines() {
        assert!(l.chars().count() <= 120, "{l}");
    }
}

#[test]
fn leaks_not_judged_say_why() {
    for (w, h) in SIZES {
        let s = at("fragmentation_oom.pickle", "5", w, h);
        assert!(s.contains("leaks not judged"), "{w}x{h}:\n{s}");
        assert!(!s.contains("no leak findings"), "{w}x{h}:\n{s}");
        let s = at("unit/tiny_nohistory_p4.pickle", "5", w, h);
        assert!(s.contains("leaks not judged"), "{w}x{h}:\n{s}");
        if w >= 80 {
            assert!(s.contains("no allocation history"), "{w}x{h}:\n{s}");
        }
        let s = at("clean.pickle", "5", w, h);
        assert!(s.contains("no leak findings"), "{w}x{h}:\n{s}");
    }
}

#[test]
fn a_capture_without_a_log_is_at_the_dump_not_before_the_log() {
    for (w, h) in SIZES {
        for view in ["3", "4"] {
            let s = at("unit/tiny_nohistory_p4.pickle", view, w, h);
            assert!(s.contains("at the dump"), "{w}x{h} view {view}:\n{s}");
            assert!(!s.contains("before the log"), "{w}x{h} view {view}:\n{s}");
        }
    }
    let s = at("unit/tiny_nohistory_p4.pickle", "3", 120, 40);
    assert!(s.contains("allocated at (unknown: no"), "{s}");
}

#[test]
fn a_steps_ops_carry_the_caveat_of_lines_recorded_when_profiling_began() {
    for (w, h) in SIZES {
        let s = at("trace_hook_cache.trace.json.gz", "3DE", w, h);
        assert!(s.contains("line*: where that frame"), "{w}x{h}:\n{s}");
    }
    let s = at("trace_hook_cache.trace.json.gz", "3DE", 120, 40);
    assert!(s.contains("(generate.py:564* "), "{s}");
    assert!(
        s.contains("(generate.py:119 data)"),
        "a line that is known has no mark\n{s}"
    );
}

/// The map names streams by a short ordinal, not by their raw handle (issue 42: `Lp
/// s1208349744`): `two_streams.pickle` (fixtures/README.md) allocates on the default stream
/// and on one side stream; the rows say `s0` and `s1`, and the selected side segment's line
/// gives the handle once.
#[test]
fn the_map_names_streams_by_ordinal_not_by_handle() {
    let side = {
        let snap = memscope::load::load_snapshot(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/two_streams.pickle"),
        )
        .unwrap();
        let s = snap.devices[0]
            .segments
            .iter()
            .map(|s| s.stream)
            .find(|&s| s != 0);
        s.expect("two_streams has a side stream's segment")
    };
    for (w, h) in SIZES {
        let mut app = load("two_streams.pickle");
        key(&mut app, '3');
        let mut seen = screen(&mut app, w, h);
        for _ in 0..40 {
            code(&mut app, KeyCode::Down);
            seen.push_str(&screen(&mut app, w, h));
        }
        assert!(
            !seen.contains(&format!("s{side}")),
            "{w}x{h}: a raw handle as a label\n{seen}"
        );
        if w >= 80 {
            assert!(
                seen.contains(" s1 "),
                "{w}x{h}: the side stream's row\n{seen}"
            );
            assert!(
                seen.contains(" s0 "),
                "{w}x{h}: the default stream's row\n{seen}"
            );
            // The details wrap: read them as one text.
            let flat: String = seen
                .lines()
                .map(|l| l.trim_end_matches(['█', '│', ' ']))
                .collect::<Vec<_>>()
                .join(" ");
            assert!(
                flat.contains(&format!("stream s1 (handle {side})")),
                "{w}x{h}: the side segment's details\n{seen}"
            );
        }
    }
}

/// q and Esc mean one thing in every mode (issue 42: the rank's help said "q quits", but q went
/// back to the ranks list). A rank opened from the ranks list says that q goes back to it, in
/// its help and its hint line; Esc is "back one step" and never quits, in the ranks list too.
#[test]
fn q_and_esc_agree_with_the_help_in_a_rank_and_alone() {
    for (w, h) in [(80, 24), (120, 40)] {
        let alone = whole_help("clean.pickle", w, h);
        assert!(alone.contains("quit"), "{w}x{h}:\n{alone}");
        assert!(!alone.contains("ranks list"), "{w}x{h}:\n{alone}");
        assert!(alone.contains("never quits"), "{w}x{h}:\n{alone}");

        let mut app = load("clean.pickle");
        app.opened_from_ranks();
        let hint = screen(&mut app, w, h);
        assert!(hint.contains("q:ranks list"), "{w}x{h}:\n{hint}");
        key(&mut app, '?');
        let help = screen(&mut app, w, h);
        assert!(
            help.contains("back to the ranks list"),
            "{w}x{h}: the rank's help\n{help}"
        );
        assert!(!help.contains(" quit\n"), "{w}x{h}:\n{help}");
        // The key does what the help says: q leaves the rank (the caller shows the list).
        code(&mut app, KeyCode::Esc);
        assert!(!app.quit());
        key(&mut app, 'q');
        assert!(app.quit());
    }
}

/// Sites with no place are named by their function, not `??:0` (issue 42):
/// `claims/ft_midrun_allstacks` (fixtures/claims/README.md) records C++ frames, and blocks whose
/// stack has no Python frame are placed at a native frame whose file is `??` and line 0.
#[test]
fn sites_without_a_place_are_named_by_their_function() {
    for (w, h) in [(120, 40)] {
        let mut app = load("claims/ft_midrun_allstacks.pickle.gz");
        key(&mut app, '4');
        let mut seen = screen(&mut app, w, h);
        for _ in 0..6 {
            code(&mut app, KeyCode::PageDown);
            seen.push_str(&screen(&mut app, w, h));
        }
        assert!(!seen.contains("??:0"), "{w}x{h}:\n{seen}");
        assert!(!seen.contains(" :0 "), "{w}x{h}:\n{seen}");
    }
}
