//! One virtual-table module for every table read in place: SQLite asks for a row's column, and
//! [`Rows::get`] answers from memscope's own vectors. Filling a million-event table is then
//! free, and memory is what the model already holds.
//!
//! Each table is registered as an eponymous module (the module's name is the table's), with
//! its rows as the module's client data. Scans are full scans; the planner is told the row
//! count so that a join reads the big table once, on the outside.

use std::borrow::Cow;
use std::ffi::{c_int, CString};
use std::sync::Arc;

use rusqlite::vtab::{
    Context, Filters, IndexInfo, Module, VTab, VTabConfig, VTabConnection, VTabCursor,
};
use rusqlite::{ffi, Connection};

use super::schema::Table;
use super::{Cell, Rows};

/// What a table's module is handed: its declaration and its rows.
pub struct Aux {
    create: CString,
    rows: Arc<dyn Rows>,
}

#[repr(C)]
struct InPlace {
    /// Base class: must be first.
    base: ffi::sqlite3_vtab,
    rows: Arc<dyn Rows>,
}

unsafe impl<'vtab> VTab<'vtab> for InPlace {
    type Aux = Aux;
    type Cursor = Cursor;

    fn connect(
        db: &mut VTabConnection,
        aux: Option<&Aux>,
        _module: &[u8],
        _database: &[u8],
        _table: &[u8],
        _args: &[&[u8]],
    ) -> rusqlite::Result<(Cow<'static, std::ffi::CStr>, Self)> {
        let aux = aux.expect("every in-place table is registered with its rows");
        db.config(VTabConfig::Innocuous)?;
        Ok((
            Cow::Owned(aux.create.clone()),
            InPlace {
                base: ffi::sqlite3_vtab::default(),
                rows: aux.rows.clone(),
            },
        ))
    }

    fn best_index(&self, info: &mut IndexInfo) -> rusqlite::Result<bool> {
        // `len` would fill a lazy table: the planner only needs an order of magnitude.
        info.set_estimated_cost(1e6);
        info.set_estimated_rows(1_000_000);
        Ok(true)
    }

    fn open(&'vtab mut self) -> rusqlite::Result<Cursor> {
        Ok(Cursor {
            base: ffi::sqlite3_vtab_cursor::default(),
            rows: self.rows.clone(),
            row: 0,
            len: 0,
        })
    }
}

#[repr(C)]
pub struct Cursor {
    /// Base class: must be first.
    base: ffi::sqlite3_vtab_cursor,
    rows: Arc<dyn Rows>,
    row: usize,
    len: usize,
}

unsafe impl VTabCursor for Cursor {
    fn filter(&mut self, _: c_int, _: Option<&str>, _: &Filters<'_>) -> rusqlite::Result<()> {
        self.rows.check().map_err(rusqlite::Error::ModuleError)?;
        self.row = 0;
        self.len = self.rows.len();
        Ok(())
    }
    fn next(&mut self) -> rusqlite::Result<()> {
        self.row += 1;
        Ok(())
    }
    fn eof(&self) -> bool {
        self.row >= self.len
    }
    fn column(&self, ctx: &mut Context, i: c_int) -> rusqlite::Result<()> {
        match self.rows.get(self.row, i as usize) {
            Cell::Null => ctx.set_result(&rusqlite::types::Null),
            Cell::Int(v) => ctx.set_result(&v),
            Cell::Real(v) => ctx.set_result(&v),
            Cell::Text(s) => ctx.set_result(&&*s),
            Cell::Name(s) => ctx.set_result(&s),
        }
    }
    fn rowid(&self) -> rusqlite::Result<i64> {
        Ok(self.row as i64)
    }
}

/// Registers `table` as an eponymous virtual table over `rows`.
pub fn register(
    conn: &Connection,
    table: &'static Table,
    rows: Arc<dyn Rows>,
) -> rusqlite::Result<()> {
    const MODULE: Module<'static, InPlace> = Module::eponymous_only_module();
    let create = CString::new(table.create_sql("x")).expect("no NUL in the schema");
    conn.create_module(table.name, &MODULE, Some(Aux { create, rows }))
}
