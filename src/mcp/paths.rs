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
        let shown = crate::mcp::safe::quoted(given);
        if given.is_empty() || given == "-" {
            return Err(format!(
                "{shown}: `-` is the server's own input (its transport); give a file path"
            ));
        }
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
