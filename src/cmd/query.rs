//! `memscope query`: the thin shell over `memscope::query`.
//!
//! `query` streams: each row is written as SQLite makes it, through the format's boundary
//! (`memscope::query::render`), and every statement runs under the limits of the command line.
//! In JSON the envelope is written around the rows as they come; a limit or an SQL error met
//! on the way closes the document and is the envelope's error (see docs/json.md).

use std::io::{IsTerminal, Read, Write};

use anyhow::Context;
use memscope::query::render::{
    to_safe_writer, CsvOptions, CsvSink, Format, JsonSink, QueryHead, TableSink, QUERY_SCHEMA,
};
use memscope::query::script::{pieces, Piece};
use memscope::query::{feed, Cancel, Db, Limits, QueryError, Sink};

use crate::cmd::cli::{QueryArgs, QueryFormatArg};
use crate::cmd::output;
use crate::cmd::session::Session;
use memscope::report::envelope::InputKind;

fn limits(a: &QueryArgs) -> Limits {
    Limits {
        timeout: Some(a.timeout).filter(|t| !t.is_zero()),
        max_rows: Some(a.max_rows).filter(|&n| n > 0),
        max_memory: a.max_memory,
        ..Limits::default()
    }
}

pub fn query(a: &QueryArgs, s: &mut Session) -> anyhow::Result<u8> {
    let format = match a.format {
        QueryFormatArg::Table => Format::Table,
        QueryFormatArg::Json => Format::Json,
        QueryFormatArg::Csv => Format::Csv,
    };
    if a.sql.is_none() && a.file.as_os_str() == "-" {
        anyhow::bail!("the capture is read from stdin: give the SQL as an argument");
    }
    let db =
        memscope::query::open_capture(&a.file).with_context(|| format!("{}", a.file.display()))?;
    s.found(
        &a.file,
        if db.trace {
            InputKind::Trace
        } else {
            InputKind::Snapshot
        },
    );
    let limits = limits(a);
    let terminal = std::io::stdout().is_terminal();
    let csv = CsvOptions {
        raw: a.csv_raw,
        terminal,
    };
    let sql = match &a.sql {
        Some(s) => s.clone(),
        None if std::io::stdin().is_terminal() => {
            let mut out = output::term_stdout(false);
            memscope::query::prompt::run(&db, format, &mut out, &limits, csv)
                .context("the prompt")?;
            return Ok(0);
        }
        None => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .context("reading SQL from stdin")?;
            s
        }
    };
    let cancel = Cancel::new();
    if format == Format::Json {
        let file = a.file.display().to_string();
        s.answer_streamed(|w| json(&db, &sql, file, &limits, &cancel, w))?;
        return Ok(0);
    }
    // The table, and CSV to a terminal, go through the terminal boundary; CSV to a file or
    // a pipe is data, escaped by its rules.
    let mut out: Box<dyn Write> = if format == Format::Table || terminal {
        Box::new(output::term_stdout(false))
    } else {
        Box::new(std::io::BufWriter::new(std::io::stdout().lock()))
    };
    for p in pieces(&sql) {
        match (p, format) {
            (Piece::Dot(d), Format::Table) => match db.dot(d) {
                Some(text) => out.write_all(text.as_bytes())?,
                None => unreachable!("a dot piece is a dot-command"),
            },
            (Piece::Dot(d), _) => dot(&db, d, &mut CsvSink::new(&mut out, csv))?,
            (Piece::Sql(q), Format::Table) => {
                db.stream(q, &limits, &cancel, &mut TableSink::new(&mut out))?
            }
            (Piece::Sql(q), _) => {
                db.stream(q, &limits, &cancel, &mut CsvSink::new(&mut out, csv))?
            }
        }
    }
    out.flush().context("writing the result")?;
    Ok(0)
}

/// A dot-command's result into `sink` (an unknown command is an SQL error).
fn dot(db: &Db, line: &str, sink: &mut dyn Sink) -> Result<(), QueryError> {
    match db.dot_result(line) {
        Some(rs) => Ok(feed(&rs?, sink)?),
        None => Ok(()),
    }
}

/// The `memscope.query/1` document, written as it is made; an error met on the way closes
/// it and is returned.
fn json(
    db: &Db,
    sql: &str,
    file: String,
    limits: &Limits,
    cancel: &Cancel,
    w: &mut dyn Write,
) -> Result<(), QueryError> {
    let head = to_safe_json(&QueryHead {
        schema: QUERY_SCHEMA,
        file,
        sql,
    })?;
    // The head's object, left open for its results.
    w.write_all(&head.as_bytes()[..head.len() - 1])?;
    w.write_all(b",\"results\":[")?;
    let mut sink = JsonSink::new(&mut *w);
    let mut r = Ok(());
    for p in pieces(sql) {
        r = match p {
            Piece::Dot(d) => dot(db, d, &mut sink),
            Piece::Sql(q) => db.stream(q, limits, cancel, &mut sink),
        };
        if r.is_err() {
            break;
        }
    }
    sink.close()?.write_all(b"}")?;
    r
}

fn to_safe_json<T: serde::Serialize>(v: &T) -> std::io::Result<String> {
    let mut b = Vec::new();
    to_safe_writer(&mut b, v)?;
    Ok(String::from_utf8(b).expect("JSON is UTF-8"))
}
