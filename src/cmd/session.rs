//! What a command was run on, and how its JSON answer, or its failure, is written: the one
//! place in the binary that fills the `memscope/1` envelope (`memscope::report::envelope`).
//!
//! [`Session::of`] reads the command line once: the subcommand, whether it answers in JSON,
//! and the files it names. Commands add what they learn (what each file turned out to be, a
//! config file found, a note) and write their document with [`Session::envelope`], the JSON
//! format of their answer. When a command fails, `main` calls [`Session::fail`], so every
//! command that answers in JSON also fails in JSON, without a line of error handling of its own.

use std::ffi::OsString;
use std::io::Write;
use std::path::Path;

use anyhow::Context;
use memscope::report::envelope::{self, ErrorEntry, ErrorKind, Header, Input, InputKind, Role};

use crate::cmd::cli::{
    CheckFormatArg, Cli, Command, DiffFormatArg, OutputFormat, PlanFormatArg, QueryFormatArg,
    WhatifFormatArg,
};

/// The subcommands with `--format json`.
const JSON_COMMANDS: [&str; 6] = ["analyze", "check", "diff", "plan", "query", "whatif"];

/// Inert by default (no command, no JSON): `baseline` loads through the same helpers.
#[derive(Default)]
pub struct Session {
    header: Header,
    json: bool,
    /// Set once the answer starts: a failure after it (a write error) gets no second envelope.
    answered: bool,
}

impl Session {
    /// The session of a parsed command line: its command, whether it answers in JSON, and the
    /// files it names (not read yet).
    pub fn of(cli: &Cli) -> Session {
        let mut s = Session {
            header: Header::default(),
            json: false,
            answered: false,
        };
        let (command, json) = match &cli.command {
            Some(Command::Analyze(a)) => {
                for f in &a.files {
                    s.given(f, Role::Input);
                }
                ("analyze", a.format == OutputFormat::Json)
            }
            Some(Command::Query(a)) => {
                s.given(&a.file, Role::Input);
                ("query", a.format == QueryFormatArg::Json)
            }
            Some(Command::Whatif(a)) => {
                s.given(&a.file, Role::Input);
                ("whatif", a.format == WhatifFormatArg::Json)
            }
            Some(Command::Plan(a)) => {
                s.given(&a.file, Role::Input);
                if let Some(w) = &a.with {
                    s.given(w, Role::With);
                }
                ("plan", a.format == PlanFormatArg::Json)
            }
            Some(Command::Diff(a)) => {
                s.given(&a.before, Role::Before);
                s.given(&a.after, Role::After);
                ("diff", a.format == DiffFormatArg::Json)
            }
            Some(Command::Check(a)) => {
                for f in a.files.iter().chain(a.rank.iter().map(|(_, f)| f)) {
                    s.given(f, Role::Input);
                }
                if let Some(b) = &a.baseline {
                    s.given(b, Role::Baseline);
                }
                if let Some(c) = a.config.as_ref().filter(|_| !a.no_config) {
                    s.given(c, Role::Config);
                }
                ("check", a.format == CheckFormatArg::Json)
            }
            _ => ("", false),
        };
        s.header.command = command.to_owned();
        s.json = json;
        s
    }

    /// Adds `path` in `role`, unless it is there already.
    pub fn given(&mut self, path: &Path, role: Role) {
        let shown = path.display().to_string();
        if !self
            .header
            .inputs
            .iter()
            .any(|i| i.path == shown && i.role == role)
        {
            self.header.inputs.push(Input::new(path, role));
        }
    }

    /// What the file(s) given as `path` turned out to be.
    pub fn found(&mut self, path: &Path, kind: InputKind) {
        let shown = path.display().to_string();
        for i in self.header.inputs.iter_mut().filter(|i| i.path == shown) {
            i.kind = kind;
        }
    }

    /// The size of the file given as `path` as it was read (stdin's bytes too).
    pub fn sized(&mut self, path: &Path, bytes: u64) {
        let shown = path.display().to_string();
        for i in self.header.inputs.iter_mut().filter(|i| i.path == shown) {
            i.bytes = Some(bytes);
        }
    }

    /// A note on stderr (`memscope: note: ...`), and in the envelope's `warnings`.
    pub fn note(&mut self, msg: String) {
        crate::cmd::output::eprint_term(&format!("memscope: note: {msg}"));
        self.header.warnings.push(msg);
    }

    /// The JSON format of this command's answer (the envelope around its document). From here
    /// on a failure gets no second envelope: the answer has begun.
    pub fn envelope(&mut self) -> envelope::InEnvelope<'_> {
        self.answered = true;
        envelope::InEnvelope {
            header: &self.header,
        }
    }

    /// Writes the envelope around a document written as it is made (`query`'s rows): `body`
    /// writes `data`'s value, closed even when it fails; its error then goes into `errors`
    /// (and is returned, for stderr and the exit code). Strings are written through
    /// `memscope::query::render::SafeJson`.
    pub fn answer_streamed<E>(
        &mut self,
        body: impl FnOnce(&mut dyn Write) -> Result<(), E>,
    ) -> anyhow::Result<()>
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        use memscope::query::render::to_safe_writer;
        self.answered = true;
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        let h = &self.header;
        let head = (|| -> std::io::Result<()> {
            out.write_all(b"{\"envelope\":")?;
            to_safe_writer(&mut out, envelope::ENVELOPE)?;
            out.write_all(b",\"command\":")?;
            to_safe_writer(&mut out, &h.command)?;
            out.write_all(b",\"memscope_version\":")?;
            to_safe_writer(&mut out, envelope::MEMSCOPE_VERSION)?;
            out.write_all(b",\"inputs\":")?;
            to_safe_writer(&mut out, &h.inputs)?;
            out.write_all(b",\"data\":")
        })();
        head.context("writing the report")?;
        let r = body(&mut out);
        let errors: Vec<ErrorEntry> = match &r {
            Ok(()) => Vec::new(),
            Err(e) => {
                let chain: [&(dyn std::error::Error + 'static); 1] = [e];
                vec![envelope::error_entry(e.to_string(), chain)]
            }
        };
        let tail = (|| -> std::io::Result<()> {
            out.write_all(b",\"errors\":")?;
            to_safe_writer(&mut out, &errors)?;
            out.write_all(b",\"warnings\":")?;
            to_safe_writer(&mut out, &h.warnings)?;
            out.write_all(b"}\n")?;
            out.flush()
        })();
        r?;
        tail.context("writing the report")
    }

    /// After `e` ended the command (its message is on stderr already): in JSON, the envelope
    /// with `data: null` and the error, unless the answer had begun.
    pub fn fail(&self, e: &anyhow::Error) {
        if !self.json || self.answered {
            return;
        }
        let entry = envelope::error_entry(format!("{e:#}"), e.chain());
        write_failure(&self.header, entry);
    }
}

/// A command line clap refuses (`memscope plan --format json --cap 2XB f`): in JSON (when the
/// words say `--format json` to a command that has it), the envelope with a `usage` error and
/// no inputs (the line was not understood, so neither were its files).
pub fn refused_line(args: &[OsString], e: &clap::Error) {
    let words: Vec<&str> = args.iter().skip(1).filter_map(|a| a.to_str()).collect();
    let mut rest = words.iter();
    let command = loop {
        match rest.next() {
            Some(&"--color") => {
                rest.next();
            }
            Some(w) if w.starts_with('-') => {}
            Some(w) => break *w,
            None => return,
        }
    };
    let json = words
        .windows(2)
        .any(|w| w[0] == "--format" && w[1] == "json")
        || words.contains(&"--format=json");
    if !json || !JSON_COMMANDS.contains(&command) {
        return;
    }
    let text = e.to_string();
    let first = text.lines().next().unwrap_or_default();
    let message = first.strip_prefix("error: ").unwrap_or(first).to_owned();
    let header = Header {
        command: command.to_owned(),
        ..Header::default()
    };
    write_failure(
        &header,
        ErrorEntry {
            kind: ErrorKind::Usage,
            message,
            path: None,
        },
    );
}

fn write_failure(header: &Header, entry: ErrorEntry) {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    // Nothing more to say if stdout is gone: the error is on stderr and the exit code says it.
    let _ = envelope::write_errors(&mut out, header, &[entry]).and_then(|()| out.flush());
}
