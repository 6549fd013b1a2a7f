//! The words: every sentence a view shows about a conclusion, made from the analysis' typed
//! evidence in one place.
//!
//! The analysis decides (enums and figures); this module says. The text report, the HTML
//! report, the JSON's `summary` fields, the TUI and the gate's annotations all call these
//! functions, so a label and its explanation cannot disagree between views, and rewording a
//! sentence never touches the analysis. It sits above `analysis` and below every view
//! (`tools/layers.py` checks it): what a view computes and wants said (the gate's outcomes,
//! [`gate::Reason`]; the job's verdict, [`job::JobVerdict`]; a diff's changes, [`diff`]) comes
//! in as wording's own types or as plain values, never as a view's type.
//!
//! The report's notes are said here too (`note`, `load_note`). Where the JSON keeps a typed
//! value as a string among the analysis' own fields (a replay mismatch, a leak's first and
//! last step, a site's stack), the field serializes through a `serialize_*` function here.

mod categories;
pub mod device;
pub mod diff;
pub mod gate;
pub mod job;
mod labels;
mod leaks;
mod notes;
mod oom;
mod plan;
mod pools;
mod replay;
mod trace_views;
mod verdict;
mod whatif;

pub use categories::{category_rule, serialize_category_rule};
pub use gate::{gate_not_judged, no_oom_record};
pub use labels::{
    serialize_stack_lines, serialize_step_label, short_site, short_site_label, site_label,
    stack_lines, step_figures, step_label,
};
pub use leaks::{
    excluded_explanation, excluded_heading, freed_by_fix, graph_explanation, graph_fix,
    holder_named, leak_explanation, leak_fix, rule_explanation, rule_fix, trace_fix,
};
pub use notes::{
    graph_note, load_note, note, ranked_finding, reserved_excess, reserved_excess_fix,
};
pub use oom::{leak_signal, oom_evidence, oom_summary, remedy_action, remedy_assessment};
pub use plan::{
    no_max_batch, plan_basis, plan_fit, plan_max_batch_kept, plan_next_capture, plan_notes,
    plan_search_limit, plan_verdict,
};
pub use pools::{
    ghost_blocks, no_pool_whatif, pool_kind, pool_kind_evidence, pool_whatif, private_pool_free,
    unknown_pool,
};
pub use replay::{anomaly, mismatch, serialize_anomaly, serialize_mismatch};
pub use trace_views::{
    devices_left_out, export_cut, graph_annotation, leak_annotation, no_snapshot_step,
    no_such_step, no_trace_device, peak_annotation, snapshot_needed, snapshot_step_moment,
    trace_at_values, trace_flame_title, trace_moment, trace_site, SnapshotOnly, NO_TRACE_MEMORY,
};
pub use verdict::{no_leaks, no_memory_events, not_judged, verdict};
pub(crate) use whatif::{bounded_bytes, twins};
pub use whatif::{
    cap_source, expandable_prediction, first_oom, model_check, placement_difference,
    serialize_cap_source, whatif_note, whatif_verdict,
};

use crate::analysis::sites::Site;

/// `file:line (in function)`, or what stands for blocks with no stack.
/// `taken with torch 2.11.0+cu128, CUDA 12.8, on host node-a`: what a capture records of where
/// it was taken (attacker text, escaped for a terminal).
pub(crate) fn taken_with(o: &crate::model::Origin) -> String {
    let parts: Vec<String> = [
        ("torch ", &o.torch_version),
        ("CUDA ", &o.cuda_version),
        ("on host ", &o.host),
    ]
    .into_iter()
    .filter_map(|(label, v)| {
        v.as_deref()
            .map(|v| format!("{label}{}", crate::escape::term(v)))
    })
    .collect();
    format!("taken with {}", parts.join(", "))
}

pub(crate) fn site_in(site: &Option<Site>) -> String {
    site.as_ref()
        .map(|s| format!("{}:{} (in {})", s.file, s.line, s.function))
        .unwrap_or_else(|| "allocations with no recorded stack".into())
}

/// ` at file:line`, or nothing where there is no site.
pub(crate) fn at_line(site: &Option<Site>) -> String {
    site.as_ref()
        .map(|s| format!(" at {}:{}", s.file, s.line))
        .unwrap_or_default()
}

/// `.schema NAME` where this capture has no table NAME: an SQL comment, so that the answer is
/// still valid SQL; `other_kind` is the kind of capture that has the table, if any.
pub fn no_such_table(name: &str, other_kind: Option<&str>) -> String {
    match other_kind {
        Some(k) => {
            format!("-- no table {name} here: it is a {k}'s table (.tables lists this capture's)\n")
        }
        None => format!("-- no table {name} (.tables lists this capture's)\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Origin;

    #[test]
    fn taken_with_says_what_is_recorded_and_escapes_it() {
        let o = Origin {
            torch_version: Some("2.11.0+cu128".into()),
            cuda_version: None,
            host: Some("node\u{202e}a".into()),
        };
        assert_eq!(
            taken_with(&o),
            "taken with torch 2.11.0+cu128, on host node\\u{202e}a"
        );
    }
}
