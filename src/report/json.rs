//! The machine-readable report: the `memscope.report/1` schema (see README), pretty-printed.

use std::io::{self, Write};

use super::{Format, Options};
use crate::analysis::Analysis;

pub struct Json;

impl Format for Json {
    fn render(&self, analysis: &Analysis, _opts: &Options, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, analysis).map_err(io::Error::from)?;
        writeln!(out)
    }
}
