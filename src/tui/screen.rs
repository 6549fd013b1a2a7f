//! The screen: tab bar, the current view (drawn by the capture's mode), the status line, and
//! the help overlay (drawn by [`super::help`]).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::widgets::Widget;

use super::app::{tab_label, App, Mode};
use super::help::HelpView;
use super::layout::body;
use super::trace_views;
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
        for (i, v) in app.views().iter().enumerate() {
            let t = tab_label(i, *v);
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
        // The mode draws its view.
        match app.mode() {
            Mode::Trace(tm) => tm.render_view(app, b, buf),
            Mode::Snapshot(sm) => sm.render_view(app, b, buf),
            Mode::Loading => {}
        }
        StatusLine(app).render(
            Rect::new(area.x, area.y + area.height - 1, area.width, 1),
            buf,
        );
        if app.help() {
            HelpView {
                help: app.help_state(),
                trace: app.trace().is_some(),
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
            "?:help q:quit Tab:views /:search".to_owned()
        } else {
            app.message().to_owned()
        };
        if let Some(t) = app.trace() {
            let file = t
                .path
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default();
            let (devname, cur) = trace_views::trace_status(app, t);
            let s = format!(" {file} │ {devname} │ {cur} │ {hint}");
            put(buf, area, 0, &s, st);
            return;
        }
        let Some(data) = app.data() else { return };
        let file = data
            .path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        let dev = data.snap.devices.get(app.dev());
        let cur = match (app.cursor(), dev) {
            (Some(c), Some(d)) => {
                let t = data
                    .rel_time_us(app.dev(), c)
                    .map(|t| format!(" +{:.3}s", t as f64 / 1e6))
                    .unwrap_or_default();
                format!("event {c}/{}{t}", d.events.len().saturating_sub(1))
            }
            _ => "no events".to_owned(),
        };
        let devname = dev.map(|d| format!("cuda:{}", d.index)).unwrap_or_default();
        let s = format!(" {file} │ {devname} │ {cur} │ {hint}");
        put(buf, area, 0, &s, st);
    }
}
