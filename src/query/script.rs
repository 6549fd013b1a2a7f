//! A text of SQL and dot-commands, as `memscope query` reads it from its argument or stdin:
//! a line starting with `.` where no SQL is pending is a dot-command (as in `sqlite3`), every
//! other line is SQL. `printf '.tables\n.schema ooms\n'` is two commands.
//!
//! Linear in the text: whether the SQL before a dot line is complete is asked of SQLite
//! (`sqlite3_complete`) only at a dot line, over the SQL since the previous one.

use std::ffi::CString;

/// One piece of a script, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// A dot-command line (`.schema ooms`).
    Dot(&'a str),
    /// SQL: one statement or many.
    Sql(&'a str),
}

/// True when `sql` holds only whole statements (no string, comment or statement open).
fn complete(sql: &str) -> bool {
    let Ok(c) = CString::new(sql) else {
        return true;
    };
    // SAFETY: a NUL-terminated string that lives across the call.
    unsafe { rusqlite::ffi::sqlite3_complete(c.as_ptr()) != 0 }
}

/// The pieces of `text`.
pub fn pieces(text: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let t = line.trim();
        if t.starts_with('.') {
            let sql = &text[start..at];
            let blank = sql.trim().is_empty();
            if blank || complete(sql) {
                if !blank {
                    out.push(Piece::Sql(sql));
                }
                out.push(Piece::Dot(t));
                at += line.len();
                start = at;
                continue;
            }
        }
        at += line.len();
    }
    if !text[start..].trim().is_empty() {
        out.push(Piece::Sql(&text[start..]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_lines_are_commands_where_no_sql_is_open() {
        assert_eq!(
            pieces(".tables\n.schema ooms\n"),
            [Piece::Dot(".tables"), Piece::Dot(".schema ooms")]
        );
        assert_eq!(
            pieces("SELECT 1;\n.tables\nSELECT 2"),
            [
                Piece::Sql("SELECT 1;\n"),
                Piece::Dot(".tables"),
                Piece::Sql("SELECT 2")
            ]
        );
        // Inside a string, a line starting with `.` is SQL.
        assert_eq!(pieces("SELECT 'a\n.b';"), [Piece::Sql("SELECT 'a\n.b';")]);
        assert_eq!(pieces("  \n"), []);
    }
}
