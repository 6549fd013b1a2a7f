//! The TUI driven without a terminal: actions in, `TestBackend` screens out.

use std::path::Path;

use memscope::tui::{map_key, Action, App, Data, View};
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;

fn load(name: &str) -> App {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(name);
    let data = Data::load(&p).expect("fixture loads");
    let mut app = App::new(data);
    // Paths differ between checkouts: show the file name only.
    app.path = name.to_owned();
    app
}

fn screen(app: &mut App, w: u16, h: u16) -> String {
    app.apply(Action::Resize(w, h));
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| f.render_widget(&*app, f.area())).unwrap();
    let buf = t.backend().buffer().clone();
    let mut out = String::new();
    for y in 0..h {
        let mut line = String::new();
        for x in 0..w {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn key(app: &mut App, c: char) {
    let k = KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE);
    if let Some(a) = map_key(k) {
        app.apply(a);
    }
}

fn code(app: &mut App, c: KeyCode) {
    if let Some(a) = map_key(KeyEvent::new(c, KeyModifiers::NONE)) {
        app.apply(a);
    }
}

#[test]
fn overview_fragmentation_oom() {
    let mut app = load("fragmentation_oom.pickle");
    insta::assert_snapshot!(screen(&mut app, 100, 30));
}

#[test]
fn timeline_leak_oom() {
    let mut app = load("leak_oom.pickle");
    key(&mut app, '2');
    insta::assert_snapshot!(screen(&mut app, 100, 30));
}

#[test]
fn map_fragmentation_oom() {
    let mut app = load("fragmentation_oom.pickle");
    key(&mut app, '3');
    insta::assert_snapshot!(screen(&mut app, 100, 30));
}

#[test]
fn sites_leak_oom() {
    let mut app = load("leak_oom.pickle");
    key(&mut app, '4');
    code(&mut app, KeyCode::Enter);
    code(&mut app, KeyCode::Down);
    code(&mut app, KeyCode::Enter);
    insta::assert_snapshot!(screen(&mut app, 100, 30));
}

#[test]
fn leaks_view_leak_oom() {
    let mut app = load("leak_oom.pickle");
    key(&mut app, '5');
    insta::assert_snapshot!(screen(&mut app, 100, 30));
}

#[test]
fn help_overlay() {
    let mut app = load("clean.pickle");
    key(&mut app, '?');
    insta::assert_snapshot!(screen(&mut app, 80, 24));
}
