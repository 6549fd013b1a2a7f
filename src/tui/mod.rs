//! `memscope tui FILE`: browse a capture interactively.
//!
//! The split is the usual one for testable TUIs: [`input`] turns terminal events into
//! [`Action`]s, [`App::apply`] is the only thing that changes state, and the views are widgets
//! over `&App`. Only [`run`] touches a real terminal, so the whole app can be driven and
//! rendered in tests on a `TestBackend`.
//!
//! The app holds what every capture has (view, device, timeline cursors, history, overview,
//! search, message) and a [`app::Mode`]: `Snapshot(SnapshotMode)` or `Trace(TraceMode)` (or
//! still loading). Each mode owns its capture and its views' state (the structs of
//! [`components`]); the app handles the global actions (quit, help, view switching, devices,
//! markers, the timeline) and routes a view's keys, clicks and searches to the active mode,
//! whose component answers with an [`action::Effect`] (jump, show an event, say something) that
//! the app carries out. Each mode draws its views (`render_view`): each view is a widget over
//! its component and the capture, never the app (the timelines also take what the app shows of
//! them, a `layout::TimelineAt`).
//!
//! Loading a large capture takes seconds, so it happens on a thread while the terminal already
//! shows a loading screen and still answers `q`. The terminal is restored however the loop
//! ends: on quit, on error (a drop guard), and on a panic (a hook that restores it before the
//! panic message is printed, so the message is readable).
//!
//! The modules form a graph without a circle; each uses only those below it:
//!
//! ```text
//!   mod (run, events)
//!    └ screen (tabs, status, help; the mode draws the view)
//!       ├ views (snapshot: map, sites, leaks; SnapshotMode::render_view)
//!       ├ trace_views (trace: timeline, steps, graph, leaks; TraceMode::render_view)
//!       │    └ timeline (the snapshot's) · overview (both kinds): no app, over the capture
//!       │         └ app (App: global state and actions, enum Mode, App::apply)
//!       │              ├ snapshot_mode (SnapshotMode: snapshot, cursor cache, overview list, map/sites/leaks keys)
//!       │              ├ trace_mode (TraceMode: trace, overview list, steps/graph/leaks keys)
//!       │              │    └ (both modes) components (ListText, Steps, MapState, SitesState) ── layout, data (Jump)
//!       │              │         └ action (View, Action, Effect, Ctx) ── data (Jump) · widgets
//!       │              ├ input (keys → Action) ── action
//!       │              └ loaded (the capture: a snapshot's Data or a TraceData)
//!       │                   ├ data (snapshot: analysis, timelines, markers, findings)
//!       │                   └ trace (trace: analysis, per-device series, steps' ops) ── data, sites
//!       └ widgets (text pane, table, fitted lines) ── widgets::chart (memory chart, step bars)
//!            └ layout (pure geometry) · data (markers)
//!   sites (the live-memory tree) and layout depend on nothing in src/tui.
//! ```

pub mod action;
pub mod app;
pub mod components;
pub mod data;
pub mod help;
pub mod input;
pub mod layout;
pub mod loaded;
pub mod overview;
pub mod overview_summary;
pub mod screen;
pub mod sites;
pub mod sites_view;
pub mod snapshot_mode;
pub mod timeline;
pub mod trace;
pub mod trace_mode;
pub mod trace_views;
pub mod views;
pub mod widgets;

use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crossterm::event::{self, DisableMouseCapture, EnableMouseCapture, Event};
use crossterm::execute;

pub use app::{Action, App, View};
pub use data::Data;
pub use input::{map_key, map_mouse, map_search_key};
pub use loaded::Loaded;
pub use trace::TraceData;

use crate::load::{LoadError, Progress};
use crate::units::bytes;

#[derive(Debug, thiserror::Error)]
pub enum TuiError {
    #[error("terminal: {0}")]
    Terminal(#[from] io::Error),
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("the loading thread died")]
    Loader,
}

/// Feeds one terminal event to the app.
pub fn handle_event(app: &mut App, ev: Event) {
    let action = match ev {
        Event::Key(k) => {
            if app.typing().is_some() {
                map_search_key(k)
            } else {
                map_key(k)
            }
        }
        Event::Mouse(m) => map_mouse(m),
        Event::Resize(w, h) => Some(Action::Resize(w, h)),
        _ => None,
    };
    if let Some(a) = action {
        app.apply(a);
    }
}

/// The loading screen's second line: what the loader is doing and how far it has got.
pub fn loading_note(p: &Progress, elapsed: Duration) -> String {
    let total = p.total.load(Ordering::Relaxed);
    let done = p.done.load(Ordering::Relaxed);
    let kind = match p.kind.load(Ordering::Relaxed) {
        Progress::SNAPSHOT => "snapshot",
        Progress::TRACE => "trace",
        _ => "file",
    };
    let what = if total == 0 {
        "reading the file".to_owned()
    } else if done >= total {
        format!("analysing the {kind}")
    } else if done > 0 {
        format!(
            "decoding the {kind}: {}% ({} of {})",
            done * 100 / total,
            bytes(done as u64),
            bytes(total as u64)
        )
    } else {
        format!("decoding the {kind} ({})", bytes(total as u64))
    };
    format!("{what}, {:.1} s", elapsed.as_secs_f64())
}

struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = execute!(io::stdout(), DisableMouseCapture, crossterm::cursor::Show);
        ratatui::restore();
        crate::signals::hold_terminal(false);
    }
}

/// Runs the TUI on the terminal until the user quits.
pub fn run(path: &Path) -> Result<(), TuiError> {
    let (tx, rx) = mpsc::channel();
    let p = path.to_path_buf();
    let progress = Arc::new(Progress::default());
    let shared = Arc::clone(&progress);
    std::thread::spawn(move || {
        let _ = tx.send(Loaded::load_with_progress(&p, &shared));
    });
    let started = Instant::now();
    // A signal (SIGTERM, SIGHUP, SIGQUIT, SIGINT) restores the terminal too (`crate::signals`).
    crate::signals::save_terminal_modes();
    crate::signals::hold_terminal(true);
    let mut terminal = ratatui::try_init()?;
    let _restore = Restore;
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // ratatui's own hook (in `prev`) leaves raw mode and the alternate screen.
        let _ = execute!(io::stdout(), DisableMouseCapture, crossterm::cursor::Show);
        crate::signals::hold_terminal(false);
        prev(info);
    }));
    execute!(io::stdout(), EnableMouseCapture)?;
    let mut app = App::loading(&path.display().to_string());
    let size = terminal.size()?;
    app.apply(Action::Resize(size.width, size.height));
    let mut load_error = None;
    let mut waiting = true;
    loop {
        if waiting {
            app.set_loading_note(loading_note(&progress, started.elapsed()));
        }
        terminal.draw(|f| f.render_widget(&app, f.area()))?;
        if waiting {
            match rx.try_recv() {
                Ok(Ok(data)) => {
                    app.set_loaded(data);
                    waiting = false;
                    continue;
                }
                Ok(Err(e)) => {
                    app.set_error(e.to_string());
                    load_error = Some(e);
                    waiting = false;
                    continue;
                }
                Err(mpsc::TryRecvError::Empty) => {}
                Err(mpsc::TryRecvError::Disconnected) => return Err(TuiError::Loader),
            }
        }
        if event::poll(Duration::from_millis(if waiting { 50 } else { 250 }))? {
            handle_event(&mut app, event::read()?);
            // Drain what queued up meanwhile (key repeat, wheel), then draw once.
            while event::poll(Duration::ZERO)? {
                handle_event(&mut app, event::read()?);
            }
        }
        if app.quit() {
            break;
        }
    }
    drop(_restore);
    let _ = io::stdout().flush();
    match load_error {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}
