//! `memscope plan`: loads the capture (and the second one of `--with`), analyses it once,
//! plans every device and writes the chosen format.

use anyhow::Context;
use memscope::analysis::plan::{self, Ask, Other, Shape};
use memscope::analysis::whatif;
use memscope::report::envelope::{InEnvelope, InputKind};
use memscope::report::plan::{html::Html, text::Text, PlanDoc};
use memscope::report::{Options, Render};

use crate::cmd::cli::{PlanArgs, PlanFormatArg};
use crate::cmd::output::{self, Stdout};
use crate::cmd::session::Session;

pub fn plan(a: &PlanArgs, s: &mut Session) -> anyhow::Result<u8> {
    let conf = whatif::parse_alloc_conf(&a.alloc_conf).context("--alloc-conf")?;
    let opened =
        crate::cmd::pictures::open_snapshot_for(&a.file, memscope::wording::SnapshotOnly::Plan)?;
    s.found(&a.file, InputKind::Snapshot);
    s.sized(&a.file, opened.bytes);
    let product = memscope::analysis::analyze(opened, &a.file);
    let recorded = Shape {
        batch: a.batch,
        seq: a.seq,
    };
    let ask = Ask::new(recorded, &a.at, a.cap, conf)?;
    let other_snap = match &a.with {
        Some(p) => {
            // The twin run is read for its raw log; it is not analysed.
            let other = memscope::load::open_snapshot(p)?.capture;
            s.found(p, InputKind::Snapshot);
            Some(other)
        }
        None => None,
    };
    let other = other_snap.as_ref().map(|s| Other {
        snap: s,
        shape: Shape {
            batch: a.with_batch.unwrap_or(a.batch),
            seq: a.with_seq.or(a.seq),
        },
    });
    if a.also.len() != a.also_batch.len() {
        anyhow::bail!("--also: give one --also-batch for each --also capture");
    }
    let mut also_snaps = Vec::new();
    for p in &a.also {
        also_snaps.push(memscope::load::open_snapshot(p)?.capture);
        s.found(p, InputKind::Snapshot);
    }
    let mut others: Vec<Other> = other.into_iter().collect();
    for (snap, &batch) in also_snaps.iter().zip(&a.also_batch) {
        others.push(Other {
            snap,
            shape: Shape { batch, seq: a.seq },
        });
    }
    let plans = plan::plan_all(&product.snap, &product, &ask, &others)
        .with_context(|| format!("{}", a.file.display()))?;
    let file = a.file.display().to_string();
    let other_name = a.with.as_ref().map(|p| p.display().to_string());
    let doc = PlanDoc {
        file: &file,
        other: other_name.as_deref(),
        plans: &plans,
    };
    let answer = s.envelope();
    let (format, sink) = format(a.format, &answer);
    // Colour is for the terminal only.
    let opts = Options {
        color: sink == Stdout::Term && a.color.enabled(),
        stacks: false,
    };
    output::to_stdout(format, sink, &doc, &opts, "writing the plan")?;
    Ok(0)
}

/// The one place `plan` turns `--format` into a format of the plan.
fn format<'a>(
    f: PlanFormatArg,
    answer: &'a InEnvelope<'a>,
) -> (&'a dyn for<'p> Render<PlanDoc<'p>>, Stdout) {
    match f {
        PlanFormatArg::Text => (&Text, Stdout::Term),
        PlanFormatArg::Json => (answer, Stdout::Answer),
        PlanFormatArg::Html => (&Html, Stdout::Plain),
    }
}
