//! A plan as JSON (`memscope.plan/1`, the `data` of `memscope plan --format json`'s envelope): `max_batch` and `predictions` at the top for the first
//! device (a capture usually holds one), every device under `devices`, the evidence (the bytes
//! that grow, those that do not, the fit) and the notes as sentences.

use std::io::{self, Write};

use serde::Serialize;

use super::PlanDoc;
use crate::analysis::plan::{Basis, MaxBatch, Plan, Prediction};
use crate::report::envelope::InEnvelope;
use crate::report::{Options, Render};
use crate::wording;

pub struct Json;

#[derive(Serialize)]
struct Doc<'a> {
    schema: &'static str,
    file: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    with: Option<&'a str>,
    max_batch: Option<u64>,
    predictions: &'a [Prediction],
    devices: Vec<Device<'a>>,
}

#[derive(Serialize)]
struct Device<'a> {
    #[serde(flatten)]
    plan: &'a Plan,
    max_batch: Option<&'a MaxBatch>,
    /// Why `max_batch` is null.
    #[serde(skip_serializing_if = "Option::is_none")]
    no_max_batch: Option<&'static str>,
    split_labels: Vec<(Basis, &'static str)>,
    fit_summary: String,
    /// With `next_capture`: why, the command that takes it, the plan from both (sentences).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    next_capture_commands: Vec<String>,
    notes: Vec<String>,
}

/// The `memscope.plan/1` document, to serialize (in an envelope).
pub fn document<'a>(doc: &'a PlanDoc) -> impl Serialize + 'a {
    let devices: Vec<Device> = doc
        .plans
        .iter()
        .map(|p| Device {
            plan: p,
            max_batch: p.max_batch.as_ref().ok(),
            no_max_batch: p
                .max_batch
                .as_ref()
                .err()
                .map(|r| wording::no_max_batch(*r)),
            split_labels: p
                .split
                .by_basis
                .iter()
                .map(|(b, _)| (*b, wording::plan_basis(*b)))
                .collect(),
            fit_summary: wording::plan_fit(&p.fit, p.recorded),
            next_capture_commands: p
                .next_capture
                .map(|n| wording::plan_next_capture(n, p.recorded, doc.file))
                .unwrap_or_default(),
            notes: wording::plan_notes(p),
        })
        .collect();
    let first = doc.plans.first();
    Doc {
        schema: "memscope.plan/1",
        file: doc.file,
        with: doc.other,
        max_batch: first
            .and_then(|p| p.max_batch.as_ref().ok())
            .map(|m| m.batch),
        predictions: first.map_or(&[], |p| &p.predictions),
        devices,
    }
}

/// The document alone, pretty-printed (the binary writes it inside its envelope).
impl Render<PlanDoc<'_>> for Json {
    fn render(&self, doc: &PlanDoc, _opts: &Options, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, &document(doc))?;
        writeln!(out)
    }
}

/// `memscope plan --format json`: the document as the `data` of the envelope.
impl Render<PlanDoc<'_>> for InEnvelope<'_> {
    fn render(&self, doc: &PlanDoc, _opts: &Options, out: &mut dyn Write) -> io::Result<()> {
        crate::report::envelope::write(out, self.header, &document(doc))
    }
}
