//! A plan for the terminal: the recorded run and the model's replay of it (its error bar), the
//! largest batch, the predictions, what grows, how the terms were found, and the notes.

use std::io::{self, Write};

use super::PlanDoc;
use crate::analysis::plan::{Plan, Prediction, Shape, Verdict};
use crate::escape::term;
use crate::report::style::Style;
use crate::report::{Options, Render};
use crate::units::bytes;
use crate::wording;

pub struct Text;

impl Render<PlanDoc<'_>> for Text {
    fn render(&self, doc: &PlanDoc, opts: &Options, out: &mut dyn Write) -> io::Result<()> {
        let st = Style { on: opts.color };
        for p in doc.plans {
            write_plan(out, &st, doc, p)?;
        }
        Ok(())
    }
}

/// `1.2 GiB`, or `1.2 GiB (up to 1.4 GiB)` where the unsure requests could add to it.
fn figure(central: u64, upper: u64) -> String {
    if upper > central {
        format!("{} (up to {})", bytes(central), bytes(upper))
    } else {
        bytes(central)
    }
}

fn write_plan(out: &mut dyn Write, st: &Style, doc: &PlanDoc, p: &Plan) -> io::Result<()> {
    writeln!(
        out,
        "{} {}  (device {})",
        st.bold("memscope plan"),
        term(doc.file),
        p.device
    )?;
    writeln!(
        out,
        "RECORDED   {}: peak allocated {}, peak reserved {}",
        p.recorded,
        bytes(p.recorded_peak_allocated_bytes),
        bytes(p.recorded_peak_reserved_bytes)
    )?;
    writeln!(
        out,
        "MODEL      the same requests replayed through the allocator model: {}, {}",
        bytes(p.model_peak_allocated_bytes),
        bytes(p.model_peak_reserved_bytes)
    )?;
    match p.cap.bytes {
        Some(c) => writeln!(
            out,
            "CAP        {} ({})",
            bytes(c),
            term(wording::cap_source(p.cap.source))
        )?,
        None => writeln!(out, "CAP        none")?,
    }
    match &p.max_batch {
        Ok(m) => {
            let seq = p
                .recorded
                .seq
                .map(|s| format!(" at seq {s}"))
                .unwrap_or_default();
            let limit = if m.at_search_limit {
                wording::plan_search_limit()
            } else {
                String::new()
            };
            writeln!(
                out,
                "{}  {}{seq}{limit}",
                st.bold("MAX BATCH"),
                st.green(&m.batch.to_string())
            )?;
            if m.rounded_down_by > 0 || m.margin_bytes > 0 {
                writeln!(
                    out,
                    "           {}",
                    wording::plan_max_batch_kept(
                        m.rounded_down_by,
                        m.central_batch,
                        &bytes(m.margin_bytes)
                    )
                )?;
            }
        }
        Err(r) => writeln!(
            out,
            "{}  unknown: {}",
            st.bold("MAX BATCH"),
            wording::no_max_batch(*r)
        )?,
    }
    writeln!(out)?;
    write_predictions(out, st, p)?;
    writeln!(out)?;
    write_split(out, p)?;
    writeln!(out)?;
    writeln!(out, "FIT  {}", wording::plan_fit(&p.fit, p.recorded))?;
    if let Some(n) = p.next_capture {
        let mut lines = wording::plan_next_capture(n, p.recorded, doc.file).into_iter();
        if let Some(first) = lines.next() {
            writeln!(out, "{}  {first}", st.bold("NEXT"))?;
        }
        for l in lines {
            writeln!(out, "     $ {l}")?;
        }
    }
    writeln!(out, "NOTES")?;
    for n in wording::plan_notes(p) {
        writeln!(out, "  - {n}")?;
    }
    Ok(())
}

fn oom_cell(st: &Style, r: &Prediction, lower_bounds: bool) -> String {
    let w = wording::plan_verdict(r.verdict, lower_bounds);
    match r.verdict {
        Some(Verdict::Oom) => st.red(w),
        _ => w.into(),
    }
}

fn write_predictions(out: &mut dyn Write, st: &Style, p: &Plan) -> io::Result<()> {
    writeln!(
        out,
        "{:<22} {:<32} {:<32} UNDER THE CAP",
        "AT", "PEAK ALLOCATED", "PEAK RESERVED"
    )?;
    for r in &p.predictions {
        let at = Shape {
            batch: r.batch,
            seq: r.seq,
        }
        .to_string();
        // A capture that ends at an OOM never made the rest of its step: lower bounds.
        let ge = if p.ends_in_oom { ">= " } else { "" };
        writeln!(
            out,
            "{:<22} {:<32} {:<32} {}",
            at,
            format!(
                "{ge}{}",
                figure(r.peak_allocated_bytes, r.peak_allocated_upper_bytes)
            ),
            format!(
                "{ge}{}",
                figure(r.peak_reserved_bytes, r.peak_reserved_upper_bytes)
            ),
            oom_cell(st, r, p.ends_in_oom)
        )?;
    }
    Ok(())
}

fn write_split(out: &mut dyn Write, p: &Plan) -> io::Result<()> {
    let s = &p.split;
    writeln!(
        out,
        "AT THE RECORDED PEAK  {} grows with the batch, {} does not{}",
        bytes(s.grows_bytes),
        bytes(s.fixed_bytes),
        if s.quadratic_bytes > 0 {
            format!(
                " ({} of the growing bytes quadratic in the sequence)",
                bytes(s.quadratic_bytes)
            )
        } else {
            String::new()
        }
    )?;
    for (b, n) in s.by_basis.iter().take(8) {
        writeln!(out, "  {:>10}  {}", bytes(*n), wording::plan_basis(*b))?;
    }
    Ok(())
}
