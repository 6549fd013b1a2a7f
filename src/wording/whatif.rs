//! The allocator what-if's words: where its cap came from, the notes on how a prediction was
//! made, how the model's layout first departed from the log's, the verdict of `memscope
//! whatif`, and the prediction for `expandable_segments:True` that the OOM diagnosis gives as
//! a remedy's assessment. Said from `analysis::whatif`'s typed results, so the text, the JSON
//! and the OOM views word them alike.

use crate::analysis::whatif::error::{Bounded, FigureKind};
use crate::analysis::whatif::{
    AssumedCap, CapSource, ExpandableAssessment, ExpandableOutcome, Outcome, Placement,
    PlacementDifference, PredictedOom, WhatIf, WhatIfNote,
};
use crate::units::bytes;

/// Where the cap came from.
pub fn cap_source(source: CapSource) -> &'static str {
    match source {
        CapSource::Given => "given (--cap)",
        CapSource::Retries => "derived from the allocator's retries in the log (cudaMalloc failed, the cache was released, the segment then fit): the lower end of the range they allow",
        CapSource::None => "none: no OOM recorded and no cap given, so no OOM can be predicted",
        CapSource::DeviceFull => {
            "derived from the OOM: the device was full (reserved + the driver's free memory)"
        }
        CapSource::PerProcessFraction => "derived from the OOM (per-process fraction): the lower end of the range the recorded run allows",
        CapSource::DeviceTotal => "the device's memory, as the capture records it (memscope run)",
    }
}

/// Serializes a cap's source as its sentence (the JSON's `cap.source`, unchanged since it was
/// one).
pub fn serialize_cap_source<S: serde::Serializer>(
    source: &CapSource,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.serialize_str(cap_source(*source))
}

/// One note on how the prediction was made.
pub fn whatif_note(note: &WhatIfNote) -> String {
    match note {
        WhatIfNote::MidRunStart {
            segments,
            reserved_bytes,
            live_bytes,
        } => format!(
            "the log starts mid-run (recording began late, or the ring buffer dropped its oldest entries): both runs start from the layout at its first event, rebuilt by undoing the log from the snapshot's end state: {segments} segments, {} reserved, {} in live blocks; this assumes those blocks stay where they were under the settings tried (they were allocated before the log, so their placement under other settings is unknown)",
            bytes(*reserved_bytes),
            bytes(*live_bytes)
        ),
        WhatIfNote::NotModelled(keys) => format!("not modelled, ignored: {}", keys.join(", ")),
        WhatIfNote::NoCap => "no cap: pass --cap BYTES to predict OOMs".into(),
        WhatIfNote::PoorPlacement { offset_rate } => format!(
            "under the recorded settings the model placed only {:.1}% of the blocks where the log has them; treat the prediction with care",
            100.0 * offset_rate
        ),
        WhatIfNote::RecordedRequests => "the prediction replays the recorded requests: a program that sizes its work from free memory (or catches the OOM) would have asked for different things".into(),
    }
}

/// The first block the model placed otherwise than the log.
pub fn placement_difference(d: &PlacementDifference) -> String {
    let PlacementDifference {
        event,
        model_offset,
        model_segment_bytes,
        recorded_offset,
        recorded_segment_bytes,
    } = d;
    format!(
        "event {event}: the model put the block at offset {model_offset} of a {model_segment_bytes}-byte segment, the log at offset {recorded_offset} of a {recorded_segment_bytes}-byte segment"
    )
}

/// How closely the model under the recorded settings reproduced the log's layout.
pub fn model_check(p: &Placement) -> String {
    format!(
        "{:.1}% of {} allocations at the recorded offset; segment events {} ({} model, {} log)",
        100.0 * p.offset_rate(),
        p.allocs_compared,
        if p.segment_events_same {
            "identical"
        } else {
            "differ"
        },
        p.segment_events_model,
        p.segment_events_recorded
    )
}

/// A run's first OOM, in a table cell.
pub fn first_oom(ooms: &[PredictedOom]) -> String {
    ooms.first().map_or("none".into(), |f| {
        format!(
            "event {} (request #{}), {}",
            f.event,
            f.request_index,
            bytes(f.rounded_bytes)
        )
    })
}

/// A run's first OOM with its site, and whether the run ended there.
fn first_oom_at(ooms: &[PredictedOom], stopped: Option<u32>) -> String {
    let Some(f) = ooms.first() else {
        return "none".into();
    };
    let end = if stopped.is_some() {
        " (the run ends there)"
    } else {
        ""
    };
    format!(
        "event {} (request #{}), {}{}{end}",
        f.event,
        f.request_index,
        bytes(f.rounded_bytes),
        super::at_line(&f.site)
    )
}

/// The prediction against the recorded run, in one line.
pub fn whatif_verdict(w: &WhatIf) -> String {
    let (r, p) = (&w.recorded, &w.predicted);
    match w.outcome() {
        Outcome::OomAvoided => format!(
            "the recorded OOM's request would have been served, and every later recorded one; peak reserved {}. The log holds no request the program would have made after its failure: whether the run would then have finished cannot be told",
            bounded_bytes(&w.predicted_peak_reserved)
        ),
        Outcome::StillOoms | Outcome::WouldOom => {
            let head = if matches!(w.outcome(), Outcome::StillOoms) {
                "still OOMs"
            } else {
                "would OOM"
            };
            let at = first_oom_at(&p.ooms, p.stopped_at);
            match (w.served_from_cap, w.cap.range) {
                (Some(enough), Some((low, high))) => format!(
                    "depends on the cap, which the recorded run only places between {} and {}: at {} it {head}: {at}; with a cap of at least {} every recorded request is served (give `--cap` for the real one)",
                    bytes(low),
                    bytes(high),
                    bytes(low),
                    bytes(enough)
                ),
                _ => format!("{head}: {at}"),
            }
        }
        Outcome::NoOom => format!(
            "no OOM either way; peak reserved {} instead of {}",
            bounded_bytes(&w.predicted_peak_reserved),
            bytes(r.peak_reserved_bytes)
        ),
    }
}

/// The allocator model's prediction for `expandable_segments:True` at a recorded OOM.
pub fn expandable_prediction(a: &ExpandableAssessment) -> String {
    let assumed = if a.from_mid_run {
        " (the log starts mid-run: replayed from the layout at its first event, the blocks live then kept where they were)"
    } else {
        ""
    };
    format!("{}{assumed}", expandable_outcome(&a.outcome))
}

fn expandable_outcome(o: &ExpandableOutcome) -> String {
    match o {
        ExpandableOutcome::DependsOnCap { low, high, enough } => format!(
            "depends on the cap, which the recorded run only places between {} and {}: the recorded requests replayed through the allocator model with expandable segments all succeed if the cap was at least {}, and still fail below (`memscope whatif --cap` tells for a given cap)",
            bytes(*low),
            bytes(*high),
            bytes(*enough)
        ),
        ExpandableOutcome::Avoided {
            cap,
            peak_reserved,
            ..
        } => format!(
            "predicted to serve this request: the recorded requests replayed through the allocator model with expandable segments and {} all succeed, the failed one included (peak reserved {})",
            assumed_cap(cap),
            bounded_bytes(peak_reserved)
        ),
        ExpandableOutcome::FailsHere { cap, oom } => format!(
            "predicted NOT to avoid it: the recorded requests replayed through the allocator model with expandable segments and {} still fail at this request ({} with {} reserved): the free memory lies in holes that do not cover whole pages (20 MiB in the large pool), which is all expandable segments can unmap and map again",
            assumed_cap(cap),
            bytes(oom.rounded_bytes),
            bytes(oom.reserved_bytes)
        ),
        ExpandableOutcome::FailsLater { cap, oom } => format!(
            "predicted to get past this request, but not to avoid an OOM: the recorded requests replayed through the allocator model with expandable segments and {} fail later, at event {} ({})",
            assumed_cap(cap),
            oom.event,
            bytes(oom.rounded_bytes)
        ),
        ExpandableOutcome::FailsEarlier { cap, oom } => format!(
            "predicted NOT to avoid it: the recorded requests replayed through the allocator model with expandable segments and {} fail earlier, at event {} ({})",
            assumed_cap(cap),
            oom.event,
            bytes(oom.rounded_bytes)
        ),
    }
}

/// The cap an assessment's replay assumed, as the object of "with expandable segments and".
fn assumed_cap(cap: &AssumedCap) -> String {
    match cap {
        // The reserved peak lies above the most the OOM allowed: the cap was lowered during the
        // run (or memory outside the allocator grew), so no one cap explains the log.
        AssumedCap::Range { low, high } if low > high => format!(
            "a cap of {} (the recorded reserved peak; at the OOM the cap was below {}, so it was lowered during the run and no one cap explains the log)",
            bytes(*low),
            bytes(*high)
        ),
        AssumedCap::Range { low, high } => format!(
            "any cap the recorded run allows ({} .. {})",
            bytes(*low),
            bytes(*high)
        ),
        AssumedCap::Exact(c) => format!("a cap of {}", bytes(*c)),
        AssumedCap::None => "no cap".into(),
    }
}

/// Where a counterfactual figure's range comes from, for the parentheses after it.
pub(crate) fn twins(b: &Bounded) -> String {
    let runs = match b.kind {
        FigureKind::GraphPeakEffect => "twin runs of the same work without the private pools",
        FigureKind::WhatIfPeakReserved => "twin runs of the same work under the settings asked",
        FigureKind::RetainedFreed => "OOMs of retry loops whose kept bytes were measured",
    };
    if b.exact() {
        format!("exact on all {} {runs}", b.twins)
    } else {
        format!("the range the truth lay in on all {} {runs}", b.twins)
    }
}

/// A figure in bytes with its range: `1.9 GiB (1.9 GiB .. 2.0 GiB, the range ...)`.
pub(crate) fn bounded_bytes(b: &Bounded) -> String {
    if b.exact() {
        return format!("{} ({})", bytes(b.figure.max(0) as u64), twins(b));
    }
    format!(
        "{} ({} .. {}, {})",
        bytes(b.figure.max(0) as u64),
        bytes(b.truth_low.max(0) as u64),
        bytes(b.truth_high.max(0) as u64),
        twins(b)
    )
}

/// The cap's `source` is its sentence in JSON (what-if's and plan's).
impl serde::Serialize for crate::analysis::whatif::CapSource {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_cap_source(self, s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oom(event: u32) -> PredictedOom {
        PredictedOom {
            event,
            request_index: 7,
            requested_bytes: 3 << 20,
            rounded_bytes: 4 << 20,
            reserved_bytes: 1 << 30,
            allocated_bytes: 1 << 29,
            recorded: false,
            site: None,
        }
    }

    /// The cases no capture of the test corpus reaches, word for word.
    #[test]
    fn the_rarer_predictions_are_said() {
        let a = ExpandableAssessment {
            outcome: ExpandableOutcome::FailsEarlier {
                cap: AssumedCap::Exact(2 << 30),
                oom: oom(12),
            },
            from_mid_run: false,
        };
        assert_eq!(
            expandable_prediction(&a),
            "predicted NOT to avoid it: the recorded requests replayed through the allocator model with expandable segments and a cap of 2.0 GiB fail earlier, at event 12 (4.0 MiB)"
        );
        let a = ExpandableAssessment {
            outcome: ExpandableOutcome::Avoided {
                cap: AssumedCap::None,
                peak_reserved_bytes: 1 << 30,
                peak_reserved: crate::analysis::whatif::error::Bounded::of(
                    FigureKind::WhatIfPeakReserved,
                    1 << 30,
                ),
            },
            from_mid_run: true,
        };
        assert_eq!(
            expandable_prediction(&a),
            "predicted to serve this request: the recorded requests replayed through the allocator model with expandable segments and no cap all succeed, the failed one included (peak reserved 1.0 GiB (1.0 GiB .. 1.1 GiB, the range the truth lay in on all 41 twin runs of the same work under the settings asked)) (the log starts mid-run: replayed from the layout at its first event, the blocks live then kept where they were)"
        );
    }
}
