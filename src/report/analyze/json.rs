//! The machine-readable report: the `memscope.report/1` document (docs/json-schema.md), the
//! `data` of `memscope analyze --format json`'s envelope (`crate::report::envelope`).
//!
//! The document is the analysis as it is, except that the sentences are the wording module's
//! (the analysis carries evidence, not words): the verdict's `summary`, each finding's
//! `explanation` and `fix`, an OOM's `summary`, `evidence` and remedies' `action` and
//! `assessment`, the `notes` and the graph's `notes`. The borrowed mirror below keeps the
//! fields in the analysis' order, so the schema is unchanged (the sentences come after the
//! figures of their object, and a device's `ooms` after its other fields). The strings among
//! the analysis' own fields (a replay mismatch, a leak's steps, a site's stack) serialize
//! through the wording module's `serialize_*` functions.

use std::io::{self, Write};

use serde::Serialize;

use crate::analysis::graph::GraphGrowth;
use crate::analysis::oom::RemedyKind;
use crate::analysis::trace_report::GraphSection;
use crate::analysis::{
    Analysis, BoundedGrowthReport, CategoriesReport, DeviceReport, ExcludedGrowthReport, Input,
    LeakJudgement, LeakReport, OomReport, StepReport, VerdictKind,
};
use crate::report::envelope::InEnvelope;
use crate::report::{Options, Render};

pub struct Json;

#[derive(Serialize)]
struct Document<'a> {
    schema: &'a str,
    input: &'a Input,
    verdict: VerdictDoc<'a>,
    devices: Vec<DeviceDoc<'a>>,
    leaks: Vec<LeakDoc<'a>>,
    bounded_growth: &'a [BoundedGrowthReport],
    /// Growth a benign reading explains, each with its sentence (absent where there is none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    excluded_growth: Vec<ExcludedDoc<'a>>,
    steps: &'a [StepReport],
    categories: &'a Option<CategoriesReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    graph: Option<GraphDoc<'a>>,
    notes: Vec<String>,
    /// The device beyond the allocator (snapshots; docs/json.md), with its lines in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    device: Option<DeviceSectionDoc<'a>>,
    /// The findings by bytes at stake (`Analysis::ranked_findings`).
    findings: Vec<crate::analysis::ranked::Ranked>,
}

/// The device section with its sentences.
#[derive(Serialize)]
struct DeviceSectionDoc<'a> {
    #[serde(flatten)]
    section: &'a crate::analysis::device::DeviceSection,
    summary: Vec<String>,
}

/// Growth a benign reading explains, with why it is not a leak.
#[derive(Serialize)]
struct ExcludedDoc<'a> {
    #[serde(flatten)]
    report: &'a ExcludedGrowthReport,
    explanation: String,
}

/// A device with its OOMs, each with its sentences.
#[derive(Serialize)]
struct DeviceDoc<'a> {
    #[serde(flatten)]
    report: &'a DeviceReport,
    ooms: Vec<OomDoc<'a>>,
}

/// An OOM with its cause's sentence, its facts and its remedies in words.
#[derive(Serialize)]
struct OomDoc<'a> {
    #[serde(flatten)]
    report: &'a OomReport,
    summary: String,
    evidence: Vec<String>,
    remedies: Vec<RemedyDoc>,
    /// The step the request failed in, against the earlier ones (the cause's typed evidence).
    #[serde(skip_serializing_if = "Option::is_none")]
    failing_step: Option<&'a crate::analysis::oom_step::FailingStep>,
}

#[derive(Serialize)]
struct RemedyDoc {
    kind: RemedyKind,
    action: &'static str,
    assessment: String,
}

fn device_doc(d: &DeviceReport) -> DeviceDoc<'_> {
    DeviceDoc {
        report: d,
        ooms: d
            .ooms
            .iter()
            .map(|o| OomDoc {
                report: o,
                summary: crate::wording::oom_summary(o),
                evidence: crate::wording::oom_evidence(o),
                remedies: o
                    .remedies
                    .iter()
                    .map(|r| RemedyDoc {
                        kind: r.kind,
                        action: crate::wording::remedy_action(r.kind),
                        assessment: crate::wording::remedy_assessment(o, r),
                    })
                    .collect(),
                failing_step: o.facts.step.as_ref(),
            })
            .collect(),
    }
}

/// A trace's autograd graph: its notes, then its growth findings, with their sentences.
#[derive(Serialize)]
struct GraphDoc<'a> {
    #[serde(flatten)]
    section: &'a GraphSection,
    notes: Vec<String>,
    growth: Vec<GraphGrowthDoc<'a>>,
}

#[derive(Serialize)]
struct GraphGrowthDoc<'a> {
    #[serde(flatten)]
    finding: &'a GraphGrowth,
    explanation: String,
    fix: &'static str,
}

/// A finding with its explanation and fix, the wording module's.
#[derive(Serialize)]
struct LeakDoc<'a> {
    #[serde(flatten)]
    report: &'a LeakReport,
    explanation: String,
    fix: &'static str,
}

#[derive(Serialize)]
struct VerdictDoc<'a> {
    kind: VerdictKind,
    summary: String,
    leak_judgement: &'a LeakJudgement,
    #[serde(skip_serializing_if = "Option::is_none")]
    cut: Option<crate::analysis::verdict::TraceCut>,
}

/// The `memscope.report/1` document of `a`, as a JSON value.
pub fn document(a: &Analysis) -> serde_json::Value {
    serde_json::to_value(doc(a)).expect("a report serializes")
}

/// The `memscope.report/1` document of `a`, to serialize (in an envelope).
pub fn data(a: &Analysis) -> impl Serialize + '_ {
    doc(a)
}

fn doc(a: &Analysis) -> Document<'_> {
    Document {
        schema: a.schema,
        input: &a.input,
        verdict: VerdictDoc {
            kind: a.verdict.kind,
            summary: crate::wording::verdict(&a.verdict),
            leak_judgement: &a.verdict.leak_judgement,
            cut: a.verdict.cut,
        },
        devices: a.devices.iter().map(device_doc).collect(),
        leaks: a
            .leaks
            .iter()
            .map(|l| LeakDoc {
                report: l,
                explanation: crate::wording::leak_explanation(&l.leak),
                fix: crate::wording::leak_fix(&l.leak),
            })
            .collect(),
        bounded_growth: &a.bounded_growth,
        excluded_growth: a
            .excluded_growth
            .iter()
            .map(|g| ExcludedDoc {
                report: g,
                explanation: crate::wording::excluded_explanation(&g.growth),
            })
            .collect(),
        steps: &a.steps,
        categories: &a.categories,
        graph: a.graph.as_ref().map(|g| GraphDoc {
            section: g,
            notes: g.notes.iter().map(crate::wording::graph_note).collect(),
            growth: g
                .growth
                .iter()
                .map(|f| GraphGrowthDoc {
                    finding: f,
                    explanation: crate::wording::graph_explanation(f),
                    fix: crate::wording::graph_fix(f),
                })
                .collect(),
        }),
        notes: a.notes.iter().map(crate::wording::note).collect(),
        device: a.device.as_ref().map(|d| DeviceSectionDoc {
            section: d,
            summary: crate::wording::device::lines(d),
        }),
        findings: a.ranked_findings(),
    }
}

/// The document alone, pretty-printed (the binary writes it inside its envelope).
impl Render<Analysis> for Json {
    fn render(&self, analysis: &Analysis, _opts: &Options, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, &doc(analysis)).map_err(io::Error::from)?;
        writeln!(out)
    }
}

/// `memscope analyze --format json`: the document as the `data` of the envelope.
impl Render<Analysis> for InEnvelope<'_> {
    fn render(&self, analysis: &Analysis, _opts: &Options, out: &mut dyn Write) -> io::Result<()> {
        crate::report::envelope::write(out, self.header, &data(analysis))
    }
}

#[cfg(test)]
mod tests {
    /// The document carries every field of the analysis, in its order, the verdict's summary
    /// and the notes in words: a field added to `Analysis` and not to the mirror fails here.
    #[test]
    fn the_document_mirrors_the_analysis() {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/leak_oom.pickle");
        let snap = crate::load::load_snapshot(&p).unwrap();
        let a = crate::analysis::analyze_snapshot(&snap, &p, 0);
        let raw = serde_json::to_value(&a.analysis).unwrap();
        let doc = super::document(&a);
        let keys = |v: &serde_json::Value| -> Vec<String> {
            v.as_object().unwrap().keys().cloned().collect()
        };
        let mut fields = keys(&raw);
        fields.push("notes".into());
        fields.push("findings".into());
        fields.sort();
        assert_eq!(fields, keys(&doc));
        let mut verdict = keys(&raw["verdict"]);
        verdict.push("summary".into());
        verdict.sort();
        let mut got = keys(&doc["verdict"]);
        got.sort();
        assert_eq!(verdict, got);
        assert!(doc["verdict"]["summary"]
            .as_str()
            .unwrap()
            .starts_with("OOM on cuda:0"));
    }
}
