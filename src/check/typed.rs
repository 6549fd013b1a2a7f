//! Builds an [`InputSummary`] from an [`Analysis`] by its Rust fields.
//!
//! This is the one place the gate reads the analysis. It reads typed fields and maps enums
//! by exhaustive `match`, so renaming a field or adding a variant upstream breaks the build
//! here instead of turning a rule into a silent PASS (the old summary re-read the report's
//! JSON with `unwrap_or(0)`).

use std::collections::BTreeMap;

use super::summary::{
    DeviceSummary, GraphGrowthSummary, InputSummary, Judgement, LeakSummary, OomSummary,
    PoolSummary, RankInfo, RankSource, SiteBytes, StepSummary, Unjudged,
};
use crate::analysis::sites::SiteTotal;
use crate::analysis::trace_report::GraphSection;
use crate::analysis::whatif::pools::PoolWhatIf;
use crate::analysis::{Analysis, CountedFrom, LeakJudgement, NotJudged};

fn unjudged(r: NotJudged) -> Unjudged {
    match r {
        NotJudged::NoHistory => Unjudged::NoHistory,
        NotJudged::SinglePass => Unjudged::SinglePass,
        NotJudged::DecodingLoop => Unjudged::DecodingLoop,
        NotJudged::TooFewSteps => Unjudged::TooFewSteps,
        NotJudged::RisingTooFewSteps => Unjudged::RisingTooFewSteps,
        NotJudged::NoMemoryEvents => Unjudged::NoMemoryEvents,
        NotJudged::CutBeforeMemoryEvents => Unjudged::CutBeforeMemoryEvents,
        NotJudged::CutShort => Unjudged::CutShort,
        NotJudged::CpuOnly => Unjudged::CpuOnly,
    }
}

/// The summary form of a [`LeakJudgement`].
pub fn judgement(j: &LeakJudgement) -> Judgement {
    Judgement {
        judged: j.judged,
        steps: j.steps,
        min_steps: j.min_steps,
        reason: j.reason.map(unjudged),
    }
}

fn sites(v: &[SiteTotal]) -> Vec<SiteBytes> {
    v.iter()
        .map(|s| SiteBytes {
            site: s.site.clone(),
            bytes: s.bytes,
            blocks: s.blocks,
            chain: chain(s),
        })
        .collect()
}

/// The functions of a site's stack from the innermost frame up to the site's own frame: what
/// the site's line does (`forward`, `mse_loss`, ...), not who called it, so that one line
/// reached from two callers is still one site.
fn chain(s: &SiteTotal) -> Vec<String> {
    let own = s.site.as_ref().map(|x| format!("{}:{} ", x.file, x.line));
    let mut out = Vec::new();
    for f in crate::wording::stack_lines(&s.stack) {
        out.push(function_of(&f).to_owned());
        if own.as_deref().is_some_and(|o| f.starts_with(o)) {
            break;
        }
    }
    out
}

/// The function of a `file:line function` stack label: everything after the first `:LINE `,
/// so that a C++ name keeps its namespaces and its whole signature
/// (`c10::impl::call(bool, bool)`, where the last `:` and the last space fall inside the name).
fn function_of(label: &str) -> &str {
    let b = label.as_bytes();
    for (i, _) in label.match_indices(':') {
        let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits > 0 && b.get(i + 1 + digits) == Some(&b' ') {
            return &label[i + 2 + digits..];
        }
    }
    label
}

fn label(device: u32) -> String {
    format!("cuda:{device}")
}

/// Profiled steps graph growth needs (`analysis::graph` says so in a note below it).
const GRAPH_MIN_STEPS: usize = 3;

/// Why a graph section cannot support a judgement on growth, as `analysis::graph` decides.
fn graph_not_judged(g: &GraphSection) -> Option<String> {
    if !g.growth.is_empty() {
        return None;
    }
    use crate::wording::gate::{graph_not_judged as words, GraphUnjudged};
    if g.forward_nodes == 0 {
        return Some(words(GraphUnjudged::NoSequenceNumbers));
    }
    if g.backward_nodes + g.leaf_accumulations == 0 {
        return Some(words(GraphUnjudged::NoBackward {
            forward_ops: g.forward_nodes,
        }));
    }
    (g.steps < GRAPH_MIN_STEPS).then(|| {
        words(GraphUnjudged::TooFewSteps {
            steps: g.steps,
            needed: GRAPH_MIN_STEPS,
        })
    })
}

/// Summarizes an analysis.
pub fn summarize(a: &Analysis) -> InputSummary {
    let mut devices = Vec::new();
    let mut ooms = Vec::new();
    let mut allocated_from_trace_start = Vec::new();
    let mut reserved_unrecorded = Vec::new();
    for d in &a.devices {
        // Where the figures are changes from the trace's start, the summary keeps the least
        // the bytes in use can be, and says so: the rules then FAIL only on that bound.
        let end_alloc = match (d.allocated_bytes, d.from_start) {
            (Some(b), _) => b,
            (None, Some(f)) => f.at_least(f.allocated_bytes),
            (None, None) => 0,
        };
        if d.allocated_counted_from == CountedFrom::TraceStart {
            allocated_from_trace_start.push(label(d.device));
        }
        if d.reserved_bytes.is_none() {
            reserved_unrecorded.push(label(d.device));
        }
        let end_res = d.reserved_bytes.unwrap_or(0);
        let peak_alloc = d
            .peak_allocated_bytes
            .unwrap_or(d.observed_peak_allocated_bytes)
            .max(end_alloc);
        let peak_res = d
            .peak_reserved_bytes
            .or(d.observed_peak_reserved_bytes)
            .unwrap_or(0)
            .max(end_res);
        let at_end = sites(&d.top_sites);
        let at_peak = if d.top_sites_at_peak.is_empty() {
            at_end.clone()
        } else {
            sites(&d.top_sites_at_peak)
        };
        devices.push(DeviceSummary {
            device: label(d.device),
            peak_allocated_bytes: peak_alloc,
            peak_reserved_bytes: peak_res,
            peak_exact: d.peak_exact,
            end_allocated_bytes: end_alloc,
            end_reserved_bytes: end_res,
            sites_at_peak: at_peak,
            sites_at_end: at_end,
            pools: pool_summaries(d),
            pools_raised_peak_bytes: match d.pool_whatif {
                Some(PoolWhatIf::Computed {
                    raised_by_bytes, ..
                }) => Some(raised_by_bytes),
                _ => None,
            },
        });
        for o in &d.ooms {
            ooms.push(OomSummary {
                device: label(d.device),
                cause: o.cause,
                requested_bytes: o.rounded_bytes.max(o.requested_bytes),
                site: o.site.clone(),
                summary: crate::wording::oom_summary(o),
            });
        }
    }
    let leaks = a
        .leaks
        .iter()
        .map(|l| LeakSummary {
            kind: l.leak.kind,
            extent: l.leak.extent,
            site: l.leak.site.clone(),
            cause_site: l.leak.cause_site.clone(),
            growth_bytes_per_step: l.leak.growth_bytes_per_step,
            steps: l.leak.steps as u64,
            live_bytes: l.leak.live_bytes,
            explanation: crate::wording::leak_explanation(&l.leak),
            fix: crate::wording::leak_fix(&l.leak).to_owned(),
        })
        .collect();
    let graph_growth = a.graph.as_ref().map(|g| {
        g.growth
            .iter()
            .map(|e| GraphGrowthSummary {
                op: e.op.clone(),
                site: e.site.clone(),
                nodes_per_step: e.nodes_per_step,
                steps: e.steps as u64,
            })
            .collect()
    });
    let steps = a
        .steps
        .iter()
        .map(|s| StepSummary {
            name: s.name.clone(),
            peak_allocated_bytes: s.peak_allocated_bytes,
            end_allocated_bytes: s.end_allocated_bytes,
        })
        .collect();
    let categories = a.categories.as_ref().map(|c| {
        let k = &c.categories;
        BTreeMap::from([
            ("activation".to_owned(), k.activation),
            ("before_recording".to_owned(), k.before_recording),
            ("kv_cache".to_owned(), k.kv_cache),
            ("output".to_owned(), k.output),
            ("gradient".to_owned(), k.gradient),
            ("optimizer_state".to_owned(), k.optimizer_state),
            ("other".to_owned(), k.other),
            ("parameter".to_owned(), k.parameter),
            ("temporary".to_owned(), k.temporary),
        ])
    });
    // A snapshot whose memory lives on one CUDA device: that device is the rank's, where each
    // rank uses `cuda:<local rank>` (a weak hint: the file name or `--rank` overrides it).
    let used: Vec<u32> = a
        .devices
        .iter()
        .filter(|d| d.reserved_bytes.is_some_and(|r| r > 0) || d.has_history)
        .map(|d| d.device)
        .collect();
    let rank =
        (a.input.kind == crate::analysis::CaptureKind::Snapshot && used.len() == 1).then(|| {
            RankInfo {
                rank: used[0],
                world_size: None,
                source: RankSource::Device,
            }
        });
    InputSummary {
        path: a.input.path.clone(),
        kind: a.input.kind,
        verdict: a.verdict.kind,
        devices,
        ooms,
        leaks: Some(leaks),
        graph_growth,
        steps: Some(steps),
        categories,
        leak_judgement: Some(judgement(&a.verdict.leak_judgement)),
        // A trace cut short: backward passes may lie past the cut.
        graph_not_judged: match a.verdict.cut {
            Some(_) => Some(crate::wording::gate_not_judged(
                Some(NotJudged::CutShort),
                0,
                0,
            )),
            None => a.graph.as_ref().and_then(graph_not_judged),
        },
        rank,
        load_notes: a
            .input
            .load_notes
            .iter()
            .map(crate::wording::load_note)
            .collect(),
        allocated_from_trace_start,
        reserved_unrecorded,
    }
}

/// A device's pools for its summary: only where one is private, so that a summary of a
/// capture with the default pool alone reads as it did before pools were reported.
fn pool_summaries(d: &crate::analysis::DeviceReport) -> Vec<PoolSummary> {
    if !d.pools.iter().any(|p| p.is_private()) {
        return Vec::new();
    }
    d.pools
        .iter()
        .map(|p| PoolSummary {
            pool_id: p.pool_id,
            kind: p.kind,
            reserved_bytes: p.reserved_bytes,
            allocated_bytes: p.allocated_bytes,
            peak_reserved_bytes: p.peak_reserved_bytes,
            segments: p.segments,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::function_of;

    #[test]
    fn a_labels_function_is_whole() {
        assert_eq!(function_of("train.py:10 <module>"), "<module>");
        assert_eq!(
            function_of("??:0 torch::CapturedTraceback::gather(bool, bool, bool)"),
            "torch::CapturedTraceback::gather(bool, bool, bool)"
        );
        assert_eq!(
            function_of("Op.cpp:12 at::f(c10::ArrayRef<long> const&)"),
            "at::f(c10::ArrayRef<long> const&)"
        );
        assert_eq!(
            function_of("C:/Program Files/x.py:3 run"),
            "run",
            "a file with a drive letter and a space"
        );
        assert_eq!(function_of("no line"), "no line");
    }
}
