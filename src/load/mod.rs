//! From bytes on disk to raw records: sniffing, decompression, and the format readers.
//!
//! Users hand memscope whatever file they have (a `.pickle`, a `.pickle.gz`, a profiler
//! `.json.gz`, sometimes the wrong file), so the kind is decided by content, not by name, and a
//! wrong guess is reported as "this looks like X" rather than as a parse error deep inside.
//! Inputs are memory-mapped read-only (memscope never writes to them) through [`input`], the
//! one reader that bounds every input's size and refuses inputs that never end.

pub mod chrome;
mod device_record;
pub mod framecut;
mod guard;
pub mod input;
pub mod pickle;
pub mod prefault;
pub mod prescan;
pub mod snapshot;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::model::trace::Trace;
use crate::model::{LoadNote, Snapshot};

/// What a file's first bytes say it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sniffed {
    Pickle,
    Gzip,
    Json,
    Unknown,
}

pub fn sniff(bytes: &[u8]) -> Sniffed {
    match bytes {
        [0x1f, 0x8b, ..] => Sniffed::Gzip,
        [0x80, p, ..] if *p <= 5 => Sniffed::Pickle,
        // Protocol 0/1 pickles start with a printable opcode and end with STOP ('.').
        [b'(' | b'}' | b']' | b')' | b'c' | b'N' | b'I' | b'S' | b'V' | b'P' | b'L' | b'F'
        | b'i', ..]
            if bytes.last() == Some(&b'.') =>
        {
            Sniffed::Pickle
        }
        _ => {
            let first = bytes.iter().copied().find(|b| !b.is_ascii_whitespace());
            match first {
                Some(b'{') | Some(b'[') => Sniffed::Json,
                _ => Sniffed::Unknown,
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    // The inner errors are part of the message (not `#[source]`), so a chain printer shows them once.
    #[error("{path}: cannot read: {err}")]
    Io { path: PathBuf, err: std::io::Error },
    #[error("{path}: this is a Perfetto protobuf trace (newer torch writes export_chrome_trace(\"x.pftrace\") as protobuf; torch 2.11 still writes JSON there), not a Chrome JSON trace or a snapshot pickle: export to a .json name, or convert it with Perfetto's `traceconv json x.pftrace x.json`")]
    PerfettoProtobuf { path: PathBuf },
    #[error("{path}: gzip stream is damaged after {offset} decompressed bytes: {err}")]
    Gzip {
        path: PathBuf,
        offset: u64,
        err: std::io::Error,
    },
    #[error("{path}: {err}")]
    Pickle {
        path: PathBuf,
        err: pickle::PickleError,
    },
    #[error("{path}: {err} ({events} trace entries and {frames} distinct stacks had been decoded before the end)")]
    Cut {
        path: PathBuf,
        err: pickle::PickleError,
        events: usize,
        frames: usize,
    },
    #[error("{path}: {err}")]
    Snapshot {
        path: PathBuf,
        err: snapshot::SnapshotError,
    },
    #[error("{path}: {err}")]
    Trace {
        path: PathBuf,
        err: chrome::TraceError,
    },
    #[error("{path}: {what}")]
    WrongKind { path: PathBuf, what: String },
    #[error("{path}: the file is empty")]
    Empty { path: PathBuf },
    #[error("{path}: {what}")]
    Refused { path: PathBuf, what: String },
    #[error("{path}: the file changed while it was read (copy it first, or wait until its writer is done)")]
    Changed { path: PathBuf },
}

/// A file's bytes: mapped when plain, decompressed into memory when gzipped.
pub enum Bytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

pub use input::{max_input, read as read_input, Input, MAX_INPUT};

/// What a file that memscope cannot read looks like, from its magic bytes, so that the error
/// says "this is a PNG image" rather than "unknown opcode at byte 0".
pub fn looks_like(bytes: &[u8]) -> Option<&'static str> {
    // torch.save before 1.6 wrote a pickled magic number (LONG1 0x1950a86a20f9469cfc6c) first.
    const LEGACY_TORCH: &[u8] = &[
        0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19,
    ];
    Some(match bytes {
        [] => "an empty file",
        [b'P', b'K', 3, 4, ..] | [b'P', b'K', 5, 6, ..] => {
            "a zip archive (torch.save writes model checkpoints as zip files: this is likely a checkpoint, not a memory snapshot)"
        }
        _ if bytes.starts_with(LEGACY_TORCH) => "a legacy torch.save file (a checkpoint, not a memory snapshot)",
        [0x89, b'H', b'D', b'F', ..] => "an HDF5 file",
        [0x7f, b'E', b'L', b'F', ..] => "an ELF executable or library",
        [0x89, b'P', b'N', b'G', ..] => "a PNG image",
        [0xff, 0xd8, 0xff, ..] => "a JPEG image",
        [b'%', b'P', b'D', b'F', ..] => "a PDF document",
        [0x93, b'N', b'U', b'M', b'P', b'Y', ..] => "a NumPy .npy array",
        [b'B', b'Z', b'h', ..] => "a bzip2 stream (decompress it first)",
        [0xfd, b'7', b'z', b'X', b'Z', 0, ..] => "an xz stream (decompress it first)",
        [0x28, 0xb5, 0x2f, 0xfd, ..] => "a zstd stream (decompress it first)",
        [b'S', b'Q', b'L', b'i', b't', b'e', ..] => "an SQLite database (an Nsight Systems export?)",
        _ if perfetto_protobuf(bytes) => {
            "a Perfetto protobuf trace (convert it with Perfetto's `traceconv json x.pftrace x.json`)"
        }
        _ => return None,
    })
}

/// Whether `bytes` begin as a Perfetto trace: `Trace` is `repeated TracePacket packet = 1`, so
/// the file is a run of `0a <varint length> <packet>`. Two packets that fit (or one that ends the
/// file exactly), each opening with a valid protobuf field tag, and binary bytes among the
/// first 64 (a text file can start with a newline, 0x0a) make it one.
fn perfetto_protobuf(bytes: &[u8]) -> bool {
    let varint = |b: &[u8]| -> Option<(u64, usize)> {
        let mut v = 0u64;
        for (i, &x) in b.iter().take(10).enumerate() {
            v |= u64::from(x & 0x7f) << (7 * i);
            if x & 0x80 == 0 {
                return Some((v, i + 1));
            }
        }
        None
    };
    let binary = bytes
        .iter()
        .take(64)
        .any(|&b| b < 0x09 || (0x0e..0x20).contains(&b) || b >= 0x80);
    if !binary {
        return false;
    }
    let (mut at, mut packets) = (0usize, 0);
    while at < bytes.len() && packets < 4 {
        if bytes[at] != 0x0a {
            return false;
        }
        let Some((len, n)) = varint(&bytes[at + 1..]) else {
            return false;
        };
        let start = at + 1 + n;
        let Some(end) = usize::try_from(len).ok().and_then(|l| start.checked_add(l)) else {
            return false;
        };
        let tag = bytes.get(start).copied().unwrap_or(0);
        if len == 0 || end > bytes.len() || tag >> 3 == 0 || !matches!(tag & 7, 0 | 1 | 2 | 5) {
            return false;
        }
        at = end;
        packets += 1;
    }
    packets >= 2 || (packets == 1 && at == bytes.len())
}

fn wrong_kind(path: &Path, bytes: &[u8], wanted: &str) -> LoadError {
    if bytes.is_empty() {
        return LoadError::Empty {
            path: path.to_owned(),
        };
    }
    let shown: Vec<String> = bytes.iter().take(8).map(|b| format!("{b:02x}")).collect();
    let kind = looks_like(bytes).unwrap_or("an unknown kind of file");
    LoadError::WrongKind {
        path: path.to_owned(),
        what: format!(
            "this is {kind}, not {wanted} (it starts with bytes {})",
            shown.join(" ")
        ),
    }
}

/// Parses bytes already in memory as a snapshot pickle.
pub fn snapshot_from_bytes(path: &Path, bytes: &[u8]) -> Result<Snapshot, LoadError> {
    snapshot_with_progress(path, bytes, None)
}

fn sniff_snapshot(path: &Path, bytes: &[u8]) -> Result<(), LoadError> {
    if looks_like(bytes).is_some() {
        return Err(wrong_kind(path, bytes, "a memory snapshot"));
    }
    match sniff(bytes) {
        Sniffed::Pickle => {}
        Sniffed::Json => {
            return Err(LoadError::WrongKind {
                path: path.to_owned(),
                what: "this is JSON (a profiler trace?), not a snapshot pickle".into(),
            })
        }
        _ => {
            let shown: Vec<String> = bytes.iter().take(8).map(|b| format!("{b:02x}")).collect();
            return Err(LoadError::WrongKind {
                path: path.to_owned(),
                what: format!(
                    "not a pickle: it starts with bytes {} (a snapshot from torch.cuda.memory._dump_snapshot starts with 80 0x)",
                    shown.join(" ")
                ),
            });
        }
    }
    Ok(())
}

fn snapshot_with_progress(
    path: &Path,
    bytes: &[u8],
    progress: Option<&mut dyn FnMut(usize)>,
) -> Result<Snapshot, LoadError> {
    sniff_snapshot(path, bytes)?;
    snapshot::parse(bytes, progress).map_err(|e| match e {
        snapshot::ParseError::Pickle(err) => LoadError::Pickle {
            path: path.to_owned(),
            err,
        },
        snapshot::ParseError::Cut {
            err,
            events,
            frames,
        } => LoadError::Cut {
            path: path.to_owned(),
            err,
            events,
            frames,
        },
        snapshot::ParseError::Snapshot(err) => LoadError::Snapshot {
            path: path.to_owned(),
            err,
        },
    })
}

/// A loaded capture of either kind.
pub enum Capture {
    Snapshot(Snapshot),
    Trace(Trace),
}

/// A capture as [`open`] read it: the way in for every command and view. `bytes` is the
/// input's size as stored (a file's size, or what came through a pipe, compressed or not),
/// the figure the report's `input.bytes` states.
pub struct Opened<C = Capture> {
    pub capture: C,
    pub bytes: u64,
}

/// How far a load has got, shared with a thread that shows it (the TUI's loading screen).
#[derive(Debug, Default)]
pub struct Progress {
    /// Bytes of the (decompressed) input decoded so far; 0 where the decoder does not say.
    pub done: AtomicUsize,
    /// Bytes of the (decompressed) input; 0 while it is being read.
    pub total: AtomicUsize,
    /// What the input turned out to be: 0 unknown yet, 1 a snapshot, 2 a trace.
    pub kind: AtomicUsize,
}

impl Progress {
    pub const SNAPSHOT: usize = 1;
    pub const TRACE: usize = 2;
}

/// Reads a snapshot or a trace (`-`: stdin), deciding by content (gzipped or not), never by
/// file name.
pub fn open(path: &Path) -> Result<Opened, LoadError> {
    open_with_progress(path, &Progress::default())
}

/// [`open`], reporting how far it has got in `progress` (the TUI's loading screen).
pub fn open_with_progress(path: &Path, progress: &Progress) -> Result<Opened, LoadError> {
    let input = input::read_lenient(path)?;
    progress.total.store(input.len(), Ordering::Relaxed);
    if input.damage.is_none() && perfetto_protobuf(&input) {
        return Err(LoadError::PerfettoProtobuf {
            path: path.to_owned(),
        });
    }
    let r = match (sniff(&input), &input.damage) {
        (Sniffed::Json, _) => {
            progress.kind.store(Progress::TRACE, Ordering::Relaxed);
            trace_from_input(path, &input).map(Capture::Trace)
        }
        (_, Some(_)) => return Err(damaged(path, input)),
        _ => {
            progress.kind.store(Progress::SNAPSHOT, Ordering::Relaxed);
            snapshot_from_input(path, &input.data, Some(progress)).map(Capture::Snapshot)
        }
    };
    let bytes = input.stored_len;
    input
        .settle(path, r)
        .map(|capture| Opened { capture, bytes })
}

/// [`open`] for the commands that take a snapshot only (`whatif`, `plan`, the pictures): a
/// trace, or anything else, is refused as not a snapshot, and a damaged gzip stream as such.
pub fn open_snapshot(path: &Path) -> Result<Opened<Snapshot>, LoadError> {
    let input = read_input(path)?;
    let r = snapshot_from_input(path, &input.data, None);
    let bytes = input.stored_len;
    input
        .settle(path, r)
        .map(|capture| Opened { capture, bytes })
}

/// [`open`] of an input already read whole by [`read_input`] (callers that looked at its bytes
/// first: `check` telling a baseline file from a capture, and reading a trace's rank). JSON is
/// a trace, anything else must be a snapshot; the pages of a mapped file are released behind
/// the decoder as [`open`] does.
pub fn open_read(path: &Path, input: &Input) -> Result<Opened, LoadError> {
    let r = match sniff(input) {
        Sniffed::Json => trace_from_bytes(path, input).map(Capture::Trace),
        _ => snapshot_from_input(path, &input.data, None).map(Capture::Snapshot),
    };
    input.settle(path, r).map(|capture| Opened {
        capture,
        bytes: input.stored_len,
    })
}

/// Loads a snapshot or a trace: [`open`]'s capture.
pub fn load(path: &Path) -> Result<Capture, LoadError> {
    open(path).map(|o| o.capture)
}

fn damaged(path: &Path, input: Input) -> LoadError {
    match input.damage {
        Some((offset, err)) => LoadError::Gzip {
            path: path.to_owned(),
            offset,
            err,
        },
        None => LoadError::Empty {
            path: path.to_owned(),
        },
    }
}

/// Reads and parses a snapshot file (`.pickle`, optionally gzipped): [`open_snapshot`]'s.
pub fn load_snapshot(path: &Path) -> Result<Snapshot, LoadError> {
    open_snapshot(path).map(|o| o.capture)
}

/// [`load_snapshot`], with the input's size as stored (a file's size, or the bytes that came
/// through a pipe: `metadata` of `-` says nothing about them).
pub fn load_snapshot_sized(path: &Path) -> Result<(Snapshot, u64), LoadError> {
    open_snapshot(path).map(|o| (o.capture, o.bytes))
}

/// A mapped file is decoded front to back once; the pages behind the decoder are handed back
/// to the kernel as it goes (`MADV_DONTNEED`), so a large capture does not stay resident on top
/// of the model built from it. Strings still referenced are faulted back in from the file.
fn snapshot_from_input(
    path: &Path,
    bytes: &Bytes,
    shown: Option<&Progress>,
) -> Result<Snapshot, LoadError> {
    match bytes {
        Bytes::Mapped(map) => {
            let _ = map.advise(memmap2::Advice::Sequential);
            // Shared by the two threads below: the helper releases where it runs (the
            // `madvise` calls were ~1.5% of the decoder's own time on the 2-core path, #43),
            // the decoder only where the helper could not start.
            let released = AtomicUsize::new(0);
            let release = |offset: usize| {
                // Keep the last 8 MiB: the decoder may still be inside it.
                let upto = offset.saturating_sub(8 << 20) & !0xfff;
                let from = released.fetch_max(upto, Ordering::Relaxed);
                if upto > from {
                    // SAFETY: a read-only, private file mapping: dropping its pages only means
                    // they are read from the file again if touched; nothing is written or lost.
                    let _ = unsafe {
                        map.unchecked_advise_range(
                            memmap2::UncheckedAdvice::DontNeed,
                            from,
                            upto - from,
                        )
                    };
                }
            };
            // The second core maps the file's pages a little ahead of the decoder, so the
            // decoder's thread does not stop at a page fault every 4 KiB. It stays at most
            // PREFETCH bytes ahead, which keeps the resident part of the file bounded.
            const PREFETCH: usize = 48 << 20;
            let reached = AtomicUsize::new(0);
            let done = AtomicBool::new(false);
            std::thread::scope(|scope| {
                // Only a help: where its thread cannot start, the decoder faults pages and
                // releases them itself.
                let helper = std::thread::Builder::new().spawn_scoped(scope, || {
                    let mut p = 0usize;
                    let mut sum = 0u8;
                    while !done.load(Ordering::Relaxed) {
                        let at = reached.load(Ordering::Relaxed);
                        release(at);
                        // Pages the decoder has passed (a long string or bytes object it
                        // skipped) are not worth faulting in.
                        p = p.max(at & !0xfff);
                        if p >= map.len() || p >= at + PREFETCH {
                            std::thread::sleep(std::time::Duration::from_micros(200));
                            continue;
                        }
                        sum ^= map[p];
                        p += 4096;
                    }
                    std::hint::black_box(sum);
                });
                let helped = helper.is_ok();
                let mut progress = |offset: usize| {
                    reached.store(offset, Ordering::Relaxed);
                    if let Some(p) = shown {
                        p.done.store(offset, Ordering::Relaxed);
                    }
                    if !helped {
                        release(offset);
                    }
                };
                let r = snapshot_with_progress(path, map, Some(&mut progress));
                done.store(true, Ordering::Relaxed);
                r
            })
        }
        Bytes::Owned(v) => match shown {
            Some(p) => {
                let mut progress = |offset: usize| p.done.store(offset, Ordering::Relaxed);
                snapshot_with_progress(path, v, Some(&mut progress))
            }
            None => snapshot_with_progress(path, v, None),
        },
    }
}

/// Parses bytes already in memory as a profiler Chrome trace.
pub fn trace_from_bytes(path: &Path, bytes: &[u8]) -> Result<Trace, LoadError> {
    if looks_like(bytes).is_some() {
        return Err(wrong_kind(path, bytes, "a profiler trace"));
    }
    match sniff(bytes) {
        Sniffed::Json => {}
        Sniffed::Pickle => {
            return Err(LoadError::WrongKind {
                path: path.to_owned(),
                what: "this is a pickle (a memory snapshot?), not a profiler trace".into(),
            })
        }
        _ => {
            let shown: Vec<String> = bytes.iter().take(8).map(|b| format!("{b:02x}")).collect();
            return Err(LoadError::WrongKind {
                path: path.to_owned(),
                what: format!(
                    "not JSON: it starts with bytes {} (a trace from prof.export_chrome_trace is JSON, optionally gzipped)",
                    shown.join(" ")
                ),
            });
        }
    }
    chrome::parse(bytes).map_err(|err| LoadError::Trace {
        path: path.to_owned(),
        err,
    })
}

/// Reads and parses a profiler Chrome trace (`.json`, `.json.gz`, `.pt.trace.json.gz`).
///
/// A gzip stream cut short (the run died while writing) is decompressed as far as it goes and
/// read like a trace cut short, with a note.
pub fn load_trace(path: &Path) -> Result<Trace, LoadError> {
    let input = input::read_lenient(path)?;
    if input.damage.is_some() && sniff(&input) != Sniffed::Json {
        return Err(damaged(path, input));
    }
    let r = trace_from_input(path, &input);
    input.settle(path, r)
}

/// Parses a trace from what the reader returned, noting where a damaged gzip stream stopped.
fn trace_from_input(path: &Path, input: &Input) -> Result<Trace, LoadError> {
    let mut t = trace_from_bytes(path, input)?;
    if let Some((offset, err)) = &input.damage {
        t.load_notes.insert(
            0,
            LoadNote::GzipDamaged {
                offset: *offset,
                error: err.to_string(),
            },
        );
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Perfetto trace as its protos define it (`Trace { repeated TracePacket packet = 1 }`;
    /// `TracePacket.timestamp = 8`, `trusted_packet_sequence_id = 10`, `track_event = 11` with
    /// `TrackEvent.type = 9`, `name = 23`): two packets.
    fn perfetto_trace() -> Vec<u8> {
        let packet = |ts: u64, name: &str| {
            let mut ev = vec![0x48, 0x01, 0xba, 0x01, name.len() as u8];
            ev.extend_from_slice(name.as_bytes());
            let mut p = vec![0x40];
            let mut v = ts;
            loop {
                let b = (v & 0x7f) as u8;
                v >>= 7;
                if v == 0 {
                    p.push(b);
                    break;
                }
                p.push(b | 0x80);
            }
            p.extend_from_slice(&[0x50, 0x01, 0x5a, ev.len() as u8]);
            p.extend(ev);
            let mut out = vec![0x0a, p.len() as u8];
            out.extend(p);
            out
        };
        let mut t = packet(1_000_000, "ProfilerStep#1");
        t.extend(packet(1_250_000, "aten::mm"));
        t
    }

    #[test]
    fn a_perfetto_protobuf_trace_is_named_and_refused() {
        let t = perfetto_trace();
        assert!(perfetto_protobuf(&t));
        let dir = std::env::temp_dir().join(format!("memscope-pftrace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("x.pftrace");
        std::fs::write(&p, &t).unwrap();
        let e = load(&p).err().unwrap().to_string();
        assert!(e.contains("Perfetto protobuf trace"), "{e}");
        assert!(e.contains("traceconv json"), "{e}");
        let e = load_snapshot(&p).err().unwrap().to_string();
        assert!(e.contains("Perfetto protobuf trace"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn text_that_starts_with_a_newline_is_no_perfetto_trace() {
        assert!(!perfetto_protobuf(b"\n{\"traceEvents\": []}"));
        assert!(!perfetto_protobuf(b"\n\n\n"));
        // A 0a byte followed by a length past the end, or a zero field number.
        assert!(!perfetto_protobuf(&[0x0a, 0x7f, 0x08, 0x01]));
        assert!(!perfetto_protobuf(&[0x0a, 0x02, 0x00, 0x01]));
        assert!(!perfetto_protobuf(&[]));
    }
}
