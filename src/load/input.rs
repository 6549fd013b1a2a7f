//! The one reader every input goes through: regular files, gzip, pipes, FIFOs and stdin (`-`).
//!
//! memscope promises never to hang or to use memory without bound, whatever it is given, so
//! the reader decides what to do from what the path *is* before reading a byte:
//! - a regular file is memory-mapped (the fast path: nothing is copied) after its size is
//!   checked against the input limit; a SIGBUS from a file that shrinks under the map, and a
//!   file whose size or mtime changed by the end, are reported as "the file changed while it
//!   was read" (see [`super::guard`]);
//! - a pipe, FIFO or socket is read in chunks under the same size budget, and given up on after
//!   [`pipe_timeout`] seconds without a byte (a FIFO nobody writes to);
//! - character and block devices (`/dev/zero`, `/dev/urandom`, a terminal) never end or are not
//!   captures: refused at once; so is a directory;
//! - gzip is decompressed in chunks, the budget checked as the output grows and every growth a
//!   `try_reserve`, so a bomb stops at the limit with an error, never an abort.
//!
//! There is no fixed size ceiling for a mapped file: the pickle reader's spans hold 48-bit
//! offsets, and its memo and container counts grow with the input (see
//! [`crate::load::pickle::Limits::for_input`]), so a file is read whatever its size and the
//! kernel evicts the mapped pages behind the decoder. What must be held in memory (a pipe, a
//! gzip stream's output) is bounded by the machine's physical memory, every growth a
//! `try_reserve`, so a bomb ends in a one-line error. `MEMSCOPE_MAX_INPUT` sets a lower limit
//! (for a sandbox, or a CI job with a small memory budget).

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use super::{Bytes, LoadError};
use crate::units::bytes as show;

/// The largest input memscope maps: its pickle spans hold 48-bit offsets (256 TiB).
pub const MAX_INPUT: u64 = 1 << 48;

/// Seconds a pipe or FIFO may stay silent before memscope gives up on it (default 60).
pub const PIPE_TIMEOUT_S: u64 = 60;

/// The input limit in force: [`MAX_INPUT`], or `MEMSCOPE_MAX_INPUT` (bytes, `512MiB`, ...) if
/// that is smaller.
pub fn max_input() -> u64 {
    std::env::var("MEMSCOPE_MAX_INPUT")
        .ok()
        .and_then(|v| crate::units::parse_bytes(v.trim()))
        .map_or(MAX_INPUT, |v| v.min(MAX_INPUT))
}

/// The limit for bytes memscope must hold in memory itself (a pipe, a gzip stream's output):
/// [`max_input`], and at most the machine's physical memory, since past that the read could only
/// end in swapping or the kernel's OOM killer instead of an error.
pub fn max_held() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let phys = if pages > 0 && size > 0 {
        (pages as u64).saturating_mul(size as u64)
    } else {
        MAX_INPUT
    };
    max_input().min(phys)
}

/// How long a pipe may stay silent: `MEMSCOPE_PIPE_TIMEOUT` seconds, else [`PIPE_TIMEOUT_S`].
pub fn pipe_timeout() -> std::time::Duration {
    let s = std::env::var("MEMSCOPE_PIPE_TIMEOUT")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .unwrap_or(PIPE_TIMEOUT_S as f64);
    std::time::Duration::from_secs_f64(s)
}

/// An input's bytes (decompressed), and what is needed to tell whether it changed meanwhile.
pub struct Input {
    /// First, so it is dropped (unregistered) before the map it guards is unmapped.
    _guard: Option<super::guard::Registration>,
    pub data: Bytes,
    /// Bytes as stored: the file's size, or what was read from a pipe (compressed or not).
    pub stored_len: u64,
    /// Where a damaged gzip stream stopped, and why (only from [`read_lenient`]).
    pub damage: Option<(u64, std::io::Error)>,
    /// A mapped or read regular file: its handle and (size, mtime) when opened.
    file: Option<(File, u64, i64, i64)>,
}

impl std::ops::Deref for Input {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.data
    }
}

impl Input {
    /// Turns a result computed from this input into "the file changed while it was read" when
    /// the file's size or mtime moved meanwhile (a training job re-dumping it, say).
    pub fn settle<T>(&self, path: &Path, r: Result<T, LoadError>) -> Result<T, LoadError> {
        if let Some((f, len, sec, nsec)) = &self.file {
            let moved = match f.metadata() {
                Ok(m) => m.len() != *len || m.mtime() != *sec || m.mtime_nsec() != *nsec,
                Err(_) => true,
            };
            if moved {
                return Err(LoadError::Changed {
                    path: path.to_owned(),
                });
            }
        }
        r
    }
}

/// Reads a file (or `-` for stdin), transparently gunzipping it, within the input limit.
pub fn read(path: &Path) -> Result<Input, LoadError> {
    let input = read_lenient(path)?;
    match input.damage {
        Some((offset, err)) => Err(LoadError::Gzip {
            path: path.to_owned(),
            offset,
            err,
        }),
        None => Ok(input),
    }
}

/// [`read`], but a damaged gzip stream gives what it held up to the damage (see `damage`).
pub fn read_lenient(path: &Path) -> Result<Input, LoadError> {
    let mut input = read_raw(path)?;
    if super::sniff(&input.data) == super::Sniffed::Gzip {
        let (out, damage) = gunzip(path, &input.data)?;
        // The stored bytes are done with: a file that changed while they were decompressed
        // is reported now, and one rewritten later (a training job's next dump) no longer
        // matters, since what was read is in memory, whole.
        input.settle(path, Ok(()))?;
        input.file = None;
        // Unregistered before the map goes, so the range is never guarded while unmapped.
        input._guard = None;
        input.data = Bytes::Owned(out);
        input.damage = damage;
        if input.damage.is_none() && input.data.is_empty() {
            return Err(LoadError::Empty {
                path: path.to_owned(),
            });
        }
    }
    Ok(input)
}

fn refuse(path: &Path, what: String) -> LoadError {
    LoadError::Refused {
        path: path.to_owned(),
        what,
    }
}

/// The stored bytes: mapped for a regular file, read for a pipe; refusing what never ends.
fn read_raw(path: &Path) -> Result<Input, LoadError> {
    let io = |err| LoadError::Io {
        path: path.to_owned(),
        err,
    };
    let limit = max_input();
    let stdin = path.as_os_str() == "-";
    let (file, meta) = if stdin {
        let fd = std::io::stdin().lock();
        use std::os::fd::AsFd;
        let owned = fd.as_fd().try_clone_to_owned().map_err(io)?;
        let f = File::from(owned);
        let m = f.metadata().map_err(io)?;
        (f, m)
    } else {
        // Decide from the path before opening it: opening a FIFO blocks until a writer comes.
        let m = std::fs::metadata(path).map_err(io)?;
        let t = m.file_type();
        if t.is_dir() {
            return Err(refuse(path, "is a directory, not a capture file".into()));
        }
        let f = if t.is_fifo() {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(path)
                .map_err(io)?
        } else {
            File::open(path).map_err(io)?
        };
        (f, m)
    };
    let t = meta.file_type();
    if t.is_char_device() || t.is_block_device() {
        let what = if stdin {
            "stdin is a terminal or a device: pipe a capture in (`memscope analyze - < FILE`) or name a file".to_string()
        } else {
            "is a device, not a capture file: memscope reads regular files, pipes and stdin (`-`), and refuses devices such as /dev/zero that never end".to_string()
        };
        return Err(refuse(path, what));
    }
    if !t.is_file() {
        // A pipe, FIFO or socket: read under the budget and the silence timeout.
        let v = read_stream(path, &file, max_held(), !stdin)?;
        if v.is_empty() {
            return Err(LoadError::Empty {
                path: path.to_owned(),
            });
        }
        return Ok(Input {
            stored_len: v.len() as u64,
            data: Bytes::Owned(v),
            damage: None,
            file: None,
            _guard: None,
        });
    }
    let len = meta.len();
    if len == 0 {
        return Err(LoadError::Empty {
            path: path.to_owned(),
        });
    }
    if len > limit {
        return Err(over_limit(path, "the file is", len, limit));
    }
    let stamp = (meta.len(), meta.mtime(), meta.mtime_nsec());
    // SAFETY: the map is read-only and private; memscope never writes to it. A file truncated
    // by another process while mapped raises SIGBUS on the next touch of a lost page: the
    // guard registered below turns that into "the file changed while it was read", exit 2.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| {
        refuse(
            path,
            format!("cannot map the file's {} into memory: {e}", show(len)),
        )
    })?;
    let guard = super::guard::register(&map, path);
    Ok(Input {
        stored_len: len,
        data: Bytes::Mapped(map),
        damage: None,
        file: Some((file, stamp.0, stamp.1, stamp.2)),
        _guard: guard,
    })
}

fn over_limit(path: &Path, what: &str, n: u64, limit: u64) -> LoadError {
    refuse(
        path,
        format!(
            "{what} {}, over memscope's input limit of {} ({} bytes{})",
            show(n),
            show(limit),
            limit,
            if limit < max_input() {
                ", the machine's physical memory: memscope holds a pipe's or a gzip stream's bytes in memory; decompress it to a file, which is mapped and read whatever its size"
            } else if limit < MAX_INPUT {
                ", set by MEMSCOPE_MAX_INPUT"
            } else {
                ""
            }
        ),
    )
}

/// Makes room for `want` more bytes under `limit`, failing (not aborting) when refused.
/// Growth doubles, but never reserves much past `limit`.
fn room(path: &Path, out: &mut Vec<u8>, want: usize, limit: u64) -> Result<(), LoadError> {
    if out.capacity() - out.len() >= want {
        return Ok(());
    }
    let left = (limit as usize).saturating_add(1).saturating_sub(out.len());
    let grow = out.len().max(1 << 20).min(left).max(want);
    out.try_reserve(grow)
        .or_else(|_| out.try_reserve(want))
        .map_err(|_| {
            refuse(
                path,
                format!(
                    "out of memory after reading {} (memscope needs the whole input in memory)",
                    show(out.len() as u64)
                ),
            )
        })
}

/// Reads a pipe to its end, within `limit` bytes and [`pipe_timeout`] of silence.
fn read_stream(path: &Path, file: &File, limit: u64, fifo: bool) -> Result<Vec<u8>, LoadError> {
    use std::os::fd::AsRawFd;
    const CHUNK: usize = 1 << 20;
    let timeout = pipe_timeout();
    let mut out: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; CHUNK];
    loop {
        let mut pfd = libc::pollfd {
            fd: file.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd for the duration of the call.
        let r = unsafe { libc::poll(&mut pfd, 1, ms) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(LoadError::Io {
                path: path.to_owned(),
                err: e,
            });
        }
        if r == 0 {
            return Err(refuse(
                path,
                format!(
                    "nothing came through for {timeout:?}{} (MEMSCOPE_PIPE_TIMEOUT sets the wait in seconds)",
                    match (fifo, out.is_empty()) {
                        (true, true) => " (a FIFO with no writer?)".to_string(),
                        (_, true) => " (a pipe whose writer is stuck?)".to_string(),
                        _ => format!(" after {} (a stalled pipe?)", show(out.len() as u64)),
                    }
                ),
            ));
        }
        match (&*file).read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => {
                room(path, &mut out, n, limit)?;
                out.extend_from_slice(&buf[..n]);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                ) => {}
            Err(err) => {
                return Err(LoadError::Io {
                    path: path.to_owned(),
                    err,
                })
            }
        }
        if out.len() as u64 > limit {
            return Err(over_limit(path, "the input is more than", limit, limit));
        }
    }
}

/// What a damaged stream held before the damage: where it stopped, and why.
type Damage = Option<(u64, std::io::Error)>;

/// Decompresses (all members of) a gzip stream within the input limit.
fn gunzip(path: &Path, src: &[u8]) -> Result<(Vec<u8>, Damage), LoadError> {
    const CHUNK: usize = 1 << 20;
    let limit = max_held();
    let mut out: Vec<u8> = Vec::new();
    // The trailer's ISIZE (size mod 2^32 of the last member) is only a hint: a single-member
    // file usually says its size exactly, which saves the copies of a growing buffer.
    if src.len() >= 18 {
        let t = &src[src.len() - 4..];
        let hint = u32::from_le_bytes([t[0], t[1], t[2], t[3]]) as u64;
        if hint >= src.len() as u64 && hint <= limit {
            let _ = out.try_reserve_exact(hint as usize + 1);
        }
    }
    let mut dec = flate2::read::MultiGzDecoder::new(src);
    // `out` is zero-filled ahead of the decoder (it needs initialised memory) and `filled`
    // says how much of it holds output; each byte is zeroed only once.
    let mut filled = 0usize;
    loop {
        if filled == out.len() {
            room(path, &mut out, CHUNK, limit)?;
            // Zero at most 16 MiB ahead: a trailer that lies about the size reserves address
            // space, never resident memory.
            let end = out.capacity().min(filled + (16 << 20));
            out.resize(end, 0);
        }
        match dec.read(&mut out[filled..]) {
            Ok(0) => {
                out.truncate(filled);
                return Ok((out, None));
            }
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                out.truncate(filled);
                return Ok((out, Some((filled as u64, e))));
            }
        }
        if filled as u64 > limit {
            return Err(over_limit(
                path,
                "the gzip stream expands to more than",
                limit,
                limit,
            ));
        }
    }
}
