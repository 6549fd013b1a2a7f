//! An OOM's explanation: its cause in one sentence, the facts it rests on, and for each remedy
//! what to do and whether it would help here. Said from the diagnosis' figures
//! (`analysis::oom::OomEvidence`).

use crate::analysis::leaks::LeakSignal;
use crate::analysis::oom::{Cause, OomEvidence, Remedy, RemedyKind};
use crate::analysis::oom_step::{FailingStep, LargerInputs, MIN_INPUT_GROWTH};
use crate::analysis::steps::StepSource;
use crate::analysis::whatif::ExpandableOutcome;
use crate::analysis::OomReport;
use crate::model::Pool;
use crate::units::bytes;

/// The cause with its deciding figures.
pub fn oom_summary(o: &OomReport) -> String {
    let e = &o.facts;
    match o.cause {
        Cause::Fragmentation => format!(
            "fragmentation: {} was reserved but free, more than the {} request, yet the largest free block was {}",
            bytes(e.free_reserved_bytes),
            bytes(e.rounded_bytes),
            bytes(e.largest_free_block_bytes)
        ),
        Cause::Leak => match &e.leak {
            Some(l) => format!(
                "leak: {} grew by {} per step for {} steps{} until the {} request no longer fit",
                l.kind.label(),
                bytes(l.growth_bytes_per_step.max(0.0) as u64),
                l.steps,
                super::at_line(&l.site),
                bytes(e.rounded_bytes)
            ),
            None => "leak".into(),
        },
        Cause::Capacity if e.step_outgrew() => match &e.step {
            Some(st) => format!(
                "capacity for this input: {} had allocated {} when its {} request failed, past the {} peak of every earlier step, on larger inputs than theirs ({}); it needed more than the memory available{}",
                step_name(st),
                bytes(st.allocated_at_failure_bytes),
                bytes(e.rounded_bytes),
                bytes(st.earlier_peak_bytes),
                st.larger_inputs.as_ref().map(input_growth).unwrap_or_default(),
                if e.also_fragmented {
                    format!(
                        " (the cache also had {} free with no block of the request's size: compacting it could at most have served this request, not the rest of the step)",
                        bytes(e.free_reserved_bytes)
                    )
                } else {
                    String::new()
                }
            ),
            None => "capacity".into(),
        },
        Cause::Capacity => format!(
            "capacity: a {} request with {} already allocated and only {} reserved-but-free (largest free block {})",
            bytes(e.rounded_bytes),
            bytes(e.allocated_bytes),
            bytes(e.free_reserved_bytes),
            bytes(e.largest_free_block_bytes)
        ),
        Cause::Unknown => "unknown: the capture holds no allocation history before the OOM".into(),
        Cause::OutsideAllocator => {
            "outside the allocator: a library beside it failed to allocate".into()
        }
        Cause::RetainedAttempt => format!(
            "retained failed attempts: {} of earlier attempts that ran out of memory was still held (their exception kept their frames alive), more than the {} request",
            bytes(e.retained_bytes),
            bytes(e.rounded_bytes)
        ),
    }
}

/// The failing step as the subject of a sentence.
fn step_name(st: &FailingStep) -> String {
    match st.source {
        StepSource::Tail => "the unfinished step after the last complete one".into(),
        _ => st.step.clone(),
    }
}

/// A step's larger inputs, short: the line whose request grew most.
fn input_growth(l: &LargerInputs) -> String {
    format!(
        "{} asked for {}, {:.1}x its largest in any earlier step",
        super::site_in(&l.site),
        bytes(l.this_step_bytes),
        l.ratio()
    )
}

/// A step's larger inputs: the line whose request grew most, and how many lines grew.
fn larger_inputs(l: &LargerInputs) -> String {
    format!(
        "{} asked for {} against at most {} in any earlier step, {:.1}x; {} of the {} lines that ran before asked for at least {:.2}x their earlier largest",
        super::site_in(&l.site),
        bytes(l.this_step_bytes),
        bytes(l.earlier_max_bytes),
        l.ratio(),
        l.lines_grown,
        l.lines_compared,
        MIN_INPUT_GROWTH
    )
}

/// The failing step against the earlier ones, as one fact.
fn failing_step(st: &FailingStep) -> String {
    let inputs = match &st.larger_inputs {
        Some(l) => format!("its inputs were larger: {}", larger_inputs(l)),
        None => format!(
            "no line of it asked for {MIN_INPUT_GROWTH:.2}x its largest request in an earlier step: its inputs were no larger than theirs"
        ),
    };
    let end = if st.log_ends_inside {
        "; the log ends inside it"
    } else {
        ""
    };
    format!(
        "{} had allocated {} when the request failed (it needed at least {}); the {} earlier step(s) peaked at {} at most ({}); {inputs}{end}",
        step_name(st),
        bytes(st.allocated_at_failure_bytes),
        bytes(st.needed_at_least_bytes),
        st.earlier_steps,
        bytes(st.earlier_peak_bytes),
        st.earlier_peak_step
    )
}

/// What a what-if at an OOM can and cannot promise: the requests after the failure that the
/// failing step would have made are not in the log.
fn prediction_scope(e: &OomEvidence) -> String {
    let Some(st) = &e.step else {
        return "; this covers the recorded requests only: the log holds none that the program would have made after the failure, so it says this request would have been served, not that the run would have finished".into();
    };
    let how = if st.log_ends_inside {
        format!("the log ends inside {}", step_name(st))
    } else {
        format!("{} was abandoned at the failure", step_name(st))
    };
    let outgrew = if e.step_outgrew() {
        format!(
            "; and it had already allocated {} against the {} peak of any earlier step, on larger inputs: it needed more than this",
            bytes(st.allocated_at_failure_bytes),
            bytes(st.earlier_peak_bytes)
        )
    } else {
        String::new()
    };
    format!(
        "; this covers the recorded requests only: {how}, so the requests it would have made after the failure are not in the log, and whether it would have finished cannot be told{outgrew}"
    )
}

/// A leak that grew up to an OOM, in one sentence.
pub fn leak_signal(l: &LeakSignal, allocated: u64) -> String {
    format!(
        "survivors grew by {} per step for {} steps up to the OOM ({} in all, {:.0}% of the {} allocated then), at {}",
        bytes(l.growth_bytes_per_step.max(0.0) as u64),
        l.steps,
        bytes(l.grown_bytes),
        100.0 * l.share_of_allocated,
        bytes(allocated),
        super::site_in(&l.site)
    )
}

/// The figures, one fact per line.
pub fn oom_evidence(o: &OomReport) -> Vec<String> {
    let e = &o.facts;
    let mut out = vec![
        format!(
            "request: {} ({} after rounding), {} pool, stream {}",
            bytes(e.requested_bytes),
            bytes(e.rounded_bytes),
            e.pool.name(),
            e.stream
        ),
        format!(
            "at the OOM: {} allocated, {} reserved, {} reserved but free{}",
            bytes(e.allocated_bytes),
            bytes(e.reserved_bytes),
            bytes(e.free_reserved_bytes),
            if e.private_pool_free_bytes > 0 {
                format!(
                    " (and {} free in private pools, which only their own requests can use)",
                    bytes(e.private_pool_free_bytes)
                )
            } else {
                String::new()
            }
        ),
        format!(
            "largest free block in the {} pool on stream {}: {}",
            e.pool.name(),
            e.stream,
            bytes(e.largest_free_block_bytes)
        ),
    ];
    if let Some(df) = e.device_free_bytes {
        let mut line = format!("the driver reported {} free on the device", bytes(df));
        if df >= e.rounded_bytes {
            line.push_str(
                ": the device itself had room, so the limit was a per-process cap (set_per_process_memory_fraction) or another process's reservation",
            );
        }
        out.push(line);
    }
    // The step against the earlier ones decides between capacity and fragmentation; a leak or
    // retained attempts have their own evidence.
    if let Some(st) = e
        .step
        .as_ref()
        .filter(|_| matches!(o.cause, Cause::Capacity | Cause::Fragmentation))
    {
        out.push(failing_step(st));
    }
    if e.also_fragmented {
        out.push(format!(
            "the cache was fragmented too: {} reserved but free, no block of {} in it",
            bytes(e.free_reserved_bytes),
            bytes(e.rounded_bytes)
        ));
    }
    if let Some(l) = &e.leak {
        out.push(format!(
            "leak finding #{}: {}",
            l.leak + 1,
            leak_signal(l, e.allocated_bytes)
        ));
    }
    if e.retained_bytes > 0 {
        out.push(format!(
            "{} allocated by earlier attempts that ended in an OOM was still held at this one",
            bytes(e.retained_bytes)
        ));
    }
    out
}

/// What a remedy asks the user to do.
pub fn remedy_action(kind: RemedyKind) -> &'static str {
    match kind {
        RemedyKind::ExpandableAlreadyOn => "expandable_segments is already on",
        RemedyKind::ExpandableSegments => "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
        RemedyKind::MaxSplitSize => "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:<N>",
        RemedyKind::ReorderAllocations => "allocate long-lived tensors first, or free interleaved short- and long-lived tensors together",
        RemedyKind::FixLeak => "fix what keeps tensors alive across steps (see the leak finding): `.item()` on accumulated losses, `torch.no_grad()` in evaluation, `.detach()` before storing",
        RemedyKind::ReduceWorkload => "reduce the batch size or sequence length, use activation checkpointing or mixed precision",
        RemedyKind::SplitRequest => "split the large request (chunk the operation)",
        RemedyKind::ReleaseFailedAttempt => "leave the `except` block before retrying, and do not store the exception",
    }
}

/// Whether a remedy would help here, and why: the allocator model's prediction where it made
/// one, else the reading of the OOM's figures.
pub fn remedy_assessment(o: &OomReport, r: &Remedy) -> String {
    let e = &o.facts;
    if let Some(p) = &r.predicted {
        let scope = match p.outcome {
            ExpandableOutcome::Avoided { .. } | ExpandableOutcome::DependsOnCap { .. } => {
                prediction_scope(e)
            }
            _ => String::new(),
        };
        return format!("{}{scope}", super::expandable_prediction(p));
    }
    let unit = if e.pool == Pool::Small {
        "2 MiB"
    } else {
        "20 MiB"
    };
    match r.kind {
        RemedyKind::ExpandableAlreadyOn => format!(
            "it could not help here: only {} of the free memory lies in whole {unit} mapping units that could be unmapped and reused; reorder or pad allocations so short- and long-lived tensors do not interleave",
            bytes(e.free_whole_pages_bytes)
        ),
        RemedyKind::ExpandableSegments if e.free_whole_pages_bytes >= e.rounded_bytes => format!(
            "may help: {} of the free memory lies in whole {unit} mapping units, which expandable segments can unmap and map again behind one contiguous range",
            bytes(e.free_whole_pages_bytes)
        ),
        RemedyKind::ExpandableSegments => format!(
            "unlikely to help: only {} of the free memory lies in whole {unit} mapping units (expandable segments map and unmap in those units; smaller holes stay unusable)",
            bytes(e.free_whole_pages_bytes)
        ),
        RemedyKind::MaxSplitSize if e.rounded_bytes >= 20 << 20 => "the failed request is larger than a normal segment, so it needs a fresh cudaMalloc or a merged hole; max_split_size_mb only keeps big cached blocks whole for big requests and would not merge the scattered holes".into(),
        RemedyKind::MaxSplitSize => "keeps cached blocks above the limit from being split by smaller requests; it helps when large blocks get carved up, at the cost of more reserved memory".into(),
        RemedyKind::ReorderAllocations => "removes the holes at their source: here live blocks sit between free ones in the same segments".into(),
        RemedyKind::FixLeak => format!(
            "{} per step accumulated{} until the OOM; a bigger GPU or a smaller batch only delays it",
            bytes(
                e.leak
                    .as_ref()
                    .map_or(0.0, |l| l.growth_bytes_per_step)
                    .max(0.0) as u64
            ),
            e.leak
                .as_ref()
                .map(|l| super::at_line(&l.site))
                .unwrap_or_default()
        ),
        RemedyKind::ReduceWorkload if e.step_outgrew() => format!(
            "the step that failed ran on larger inputs than any before it and needed more than the {} they peaked at: cap or bucket the input length (or the batch) so that no step exceeds what the earlier ones, which fit, used",
            bytes(e.step.as_ref().map_or(0, |s| s.earlier_peak_bytes))
        ),
        RemedyKind::ReduceWorkload => format!(
            "the workload needed more than was available: {} allocated when a further {} was requested",
            bytes(e.allocated_bytes),
            bytes(e.rounded_bytes)
        ),
        RemedyKind::SplitRequest => format!(
            "one request of {} is large next to the {} in use",
            bytes(e.rounded_bytes),
            bytes(e.allocated_bytes)
        ),
        RemedyKind::ReleaseFailedAttempt => format!(
            "would free the {} the failed attempts still hold before the next attempt starts",
            e.retained_freed
                .as_ref()
                .map_or_else(|| bytes(e.retained_bytes), super::bounded_bytes)
        ),
    }
}
