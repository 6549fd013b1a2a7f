//! The public compatibility corpus (`../shared/corpus`, captures written by other people): every
//! snapshot loads and analyses to a sane report, and every trace loads or is refused with the
//! clear words its README expects. Skips with a message when the folder is absent.

use std::path::{Path, PathBuf};

use memscope::report;

mod shared;

fn corpus() -> Option<PathBuf> {
    shared::path("corpus")
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
    out.sort();
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn every_corpus_snapshot_analyses_to_a_sane_report() {
    let Some(root) = corpus() else { return };
    let mut all = Vec::new();
    files(&root.join("snapshots"), &mut all);
    let mut n = 0;
    for path in all
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "pickle" || e == "gz"))
    {
        let snap = memscope::load::load_snapshot(path).unwrap_or_else(|e| panic!("{e}"));
        let a = memscope::analysis::analyze_snapshot(&snap, path, 0);
        assert!(!a.devices.is_empty(), "{}: no device", path.display());
        for d in &a.devices {
            assert!(
                d.replay_consistent,
                "{} cuda:{}: replay inconsistent: {:?}",
                path.display(),
                d.device,
                d.consistency
            );
            assert!(
                !d.top_sites.is_empty(),
                "{} cuda:{}: no top sites",
                path.display(),
                d.device
            );
            assert!(d.allocated_bytes <= d.reserved_bytes, "{}", path.display());
        }
        let text = report::to_string(
            &report::text::Text,
            &a,
            &report::Options {
                color: false,
                stacks: true,
            },
        );
        assert!(text.contains("VERDICT"), "{}", path.display());
        let json = report::to_string(&report::json::Json, &a, &report::Options::default());
        serde_json::from_str::<serde_json::Value>(&json).unwrap();
        n += 1;
    }
    assert!(n >= 4, "only {n} corpus snapshots found");
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn every_corpus_trace_loads_or_says_what_it_is() {
    let Some(root) = corpus() else { return };
    let mut all = Vec::new();
    files(&root.join("traces"), &mut all);
    let mut loaded = 0;
    for path in &all {
        let name = path.to_string_lossy();
        if !(name.ends_with(".json") || name.ends_with(".json.gz") || name.ends_with(".raw.gz")) {
            continue;
        }
        let res = memscope::load::load_trace(path);
        if name.ends_with("_et.json.gz") || name.contains("memory_timeline.raw") {
            // Not Chrome traces (README): a clear refusal, not a crash or a fake report.
            let err = match res {
                Err(e) => e.to_string(),
                Ok(t) => panic!("{name}: loaded as a trace with {} events", t.counts.events),
            };
            assert!(
                err.contains("not a profiler Chrome trace") || err.contains("not JSON"),
                "{err}"
            );
            continue;
        }
        let t = res.unwrap_or_else(|e| panic!("{e}"));
        assert!(t.counts.events > 0, "{name}: no events");
        loaded += 1;
    }
    assert!(loaded >= 10, "only {loaded} corpus traces loaded");
}

/// The TUI on other people's captures: every capture that loads opens, and every view (drilled
/// in where it can be) renders at 80x24 on each of its devices without a panic.
#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn every_corpus_capture_opens_in_the_tui_and_every_view_renders() {
    use memscope::tui::{map_key, Action, App, Loaded};
    use ratatui::backend::TestBackend;
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let Some(root) = corpus() else { return };
    let mut all = Vec::new();
    files(&root, &mut all);
    let mut opened = (0, 0);
    for path in all.iter().filter(|p| {
        p.extension()
            .is_some_and(|e| e == "pickle" || e == "gz" || e == "json")
    }) {
        let Ok(loaded) = Loaded::load(path) else {
            continue;
        };
        let trace = matches!(loaded, Loaded::Trace(_));
        if trace {
            opened.1 += 1;
        } else {
            opened.0 += 1;
        }
        let mut app = App::with(loaded);
        let mut term = ratatui::Terminal::new(TestBackend::new(80, 24)).unwrap();
        app.apply(Action::Resize(80, 24));
        let press = |app: &mut App, c: KeyCode| {
            if let Some(a) = map_key(KeyEvent::new(c, KeyModifiers::NONE)) {
                app.apply(a);
            }
        };
        let devices = if trace {
            app.trace().unwrap().devs.len()
        } else {
            app.data().unwrap().snap.devices.len()
        };
        for _ in 0..devices.max(1) {
            for keys in [
                "1", "1E", "2", "2pE", "3", "3E", "3EE", "3EEE", "4", "4E", "5", "5E",
            ] {
                for c in keys.chars() {
                    press(
                        &mut app,
                        match c {
                            'E' => KeyCode::Enter,
                            c => KeyCode::Char(c),
                        },
                    );
                }
                term.draw(|f| f.render_widget(&app, f.area()))
                    .unwrap_or_else(|e| panic!("{}: {keys}: {e}", path.display()));
                for _ in 0..4 {
                    press(&mut app, KeyCode::Esc);
                }
            }
            press(&mut app, KeyCode::Char('d'));
        }
    }
    // The corpus README lists 4 snapshots and a few dozen Chrome traces.
    assert!(
        opened.0 >= 4 && opened.1 >= 20,
        "opened {} snapshots and {} traces",
        opened.0,
        opened.1
    );
    eprintln!("opened {} snapshots and {} traces", opened.0, opened.1);
}
