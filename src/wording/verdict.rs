//! The verdict's sentence, and why leaks were not judged.

use crate::analysis::leaks::{self, LeakKind};
use crate::analysis::sites::Site;
use crate::analysis::verdict::{GraphNotJudged, Memory, TracePeakOf, VerdictEvidence};
use crate::analysis::{LeakJudgement, NotJudged, Verdict};
use crate::units::{bytes, signed_bytes};

/// The one line a user reads first.
pub fn verdict(v: &Verdict) -> String {
    let said = evidence(v);
    match v.cut {
        None => said,
        Some(c) if c.memory_events == 0 => format!(
            "{said}; the file ends at byte {}, after {} events",
            c.at_byte, c.events
        ),
        Some(c) => format!(
            "{said}; the file ends at byte {}, after {} events ({} memory events): the figures \
             are those before the cut, and memory events may lie past it",
            c.at_byte, c.events, c.memory_events
        ),
    }
}

/// Why a trace shows no memory, for views that have none to show: recorded without
/// `profile_memory=True`, or cut short before its memory events (they may lie past the cut).
pub fn no_memory_events(cut: Option<crate::analysis::verdict::TraceCut>) -> String {
    match cut {
        Some(c) => format!(
            "this trace is cut short at byte {} before any [memory] event: memory events may lie \
             past the cut",
            c.at_byte
        ),
        None => "this trace has no [memory] events: record it with profile_memory=True".into(),
    }
}

fn evidence(v: &Verdict) -> String {
    match &v.evidence {
        VerdictEvidence::Oom {
            device,
            rounded_bytes,
            site,
            report,
            count,
            ..
        } => {
            let diagnosis = super::oom_summary(report);
            let more = if *count > 1 {
                format!(" ({count} OOMs in the capture; the last is explained)")
            } else {
                String::new()
            };
            format!(
                "OOM on cuda:{device} requesting {}{}, caused by {diagnosis}{more}",
                bytes(*rounded_bytes),
                super::at_line(site)
            )
        }
        VerdictEvidence::OutsideOom { oom, accounting } => {
            super::device::outside_oom(oom, accounting.as_ref())
        }
        VerdictEvidence::RetainedAttempts {
            device,
            attempts,
            site,
            held_bytes,
            findings,
        } => format!(
            "memory leak on cuda:{device}: {attempts} attempt(s) that ended in an OOM{} still held {} while the next attempt ran{}",
            super::at_line(site),
            bytes(*held_bytes),
            findings_note(*findings)
        ),
        VerdictEvidence::Leak {
            device,
            kind,
            site,
            steps,
            findings,
            irregular: Some((gains, held)),
            ..
        } => format!(
            "memory leak on cuda:{device}: {}{} gained entries on {gains} of {steps} steps and freed none ({} held){}",
            kind.label(),
            super::at_line(site),
            bytes(*held),
            findings_note(*findings)
        ),
        VerdictEvidence::Leak {
            device,
            kind,
            site,
            per_step_bytes,
            steps,
            extent,
            findings,
            irregular: None,
            holder,
        } => {
            let released = if extent.released() {
                format!(", {}", extent.label())
            } else {
                String::new()
            };
            // The line to change leads where the stack names it; the loop line is context.
            let (at, tail) = match holder {
                // The holder's line made what it keeps: it is the leak's own line, not a loop
                // line apart from it (a callback that appends its own copy).
                Some(k) if k.site.is_some() && k.site == *site => (
                    format!(
                        " kept by {} (the line to change)",
                        super::leaks::holder_named(k)
                    ),
                    String::new(),
                ),
                Some(k) if k.site.is_some() => (
                    format!(
                        " kept by {} (the line to change; the loop line is{})",
                        super::leaks::holder_named(k),
                        super::at_line(site)
                    ),
                    String::new(),
                ),
                Some(k) => (
                    super::at_line(site),
                    format!("; kept by {}", super::leaks::holder_named(k)),
                ),
                None => (super::at_line(site), String::new()),
            };
            format!(
                "memory leak on cuda:{device}: {}{at} grows by {} per step over {steps} steps{released}{tail}{}",
                kind.label(),
                bytes(*per_step_bytes),
                findings_note(*findings)
            )
        }
        VerdictEvidence::TraceLeak {
            device,
            kind,
            site,
            kept_by,
            holder,
            sites,
            steps,
            per_step_bytes,
        } => trace_leak(
            *device,
            *kind,
            site,
            (kept_by, holder),
            *sites,
            *steps,
            *per_step_bytes,
        ),
        VerdictEvidence::GraphGrowth {
            nodes_per_step,
            op,
            function,
            steps,
        } => format!(
            "autograd graph grows by {nodes_per_step} never-backpropagated `{op}` node(s) per step{} over {steps} steps: a tensor with grad history is being accumulated",
            function
                .as_ref()
                .map(|f| format!(" in {f}"))
                .unwrap_or_default()
        ),
        VerdictEvidence::Clean { memory } => clean(memory, v.leak_judgement.steps),
        VerdictEvidence::Unjudged { memory } => unjudged(memory, &v.leak_judgement),
    }
}

fn findings_note(n: usize) -> String {
    if n > 1 {
        format!(" ({n} leak findings)")
    } else {
        String::new()
    }
}

fn trace_leak(
    device: u32,
    kind: LeakKind,
    site: &Option<Site>,
    (kept_by, holder): (&Option<String>, &Option<crate::analysis::leaks::KeptBy>),
    sites: usize,
    steps: usize,
    per_step: u64,
) -> String {
    let at = site
        .as_ref()
        .map(|s| format!(" made in {} ({})", s.function, s.file))
        .unwrap_or_default();
    // The holder the stack shows leads (the line to change), the loop is context.
    let kept = match (holder, kept_by) {
        (Some(h), Some(k)) => format!(
            " kept by {} (the loop is in {k})",
            super::leaks::holder_named(h)
        ),
        (Some(h), None) => format!(" kept by {}", super::leaks::holder_named(h)),
        (None, Some(k)) => format!(" kept by the loop in {k}"),
        (None, None) => String::new(),
    };
    let more = if sites > 1 {
        format!(" and {} more site(s)", sites - 1)
    } else {
        String::new()
    };
    format!(
        "memory leak on cuda:{device}: {}{kept}: allocations{at}{more} in {steps} steps are still alive, {} per step",
        kind.label(),
        bytes(per_step)
    )
}

/// A trace's allocated peak, in words.
fn trace_peak(p: TracePeakOf) -> String {
    match p {
        TracePeakOf::Bytes(b) => format!("allocated peak {}", bytes(b)),
        TracePeakOf::Change(c) => format!(
            "allocated peak {} above the trace's start (the trace records changes, not bytes in use)",
            signed_bytes(c)
        ),
    }
}

fn totals(allocated: u64, reserved: u64, devices: usize) -> String {
    format!(
        "{} allocated and {} reserved at the end across {devices} device(s)",
        bytes(allocated),
        bytes(reserved)
    )
}

fn clean(memory: &Memory, steps: usize) -> String {
    match memory {
        Memory::TraceGraph {
            peak,
            steps: n,
            graph_not_judged,
        } => {
            // Without [memory] events there is no peak to state, not a peak of 0 B.
            let memory = peak
                .map(trace_peak)
                .unwrap_or_else(|| "no memory recorded (no [memory] events)".to_string());
            match graph_not_judged {
                Some(why) => format!(
                    "no leak found over {n} profiled steps; autograd graph growth not judged ({}); {memory}",
                    graph_not_judged_words(*why)
                ),
                None => format!(
                    "no leak and no autograd graph growth found over {n} profiled steps; {memory}"
                ),
            }
        }
        m => format!(
            "no OOM, and no leak over {steps} steps; {}",
            memory_words(m)
        ),
    }
}

fn unjudged(memory: &Memory, j: &LeakJudgement) -> String {
    match memory {
        Memory::Totals { .. } => format!(
            "no OOM recorded; leaks not judged: {}; {}",
            not_judged(j),
            memory_words(memory)
        ),
        // Cut before any memory event: the reason says so, and there is no memory to state.
        Memory::TraceNone if j.reason == Some(NotJudged::CutBeforeMemoryEvents) => {
            format!("leaks not judged: {}", not_judged(j))
        }
        m => format!("leaks not judged: {}; {}", not_judged(j), memory_words(m)),
    }
}

fn memory_words(m: &Memory) -> String {
    match *m {
        Memory::Totals {
            allocated,
            reserved,
            devices,
        } => totals(allocated, reserved, devices),
        Memory::TracePeak(b) => trace_peak(TracePeakOf::Bytes(b)),
        Memory::TracePeakChange(c) => trace_peak(TracePeakOf::Change(c)),
        Memory::TraceNone => "no memory recorded".into(),
        Memory::TraceGraph { peak, .. } => peak
            .map(trace_peak)
            .unwrap_or_else(|| "no memory recorded".into()),
    }
}

fn graph_not_judged_words(g: GraphNotJudged) -> &'static str {
    match g {
        GraphNotJudged::NoSequenceNumbers => {
            "no op carries an autograd sequence number, so the graph cannot be followed"
        }
        GraphNotJudged::NoBackward => "the trace holds no backward pass",
        GraphNotJudged::TooFewSteps => "fewer than 3 profiled steps",
    }
}

/// Why leaks were not judged, in words (every view says it through the verdict).
pub fn not_judged(j: &LeakJudgement) -> String {
    match j.reason {
        None => "judged".into(),
        Some(NotJudged::NoHistory) => "the capture has no allocation history (only the state at the dump), so growth over time cannot be seen".into(),
        Some(NotJudged::SinglePass) => "the log is one pass through the program (its user frames never go back to an earlier line of a loop), so there are no steps to compare".into(),
        Some(NotJudged::DecodingLoop) => "the log's loop is a decoding loop (a generate or decode function's tokens): tokens are not steps (what a generation keeps, its KV cache or its sequence, grows with every token), so leaks are not judged".into(),
        Some(NotJudged::RisingTooFewSteps) => format!(
            "memory rose at the end of every one of the {} steps recorded, too few to tell a leak from warm-up (a leak finding needs {} rising steps)",
            j.steps,
            leaks::MIN_RISING_STEPS
        ),
        Some(NotJudged::TooFewSteps) => format!(
            "{} complete step(s) recorded; a judgement needs at least {}",
            j.steps, j.min_steps
        ),
        Some(NotJudged::NoMemoryEvents) => "the trace has no [memory] events (record with profile_memory=True)".into(),
        Some(NotJudged::CutBeforeMemoryEvents) => "the trace is cut short and holds no [memory] event before the cut: memory events may lie past the cut".into(),
        Some(NotJudged::CutShort) => "the trace is cut short, and a trace's file is not in time order: the frees, backward passes and stacks of what it recorded may lie past the cut".into(),
        Some(NotJudged::CpuOnly) => "the trace's memory events are all on the CPU".into(),
    }
}

/// What the Leaks view says when it lists no finding: "none found" only where leaks were judged;
/// otherwise why they could not be (the same reason the verdict gives). The `bool`: judged.
pub fn no_leaks(j: &LeakJudgement, judged_clean: &str) -> (String, bool) {
    match j.reason {
        None => (
            format!("no leak findings over {} steps: {judged_clean}", j.steps),
            true,
        ),
        Some(NotJudged::NoHistory) => (
            format!(
                "leaks not judged: {}; record it with torch.cuda.memory._record_memory_history",
                not_judged(j)
            ),
            false,
        ),
        Some(_) => (format!("leaks not judged: {}", not_judged(j)), false),
    }
}
