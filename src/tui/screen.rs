//! The screen: tab bar, the current view (drawn by its component, through the capture's mode),
//! the status line (the capture's account of the cursor), and the help overlay (drawn by
//! [`super::help`]).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::widgets::Widget;

use super::app::{tab_labels, App};
use super::help::HelpView;
use super::layout::body;
use super::widgets::{bold, dim, put};

impl Widget for &App {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let app = self;
        if area.width < 20 || area.height < 5 {
            buf.set_stringn(
                area.x,
                area.y,
                "terminal too small",
                area.width as usize,
                Style::default(),
            );
            return;
        }
        if !app.loaded() {
            let msg = match &app.error() {
                Some(e) => format!("memscope: cannot open {}: {e}", app.path()),
                None => format!("memscope: loading {} …", app.path()),
            };
            // The message whole, wrapped, centred when it fits on a line.
            let w = area.width as usize - 1;
            let lines = super::widgets::wrap(&msg, w);
            let mut y = area.y + (area.height / 2).saturating_sub(lines.len() as u16 / 2);
            for l in &lines {
                let x = area.x + (w.saturating_sub(l.chars().count()) / 2) as u16;
                if y + 1 < area.y + area.height {
                    buf.set_stringn(x, y, l, w, bold());
                    y += 1;
                }
            }
            let y = y - 1;
            if app.error().is_some() {
                buf.set_stringn(area.x, y + 1, "press q to quit", area.width as usize, dim());
            } else if !app.loading_note().is_empty() {
                let n = &app.loading_note();
                let x = area.x + area.width.saturating_sub(n.chars().count() as u16) / 2;
                buf.set_stringn(x.max(area.x), y + 1, n, area.width as usize, dim());
            }
            return;
        };
        // Tabs.
        let mut x = area.x;
        let views = app.views();
        for (v, t) in views.iter().zip(tab_labels(views, area.width)) {
            let st = if *v == app.view() {
                Style::default().add_modifier(Modifier::REVERSED | Modifier::BOLD)
            } else {
                dim()
            };
            if x >= area.x + area.width {
                break;
            }
            let (nx, _) = buf.set_stringn(x, area.y, &t, (area.x + area.width - x) as usize, st);
            x = nx;
        }
        let b = body(area.width, area.height);
        let b = Rect::new(area.x + b.x, area.y + b.y, b.width, b.height);
        // The view shown draws itself.
        if let Some(m) = app.mode() {
            m.draw(&app.ctx(), b, buf);
        }
        StatusLine(app).render(
            Rect::new(area.x, area.y + area.height - 1, area.width, 1),
            buf,
        );
        if app.help() {
            HelpView {
                help: app.help_state(),
                page: app.help_page(),
            }
            .render(area, buf);
        }
    }
}

/// The bottom line: file, cursor, hints (or the search being typed).
pub struct StatusLine<'a>(pub &'a App);

impl Widget for StatusLine<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let app = self.0;
        let st = Style::default().bg(Color::DarkGray).fg(Color::White);
        buf.set_style(area, st);
        if let Some(q) = &app.typing() {
            put(
                buf,
                area,
                0,
                &format!("/{q}▏  (Enter: search, Esc: cancel)"),
                st,
            );
            return;
        }
        let hint = if app.message().is_empty() {
            if app.from_ranks() {
                "?:help q:ranks list Tab:views /:search".to_owned()
            } else {
                "?:help q:quit Tab:views /:search".to_owned()
            }
        } else {
            app.message().to_owned()
        };
        let Some(m) = app.mode() else { return };
        let s = format!("{} │ {hint}", m.capture().status(app.dev(), app.cursor()));
        put(buf, area, 0, &s, st);
    }
}
