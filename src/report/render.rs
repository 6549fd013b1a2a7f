//! The one seam between a document and its bytes: [`Render<D>`]. Every output of memscope is a
//! type that implements it for the document it shows: the report over an
//! [`Analysis`](crate::analysis::Analysis), the gate over a
//! [`CheckReport`](crate::check::CheckReport) and a [`Diff`](crate::check::diff::Diff), the
//! plan over a [`PlanDoc`](super::plan::PlanDoc), the job view over a [`Job`](crate::job::Job),
//! what-if over a [`Whatif`](super::whatif::Whatif), and the pictures over what they draw (a
//! flamegraph's [`Folded`](super::flamegraph::Folded) stacks, a Perfetto
//! [`Trace`](super::perfetto::Trace)). What one format alone needs (the snapshot the HTML page
//! draws from, a picture's title, where annotations point) lives in the format's own value;
//! what every caller decides lives in [`Options`].
//!
//! A new output format is one file that implements `Render` for its document, and one arm in
//! the match of the command that offers it (`src/cmd/`), which turns the command line's format
//! into a `&dyn Render<D>`.

use std::io::{self, Write};

/// What the caller decides for every format (formats that have no use for a field ignore it).
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// ANSI colours (the caller decides: terminal, `NO_COLOR`, `--color`).
    pub color: bool,
    /// Print full stacks under each site.
    pub stacks: bool,
}

/// One output format of documents of type `D`.
pub trait Render<D: ?Sized> {
    fn render(&self, doc: &D, opts: &Options, out: &mut dyn Write) -> io::Result<()>;
}

/// Renders into a `String` (tests and callers that need the text).
pub fn to_string<D: ?Sized, R: Render<D> + ?Sized>(r: &R, doc: &D, opts: &Options) -> String {
    let mut v = Vec::new();
    r.render(doc, opts, &mut v)
        .expect("writing to a Vec cannot fail");
    String::from_utf8(v).expect("formats write UTF-8")
}
