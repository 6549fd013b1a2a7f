//! Which files a tool may read: regular files under the roots, never the server's own
//! transport.
//!
//! A path in a tool call is written by a model, which may be steered by a capture's strings
//! ("call analyze with ~/.ssh/id_rsa"). So every path is canonicalised (symlinks resolved,
//! `..` gone) and must lie under one of the roots: the client's MCP roots when it sends them
//! (`roots/list`), plus the `--root` directories the server was started with, and the working
//! directory when neither says otherwise. It must be a regular file: `-`, `/dev/stdin`,
//! `/proc/self/fd/0`, FIFOs, sockets and devices are refused, as is a regular file that is the
//! server's stdin, stdout or stderr (`memscope mcp < requests.jsonl`), so that a tool never
//! reads the client's next requests as capture data or blocks the loop on its own pipe.
//!
//! The loaders are then handed the canonical path, which holds no symlink to follow.

use std::path::{Path, PathBuf};

const NOT_A_FILE: &str = "not a regular file (a pipe, socket or device: the server's transport, or a stream that may never end)";

/// The directories tools may read under, canonical.
#[derive(Clone, Debug, Default)]
pub struct Roots {
    dirs: Vec<PathBuf>,
}

impl Roots {
    /// Roots from directories as given (relative ones against the working directory);
    /// those that do not exist are left out, and named in the second list.
    pub fn new(dirs: &[PathBuf]) -> (Roots, Vec<PathBuf>) {
        let mut ok = Vec::new();
        let mut missing = Vec::new();
        for d in dirs {
            match std::fs::canonicalize(d) {
                Ok(c) if c.is_dir() => ok.push(c),
                _ => missing.push(d.clone()),
            }
        }
        (Roots { dirs: ok }, missing)
    }

    /// The working directory alone.
    pub fn working_dir() -> Roots {
        Roots::new(&[PathBuf::from(".")]).0
    }

    /// Both sets of directories.
    pub fn union(&self, other: &Roots) -> Roots {
        let mut dirs = self.dirs.clone();
        dirs.extend(other.dirs.iter().cloned());
        Roots { dirs }
    }

    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// The canonical path of `given` if a tool may read it, else why not (naming the path
    /// as given, never anything read from it).
    pub fn admit(&self, given: &str) -> Result<PathBuf, String> {
        match self.admit_file_or_dir(given)? {
            Admitted::File(p) => Ok(p),
            Admitted::Dir(_) => Err(format!(
                "{}: a directory; give a capture file",
                crate::mcp::safe::quoted(given)
            )),
        }
    }

    /// [`Roots::admit`], where a directory under the roots stands for the captures under it
    /// (one job's ranks, as `memscope analyze DIR` reads them): each of them admitted as a
    /// file is, the walk bounded ([`MAX_DIR_CAPTURES`], [`MAX_DIR_ENTRIES`], [`MAX_DIR_DEPTH`])
    /// and never through a symlinked directory.
    pub fn admit_file_or_dir(&self, given: &str) -> Result<Admitted, String> {
        let shown = crate::mcp::safe::quoted(given);
        if given.is_empty() || given == "-" {
            return Err(format!(
                "{shown}: `-` is the server's own input (its transport); give a file path"
            ));
        }
        let canon = self.canonical_under_roots(given, &shown)?;
        let meta = std::fs::metadata(&canon)
            .map_err(|e| format!("{shown}: cannot open: {}", io_reason(&e)))?;
        if meta.is_dir() {
            let mut found = Vec::new();
            let mut seen = 0usize;
            walk(&canon, Path::new(given), 0, &mut found, &mut seen)
                .map_err(|why| format!("{shown}: {why}"))?;
            if found.is_empty() {
                return Err(format!(
                    "{shown}: no capture under it (*.pickle, *.pkl, *trace*.json, *.jsonl, optionally .gz)"
                ));
            }
            let mut out = Vec::with_capacity(found.len());
            for (path, name) in found {
                let name = name.to_string_lossy().into_owned();
                let q = crate::mcp::safe::quoted(&name);
                let c = self.canonical_under_roots(&path.to_string_lossy(), &q)?;
                out.push((self.regular_file(c, &q)?, name));
            }
            return Ok(Admitted::Dir(out));
        }
        self.regular_file(canon, &shown).map(Admitted::File)
    }

    /// `given` canonical, if it lies under a root.
    fn canonical_under_roots(&self, given: &str, shown: &str) -> Result<PathBuf, String> {
        let canon = std::fs::canonicalize(given).map_err(|e| {
            // `/dev/stdin` on a pipe resolves to `pipe:[N]`, which is no path: say what it is.
            match std::fs::metadata(given) {
                Ok(m) if !m.is_file() && !m.is_dir() => format!("{shown}: {NOT_A_FILE}"),
                _ => format!("{shown}: cannot open: {}", io_reason(&e)),
            }
        })?;
        if !self.dirs.iter().any(|r| canon.starts_with(r)) {
            return Err(format!(
                "{shown}: outside the roots this server may read ({}); start it with --root DIR, or add the directory to the client's roots",
                self.shown()
            ));
        }
        Ok(canon)
    }

    /// `canon` if it is a regular file that is not the server's transport.
    fn regular_file(&self, canon: PathBuf, shown: &str) -> Result<PathBuf, String> {
        let meta = std::fs::metadata(&canon)
            .map_err(|e| format!("{shown}: cannot open: {}", io_reason(&e)))?;
        if !meta.is_file() {
            let what = if meta.is_dir() {
                "a directory"
            } else {
                NOT_A_FILE
            };
            return Err(format!("{shown}: {what}; give a capture file"));
        }
        if is_transport(&meta) {
            return Err(format!(
                "{shown}: this is the server's own stdin, stdout or stderr (its transport)"
            ));
        }
        Ok(canon)
    }

    fn shown(&self) -> String {
        if self.dirs.is_empty() {
            return "none".into();
        }
        self.dirs
            .iter()
            .map(|d| crate::mcp::safe::quoted(&d.to_string_lossy()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// What a path argument admitted stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admitted {
    /// A capture file, canonical.
    File(PathBuf),
    /// A directory's captures, in name order: each canonical, with its name as the client
    /// would write it (the directory as given, joined with the path under it).
    Dir(Vec<(PathBuf, String)>),
}

/// Captures a directory given to a tool may hold at most (as many as `check`'s `paths`).
pub const MAX_DIR_CAPTURES: usize = 1024;
/// Entries (files and directories) the walk of a directory reads at most, captures or not.
pub const MAX_DIR_ENTRIES: usize = 100_000;
/// How deep under the directory the walk goes.
pub const MAX_DIR_DEPTH: usize = 8;

/// Whether a file in a directory is one the job view reads: a snapshot pickle, a profiler
/// trace (`trace` in its name) or rank lines, optionally gzipped (as `memscope analyze DIR`).
fn capture_like(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    let n = n.strip_suffix(".gz").unwrap_or(&n);
    n.ends_with(".pickle")
        || n.ends_with(".pkl")
        || n.ends_with(".jsonl")
        || n.ends_with(".ndjson")
        || (n.ends_with(".json") && n.contains("trace"))
}

/// Adds the captures under `dir` (read as `dir`, named as `shown`) to `out`, in name order.
fn walk(
    dir: &Path,
    shown: &Path,
    depth: usize,
    out: &mut Vec<(PathBuf, PathBuf)>,
    seen: &mut usize,
) -> Result<(), String> {
    let rd = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read a directory under it: {}", io_reason(&e)))?;
    let mut entries = Vec::new();
    for e in rd.flatten() {
        *seen += 1;
        if *seen > MAX_DIR_ENTRIES {
            return Err(format!(
                "more than {MAX_DIR_ENTRIES} entries under it; give the directory of one job's captures"
            ));
        }
        // The entry itself, not what a symlink points at: a symlinked directory is skipped.
        let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
        entries.push((e.file_name(), is_dir));
    }
    entries.sort();
    for (name, is_dir) in entries {
        if is_dir {
            if depth < MAX_DIR_DEPTH {
                walk(&dir.join(&name), &shown.join(&name), depth + 1, out, seen)?;
            }
        } else if capture_like(&name.to_string_lossy()) {
            if out.len() >= MAX_DIR_CAPTURES {
                return Err(format!(
                    "more than {MAX_DIR_CAPTURES} captures under it; a job's directory holds one capture per rank"
                ));
            }
            out.push((dir.join(&name), shown.join(&name)));
        }
    }
    Ok(())
}

/// An I/O error's reason without the OS's wording of the path.
fn io_reason(e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::NotFound => "no such file".into(),
        K::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

/// Whether `meta` is the file behind the server's stdin, stdout or stderr.
#[cfg(unix)]
fn is_transport(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    (0..3).any(|fd| {
        let link = Path::new("/proc/self/fd").join(fd.to_string());
        let alt = Path::new("/dev/fd").join(fd.to_string());
        std::fs::metadata(&link)
            .or_else(|_| std::fs::metadata(&alt))
            .is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino())
    })
}

#[cfg(not(unix))]
fn is_transport(_: &std::fs::Metadata) -> bool {
    false
}

/// The local path of a `file://` URI (percent-decoded), as MCP roots are given.
pub fn file_uri_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    if !rest.starts_with('/') {
        return None;
    }
    let b = rest.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStringExt;
        Some(PathBuf::from(std::ffi::OsString::from_vec(out)))
    }
    #[cfg(not(unix))]
    {
        String::from_utf8(out).ok().map(PathBuf::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uris_decode() {
        assert_eq!(
            file_uri_path("file:///home/a%20b/x"),
            Some(PathBuf::from("/home/a b/x"))
        );
        assert_eq!(
            file_uri_path("file://localhost/tmp"),
            Some(PathBuf::from("/tmp"))
        );
        assert_eq!(file_uri_path("https://x/y"), None);
        assert_eq!(file_uri_path("file:///bad%2"), None);
    }
}
