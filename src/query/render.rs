//! A result set as a terminal table, CSV or JSON.
//!
//! Every text value may come from the capture (file and function names), so each output has
//! its rule: the table makes control characters visible ([`crate::escape::term`]) and goes out
//! through the terminal boundary; CSV quotes per RFC 4180 (a field with a comma, a quote, a
//! line break, or leading or trailing space is quoted, quotes doubled); JSON is escaped by
//! serde. CSV values are written as they are, not defused for spreadsheets (no `'` before a
//! leading `=`, `+`, `-` or `@`): the CSV is data for programs (pandas, `sqlite3 .import`), a
//! changed value would no longer be the capture's, and a negative number would be mangled.
//! Open it in a spreadsheet as text, or query with `--format table`.

use super::{Cell, ResultSet};
use crate::escape;

/// The output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Csv,
    Json,
}

pub fn render(rs: &ResultSet, f: Format) -> String {
    match f {
        Format::Table => table(rs),
        Format::Csv => csv(rs),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&json(rs)).expect("JSON of plain values");
            s.push('\n');
            s
        }
    }
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
    let head: Vec<String> = rs
        .columns
        .iter()
        .map(|c| escape::term(c).into_owned())
        .collect();
    let body: Vec<Vec<String>> = rs
        .rows
        .iter()
        .map(|r| {
            r.iter()
                .map(|c| escape::term(&plain(c)).into_owned())
                .collect()
        })
        .collect();
    let numeric: Vec<bool> = (0..head.len())
        .map(|i| {
            rs.rows
                .iter()
                .all(|r| matches!(r[i], Cell::Int(_) | Cell::Real(_) | Cell::Null))
        })
        .collect();
    let width = |s: &str| s.chars().count();
    let widths: Vec<usize> = (0..head.len())
        .map(|i| {
            body.iter()
                .map(|r| width(&r[i]))
                .chain([width(&head[i])])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String], out: &mut String| {
        let parts: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let pad = " ".repeat(widths[i] - width(c));
                if numeric[i] {
                    format!("{pad}{c}")
                } else {
                    format!("{c}{pad}")
                }
            })
            .collect();
        out.push_str(parts.join("  ").trim_end());
        out.push('\n');
    };
    let mut out = String::new();
    line(&head, &mut out);
    let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
    out.push_str(&rule.join("  "));
    out.push('\n');
    for r in &body {
        line(r, &mut out);
    }
    let n = rs.rows.len();
    let more = if rs.truncated { ", more left out" } else { "" };
    out.push_str(&format!(
        "({n} row{}{more})\n",
        if n == 1 { "" } else { "s" }
    ));
    out
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

/// RFC 4180: a header line, CRLF line ends.
pub fn csv(rs: &ResultSet) -> String {
    let mut out = String::new();
    let head: Vec<String> = rs.columns.iter().map(|c| csv_field(c)).collect();
    out.push_str(&head.join(","));
    out.push_str("\r\n");
    for r in &rs.rows {
        let f: Vec<String> = r.iter().map(|c| csv_field(&plain(c))).collect();
        out.push_str(&f.join(","));
        out.push_str("\r\n");
    }
    out
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

/// The document `query --format json` answers with (`memscope.query/1`, inside the envelope):
/// each statement's result with its columns in order and its rows as arrays, so column order
/// and repeated column names survive.
#[derive(serde::Serialize)]
pub struct QueryDoc<'a> {
    pub schema: &'static str,
    pub file: String,
    pub sql: &'a str,
    pub results: Vec<ResultDoc>,
}

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
