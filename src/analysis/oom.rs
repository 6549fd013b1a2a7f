//! Why an allocation failed.
//!
//! An OOM message says only "tried to allocate X". Whether the fix is a smaller batch, an
//! allocator setting or a bug fix depends on the allocator's state at that moment: was there
//! enough cached memory but no hole big enough (fragmentation), was memory creeping up for many
//! steps (a leak), or did one request or one spike simply exceed what was left (capacity)?
//! Each cause comes with the figures that decide it, and remedies are options with the
//! reasoning for whether they would help here, never promises.
//!
//! The cause is judged on the whole step, not the failed request alone ([`super::oom_step`]):
//! a step past every earlier step's peak on larger inputs than theirs ran out of capacity for
//! that input, even where the cache also had holes; fragmentation is the cause only where the
//! step's need would have fit (no earlier step to compare with, or one that was as large).

use super::leaks::LeakSignal;
use super::oom_step::FailingStep;
use super::replay::OomFacts;
use super::whatif::error::{Bounded, FigureKind};
use super::whatif::ExpandableAssessment;
use crate::model::{AllocatorSettings, Device};

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// Enough memory was cached but free, yet no free block was large enough.
    Fragmentation,
    /// The request (or the spike it completed) exceeded what was left.
    Capacity,
    /// Memory grew steadily before the OOM.
    Leak,
    /// Memory of earlier attempts that ended in an OOM was still held (an OOM-retry loop that
    /// keeps the exception): without it the request would have had room.
    RetainedAttempt,
    /// The capture does not hold enough to decide.
    Unknown,
    /// A library outside the caching allocator (NCCL, cuBLAS, cuDNN, the CUDA runtime) failed
    /// to allocate: no allocator OOM event; the device accounting
    /// ([`super::device`]) says where the memory was.
    OutsideAllocator,
}

impl Cause {
    pub fn name(self) -> &'static str {
        match self {
            Cause::Fragmentation => "fragmentation",
            Cause::Capacity => "capacity",
            Cause::Leak => "leak",
            Cause::RetainedAttempt => "retained_attempt",
            Cause::Unknown => "unknown",
            Cause::OutsideAllocator => "outside_allocator",
        }
    }
}

/// One remedy. Whether it would help here is judged from the diagnosis' figures by the
/// wording module (`crate::wording::remedy_assessment`), or by the allocator model where it
/// could replay the capture (`predicted`).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Remedy {
    pub kind: RemedyKind,
    /// The allocator model's prediction for this remedy, where it could make one (the
    /// what-if replay of `expandable_segments:True`).
    #[serde(skip)]
    pub predicted: Option<ExpandableAssessment>,
}

impl Remedy {
    fn of(kind: RemedyKind) -> Remedy {
        Remedy {
            kind,
            predicted: None,
        }
    }
}

/// The remedies an OOM diagnosis can propose.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RemedyKind {
    /// `expandable_segments` was on already: what it could not do here.
    ExpandableAlreadyOn,
    /// `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`.
    ExpandableSegments,
    /// `PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:<N>`.
    MaxSplitSize,
    /// Allocate long-lived tensors first, or free interleaved ones together.
    ReorderAllocations,
    /// Fix what keeps tensors alive across steps.
    FixLeak,
    /// A smaller batch or sequence, checkpointing, mixed precision.
    ReduceWorkload,
    /// Chunk the operation that made one large request.
    SplitRequest,
    /// Leave the `except` block before retrying; do not store the exception.
    ReleaseFailedAttempt,
}

/// What an OOM's diagnosis rests on: the figures at the failed request, and what the other
/// passes found (a leak that grew up to it, retained failed attempts).
#[derive(Clone, Debug, PartialEq)]
pub struct OomEvidence {
    pub requested_bytes: u64,
    pub rounded_bytes: u64,
    pub pool: crate::model::Pool,
    pub stream: u64,
    pub allocated_bytes: u64,
    pub reserved_bytes: u64,
    /// Reserved minus active, less what private pools hold free: cached, usable by a
    /// request that fits.
    pub free_reserved_bytes: u64,
    /// Free bytes in private pools (a CUDA graph's, a `MemPool`'s): reserved, but only the
    /// pool's own requests can use them.
    pub private_pool_free_bytes: u64,
    pub largest_free_block_bytes: u64,
    pub device_free_bytes: Option<u64>,
    /// Free memory in whole mapping units (2 MiB small pool, 20 MiB large): what expandable
    /// segments could unmap and map again.
    pub free_whole_pages_bytes: u64,
    /// The cause is another (a leak, a step that outgrew the earlier ones) and the cache was
    /// fragmented as well: no free block as large as the request, though enough was free.
    pub also_fragmented: bool,
    /// Whether the capture already ran with `expandable_segments:True`.
    pub expandable_on: bool,
    /// The leak that grew up to the OOM.
    pub leak: Option<LeakSignal>,
    /// Bytes that earlier attempts ending in an OOM still held at this one.
    pub retained_bytes: u64,
    /// What releasing them would free, with the range the truth lay in on every twin
    /// (`None` where nothing was retained).
    pub retained_freed: Option<Bounded>,
    /// The step the request failed in, against the iterations before it (`None` where the log
    /// shows no iteration before it).
    pub step: Option<FailingStep>,
}

impl OomEvidence {
    /// The failing step had passed every earlier step's peak on larger inputs.
    pub fn step_outgrew(&self) -> bool {
        self.step.as_ref().is_some_and(FailingStep::outgrew)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Diagnosis {
    pub cause: Cause,
    pub evidence: OomEvidence,
    pub remedies: Vec<Remedy>,
}

/// Decides the cause of one OOM from the replayed allocator state, the step it failed in and,
/// when the leak analysis found steady growth up to the OOM, its signal.
pub fn diagnose(
    dev: &Device,
    settings: &AllocatorSettings,
    o: &OomFacts,
    leak: Option<&LeakSignal>,
    step: Option<&FailingStep>,
) -> Diagnosis {
    let c = &o.counters;
    // Free memory of a private pool is not the default pool's to use.
    let free_reserved = c
        .reserved
        .saturating_sub(c.active)
        .saturating_sub(o.private_pool_free_bytes);
    let fragmented =
        o.largest_free_block_bytes < o.rounded_bytes && free_reserved >= o.rounded_bytes;
    // A leak that grew up to the OOM is the cause even when the last request also met a
    // fragmented cache: without the growth there would have been room. A step that outgrew
    // every earlier one on larger inputs needed more than the holes: a compact cache would have
    // served this request and failed a later one of the same step.
    let outgrew = step.is_some_and(FailingStep::outgrew);
    let cause = cause_of(leak.is_some(), outgrew, fragmented, dev.events.len() > 1);
    let expandable_on = settings.expandable_segments == Some(true);
    let remedies = match cause {
        Cause::Fragmentation => vec![
            Remedy::of(if expandable_on {
                RemedyKind::ExpandableAlreadyOn
            } else {
                RemedyKind::ExpandableSegments
            }),
            Remedy::of(RemedyKind::MaxSplitSize),
            Remedy::of(RemedyKind::ReorderAllocations),
        ],
        Cause::Leak => vec![Remedy::of(RemedyKind::FixLeak)],
        // Reducing the input comes first; a compact cache is an option only as far as the
        // model says it would serve the request (its assessment says the step is not covered).
        Cause::Capacity if outgrew && fragmented && !expandable_on => vec![
            Remedy::of(RemedyKind::ReduceWorkload),
            Remedy::of(RemedyKind::ExpandableSegments),
        ],
        Cause::Capacity if o.rounded_bytes > c.allocated / 2 => vec![
            Remedy::of(RemedyKind::ReduceWorkload),
            Remedy::of(RemedyKind::SplitRequest),
        ],
        Cause::Capacity => vec![Remedy::of(RemedyKind::ReduceWorkload)],
        Cause::Unknown | Cause::RetainedAttempt | Cause::OutsideAllocator => Vec::new(),
    };
    Diagnosis {
        cause,
        evidence: OomEvidence {
            requested_bytes: o.requested_bytes,
            rounded_bytes: o.rounded_bytes,
            pool: o.pool,
            stream: o.stream,
            allocated_bytes: c.allocated,
            reserved_bytes: c.reserved,
            free_reserved_bytes: free_reserved,
            private_pool_free_bytes: o.private_pool_free_bytes,
            largest_free_block_bytes: o.largest_free_block_bytes,
            device_free_bytes: o.device_free_bytes,
            free_whole_pages_bytes: o.free_whole_pages_bytes,
            also_fragmented: fragmented && cause != Cause::Fragmentation,
            expandable_on,
            leak: leak.cloned(),
            retained_bytes: 0,
            retained_freed: None,
            step: step.cloned(),
        },
        remedies,
    }
}

/// The order of the rules: a leak that grew up to the OOM, then a step that outgrew every
/// earlier one on larger inputs (capacity for that input, holes or not), then fragmentation
/// (enough free, no block large enough), then capacity; unknown without a history.
fn cause_of(leak: bool, outgrew: bool, fragmented: bool, history: bool) -> Cause {
    if leak {
        Cause::Leak
    } else if outgrew {
        Cause::Capacity
    } else if fragmented {
        Cause::Fragmentation
    } else if !history {
        Cause::Unknown
    } else {
        Cause::Capacity
    }
}

/// Makes an OOM's cause the retained failed attempts when the memory of earlier attempts that
/// ended in an OOM, still held at this one, was at least the request: without it the request
/// would have had room (`retry` module). A leak that grew up to the OOM stays the cause.
pub fn retained_attempts(d: &mut Diagnosis, o: &OomFacts, retained: u64) {
    if retained == 0 {
        return;
    }
    d.evidence.retained_bytes = retained;
    d.evidence.retained_freed = Some(Bounded::of(
        FigureKind::RetainedFreed,
        retained.min(i64::MAX as u64) as i64,
    ));
    if d.cause == Cause::Leak || retained < o.rounded_bytes {
        return;
    }
    d.cause = Cause::RetainedAttempt;
    d.remedies
        .insert(0, Remedy::of(RemedyKind::ReleaseFailedAttempt));
}

#[cfg(test)]
mod tests {
    use super::{cause_of, Cause};

    /// A fragmented cache is not the cause where the step had outgrown every earlier one on
    /// larger inputs (the variable-length batch 6x longer than the rest); it is where the step
    /// was no larger than the ones that fit. A leak stays first.
    #[test]
    fn the_whole_step_decides_before_the_holes() {
        assert_eq!(cause_of(false, true, true, true), Cause::Capacity);
        assert_eq!(cause_of(false, false, true, true), Cause::Fragmentation);
        assert_eq!(cause_of(true, true, true, true), Cause::Leak);
        assert_eq!(cause_of(false, false, false, true), Cause::Capacity);
        assert_eq!(cause_of(false, false, false, false), Cause::Unknown);
    }
}
