//! TUI frame time: loads a capture, then for each of a set of key presses applies the action
//! and renders a frame on a `TestBackend`, timing both together (what a user waits for after a
//! keypress). Prints percentiles per key.
//!
//! cargo run --release --example tui_frame -- /work/bigcaps/big_allstacks.pickle [ROUNDS] [WxH]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use memscope::tui::{map_key, Action, App, Loaded};
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = PathBuf::from(
        args.get(1)
            .cloned()
            .unwrap_or_else(|| "/work/bigcaps/big_allstacks.pickle".into()),
    );
    let rounds: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(50);
    let (w, h) = args
        .get(3)
        .and_then(|s| s.split_once('x'))
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
        .unwrap_or((100u16, 30u16));
    let t = Instant::now();
    let loaded = match Loaded::load(&path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let load = t.elapsed();
    let (events, is_trace) = match &loaded {
        Loaded::Snapshot(d) => (d.snap.devices.iter().map(|d| d.events.len()).sum(), false),
        Loaded::Trace(t) => (t.trace.memory.len(), true),
    };
    let mut app = App::with(loaded);
    app.apply(Action::Resize(w, h));
    let mut term = Terminal::new(TestBackend::new(w, h)).expect("test backend");
    let t = Instant::now();
    term.draw(|f| f.render_widget(&app, f.area()))
        .expect("draw");
    let first = t.elapsed();
    println!("{}: {events} events, load+analyse+replay {load:.2?}, first frame {first:.2?}, {w}x{h}, {rounds} rounds", path.display());
    let k = |c: KeyCode| map_key(KeyEvent::new(c, KeyModifiers::NONE));
    let ch = |c: char| k(KeyCode::Char(c));
    // (name, setup actions, the timed action; `None`: a click on a random chart column)
    type Case = (&'static str, Vec<Option<Action>>, Option<Action>);
    // The keys both kinds of capture share: the overview and the timeline.
    let common = |next: &'static str| -> Vec<Case> {
        vec![
            ("overview j", vec![ch('1')], ch('j')),
            ("timeline l (one column)", vec![ch('2')], ch('l')),
            ("timeline h (one column)", vec![ch('2')], ch('h')),
            ("timeline L (one event)", vec![ch('2')], ch('L')),
            ("timeline + (zoom in)", vec![ch('2')], ch('+')),
            ("timeline - (zoom out)", vec![ch('2')], ch('-')),
            (next, vec![ch('2')], ch(']')),
            ("timeline p (peak)", vec![ch('2')], ch('p')),
            ("timeline g / G", vec![ch('2')], ch('g')),
            ("timeline click (random event)", vec![ch('2')], None),
        ]
    };
    let mut snapshot_cases = common("timeline ] (next marker)");
    snapshot_cases.extend([
        ("map j (next segment)", vec![ch('3')], ch('j')),
        ("map l (next block)", vec![ch('3')], ch('l')),
        ("sites j", vec![ch('4')], ch('j')),
        // `[` moves the cursor to the previous marker: the tree is rebuilt there.
        (
            "sites [ (cursor to the previous marker)",
            vec![ch('4')],
            ch('['),
        ),
        (
            "map by category [ (prev marker)",
            vec![ch('3'), ch('c')],
            ch('['),
        ),
        (
            "timeline by time l",
            vec![ch('c'), ch('2'), ch('t')],
            ch('l'),
        ),
        ("timeline by time click", vec![ch('2')], None),
        ("view switch (Tab)", vec![ch('t')], k(KeyCode::Tab)),
    ]);
    let enter = k(KeyCode::Enter);
    let mut trace_cases = common("timeline ] (next step)");
    trace_cases.extend([
        (
            "timeline a (alloc <-> free)",
            vec![ch('2'), ch('p')],
            ch('a'),
        ),
        ("steps j", vec![ch('3')], ch('j')),
        ("step Enter / Esc (its ops)", vec![ch('3')], enter),
        ("step ops j", vec![ch('3'), enter], ch('j')),
        ("step ops s (re-sort)", vec![ch('3')], ch('s')),
        ("op Enter / Esc (its events)", vec![ch('3')], enter),
        ("graph j", vec![ch('4')], ch('j')),
        ("leaks j", vec![ch('5')], ch('j')),
        ("timeline by time l", vec![ch('2'), ch('t')], ch('l')),
        ("view switch (Tab)", vec![ch('t')], k(KeyCode::Tab)),
    ]);
    let cases = if is_trace {
        trace_cases
    } else {
        snapshot_cases
    };
    if !is_trace {
        // The first `c` on the map builds the device's block classifier: a one-off pass.
        app.apply(ch('3').unwrap());
        let t = Instant::now();
        app.apply(ch('c').unwrap());
        term.draw(|f| f.render_widget(&app, f.area()))
            .expect("draw");
        println!(
            "first map-by-category toggle (builds the classifier): {:.2?}",
            t.elapsed()
        );
        app.apply(ch('c').unwrap());
    }
    println!(
        "{:<32} {:>9} {:>9} {:>9} {:>9}",
        "key", "p50", "p95", "p99", "max"
    );
    let mut all = Vec::new();
    let mut seed = 0x9e3779b97f4a7c15u64;
    for (name, setup, act) in cases {
        for a in setup.into_iter().flatten() {
            app.apply(a);
        }
        let mut v = Vec::with_capacity(rounds);
        for r in 0..rounds {
            let a = match act {
                Some(Action::Top) if r % 2 == 1 => Action::Bottom,
                Some(Action::Enter) if r % 2 == 1 => Action::Back,
                Some(a) => a,
                None => {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    Action::Click(10 + (seed % (w as u64 - 10)) as u16, 10)
                }
            };
            let t = Instant::now();
            app.apply(a);
            term.draw(|f| f.render_widget(&app, f.area()))
                .expect("draw");
            v.push(t.elapsed());
        }
        all.extend_from_slice(&v);
        println!(
            "{name:<32} {:>9.2?} {:>9.2?} {:>9.2?} {:>9.2?}",
            pct(&mut v, 0.5),
            pct(&mut v, 0.95),
            pct(&mut v, 0.99),
            pct(&mut v, 1.0)
        );
    }
    println!(
        "{:<32} {:>9.2?} {:>9.2?} {:>9.2?} {:>9.2?}",
        "ALL",
        pct(&mut all, 0.5),
        pct(&mut all, 0.95),
        pct(&mut all, 0.99),
        pct(&mut all, 1.0)
    );
}
