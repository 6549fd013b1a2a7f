//! `memscope whatif`'s text: the recorded run, the model replaying it with the recorded
//! settings, and the prediction under the asked ones, side by side; and its JSON. The analysis
//! (`analysis::whatif`) computes them; the wording module says them. Both are a
//! [`Render`] of a [`Whatif`]: [`Text`], and the envelope's JSON.

use std::fmt::Write as _;
use std::io;

use serde::Serialize;

use crate::analysis::whatif::{CapInfo, Placement, Recorded, RunResult, WhatIf};
use crate::report::envelope::InEnvelope;
use crate::report::{Options, Render};
use crate::units::bytes;
use crate::wording;

fn exact(b: u64) -> String {
    format!("{} ({b})", bytes(b))
}

/// What `memscope whatif` shows: the snapshot's name and one answer per device.
#[derive(Clone, Copy, Debug)]
pub struct Whatif<'a> {
    pub file: &'a str,
    pub devices: &'a [WhatIf],
}

/// The side-by-side text table.
pub struct Text;

impl Render<Whatif<'_>> for Text {
    fn render(&self, doc: &Whatif, _opts: &Options, out: &mut dyn io::Write) -> io::Result<()> {
        out.write_all(table(doc.devices).as_bytes())
    }
}

/// `memscope whatif --format json`: the document as the `data` of the envelope.
impl Render<Whatif<'_>> for InEnvelope<'_> {
    fn render(&self, doc: &Whatif, _opts: &Options, out: &mut dyn io::Write) -> io::Result<()> {
        crate::report::envelope::write(out, self.header, &document(doc.file, doc.devices))
    }
}

fn table(w: &[WhatIf]) -> String {
    let mut s = String::new();
    for w in w {
        let (r, m, p) = (&w.recorded, &w.model_recorded_settings, &w.predicted);
        let _ = writeln!(s, "WHAT-IF cuda:{}", w.device);
        let _ = writeln!(
            s,
            "  cap: {} ({}{})",
            w.cap.bytes.map_or("none".into(), bytes),
            wording::cap_source(w.cap.source),
            w.cap
                .range
                .map(|(a, b)| format!("; range {} .. {}", bytes(a), bytes(b)))
                .unwrap_or_default()
        );
        let rows: [(&str, String, String, String); 8] = [
            (
                "settings",
                r.settings.clone(),
                m.settings.clone(),
                p.settings.clone(),
            ),
            (
                "peak reserved",
                exact(r.peak_reserved_bytes),
                exact(m.stats.peak_reserved),
                exact(p.stats.peak_reserved),
            ),
            (
                "peak allocated",
                bytes(r.peak_allocated_bytes),
                bytes(m.stats.peak_allocated),
                bytes(p.stats.peak_allocated),
            ),
            (
                "segments (peak)",
                r.peak_segments.to_string(),
                m.stats.peak_segments.to_string(),
                p.stats.peak_segments.to_string(),
            ),
            (
                "free at peak",
                bytes(r.free_reserved_at_peak_bytes),
                bytes(m.free_reserved_at_peak_bytes),
                bytes(p.free_reserved_at_peak_bytes),
            ),
            (
                "largest hole at peak",
                bytes(r.largest_hole_at_peak_bytes),
                bytes(m.largest_hole_at_peak_bytes),
                bytes(p.largest_hole_at_peak_bytes),
            ),
            (
                "alloc retries",
                "-".into(),
                m.stats.num_alloc_retries.to_string(),
                p.stats.num_alloc_retries.to_string(),
            ),
            (
                "first OOM",
                wording::first_oom(&r.ooms),
                wording::first_oom(&m.ooms),
                wording::first_oom(&p.ooms),
            ),
        ];
        let _ = writeln!(
            s,
            "  {:<22} {:<34} {:<34} model, what-if",
            "", "recorded", "model, recorded settings"
        );
        for (k, a, b, c) in rows {
            let _ = writeln!(s, "  {k:<22} {a:<34} {b:<34} {c}");
        }
        let _ = writeln!(s, "  model check: {}", wording::model_check(&m.placement));
        let _ = writeln!(s, "  VERDICT {}", wording::whatif_verdict(w));
        for n in &w.notes {
            let _ = writeln!(s, "  note: {}", wording::whatif_note(n));
        }
    }
    s
}

/// One device's answer as `--format json` gives it: the analysis' figures, with the
/// placement's first difference and the notes in words (the cap's source serializes itself as
/// its sentence, as `plan`'s JSON holds it too). The fields keep the analysis' order, and the
/// mirrors are filled by destructuring the analysis' structs whole: a field added there and
/// not here does not compile.
#[derive(Serialize)]
struct WhatIfDoc<'a> {
    device: u32,
    cap: &'a CapInfo,
    recorded: &'a Recorded,
    model_recorded_settings: RunDoc<'a>,
    predicted: RunDoc<'a>,
    notes: Vec<String>,
    /// The predicted peak reserved with the range the truth lay in on every twin run.
    predicted_peak_reserved: &'a crate::analysis::whatif::error::Bounded,
    /// The least cap of the derived range that serves every recorded request, where its lower
    /// end does not: the answer depends on the cap.
    #[serde(skip_serializing_if = "Option::is_none")]
    served_from_cap: Option<u64>,
}

/// A run's figures, then how its layout compares with the log's.
#[derive(Serialize)]
struct RunDoc<'a> {
    #[serde(flatten)]
    run: &'a RunResult,
    placement: PlacementDoc,
}

#[derive(Serialize)]
struct PlacementDoc {
    allocs_compared: usize,
    same_offset: usize,
    same_segment_size: usize,
    first_difference: Option<String>,
    segment_events_model: usize,
    segment_events_recorded: usize,
    segment_events_same: bool,
}

fn run_doc(run: &RunResult) -> RunDoc<'_> {
    let Placement {
        allocs_compared,
        same_offset,
        same_segment_size,
        first_difference,
        segment_events_model,
        segment_events_recorded,
        segment_events_same,
    } = run.placement;
    RunDoc {
        run,
        placement: PlacementDoc {
            allocs_compared,
            same_offset,
            same_segment_size,
            first_difference: first_difference.as_ref().map(wording::placement_difference),
            segment_events_model,
            segment_events_recorded,
            segment_events_same,
        },
    }
}

fn whatif_doc(w: &WhatIf) -> WhatIfDoc<'_> {
    let WhatIf {
        device,
        cap,
        recorded,
        model_recorded_settings,
        predicted,
        notes,
        predicted_peak_reserved,
        served_from_cap,
    } = w;
    WhatIfDoc {
        device: *device,
        cap,
        recorded,
        model_recorded_settings: run_doc(model_recorded_settings),
        predicted: run_doc(predicted),
        notes: notes.iter().map(wording::whatif_note).collect(),
        predicted_peak_reserved,
        served_from_cap: *served_from_cap,
    }
}

/// The `memscope.whatif/1` document's name.
pub const SCHEMA: &str = "memscope.whatif/1";

/// `memscope whatif --format json`'s document: the snapshot and one object per device.
#[derive(Serialize)]
struct Document<'a> {
    schema: &'static str,
    file: &'a str,
    devices: Vec<WhatIfDoc<'a>>,
}

/// The `memscope.whatif/1` document of `file`'s what-ifs, to serialize (in an envelope).
fn document<'a>(file: &'a str, w: &'a [WhatIf]) -> impl Serialize + 'a {
    Document {
        schema: SCHEMA,
        file,
        devices: w.iter().map(whatif_doc).collect(),
    }
}
