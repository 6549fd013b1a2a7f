//! The widgets every view shares: styles, a line that fits its pane, a table whose columns are
//! sized from their content, and a scrolling text pane that wraps at word boundaries.
//!
//! The layout rules live here so that no view can break them: nothing is written into the last
//! column of a pane (a word that reaches the edge is indistinguishable from a cut one), a line
//! that does not fit is cut at a word boundary and marked `…`, and a path that does not fit
//! keeps its end (`…/model.py:22 forward`), where the file name and the function are.
//! The charts are in [`chart`]. This module depends only on [`super::layout`] and the
//! markers of [`super::data`].

pub mod chart;

use std::cell::Cell;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};

pub fn dim() -> Style {
    Style::default().fg(Color::DarkGray)
}

pub fn bold() -> Style {
    Style::default().add_modifier(Modifier::BOLD)
}

pub fn sel_style(on: bool) -> Style {
    if on {
        Style::default().add_modifier(Modifier::REVERSED)
    } else {
        Style::default()
    }
}

fn width(s: &str) -> usize {
    s.chars().count()
}

/// `s` in at most `w` cells, keeping its end: the end of a path is the file, the line and the
/// function. It starts at a `/`, a `::` or after a space, so no name is left half; when not
/// even the last name fits, only the mark `…` is left.
pub fn keep_end(s: &str, w: usize) -> String {
    if width(s) <= w {
        return s.to_owned();
    }
    if w == 0 {
        return String::new();
    }
    for (i, c) in s.char_indices() {
        let tail = match c {
            '/' => &s[i..],
            ' ' => &s[i + 1..],
            // A C++ name gives up its namespaces first (`…::gpu_reduce_kernel<…>(…)`).
            ':' if s[i..].starts_with("::") && !s[..i].ends_with(':') => &s[i..],
            _ => continue,
        };
        if tail.len() > 1 && width(tail) < w {
            return format!("…{tail}");
        }
    }
    "…".to_owned()
}

/// Whether a word looks like a path, a `file:line` site, a capture's file name or a C++ name,
/// whose end matters most.
fn is_path(word: &str) -> bool {
    word.contains('/')
        || word.contains(".py")
        || word.contains("::")
        || [".pickle", ".json", ".gz"].iter().any(|x| word.contains(x))
}

/// `s` in at most `w` cells, cut at a word boundary and marked `…`. A first word that is too
/// long alone (a path) keeps its end instead.
pub fn fit(s: &str, w: usize) -> String {
    if width(s) <= w {
        return s.to_owned();
    }
    if w == 0 {
        return String::new();
    }
    // C++ names give up their template and argument lists first (issue 42).
    let collapsed = collapse_cpp(s);
    if collapsed != s {
        return fit(&collapsed, w);
    }
    // A path in the line gives up its directories first (`from …/model.py:22 forward`).
    let excess = width(s) - w;
    if let Some(p) = s
        .split(' ')
        .filter(|p| is_path(p) && width(p) > excess + 8)
        .max_by_key(|p| width(p))
    {
        let short = keep_end(p, width(p) - excess);
        if short != "…" {
            let out = s.replacen(p, &short, 1);
            if width(&out) <= w {
                return out;
            }
        }
    }
    // A path too long to keep even its file's name gives way whole, so that the words after
    // it (a site's function) stay: `▸ … on_train_batch_end`, not `▸ …`.
    if let Some(p) = s
        .split(' ')
        .find(|p| is_path(p) && keep_end(p, w / 2) == "…")
    {
        let out = s.replacen(p, "…", 1);
        if out.trim() != "…" {
            return fit(&out, w);
        }
    }
    // The longest prefix ending at a space that leaves room for the mark.
    let mut best = None;
    for (n, (i, c)) in s.char_indices().enumerate() {
        if n + 1 > w - 1 {
            break;
        }
        if c == ' ' && i > 0 && !s[..i].trim().is_empty() {
            best = Some(i);
        }
    }
    match best {
        Some(i) => {
            let head = s[..i].trim_end();
            // A path cut off shows its end, with the mark for what follows it.
            let next = s[i..].split_whitespace().next().unwrap_or("");
            let room = w.saturating_sub(width(head) + 3);
            let short = keep_end(next, room);
            if is_path(next) && width(&short) > 1 {
                return format!("{head} {short} …");
            }
            format!("{head} …")
        }
        None => {
            let lead = width(s) - width(s.trim_start());
            let word = s.trim_start().split(' ').next().unwrap_or("");
            if is_path(word) || lead > 0 {
                format!(
                    "{}{}",
                    " ".repeat(lead.min(w / 2)),
                    keep_end(word, w - lead.min(w / 2))
                )
            } else {
                keep_end(word, w)
            }
        }
    }
}

/// `s` with the template arguments (`name<…>`) and the argument lists (`call(…)`) of the C++
/// names in it collapsed: a bracket that follows a scoped name (`ns::f(`, not prose's
/// `node(s)` or a space). Unbalanced brackets leave `s` as it is.
pub fn collapse_cpp(s: &str) -> String {
    if !s.contains("::") {
        return s.to_owned();
    }
    let name_char =
        |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '>');
    let mut out = String::with_capacity(s.len());
    // The bracket open at the top level, and how deep inside it we are.
    let mut open: Option<(char, usize)> = None;
    let mut empty = true;
    for c in s.chars() {
        match open {
            Some((o, depth)) => {
                let close = if o == '<' { '>' } else { ')' };
                if c == close && depth == 1 {
                    // `f()` keeps its empty list.
                    if !empty {
                        out.push('…');
                    }
                    out.push(c);
                    open = None;
                    continue;
                }
                empty = false;
                if c == o {
                    open = Some((o, depth + 1));
                } else if c == close {
                    open = Some((o, depth - 1));
                }
            }
            None => {
                // Only a C++ name's brackets: the word they follow has a scope (`a::f(`),
                // not prose's `node(s)`.
                let word = out.rsplit(' ').next().unwrap_or("");
                let after_name = name_char(out.chars().next_back()) && word.contains("::");
                let operator = out.ends_with("operator") || out.ends_with("operator<");
                out.push(c);
                if (c == '<' || c == '(') && after_name && !operator {
                    open = Some((c, 1));
                    empty = true;
                }
            }
        }
    }
    if open.is_some() {
        return s.to_owned();
    }
    out
}

/// Writes `s` on row `dy` of `area`, fitted to the pane less its last column.
pub fn put(buf: &mut Buffer, area: Rect, dy: u16, s: &str, st: Style) {
    if dy < area.height && area.width > 1 {
        let w = area.width as usize - 1;
        buf.set_stringn(area.x, area.y + dy, fit(s, w), w, st);
    }
}

/// Writes styled pieces one after another on row `dy`, as long as each fits whole.
pub fn put_pieces(buf: &mut Buffer, area: Rect, dy: u16, pieces: &[(&str, Style)]) {
    if dy >= area.height || area.width < 2 {
        return;
    }
    let end = area.x + area.width - 1;
    let mut x = area.x;
    for (t, s) in pieces {
        let n = width(t) as u16;
        if x + n.max(1) > end {
            break;
        }
        let (nx, _) = buf.set_stringn(x, area.y + dy, t, (end - x) as usize, *s);
        x = nx;
    }
}

/// Word-wraps `text` to lines of at most `w` cells. A continuation line keeps the first line's
/// indentation; a word longer than a line (a long path) keeps its end.
pub fn wrap(text: &str, w: usize) -> Vec<String> {
    let mut out = Vec::new();
    if w == 0 {
        return out;
    }
    for para in text.split('\n') {
        // A line that fits is kept as it is: its spacing may be a table's.
        if width(para) <= w {
            out.push(para.to_owned());
            continue;
        }
        let lead = width(para) - width(para.trim_start());
        let indent = " ".repeat(lead.min(w / 3));
        let mut line = indent.clone();
        let mut empty = true;
        for word in para.split_whitespace() {
            let room = w.saturating_sub(width(&indent)).max(1);
            let word = if width(word) > room {
                keep_end(word, room)
            } else {
                word.to_owned()
            };
            let need = width(&word) + usize::from(!empty);
            if !empty && width(&line) + need > w {
                out.push(std::mem::replace(&mut line, indent.clone()));
                empty = true;
            }
            if !empty {
                line.push(' ');
            }
            line.push_str(&word);
            empty = false;
        }
        out.push(line);
    }
    out
}

/// How a table column is aligned.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// Rows of cells laid out in columns as wide as their widest cell, two spaces apart. Columns
/// that do not fit in `w` are left out from the right (the first is always kept, fitted).
pub fn table(rows: &[Vec<String>], align: &[Align], w: usize) -> Vec<String> {
    let ncol = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let widths: Vec<usize> = (0..ncol)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| width(s))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut keep = ncol;
    while keep > 1 && widths[..keep].iter().sum::<usize>() + 2 * (keep - 1) > w {
        keep -= 1;
    }
    rows.iter()
        .map(|r| {
            let mut line = String::new();
            for (c, &cw) in widths.iter().enumerate().take(keep) {
                let cell = r.get(c).map(String::as_str).unwrap_or("");
                if c > 0 {
                    line.push_str("  ");
                }
                let pad = cw.saturating_sub(width(cell));
                match align.get(c).copied().unwrap_or(Align::Left) {
                    Align::Right => {
                        line.push_str(&" ".repeat(pad));
                        line.push_str(cell);
                    }
                    Align::Left => {
                        line.push_str(cell);
                        if c + 1 < keep {
                            line.push_str(&" ".repeat(pad));
                        }
                    }
                }
            }
            fit(&line, w)
        })
        .collect()
}

/// A text pane's scroll position, owned by the view that shows it. The pane writes back
/// where it was drawn and how far it can scroll, so keys and the mouse wheel act on what the
/// user sees.
#[derive(Default, Debug)]
pub struct Scroll {
    top: Cell<u16>,
    max: Cell<u16>,
    area: Cell<Rect>,
    /// The keys `j`/`k` scroll this pane rather than move a list.
    pub focused: bool,
}

impl Scroll {
    pub fn top(&self) -> u16 {
        self.top.get().min(self.max.get())
    }
    /// Scrolls by `d` lines (negative: up), within the text.
    pub fn by(&self, d: i32) {
        let t = (self.top() as i32 + d).clamp(0, self.max.get() as i32);
        self.top.set(t as u16);
    }
    /// Scrolls by a page of the pane less one line.
    pub fn page(&self, dir: i32) {
        let h = self.area.get().height.saturating_sub(1).max(1) as i32;
        self.by(dir * h);
    }
    pub fn reset(&self) {
        self.top.set(0);
    }
    pub fn contains(&self, x: u16, y: u16) -> bool {
        let a = self.area.get();
        x >= a.x && x < a.x + a.width && y >= a.y && y < a.y + a.height
    }
}

/// Lines of styled text in a [`TextPane`] from row `y` of `area` to its bottom (nothing where
/// `y` is past it).
pub fn text_pane(s: &Scroll, lines: Vec<(String, Style)>, area: Rect, y: u16, buf: &mut Buffer) {
    if y < area.height {
        TextPane { lines, scroll: s }.render(
            Rect::new(area.x, area.y + y, area.width, area.height - y),
            buf,
        );
    }
}

/// Lines of styled text, wrapped to the pane and shown from the scroll position, with a
/// scroll bar in the last column when they do not all fit.
pub struct TextPane<'a> {
    pub lines: Vec<(String, Style)>,
    pub scroll: &'a Scroll,
}

impl TextPane<'_> {
    pub fn render(self, area: Rect, buf: &mut Buffer) {
        self.scroll.area.set(area);
        if area.width < 2 || area.height == 0 {
            return;
        }
        let wrapped = |w: usize| -> Vec<(String, Style)> {
            self.lines
                .iter()
                .flat_map(|(t, s)| wrap(t, w).into_iter().map(move |l| (l, *s)))
                .collect()
        };
        let h = area.height as usize;
        let mut w = area.width as usize - 1;
        let mut rows = wrapped(w);
        if rows.len() > h && w > 1 {
            // The scroll bar takes the last column: keep a blank one before it.
            w -= 1;
            rows = wrapped(w);
        }
        self.scroll
            .max
            .set(rows.len().saturating_sub(h).min(u16::MAX as usize) as u16);
        let top = self.scroll.top() as usize;
        for (k, (l, s)) in rows.iter().skip(top).take(h).enumerate() {
            buf.set_stringn(area.x, area.y + k as u16, l, w, *s);
        }
        if rows.len() > h {
            // The bar: where the shown lines are in the whole text.
            let x = area.x + area.width - 1;
            let thumb = (h * h / rows.len()).max(1);
            let at = (top * h).div_ceil(rows.len()).min(h - thumb);
            let st = if self.scroll.focused {
                Style::default().fg(Color::Yellow)
            } else {
                dim()
            };
            for k in 0..h {
                let ch = if k >= at && k < at + thumb {
                    '█'
                } else {
                    '│'
                };
                if let Some(c) = buf.cell_mut((x, area.y + k as u16)) {
                    c.set_char(ch).set_style(st);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_cuts_at_words_and_keeps_the_end_of_paths() {
        assert_eq!(fit("cause: fragmentation", 12), "cause: …");
        assert_eq!(
            fit("from /home/u/proj/model.py:22 forward", 30),
            "from …/model.py:22 forward"
        );
        assert_eq!(
            keep_end("/a/b/transformer.py:22", 19),
            "…/transformer.py:22"
        );
        // Never half a name: the mark alone when the last name does not fit.
        assert_eq!(keep_end("/a/b/transformer.py:22", 18), "…");
        // A C++ name gives up its namespaces first.
        assert_eq!(keep_end("at::_ops::sum::call(…)", 15), "…::sum::call(…)");
        assert_eq!(fit("short", 10), "short");
        // No room for the path's end: the mark alone, inside the width.
        let s = fit("a b c d e f g /:search", 15);
        assert!(s.chars().count() <= 15 && s.ends_with('…'), "{s}");
    }

    #[test]
    fn wrap_never_cuts_a_word_and_keeps_indentation() {
        let l = wrap("  one two three four five", 12);
        assert_eq!(l, vec!["  one two", "  three four", "  five"]);
        for line in wrap("a veryveryverylongword here", 8) {
            assert!(line.chars().count() <= 8, "{line}");
        }
    }

    #[test]
    fn table_columns_never_touch() {
        let rows = vec![
            vec!["device".into(), "allocated".into(), "events".into()],
            vec![
                "cuda:0".into(),
                "118.9 MiB / 119.9 MiB".into(),
                "697".into(),
            ],
        ];
        let t = table(&rows, &[Align::Left, Align::Right, Align::Right], 80);
        assert_eq!(t[1], "cuda:0  118.9 MiB / 119.9 MiB     697");
        // Too narrow: the last column goes, whole.
        let t = table(&rows, &[Align::Left, Align::Right, Align::Right], 30);
        assert_eq!(t[1], "cuda:0  118.9 MiB / 119.9 MiB");
    }
}
