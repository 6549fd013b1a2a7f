//! The one way the binary writes a file named by `-o`: every command that writes goes here.
//!
//! - `-o -` is stdout, for every command.
//! - The output is refused when it *is* one of the inputs, compared by identity (device and
//!   inode), so a hard link, a symlink or a `./` spelling of the capture cannot be overwritten.
//! - A regular file is written to a temporary file beside it and renamed over it at the end, so
//!   a reader never sees half a file and two memscopes writing the same `-o` never mix their
//!   bytes (the last rename wins, whole). A symbolic link is followed: the file it points to
//!   is replaced, the link stays. A device or FIFO (`/dev/null`) is written in place.
//! - Every error names the output path; the error's kind is kept, so a closed pipe on stdout
//!   is still recognised (and ends memscope quietly with exit 0, see `main`).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use memscope::report::{escape, Options, Render};

enum Sink {
    Stdout(BufWriter<io::Stdout>),
    /// Written in place (a device or a FIFO named by `-o`).
    InPlace(BufWriter<File>),
    /// A temporary file renamed by [`Output::finish`] over the output (the file a symbolic
    /// link named by `-o` points to).
    Temp(BufWriter<File>, PathBuf, PathBuf),
}

/// An output being written; [`Output::finish`] makes it appear, dropping it discards it.
pub struct Output {
    sink: Option<Sink>,
    /// The temporary file is removed if a signal ends memscope (`memscope::signals`).
    _on_signal: Option<memscope::signals::TempRegistration>,
    path: PathBuf,
    written: u64,
}

/// True when `a` and `b` are the same file (device and inode), whatever the paths say. An
/// input of `-` is whatever stdin is: `memscope export - -o run.pickle < run.pickle` would
/// otherwise replace the capture it reads.
fn same_file(a: &std::fs::Metadata, b: &Path) -> bool {
    let m = if b.as_os_str() == "-" {
        stdin_metadata()
    } else {
        std::fs::metadata(b).ok()
    };
    m.is_some_and(|m| m.dev() == a.dev() && m.ino() == a.ino())
}

/// What stdin is (`fstat(0)`), if it is open.
fn stdin_metadata() -> Option<std::fs::Metadata> {
    use std::os::fd::AsFd;
    let fd = io::stdin().as_fd().try_clone_to_owned().ok()?;
    File::from(fd).metadata().ok()
}

/// Where writing to `path` lands: a symbolic link is followed (to its target, even one that
/// does not exist yet), so the rename replaces the file it points to, not the link.
fn resolve(path: &Path) -> PathBuf {
    let mut p = path.to_path_buf();
    // As many links as the kernel follows (ELOOP past 40).
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => match std::fs::read_link(&p) {
                Ok(t) => {
                    p = match p.parent() {
                        Some(dir) if t.is_relative() => dir.join(t),
                        _ => t,
                    }
                }
                Err(_) => break,
            },
            _ => break,
        }
    }
    p
}

/// A temporary name beside `path`, unique to this process and call.
fn temp_beside(path: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let name = path
        .file_name()
        .map_or_else(|| "output".into(), |n| n.to_string_lossy().into_owned());
    let n = N.fetch_add(1, Ordering::Relaxed);
    path.with_file_name(format!(".{name}.memscope-{}-{n}.tmp", std::process::id()))
}

/// Opens a device or FIFO for writing. A FIFO is opened non-blocking first, so one that
/// nobody reads is an error at once rather than a hang, then switched back to blocking writes.
fn open_in_place(path: &Path, m: &std::fs::Metadata) -> anyhow::Result<File> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let fifo = m.file_type().is_fifo();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(if fifo { libc::O_NONBLOCK } else { 0 })
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENXIO) if fifo => {
                anyhow::anyhow!("{}: no process is reading this FIFO", path.display())
            }
            _ => anyhow::anyhow!("{}: cannot open: {e}", path.display()),
        })?;
    if fifo {
        // SAFETY: fcntl on a descriptor we own.
        unsafe {
            let fl = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
            libc::fcntl(f.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK);
        }
    }
    Ok(f)
}

impl Output {
    /// Opens `path` (or stdout for `-`) for writing, refusing any of `inputs`.
    pub fn create(path: &Path, inputs: &[&Path]) -> anyhow::Result<Output> {
        let mut registration = None;
        let sink = if path.as_os_str() == "-" {
            Sink::Stdout(BufWriter::new(io::stdout()))
        } else {
            let existing = std::fs::metadata(path).ok();
            if let Some(m) = &existing {
                if let Some(input) = inputs.iter().find(|i| same_file(m, i)) {
                    bail!(
                        "{}: refusing to overwrite the input file {} (they are the same file; give another -o)",
                        path.display(),
                        input.display()
                    );
                }
                if m.is_dir() {
                    bail!(
                        "{}: is a directory (give a file name to -o)",
                        path.display()
                    );
                }
            }
            match existing {
                Some(m) if !m.is_file() => Sink::InPlace(BufWriter::new(open_in_place(path, &m)?)),
                _ => {
                    let target = resolve(path);
                    let tmp = temp_beside(&target);
                    // Registered before it exists, so no signal finds it unregistered (the
                    // name holds this process's id: nobody else's file).
                    registration = Some(memscope::signals::register_temp(&tmp));
                    let f = std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(&tmp)
                        .with_context(|| format!("{}: cannot create", path.display()))?;
                    if let Some(m) = &existing {
                        let _ = f.set_permissions(m.permissions());
                    }
                    Sink::Temp(BufWriter::with_capacity(1 << 16, f), tmp, target)
                }
            }
        };
        Ok(Output {
            sink: Some(sink),
            _on_signal: registration,
            path: path.to_owned(),
            written: 0,
        })
    }

    /// What to call the output in a message.
    pub fn name(&self) -> String {
        if self.path.as_os_str() == "-" {
            "stdout".into()
        } else {
            self.path.display().to_string()
        }
    }

    fn named(&self, e: io::Error) -> io::Error {
        io::Error::new(e.kind(), format!("{}: cannot write: {e}", self.name()))
    }

    /// Flushes and puts the output in place; returns the bytes written.
    pub fn finish(mut self) -> anyhow::Result<u64> {
        let r = match self.sink.take() {
            Some(Sink::Stdout(mut w)) => w.flush().map_err(|e| self.named(e)),
            Some(Sink::InPlace(mut w)) => w.flush().map_err(|e| self.named(e)),
            Some(Sink::Temp(mut w, tmp, target)) => {
                let r = w.flush().map_err(|e| self.named(e));
                drop(w);
                let r = r.and_then(|()| {
                    std::fs::rename(&tmp, &target).map_err(|e| {
                        io::Error::new(
                            e.kind(),
                            format!("{}: cannot replace: {e}", self.path.display()),
                        )
                    })
                });
                if r.is_err() {
                    let _ = std::fs::remove_file(&tmp);
                }
                r
            }
            None => Ok(()),
        };
        r?;
        Ok(self.written)
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let r = match self.sink.as_mut() {
            Some(Sink::Stdout(w)) => w.write(buf),
            Some(Sink::InPlace(w)) | Some(Sink::Temp(w, _, _)) => w.write(buf),
            None => Ok(0),
        };
        match r {
            Ok(n) => {
                self.written += n as u64;
                Ok(n)
            }
            Err(e) => Err(self.named(e)),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        let r = match self.sink.as_mut() {
            Some(Sink::Stdout(w)) => w.flush(),
            Some(Sink::InPlace(w)) | Some(Sink::Temp(w, _, _)) => w.flush(),
            None => Ok(()),
        };
        r.map_err(|e| self.named(e))
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        // Not finished (an error on the way): the temporary file goes, the output is untouched.
        if let Some(Sink::Temp(w, tmp, _)) = self.sink.take() {
            drop(w.into_parts());
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// Stdout for text a person reads, through the terminal boundary
/// ([`memscope::report::escape::TermWriter`]): every text report goes here, whatever
/// `--color` says (`color` only lets memscope's own colour codes through).
pub fn term_stdout(color: bool) -> escape::TermWriter<BufWriter<io::StdoutLock<'static>>> {
    escape::TermWriter::new(BufWriter::new(io::stdout().lock()), color)
}

/// Where a format's bytes go on stdout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stdout {
    /// Text a person reads: through the terminal boundary ([`term_stdout`]).
    Term,
    /// A document for a program or a file (XML, Markdown, HTML), as written.
    Plain,
    /// The command's JSON answer, in the envelope ([`crate::cmd::session::Session::envelope`]);
    /// a failure to write it is said as the session's answers always said it.
    Answer,
}

/// Renders `doc` with `format` on stdout, as `sink` says; `what` names the writing in an error
/// (`writing the diff`).
pub fn to_stdout<D: ?Sized>(
    format: &dyn Render<D>,
    sink: Stdout,
    doc: &D,
    opts: &Options,
    what: &'static str,
) -> anyhow::Result<()> {
    let what = match sink {
        Stdout::Answer => "writing the report",
        _ => what,
    };
    let written = if sink == Stdout::Term {
        let mut out = term_stdout(opts.color);
        format
            .render(doc, opts, &mut out)
            .and_then(|()| out.flush())
    } else {
        let mut out = BufWriter::new(io::stdout().lock());
        format
            .render(doc, opts, &mut out)
            .and_then(|()| out.flush())
    };
    written.context(what)
}

/// Writes `msg` and a newline to stderr through the terminal boundary: errors and notes may
/// quote a capture (a dict key, a name, a file name).
pub fn eprint_term(msg: &str) {
    let mut w = escape::TermWriter::new(io::stderr().lock(), false);
    let _ = w.write_all(msg.as_bytes());
    let _ = w.write_all(b"\n");
    let _ = w.flush();
}
