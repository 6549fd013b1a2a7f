//! `memscope whatif`: the caching-allocator model replays a snapshot under another `PYTORCH_CUDA_ALLOC_CONF`.

use std::io::Write;

use anyhow::Context;

use crate::cmd::cli::{OutputFormat, WhatifArgs};
use crate::cmd::output;
use crate::cmd::session::Session;
use memscope::report::envelope::InputKind;

pub(crate) fn whatif(args: &WhatifArgs, s: &mut Session) -> anyhow::Result<u8> {
    use memscope::analysis::whatif;
    let conf = whatif::parse_alloc_conf(&args.alloc_conf).context("--alloc-conf")?;
    // The raw snapshot (its segments and addresses) is what the allocator model replays.
    let snap = memscope::load::open_snapshot(&args.file)?.capture;
    s.found(&args.file, InputKind::Snapshot);
    let cap = args.cap.map(|c| whatif::CapInfo {
        bytes: Some(c),
        source: whatif::CapSource::Given,
        range: None,
    });
    let w = whatif::what_if(&snap, &conf, cap, None)
        .with_context(|| format!("{}", args.file.display()))?;
    match args.format {
        OutputFormat::Text => {
            let mut out = output::term_stdout(false);
            write!(out, "{}", memscope::report::whatif::render_text(&w))?;
            out.flush().context("writing the report")?;
        }
        OutputFormat::Json => {
            let file = args.file.display().to_string();
            s.answer(&memscope::report::whatif::document(&file, &w))?;
        }
    }
    Ok(0)
}
