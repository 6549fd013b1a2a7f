//! From bytes on disk to raw records: sniffing, decompression, and the format readers.
//!
//! Users hand memscope whatever file they have (a `.pickle`, a `.pickle.gz`, a profiler
//! `.json.gz`, sometimes the wrong file), so the kind is decided by content, not by name, and a
//! wrong guess is reported as "this looks like X" rather than as a parse error deep inside.
//! Inputs are memory-mapped read-only: memscope never writes to them.

pub mod pickle;
pub mod snapshot;

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::model::Snapshot;

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
        // Protocol 0/1 pickles start with an opcode like '(' , '}' or ']'.
        [b'(' | b'}' | b']', ..] => Sniffed::Pickle,
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
    #[error("{path}: cannot read: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: gzip stream is damaged after {offset} decompressed bytes: {source}")]
    Gzip {
        path: PathBuf,
        offset: u64,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Pickle {
        path: PathBuf,
        #[source]
        source: pickle::PickleError,
    },
    #[error("{path}: {source}")]
    Snapshot {
        path: PathBuf,
        #[source]
        source: snapshot::SnapshotError,
    },
    #[error("{path}: {what}")]
    WrongKind { path: PathBuf, what: String },
    #[error("{path}: the file is empty")]
    Empty { path: PathBuf },
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

/// Reads a file, transparently gunzipping it. Never writes to it.
pub fn read_input(path: &Path) -> Result<Bytes, LoadError> {
    let io = |source| LoadError::Io {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    if len == 0 {
        // A pipe or /dev/stdin reports 0: read it instead of mapping it.
        let mut v = Vec::new();
        (&file).read_to_end(&mut v).map_err(io)?;
        if v.is_empty() {
            return Err(LoadError::Empty {
                path: path.to_owned(),
            });
        }
        return gunzip_if_needed(path, Bytes::Owned(v));
    }
    // SAFETY: the map is read-only and private; memscope does not modify the file. A file
    // truncated by another process while mapped can fault, as with any mmap reader.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
    gunzip_if_needed(path, Bytes::Mapped(map))
}

fn gunzip_if_needed(path: &Path, bytes: Bytes) -> Result<Bytes, LoadError> {
    if sniff(&bytes) != Sniffed::Gzip {
        return Ok(bytes);
    }
    let mut out = Vec::with_capacity(bytes.len().saturating_mul(4));
    let mut dec = flate2::read::MultiGzDecoder::new(&bytes[..]);
    match dec.read_to_end(&mut out) {
        Ok(_) => Ok(Bytes::Owned(out)),
        Err(source) => Err(LoadError::Gzip {
            path: path.to_owned(),
            offset: out.len() as u64,
            source,
        }),
    }
}

/// Parses bytes already in memory as a snapshot pickle.
pub fn snapshot_from_bytes(path: &Path, bytes: &[u8]) -> Result<Snapshot, LoadError> {
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
    let p = pickle::parse(bytes).map_err(|source| LoadError::Pickle {
        path: path.to_owned(),
        source,
    })?;
    snapshot::from_pickle(&p).map_err(|source| LoadError::Snapshot {
        path: path.to_owned(),
        source,
    })
}

/// Reads and parses a snapshot file (`.pickle`, optionally gzipped).
pub fn load_snapshot(path: &Path) -> Result<Snapshot, LoadError> {
    let bytes = read_input(path)?;
    snapshot_from_bytes(path, &bytes)
}
