//! Terminal input to [`Action`]s, and nothing else: the app never sees a key code, so it can be
//! driven from tests with actions alone, and the key map is one table a user can read.

use crossterm::event::{
    KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};

use super::action::Action;

/// Maps a key in normal mode (not while typing a search).
pub fn map_key(key: KeyEvent) -> Option<Action> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    let shift = key.modifiers.contains(KeyModifiers::SHIFT);
    Some(match key.code {
        KeyCode::Char('c') if ctrl => Action::Quit,
        KeyCode::Char('q') => Action::Quit,
        KeyCode::Char('?') => Action::Help,
        KeyCode::Char('/') => Action::Search,
        KeyCode::Char('n') => Action::SearchNext,
        KeyCode::Char('N') => Action::SearchPrev,
        KeyCode::Tab => Action::NextView,
        KeyCode::BackTab => Action::PrevView,
        KeyCode::Char('1') => Action::Tab(0),
        KeyCode::Char('2') => Action::Tab(1),
        KeyCode::Char('3') => Action::Tab(2),
        KeyCode::Char('4') => Action::Tab(3),
        KeyCode::Char('5') => Action::Tab(4),
        KeyCode::Char('6') => Action::Tab(5),
        KeyCode::Up | KeyCode::Char('k') => Action::Up,
        KeyCode::Down | KeyCode::Char('j') => Action::Down,
        KeyCode::Left if shift => Action::FineLeft,
        KeyCode::Right if shift => Action::FineRight,
        KeyCode::Left | KeyCode::Char('h') => Action::Left,
        KeyCode::Right | KeyCode::Char('l') => Action::Right,
        KeyCode::Char('H') => Action::FineLeft,
        KeyCode::Char('L') => Action::FineRight,
        KeyCode::PageUp => Action::PageUp,
        KeyCode::PageDown => Action::PageDown,
        KeyCode::Home | KeyCode::Char('g') => Action::Top,
        KeyCode::End | KeyCode::Char('G') => Action::Bottom,
        KeyCode::Enter => Action::Enter,
        KeyCode::Esc | KeyCode::Backspace => Action::Back,
        KeyCode::Char('+') | KeyCode::Char('=') => Action::ZoomIn,
        KeyCode::Char('-') | KeyCode::Char('_') => Action::ZoomOut,
        KeyCode::Char('p') => Action::Peak,
        KeyCode::Char('o') => Action::Oom,
        KeyCode::Char(']') => Action::NextMarker,
        KeyCode::Char('[') => Action::PrevMarker,
        KeyCode::Char('a') => Action::AllocEvent,
        KeyCode::Char('s') => Action::SortToggle,
        KeyCode::Char('f') => Action::FoldToggle,
        KeyCode::Char('c') if !ctrl => Action::CategoryToggle,
        KeyCode::Char('t') => Action::TimeAxisToggle,
        KeyCode::Char('r') => Action::ReservedToggle,
        KeyCode::Char('d') => Action::NextDevice,
        _ => return None,
    })
}

/// Maps a key while a search query is being typed.
pub fn map_search_key(key: KeyEvent) -> Option<Action> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
        return Some(Action::Quit);
    }
    Some(match key.code {
        KeyCode::Enter => Action::SearchSubmit,
        KeyCode::Esc => Action::SearchCancel,
        KeyCode::Backspace => Action::SearchBackspace,
        KeyCode::Char(c) => Action::SearchChar(c),
        _ => return None,
    })
}

/// Maps a mouse event: clicks select, the wheel scrolls.
pub fn map_mouse(m: MouseEvent) -> Option<Action> {
    match m.kind {
        MouseEventKind::Down(MouseButton::Left) => Some(Action::Click(m.column, m.row)),
        MouseEventKind::ScrollUp => Some(Action::Scroll(-1, m.column, m.row)),
        MouseEventKind::ScrollDown => Some(Action::Scroll(1, m.column, m.row)),
        _ => None,
    }
}
