//! The `analyze` report for a profiler trace, in the same shape as for a snapshot.
//!
//! CI gates and the TUI read one schema, whatever the user captured: a trace fills the fields
//! it can back with evidence (allocated and reserved totals, steps, leaks, graph growth) and
//! leaves the snapshot-only ones (`active`, `requested`, segments) `null`.

use std::path::Path;

use super::graph::{self, GraphGrowth};
use super::leaks::{Blame, Confidence, Leak, LeakKind};
use super::replay::Consistency;
use super::trace_memory::{self, DeviceMemory, LiveGrowth, TraceMemory};
use super::{
    Analysis, DeviceReport, Input, LeakJudgement, LeakReport, NotJudged, StepReport, Verdict,
    VerdictKind, SCHEMA,
};
use crate::model::trace::Trace;
use crate::model::EventIdx;
use crate::units::bytes;

/// The autograd graph section of the report (`graph.growth[]`).
#[derive(Clone, Debug, serde::Serialize)]
pub struct GraphSection {
    pub forward_nodes: usize,
    pub backward_nodes: usize,
    pub unconsumed_nodes: usize,
    pub steps: usize,
    pub growth: Vec<GraphGrowth>,
    pub notes: Vec<String>,
}

/// R² of the straight-line fit of the cumulative survivors over the steps.
fn cumulative_r2(per_step: &[u64]) -> f64 {
    let mut acc = 0.0;
    let ys: Vec<f64> = per_step
        .iter()
        .map(|&b| {
            acc += b as f64;
            acc
        })
        .collect();
    super::leaks::r_squared(&ys)
}

/// One finding per user site: the trace groups survivors by (site, op), but a user fixes a line.
fn leaks_from_growth(growth: &[LiveGrowth], steps: &[String]) -> Vec<Leak> {
    let mut by_site: Vec<(Option<crate::model::Site>, Vec<&LiveGrowth>)> = Vec::new();
    for g in growth {
        match by_site.iter_mut().find(|(s, _)| *s == g.site) {
            Some((_, v)) => v.push(g),
            None => by_site.push((g.site.clone(), vec![g])),
        }
    }
    let mut out: Vec<Leak> = by_site
        .into_iter()
        .map(|(site, gs)| {
            let n_steps = gs.iter().map(|g| g.per_step_bytes.len()).max().unwrap_or(0);
            let mut per_step = vec![0u64; n_steps];
            let mut count = 0u64;
            let mut total = 0u64;
            let mut with_live = 0usize;
            for g in &gs {
                for (i, b) in g.per_step_bytes.iter().enumerate() {
                    per_step[i] += b;
                }
                count += g.per_step_count.iter().map(|&c| c as u64).sum::<u64>();
                total += g.total_bytes;
                with_live = with_live.max(g.steps_with_live);
            }
            let ops: Vec<String> = gs.iter().filter_map(|g| g.op.clone()).collect();
            let n = n_steps.max(1) as f64;
            let place = site.as_ref().map(|s| format!("in `{}` ({})", s.function, s.file)).unwrap_or_else(|| "with no user frame recorded".into());
            let explanation = format!(
                "allocations made {place} by {} in {with_live} of {n_steps} profiled steps are still alive when the trace ends, about {} per step ({} in all): memory kept across iterations grows with every step. A profiler trace gives a frame's line as recorded when the frame was entered or when profiling began, so the line may be off by a few; the function is reliable.",
                ops.iter().map(|o| format!("`{o}`")).collect::<Vec<_>>().join(", "),
                bytes((total as f64 / n) as u64),
                bytes(total)
            );
            Leak {
                kind: LeakKind::SteadyGrowth,
                allocation_site: site.clone(),
                site,
                blame: Blame::AllocatingLine,
                cause_site: None,
                confidence: Confidence::Medium,
                live_bytes: total,
                count,
                growth_bytes_per_step: total as f64 / n,
                growth_tensors_per_step: count as f64 / n,
                steps: with_live,
                first_step: steps.first().cloned().unwrap_or_default(),
                last_step: steps.last().cloned().unwrap_or_default(),
                window_start_event: EventIdx(0),
                window_end_event: EventIdx(0),
                r2: cumulative_r2(&per_step),
                explanation,
                fix: "keep only what the next step needs: `.item()` or `.detach().cpu()` before storing results, run evaluation under `torch.no_grad()`, and clear caches".into(),
                samples: Vec::new(),
                related_sites: Vec::new(),
                stack: Vec::new(),
            }
        })
        .collect();
    out.sort_by_key(|b| std::cmp::Reverse(b.live_bytes));
    out
}

fn device_report(d: &DeviceMemory) -> DeviceReport {
    let peak = d.peak.as_ref();
    let end_alloc = d.end_allocated_bytes.unwrap_or(0).max(0) as u64;
    let end_res = d
        .timeline
        .last()
        .map(|p| p.reserved_bytes.max(0) as u64)
        .unwrap_or(0);
    let peak_alloc = peak.map(|p| p.allocated_bytes.max(0) as u64);
    let peak_res = d.peak_reserved_bytes.map(|v| v.max(0) as u64);
    DeviceReport {
        device: d.device.device_id.max(0) as u32,
        allocated_bytes: end_alloc,
        active_bytes: None,
        reserved_bytes: end_res,
        requested_bytes: None,
        peak_allocated_bytes: peak_alloc,
        peak_active_bytes: None,
        peak_reserved_bytes: peak_res,
        peak_requested_bytes: None,
        peak_inactive_split_bytes: None,
        observed_peak_allocated_bytes: peak_alloc.unwrap_or(end_alloc),
        observed_peak_reserved_bytes: peak_res.unwrap_or(end_res),
        peak_exact: peak_alloc.is_some(),
        peak_event: None,
        inactive_split_bytes: None,
        segments: None,
        expandable_segments: None,
        expandable_free_bytes: None,
        observed_peak_requested_bytes: 0,
        reserved_unknown: peak_res.is_none(),
        free_reserved_bytes: end_res.saturating_sub(end_alloc),
        largest_free_block_bytes: None,
        events: d.events,
        has_history: d.events > 0,
        // The profiler's running totals are the allocator's own; there is nothing to replay.
        replay_consistent: true,
        consistency: Consistency {
            consistent: true,
            ..Consistency::default()
        },
        history_starts_mid_run: d.start_allocated_bytes.unwrap_or(0) > 0,
        ooms: Vec::new(),
        top_sites: Vec::new(),
        top_sites_at_peak: Vec::new(),
        categories_at_peak: None,
        categories_at_dump: None,
        structure: Default::default(),
        leak_judgement: if d.events == 0 {
            LeakJudgement::not(NotJudged::NoMemoryEvents, 0)
        } else {
            let ends: Vec<u64> = d
                .steps
                .iter()
                .filter_map(|s| s.end_allocated_bytes)
                .map(|b| b.max(0) as u64)
                .collect();
            super::judge_steps(&ends, false)
        },
    }
}

/// Runs every trace analysis.
pub fn analyze_trace(t: &Trace, path: &Path, file_bytes: u64) -> Analysis {
    analyze_trace_with_memory(t, path, file_bytes, trace_memory::analyze(t)).0
}

/// [`analyze_trace`] on a memory analysis the caller made, handed back with the report (the
/// TUI browses its per-step figures and growth series).
pub fn analyze_trace_with_memory(
    t: &Trace,
    path: &Path,
    file_bytes: u64,
    mem: TraceMemory,
) -> (Analysis, TraceMemory) {
    let g = graph::growth(t);
    let mut notes = t.load_notes.clone();
    notes.extend(mem.notes.iter().cloned());
    notes.extend(g.notes.iter().cloned());
    let step_names: Vec<String> = mem.steps.iter().map(|s| s.name.clone()).collect();
    let mut devices = Vec::new();
    let mut leaks = Vec::new();
    let mut steps = Vec::new();
    for d in mem.devices.iter().filter(|d| d.device.is_cuda()) {
        let rep = device_report(d);
        if d.start_allocated_bytes.unwrap_or(0) > 0 {
            notes.push(format!(
                "{}: {} were already allocated when profiling began; peaks are those of the profiled window",
                d.label,
                bytes(d.start_allocated_bytes.unwrap_or(0).max(0) as u64)
            ));
        }
        for leak in leaks_from_growth(&d.growth, &step_names) {
            leaks.push(LeakReport {
                device: rep.device,
                leak,
            });
        }
        for s in &d.steps {
            let name = mem
                .steps
                .iter()
                .find(|x| x.number == s.number)
                .map(|x| x.name.clone())
                .unwrap_or_else(|| format!("ProfilerStep#{}", s.number));
            steps.push(StepReport {
                device: rep.device,
                name,
                start_event: None,
                end_event: None,
                peak_allocated_bytes: s.peak_allocated_bytes.unwrap_or(0).max(0) as u64,
                end_allocated_bytes: s.end_allocated_bytes.unwrap_or(0).max(0) as u64,
                source: super::steps::StepSource::Annotation,
            });
        }
        devices.push(rep);
    }
    let non_cuda: Vec<String> = mem
        .devices
        .iter()
        .filter(|d| !d.device.is_cuda())
        .map(|d| d.label.clone())
        .collect();
    if !non_cuda.is_empty() {
        notes.push(format!(
            "memory events of {} are not analysed (CUDA devices only)",
            non_cuda.join(", ")
        ));
    }
    if mem.devices.is_empty() {
        notes.push(
            "the trace has no [memory] events: record it with profile_memory=True to see memory"
                .into(),
        );
    }
    let judgement = if devices.is_empty() {
        let reason = if mem.devices.is_empty() {
            NotJudged::NoMemoryEvents
        } else {
            NotJudged::CpuOnly
        };
        LeakJudgement::not(reason, 0)
    } else {
        super::overall_judgement(&devices)
    };
    let verdict = if let Some(f) = g.findings.first() {
        let at = f
            .site
            .as_ref()
            .map(|s| format!(" in {}", s.function))
            .unwrap_or_default();
        Verdict {
            kind: VerdictKind::GraphGrowth,
            summary: format!(
                "autograd graph grows by {} never-backpropagated `{}` node(s) per step{at} over {} steps: a tensor with grad history is being accumulated",
                f.nodes_per_step, f.op, f.steps
            ),
            leak_judgement: judgement,
        }
    } else if let Some(l) = leaks.first() {
        let at = l
            .leak
            .site
            .as_ref()
            .map(|s| format!(" at {}:{}", s.file, s.line))
            .unwrap_or_default();
        Verdict {
            kind: VerdictKind::Leak,
            summary: format!(
                "memory leak on cuda:{}: allocations{at} from {} steps are still alive, {} per step",
                l.device,
                l.leak.steps,
                bytes(l.leak.growth_bytes_per_step.max(0.0) as u64)
            ),
            leak_judgement: judgement,
        }
    } else if judgement.judged {
        let peak = devices.iter().filter_map(|d| d.peak_allocated_bytes).max();
        // Without [memory] events there is no peak to state, not a peak of 0 B.
        let memory = match peak {
            Some(p) => format!("allocated peak {}", bytes(p)),
            None => "no memory recorded (no [memory] events)".to_string(),
        };
        Verdict {
            kind: VerdictKind::Ok,
            summary: format!(
                "no leak and no autograd graph growth found over {} profiled steps; {memory}",
                mem.steps.len(),
            ),
            leak_judgement: judgement,
        }
    } else {
        let peak = devices.iter().filter_map(|d| d.peak_allocated_bytes).max();
        let memory = match peak {
            Some(p) => format!("allocated peak {}", bytes(p)),
            None => "no memory recorded".to_string(),
        };
        Verdict {
            kind: VerdictKind::Unjudged,
            summary: format!(
                "leaks not judged: {}; {memory}",
                super::not_judged_reason(&judgement)
            ),
            leak_judgement: judgement,
        }
    };
    let analysis = Analysis {
        schema: SCHEMA,
        input: Input {
            path: path.display().to_string(),
            kind: "trace",
            bytes: file_bytes,
            layout: None,
        },
        verdict,
        devices,
        leaks,
        bounded_growth: Vec::new(),
        steps,
        categories: None,
        graph: Some(GraphSection {
            forward_nodes: g.forward_nodes,
            backward_nodes: g.backward_nodes,
            unconsumed_nodes: g.unconsumed_nodes,
            steps: g.steps,
            growth: g.findings,
            notes: g.notes,
        }),
        notes,
    };
    (analysis, mem)
}
