//! The one JSON envelope (`memscope/1`) around every `--format json` output, documented in
//! `docs/json.md`.
//!
//! Agents and scripts read any memscope JSON the same way: check `envelope`, see which
//! `command` made it from which `inputs`, read `data` (whose own `schema` names its shape:
//! `memscope.report/1`, `memscope.check/3`, ...) and `errors`. A command that fails still
//! writes an envelope, with `data: null` and its errors, so a caller never has to parse the
//! human message on stderr. The documents inside `data` are the commands' own, unchanged:
//! each command hands its document to [`write`], and nothing else writes an envelope.
//!
//! Error kinds are decided here, from the library's typed errors ([`classify`]), so that the
//! binary does not keep one table per command; an error the binary raises itself carries its
//! kind in a [`Refused`].

use std::io::{self, Write};
use std::path::Path;

use serde::Serialize;

use crate::analysis::analyzed::MomentError;
use crate::analysis::plan::PlanError;
use crate::analysis::whatif::{AllocConfError, WhatIfError};
use crate::check::config::{ConfigError, ConfigFileError};
use crate::check::diff::Incomparable;
use crate::check::summary::BaselineError;
use crate::check::CheckError;
use crate::inputs::InputError;
use crate::load::chrome::TraceError;
use crate::load::pickle::PickleError;
use crate::load::snapshot::SnapshotError;
use crate::load::LoadError;
use crate::query::{QueryError, Stop};

/// The envelope's own name and version: bumped only when the envelope's fields change
/// meaning or go away (see `docs/json.md`), never for a change inside `data`.
pub const ENVELOPE: &str = "memscope/1";

/// memscope's version (`Cargo.toml`), as the envelope reports it.
pub const MEMSCOPE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// What a command was run on and what it had to say besides its document: everything in the
/// envelope except `data` and `errors`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Header {
    /// The subcommand (`analyze`, `check`, `diff`, `plan`, `whatif`).
    pub command: String,
    pub inputs: Vec<Input>,
    /// Notes the command also printed on stderr (an option that does nothing here, say).
    pub warnings: Vec<String>,
}

/// One file the command was given, in the order of the command line.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Input {
    /// As given on the command line (`-` is stdin).
    pub path: String,
    /// Why it was given.
    pub role: Role,
    /// What it turned out to be; `unknown` when it was not read (the command failed first).
    pub kind: InputKind,
    /// Its size as stored (a gzipped file's compressed size); `null` for stdin, or a file
    /// that cannot be looked at.
    pub bytes: Option<u64>,
}

impl Input {
    /// `path` in `role`, not read yet; its size from the file system.
    pub fn new(path: &Path, role: Role) -> Input {
        let bytes = if path.as_os_str() == "-" {
            None
        } else {
            std::fs::metadata(path)
                .ok()
                .filter(|m| m.is_file())
                .map(|m| m.len())
        };
        Input {
            path: path.display().to_string(),
            role,
            kind: InputKind::Unknown,
            bytes,
        }
    }
}

/// Why a file was given to the command.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A capture (or a summary) to analyse or check.
    Input,
    /// `diff`'s first file.
    Before,
    /// `diff`'s second file.
    After,
    /// `plan --with`: a second capture at another shape.
    With,
    /// `check --baseline`.
    Baseline,
    /// `check --config`, or the `memscope.toml` found.
    Config,
}

/// What a file is, by content.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    /// A snapshot pickle (`torch.cuda.memory._dump_snapshot`).
    Snapshot,
    /// A profiler Chrome trace.
    Trace,
    /// A `memscope.baseline/1` summary.
    Baseline,
    /// A `memscope.toml`.
    Config,
    /// Not read, or not readable.
    Unknown,
}

/// Why a command failed, for a program: the kind decides what to do, the message is the one
/// printed on stderr.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The command line is refused: an option's value, a combination, a gate with no rule.
    Usage,
    /// A file cannot be opened or read, or the output cannot be written.
    Io,
    /// The input is refused before it is parsed: a directory, past the size limit, a pipe
    /// that never ends.
    RefusedInput,
    /// The file is something else than the command reads (a checkpoint, a PNG, a report).
    NotACapture,
    /// A capture that is truncated or malformed.
    Damaged,
    /// A capture past one of the parser's limits (nesting, memory).
    TooLarge,
    /// A `memscope.toml` that cannot be used.
    Config,
    /// A baseline file that cannot be used.
    Baseline,
    /// `diff` refuses to compare the two captures (`--force` compares them anyway).
    NotComparable,
    /// The capture holds nothing the command needs (no allocation history, no OOM to draw,
    /// nothing to measure for a limit that was set).
    CannotAnswer,
    /// `query`'s SQL is refused or fails (syntax, an unknown table or command, a write).
    Sql,
    /// A query ran past a limit (`--timeout`, `--max-rows`, `--max-memory`); the rows made
    /// before it are in `data`, and the result that stopped says which limit (`stopped`).
    Limit,
    /// A query was cancelled (Ctrl-C, MCP `notifications/cancelled`).
    Cancelled,
    /// Anything else (a bug: please report it).
    Internal,
}

impl ErrorKind {
    /// Every kind, in the order `docs/json.md` lists them.
    pub const ALL: [ErrorKind; 14] = [
        ErrorKind::Usage,
        ErrorKind::Io,
        ErrorKind::RefusedInput,
        ErrorKind::NotACapture,
        ErrorKind::Damaged,
        ErrorKind::TooLarge,
        ErrorKind::Config,
        ErrorKind::Baseline,
        ErrorKind::NotComparable,
        ErrorKind::CannotAnswer,
        ErrorKind::Sql,
        ErrorKind::Limit,
        ErrorKind::Cancelled,
        ErrorKind::Internal,
    ];

    /// The name in the envelope (`not_a_capture`).
    pub fn name(self) -> &'static str {
        // Exhaustive: a kind added here is added to `ALL` above and to docs/json.md.
        match self {
            ErrorKind::Usage => "usage",
            ErrorKind::Io => "io",
            ErrorKind::RefusedInput => "refused_input",
            ErrorKind::NotACapture => "not_a_capture",
            ErrorKind::Damaged => "damaged",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::Config => "config",
            ErrorKind::Baseline => "baseline",
            ErrorKind::NotComparable => "not_comparable",
            ErrorKind::CannotAnswer => "cannot_answer",
            ErrorKind::Sql => "sql",
            ErrorKind::Limit => "limit",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::Internal => "internal",
        }
    }
}

/// One error in the envelope.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ErrorEntry {
    pub kind: ErrorKind,
    /// The message printed on stderr (without `memscope: error: `).
    pub message: String,
    /// The file the error is about, where the error names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

#[derive(Serialize)]
struct Envelope<'a, T: Serialize> {
    envelope: &'static str,
    command: &'a str,
    memscope_version: &'static str,
    inputs: &'a [Input],
    data: Option<T>,
    errors: &'a [ErrorEntry],
    warnings: &'a [String],
}

/// Writes the envelope of a command that succeeded: `data` is its document.
pub fn write<T: Serialize>(out: &mut dyn Write, header: &Header, data: &T) -> io::Result<()> {
    write_envelope(out, header, Some(data), &[])
}

/// The JSON format of a command's answer: the document as the `data` of the envelope with
/// `header`. Each document's JSON module implements [`Render`](super::Render) for it (the
/// `data` it writes is the one its own JSON format writes alone).
#[derive(Clone, Copy, Debug)]
pub struct InEnvelope<'a> {
    pub header: &'a Header,
}

/// Writes the envelope of a command that failed: `data` is `null`.
pub fn write_errors(out: &mut dyn Write, header: &Header, errors: &[ErrorEntry]) -> io::Result<()> {
    write_envelope::<()>(out, header, None, errors)
}

fn write_envelope<T: Serialize>(
    out: &mut dyn Write,
    header: &Header,
    data: Option<&T>,
    errors: &[ErrorEntry],
) -> io::Result<()> {
    let e = Envelope {
        envelope: ENVELOPE,
        command: &header.command,
        memscope_version: MEMSCOPE_VERSION,
        inputs: &header.inputs,
        data,
        errors,
        warnings: &header.warnings,
    };
    serde_json::to_writer_pretty(&mut *out, &e).map_err(io::Error::from)?;
    writeln!(out)
}

/// An error the binary raises itself, with its kind (a refused `--at`, a gate with no rule).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Refused {
    pub kind: ErrorKind,
    pub message: String,
}

impl Refused {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Refused {
        Refused {
            kind,
            message: message.into(),
        }
    }
}

/// The entry of a failed command: `message` is the whole chain as printed on stderr; the kind
/// and path come from the first link of `chain` that is one of memscope's typed errors.
pub fn error_entry<'e>(
    message: String,
    chain: impl IntoIterator<Item = &'e (dyn std::error::Error + 'static)>,
) -> ErrorEntry {
    let (kind, path) = chain
        .into_iter()
        .find_map(classify)
        .unwrap_or((ErrorKind::Internal, None));
    ErrorEntry {
        kind,
        message,
        path: path.map(|p| p.display().to_string()),
    }
}

/// The kind of one of memscope's typed errors and the file it names, if any; `None` for an
/// error that is not memscope's (an `io::Error` from writing, a context message).
pub fn classify<'e>(
    e: &'e (dyn std::error::Error + 'static),
) -> Option<(ErrorKind, Option<&'e Path>)> {
    if let Some(r) = e.downcast_ref::<Refused>() {
        return Some((r.kind, None));
    }
    if let Some(l) = e.downcast_ref::<LoadError>() {
        return Some((load_kind(l), Some(load_path(l))));
    }
    if let Some(q) = e.downcast_ref::<QueryError>() {
        return Some(match q {
            QueryError::Load(l) => (load_kind(l), Some(load_path(l))),
            QueryError::Sql(_) => (ErrorKind::Sql, None),
            QueryError::Stopped(Stop::Cancelled) => (ErrorKind::Cancelled, None),
            QueryError::Stopped(_) => (ErrorKind::Limit, None),
            QueryError::Write(_) => (ErrorKind::Io, None),
            QueryError::Open(_) => (ErrorKind::Internal, None),
        });
    }
    if let Some(i) = e.downcast_ref::<InputError>() {
        return Some(match i {
            InputError::Load(l) => (load_kind(l), Some(load_path(l))),
            InputError::NotACapture { path } => (ErrorKind::NotACapture, Some(path)),
            InputError::NotUtf8 { path } | InputError::Baseline { path, .. } => {
                (ErrorKind::Baseline, Some(path))
            }
        });
    }
    if let Some(c) = e.downcast_ref::<ConfigFileError>() {
        return Some(match c {
            ConfigFileError::Read { err } => (load_kind(err), Some(load_path(err))),
            ConfigFileError::NotUtf8 { path } | ConfigFileError::Config { path, .. } => {
                (ErrorKind::Config, Some(path))
            }
        });
    }
    let kind = if e.is::<ConfigError>() {
        ErrorKind::Config
    } else if e.is::<BaselineError>() {
        ErrorKind::Baseline
    } else if e.is::<Incomparable>() {
        ErrorKind::NotComparable
    } else if e.is::<AllocConfError>() {
        ErrorKind::Usage
    } else if let Some(p) = e.downcast_ref::<PlanError>() {
        plan_kind(p)
    } else if e.is::<WhatIfError>() || e.is::<MomentError>() {
        ErrorKind::CannotAnswer
    } else if let Some(c) = e.downcast_ref::<CheckError>() {
        match c {
            CheckError::RankTwice { .. } => ErrorKind::Usage,
            _ => ErrorKind::CannotAnswer,
        }
    } else if e.is::<PickleError>() || e.is::<SnapshotError>() || e.is::<TraceError>() {
        ErrorKind::Damaged
    } else {
        return None;
    };
    Some((kind, None))
}

fn plan_kind(p: &PlanError) -> ErrorKind {
    match p {
        PlanError::WhatIf(_) | PlanError::DeviceCount { .. } => ErrorKind::CannotAnswer,
        PlanError::ZeroBatch
        | PlanError::ZeroAt(_)
        | PlanError::ZeroSeq
        | PlanError::SeqWithoutRecorded { .. }
        | PlanError::SameShape { .. }
        | PlanError::BothAxes
        | PlanError::BeyondAnyDevice(_) => ErrorKind::Usage,
    }
}

fn load_kind(l: &LoadError) -> ErrorKind {
    match l {
        LoadError::Io { .. } | LoadError::Changed { .. } => ErrorKind::Io,
        LoadError::Refused { .. } => ErrorKind::RefusedInput,
        LoadError::PerfettoProtobuf { .. }
        | LoadError::WrongKind { .. }
        | LoadError::Empty { .. } => ErrorKind::NotACapture,
        LoadError::Pickle { err, .. } | LoadError::Cut { err, .. } => match err {
            PickleError::Limit { .. } | PickleError::OutOfMemory { .. } => ErrorKind::TooLarge,
            // A snapshot never imports or calls: a file that does is something else.
            PickleError::NotPickle { .. } | PickleError::Forbidden { .. } => ErrorKind::NotACapture,
            _ => ErrorKind::Damaged,
        },
        LoadError::Snapshot { err, .. } => match err {
            SnapshotError::NotASnapshot { .. } => ErrorKind::NotACapture,
            SnapshotError::Shape { .. } => ErrorKind::Damaged,
        },
        LoadError::Trace { err, .. } => match err {
            TraceError::NotATrace { .. } => ErrorKind::NotACapture,
            _ => ErrorKind::Damaged,
        },
        LoadError::Gzip { .. } => ErrorKind::Damaged,
    }
}

fn load_path(l: &LoadError) -> &Path {
    match l {
        LoadError::Io { path, .. }
        | LoadError::PerfettoProtobuf { path }
        | LoadError::Gzip { path, .. }
        | LoadError::Pickle { path, .. }
        | LoadError::Cut { path, .. }
        | LoadError::Snapshot { path, .. }
        | LoadError::Trace { path, .. }
        | LoadError::WrongKind { path, .. }
        | LoadError::Empty { path }
        | LoadError::Refused { path, .. }
        | LoadError::Changed { path } => path,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header {
            command: "analyze".into(),
            inputs: vec![Input {
                path: "a\"\u{1b}[31m.pickle".into(),
                role: Role::Input,
                kind: InputKind::Snapshot,
                bytes: Some(12),
            }],
            warnings: vec![],
        }
    }

    /// The envelope's keys, in their documented order, around the document as it is; a path
    /// with quotes and escape bytes is JSON-escaped, never raw.
    #[test]
    fn an_envelope_holds_the_document_unchanged() {
        let doc = serde_json::json!({"schema": "memscope.x/1", "b": [1, 2], "a": {"z": null}});
        let mut v = Vec::new();
        write(&mut v, &header(), &doc).unwrap();
        let text = String::from_utf8(v).unwrap();
        assert!(!text.contains('\u{1b}'), "{text}");
        let e: serde_json::Value = serde_json::from_str(&text).unwrap();
        let keys: Vec<&str> = e.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        let mut want = vec![
            "envelope",
            "command",
            "memscope_version",
            "inputs",
            "data",
            "errors",
            "warnings",
        ];
        want.sort();
        assert_eq!(keys, want);
        assert_eq!(e["envelope"], ENVELOPE);
        assert_eq!(e["data"], doc);
        assert_eq!(e["inputs"][0]["path"], "a\"\u{1b}[31m.pickle");
        assert_eq!(e["inputs"][0]["kind"], "snapshot");
        assert_eq!(e["errors"], serde_json::json!([]));
    }

    #[test]
    fn a_failure_has_null_data_and_its_error() {
        let err = LoadError::Empty {
            path: "x.pickle".into(),
        };
        let entry = error_entry(
            err.to_string(),
            [&err as &(dyn std::error::Error + 'static)],
        );
        assert_eq!(entry.kind, ErrorKind::NotACapture);
        assert_eq!(entry.path.as_deref(), Some("x.pickle"));
        let mut v = Vec::new();
        write_errors(&mut v, &header(), &[entry]).unwrap();
        let e: serde_json::Value = serde_json::from_slice(&v).unwrap();
        assert!(e["data"].is_null());
        assert_eq!(e["errors"][0]["kind"], "not_a_capture");
        assert_eq!(e["errors"][0]["message"], "x.pickle: the file is empty");
    }

    #[test]
    fn every_kind_serializes_as_its_name() {
        for k in ErrorKind::ALL {
            assert_eq!(serde_json::to_value(k).unwrap(), k.name());
        }
    }

    #[test]
    fn an_unknown_error_is_internal() {
        let err = std::io::Error::other("boom");
        let entry = error_entry("boom".into(), [&err as &(dyn std::error::Error + 'static)]);
        assert_eq!(entry.kind, ErrorKind::Internal);
        assert_eq!(entry.path, None);
    }
}
