//! What a model reads: capture strings as quoted data, and errors that name a file without
//! showing what is in it.
//!
//! The tool text goes into a model's context, where a sentence from a capture (a function
//! named `step. IMPORTANT SYSTEM NOTE TO THE ASSISTANT: ...`) would read as memscope's own.
//! So in tool text every string that came from a capture is a JSON string literal
//! ([`quoted`]): in double quotes, with quotes, backslashes, control characters (escape codes
//! included), C1, DEL, bidi controls and Unicode line breaks written as escapes, and cut at
//! [`QUOTED_CHARS`] characters. The whole string is in `structuredContent`.
//!
//! A tool's path may name any file the roots hold, and the loaders' messages are written for
//! the user who ran memscope on their own file: they quote its first bytes ("it starts with
//! bytes 72 6f 6f 74"), a JSON file's top-level keys, a pickle dict's keys. [`load_error`] and
//! its siblings rephrase each loader error from its type alone: the file's name (as the client
//! gave it), what kind of failure, offsets and sizes, never a byte, key or string of the file.

use std::fmt::Write as _;

use crate::inputs::InputError;
use crate::load::pickle::PickleError;
use crate::load::LoadError;

/// Characters of a capture string shown in tool text; the rest is in `structuredContent`.
pub const QUOTED_CHARS: usize = 200;

/// `s` as a JSON string literal that is safe to show a model and a terminal (see the module
/// docs), cut at [`QUOTED_CHARS`] characters with the count of those left out.
pub fn quoted(s: &str) -> String {
    // The JSON boundary `query` writes through (`query::render::SafeJson`), on at most
    // QUOTED_CHARS characters.
    let (shown, left) = match s.char_indices().nth(QUOTED_CHARS) {
        Some((at, _)) => (&s[..at], s[at..].chars().count()),
        None => (s, 0),
    };
    let mut b = Vec::with_capacity(shown.len() + 2);
    crate::query::render::to_safe_writer(&mut b, shown).expect("a string to a Vec");
    let mut o = String::from_utf8(b).expect("JSON is UTF-8");
    if left > 0 {
        let _ = write!(o, " (and {left} more characters)");
    }
    o
}

/// A loader's failure on the file the client named `shown`, from its type alone.
pub fn load_error(shown: &str, e: &LoadError) -> String {
    let what = match e {
        LoadError::Io { err, .. } => format!("cannot read it ({})", err.kind()),
        LoadError::PerfettoProtobuf { .. } => {
            "a Perfetto protobuf trace, not a Chrome JSON trace or a snapshot pickle".into()
        }
        LoadError::Gzip { offset, .. } => {
            format!("the gzip stream is damaged after {offset} decompressed bytes")
        }
        LoadError::Pickle { err, .. } => pickle(err),
        LoadError::Cut { events, .. } => format!(
            "the pickle ends before its STOP opcode ({events} trace entries read): cut off while being written?"
        ),
        LoadError::Snapshot { .. } => "a pickle, but not a memory snapshot (expected a dict with segments and device_traces)".into(),
        LoadError::Trace { .. } => {
            "JSON, but not a readable profiler Chrome trace (traceEvents)".into()
        }
        LoadError::WrongKind { .. } => {
            "not a capture: neither a snapshot pickle nor a profiler trace".into()
        }
        LoadError::Empty { .. } => "the file is empty".into(),
        // memscope's own words: sizes and limits, nothing read from the file.
        LoadError::Refused { what, .. } => what.clone(),
        LoadError::Changed { .. } => "the file changed while it was read".into(),
    };
    format!("{}: {what}", quoted(shown))
}

fn pickle(e: &PickleError) -> String {
    match e {
        PickleError::Forbidden { name, offset, .. } => format!(
            "byte {offset}: opcode {name} would import or call code; memscope never executes it"
        ),
        PickleError::Truncated { .. } | PickleError::NoStop { .. } => {
            "the pickle is truncated".into()
        }
        PickleError::Limit { what, limit, .. } => format!("limit exceeded: {what} (limit {limit})"),
        PickleError::OutOfMemory { what, bytes, .. } => {
            format!("out of memory: {what} would need {bytes} bytes")
        }
        PickleError::NotPickle { .. } => "not a pickle".into(),
        PickleError::UnknownOpcode { offset, .. }
        | PickleError::Malformed { offset, .. }
        | PickleError::MissingMemo { offset, .. } => {
            format!("not a readable pickle (damaged at byte {offset})")
        }
    }
}

/// An input's failure (`check`, `diff`): the loader's, or memscope's own words on a document
/// (which never quote it: [`crate::check::summary::BaselineError`]).
pub fn input_error(shown: &str, e: &InputError) -> String {
    match e {
        InputError::Load(l) => load_error(shown, l),
        InputError::NotACapture { .. } => {
            format!("{}: a memscope JSON document, not a capture", quoted(shown))
        }
        InputError::NotUtf8 { .. } => format!("{}: not UTF-8", quoted(shown)),
        InputError::Baseline { err, .. } => format!("{}: {err}", quoted(shown)),
    }
}

/// `query`'s failure to open a capture.
pub fn query_error(shown: &str, e: &crate::query::QueryError) -> String {
    match e {
        crate::query::QueryError::Load(l) => load_error(shown, l),
        other => format!("{}: {other}", quoted(shown)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_strings_are_one_inert_literal() {
        assert_eq!(quoted("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(
            quoted("x\x1b]0;t\x07\u{202e}\u{2028}\u{85}"),
            r#""x\u001b]0;t\u0007\u202e\u2028\u0085""#
        );
        let long = "é".repeat(QUOTED_CHARS + 5);
        assert!(quoted(&long).ends_with("\" (and 5 more characters)"));
    }

    #[test]
    fn errors_never_show_the_files_bytes() {
        let e = crate::load::load(std::path::Path::new("/etc/passwd"))
            .err()
            .unwrap();
        assert!(e.to_string().contains("starts with bytes"), "{e}");
        let m = load_error("/etc/passwd", &e);
        assert_eq!(
            m,
            "\"/etc/passwd\": not a capture: neither a snapshot pickle nor a profiler trace"
        );
    }
}
