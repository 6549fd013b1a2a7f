//! The TUI on profiler traces, driven without a terminal: the steps with their memory, the ops
//! and allocations inside a step, graph growth and leaks, on the project's own H200 traces.

use memscope::tui::trace::OpSort;
use memscope::tui::{Action, App, View};
use ratatui::crossterm::event::KeyCode;

use crate::common;
use crate::shared;

use crate::truth;
use common::{code, key, screen};

/// A trace fixture in the app.
fn load(name: &str) -> App {
    let app = common::load(name);
    assert!(app.trace().is_some(), "{name} is a trace");
    app
}

fn typed(app: &mut App, s: &str) {
    key(app, '/');
    for c in s.chars() {
        app.apply(Action::SearchChar(c));
    }
    app.apply(Action::SearchSubmit);
}

#[test]
fn overview_trace_total_loss() {
    let mut app = load("trace_total_loss.trace.json.gz");
    let s = screen(&mut app, 120, 30);
    // The trace's own tabs.
    assert!(
        s.starts_with(" 1 Overview  2 Timeline  3 Steps  4 Graph  5 Leaks"),
        "{s}"
    );
    let n = "trace_total_loss";
    truth::says(
        &s,
        &truth::human(truth::stat(n, "allocated_bytes.all.peak")),
    );
    truth::says(&s, &truth::last_profiled_step(n));
    insta::assert_snapshot!(s);
}

#[test]
fn timeline_trace_hook_cache() {
    let mut app = load("trace_hook_cache.trace.json.gz");
    key(&mut app, '2');
    let s = screen(&mut app, 120, 30);
    truth::says(&s, &truth::last_profiled_step("trace_hook_cache"));
    insta::assert_snapshot!(s);
}

#[test]
fn steps_trace_hook_cache() {
    let mut app = load("trace_hook_cache.trace.json.gz");
    key(&mut app, '3');
    let s = screen(&mut app, 120, 30);
    truth::says(&s, &truth::last_profiled_step("trace_hook_cache"));
    let peak = truth::stat("trace_hook_cache", "allocated_bytes.all.peak");
    truth::says(&s, &truth::human(peak));
    insta::assert_snapshot!(s);
}

#[test]
fn step_ops_trace_hook_cache() {
    let mut app = load("trace_hook_cache.trace.json.gz");
    key(&mut app, '3');
    code(&mut app, KeyCode::Down);
    code(&mut app, KeyCode::Enter);
    // Sorted by bytes allocated until `s` sorts by what is still alive at the end.
    assert_eq!(app.op_sort(), OpSort::Allocated);
    key(&mut app, 's');
    assert_eq!(app.op_sort(), OpSort::LiveAtEnd);
    let s = screen(&mut app, 120, 30);
    truth::says(&s, &truth::last_profiled_step("trace_hook_cache"));
    insta::assert_snapshot!(s);
}

#[test]
fn op_events_trace_hook_cache() {
    let mut app = load("trace_hook_cache.trace.json.gz");
    key(&mut app, '3');
    code(&mut app, KeyCode::Enter);
    key(&mut app, 'g');
    code(&mut app, KeyCode::Enter);
    assert!(app.op_open());
    // The op that allocates most in the step: the optimizer's state update.
    assert_eq!(app.selected_op().unwrap().name, "aten::_foreach_sqrt");
    let s = screen(&mut app, 120, 30);
    truth::says(&s, &truth::last_profiled_step("trace_hook_cache"));
    insta::assert_snapshot!(s);
}

#[test]
fn graph_trace_total_loss() {
    let mut app = load("trace_total_loss.trace.json.gz");
    key(&mut app, '4');
    let s = screen(&mut app, 120, 34);
    truth::says(&s, &truth::last_profiled_step("trace_total_loss"));
    insta::assert_snapshot!(s);
}

#[test]
fn leaks_trace_hook_cache() {
    let mut app = load("trace_hook_cache.trace.json.gz");
    key(&mut app, '5');
    let s = screen(&mut app, 120, 30);
    truth::says(&s, &truth::last_profiled_step("trace_hook_cache"));
    insta::assert_snapshot!(s);
}

/// The ops of a step account for all of the step's memory work: their allocations and frees
/// add up to the step's figures, for every step of every trace.
#[test]
fn ops_of_each_step_add_up_to_the_step() {
    for f in [
        "trace_total_loss.trace.json.gz",
        "trace_hook_cache.trace.json.gz",
        "trace_val_no_grad.trace.json",
        "trace_clean.trace.json.gz",
    ] {
        let app = load(f);
        let t = app.trace().unwrap();
        for (di, d) in t.devs.iter().enumerate() {
            let dm = &t.memory.devices[d.mem];
            assert_eq!(dm.steps.len(), t.trace.steps.len());
            for (si, sm) in dm.steps.iter().enumerate() {
                let ops = t.step_ops(di, si, OpSort::Time);
                let alloc: u64 = ops.rows.iter().map(|r| r.alloc_bytes).sum();
                let freed: u64 = ops.rows.iter().map(|r| r.freed_bytes).sum();
                let live: u64 = ops.rows.iter().map(|r| r.live_at_end_bytes).sum();
                assert_eq!(alloc, sm.allocated_bytes, "{f} {} step {si}", d.label);
                assert_eq!(freed, sm.freed_bytes, "{f} {} step {si}", d.label);
                assert_eq!(live, sm.live_at_end_bytes, "{f} {} step {si}", d.label);
                // Sorted by time, every op starts within the step, in order.
                let s = &t.trace.steps[si];
                assert!(ops.rows.windows(2).all(|w| w[0].ts <= w[1].ts), "{f}");
                assert!(ops
                    .rows
                    .iter()
                    .filter(|r| r.op.is_some())
                    .all(|r| r.ts >= s.ts && r.ts <= s.ts + s.dur));
                assert!(ops.with_memory <= ops.rows.len());
            }
        }
    }
}

#[test]
fn sorting_the_ops_orders_by_bytes_and_keeps_the_selection() {
    let mut app = load("trace_hook_cache.trace.json.gz");
    key(&mut app, '3');
    code(&mut app, KeyCode::Enter);
    code(&mut app, KeyCode::Down);
    code(&mut app, KeyCode::Down);
    let picked = app.selected_op().unwrap().op;
    let so = app.step_ops().unwrap();
    assert_eq!(so.sort, OpSort::Allocated);
    assert!(so
        .rows
        .windows(2)
        .all(|w| w[0].alloc_bytes >= w[1].alloc_bytes));
    key(&mut app, 's');
    let so = app.step_ops().unwrap();
    assert_eq!(so.sort, OpSort::LiveAtEnd);
    assert!(so
        .rows
        .windows(2)
        .all(|w| w[0].live_at_end_bytes >= w[1].live_at_end_bytes));
    assert_eq!(app.selected_op().unwrap().op, picked);
    key(&mut app, 's');
    let so = app.step_ops().unwrap();
    assert_eq!(so.sort, OpSort::Time);
    assert!(so.rows.windows(2).all(|w| w[0].ts <= w[1].ts));
    assert_eq!(app.selected_op().unwrap().op, picked);
    key(&mut app, 's');
    assert_eq!(app.op_sort(), OpSort::Allocated);
}

#[test]
fn graph_finding_enter_opens_the_step_with_the_accumulating_op() {
    let mut app = load("trace_total_loss.trace.json.gz");
    // The overview's first finding is the graph growth; Enter shows it in the graph view.
    code(&mut app, KeyCode::Enter);
    assert_eq!(app.view(), View::Graph);
    // Enter there: the ops of the last complete step that grew, on `aten::add_`.
    code(&mut app, KeyCode::Enter);
    assert_eq!(app.view(), View::Steps);
    let t = app.trace().unwrap();
    let so = app.step_ops().unwrap();
    assert_eq!(t.trace.steps[so.step].name, "ProfilerStep#10");
    let op = app.selected_op().unwrap();
    assert_eq!(op.name, "aten::add_");
    assert_eq!(op.site.as_ref().unwrap().function, "sc_trace_total_loss");
    // Esc climbs back: steps list, then the graph view, then the overview.
    code(&mut app, KeyCode::Esc);
    assert!(app.step_ops().is_none());
    assert_eq!(app.view(), View::Steps);
    code(&mut app, KeyCode::Esc);
    assert_eq!(app.view(), View::Graph);
    code(&mut app, KeyCode::Esc);
    assert_eq!(app.view(), View::Overview);
}

#[test]
fn leak_enter_shows_the_surviving_allocations_of_the_first_leaking_step() {
    let mut app = load("trace_hook_cache.trace.json.gz");
    key(&mut app, '5');
    code(&mut app, KeyCode::Enter);
    assert_eq!(app.view(), View::Steps);
    assert_eq!(app.op_sort(), OpSort::LiveAtEnd);
    let t = app.trace().unwrap();
    let so = app.step_ops().unwrap();
    assert_eq!(t.trace.steps[so.step].name, "ProfilerStep#2");
    let op = app.selected_op().unwrap();
    assert!(op.live_at_end_bytes > 0, "{op:?}");
    assert_eq!(op.site.as_ref().unwrap().function, "sc_trace_hook_cache");
    // Its events: the surviving one is marked, and Enter puts the timeline cursor on it.
    code(&mut app, KeyCode::Enter);
    let s = screen(&mut app, 120, 30);
    assert!(s.contains("ALIVE AT THE END"), "{s}");
    let live = (0..op_events(&app))
        .find(|&k| {
            let e = app.selected_op().unwrap().events[k];
            let t = app.trace().unwrap();
            t.event(app.dev(), e).unwrap().bytes > 0 && t.freed_at(app.dev(), e).is_none()
        })
        .expect("a surviving allocation");
    for _ in 0..live {
        code(&mut app, KeyCode::Down);
    }
    let ev = app.selected_op_event().unwrap();
    code(&mut app, KeyCode::Enter);
    assert_eq!(app.view(), View::Timeline);
    assert_eq!(app.cursor(), Some(ev));
    // `a` on an allocation that is never freed says so.
    key(&mut app, 'a');
    assert!(app.message().contains("never freed"), "{}", app.message());
}

fn op_events(app: &App) -> usize {
    app.selected_op().map(|r| r.events.len()).unwrap_or(0)
}

#[test]
fn timeline_keys_peak_steps_enter_and_alloc_free() {
    let mut app = load("trace_total_loss.trace.json.gz");
    key(&mut app, '2');
    key(&mut app, 'g');
    assert_eq!(app.cursor(), Some(0));
    key(&mut app, ']');
    let t = app.trace().unwrap();
    let second_step = t.devs[0].step_events[1].0;
    let peak_at = t.devs[0]
        .allocated
        .iter()
        .position(|&v| v == *t.devs[0].allocated.iter().max().unwrap())
        .unwrap();
    // Event 0 opens the first step, so `]` goes to the peak or the second step, whichever
    // comes first; then on to the other.
    assert_eq!(t.devs[0].step_events[0].0, 0);
    assert_eq!(app.cursor(), Some(second_step.min(peak_at)));
    key(&mut app, ']');
    assert_eq!(app.cursor(), Some(second_step.max(peak_at)));
    key(&mut app, 'p');
    let s = screen(&mut app, 120, 30);
    assert!(s.contains("here: peak 129.1 MiB allocated"), "{s}");
    let peak = app.cursor().unwrap();
    let t = app.trace().unwrap();
    assert_eq!(
        t.devs[0].allocated[peak],
        *t.devs[0].allocated.iter().max().unwrap()
    );
    // `a` from an allocation goes to its free, and back.
    key(&mut app, 'g');
    let t = app.trace().unwrap();
    let m0 = *t.event(0, 0).unwrap();
    assert!(m0.bytes > 0);
    key(&mut app, 'a');
    let f = app.cursor().unwrap();
    let t = app.trace().unwrap();
    let mf = t.event(0, f).unwrap();
    assert_eq!((mf.addr, mf.bytes), (m0.addr, -m0.bytes));
    key(&mut app, 'a');
    assert_eq!(app.cursor(), Some(0));
    // Enter: the ops of the step around the cursor, with the cursor's op selected.
    key(&mut app, 'p');
    let peak = app.cursor().unwrap();
    code(&mut app, KeyCode::Enter);
    assert_eq!(app.view(), View::Steps);
    assert!(app.selected_op().unwrap().events.contains(&peak));
    assert_eq!(app.selected_op_event(), Some(peak));
    assert_eq!(app.selected_op().unwrap().name, "aten::_foreach_sqrt");
}

#[test]
fn search_finds_ops_in_a_step_and_events_on_the_timeline() {
    let mut app = load("trace_total_loss.trace.json.gz");
    key(&mut app, '3');
    code(&mut app, KeyCode::Enter);
    typed(&mut app, "add_");
    assert!(app.selected_op().unwrap().name.contains("add_"));
    key(&mut app, '2');
    key(&mut app, 'g');
    typed(&mut app, "mse_loss");
    let c = app.cursor().unwrap();
    assert!(c > 0);
    let t = app.trace().unwrap();
    let (inner, top) = t.event_ops(0, c);
    assert!(
        inner.unwrap().contains("mse_loss") || top.unwrap().contains("mse_loss"),
        "{inner:?} {top:?}"
    );
    key(&mut app, 'n');
    assert!(app.cursor().unwrap() > c);
}

#[test]
fn clean_trace_has_no_growth_and_no_leak() {
    let mut app = load("trace_clean.trace.json.gz");
    key(&mut app, '4');
    let s = screen(&mut app, 100, 30);
    assert!(s.contains("no graph growth"), "{s}");
    key(&mut app, '5');
    let s = screen(&mut app, 100, 30);
    assert!(s.contains("no leak findings"), "{s}");
    key(&mut app, '1');
    let s = screen(&mut app, 100, 30);
    assert!(
        s.contains("VERDICT no leak and no autograd graph growth"),
        "{s}"
    );
}

#[test]
fn every_trace_view_renders_at_80x24_and_survives_tiny_terminals() {
    for f in [
        "trace_total_loss.trace.json.gz",
        "trace_val_no_grad.trace.json",
        "trace_clean.trace.json.gz",
    ] {
        let mut app = load(f);
        for keys in ["1", "2", "3", "3E", "3EE", "4", "5", "5E", "d2"] {
            for c in keys.chars() {
                match c {
                    'E' => code(&mut app, KeyCode::Enter),
                    c => key(&mut app, c),
                }
            }
            let s = screen(&mut app, 80, 24);
            assert_eq!(s.lines().count(), 24);
            assert!(s.lines().last().unwrap().contains(f), "{keys}: {s}");
            for (w, h) in [(20, 5), (1, 1), (40, 10)] {
                screen(&mut app, w, h);
            }
            code(&mut app, KeyCode::Esc);
            code(&mut app, KeyCode::Esc);
        }
    }
}

#[test]
fn mouse_selects_steps_and_ops() {
    let mut app = load("trace_total_loss.trace.json.gz");
    screen(&mut app, 120, 30);
    app.apply(Action::Click(30, 0)); // the tab bar: `3 Steps`
    assert_eq!(app.view(), View::Steps);
    // Body starts on row 1; the list under its title and header, on row 3.
    app.apply(Action::Click(10, 3 + 4));
    assert_eq!(app.steps_sel(), 4);
    code(&mut app, KeyCode::Enter);
    app.apply(Action::Click(10, 3 + 2));
    assert_eq!(app.ops_sel(), 2);
    app.apply(Action::Scroll(1, 10, 10));
    assert_eq!(app.ops_sel(), 3);
}

#[test]
fn trace_timeline_has_a_time_axis_too() {
    let mut app = load("trace_hook_cache.trace.json.gz");
    key(&mut app, '2');
    key(&mut app, 't');
    let times = app.time_axis().expect("trace events have times");
    assert_eq!(times.len(), app.trace().unwrap().devs[0].events.len());
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
    let s = screen(&mut app, 100, 30);
    assert!(s.contains("time axis, events 0..570"), "{s}");
}

#[test]
fn narrow_terminals_keep_the_op_name_and_what_survives() {
    let mut app = load("trace_hook_cache.trace.json.gz");
    key(&mut app, '3');
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("alive@end"), "{s}");
    code(&mut app, KeyCode::Enter);
    key(&mut app, 's');
    key(&mut app, 'g');
    let s = screen(&mut app, 80, 24);
    // The first row: the op that leaves memory alive, its name on screen.
    let row = s.lines().find(|l| l.starts_with('›')).unwrap();
    assert!(
        row.contains("1.0 MiB") && row.contains("aten::linear"),
        "{s}"
    );
    // Backward ops go by their node's name.
    assert!(s.contains("AddmmBackward0 ◂bw"), "{s}");
    assert!(!s.contains("evaluate_function"), "{s}");
    code(&mut app, KeyCode::Enter);
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("ALIVE AT THE END"), "{s}");
}

#[test]
fn wrapped_text_keeps_a_blank_column_before_the_scroll_bar() {
    // The leak's explanation scrolls at 80x24: the bar is in the last column and the text,
    // wrapped one column narrower, never touches it.
    let mut app = load("realistic/trace_eval_leak.trace.json.gz");
    key(&mut app, '5');
    let s = screen(&mut app, 80, 24);
    let barred: Vec<Vec<char>> = s
        .lines()
        .map(|l| l.chars().collect::<Vec<_>>())
        .filter(|l| l.len() == 80 && matches!(l[79], '█' | '│'))
        .collect();
    assert!(barred.len() > 3, "the explanation scrolls: {s}");
    for l in &barred {
        assert_eq!(l[78], ' ', "text runs into the bar: {s}");
    }
    // The chart is the finding's main site only (the other sites have totals only).
    assert!(
        s.contains("bytes allocated in each step at the finding's main site"),
        "{s}"
    );
}

/// The app on a real capture of `../shared/corpus`, named by its file name only.
fn load_corpus(rel: &str) -> Option<App> {
    let p = shared::corpus(rel)?;
    let mut app = App::with(memscope::tui::Loaded::load(&p).expect("a trace"));
    app.set_path(rel.rsplit('/').next().unwrap().to_owned());
    assert!(app.trace().is_some(), "{rel} is a trace");
    Some(app)
}

/// The torch 1.9 trace records allocations only as `Bytes` (running sums from 0 at its start;
/// no reserved total): the TUI shows changes from the start and reserved as unknown, never
/// `0 B / 0 B` reserved or `0 B` allocated at each step end.
#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn torch19_trace_shows_changes_from_the_start_and_reserved_unknown() {
    let Some(mut app) = load_corpus("traces/other/kineto_resnet50_torch19_mem.pt.trace.json.gz")
    else {
        return;
    };
    let s = screen(&mut app, 130, 32);
    let row = s
        .lines()
        .find(|l| l.starts_with("cuda:0"))
        .unwrap_or_else(|| panic!("no device row:\n{s}"));
    assert!(
        row.contains("+0 B / +2.6 GiB from start") && row.contains("unknown / unknown"),
        "{row}"
    );
    assert!(!row.contains("0 B / 0 B"), "{row}");

    key(&mut app, '3');
    let s = screen(&mut app, 130, 32);
    assert!(s.contains("changes from the trace's start"), "{s}");
    let steps: Vec<&str> = s
        .lines()
        .filter(|l| {
            l.trim_start_matches(['›', ' '])
                .starts_with("ProfilerStep#")
        })
        .collect();
    assert_eq!(steps.len(), 6, "{s}");
    for l in steps {
        // step, ms, start, peak, end, Δ: the running sum is back at 0 at every step's end.
        let cols: Vec<&str> = l
            .trim_start_matches(['›', ' '])
            .split_whitespace()
            .collect();
        assert_eq!(
            cols[2..10],
            ["+0", "B", "+2.6", "GiB", "+0", "B", "+0", "B"],
            "{l}"
        );
    }

    key(&mut app, '2');
    let s = screen(&mut app, 130, 32);
    let header = s.lines().nth(1).unwrap();
    assert!(
        header.contains("from the trace's start") && header.contains("reserved unknown"),
        "{header}"
    );
    assert!(s.contains("reserved: not recorded"), "{s}");
}

/// A trace without memory events: the overview and the steps say that memory was not
/// recorded, with no figure.
#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn memoryless_trace_shows_no_memory_figures() {
    let Some(mut app) = load_corpus("traces/hta/trace_diff/control/control.json.gz") else {
        return;
    };
    let s = screen(&mut app, 130, 32);
    assert!(s.contains("memory: not recorded"), "{s}");
    assert!(!s.contains(" B "), "{s}");
    key(&mut app, '3');
    let s = screen(&mut app, 130, 32);
    assert!(
        s.contains("6 profiled steps (ProfilerStep#1009 .. ProfilerStep#1014)")
            && s.contains("memory per step not recorded"),
        "{s}"
    );
    assert!(!s.contains(" B "), "{s}");
}
