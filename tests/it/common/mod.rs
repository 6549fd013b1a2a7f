//! What the TUI tests share: a fixture loaded into an app, screens rendered on a `TestBackend`,
//! keys pressed through the real key map.
#![allow(dead_code)] // each test crate uses its own part

pub mod envelope;
pub mod ranks;

use std::path::Path;

use memscope::tui::{map_key, Action, App, Loaded};
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;

/// The app on `fixtures/NAME`, showing the file name only (paths differ between checkouts).
pub fn load(name: &str) -> App {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name);
    let loaded = Loaded::load(&p).expect("fixture loads");
    let mut app = App::with(loaded);
    app.set_path(name.to_owned());
    app
}

/// The screen at `w`x`h`, one line per row, trailing blanks trimmed.
pub fn screen(app: &mut App, w: u16, h: u16) -> String {
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

pub fn key(app: &mut App, c: char) {
    code(app, KeyCode::Char(c));
}

pub fn code(app: &mut App, c: KeyCode) {
    if let Some(a) = map_key(KeyEvent::new(c, KeyModifiers::NONE)) {
        app.apply(a);
    }
}
