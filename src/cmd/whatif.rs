//! `memscope whatif`: the caching-allocator model replays a snapshot under another `PYTORCH_CUDA_ALLOC_CONF`.

use anyhow::Context;

use crate::cmd::cli::{WhatifArgs, WhatifFormatArg};
use crate::cmd::output::{self, Stdout};
use crate::cmd::session::Session;
use memscope::report::envelope::{InEnvelope, InputKind};
use memscope::report::whatif::Whatif;
use memscope::report::{self, Options, Render};

pub(crate) fn whatif(args: &WhatifArgs, s: &mut Session) -> anyhow::Result<u8> {
    use memscope::analysis::whatif;
    let conf = whatif::parse_alloc_conf(&args.alloc_conf).context("--alloc-conf")?;
    // The raw snapshot (its segments and addresses) is what the allocator model replays.
    let snap = crate::cmd::pictures::open_snapshot_for(
        &args.file,
        memscope::wording::SnapshotOnly::Whatif,
    )?
    .capture;
    s.found(&args.file, InputKind::Snapshot);
    let cap = args.cap.map(|c| whatif::CapInfo {
        bytes: Some(c),
        source: whatif::CapSource::Given,
        range: None,
    });
    let w = whatif::what_if(&snap, &conf, cap, None)
        .with_context(|| format!("{}", args.file.display()))?;
    let file = args.file.display().to_string();
    let doc = report::whatif::Whatif {
        file: &file,
        devices: &w,
    };
    let answer = s.envelope();
    let (fmt, sink) = format(args.format, &answer);
    output::to_stdout(fmt, sink, &doc, &Options::default(), "writing the report")?;
    Ok(0)
}

/// The one place `whatif` turns `--format` into a format of its answer.
fn format<'a>(
    f: WhatifFormatArg,
    answer: &'a InEnvelope<'a>,
) -> (&'a dyn for<'w> Render<Whatif<'w>>, Stdout) {
    match f {
        WhatifFormatArg::Text => (&report::whatif::Text, Stdout::Term),
        WhatifFormatArg::Json => (answer, Stdout::Answer),
    }
}
