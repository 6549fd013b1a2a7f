//! The `analyze` report for a profiler trace, in the same shape as for a snapshot.
//!
//! CI gates and the TUI read one schema, whatever the user captured: a trace fills the fields
//! it can back with evidence (allocated and reserved totals, steps, leaks, graph growth) and
//! leaves the snapshot-only ones (`active`, `requested`, segments) `null`.

use std::path::Path;

use super::graph::{self, GraphGrowth};
use super::notes::{GraphNote, Note, TraceNote};
use super::product::TraceProduct;
use super::trace_memory::{self, DeviceMemory, TraceMemory};
use super::{
    Analysis, DeviceReport, FromStart, Input, LeakJudgement, LeakReport, NotJudged, StepFromStart,
    StepReport, SCHEMA,
};
use crate::model::trace::{CountedFrom, DeviceKey, Trace};

/// The autograd graph section of the report (`graph.growth[]`).
#[derive(Clone, Debug, serde::Serialize)]
pub struct GraphSection {
    pub forward_nodes: usize,
    pub backward_nodes: usize,
    /// `AccumulateGrad` evaluations (leaves' `.grad` written by the engine), not counted as
    /// backward nodes.
    pub leaf_accumulations: usize,
    pub unconsumed_nodes: usize,
    pub steps: usize,
    /// In JSON, each with its explanation and fix (`report::json`), after `notes`.
    #[serde(skip)]
    pub growth: Vec<GraphGrowth>,
    /// In JSON, each in words (`report::json`, `crate::wording::note`).
    #[serde(skip)]
    pub notes: Vec<GraphNote>,
}

/// A device's allocated figures as changes from the trace's start, where they count from it.
fn from_start(d: &DeviceMemory) -> Option<FromStart> {
    (d.counted_from == CountedFrom::TraceStart).then(|| FromStart {
        allocated_bytes: d.end_allocated_bytes.unwrap_or(0),
        // The start (0) is a point of the curve too.
        peak_allocated_bytes: d.peak.as_ref().map_or(0, |p| p.allocated_bytes).max(0),
        lowest_allocated_bytes: d.lowest_allocated_bytes.unwrap_or(0).min(0),
    })
}

/// A figure of the device's curve in bytes in use: itself, or where the curve counts from the
/// trace's start, the least the bytes in use can be there.
fn in_use(from_start: Option<&FromStart>, v: i64) -> u64 {
    match from_start {
        Some(f) => f.at_least(v),
        None => v.max(0) as u64,
    }
}

fn device_report(d: &DeviceMemory) -> DeviceReport {
    let from_start = from_start(d);
    let rel = from_start.as_ref();
    let end = d.end_allocated_bytes.unwrap_or(0);
    let end_alloc = rel.is_none().then(|| end.max(0) as u64);
    // Reserved as the events record it: unknown where none does (never 0 for want of a figure).
    let end_res = d
        .timeline
        .iter()
        .rev()
        .find_map(|p| p.reserved_bytes)
        .map(|v| v.max(0) as u64);
    let peak_alloc = d.peak.as_ref().map(|p| in_use(rel, p.allocated_bytes));
    let peak_res = d.peak_reserved_bytes.map(|v| v.max(0) as u64);
    DeviceReport {
        allocated_counted_from: d.counted_from,
        allocated_bytes: end_alloc,
        reserved_bytes: end_res,
        // Changes from the start give no exact peak in bytes in use, only a lower bound.
        peak_allocated_bytes: peak_alloc.filter(|_| rel.is_none()),
        peak_reserved_bytes: peak_res,
        observed_peak_allocated_bytes: peak_alloc.unwrap_or(in_use(rel, end)),
        observed_peak_reserved_bytes: peak_res.or(end_res),
        peak_exact: peak_alloc.is_some() && rel.is_none(),
        reserved_unknown: end_res.is_none(),
        free_reserved_bytes: end_res.zip(end_alloc).map(|(r, a)| r.saturating_sub(a)),
        from_start,
        // The profiler's running totals are the allocator's own; there is nothing to replay
        // (the builder's consistency says so).
        // Changes from the start say nothing of what was in use then: not an empty allocator.
        history_starts_mid_run: rel.is_some() || d.start_allocated_bytes.unwrap_or(0) > 0,
        leak_judgement: if d.events == 0 {
            LeakJudgement::not(NotJudged::NoMemoryEvents, 0)
        } else {
            // Step ends compared with each other: a common offset does not change the judgement.
            let ends: Vec<u64> = d
                .steps
                .iter()
                .filter_map(|s| s.end_allocated_bytes)
                .map(|b| in_use(rel, b))
                .collect();
            super::judge_steps(&ends, false)
        },
        ..DeviceReport::unknown(d.device.device_id.max(0) as u32, d.events)
    }
}

/// A step of a device, in bytes in use (lower bounds where the device counts from the trace's
/// start, with the changes beside them).
fn step_report(d: &DeviceReport, s: &trace_memory::StepMemory, name: String) -> StepReport {
    let rel = d.from_start.as_ref();
    let (peak, end) = (
        s.peak_allocated_bytes.unwrap_or(0),
        s.end_allocated_bytes.unwrap_or(0),
    );
    StepReport {
        device: d.device,
        name,
        start_event: None,
        end_event: None,
        peak_allocated_bytes: in_use(rel, peak),
        end_allocated_bytes: in_use(rel, end),
        source: super::steps::StepSource::Annotation,
        from_start: rel.map(|_| StepFromStart {
            peak_allocated_bytes: peak,
            end_allocated_bytes: end,
        }),
    }
}

/// The verdict's memory clause: the highest allocated peak in bytes in use where a device
/// records one, else the highest change from the trace's start; `None` without memory.
/// Runs every trace analysis: the report only.
pub fn analyze_trace(t: &Trace, path: &Path, file_bytes: u64) -> Analysis {
    analyze_trace_product(t, path, file_bytes).analysis
}

/// A trace analysed once: the report, and what the views browse, so that no view runs a pass
/// of its own (the TUI follows allocations to their frees and events to their user lines).
pub struct AnalyzedTrace {
    pub analysis: Analysis,
    /// The memory timeline, per-step figures and growth of every device.
    pub memory: TraceMemory,
    /// Each allocation's free, as the memory pass paired them.
    pub pairing: trace_memory::Pairing,
    /// Events to their user lines.
    pub(crate) resolver: trace_memory::StackResolver,
    /// Per `analysis.leaks` entry: the bytes of its site still alive at the end, by profiled
    /// step (from the growth series of its device).
    pub leak_series: Vec<Vec<u64>>,
    /// The autograd graph the growth findings were read from (`query`'s `graph_nodes`).
    pub graph: graph::AutogradGraph,
}

/// Runs every trace analysis once, keeping what the views browse.
pub fn analyze_trace_product(t: &Trace, path: &Path, file_bytes: u64) -> AnalyzedTrace {
    analyze_trace_product_with(t, path, file_bytes, crate::threads::wanted())
}

/// [`analyze_trace_product`] on `threads` threads (1: in order on the calling thread). The
/// memory pass (the pairing and the stack resolver, each independent of the other, then the
/// timeline) and the autograd graph read only the trace, so they run side by side.
pub fn analyze_trace_product_with(
    t: &Trace,
    path: &Path,
    file_bytes: u64,
    threads: usize,
) -> AnalyzedTrace {
    use crate::model::trace::phases::Phase;
    use crate::threads::join;
    let all = Phase::start("analysis");
    let ((pairing, resolver, mem), graph) = join(
        threads,
        || {
            let _p = Phase::start("analysis.memory");
            // One pairing and one resolver serve the analysis and the views.
            let (pairing, (resolver, sets)) = join(
                threads,
                || {
                    let _p = Phase::start("analysis.pair");
                    trace_memory::pair(t)
                },
                || {
                    let _p = Phase::start("analysis.resolver");
                    (
                        trace_memory::StackResolver::new(t),
                        trace_memory::TraceSets::new(t),
                    )
                },
            );
            let _p = Phase::start("analysis.timeline");
            let mem = trace_memory::analyze_with(t, &pairing, &resolver, &sets);
            (pairing, resolver, mem)
        },
        || {
            let _p = Phase::start("analysis.graph");
            let graph = graph::build(t);
            // The growth findings need the graph alone: read beside the memory pass too.
            let growth = graph::growth_of(t, &graph);
            (graph, growth)
        },
    );
    let (graph, growth) = graph;
    let p = Phase::start("analysis.report");
    let (analysis, memory) = analyze_trace_with_memory(t, path, file_bytes, mem, growth);
    p.end();
    let leak_series = analysis
        .leaks
        .iter()
        .map(|l| {
            let mut per = vec![0u64; t.steps.len()];
            let dm = memory
                .devices
                .iter()
                .find(|d| d.device.is_cuda() && d.device.device_id.max(0) as u32 == l.device);
            for g in dm
                .into_iter()
                .flat_map(|d| &d.growth)
                .filter(|g| g.site == l.leak.site)
            {
                for (i, b) in g.per_step_bytes.iter().enumerate().take(per.len()) {
                    per[i] += b;
                }
            }
            per
        })
        .collect();
    all.end();
    AnalyzedTrace {
        analysis,
        memory,
        pairing,
        resolver,
        leak_series,
        graph,
    }
}

/// The report of a memory analysis already made, handed back with it.
fn analyze_trace_with_memory(
    t: &Trace,
    path: &Path,
    file_bytes: u64,
    mem: TraceMemory,
    mut g: graph::GraphReport,
) -> (Analysis, TraceMemory) {
    let cut = super::verdict::TraceCut::of(t);
    // A trace's file is not written in time order (its ops, then its memory events, then its
    // Python calls), so a cut drops an unknown part of each: a free, a backward, a stack past
    // the cut. What is still alive at its end, or never consumed, cannot be told.
    if cut.is_some() {
        g.findings.clear();
    }
    let mut notes: Vec<Note> = t.load_notes.iter().cloned().map(Note::from).collect();
    notes.extend(mem.notes.iter().cloned().map(Note::from));
    notes.extend(g.notes.iter().cloned().map(Note::from));
    let step_names: Vec<String> = mem.steps.iter().map(|s| s.name.clone()).collect();
    // Each step's name by number, the first of a number as a search in order finds it (a
    // search per step of each device was quadratic: 0.3 s on a 9 GB trace's 23k steps).
    let mut step_name: rustc_hash::FxHashMap<u64, &str> = Default::default();
    for x in &mem.steps {
        step_name.entry(x.number).or_insert(&x.name);
    }
    let mut devices = Vec::new();
    let mut leaks = Vec::new();
    let mut steps = Vec::new();
    for d in mem.devices.iter().filter(|d| d.device.is_cuda()) {
        let rep = device_report(d);
        if d.start_allocated_bytes.unwrap_or(0) > 0 {
            notes.push(
                TraceNote::AllocatedBeforeProfiling {
                    device: d.device,
                    bytes: d.start_allocated_bytes.unwrap_or(0).max(0) as u64,
                }
                .into(),
            );
        }
        for leak in super::leaks::trace::find(&d.growth, &step_names) {
            leaks.push(LeakReport {
                device: rep.device,
                leak,
            });
        }
        for s in &d.steps {
            let name = step_name
                .get(&s.number)
                .map(|x| (*x).to_owned())
                .unwrap_or_else(|| format!("ProfilerStep#{}", s.number));
            steps.push(step_report(&rep, s, name));
        }
        devices.push(rep);
    }
    let non_cuda: Vec<DeviceKey> = mem
        .devices
        .iter()
        .filter(|d| !d.device.is_cuda())
        .map(|d| d.device)
        .collect();
    if !non_cuda.is_empty() {
        notes.push(TraceNote::NotCuda { devices: non_cuda }.into());
    }
    // A trace without [memory] events: `trace_memory`'s note says so (once).
    // Without CUDA memory events the profiler's steps are still the program's steps: counted,
    // with no memory figures to show for them.
    if devices.is_empty() && !mem.steps.is_empty() {
        let (a, b) = (&mem.steps[0], &mem.steps[mem.steps.len() - 1]);
        notes.push(
            TraceNote::StepsWithoutMemory {
                steps: mem.steps.len(),
                first: a.name.clone(),
                last: b.name.clone(),
            }
            .into(),
        );
    }
    if cut.is_some() {
        leaks.clear();
    }
    let judgement = if devices.is_empty() {
        // A file cut short before any memory event says nothing of how the trace was recorded.
        let reason = if mem.devices.is_empty() && cut.is_some() {
            NotJudged::CutBeforeMemoryEvents
        } else if mem.devices.is_empty() {
            NotJudged::NoMemoryEvents
        } else {
            NotJudged::CpuOnly
        };
        LeakJudgement::not(reason, mem.steps.len())
    } else if cut.is_some() {
        LeakJudgement::not(NotJudged::CutShort, mem.steps.len())
    } else {
        super::overall_judgement(&devices)
    };
    let mut verdict = super::verdict::of_trace(
        &devices,
        &leaks,
        &super::verdict::TraceGraph {
            findings: &g.findings,
            forward_nodes: g.forward_nodes,
            backward_nodes: g.backward_nodes,
            leaf_accumulations: g.leaf_accumulations,
            steps: g.steps,
        },
        mem.steps.len(),
        judgement,
    );
    verdict.cut = cut;
    let analysis = Analysis {
        schema: SCHEMA,
        input: Input {
            path: path.display().to_string(),
            kind: super::CaptureKind::Trace,
            bytes: file_bytes,
            layout: None,
            origin: None,
            load_notes: t.load_notes.clone(),
        },
        verdict,
        device: None,
        devices,
        leaks,
        bounded_growth: Vec::new(),
        excluded_growth: Vec::new(),
        steps,
        categories: None,
        graph: Some(GraphSection {
            forward_nodes: g.forward_nodes,
            backward_nodes: g.backward_nodes,
            leaf_accumulations: g.leaf_accumulations,
            unconsumed_nodes: g.unconsumed_nodes,
            steps: g.steps,
            growth: g.findings,
            notes: g.notes,
        }),
        notes,
    };
    (analysis, mem)
}

/// A moment of a trace's memory that a view draws: the allocated peak, a step's own peak, or
/// the trace's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceMoment {
    Peak,
    /// The peak inside `ProfilerStep#N`.
    Step(u64),
    End,
}

/// The memory of one device at a [`TraceMoment`]: the allocations made during the trace and
/// still alive then, and what the allocator's total says was in use besides them.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveAt {
    /// The memory event the moment falls on (an index into `Trace::memory`).
    pub event: usize,
    pub ts: f64,
    /// The allocator's running total there (in the device's [`CountedFrom`]).
    pub total_allocated: Option<i64>,
    /// Allocations made during the trace, alive at the moment (indices into `Trace::memory`).
    pub live: Vec<usize>,
    pub live_bytes: u64,
    /// In use at the moment but allocated before the trace began: the total less `live_bytes`,
    /// where the total counts bytes in use (`None` where it counts from the trace's start).
    pub before_trace_bytes: Option<u64>,
}

/// Bytes allocated by one outermost op (`aten::linear`, `autograd::engine::evaluate_function:
/// AddmmBackward0`) over the trace, on one device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpBytes {
    /// `None`: allocations made outside any recorded op.
    pub op: Option<String>,
    pub allocated_bytes: u64,
    pub allocations: u32,
    /// Of them, alive at the device's allocated peak.
    pub live_at_peak_bytes: u64,
}

impl TraceProduct {
    /// The memory events of a device, in time order (indices into `Trace::memory`).
    fn device_events(&self, device: DeviceKey) -> Vec<usize> {
        (0..self.trace.memory.len())
            .filter(|&i| self.trace.memory[i].device == device)
            .collect()
    }

    /// The event a moment falls on: the first that reaches the highest total in the range.
    fn moment_event(&self, events: &[usize], at: TraceMoment) -> Option<usize> {
        let t = &self.trace;
        let range: &[usize] = match at {
            TraceMoment::End => return events.last().copied(),
            TraceMoment::Peak => events,
            TraceMoment::Step(n) => {
                let s = t.steps.iter().find(|s| s.number == n)?;
                let a = events.partition_point(|&i| t.memory[i].ts < s.ts);
                let b = events.partition_point(|&i| t.memory[i].ts <= s.end());
                &events[a..b]
            }
        };
        let mut best: Option<(usize, i64)> = None;
        for &i in range {
            if let Some(a) = t.memory[i].total_allocated {
                if best.is_none_or(|(_, b)| a > b) {
                    best = Some((i, a));
                }
            }
        }
        best.map(|(i, _)| i).or_else(|| range.last().copied())
    }

    /// The live memory of `device` at `at`; `None` where the device has no memory event (in
    /// that step).
    pub fn live_at(&self, device: DeviceKey, at: TraceMoment) -> Option<LiveAt> {
        let t = &self.trace;
        let events = self.device_events(device);
        let e = self.moment_event(&events, at)?;
        let mut live = Vec::new();
        let mut live_bytes = 0u64;
        for &i in events.iter().take_while(|&&i| i <= e) {
            let m = &t.memory[i];
            let freed_later = self.pairing.freed_by[i].is_none_or(|f| f as usize > e);
            if m.bytes > 0 && freed_later {
                live.push(i);
                live_bytes += m.bytes as u64;
            }
        }
        let total = t.memory[e].total_allocated;
        let before_trace_bytes = (t.counted_from(device) == CountedFrom::Zero)
            .then(|| total.map(|v| (v.max(0) as u64).saturating_sub(live_bytes)))
            .flatten();
        Some(LiveAt {
            event: e,
            ts: t.memory[e].ts,
            total_allocated: total,
            live,
            live_bytes,
            before_trace_bytes,
        })
    }

    /// The Python stack that explains a memory event (for backward work, its forward's).
    pub fn stack_of_event(&self, i: usize) -> crate::model::StackId {
        self.resolver.stack_of(&self.trace, &self.trace.memory[i])
    }

    /// Bytes allocated per outermost op on `device`, most first.
    pub fn top_ops(&self, device: DeviceKey) -> Vec<OpBytes> {
        let t = &self.trace;
        let peak: std::collections::HashSet<usize> = self
            .live_at(device, TraceMoment::Peak)
            .map(|l| l.live.into_iter().collect())
            .unwrap_or_default();
        let mut by: rustc_hash::FxHashMap<Option<crate::model::Sym>, OpBytes> = Default::default();
        for i in self.device_events(device) {
            let m = &t.memory[i];
            if m.bytes <= 0 {
                continue;
            }
            let top = m.op.map(|o| t.top_op(o));
            let e = by
                .entry(top.map(|o| t.op(o).name))
                .or_insert_with(|| OpBytes {
                    op: top.map(|o| t.op_name(o).to_owned()),
                    allocated_bytes: 0,
                    allocations: 0,
                    live_at_peak_bytes: 0,
                });
            e.allocated_bytes += m.bytes as u64;
            e.allocations += 1;
            if peak.contains(&i) {
                e.live_at_peak_bytes += m.bytes as u64;
            }
        }
        let mut v: Vec<OpBytes> = by.into_values().collect();
        v.sort_by(|a, b| {
            b.allocated_bytes
                .cmp(&a.allocated_bytes)
                .then_with(|| a.op.cmp(&b.op))
        });
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::trace::{DeviceKey, Tid, TraceBuilder, NO_ADDR};

    /// A torch 1.9-style trace on cuda:0 (only `Bytes`): a block from before the trace is freed
    /// (-1 KiB), then 4 KiB are allocated and 1 KiB freed, over one step.
    fn relative_trace() -> Trace {
        let dev = DeviceKey {
            device_type: 1,
            device_id: 0,
        };
        let mut b = TraceBuilder::new();
        let tid = Tid(1);
        b.add_step(1, "ProfilerStep#1", 0.0, 100.0, tid);
        for (ts, bytes) in [(10.0, -1024), (20.0, 4096), (30.0, -1024)] {
            b.add_memory(ts, tid, NO_ADDR, bytes, None, None, dev);
        }
        b.build()
    }

    #[test]
    fn changes_from_the_start_are_bounds_not_bytes_in_use() {
        let t = relative_trace();
        let a = analyze_trace(&t, Path::new("t.json"), 0);
        let d = &a.devices[0];
        assert_eq!(d.allocated_counted_from, CountedFrom::TraceStart);
        assert_eq!(
            d.from_start,
            Some(FromStart {
                allocated_bytes: 2048,
                peak_allocated_bytes: 3072,
                lowest_allocated_bytes: -1024,
            })
        );
        // At least 1 KiB was in use at the start (it was freed): the peak was at least 4 KiB.
        assert_eq!(d.observed_peak_allocated_bytes, 4096);
        assert_eq!((d.allocated_bytes, d.peak_allocated_bytes), (None, None));
        assert_eq!((d.reserved_bytes, d.free_reserved_bytes), (None, None));
        let s = &a.steps[0];
        assert_eq!(
            s.from_start,
            Some(StepFromStart {
                peak_allocated_bytes: 3072,
                end_allocated_bytes: 2048,
            })
        );
        assert_eq!(
            (s.peak_allocated_bytes, s.end_allocated_bytes),
            (4096, 3072)
        );
        let f = d.figure(crate::analysis::figures::Counter::Allocated);
        assert_eq!(f.current, None);
        assert_eq!(f.peak, crate::analysis::figures::Bound::AtLeast(4096));
        assert!(crate::wording::verdict(&a.verdict).contains("+3.0 KiB above the trace's start"));
    }
}
