//! JSON of `memscope check` (`memscope.check/3`) and `memscope diff` (`memscope.diff/1`):
//! the documents' own `Serialize`, pretty-printed. The binary writes the same documents as the
//! `data` of the `memscope/1` envelope (`crate::report::envelope`).

use std::io::{self, Write};

use crate::check::diff::Diff;
use crate::check::CheckReport;
use crate::report::envelope::InEnvelope;
use crate::report::{Options, Render};

/// `memscope.check/3`, pretty-printed.
pub struct CheckJson;

impl Render<CheckReport> for CheckJson {
    fn render(&self, report: &CheckReport, _opts: &Options, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, report).map_err(io::Error::from)?;
        writeln!(out)
    }
}

/// `memscope.diff/1`, pretty-printed.
pub struct DiffJson;

impl Render<Diff> for DiffJson {
    fn render(&self, diff: &Diff, _opts: &Options, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, diff).map_err(io::Error::from)?;
        writeln!(out)
    }
}

/// `memscope check --format json`: the report as the `data` of the envelope.
impl Render<CheckReport> for InEnvelope<'_> {
    fn render(&self, report: &CheckReport, _opts: &Options, out: &mut dyn Write) -> io::Result<()> {
        crate::report::envelope::write(out, self.header, report)
    }
}

/// `memscope diff --format json`: the diff as the `data` of the envelope.
impl Render<Diff> for InEnvelope<'_> {
    fn render(&self, diff: &Diff, _opts: &Options, out: &mut dyn Write) -> io::Result<()> {
        crate::report::envelope::write(out, self.header, diff)
    }
}
