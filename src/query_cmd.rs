//! `memscope query` and `memscope mcp`: the thin shells over `memscope::query` and
//! `memscope::mcp`.

use std::io::{IsTerminal, Read, Write};

use anyhow::Context;
use memscope::query::render::{render, Format, QueryDoc, ResultDoc, QUERY_SCHEMA};

use crate::cli::{QueryArgs, QueryFormatArg};
use crate::output;
use crate::session::Session;
use memscope::report::envelope::InputKind;

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
    // Tables go through the terminal boundary; CSV and JSON are data, escaped by their rules.
    let mut out: Box<dyn Write> = match format {
        Format::Table => Box::new(output::term_stdout(false)),
        _ => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let sql = match &a.sql {
        Some(s) => s.clone(),
        None if std::io::stdin().is_terminal() => {
            memscope::query::prompt::run(&db, format, &mut out).context("the prompt")?;
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
    if let Some(text) = db.dot(&sql) {
        out.write_all(text.as_bytes())?;
    } else if format == Format::Json {
        drop(out);
        let results = db.run_all(&sql, None)?;
        return s
            .answer(&QueryDoc {
                schema: QUERY_SCHEMA,
                file: a.file.display().to_string(),
                sql: &sql,
                results: results.iter().map(ResultDoc::of).collect(),
            })
            .map(|()| 0);
    } else {
        for rs in db.run_all(&sql, None)? {
            out.write_all(render(&rs, format).as_bytes())?;
        }
    }
    out.flush().context("writing the result")?;
    Ok(0)
}
