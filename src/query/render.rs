//! Result sets as a terminal table, CSV or JSON, written row by row as a run makes them
//! ([`super::Sink`]): nothing is held but the table's first [`WIDTH_ROWS`] rows, which set
//! its column widths.
//!
//! Every text value may come from the capture (file and function names), so this is one
//! output boundary with a rule per format, whatever the destination:
//!
//! - table: control characters made visible ([`crate::escape::term`]); the binary also
//!   writes it through the terminal boundary;
//! - CSV: RFC 4180 quoting (a field with a comma, a quote, a line break, or leading or
//!   trailing space is quoted, quotes doubled), and a text cell that a spreadsheet would run
//!   as a formula (leading `=`, `+`, `-`, `@`, tab or carriage return) is prefixed with `'`
//!   ([`CsvOptions::raw`] keeps it as it is: `--csv-raw`). Numbers are never prefixed. To a
//!   terminal ([`CsvOptions::terminal`]) lines end with `\n` and the binary writes through the
//!   terminal boundary, so escapes in a capture's names are shown, not obeyed;
//! - JSON: serde's escaping, plus `\uXXXX` for DEL, C1 controls, bidi controls and the
//!   Unicode line separators ([`SafeJson`]): valid JSON, the same strings once parsed, and
//!   nothing a terminal acts on.

use std::io::{self, Write};

use super::{Cell, ResultSet, Sink, Stop};
use crate::escape;

/// The output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Csv,
    Json,
}

/// The rows a table holds to set its column widths; later rows are written with those
/// widths (a longer cell pushes its line out, no more).
pub const WIDTH_ROWS: usize = 1000;

/// A whole result set in format `f`, as a string (the tests, the MCP text).
pub fn render(rs: &ResultSet, f: Format) -> String {
    match f {
        Format::Table => table(rs),
        Format::Csv => csv(rs),
        Format::Json => {
            let mut s = String::new();
            write_safe(&mut s, &json(rs));
            s.push('\n');
            s
        }
    }
}

fn fill(rs: &ResultSet, sink: &mut dyn Sink) {
    super::feed(rs, sink).expect("writing to memory");
}

fn plain(c: &Cell) -> String {
    match c {
        Cell::Null => String::new(),
        Cell::Int(v) => v.to_string(),
        Cell::Real(v) => v.to_string(),
        Cell::Text(s) => s.to_string(),
        Cell::Name(s) => s.to_string(),
    }
}

/// Aligned columns, numbers to the right, `NULL` shown empty; a last line counts the rows.
pub fn table(rs: &ResultSet) -> String {
    let mut out = Vec::new();
    let mut t = TableSink::new(&mut out);
    if rs.truncated {
        t.more_left_out();
    }
    fill(rs, &mut t);
    drop(t);
    String::from_utf8(out).expect("UTF-8 cells")
}

/// RFC 4180: a header line, CRLF line ends, formula cells defused.
pub fn csv(rs: &ResultSet) -> String {
    let mut out = Vec::new();
    fill(rs, &mut CsvSink::new(&mut out, CsvOptions::default()));
    String::from_utf8(out).expect("UTF-8 cells")
}

/// Writes tables as rows come: widths from the first [`WIDTH_ROWS`] rows.
pub struct TableSink<W: Write> {
    out: W,
    head: Vec<String>,
    held: Vec<Vec<String>>,
    numeric: Vec<bool>,
    widths: Option<Vec<usize>>,
    rows: u64,
    more: bool,
}

impl<W: Write> TableSink<W> {
    pub fn new(out: W) -> Self {
        TableSink {
            out,
            head: Vec::new(),
            held: Vec::new(),
            numeric: Vec::new(),
            widths: None,
            rows: 0,
            more: false,
        }
    }

    /// The last line will say rows were left out.
    pub fn more_left_out(&mut self) {
        self.more = true;
    }

    fn line(&mut self, cells: &[String]) -> io::Result<()> {
        let widths = self.widths.as_ref().expect("widths set");
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i > 0 {
                s.push_str("  ");
            }
            let pad = " ".repeat(widths[i].saturating_sub(c.chars().count()));
            if self.numeric[i] {
                s.push_str(&pad);
                s.push_str(c);
            } else {
                s.push_str(c);
                s.push_str(&pad);
            }
        }
        writeln!(self.out, "{}", s.trim_end())
    }

    /// Sets the widths from what is held, and writes the head and the held rows.
    fn flush_held(&mut self) -> io::Result<()> {
        if self.widths.is_some() {
            return Ok(());
        }
        let widths = (0..self.head.len())
            .map(|i| {
                self.held
                    .iter()
                    .map(|r| r[i].chars().count())
                    .chain([self.head[i].chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect::<Vec<_>>();
        let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
        self.widths = Some(widths);
        let head = std::mem::take(&mut self.head);
        self.line(&head)?;
        writeln!(self.out, "{}", rule.join("  "))?;
        for r in std::mem::take(&mut self.held) {
            self.line(&r)?;
        }
        Ok(())
    }
}

impl<W: Write> Sink for TableSink<W> {
    fn columns(&mut self, columns: &[String]) -> io::Result<()> {
        self.head = columns
            .iter()
            .map(|c| escape::term(c).into_owned())
            .collect();
        self.numeric = vec![true; columns.len()];
        self.held.clear();
        self.widths = None;
        self.rows = 0;
        Ok(())
    }
    fn row(&mut self, row: &[Cell]) -> io::Result<bool> {
        self.rows += 1;
        let cells: Vec<String> = row
            .iter()
            .map(|c| escape::term(&plain(c)).into_owned())
            .collect();
        if self.widths.is_some() {
            self.line(&cells)?;
            return Ok(true);
        }
        for (n, c) in self.numeric.iter_mut().zip(row) {
            *n &= matches!(c, Cell::Int(_) | Cell::Real(_) | Cell::Null);
        }
        self.held.push(cells);
        if self.held.len() >= WIDTH_ROWS {
            self.flush_held()?;
        }
        Ok(true)
    }
    fn end(&mut self, stop: Option<Stop>) -> io::Result<()> {
        self.flush_held()?;
        let n = self.rows;
        let more = if self.more || stop.is_some() {
            ", more left out"
        } else {
            ""
        };
        self.more = false;
        writeln!(self.out, "({n} row{}{more})", if n == 1 { "" } else { "s" })?;
        self.out.flush()
    }
}

/// How CSV is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CsvOptions {
    /// Keep formula cells as they are (`--csv-raw`): for programs, not spreadsheets.
    pub raw: bool,
    /// Lines end with `\n` (a terminal shows `\r` as text).
    pub terminal: bool,
}

/// True for a text a spreadsheet would take as a formula (OWASP's list).
fn formula(s: &str) -> bool {
    s.starts_with(['=', '+', '-', '@', '\t', '\r'])
}

fn csv_field(s: &str) -> String {
    let quote = s.contains([',', '"', '\n', '\r'])
        || s.starts_with(char::is_whitespace)
        || s.ends_with(char::is_whitespace);
    if quote {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

fn csv_cell(c: &Cell, raw: bool) -> String {
    match c {
        Cell::Text(s) if !raw && formula(s) => csv_field(&format!("'{s}")),
        Cell::Name(s) if !raw && formula(s) => csv_field(&format!("'{s}")),
        c => csv_field(&plain(c)),
    }
}

/// Writes CSV as rows come.
pub struct CsvSink<W: Write> {
    out: W,
    opts: CsvOptions,
}

impl<W: Write> CsvSink<W> {
    pub fn new(out: W, opts: CsvOptions) -> Self {
        CsvSink { out, opts }
    }
    fn eol(&self) -> &'static str {
        if self.opts.terminal {
            "\n"
        } else {
            "\r\n"
        }
    }
}

impl<W: Write> Sink for CsvSink<W> {
    fn columns(&mut self, columns: &[String]) -> io::Result<()> {
        let head: Vec<String> = columns
            .iter()
            .map(|c| csv_cell(&Cell::Text(c.as_str().into()), self.opts.raw))
            .collect();
        write!(self.out, "{}{}", head.join(","), self.eol())
    }
    fn row(&mut self, row: &[Cell]) -> io::Result<bool> {
        let f: Vec<String> = row.iter().map(|c| csv_cell(c, self.opts.raw)).collect();
        write!(self.out, "{}{}", f.join(","), self.eol())?;
        Ok(true)
    }
    fn end(&mut self, _: Option<Stop>) -> io::Result<()> {
        self.out.flush()
    }
}

/// serde_json's compact output with every character a terminal could act on escaped as
/// `\uXXXX` (DEL, C1, bidi controls, U+2028/9); C0 is escaped by serde already.
pub struct SafeJson;

impl serde_json::ser::Formatter for SafeJson {
    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let bad = |c: char| escape::is_unsafe(c) || matches!(c, '\u{2028}' | '\u{2029}');
        let mut from = 0;
        for (i, c) in fragment.char_indices().filter(|&(_, c)| bad(c)) {
            writer.write_all(&fragment.as_bytes()[from..i])?;
            write!(writer, "\\u{:04x}", c as u32)?;
            from = i + c.len_utf8();
        }
        writer.write_all(&fragment.as_bytes()[from..])
    }
}

/// Writes `v` as JSON through [`SafeJson`].
pub fn to_safe_writer<W: Write, T: serde::Serialize + ?Sized>(out: W, v: &T) -> io::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(out, SafeJson);
    v.serialize(&mut ser).map_err(io::Error::from)
}

fn write_safe<T: serde::Serialize + ?Sized>(s: &mut String, v: &T) {
    let mut b = Vec::new();
    to_safe_writer(&mut b, v).expect("JSON of plain values");
    s.push_str(&String::from_utf8(b).expect("JSON is UTF-8"));
}

/// Writes the `results` of `memscope.query/1` as rows come: `[` is written by the caller,
/// then per statement `{"columns":[...],"rows":[` one row a line `],"truncated":...,
/// "stopped":...}`; [`JsonSink::close`] writes the `]`.
pub struct JsonSink<W: Write> {
    out: W,
    results: u64,
    rows: u64,
}

impl<W: Write> JsonSink<W> {
    pub fn new(out: W) -> Self {
        JsonSink {
            out,
            results: 0,
            rows: 0,
        }
    }
    /// Ends the `results` array.
    pub fn close(mut self) -> io::Result<W> {
        self.out.write_all(b"\n]")?;
        Ok(self.out)
    }
}

impl<W: Write> Sink for JsonSink<W> {
    fn columns(&mut self, columns: &[String]) -> io::Result<()> {
        if self.results > 0 {
            self.out.write_all(b",")?;
        }
        self.results += 1;
        self.rows = 0;
        self.out.write_all(b"\n{\"columns\":")?;
        to_safe_writer(&mut self.out, columns)?;
        self.out.write_all(b",\"rows\":[")
    }
    fn row(&mut self, row: &[Cell]) -> io::Result<bool> {
        self.out
            .write_all(if self.rows == 0 { b"\n" } else { b",\n" })?;
        self.rows += 1;
        let cells: Vec<serde_json::Value> = row.iter().map(json_cell).collect();
        to_safe_writer(&mut self.out, &cells)?;
        Ok(true)
    }
    fn end(&mut self, stop: Option<Stop>) -> io::Result<()> {
        write!(self.out, "],\"truncated\":{},\"stopped\":", stop.is_some())?;
        to_safe_writer(&mut self.out, &stop)?;
        self.out.write_all(b"}")?;
        self.out.flush()
    }
}

fn json_cell(c: &Cell) -> serde_json::Value {
    match c {
        Cell::Null => serde_json::Value::Null,
        Cell::Int(v) => (*v).into(),
        Cell::Real(v) => {
            serde_json::Number::from_f64(*v).map_or(serde_json::Value::Null, Into::into)
        }
        Cell::Text(s) => serde_json::Value::String(s.to_string()),
        Cell::Name(s) => serde_json::Value::String(s.to_string()),
    }
}

/// The head of the document `query --format json` answers with (`memscope.query/1`, inside
/// the envelope), written before its `results`: each statement's result with its columns in
/// order and its rows as arrays, so column order and repeated column names survive.
#[derive(serde::Serialize)]
pub struct QueryHead<'a> {
    pub schema: &'static str,
    pub file: String,
    pub sql: &'a str,
}

/// One statement's result in `memscope.query/1`.
#[derive(serde::Serialize)]
pub struct ResultDoc {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<serde_json::Value>>,
    pub truncated: bool,
}

pub const QUERY_SCHEMA: &str = "memscope.query/1";

impl ResultDoc {
    pub fn of(rs: &ResultSet) -> ResultDoc {
        ResultDoc {
            columns: rs.columns.clone(),
            rows: rs
                .rows
                .iter()
                .map(|r| r.iter().map(json_cell).collect())
                .collect(),
            truncated: rs.truncated,
        }
    }
}

/// An array of objects, one per row, keyed by column name.
pub fn json(rs: &ResultSet) -> serde_json::Value {
    rs.rows
        .iter()
        .map(|r| {
            let obj: serde_json::Map<String, serde_json::Value> = rs
                .columns
                .iter()
                .zip(r)
                .map(|(k, v)| (k.clone(), json_cell(v)))
                .collect();
            serde_json::Value::Object(obj)
        })
        .collect()
}
