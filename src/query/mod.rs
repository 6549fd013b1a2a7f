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
pub mod limits;
pub mod prompt;
pub mod render;
pub mod schema;
pub mod script;
mod sites;
mod vtab;

use std::sync::Arc;

use rusqlite::{types::ValueRef, Connection};

use limits::Guard;
pub use limits::{Cancel, Limits, Stop};
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
/// A value past SQLite's integers (2^63 and above: a crafted size or address) is its exact
/// decimal text, never clamped; copied tables keep it exact too ([`copy`]).
impl From<u64> for Cell {
    fn from(v: u64) -> Cell {
        match i64::try_from(v) {
            Ok(i) => Cell::Int(i),
            Err(_) => Cell::Text(Arc::from(v.to_string())),
        }
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
    /// SQLite refused or failed the SQL (syntax, an unknown table, a statement that would
    /// write): SQLite's message, said once.
    #[error("{0}")]
    Sql(String),
    /// A limit, or a cancel, ended the statement; the rows made before it went out.
    #[error("{}", stop_message(.0))]
    Stopped(Stop),
    #[error(transparent)]
    Load(#[from] crate::load::LoadError),
    /// The tables could not be made (a bug).
    #[error("making the tables: {0}")]
    Open(String),
    /// The output could not be written.
    #[error("writing the result: {0}")]
    Write(#[from] std::io::Error),
}

fn stop_message(s: &Stop) -> String {
    match s {
        Stop::Time { seconds } => format!("the query ran past its time limit ({seconds} s); raise it with --timeout"),
        Stop::Rows { max } => format!("the statement made more than {max} rows; raise the limit with --max-rows"),
        Stop::Memory { bytes } => format!("the query needed more than {} of memory, or one value over a quarter of it; raise it with --max-memory", crate::units::bytes(*bytes)),
        Stop::Cancelled => "the query was cancelled".to_owned(),
    }
}

/// SQLite's own message, without rusqlite's repetition of it.
fn sql_error(e: rusqlite::Error) -> QueryError {
    sql_error_in(e, 0)
}

/// As [`sql_error`], for an error in a text of `whole` bytes, so that a syntax error's
/// offset counts from the text's start (SQLite counts from the statement's).
fn sql_error_in(e: rusqlite::Error, whole: usize) -> QueryError {
    QueryError::Sql(match e {
        rusqlite::Error::SqliteFailure(_, Some(m)) => m,
        rusqlite::Error::SqlInputError {
            msg, sql, offset, ..
        } => {
            let at = whole.saturating_sub(sql.len()) + offset.max(0) as usize;
            format!("{msg} (at byte {at})")
        }
        e => e.to_string(),
    })
}

fn open_error(e: rusqlite::Error) -> QueryError {
    QueryError::Open(e.to_string())
}

/// Loads a capture, analyses it once and opens its tables.
pub fn open_capture(path: &std::path::Path) -> Result<Db, QueryError> {
    use crate::analysis::Product;
    match crate::analysis::analyze(crate::load::open(path)?, path) {
        Product::Snapshot(p) => Db::open(fill_snapshot::tables(Arc::new(p)), false),
        Product::Trace(p) => Db::open(fill_trace::tables(Arc::new(p)), true),
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

/// Where a run's results go, as they are made: each statement's columns, then its rows one
/// by one, then its end. Nothing is held between rows unless the sink holds it.
pub trait Sink {
    /// A statement's columns, before its first row.
    fn columns(&mut self, columns: &[String]) -> std::io::Result<()>;
    /// One row; `false` when the sink wants no more rows of this statement.
    fn row(&mut self, row: &[Cell]) -> std::io::Result<bool>;
    /// The statement's end: `stop` when a limit or a cancel ended it early.
    fn end(&mut self, stop: Option<Stop>) -> std::io::Result<()>;
}

/// A capture's tables in a read-only in-memory database.
pub struct Db {
    conn: Connection,
    pub trace: bool,
}

impl Db {
    /// Declares and fills the tables, then closes the database to writes.
    pub fn open(tables: Vec<Filled>, trace: bool) -> Result<Db, QueryError> {
        let conn = Connection::open_in_memory().map_err(open_error)?;
        let tx = conn.unchecked_transaction().map_err(open_error)?;
        for f in &tables {
            match f.table.storage {
                schema::Storage::Virtual => {
                    vtab::register(&conn, f.table, f.rows.clone()).map_err(open_error)?
                }
                schema::Storage::Copied => copy(&conn, f).map_err(open_error)?,
            }
        }
        tx.commit().map_err(open_error)?;
        lock(&conn).map_err(open_error)?;
        Ok(Db { conn, trace })
    }

    /// Runs every statement of `sql` under `limits`, handing each row to `sink` as it is
    /// made. `cancel` stops the running statement from another thread (see [`Cancel`]).
    ///
    /// The cost is linear in the SQL's length: the text is handed to SQLite NUL-terminated,
    /// so each statement is parsed in place (SQLite copies a text that is not, remainder and
    /// all, once per statement: quadratic over two million statements).
    pub fn stream(
        &self,
        sql: &str,
        limits: &Limits,
        cancel: &Cancel,
        sink: &mut dyn Sink,
    ) -> Result<(), QueryError> {
        use rusqlite::fallible_iterator::FallibleIterator;
        if sql.contains('\0') {
            return Err(QueryError::Sql("the SQL holds a NUL character".to_owned()));
        }
        let text = format!("{sql}\0");
        let guard = Guard::install(&self.conn, limits, cancel).map_err(open_error)?;
        let mut batch = rusqlite::Batch::new(&self.conn, &text);
        loop {
            match batch.next() {
                Ok(Some(mut st)) => statement(&mut st, &guard, sink)?,
                Ok(None) => return Ok(()),
                Err(e) => {
                    return Err(match guard.stop_of(&e) {
                        Some(stop) => QueryError::Stopped(stop),
                        None => sql_error_in(e, text.len()),
                    })
                }
            }
        }
    }

    /// Runs `sql` under `limits` and keeps its last statement's result, at most `show` rows
    /// of it (`truncated` says more were left out; the statement stops there). For callers
    /// that answer in one piece (the MCP `query` tool); `cancel` as in [`Db::stream`].
    pub fn run_with(
        &self,
        sql: &str,
        show: Option<usize>,
        limits: &Limits,
        cancel: &Cancel,
    ) -> Result<ResultSet, QueryError> {
        let mut c = Collect {
            show,
            sets: Vec::new(),
            keep_all: false,
        };
        self.stream(sql, limits, cancel, &mut c)?;
        Ok(c.sets.pop().unwrap_or_default())
    }

    /// Runs every statement of `sql` under the default limits, keeping at most `limit` rows
    /// of each.
    pub fn run_all(&self, sql: &str, limit: Option<usize>) -> Result<Vec<ResultSet>, QueryError> {
        let mut c = Collect {
            show: limit,
            sets: Vec::new(),
            keep_all: true,
        };
        self.stream(sql, &Limits::default(), &Cancel::new(), &mut c)?;
        Ok(c.sets)
    }

    /// Runs the one statement of `sql` (the last, where it holds several) under the default
    /// limits.
    pub fn run(&self, sql: &str, limit: Option<usize>) -> Result<ResultSet, QueryError> {
        self.run_with(sql, limit, &Limits::default(), &Cancel::new())
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

    /// A dot-command as a result set, for the outputs that are data (CSV, JSON): `.tables`
    /// one row per table, `.schema` and `.help` their text in one row. `None` when `line` is
    /// SQL; an unknown command is an error.
    pub fn dot_result(&self, line: &str) -> Option<Result<ResultSet, QueryError>> {
        let mut words = line.trim().trim_end_matches(';').split_whitespace();
        let cmd = words.next().filter(|w| w.starts_with('.'))?;
        let (column, rows): (&str, Vec<Vec<Cell>>) = match cmd {
            ".tables" => (
                "table",
                self.tables()
                    .into_iter()
                    .map(|t| vec![Cell::Name(t)])
                    .collect(),
            ),
            ".schema" | ".help" => (
                &cmd[1..],
                vec![vec![Cell::from(self.dot(line).unwrap_or_default())]],
            ),
            other => {
                return Some(Err(QueryError::Sql(format!(
                    "unknown command {other}; try .help"
                ))))
            }
        };
        Some(Ok(ResultSet {
            columns: vec![column.to_owned()],
            rows,
            truncated: false,
        }))
    }

    /// The names of the tables this capture has.
    pub fn tables(&self) -> Vec<&'static str> {
        schema::tables_for(self.trace).map(|t| t.name).collect()
    }
}

/// Hands `rs` to `sink` as a run would.
pub fn feed(rs: &ResultSet, sink: &mut dyn Sink) -> std::io::Result<()> {
    sink.columns(&rs.columns)?;
    for r in &rs.rows {
        if !sink.row(r)? {
            break;
        }
    }
    sink.end(None)
}

/// What `.help` says.
pub const HELP: &str = "\
SQL (SQLite) over the capture; a statement ends with ';'. Read-only.
.tables            the tables of this capture
.schema [TABLE]    their columns, with what each means
.mode table|csv|json   how results are shown (prompt only)
.help              this
.quit              leave (or Ctrl-D)
Ctrl-C stops the running statement. Sizes are bytes, times microseconds; sites are file,
line, function (docs/query.md).
";

/// The sink of [`Db::run_with`] and [`Db::run_all`]: result sets, `show` rows of each.
struct Collect {
    show: Option<usize>,
    sets: Vec<ResultSet>,
    keep_all: bool,
}

impl Sink for Collect {
    fn columns(&mut self, columns: &[String]) -> std::io::Result<()> {
        if !self.keep_all {
            self.sets.clear();
        }
        self.sets.push(ResultSet {
            columns: columns.to_vec(),
            ..Default::default()
        });
        Ok(())
    }
    fn row(&mut self, row: &[Cell]) -> std::io::Result<bool> {
        let rs = self.sets.last_mut().expect("columns come first");
        if self.show.is_some_and(|l| rs.rows.len() >= l) {
            rs.truncated = true;
            return Ok(false);
        }
        rs.rows.push(row.to_vec());
        Ok(true)
    }
    fn end(&mut self, _: Option<Stop>) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs one prepared statement into `sink`, under `guard`'s limits.
fn statement(
    st: &mut rusqlite::Statement,
    guard: &Guard,
    sink: &mut dyn Sink,
) -> Result<(), QueryError> {
    let columns: Vec<String> = st.column_names().iter().map(|s| s.to_string()).collect();
    let n = columns.len();
    sink.columns(&columns)?;
    let mut rows = st.raw_query();
    let mut made = 0u64;
    let mut row = Vec::with_capacity(n);
    loop {
        let r = match rows.next() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                let err = match guard.stop_of(&e) {
                    Some(stop) => {
                        sink.end(Some(stop))?;
                        return Err(QueryError::Stopped(stop));
                    }
                    None => sql_error(e),
                };
                sink.end(None)?;
                return Err(err);
            }
        };
        if let Some(max) = guard.max_rows().filter(|&m| made >= m) {
            let stop = Stop::Rows { max };
            sink.end(Some(stop))?;
            return Err(QueryError::Stopped(stop));
        }
        made += 1;
        row.clear();
        for i in 0..n {
            row.push(match r.get_ref(i).map_err(sql_error)? {
                ValueRef::Null => Cell::Null,
                ValueRef::Integer(v) => Cell::Int(v),
                ValueRef::Real(v) => Cell::Real(v),
                ValueRef::Text(t) => Cell::Text(Arc::from(String::from_utf8_lossy(t))),
                ValueRef::Blob(b) => Cell::Text(Arc::from(format!("<{} bytes>", b.len()))),
            });
        }
        if !sink.row(&row)? {
            break;
        }
    }
    sink.end(None)?;
    Ok(())
}

/// Copies a small table into SQLite. Its integer columns are declared without a type, so
/// that SQLite applies no affinity: an integer past 2^63, held as its exact text
/// ([`Cell::from`]), stays that text instead of becoming an inexact REAL. Every other value
/// is bound with its own type, so nothing else changes.
fn copy(conn: &Connection, f: &Filled) -> rusqlite::Result<()> {
    let t = f.table;
    let cols: Vec<String> = t
        .columns
        .iter()
        .map(|c| match c.ty {
            schema::Ty::Int => c.name.to_owned(),
            ty => format!("{} {}", c.name, ty.sql()),
        })
        .collect();
    conn.execute_batch(&format!("CREATE TABLE {}({})", t.name, cols.join(", ")))?;
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
/// attached (`ATTACH`, `VACUUM INTO`), and no setting changed. Temporary b-trees and sorts
/// are kept in memory, where the heap limit of [`limits`] bounds them: a query never spills
/// to temp files.
fn lock(conn: &Connection) -> rusqlite::Result<()> {
    use rusqlite::hooks::{AuthAction, Authorization};
    use rusqlite::limits::Limit;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
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
