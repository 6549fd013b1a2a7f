//! The verdict pass: the last pass of both pipelines (snapshot and trace), deciding what the
//! one line a user reads first says, as typed evidence.
//!
//! Both capture kinds decide here, in one order: the OOM that ended the run, then autograd
//! graph growth (traces), then a leak, then a clean or an unjudged capture. The sentence is
//! not made here: [`crate::wording::verdict`] says it, for every view, from this evidence.

use super::graph::GraphGrowth;
use super::leaks::{Extent, LeakEvidence, LeakKind};
use super::oom::Cause;
use super::sites::Site;
use super::{
    last_oom_in, overall_judgement, DeviceReport, LeakJudgement, LeakReport, OomReport, Verdict,
    VerdictKind,
};

/// What the verdict rests on.
#[derive(Clone, Debug)]
pub enum VerdictEvidence {
    /// The last OOM (the one that ended the run), explained.
    Oom {
        device: u32,
        rounded_bytes: u64,
        cause: Cause,
        site: Option<Site>,
        /// The OOM itself: its cause and the figures it rests on.
        report: Box<OomReport>,
        /// OOMs in the whole capture (earlier ones were caught by the program).
        count: usize,
    },
    /// An OOM raised outside the caching allocator (NCCL, cuBLAS, cuDNN, CUDA), with the
    /// device's accounting at the dump.
    OutsideOom {
        oom: super::device::OutsideOom,
        accounting: Option<super::device::Accounting>,
    },
    /// Attempts that ended in an OOM, still held while the next one ran.
    RetainedAttempts {
        device: u32,
        attempts: usize,
        site: Option<Site>,
        held_bytes: u64,
        findings: usize,
    },
    /// A leak found in a snapshot's log.
    Leak {
        device: u32,
        kind: LeakKind,
        site: Option<Site>,
        per_step_bytes: u64,
        steps: usize,
        extent: Extent,
        findings: usize,
        /// For a cache that gained entries on some steps and never freed them: on how many
        /// steps it gained, and the bytes it holds.
        irregular: Option<(usize, u64)>,
        /// The mechanism that keeps it, where the stack shows one.
        holder: Option<crate::analysis::leaks::KeptBy>,
    },
    /// A leak found in a trace's memory events (sites known by function and file only).
    TraceLeak {
        device: u32,
        kind: LeakKind,
        site: Option<Site>,
        /// The function of the loop that keeps it, where the trace shows it.
        kept_by: Option<String>,
        /// The mechanism that keeps it, where the stack shows one.
        holder: Option<crate::analysis::leaks::KeptBy>,
        sites: usize,
        steps: usize,
        per_step_bytes: u64,
    },
    /// A trace's autograd graph grows every step.
    GraphGrowth {
        nodes_per_step: f64,
        op: String,
        function: Option<String>,
        steps: usize,
    },
    /// Leaks judged, none found.
    Clean { memory: Memory },
    /// Leaks could not be judged (the reason is the verdict's `leak_judgement`).
    Unjudged { memory: Memory },
}

/// The memory figures a verdict ends with.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Memory {
    /// A snapshot: allocated and reserved at the end, summed over its devices.
    Totals {
        allocated: u64,
        reserved: u64,
        devices: usize,
    },
    /// A trace: its highest allocated peak, exact where the trace gives bytes in use.
    TracePeak(u64),
    /// A trace that gives only changes from its start (torch 1.9): the highest change.
    TracePeakChange(i64),
    /// A trace with no CUDA memory events.
    TraceNone,
    /// A trace judged clean: why its autograd graph's growth could not be judged, if so.
    TraceGraph {
        peak: Option<TracePeakOf>,
        steps: usize,
        graph_not_judged: Option<GraphNotJudged>,
    },
}

/// A trace's allocated peak, as the trace gives it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TracePeakOf {
    Bytes(u64),
    Change(i64),
}

/// Why a trace's autograd graph growth was not judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphNotJudged {
    /// No op carries an autograd sequence number.
    NoSequenceNumbers,
    /// No backward pass in the trace.
    NoBackward,
    /// Fewer than 3 profiled steps.
    TooFewSteps,
}

/// A snapshot's verdict.
pub fn of_snapshot(devices: &[DeviceReport], leaks: &[LeakReport]) -> Verdict {
    let judgement = overall_judgement(devices);
    let n: usize = devices.iter().map(|d| d.ooms.len()).sum();
    let evidence = if let Some((dev, o)) = last_oom_in(devices) {
        VerdictEvidence::Oom {
            device: dev,
            rounded_bytes: o.rounded_bytes,
            cause: o.cause,
            site: o.site.clone(),
            report: Box::new(o.clone()),
            count: n,
        }
    } else if let Some(l) = leaks.first() {
        if l.leak.kind == LeakKind::RetainedAttempt {
            VerdictEvidence::RetainedAttempts {
                device: l.device,
                attempts: l.leak.steps,
                site: l.leak.site.clone(),
                held_bytes: l.leak.live_bytes,
                findings: leaks.len(),
            }
        } else {
            VerdictEvidence::Leak {
                device: l.device,
                kind: l.leak.kind,
                site: l.leak.site.clone(),
                per_step_bytes: l.leak.growth_bytes_per_step.max(0.0) as u64,
                steps: l.leak.steps,
                extent: l.leak.extent,
                findings: leaks.len(),
                irregular: match &l.leak.evidence {
                    LeakEvidence::Irregular(e) => Some((e.gain_steps.len(), e.bytes)),
                    _ => None,
                },
                holder: l.leak.kept_by.clone(),
            }
        }
    } else {
        // Saturating: hostile files can declare sizes near 2^64 on several devices.
        let memory = Memory::Totals {
            allocated: devices.iter().fold(0u64, |a, d| {
                a.saturating_add(d.allocated_bytes.unwrap_or(0))
            }),
            reserved: devices
                .iter()
                .fold(0u64, |a, d| a.saturating_add(d.reserved_bytes.unwrap_or(0))),
            devices: devices.len(),
        };
        if judgement.judged {
            VerdictEvidence::Clean { memory }
        } else {
            VerdictEvidence::Unjudged { memory }
        }
    };
    decided(evidence, judgement)
}

/// What a trace's graph analysis tells the verdict.
pub struct TraceGraph<'a> {
    pub findings: &'a [GraphGrowth],
    pub forward_nodes: usize,
    pub backward_nodes: usize,
    pub leaf_accumulations: usize,
    pub steps: usize,
}

/// A trace's verdict. `profiled_steps` is the number of profiler steps; `judgement` the leak
/// judgement the trace supports.
pub fn of_trace(
    devices: &[DeviceReport],
    leaks: &[LeakReport],
    g: &TraceGraph,
    profiled_steps: usize,
    judgement: LeakJudgement,
) -> Verdict {
    let evidence = if let Some(f) = g.findings.first() {
        VerdictEvidence::GraphGrowth {
            nodes_per_step: f.nodes_per_step,
            op: f.op.clone(),
            function: f.site.as_ref().map(|s| s.function.clone()),
            steps: f.steps,
        }
    } else if let Some(l) = leaks.first() {
        VerdictEvidence::TraceLeak {
            device: l.device,
            kind: l.leak.kind,
            site: l.leak.site.clone(),
            kept_by: l.leak.cause_site.as_ref().map(|k| k.function.clone()),
            holder: l.leak.kept_by.clone(),
            sites: 1 + l.leak.related_sites.len(),
            steps: l.leak.steps,
            per_step_bytes: (l.leak.grown_bytes() / l.leak.steps.max(1) as f64).max(0.0) as u64,
        }
    } else if judgement.judged {
        // Growth of the graph is judged only where the graph can be followed (the same
        // conditions `check` SKIPs `graph-growth` on).
        let graph_not_judged = if g.forward_nodes == 0 {
            Some(GraphNotJudged::NoSequenceNumbers)
        } else if g.backward_nodes + g.leaf_accumulations == 0 {
            Some(GraphNotJudged::NoBackward)
        } else if g.steps < 3 {
            Some(GraphNotJudged::TooFewSteps)
        } else {
            None
        };
        VerdictEvidence::Clean {
            memory: Memory::TraceGraph {
                peak: trace_peak(devices),
                steps: profiled_steps,
                graph_not_judged,
            },
        }
    } else {
        VerdictEvidence::Unjudged {
            memory: match trace_peak(devices) {
                Some(TracePeakOf::Bytes(p)) => Memory::TracePeak(p),
                Some(TracePeakOf::Change(c)) => Memory::TracePeakChange(c),
                None => Memory::TraceNone,
            },
        }
    };
    decided(evidence, judgement)
}

/// The highest allocated peak of a trace's devices: bytes in use where the trace gives them,
/// else the highest change from the trace's start.
fn trace_peak(devices: &[DeviceReport]) -> Option<TracePeakOf> {
    let exact = devices.iter().filter_map(|d| d.peak_allocated_bytes).max();
    let change = devices
        .iter()
        .filter_map(|d| d.from_start.map(|f| f.peak_allocated_bytes))
        .max();
    match (exact, change) {
        (Some(p), _) => Some(TracePeakOf::Bytes(p)),
        (None, Some(c)) => Some(TracePeakOf::Change(c)),
        (None, None) => None,
    }
}

/// The verdict's kind follows from its evidence.
fn decided(evidence: VerdictEvidence, leak_judgement: LeakJudgement) -> Verdict {
    let kind = match &evidence {
        VerdictEvidence::Oom { cause, .. } => VerdictKind::of_oom(*cause),
        VerdictEvidence::OutsideOom { .. } => VerdictKind::of_oom(Cause::OutsideAllocator),
        VerdictEvidence::RetainedAttempts { .. }
        | VerdictEvidence::Leak { .. }
        | VerdictEvidence::TraceLeak { .. } => VerdictKind::Leak,
        VerdictEvidence::GraphGrowth { .. } => VerdictKind::GraphGrowth,
        VerdictEvidence::Clean { .. } => VerdictKind::Ok,
        VerdictEvidence::Unjudged { .. } => VerdictKind::Unjudged,
    };
    Verdict {
        kind,
        evidence,
        leak_judgement,
        cut: None,
    }
}

/// A trace cut short: its file ends before its events do (a run killed while writing, a copy
/// cut off). What the trace says is about the events before the cut; memory events, steps and
/// OOMs may lie past it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TraceCut {
    /// Where the file ends: its length in bytes of JSON text (decompressed).
    pub at_byte: u64,
    /// Events read before the cut.
    pub events: u64,
    /// `[memory]` events among them.
    pub memory_events: u64,
}

impl TraceCut {
    /// The cut of a trace, if its file was cut short.
    pub fn of(t: &crate::model::trace::Trace) -> Option<TraceCut> {
        t.cut_at_byte.map(|at_byte| TraceCut {
            at_byte,
            events: t.counts.events,
            memory_events: t.memory.len() as u64,
        })
    }
}

/// An OOM raised outside the allocator ended the run: the snapshot was dumped as it escaped,
/// so allocator OOMs in the log were caught by the program before it. It replaces the verdict.
pub fn with_outside_oom(v: Verdict, device: &super::device::DeviceSection) -> Verdict {
    let super::device::DeviceSection::Accounted {
        outside_oom: Some(oom),
        ..
    } = device
    else {
        return v;
    };
    decided(
        VerdictEvidence::OutsideOom {
            oom: oom.clone(),
            accounting: device.own().cloned(),
        },
        v.leak_judgement,
    )
}
