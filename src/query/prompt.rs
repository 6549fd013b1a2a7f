//! The interactive prompt of `memscope query CAPTURE` with no SQL: line editing and history
//! (rustyline), statements ending with `;` (several lines each), dot-commands, and results
//! through the terminal boundary. History is kept in `$XDG_STATE_HOME/memscope/query_history`
//! (else `~/.local/state/...`); a history that cannot be read or written is not an error.

use std::io::Write;
use std::path::PathBuf;

use rustyline::error::ReadlineError;

use super::render::{render, Format};
use super::Db;

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
/// [`crate::escape::TermWriter`]); errors of a statement are shown and the prompt goes on.
pub fn run(db: &Db, format: Format, out: &mut dyn Write) -> std::io::Result<()> {
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
        match db.run_all(&sql, None) {
            Ok(sets) => {
                for rs in sets {
                    // On the terminal a line ends with a newline (the terminal boundary would
                    // show CSV's carriage return).
                    write!(out, "{}", render(&rs, format).replace("\r\n", "\n"))?;
                }
            }
            Err(e) => writeln!(out, "error: {e}")?,
        }
        out.flush()?;
    }
    if let Some(h) = &hist {
        if let Some(dir) = h.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = ed.save_history(h);
    }
    Ok(())
}

pub fn parse_mode(m: &str) -> Option<Format> {
    match m {
        "table" => Some(Format::Table),
        "csv" => Some(Format::Csv),
        "json" => Some(Format::Json),
        _ => None,
    }
}
