//! `memscope whatif`'s text: the recorded run, the model replaying it with the recorded
//! settings, and the prediction under the asked ones, side by side. The analysis
//! (`analysis::whatif`) computes them; this says them.

use std::fmt::Write as _;

use crate::analysis::whatif::{PredictedOom, WhatIf};
use crate::units::bytes;

fn oom_short(o: &[PredictedOom]) -> String {
    o.first().map_or("none".into(), |f| {
        format!(
            "event {} (request #{}), {}",
            f.event,
            f.request_index,
            bytes(f.rounded_bytes)
        )
    })
}

fn oom_text(o: &[PredictedOom], stopped: Option<u32>) -> String {
    let Some(f) = o.first() else {
        return "none".into();
    };
    let site = f
        .site
        .as_ref()
        .map(|s| format!(" at {}:{}", s.file, s.line))
        .unwrap_or_default();
    let end = if stopped.is_some() {
        " (the run ends there)"
    } else {
        ""
    };
    format!(
        "event {} (request #{}), {}{site}{end}",
        f.event,
        f.request_index,
        bytes(f.rounded_bytes)
    )
}

fn exact(b: u64) -> String {
    format!("{} ({b})", bytes(b))
}

/// The side-by-side text table.
pub fn render_text(w: &[WhatIf]) -> String {
    let mut s = String::new();
    for w in w {
        let (r, m, p) = (&w.recorded, &w.model_recorded_settings, &w.predicted);
        let _ = writeln!(s, "WHAT-IF cuda:{}", w.device);
        let _ = writeln!(
            s,
            "  cap: {} ({}{})",
            w.cap.bytes.map_or("none".into(), bytes),
            w.cap.source,
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
                oom_short(&r.ooms),
                oom_short(&m.ooms),
                oom_short(&p.ooms),
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
        let pl = &m.placement;
        let _ = writeln!(
            s,
            "  model check: {:.1}% of {} allocations at the recorded offset; segment events {} ({} model, {} log)",
            100.0 * pl.offset_rate(),
            pl.allocs_compared,
            if pl.segment_events_same { "identical" } else { "differ" },
            pl.segment_events_model,
            pl.segment_events_recorded
        );
        let verdict = match (r.ooms.is_empty(), p.ooms.is_empty()) {
            (false, true) => format!(
                "the recorded OOM would have been avoided; peak reserved {}",
                bytes(p.stats.peak_reserved)
            ),
            (false, false) => format!("still OOMs: {}", oom_text(&p.ooms, p.stopped_at)),
            (true, false) => format!("would OOM: {}", oom_text(&p.ooms, p.stopped_at)),
            (true, true) => format!(
                "no OOM either way; peak reserved {} instead of {}",
                bytes(p.stats.peak_reserved),
                bytes(r.peak_reserved_bytes)
            ),
        };
        let _ = writeln!(s, "  VERDICT {verdict}");
        for n in &w.notes {
            let _ = writeln!(s, "  note: {n}");
        }
    }
    s
}
