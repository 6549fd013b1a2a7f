//! The invariants of `memscope query`'s renderers (`memscope::query::render`), shared by the
//! `query_render` fuzz target and `tests/it/query_bounds.rs` (which runs them over seeded
//! random inputs in `cargo test`): any result set, streamed through the table, CSV (defused,
//! raw, terminal) and JSON sinks, gives a table with nothing raw a terminal acts on and one
//! line per row, CSV that parses back to the cells (a formula cell with its `'`), and JSON
//! that parses back to the cells with no raw control, C1 or bidi character.

use memscope::query::render::{CsvOptions, CsvSink, JsonSink, TableSink};
use memscope::query::{feed, Cell, ResultSet, Sink};

/// A result set from fuzz bytes: the first byte gives 1 to 4 columns, then cells separated
/// by 0xFF, each a kind byte (null, integer, real, text) and its bytes.
pub fn result_set(data: &[u8]) -> Option<ResultSet> {
    let (&n, rest) = data.split_first()?;
    let ncols = (n % 4) as usize + 1;
    let cells: Vec<Cell> = rest
        .split(|&b| b == 0xff)
        .map(|c| match c.split_first() {
            None => Cell::Null,
            Some((k, v)) => {
                let mut b = [0u8; 8];
                let m = v.len().min(8);
                b[..m].copy_from_slice(&v[..m]);
                match k % 4 {
                    0 => Cell::Null,
                    1 => Cell::Int(i64::from_le_bytes(b)),
                    2 => Cell::Real(f64::from_le_bytes(b)),
                    _ => Cell::from(String::from_utf8_lossy(v).into_owned()),
                }
            }
        })
        .collect();
    let rows: Vec<Vec<Cell>> = cells
        .chunks(ncols)
        .filter(|r| r.len() == ncols)
        .map(|r| r.to_vec())
        .collect();
    Some(ResultSet {
        columns: (0..ncols).map(|i| format!("c{i}")).collect(),
        rows,
        truncated: false,
    })
}

fn sunk(rs: &ResultSet, make: impl FnOnce(&mut Vec<u8>) -> Box<dyn Sink + '_>) -> String {
    let mut out = Vec::new();
    {
        let mut s = make(&mut out);
        feed(rs, &mut *s).unwrap();
    }
    String::from_utf8(out).expect("UTF-8 out")
}

/// RFC 4180 fields of one CSV text (`eol` ends a record).
fn parse_csv(s: &str, eol: &str) -> Vec<Vec<String>> {
    let mut recs = Vec::new();
    let mut rec = Vec::new();
    let mut field = String::new();
    let mut rest = s;
    loop {
        if let Some(r) = rest.strip_prefix('"') {
            // Quoted: up to a lone quote.
            let mut r = r;
            loop {
                let i = r.find('"').expect("a closing quote");
                field.push_str(&r[..i]);
                r = &r[i + 1..];
                match r.strip_prefix('"') {
                    Some(more) => {
                        field.push('"');
                        r = more;
                    }
                    None => break,
                }
            }
            rest = r;
        } else {
            let end = rest
                .find(',')
                .into_iter()
                .chain(rest.find(eol))
                .min()
                .expect("a record ends");
            assert!(!rest[..end].contains('"'), "a bare quote in {s:?}");
            field.push_str(&rest[..end]);
            rest = &rest[end..];
        }
        rec.push(std::mem::take(&mut field));
        if let Some(r) = rest.strip_prefix(',') {
            rest = r;
        } else {
            rest = rest
                .strip_prefix(eol)
                .expect("a field ends at , or a line end");
            recs.push(std::mem::take(&mut rec));
            if rest.is_empty() {
                return recs;
            }
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

fn raw_for_terminal(c: char) -> bool {
    memscope::report::escape::is_unsafe(c)
}

/// Checks every renderer on `rs`.
pub fn check(rs: &ResultSet) {
    // The table: one line per row, head, rule and count; nothing raw but line ends.
    let t = sunk(rs, |o| Box::new(TableSink::new(o)));
    assert_eq!(t.lines().count(), rs.rows.len() + 3, "{t:?}");
    assert!(
        !t.chars()
            .any(|c| c != '\n' && (raw_for_terminal(c) || c == '\t')),
        "{t:?}"
    );
    // CSV, defused and raw: parses back to the cells.
    for raw in [false, true] {
        for terminal in [false, true] {
            let eol = if terminal { "\n" } else { "\r\n" };
            let c = sunk(rs, |o| {
                Box::new(CsvSink::new(o, CsvOptions { raw, terminal }))
            });
            let recs = parse_csv(&c, eol);
            assert_eq!(recs.len(), rs.rows.len() + 1, "{c:?}");
            for (rec, row) in recs[1..].iter().zip(&rs.rows) {
                for (f, cell) in rec.iter().zip(row) {
                    let p = plain(cell);
                    let formula = matches!(cell, Cell::Text(_))
                        && p.starts_with(['=', '+', '-', '@', '\t', '\r']);
                    if formula && !raw {
                        assert_eq!(*f, format!("'{p}"));
                    } else {
                        assert_eq!(*f, p);
                    }
                }
            }
        }
    }
    // JSON: parses back; nothing raw a terminal acts on.
    let mut out = b"[".to_vec();
    let mut j = JsonSink::new(&mut out);
    feed(rs, &mut j).unwrap();
    j.close().unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(
        !text.chars().any(|c| c != '\n' && raw_for_terminal(c)),
        "{text:?}"
    );
    assert!(!text.contains(['\u{2028}', '\u{2029}']));
    let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let rows = v[0]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), rs.rows.len());
    for (jr, row) in rows.iter().zip(&rs.rows) {
        for (jc, cell) in jr.as_array().unwrap().iter().zip(row) {
            match cell {
                Cell::Text(s) => assert_eq!(jc.as_str(), Some(&**s)),
                Cell::Int(i) => assert_eq!(jc.as_i64(), Some(*i)),
                Cell::Null => assert!(jc.is_null()),
                Cell::Real(x) if x.is_finite() => assert!(jc.is_number()),
                _ => {}
            }
        }
    }
}
