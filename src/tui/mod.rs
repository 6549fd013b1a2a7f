//! `memscope tui FILE`: browse a capture interactively.
//!
//! The split is the usual one for testable TUIs: [`input`] turns terminal events into
//! [`Action`]s, [`App::apply`] is the only thing that changes state, and each view draws its
//! own state and the capture into a buffer. Only [`run`] touches a real terminal, so the whole
//! app can be driven and rendered in tests on a `TestBackend`.
//!
//! It is built the way gitui is. The app holds what every capture has (view, device, timeline
//! cursors, history, search, message, help) and a [`mode::CaptureMode`]: the capture with its
//! views, as a trait object, so the app never branches on the kind of capture. Each view is a
//! component ([`component::Component`]), one file under [`views`], that owns its state, takes
//! its keys, clicks and searches, and draws itself; it answers with an [`action::Effect`] (jump,
//! move the cursor, say something) that the app carries out. What a view needs of the app comes
//! as an [`action::Ctx`]; what it needs of the capture, and what the app needs of it (devices,
//! events, markers, findings, status line, help), is the capture's [`capture::Capture`]. Which
//! views a kind of capture has is a list in [`views`]: a new view is one file and one line there.
//!
//! Loading a large capture takes seconds, so it happens on a thread while the terminal already
//! shows a loading screen and still answers `q`. The terminal is restored however the loop
//! ends: on quit, on error (a drop guard), and on a panic (a hook that restores it before the
//! panic message is printed, so the message is readable).
//!
//! The modules form a graph without a circle; each uses only those below it:
//!
//! ```text
//!   mod (run, events) ── input (keys → Action)
//!    ├ inspect (the tests' read-only accessors: the capture, a view's state, by type)
//!    └ screen (tabs, status line, help overlay; the view shown draws itself)
//!       └ app (App: the global state and actions, over a Box<dyn CaptureMode>)
//!          └ loaded (the capture a file holds → its mode)
//!             ├ mode (trait CaptureMode; Mode<C>: a capture's views in tab order, each action
//!             │       to its view) ── component · capture
//!             └ views (each kind's views in tab order: the registration)
//!                └ overview · timeline · map · sites · leaks · steps · graph · plan: a
//!                  component each (plan, with `--batch`: the capacity plan made at load time)
//!                  (steps uses the timeline's alloc↔free; the timeline's Enter names the map)
//!                   ├ component (trait Component<C>) · list (ListText)
//!                   └ snapshot_mode (Snap: the snapshot, its state at the cursor; its Capture)
//!                     trace_mode (the trace's Capture)
//!                      └ capture (trait Capture) ── help (the keys, a page per kind)
//!                         └ data (snapshot: analysis, timelines, markers, findings, Jump)
//!                           trace (trace: analysis, per-device series, steps' ops) ── data · sites
//!   Used throughout: action (View, Action, Effect, Ctx) ── data · layout; widgets (text pane,
//!   table, fitted lines) ── widgets::chart (memory chart, step bars) ── data · layout;
//!   overview_summary ── widgets. sites (the live-memory tree), layout and data depend on
//!   nothing in src/tui.
//! ```

pub mod action;
pub mod app;
pub mod capture;
pub mod component;
pub mod data;
pub mod help;
pub mod input;
pub mod inspect;
pub mod job;
pub mod layout;
pub mod list;
pub mod loaded;
pub mod mode;
pub mod overview_summary;
pub mod rank_table;
pub mod screen;
pub mod sites;
pub mod snapshot_mode;
pub mod trace;
pub mod trace_mode;
pub mod views;
pub mod widgets;

/// The timeline's chart arithmetic, where it was before the views had a folder of their own.
pub use views::timeline;

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

use crate::analysis::plan::Ask;
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

/// What the status line says when `--batch` is given with a profiler trace.
pub const NO_PLAN_FOR_A_TRACE: &str =
    "--batch: no plan for a profiler trace (it holds no allocator log to replay); plan a snapshot";

struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = execute!(io::stdout(), DisableMouseCapture, crossterm::cursor::Show);
        ratatui::restore();
        crate::signals::hold_terminal(false);
    }
}

/// The Ranks view of a job (several captures, one per rank), on the terminal until the user
/// quits. The job is analysed before the terminal is taken; Enter on a rank opens its capture
/// in the one-capture views ([`run_with`]), and quitting those comes back here.
pub fn run_job(job: crate::job::Job) -> Result<(), TuiError> {
    let mut view = job::JobView::new(job);
    loop {
        job_screen(&mut view)?;
        let Some(path) = view.open.take() else {
            return Ok(());
        };
        view.message = None;
        let p = Path::new(&path);
        if !p.is_file() {
            view.message = Some(format!(
                "{path}: not here (a summary keeps the path where the rank ran); open the capture with `memscope tui PATH`"
            ));
            continue;
        }
        if let Err(e) = run_capture(p, None, true) {
            view.message = Some(e.to_string());
        }
    }
}

/// The job view's own loop, until it quits or asks to open a rank.
fn job_screen(view: &mut job::JobView) -> Result<(), TuiError> {
    crate::signals::save_terminal_modes();
    crate::signals::hold_terminal(true);
    let mut terminal = ratatui::try_init()?;
    let _restore = Restore;
    while !view.quit && view.open.is_none() {
        terminal.draw(|f| f.render_widget(&*view, f.area()))?;
        if event::poll(Duration::from_millis(250))? {
            if let Event::Key(k) = event::read()? {
                if k.kind != crossterm::event::KeyEventKind::Release {
                    view.key(k);
                }
            }
        }
    }
    drop(_restore);
    let _ = io::stdout().flush();
    Ok(())
}

/// Runs the TUI on the terminal until the user quits.
pub fn run(path: &Path) -> Result<(), TuiError> {
    run_with(path, None)
}

/// [`run`], with the capacity plan `plan` asks for (`memscope tui --batch`): made on the
/// loading thread from the snapshot's analysis, shown in a Plan view.
pub fn run_with(path: &Path, plan: Option<Ask>) -> Result<(), TuiError> {
    run_capture(path, plan, false)
}

/// [`run_with`]; `from_ranks`: opened from the Ranks view, to which q goes back.
fn run_capture(path: &Path, plan: Option<Ask>, from_ranks: bool) -> Result<(), TuiError> {
    let (tx, rx) = mpsc::channel();
    let p = path.to_path_buf();
    let progress = Arc::new(Progress::default());
    let shared = Arc::clone(&progress);
    let asked = plan.is_some();
    std::thread::spawn(move || {
        let _ = tx.send(Loaded::load_planned(&p, &shared, plan.as_ref()));
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
    if from_ranks {
        app.opened_from_ranks();
    }
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
                    let trace = matches!(data, Loaded::Trace(_));
                    app.set_loaded(data);
                    if asked && trace {
                        app.set_message(NO_PLAN_FOR_A_TRACE.into());
                    }
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
