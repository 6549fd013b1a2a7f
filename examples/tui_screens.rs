//! Prints the screens of a key sequence, for looking at views by hand:
//! cargo run --example tui_screens -- FILE WxH "keys" (keys: chars; `E` Enter, `X` Esc, `T` Tab).

use memscope::tui::{map_key, Action, App, Loaded};
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let path = std::path::PathBuf::from(&a[1]);
    let (w, h) = a
        .get(2)
        .and_then(|s| s.split_once('x'))
        .and_then(|(x, y)| Some((x.parse().ok()?, y.parse().ok()?)))
        .unwrap_or((100u16, 30u16));
    let keys = a.get(3).cloned().unwrap_or_default();
    let loaded = Loaded::load(&path).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let mut app = App::with(loaded);
    app.apply(Action::Resize(w, h));
    let mut term = Terminal::new(TestBackend::new(w, h)).expect("test backend");
    for c in keys.chars() {
        let code = match c {
            'E' => KeyCode::Enter,
            'X' => KeyCode::Esc,
            'T' => KeyCode::Tab,
            c => KeyCode::Char(c),
        };
        if let Some(act) = map_key(KeyEvent::new(code, KeyModifiers::NONE)) {
            app.apply(act);
        }
    }
    term.draw(|f| f.render_widget(&app, f.area()))
        .expect("draw");
    let buf = term.backend().buffer().clone();
    for y in 0..h {
        let line: String = (0..w).map(|x| buf[(x, y)].symbol().to_string()).collect();
        println!("{}", line.trim_end());
    }
}
