//! The report's notes in words: one function per family of [`Note`], and the loader's own
//! notes ([`LoadNote`]), which the gate's summaries also keep as sentences.
//!
//! Every view (text, HTML, JSON's `notes` and `graph.notes`, the TUI) says a note through
//! [`note`], so a note reads the same everywhere; the matches are exhaustive, so a note added
//! to the analysis without words here does not compile.

use crate::analysis::notes::{GraphNote, MidRun, Note, SnapshotNote, TraceNote, UnconsumedOp};
use crate::analysis::ranked::{FindingRef, Ranked};
use crate::analysis::reserved::{ReservedExcess, Setting};
use crate::analysis::Analysis;
use crate::model::LoadNote;
use crate::units::bytes;

/// How many ops the note on unconsumed nodes names before `...`.
const LISTED_OPS: usize = 8;

/// The sentence of a note.
pub fn note(n: &Note) -> String {
    match n {
        Note::Load(n) => load_note(n),
        Note::Snapshot(n) => snapshot_note(n),
        Note::Trace(n) => trace_note(n),
        Note::Graph(n) => graph_note(n),
    }
}

/// What a loader skipped, repaired or guessed.
pub fn load_note(n: &LoadNote) -> String {
    match n {
        LoadNote::EntriesWithoutAction { device, skipped } => {
            format!("device {device}: {skipped} trace entries without an 'action' were skipped")
        }
        LoadNote::UnknownBlockStates { blocks, first } => format!(
            "{blocks} block(s) had an unknown state and were counted as inactive; the first: \
             segments[{}].blocks[{}] has state {:?}",
            first.segment,
            first.block,
            first.state.as_deref().unwrap_or("missing")
        ),
        LoadNote::GzipDamaged { offset, error } => format!(
            "the gzip stream is damaged after {offset} decompressed bytes ({error}); the trace \
             was read up to there"
        ),
        LoadNote::TraceUnclosed { at_byte, events } => format!(
            "the trace ends at byte {at_byte} inside traceEvents without its closing bracket \
             (cut off while being written?); all {events} complete events before it were loaded"
        ),
        LoadNote::CutInsideEvent { at_byte, events } => format!(
            "the trace is cut off inside an event that starts at byte {at_byte}; the {events} \
             complete events before it were loaded"
        ),
        LoadNote::InvalidEvents {
            skipped,
            events,
            first_at_byte,
            error,
        } => format!(
            "{skipped} of {events} entries of traceEvents are not valid events and were skipped; \
             the first, at byte {first_at_byte}: {error}"
        ),
        LoadNote::RawControlCharacters { events } => format!(
            "{events} events held raw control characters (tabs, newlines) inside strings, which \
             JSON forbids (a known profiler defect); they were read with those characters blanked"
        ),
        LoadNote::LoneSurrogates { events } => format!(
            "{events} events held a lone UTF-16 surrogate escape (such as \\ud800) in a string, \
             which is not text; they were read with U+FFFD in its place"
        ),
    }
}

/// A snapshot device's figures: how much of the run the log shows, whether the replay matches.
fn snapshot_note(n: &SnapshotNote) -> String {
    match n {
        SnapshotNote::StartsMidRun {
            device,
            reserved,
            why,
        } => format!(
            "device {device}: the event log starts while {} were already reserved ({}); peaks \
             before the first entry are unknown, so peak figures are lower bounds",
            bytes(*reserved),
            mid_run(*why)
        ),
        SnapshotNote::NoHistory { device } => format!(
            "device {device}: the snapshot has no allocation history (recorded without \
             _record_memory_history, or a torch 2.0 layout): current figures only, no peaks"
        ),
        SnapshotNote::ApproximateInitialBlocks { device, blocks } => format!(
            "device {device}: {blocks} blocks allocated before the log began were freed in it; \
             their sizes are taken as their rounded requests"
        ),
        SnapshotNote::ReplayDiffers {
            device,
            mismatches,
            first,
        } => format!(
            "device {device}: the replayed end state differs from the snapshot's segments in \
             {mismatches} places; first: {}",
            first
                .as_ref()
                .map(super::mismatch)
                .unwrap_or_else(|| "?".into())
        ),
        SnapshotNote::Torch20 => "torch 2.0 snapshots record no event history and no OOM \
             entries: if this one was dumped at an OOM, the sites above show what held the \
             memory then"
            .into(),
        SnapshotNote::RingOverflowed {
            device,
            max_entries,
        } => format!(
            "device {device}: the allocator's trace ring buffer{} overflowed and dropped the \
             oldest entries, as the snapshot itself records \
             (allocator_settings.trace_alloc_overflowed): the log shows only the end of the run",
            max_entries
                .map(|n| format!(" of {n} entries"))
                .unwrap_or_default()
        ),
        SnapshotNote::Empty => {
            "the snapshot holds no segments and no events: nothing was allocated while recording"
                .into()
        }
    }
}

/// Why a log starts mid-run, as far as the blocks from before it tell.
fn mid_run(why: MidRun) -> std::borrow::Cow<'static, str> {
    match why {
        MidRun::Recorded {
            overflowed: true,
            max_entries,
        } => format!(
            "the ring buffer{} dropped the oldest entries, as the snapshot itself records \
             (allocator_settings.trace_alloc_overflowed)",
            max_entries
                .map(|n| format!(" of {n} entries"))
                .unwrap_or_default()
        )
        .into(),
        MidRun::Recorded {
            overflowed: false, ..
        } => "recording began late: the snapshot records that its ring buffer did not overflow \
              (allocator_settings.trace_alloc_overflowed)"
            .into(),
        other => mid_run_evidence(other).into(),
    }
}

/// [`mid_run`] where the snapshot does not say: what the blocks tell.
fn mid_run_evidence(why: MidRun) -> &'static str {
    match why {
        MidRun::Recorded { .. } => "the snapshot records whether its ring buffer overflowed",
        MidRun::RingBufferDropped => {
            "the ring buffer dropped the oldest entries: blocks from before the log keep their \
             own stacks"
        }
        MidRun::RecordingBeganLate => {
            "recording began late: no block from before the log has a stack"
        }
        MidRun::Either => "recording began late, or the ring buffer dropped the oldest entries",
    }
}

/// A trace's memory figures: what its `[memory]` events do not record.
fn trace_note(n: &TraceNote) -> String {
    match n {
        TraceNote::NoMemoryEvents => {
            "the trace has no [memory] events: it was recorded without profile_memory=True".into()
        }
        TraceNote::ReconstructedTotals { events } => format!(
            "{events} [memory] events carry no `Total Allocated` (a torch 1.9-era trace): \
             allocated totals are reconstructed as the running sum of their `Bytes` per device, \
             counted from 0 at the trace's start, so allocated figures are changes from the \
             trace's start, not bytes in use (memory allocated before it is not recorded); \
             reserved memory is not recorded"
        ),
        TraceNote::WithoutAddress { events } => format!(
            "{events} [memory] events carry no `Addr`: frees are paired with the latest open \
             allocation of the same size on the device"
        ),
        TraceNote::NoProfilerSteps => "the trace has no ProfilerStep spans (no prof.step() \
             calls): per-step figures and leak detection across steps are not available"
            .into(),
        TraceNote::AllocatedBeforeProfiling { device, bytes: b } => format!(
            "{}: {} were already allocated when profiling began; peaks are those of the \
             profiled window",
            device.label(),
            bytes(*b)
        ),
        TraceNote::NotCuda { devices } => format!(
            "memory events of {} are not analysed (CUDA devices only)",
            devices
                .iter()
                .map(|d| d.label())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        TraceNote::StepsWithoutMemory { steps, first, last } => format!(
            "{steps} profiler steps ({first} .. {last}), with no CUDA [memory] events: no memory \
             figures per step"
        ),
    }
}

/// A trace's autograd graph: why its growth could not be judged, or what it left out.
pub fn graph_note(n: &GraphNote) -> String {
    match n {
        GraphNote::NoSequenceNumbers => "no op carries an autograd sequence number (no \
             grad-mode ops were profiled, or the trace predates them): the autograd graph \
             cannot be followed"
            .into(),
        GraphNote::NoBackward { forward_nodes } => format!(
            "{forward_nodes} forward ops ran with grad mode on but the trace holds no backward \
             pass: graph growth cannot be judged (if this is inference, `torch.inference_mode()` \
             or `torch.no_grad()` saves the graph's memory)"
        ),
        GraphNote::TooFewSteps { steps } => format!(
            "{steps} profiled step(s): growth across steps needs at least three \
             (`schedule(active=...)` with prof.step() each iteration)"
        ),
        GraphNote::UnconsumedNotAccumulating { ops } => format!(
            "{} op(s) leave autograd nodes that no backward consumes in step after step, but \
             neither update a tensor in place nor work on 0-dim values, so nothing shows them \
             accumulating across steps: {}{}. These are usually values computed with grad on \
             and not used for the loss (predictions for metrics, logging); each step's copy is \
             freed with its step. Computing them under `torch.no_grad()` or from `.detach()`ed \
             tensors saves their graph's memory.",
            ops.len(),
            ops.iter()
                .take(LISTED_OPS)
                .map(unconsumed_op)
                .collect::<Vec<_>>()
                .join(", "),
            if ops.len() > LISTED_OPS { ", ..." } else { "" }
        ),
    }
}

/// `` `op` in `function` (n/step) ``.
fn unconsumed_op(o: &UnconsumedOp) -> String {
    let (op, n) = (&o.op, o.nodes_per_step);
    match &o.function {
        Some(f) => format!("`{op}` in `{f}` ({n:.1}/step)"),
        None => format!("`{op}` ({n:.1}/step)"),
    }
}

/// Reserved far above allocated, in one line: the figures and what the log shows made it.
pub fn reserved_excess(r: &ReservedExcess) -> String {
    let why = if r.segments_for_larger_shapes > 0 {
        format!(
            "{} of the {} segments the log made came with a request larger than any before at its own line: growing shapes (a longer sequence, a larger batch) that fit no cached block take new segments, and the old ones stay reserved",
            r.segments_for_larger_shapes, r.segments_made
        )
    } else {
        format!(
            "the log made {} segments and released {}: freed blocks stay cached in their segments",
            r.segments_made, r.segments_released
        )
    };
    let kept = if r.segments_released == 0 {
        "; no segment was ever released (the cache never shrank)"
    } else {
        ""
    };
    format!(
        "reserved far above allocated: {} reserved at the peak for {} allocated at most ({:.1}x); at the reserved peak {} was free in cached blocks, the largest {}; {why}{kept}",
        bytes(r.peak_reserved_bytes),
        bytes(r.peak_allocated_bytes),
        r.peak_reserved_bytes as f64 / r.peak_allocated_bytes.max(1) as f64,
        bytes(r.free_at_reserved_peak_bytes),
        bytes(r.largest_hole_at_reserved_peak_bytes)
    )
}

/// The fix for reserved far above allocated, with the replay's figure and its range.
pub fn reserved_excess_fix(r: &ReservedExcess) -> String {
    let Some(f) = &r.fix else {
        return "expandable_segments is already on: its segments grow and shrink by pages; what stays reserved is freed memory kept mapped (torch.cuda.empty_cache() releases it, at the cost of mapping it again)".into();
    };
    let setting = match f.setting {
        Setting::ExpandableSegments => "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
    };
    let frees = r.fix_frees().unwrap_or(0);
    let effect = if frees > 0 {
        format!("it frees at least {} of the peak", bytes(frees))
    } else {
        "it may not lower the peak".into()
    };
    format!(
        "{setting}: the recorded requests replayed under it reserve {} at the peak, against {} recorded: {effect}",
        super::bounded_bytes(&f.predicted_peak_reserved),
        bytes(r.peak_reserved_bytes)
    )
}

/// One ranked finding, in one line (what it is, where the report says more).
pub fn ranked_finding(a: &Analysis, r: &Ranked) -> String {
    let stake = bytes(r.bytes_at_stake);
    match r.finding {
        FindingRef::Oom { device, index } => format!(
            "{stake}: OOM #{} on cuda:{device} (what the failing work needed at least)",
            index + 1
        ),
        FindingRef::Leak { index } => {
            let what = a
                .leaks
                .get(index)
                .map(|l| l.leak.kind.label())
                .unwrap_or("leak");
            format!(
                "{stake}: leak #{} ({what}), held at its last sample",
                index + 1
            )
        }
        FindingRef::ReservedExcess { device } => {
            let frees = a
                .devices
                .iter()
                .find(|d| d.device == device)
                .and_then(|d| d.reserved_excess.as_ref())
                .and_then(ReservedExcess::fix_frees)
                .filter(|b| *b > 0);
            match frees {
                Some(_) => format!(
                    "{stake}: reserved far above allocated on cuda:{device}, which expandable_segments:True frees at least"
                ),
                None => format!("{stake}: reserved far above allocated on cuda:{device}"),
            }
        }
        FindingRef::PrivatePools { device } => format!(
            "{stake}: at least what CUDA graphs' private pools added to the reserved peak on cuda:{device}"
        ),
    }
}
