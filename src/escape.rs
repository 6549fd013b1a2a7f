//! The one boundary between a capture's strings and memscope's outputs, one rule per kind of
//! destination.
//!
//! Every string read from a capture (file and function names, dict keys, trace op names, the
//! fields of a summary JSON used as input) is attacker data: a capture may be a colleague's
//! file or a pull request's artifact, and memscope's outputs go to terminals, CI logs and job
//! summaries. Each destination has its own rule, here and nowhere else:
//!
//! | destination | rule | where |
//! |---|---|---|
//! | any output, at load | a name is one line: line breaks made visible | [`one_line`] |
//! | terminal text (stdout, stderr) | control characters, bidi controls made visible; only memscope's own colour codes pass; no line starts a workflow command | [`TermWriter`], [`term`] |
//! | GitHub workflow commands | GitHub's `%XX` escapes | [`gh_data`], [`gh_property`] |
//! | Markdown (job summary, `diff --format markdown`) | punctuation escaped, code fenced longer than any backtick run, never raw HTML | [`md_text`], [`md_code`], [`md_fence`] |
//! | XML (JUnit) | entities; characters XML cannot hold dropped | [`xml`] |
//! | HTML (report) | entities | [`html`] |
//!
//! Terminal escapes are shown as `\x1b` (below U+0080) or `\u{202e}`, whatever `--color` or
//! `NO_COLOR` say: colour only decides whether memscope's own SGR codes are written.
//!
//! GitHub suggests wrapping untrusted output in `::stop-commands::TOKEN` ... `::TOKEN::`. memscope
//! does not: its annotations go to stderr and its report to stdout, two pipes the runner reads
//! without an order between them, so an annotation could land inside the window and be ignored.
//! The terminal boundary instead makes it impossible for a captured string to start a command
//! line at all (names are one line, and a line's leading `::` is shown as `:\x3a`).

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, Write};

/// True for the characters that make a terminal line break: the C0 breaks, NEL and the
/// Unicode line and paragraph separators.
fn is_line_break(c: char) -> bool {
    matches!(
        c,
        '\n' | '\r' | '\u{0b}' | '\u{0c}' | '\u{85}' | '\u{2028}' | '\u{2029}'
    )
}

/// True for the bidi controls that reorder what a terminal shows (embeddings, overrides,
/// isolates, marks).
pub fn is_bidi(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{61c}')
}

/// True for what a terminal must never receive raw from a capture: C0 (tab aside), DEL, C1
/// and the bidi controls.
pub fn is_unsafe(c: char) -> bool {
    (c < ' ' && c != '\t') || ('\u{7f}'..='\u{9f}').contains(&c) || is_bidi(c)
}

/// The visible form of one character: `\n`, `\r`, `\t`, `\x1b` below U+0080, `\u{202e}` above.
fn push_visible(o: &mut String, c: char) {
    match c {
        '\n' => o.push_str("\\n"),
        '\r' => o.push_str("\\r"),
        '\t' => o.push_str("\\t"),
        c if (c as u32) < 0x80 => {
            let _ = write!(o, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(o, "\\u{{{:x}}}", c as u32);
        }
    }
}

fn map_chars(s: &str, bad: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(&bad) {
        return Cow::Borrowed(s);
    }
    let mut o = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if bad(c) {
            push_visible(&mut o, c);
        } else {
            o.push(c);
        }
    }
    Cow::Owned(o)
}

/// A name as one line: its line breaks made visible (`\n`). Applied when a capture's strings
/// are read, so that no output of any kind (text, Markdown, folded stacks, messages inside
/// JSON) lets a name start a line of its own.
pub fn one_line(s: &str) -> Cow<'_, str> {
    // Fast path: no byte that can start a line break (C0, 0xC2 for NEL, 0xE2 for U+2028/9).
    if !s.bytes().any(|b| b < 0x20 || b == 0xc2 || b == 0xe2) {
        return Cow::Borrowed(s);
    }
    map_chars(s, is_line_break)
}

/// One string for a terminal: every unsafe character made visible, tab included.
pub fn term(s: &str) -> Cow<'_, str> {
    map_chars(s, |c| is_unsafe(c) || c == '\t')
}

/// Escapes a GitHub workflow command's message (the runner's `toolkit/command.ts`); other
/// control characters and bidi controls are made visible first (the log shows the message).
pub fn gh_data(s: &str) -> String {
    map_chars(s, |c| is_unsafe(c) && c != '\n' && c != '\r')
        .replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
        .replace("##[", "##\\x5b")
}

/// Escapes a GitHub workflow command's property value (`file=`, `title=`).
pub fn gh_property(s: &str) -> String {
    gh_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// Escapes text for XML attributes and element content. Characters XML 1.0 cannot hold at
/// all (control characters other than tab, newline, carriage return) are dropped.
pub fn xml(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            '\n' => o.push_str("&#10;"),
            '\r' => o.push_str("&#13;"),
            '\t' => o.push_str("&#9;"),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => o.push(c),
        }
    }
    o
}

/// Escapes text for HTML content and attribute values.
pub fn html(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// Markdown text (a table cell, a paragraph): every ASCII punctuation character that Markdown
/// or GFM gives a meaning is backslash-escaped, `<`, `>`, `&` become entities (so no HTML,
/// no autolink, no entity of the capture's own), line breaks become spaces and other unsafe
/// characters are made visible.
pub fn md_text(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '(' | ')' | '{' | '}' | '#' | '+' | '-' | '.'
            | '!' | '|' | '~' | '"' | '\'' | ':' | '=' | '^' | '$' | '@' => {
                o.push('\\');
                o.push(c);
            }
            c if is_line_break(c) => o.push(' '),
            c if is_unsafe(c) || c == '\t' => push_visible(&mut o, c),
            c => o.push(c),
        }
    }
    o
}

/// The longest run of `ch` in `s`.
fn longest_run(s: &str, ch: char) -> usize {
    let (mut best, mut run) = (0, 0);
    for c in s.chars() {
        run = if c == ch { run + 1 } else { 0 };
        best = best.max(run);
    }
    best
}

/// A Markdown code span for a table cell: fenced by a backtick run longer than any inside,
/// padded so a leading or trailing backtick stays inside, `|` escaped (GFM splits cells
/// before it reads code spans) and unsafe characters made visible. Nothing inside renders.
pub fn md_code(s: &str) -> String {
    let body = term(s).replace('|', "\\|");
    let fence = "`".repeat(longest_run(&body, '`') + 1);
    format!("{fence} {body} {fence}")
}

/// A fenced Markdown code block holding `text` (several lines): the fence is a backtick run
/// longer than any run in the text, so no line of it can close the block, and nothing inside
/// renders (no HTML, no image, no link).
pub fn md_fence(text: &str) -> String {
    let fence = "`".repeat(longest_run(text, '`').max(2) + 1);
    let mut o = format!("{fence}text\n{text}");
    if !text.ends_with('\n') {
        o.push('\n');
    }
    o.push_str(&fence);
    o.push('\n');
    o
}

/// Where the filter is in an escape sequence that may be one of memscope's own SGR codes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Esc {
    None,
    /// After ESC.
    Started,
    /// After `ESC [`, digits and `;` so far.
    Csi,
}

/// The terminal boundary: a writer for text bound to a terminal, a CI log or a pipe read by a
/// person. Every write goes through it, so no formatter can forget:
///
/// - C0 controls (tab and newline aside), DEL, C1 and the bidi controls are made visible;
///   invalid UTF-8 is shown as `\xNN`;
/// - ESC passes only as a complete SGR code (`ESC [ digits/; m`) and only when `sgr` is on
///   (memscope's own colours): it can change a colour, never the screen, the title or the
///   clipboard;
/// - no line starts (after spaces and tabs) with `::`, and no `##[` appears: those are GitHub
///   workflow commands, so the second `:` and the `[` are made visible. memscope's own
///   annotations are written without this filter.
pub struct TermWriter<W: Write> {
    inner: W,
    sgr: bool,
    /// Bytes of an incomplete UTF-8 character or escape sequence.
    pending: Vec<u8>,
    esc: Esc,
    /// Only spaces and tabs since the last newline.
    line_blank: bool,
    /// The line's first non-blank character was `:` and it was the last one written.
    line_colon: bool,
    /// The last two characters were `##`.
    hashes: u8,
}

impl<W: Write> TermWriter<W> {
    /// `sgr`: let memscope's own colour codes through (the caller decided colour is on).
    pub fn new(inner: W, sgr: bool) -> Self {
        TermWriter {
            inner,
            sgr,
            pending: Vec::new(),
            esc: Esc::None,
            line_blank: true,
            line_colon: false,
            hashes: 0,
        }
    }

    /// The writer inside (flush first).
    pub fn into_inner(self) -> W {
        self.inner
    }

    fn char_out(&mut self, c: char, o: &mut String) {
        if self.esc != Esc::None {
            let keep = match (self.esc, c) {
                (Esc::Started, '[') => {
                    self.esc = Esc::Csi;
                    true
                }
                (Esc::Csi, '0'..='9' | ';') if self.pending.len() < 32 => true,
                (Esc::Csi, 'm') => {
                    self.pending.push(b'm');
                    o.push_str(std::str::from_utf8(&self.pending).unwrap_or(""));
                    self.pending.clear();
                    self.esc = Esc::None;
                    return;
                }
                _ => false,
            };
            if keep {
                self.pending.push(c as u8);
                return;
            }
            self.spill_esc(o);
        }
        if c == '\x1b' && self.sgr {
            self.esc = Esc::Started;
            self.pending.push(0x1b);
            return;
        }
        self.plain_out(c, o);
    }

    /// An escape that turned out not to be SGR: shown, then its characters as text.
    fn spill_esc(&mut self, o: &mut String) {
        let held = std::mem::take(&mut self.pending);
        self.esc = Esc::None;
        for &b in &held {
            if b == 0x1b {
                self.plain_out('\x1b', o);
            } else {
                self.plain_out(b as char, o);
            }
        }
    }

    fn plain_out(&mut self, c: char, o: &mut String) {
        let colon2 = c == ':' && self.line_colon;
        let bracket = c == '[' && self.hashes >= 2;
        self.line_colon = c == ':' && self.line_blank;
        self.hashes = if c == '#' {
            self.hashes.saturating_add(1)
        } else {
            0
        };
        if c == '\n' {
            o.push('\n');
            self.line_blank = true;
            return;
        }
        if c != ' ' && c != '\t' {
            self.line_blank = false;
        }
        if colon2 || bracket || is_unsafe(c) {
            push_visible(o, c);
        } else {
            o.push(c);
        }
    }

    fn filter(&mut self, buf: &[u8]) -> String {
        let mut bytes = std::mem::take(&mut self.pending);
        let esc_held = if self.esc != Esc::None {
            std::mem::take(&mut bytes)
        } else {
            Vec::new()
        };
        self.pending = esc_held;
        bytes.extend_from_slice(buf);
        let mut o = String::with_capacity(bytes.len() + 16);
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    s.chars().for_each(|c| self.char_out(c, &mut o));
                    rest = &[];
                }
                Err(e) => {
                    let (ok, bad) = rest.split_at(e.valid_up_to());
                    let s = std::str::from_utf8(ok).unwrap_or("");
                    s.chars().for_each(|c| self.char_out(c, &mut o));
                    match e.error_len() {
                        Some(n) => {
                            self.spill_esc(&mut o);
                            for &b in &bad[..n] {
                                self.line_blank = false;
                                let _ = write!(o, "\\x{b:02x}");
                            }
                            rest = &bad[n..];
                        }
                        None => {
                            // An incomplete character at the end: kept for the next write
                            // (an escape in progress is settled first).
                            self.spill_esc(&mut o);
                            self.pending = bad.to_vec();
                            rest = &[];
                        }
                    }
                }
            }
        }
        o
    }
}

impl<W: Write> Write for TermWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let o = self.filter(buf);
        self.inner.write_all(o.as_bytes())?;
        Ok(buf.len())
    }

    /// Settles anything held (an escape that never completed, a cut character) and flushes.
    fn flush(&mut self) -> io::Result<()> {
        let mut o = String::new();
        if self.esc != Esc::None {
            self.spill_esc(&mut o);
        } else {
            for b in std::mem::take(&mut self.pending) {
                let _ = write!(o, "\\x{b:02x}");
            }
        }
        self.inner.write_all(o.as_bytes())?;
        self.inner.flush()
    }
}

/// `s` through a [`TermWriter`] (no colour), as a `String`.
pub fn term_text(s: &str) -> String {
    let mut w = TermWriter::new(Vec::new(), false);
    let _ = w.write_all(s.as_bytes());
    let _ = w.flush();
    String::from_utf8(w.into_inner()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_controls_become_visible() {
        assert_eq!(term_text("a\x1b]0;t\x07b"), "a\\x1b]0;t\\x07b");
        assert_eq!(term_text("x\u{202e}y\u{85}"), "x\\u{202e}y\\u{85}");
        assert_eq!(
            term_text("ok\n  ::error::x\n::a"),
            "ok\n  :\\x3aerror::x\n:\\x3aa"
        );
        assert_eq!(term_text("a ##[set-env]"), "a ##\\x5bset-env]");
        assert_eq!(term_text("a: b::c"), "a: b::c");
    }

    #[test]
    fn only_memscope_sgr_passes_when_colour_is_on() {
        let mut w = TermWriter::new(Vec::new(), true);
        w.write_all(b"\x1b[1;31mFAIL\x1b[0m \x1b[2J \x1b]52;c;x\x07")
            .unwrap();
        w.flush().unwrap();
        let s = String::from_utf8(w.into_inner()).unwrap();
        assert_eq!(s, "\x1b[1;31mFAIL\x1b[0m \\x1b[2J \\x1b]52;c;x\\x07");
    }

    #[test]
    fn split_characters_survive_chunking() {
        let mut w = TermWriter::new(Vec::new(), false);
        let s = "é\u{202e}";
        for b in s.as_bytes() {
            w.write_all(&[*b]).unwrap();
        }
        w.flush().unwrap();
        assert_eq!(String::from_utf8(w.into_inner()).unwrap(), "é\\u{202e}");
    }

    #[test]
    fn markdown_never_renders_a_name() {
        assert_eq!(md_code("a`b|c"), "`` a`b\\|c ``");
        assert_eq!(
            md_text("<img src=x> [l](u) **b**"),
            "&lt;img src\\=x&gt; \\[l\\]\\(u\\) \\*\\*b\\*\\*"
        );
        let f = md_fence("x ```` y\n");
        assert!(f.starts_with("`````text\n"));
        assert!(f.ends_with("\n`````\n"));
    }

    /// A small deterministic generator (xorshift) of strings over the characters that matter.
    fn random_strings(n: usize) -> Vec<String> {
        const ALPHABET: &[char] = &[
            'a', 'Z', '0', ' ', '\t', '\n', '\r', '\x1b', '\x07', '\x7f', '\u{85}', '\u{9b}',
            '\u{202e}', '\u{2066}', '\u{200f}', '\u{61c}', '\u{2028}', ':', '#', '[', ']', '`',
            '|', '<', '>', '&', '*', '_', '!', '\\', '%', ',', '"', '\'', 'm', ';', '2', 'é',
            '\u{fffe}', '\0',
        ];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        (0..n)
            .map(|_| {
                let len = (next() % 40) as usize;
                (0..len)
                    .map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize])
                    .collect()
            })
            .collect()
    }

    fn no_command_line(s: &str) {
        for line in s.split('\n') {
            let t = line.trim_start_matches([' ', '\t']);
            assert!(!t.starts_with("::"), "{s:?}");
            assert!(!line.contains("##["), "{s:?}");
        }
    }

    #[test]
    fn every_writer_holds_its_rule_over_random_strings() {
        for s in random_strings(20_000) {
            // Terminal: nothing unsafe, no workflow command, with or without colour.
            for sgr in [false, true] {
                let mut w = TermWriter::new(Vec::new(), sgr);
                w.write_all(s.as_bytes()).unwrap();
                w.flush().unwrap();
                let t = String::from_utf8(w.into_inner()).unwrap();
                for (i, c) in t.char_indices() {
                    if c == '\x1b' {
                        assert!(sgr, "{s:?} -> {t:?}");
                        let rest = &t[i + 1..];
                        let end = rest.find('m').expect("SGR ends with m");
                        assert!(
                            rest.starts_with('[')
                                && rest[1..end]
                                    .bytes()
                                    .all(|b| b.is_ascii_digit() || b == b';')
                        );
                        continue;
                    }
                    assert!(c == '\n' || c == '\t' || !is_unsafe(c), "{s:?} -> {t:?}");
                }
                no_command_line(&t);
            }
            // A name: one line, nothing unsafe.
            let one = one_line(&s);
            assert!(!one.chars().any(is_line_break), "{s:?}");
            assert!(!term(&s).chars().any(|c| is_unsafe(c) || c == '\t'));
            no_command_line(&term_text(&one));
            // GitHub: a message or property is one line and nothing unsafe.
            for g in [gh_data(&s), gh_property(&s)] {
                assert!(!g.chars().any(is_unsafe), "{s:?} -> {g:?}");
                assert!(!g.contains("##["));
            }
            assert!(!gh_property(&s).contains([':', ',']));
            // Markdown: no raw HTML, no unescaped cell separator, no line break, a code span
            // whose fence is longer than any run inside.
            let m = md_text(&s);
            assert!(!m.contains(['<', '>', '\n']), "{s:?} -> {m:?}");
            assert!(
                !m.replace("\\\\", "").replace("\\|", "").contains('|'),
                "{m:?}"
            );
            let c = md_code(&s);
            let fence = c.chars().take_while(|&c| c == '`').count();
            let inner = &c[fence..c.len() - fence];
            assert!(longest_run(inner, '`') < fence, "{s:?} -> {c:?}");
            assert!(!c.contains('\n') && !c.replace("\\|", "").contains('|'));
            let f = md_fence(&s);
            let n = f.chars().take_while(|&c| c == '`').count();
            assert!(
                f.lines()
                    .skip(1)
                    .filter(|l| l.trim_start().starts_with(&"`".repeat(n)))
                    .count()
                    == 1
            );
            // XML and HTML: no markup, nothing XML cannot hold.
            let x = xml(&s);
            assert!(!x.contains(['<', '>', '"', '\'', '\n', '\r']));
            assert!(!x.chars().any(|c| (c as u32) < 0x20 && c != '\t'));
            assert!(!html(&s).contains(['<', '>', '"', '\'']));
        }
    }

    #[test]
    fn one_line_keeps_ordinary_names() {
        assert!(matches!(one_line("train.py é"), Cow::Borrowed(_)));
        assert_eq!(one_line("a\nb\u{2028}c"), "a\\nb\\u{2028}c");
    }
}
