//! `memscope plan`: loads the capture (and the second one of `--with`), analyses it once,
//! plans every device and writes the chosen format.

use std::io::Write;

use anyhow::Context;
use memscope::analysis::plan::{self, Ask, Other, Shape};
use memscope::analysis::whatif;
use memscope::report::envelope::InputKind;
use memscope::report::plan::{html::Html, json, text::Text, PlanDoc, PlanFormat};

use crate::cmd::cli::{PlanArgs, PlanFormatArg};
use crate::cmd::output;
use crate::cmd::session::Session;

pub fn plan(a: &PlanArgs, s: &mut Session) -> anyhow::Result<u8> {
    let conf = whatif::parse_alloc_conf(&a.alloc_conf).context("--alloc-conf")?;
    let opened = memscope::load::open_snapshot(&a.file)?;
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
    let format: &dyn PlanFormat = match a.format {
        PlanFormatArg::Text => &Text,
        PlanFormatArg::Json => {
            s.answer(&json::document(&doc))?;
            return Ok(0);
        }
        PlanFormatArg::Html => &Html,
    };
    if a.format == PlanFormatArg::Text {
        let color = a.color.enabled();
        let mut out = output::term_stdout(color);
        format.render(&doc, color, &mut out)?;
        out.flush().context("writing the plan")?;
    } else {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        format.render(&doc, false, &mut out)?;
        out.flush().context("writing the plan")?;
    }
    Ok(0)
}
