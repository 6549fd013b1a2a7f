//! `memscope query`: SQL over a capture, for the questions the report does not answer.
//!
//! The tables ([`schema::TABLES`]) are a view of what memscope already holds: the loaded
//! model (segments, blocks, the event log, the interned stacks) and the one analysis product
//! (replayed states, steps, leaks, OOMs, categories, site lists). Nothing is parsed again and
//! nothing is recovered from prose. The tables with one row per event or frame are virtual
//! tables read in place ([`vtab`]), so a million-event capture is queryable as soon as it is
//! analysed; the small ones are copied into SQLite, where joins get automatic indexes.
//!
//! The user's SQL runs on an in-memory database made read-only once filled ([`Db::open`]): no
//! statement may write, attach a file or change a setting, so a query cannot write to disk.

pub mod fill_snapshot;
pub mod fill_trace;
pub mod prompt;
pub mod render;
pub mod schema;
mod sites;
mod vtab;

use std::sync::Arc;

use rusqlite::{types::ValueRef, Connection};

pub use sites::SiteDict;

/// One value of a row.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    Null,
    Int(i64),
    Real(f64),
    Text(Arc<str>),
    /// memscope's own names (`alloc`, `large`): no allocation per row.
    Name(&'static str),
}

impl From<i64> for Cell {
    fn from(v: i64) -> Cell {
        Cell::Int(v)
    }
}
impl From<u64> for Cell {
    fn from(v: u64) -> Cell {
        Cell::Int(v.min(i64::MAX as u64) as i64)
    }
}
impl From<u32> for Cell {
    fn from(v: u32) -> Cell {
        Cell::Int(v as i64)
    }
}
impl From<usize> for Cell {
    fn from(v: usize) -> Cell {
        Cell::from(v as u64)
    }
}
impl From<bool> for Cell {
    fn from(v: bool) -> Cell {
        Cell::Int(v as i64)
    }
}
impl From<f64> for Cell {
    fn from(v: f64) -> Cell {
        Cell::Real(v)
    }
}
impl From<&str> for Cell {
    fn from(v: &str) -> Cell {
        Cell::Text(Arc::from(v))
    }
}
impl From<String> for Cell {
    fn from(v: String) -> Cell {
        Cell::Text(Arc::from(v))
    }
}
impl From<Arc<str>> for Cell {
    fn from(v: Arc<str>) -> Cell {
        Cell::Text(v)
    }
}
impl<T: Into<Cell>> From<Option<T>> for Cell {
    fn from(v: Option<T>) -> Cell {
        v.map_or(Cell::Null, Into::into)
    }
}

/// A table's rows, as the virtual table reads them (or as they are copied).
pub trait Rows: Send + Sync {
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The value at `row`, `col` (both in range).
    fn get(&self, row: usize, col: usize) -> Cell;
    /// Whether the rows can be read (a lazy table that would outgrow its bound cannot).
    fn check(&self) -> Result<(), String> {
        Ok(())
    }
}

/// Rows already made (the small tables).
#[derive(Default)]
pub struct Made(pub Vec<Vec<Cell>>);

impl Rows for Made {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn get(&self, row: usize, col: usize) -> Cell {
        self.0[row][col].clone()
    }
}

/// One table's rows, named by its [`schema::Table`].
pub struct Filled {
    pub table: &'static schema::Table,
    pub rows: Arc<dyn Rows>,
}

impl Filled {
    /// A table read through `rows`.
    pub fn new(name: &str, rows: Arc<dyn Rows>) -> Filled {
        Filled {
            table: schema::table(name).expect("a table of the schema"),
            rows,
        }
    }

    /// A table of rows already made, each as wide as the schema says (a programming error
    /// otherwise, which the tests of every table catch).
    pub fn made(name: &str, rows: Vec<Vec<Cell>>) -> Filled {
        let f = Filled::new(name, Arc::new(Made(Vec::new())));
        for r in &rows {
            assert_eq!(r.len(), f.table.columns.len(), "a row of {name}");
        }
        Filled {
            rows: Arc::new(Made(rows)),
            ..f
        }
    }
}

/// Errors of `memscope query`.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error("{0}")]
    Sql(#[from] rusqlite::Error),
    #[error(transparent)]
    Load(#[from] crate::load::LoadError),
}

/// Loads a capture, analyses it once and opens its tables.
pub fn open_capture(path: &std::path::Path) -> Result<Db, QueryError> {
    use crate::load::Capture;
    let progress = crate::load::Progress::default();
    let cap = crate::load::load_with_progress(path, &progress)?;
    let len = progress.stored.load(std::sync::atomic::Ordering::Relaxed) as u64;
    match cap {
        Capture::Snapshot(s) => {
            let an = crate::analysis::analyze_snapshot(&s, path, len);
            Db::open(fill_snapshot::tables(Arc::new(s), Arc::new(an)), false)
        }
        Capture::Trace(t) => {
            let an = crate::analysis::trace_report::analyze_trace_product(&t, path, len);
            Db::open(fill_trace::tables(Arc::new(t), Arc::new(an)), true)
        }
    }
}

/// The result of one statement.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResultSet {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
    /// Rows left out past the limit asked for.
    pub truncated: bool,
}

/// A capture's tables in a read-only in-memory database.
pub struct Db {
    conn: Connection,
    pub trace: bool,
}

impl Db {
    /// Declares and fills the tables, then closes the database to writes.
    pub fn open(tables: Vec<Filled>, trace: bool) -> Result<Db, QueryError> {
        let conn = Connection::open_in_memory()?;
        let tx = conn.unchecked_transaction()?;
        for f in &tables {
            match f.table.storage {
                schema::Storage::Virtual => vtab::register(&conn, f.table, f.rows.clone())?,
                schema::Storage::Copied => copy(&conn, f)?,
            }
        }
        tx.commit()?;
        lock(&conn)?;
        Ok(Db { conn, trace })
    }

    /// Runs every statement of `sql`, keeping at most `limit` rows of each.
    pub fn run_all(&self, sql: &str, limit: Option<usize>) -> Result<Vec<ResultSet>, QueryError> {
        let mut out = Vec::new();
        use rusqlite::fallible_iterator::FallibleIterator;
        let mut batch = rusqlite::Batch::new(&self.conn, sql);
        while let Some(mut st) = batch.next()? {
            out.push(result(&mut st, limit)?);
        }
        Ok(out)
    }

    /// Runs the one statement of `sql` (the last, where it holds several).
    pub fn run(&self, sql: &str, limit: Option<usize>) -> Result<ResultSet, QueryError> {
        Ok(self.run_all(sql, limit)?.pop().unwrap_or_default())
    }

    /// A dot-command (`.tables`, `.schema [TABLE]`, `.help`): its text, or `None` when `line`
    /// is SQL.
    pub fn dot(&self, line: &str) -> Option<String> {
        let mut words = line.trim().trim_end_matches(';').split_whitespace();
        let cmd = words.next().filter(|w| w.starts_with('.'))?;
        Some(match cmd {
            ".tables" => self.tables().join("\n") + "\n",
            ".schema" => schema::schema_text(self.trace, words.next()),
            ".help" => HELP.to_owned(),
            other => format!("unknown command {other}; try .help\n"),
        })
    }

    /// The names of the tables this capture has.
    pub fn tables(&self) -> Vec<&'static str> {
        schema::tables_for(self.trace).map(|t| t.name).collect()
    }
}

/// What `.help` says.
pub const HELP: &str = "\
SQL (SQLite) over the capture; a statement ends with ';'. Read-only.
.tables            the tables of this capture
.schema [TABLE]    their columns, with what each means
.mode table|csv|json   how results are shown (prompt only)
.help              this
.quit              leave (or Ctrl-D)
Sizes are bytes, times microseconds; sites are file, line, function (docs/query.md).
";

fn result(st: &mut rusqlite::Statement, limit: Option<usize>) -> Result<ResultSet, QueryError> {
    {
        let columns: Vec<String> = st.column_names().iter().map(|s| s.to_string()).collect();
        let n = columns.len();
        let mut rows = st.query([])?;
        let mut out = ResultSet {
            columns,
            ..Default::default()
        };
        while let Some(r) = rows.next()? {
            if limit.is_some_and(|l| out.rows.len() >= l) {
                out.truncated = true;
                break;
            }
            let mut row = Vec::with_capacity(n);
            for i in 0..n {
                row.push(match r.get_ref(i)? {
                    ValueRef::Null => Cell::Null,
                    ValueRef::Integer(v) => Cell::Int(v),
                    ValueRef::Real(v) => Cell::Real(v),
                    ValueRef::Text(t) => Cell::Text(Arc::from(String::from_utf8_lossy(t))),
                    ValueRef::Blob(b) => Cell::Text(Arc::from(format!("<{} bytes>", b.len()))),
                });
            }
            out.rows.push(row);
        }
        Ok(out)
    }
}

fn copy(conn: &Connection, f: &Filled) -> Result<(), QueryError> {
    let t = f.table;
    conn.execute_batch(&t.create_sql(t.name))?;
    let marks = vec!["?"; t.columns.len()].join(",");
    let mut st = conn.prepare(&format!("INSERT INTO {} VALUES ({marks})", t.name))?;
    for r in 0..f.rows.len() {
        for c in 0..t.columns.len() {
            bind(&mut st, c + 1, f.rows.get(r, c))?;
        }
        st.raw_execute()?;
    }
    Ok(())
}

fn bind(st: &mut rusqlite::Statement, i: usize, v: Cell) -> rusqlite::Result<()> {
    match v {
        Cell::Null => st.raw_bind_parameter(i, rusqlite::types::Null),
        Cell::Int(x) => st.raw_bind_parameter(i, x),
        Cell::Real(x) => st.raw_bind_parameter(i, x),
        Cell::Text(s) => st.raw_bind_parameter(i, &*s),
        Cell::Name(s) => st.raw_bind_parameter(i, s),
    }
}

/// Closes the database to every write: no statement but reads is authorised, no file may be
/// attached (`ATTACH`, `VACUUM INTO`), and no setting changed.
fn lock(conn: &Connection) -> Result<(), QueryError> {
    use rusqlite::hooks::{AuthAction, Authorization};
    use rusqlite::limits::Limit;
    conn.pragma_update(None, "query_only", true)?;
    conn.set_limit(Limit::SQLITE_LIMIT_ATTACHED, 0)?;
    conn.authorizer(Some(|ctx: rusqlite::hooks::AuthContext<'_>| {
        match ctx.action {
            AuthAction::Select
            | AuthAction::Read { .. }
            | AuthAction::Function { .. }
            | AuthAction::Recursive => Authorization::Allow,
            // Reading pragmas only: `table_info(events)` names a table; any other pragma with a
            // value would change a setting.
            AuthAction::Pragma {
                pragma_name: "table_info" | "table_xinfo",
                ..
            }
            | AuthAction::Pragma {
                pragma_name: "table_list" | "function_list",
                pragma_value: None,
            } => Authorization::Allow,
            _ => Authorization::Deny,
        }
    }))?;
    Ok(())
}
