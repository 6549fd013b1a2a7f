//! What bounds one query: time, rows, memory, and a cancel from outside.
//!
//! SQL text is attacker data (a model writes it over MCP, a colleague pastes it), and SQLite
//! will happily run a recursive CTE forever, join three tables into 10^15 rows, or build a
//! 900 MB blob four times. Every statement therefore runs under [`Limits`]:
//!
//! - time: SQLite's progress handler is called every [`STEPS`] virtual-machine steps and
//!   interrupts the statement once the deadline has passed or [`Cancel`] was raised;
//! - memory: SQLite's hard heap limit (`sqlite3_hard_heap_limit64`) is the tables' own
//!   memory plus [`Limits::max_memory`]; an allocation past it fails the statement with
//!   `SQLITE_NOMEM`, and one value past [`Limits::max_value`] with `SQLITE_TOOBIG`. Temporary
//!   b-trees and sorts stay in memory (`temp_store = MEMORY`, set here, which also keeps the
//!   sorter from spilling to temp files), so the heap limit bounds them too and a query never
//!   writes to disk;
//! - rows: a statement that makes more than [`Limits::max_rows`] rows stops there.
//!
//! A stop is typed ([`Stop`]), so the CLI's envelope and the MCP tool result say which limit
//! was hit, and the rows made before it have already gone out.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::Connection;

/// The progress handler's period, in SQLite virtual-machine steps (about a millisecond).
pub const STEPS: i32 = 10_000;

/// Cancels the statement running under it, from any thread.
///
/// Made once per session (the prompt, the MCP server) and handed to every run
/// ([`super::Db::stream`], [`super::Db::run_with`]). [`Cancel::cancel`] is one atomic store,
/// so it may be called from a signal handler's flag ([`Cancel::flag`]) or from the thread
/// that reads MCP `notifications/cancelled` while another thread runs the query; the running
/// statement stops within [`STEPS`] steps with [`Stop::Cancelled`]. A run clears the flag
/// when it starts ([`Cancel::reset`]), so a cancel that arrives between two calls cancels
/// nothing later.
#[derive(Clone, Debug, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    pub fn new() -> Cancel {
        Cancel::default()
    }
    /// Asks the running statement to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
    /// Clears a cancel (the prompt does before each statement; a run never does, so a cancel
    /// that comes before its run still stops it).
    pub fn reset(&self) {
        self.0.store(false, Ordering::SeqCst);
    }
    /// The flag itself, for a signal handler that may only store to an atomic.
    pub fn flag(&self) -> &Arc<AtomicBool> {
        &self.0
    }
}

/// The bounds of one run. [`Limits::default`] is what `memscope query` and the MCP `query`
/// tool use unless told otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock time for the whole SQL text; `None`: no limit.
    pub timeout: Option<Duration>,
    /// Rows one statement may make; `None`: no limit.
    pub max_rows: Option<u64>,
    /// Bytes SQLite may allocate on top of the tables it holds.
    pub max_memory: u64,
    /// Bytes of one string or blob value (`SQLITE_LIMIT_LENGTH`), at most a quarter of
    /// `max_memory`.
    pub max_value: u64,
}

/// Default time for one SQL text.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Default rows of one statement.
pub const DEFAULT_ROWS: u64 = 10_000_000;
/// Default memory of one query (SQLite's heap above the tables).
pub const DEFAULT_MEMORY: u64 = 1 << 30;
/// Default size of one value.
pub const DEFAULT_VALUE: u64 = 256 << 20;

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            timeout: Some(DEFAULT_TIMEOUT),
            max_rows: Some(DEFAULT_ROWS),
            max_memory: DEFAULT_MEMORY,
            max_value: DEFAULT_VALUE,
        }
    }
}

/// Why a statement stopped before its last row.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "limit", rename_all = "snake_case")]
pub enum Stop {
    /// It ran past [`Limits::timeout`].
    Time { seconds: f64 },
    /// It made more rows than [`Limits::max_rows`].
    Rows { max: u64 },
    /// SQLite needed more memory than [`Limits::max_memory`] (`bytes`), or one value past
    /// [`Limits::max_value`] (at most a quarter of it).
    Memory { bytes: u64 },
    /// [`Cancel::cancel`] was called (Ctrl-C, MCP `notifications/cancelled`).
    Cancelled,
}

const WHY_NONE: u8 = 0;
const WHY_TIME: u8 = 1;
const WHY_CANCEL: u8 = 2;

/// The limits installed on a connection for one run; dropping it removes them.
pub(crate) struct Guard<'c> {
    conn: &'c Connection,
    why: Arc<AtomicU8>,
    limits: Limits,
}

impl<'c> Guard<'c> {
    /// Installs `limits` and `cancel` on `conn`. A cancel set before the run stops it at its
    /// first check: the caller owns the flag's reset (the prompt clears it before each statement).
    pub(crate) fn install(
        conn: &'c Connection,
        limits: &Limits,
        cancel: &Cancel,
    ) -> rusqlite::Result<Guard<'c>> {
        use rusqlite::limits::Limit;
        let len = limits
            .max_value
            .min(limits.max_memory / 4)
            .clamp(1 << 10, 1_000_000_000) as i32;
        conn.set_limit(Limit::SQLITE_LIMIT_LENGTH, len)?;
        // SAFETY: plain calls into SQLite's global heap accounting.
        unsafe {
            let used = rusqlite::ffi::sqlite3_memory_used();
            let cap = used.saturating_add(limits.max_memory.min(i64::MAX as u64) as i64);
            rusqlite::ffi::sqlite3_hard_heap_limit64(cap);
        }
        let why = Arc::new(AtomicU8::new(WHY_NONE));
        let deadline = limits.timeout.map(|t| Instant::now() + t);
        let (w, flag) = (why.clone(), cancel.flag().clone());
        conn.progress_handler(
            STEPS,
            Some(move || {
                if flag.load(Ordering::Relaxed) {
                    w.store(WHY_CANCEL, Ordering::Relaxed);
                    return true;
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    w.store(WHY_TIME, Ordering::Relaxed);
                    return true;
                }
                false
            }),
        )?;
        Ok(Guard {
            conn,
            why,
            limits: *limits,
        })
    }

    /// The stop an SQLite error stands for, if it is one of the limits'.
    pub(crate) fn stop_of(&self, e: &rusqlite::Error) -> Option<Stop> {
        use rusqlite::ErrorCode as C;
        let code = e.sqlite_error_code()?;
        match code {
            C::OperationInterrupted => Some(match self.why.load(Ordering::Relaxed) {
                WHY_TIME => Stop::Time {
                    seconds: self.limits.timeout.unwrap_or_default().as_secs_f64(),
                },
                _ => Stop::Cancelled,
            }),
            C::OutOfMemory => Some(Stop::Memory {
                bytes: self.limits.max_memory,
            }),
            C::TooBig => Some(Stop::Memory {
                bytes: self.limits.max_memory,
            }),
            _ => None,
        }
    }

    pub(crate) fn max_rows(&self) -> Option<u64> {
        self.limits.max_rows
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        let _ = self.conn.progress_handler(0, None::<fn() -> bool>);
        // SAFETY: as above; 0 removes the limit.
        unsafe {
            rusqlite::ffi::sqlite3_hard_heap_limit64(0);
        }
    }
}
