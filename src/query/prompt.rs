//! The interactive prompt of `memscope query CAPTURE` with no SQL: line editing and history
//! (rustyline), statements ending with `;` (several lines each), dot-commands, and results
//! through the terminal boundary. History is kept in `$XDG_STATE_HOME/memscope/query_history`
//! (else `~/.local/state/...`), written after each entry; a history that cannot be read or
//! written is not an error.
//!
//! Ctrl-C while a statement runs cancels that statement ([`Cancel`], SIGINT routed to it by
//! [`crate::signals::interrupt_to`]); at the prompt it clears the line. Neither ends the
//! session.

use std::io::Write;
use std::path::PathBuf;

use rustyline::error::ReadlineError;

use super::render::{CsvOptions, CsvSink, Format, JsonSink, TableSink};
use super::{Cancel, Db, Limits, QueryError, Sink};

fn history_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local").join("state"))
        })?;
    Some(base.join("memscope").join("query_history"))
}

/// Runs the prompt until `.quit` or end of input. `out` is the terminal (through
/// [`crate::escape::TermWriter`]); errors of a statement, and a limit or Ctrl-C that stops
/// it, are shown and the prompt goes on. Each statement runs under `limits`.
pub fn run(
    db: &Db,
    format: Format,
    out: &mut dyn Write,
    limits: &Limits,
    csv: CsvOptions,
) -> std::io::Result<()> {
    let cancel = Cancel::new();
    let _sigint = crate::signals::interrupt_to(cancel.flag().clone());
    let mut ed = match rustyline::DefaultEditor::new() {
        Ok(e) => e,
        Err(e) => return Err(std::io::Error::other(e.to_string())),
    };
    let hist = history_path();
    if let Some(h) = &hist {
        let _ = ed.load_history(h);
    }
    let mut format = format;
    writeln!(
        out,
        "memscope query: {} tables; .tables, .schema, .help; statements end with ';'",
        db.tables().len()
    )?;
    out.flush()?;
    let mut pending = String::new();
    loop {
        let prompt = if pending.is_empty() {
            "memscope> "
        } else {
            "     ...> "
        };
        let line = match ed.readline(prompt) {
            Ok(l) => l,
            Err(ReadlineError::Interrupted) => {
                pending.clear();
                continue;
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(std::io::Error::other(e.to_string())),
        };
        let t = line.trim();
        if pending.is_empty() && t.starts_with('.') {
            let _ = ed.add_history_entry(t);
            save(&mut ed, hist.as_deref());
            match t.split_whitespace().collect::<Vec<_>>().as_slice() {
                [".quit" | ".exit", ..] => break,
                [".mode", m] => match parse_mode(m) {
                    Some(f) => format = f,
                    None => writeln!(out, "modes: table, csv, json")?,
                },
                _ => write!(out, "{}", db.dot(t).unwrap_or_default())?,
            }
            out.flush()?;
            continue;
        }
        if t.is_empty() && pending.is_empty() {
            continue;
        }
        pending.push_str(&line);
        pending.push('\n');
        if !t.ends_with(';') {
            continue;
        }
        let sql = std::mem::take(&mut pending);
        let _ = ed.add_history_entry(sql.trim());
        save(&mut ed, hist.as_deref());
        let csv = CsvOptions {
            terminal: true,
            ..csv
        };
        // A Ctrl-C met while editing is rustyline's; the flag counts from here.
        cancel.reset();
        match statement(db, &sql, format, out, limits, &cancel, csv) {
            Ok(()) => {}
            Err(QueryError::Write(e)) => return Err(e),
            Err(e) => writeln!(out, "error: {e}")?,
        }
        out.flush()?;
    }
    save(&mut ed, hist.as_deref());
    Ok(())
}

/// Runs one entry's SQL into `out` in `format`.
fn statement(
    db: &Db,
    sql: &str,
    format: Format,
    out: &mut dyn Write,
    limits: &Limits,
    cancel: &Cancel,
    csv: CsvOptions,
) -> Result<(), QueryError> {
    match format {
        Format::Table => db.stream(sql, limits, cancel, &mut TableSink::new(&mut *out)),
        Format::Csv => db.stream(sql, limits, cancel, &mut CsvSink::new(&mut *out, csv)),
        Format::Json => {
            out.write_all(b"[")?;
            let mut sink = JsonSink::new(&mut *out);
            let r = db.stream(sql, limits, cancel, &mut sink as &mut dyn Sink);
            sink.close()?.write_all(b"\n")?;
            r
        }
    }
}

fn save(ed: &mut rustyline::DefaultEditor, hist: Option<&std::path::Path>) {
    if let Some(h) = hist {
        if let Some(dir) = h.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = ed.save_history(h);
    }
}

pub fn parse_mode(m: &str) -> Option<Format> {
    match m {
        "table" => Some(Format::Table),
        "csv" => Some(Format::Csv),
        "json" => Some(Format::Json),
        _ => None,
    }
}
