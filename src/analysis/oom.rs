//! Why an allocation failed.
//!
//! An OOM message says only "tried to allocate X". Whether the fix is a smaller batch, an
//! allocator setting or a bug fix depends on the allocator's state at that moment: was there
//! enough cached memory but no hole big enough (fragmentation), was memory creeping up for many
//! steps (a leak), or did one request or one spike simply exceed what was left (capacity)?
//! Each cause comes with the figures that decide it, and remedies are options with the
//! reasoning for whether they would help here, never promises.

use super::leaks::LeakSignal;
use super::replay::OomFacts;
use crate::model::{AllocatorSettings, Device};
use crate::units::bytes;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
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
}

impl Cause {
    pub fn name(self) -> &'static str {
        match self {
            Cause::Fragmentation => "fragmentation",
            Cause::Capacity => "capacity",
            Cause::Leak => "leak",
            Cause::RetainedAttempt => "retained_attempt",
            Cause::Unknown => "unknown",
        }
    }
}

/// One remedy and the judgement of whether it would help here.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Remedy {
    /// What the remedy is, for code that acts on it (never its words).
    pub kind: RemedyKind,
    pub action: String,
    pub assessment: String,
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

#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Diagnosis {
    pub cause: Cause,
    /// One sentence: the cause with its deciding figures.
    pub summary: String,
    /// The figures, one fact per line.
    pub evidence: Vec<String>,
    pub remedies: Vec<Remedy>,
}

/// Decides the cause of one OOM from the replayed allocator state and, when the leak analysis
/// found steady growth up to the OOM, its signal.
pub fn diagnose(
    dev: &Device,
    settings: &AllocatorSettings,
    o: &OomFacts,
    leak: Option<&LeakSignal>,
) -> Diagnosis {
    let c = &o.counters;
    let free_reserved = c.reserved.saturating_sub(c.active);
    let mut evidence = vec![
        format!(
            "request: {} ({} after rounding), {} pool, stream {}",
            bytes(o.requested_bytes),
            bytes(o.rounded_bytes),
            o.pool.name(),
            o.stream
        ),
        format!(
            "at the OOM: {} allocated, {} reserved, {} reserved but free",
            bytes(c.allocated),
            bytes(c.reserved),
            bytes(free_reserved)
        ),
        format!(
            "largest free block in the {} pool on stream {}: {}",
            o.pool.name(),
            o.stream,
            bytes(o.largest_free_block_bytes)
        ),
    ];
    if let Some(df) = o.device_free_bytes {
        let mut line = format!("the driver reported {} free on the device", bytes(df));
        if df >= o.rounded_bytes {
            line.push_str(
                ": the device itself had room, so the limit was a per-process cap (set_per_process_memory_fraction) or another process's reservation",
            );
        }
        evidence.push(line);
    }
    let fragmented =
        o.largest_free_block_bytes < o.rounded_bytes && free_reserved >= o.rounded_bytes;
    // A leak that grew up to the OOM is the cause even when the last request also met a
    // fragmented cache: without the growth there would have been room.
    let cause = if leak.is_some() {
        Cause::Leak
    } else if fragmented {
        Cause::Fragmentation
    } else if dev.events.len() <= 1 {
        Cause::Unknown
    } else {
        Cause::Capacity
    };
    if leak.is_some() && fragmented {
        evidence.push(format!(
            "the cache was fragmented too: {} reserved but free, no block of {} in it",
            bytes(free_reserved),
            bytes(o.rounded_bytes)
        ));
    }
    if let Some(l) = leak {
        evidence.push(format!("leak finding #{}: {}", l.leak + 1, l.summary));
    }
    let mut remedies = Vec::new();
    let summary = match cause {
        Cause::Fragmentation => {
            let unit = if o.pool == crate::model::Pool::Small {
                "2 MiB"
            } else {
                "20 MiB"
            };
            let exp_helps = o.free_whole_pages_bytes >= o.rounded_bytes;
            if settings.expandable_segments == Some(true) {
                remedies.push(Remedy {
 kind: RemedyKind::ExpandableAlreadyOn,
                    action: "expandable_segments is already on".into(),
                    assessment: format!(
                        "it could not help here: only {} of the free memory lies in whole {unit} mapping units that could be unmapped and reused; reorder or pad allocations so short- and long-lived tensors do not interleave",
                        bytes(o.free_whole_pages_bytes)
                    ),
                });
            } else {
                remedies.push(Remedy {
 kind: RemedyKind::ExpandableSegments,
                    action: "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True".into(),
                    assessment: if exp_helps {
                        format!(
                            "may help: {} of the free memory lies in whole {unit} mapping units, which expandable segments can unmap and map again behind one contiguous range",
                            bytes(o.free_whole_pages_bytes)
                        )
                    } else {
                        format!(
                            "unlikely to help: only {} of the free memory lies in whole {unit} mapping units (expandable segments map and unmap in those units; smaller holes stay unusable)",
                            bytes(o.free_whole_pages_bytes)
                        )
                    },
                });
            }
            let split_note = if o.rounded_bytes >= 20 << 20 {
                "the failed request is larger than a normal segment, so it needs a fresh cudaMalloc or a merged hole; max_split_size_mb only keeps big cached blocks whole for big requests and would not merge the scattered holes"
            } else {
                "keeps cached blocks above the limit from being split by smaller requests; it helps when large blocks get carved up, at the cost of more reserved memory"
            };
            remedies.push(Remedy {
                kind: RemedyKind::MaxSplitSize,
                action: "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:<N>".into(),
                assessment: split_note.into(),
            });
            remedies.push(Remedy {
 kind: RemedyKind::ReorderAllocations,
                action: "allocate long-lived tensors first, or free interleaved short- and long-lived tensors together".into(),
                assessment: "removes the holes at their source: here live blocks sit between free ones in the same segments".into(),
            });
            format!(
                "fragmentation: {} was reserved but free, more than the {} request, yet the largest free block was {}",
                bytes(free_reserved),
                bytes(o.rounded_bytes),
                bytes(o.largest_free_block_bytes)
            )
        }
        Cause::Leak => {
            let l = leak.expect("leak implies a signal");
            let at = l
                .site
                .as_ref()
                .map(|s| format!(" at {}:{}", s.file, s.line))
                .unwrap_or_default();
            remedies.push(Remedy {
 kind: RemedyKind::FixLeak,
                action: "fix what keeps tensors alive across steps (see the leak finding): `.item()` on accumulated losses, `torch.no_grad()` in evaluation, `.detach()` before storing".into(),
                assessment: format!(
                    "{} per step accumulated{at} until the OOM; a bigger GPU or a smaller batch only delays it",
                    bytes(l.growth_bytes_per_step.max(0.0) as u64)
                ),
            });
            format!(
                "leak: {} grew by {} per step for {} steps{at} until the {} request no longer fit",
                l.kind.label(),
                bytes(l.growth_bytes_per_step.max(0.0) as u64),
                l.steps,
                bytes(o.rounded_bytes)
            )
        }
        Cause::Capacity => {
            let left = free_reserved.saturating_add(o.device_free_bytes.unwrap_or(0));
            remedies.push(Remedy {
 kind: RemedyKind::ReduceWorkload,
                action: "reduce the batch size or sequence length, use activation checkpointing or mixed precision".into(),
                assessment: format!(
                    "the workload needed more than was available: {} allocated when a further {} was requested",
                    bytes(c.allocated),
                    bytes(o.rounded_bytes)
                ),
            });
            if o.rounded_bytes > c.allocated / 2 {
                remedies.push(Remedy {
                    kind: RemedyKind::SplitRequest,
                    action: "split the large request (chunk the operation)".into(),
                    assessment: format!(
                        "one request of {} is large next to the {} in use",
                        bytes(o.rounded_bytes),
                        bytes(c.allocated)
                    ),
                });
            }
            let _ = left;
            format!(
                "capacity: a {} request with {} already allocated and only {} reserved-but-free (largest free block {})",
                bytes(o.rounded_bytes),
                bytes(c.allocated),
                bytes(free_reserved),
                bytes(o.largest_free_block_bytes)
            )
        }
        Cause::Unknown => {
            "unknown: the capture holds no allocation history before the OOM".to_string()
        }
        // Decided afterwards, by `retained_attempts`.
        Cause::RetainedAttempt => String::new(),
    };
    Diagnosis {
        cause,
        summary,
        evidence,
        remedies,
    }
}

/// Makes an OOM's cause the retained failed attempts when the memory of earlier attempts that
/// ended in an OOM, still held at this one, was at least the request: without it the request
/// would have had room (`retry` module). A leak that grew up to the OOM stays the cause.
pub fn retained_attempts(d: &mut Diagnosis, o: &OomFacts, retained: u64) {
    if retained == 0 {
        return;
    }
    d.evidence.push(format!(
        "{} allocated by earlier attempts that ended in an OOM was still held at this one",
        bytes(retained)
    ));
    if d.cause == Cause::Leak || retained < o.rounded_bytes {
        return;
    }
    d.cause = Cause::RetainedAttempt;
    d.summary = format!(
        "retained failed attempts: {} of earlier attempts that ran out of memory was still held (their exception kept their frames alive), more than the {} request",
        bytes(retained),
        bytes(o.rounded_bytes)
    );
    d.remedies.insert(
        0,
        Remedy {
            kind: RemedyKind::ReleaseFailedAttempt,
            action: "leave the `except` block before retrying, and do not store the exception"
                .into(),
            assessment: format!(
                "would free the {} the failed attempts still hold before the next attempt starts",
                bytes(retained)
            ),
        },
    );
}
