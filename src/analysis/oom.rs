//! Why an allocation failed.
//!
//! An OOM message says only "tried to allocate X". Whether the fix is a smaller batch, an
//! allocator setting or a bug fix depends on the allocator's state at that moment: was there
//! enough cached memory but no hole big enough (fragmentation), was memory creeping up for many
//! steps (a leak), or did one request or one spike simply exceed what was left (capacity)?
//! Each cause comes with the figures that decide it, and remedies are options with the
//! reasoning for whether they would help here, never promises.

use super::replay::{OomFacts, Timeline};
use crate::model::Device;
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
    /// The capture does not hold enough to decide.
    Unknown,
}

impl Cause {
    pub fn name(self) -> &'static str {
        match self {
            Cause::Fragmentation => "fragmentation",
            Cause::Capacity => "capacity",
            Cause::Leak => "leak",
            Cause::Unknown => "unknown",
        }
    }
}

/// Steady growth of allocated memory before an event: the leak signal for an OOM.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Growth {
    /// Allocated bytes at the lowest point of the first window.
    pub floor_start_bytes: u64,
    /// Allocated bytes at the lowest point of the last window before the OOM.
    pub floor_end_bytes: u64,
    /// Number of windows looked at, and how many of them had a higher floor than the one before.
    pub windows: usize,
    pub rising_windows: usize,
}

/// Looks for steady growth before `end`: splits the log into windows and checks that the
/// lowest allocated figure of each window (the memory that survives between steps) keeps
/// rising, and that the rise is a large share of memory at the end. The per-site leak analysis
/// says which allocations grew; this only says that the OOM was preceded by growth.
pub fn growth_before(tl: &Timeline, end: usize) -> Option<Growth> {
    let series = &tl.series.allocated;
    let end = end.min(series.len());
    const WINDOWS: usize = 10;
    if end < WINDOWS * 8 {
        return None;
    }
    let w = end / WINDOWS;
    let floors: Vec<u64> = (0..WINDOWS)
        .map(|k| series[k * w..((k + 1) * w).min(end)].iter().copied().min().unwrap_or(0))
        .collect();
    // Skip the first window (model set-up is growth too).
    let rising = floors.windows(2).skip(1).filter(|p| p[1] > p[0]).count();
    let start = floors[1];
    let last = *floors.last()?;
    let at_end = series[end - 1].max(1);
    let rise = last.saturating_sub(start);
    let steady = rising + 1 >= WINDOWS - 2; // at most one flat or falling window
    let large = rise as f64 >= 0.3 * at_end as f64;
    (steady && large).then_some(Growth {
        floor_start_bytes: start,
        floor_end_bytes: last,
        windows: WINDOWS - 1,
        rising_windows: rising,
    })
}

/// One remedy and the judgement of whether it would help here.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Remedy {
    pub action: String,
    pub assessment: String,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Diagnosis {
    pub cause: Cause,
    /// One sentence: the cause with its deciding figures.
    pub summary: String,
    /// The figures, one fact per line.
    pub evidence: Vec<String>,
    pub remedies: Vec<Remedy>,
    pub growth: Option<Growth>,
}

/// Decides the cause of one OOM from the replayed allocator state.
pub fn diagnose(dev: &Device, tl: &Timeline, o: &OomFacts) -> Diagnosis {
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
    let growth = growth_before(tl, o.event.0 as usize);
    let fragmented = o.largest_free_block_bytes < o.rounded_bytes && free_reserved >= o.rounded_bytes;
    let cause = if fragmented {
        Cause::Fragmentation
    } else if growth.is_some() {
        Cause::Leak
    } else if dev.events.len() <= 1 {
        Cause::Unknown
    } else {
        Cause::Capacity
    };
    if let Some(g) = &growth {
        evidence.push(format!(
            "memory surviving between steps rose from {} to {} over the {} windows before the OOM ({} of them rising)",
            bytes(g.floor_start_bytes),
            bytes(g.floor_end_bytes),
            g.windows,
            g.rising_windows
        ));
    }
    let mut remedies = Vec::new();
    let summary = match cause {
        Cause::Fragmentation => {
            let exp_helps = o.free_whole_pages_bytes.saturating_add(o.device_free_bytes.unwrap_or(0).min(o.rounded_bytes)) >= o.rounded_bytes
                || o.free_whole_pages_bytes >= o.rounded_bytes;
            remedies.push(Remedy {
                action: "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True".into(),
                assessment: if exp_helps {
                    format!(
                        "likely to help: {} of the free memory lies in whole 2 MiB pages, which expandable segments can unmap and map again behind one contiguous range",
                        bytes(o.free_whole_pages_bytes)
                    )
                } else {
                    format!(
                        "unlikely to be enough alone: only {} of the free memory lies in whole 2 MiB pages that could be remapped",
                        bytes(o.free_whole_pages_bytes)
                    )
                },
            });
            let split_note = if o.rounded_bytes >= 20 << 20 {
                "the failed request is larger than a normal segment, so it needs a fresh cudaMalloc or a merged hole; max_split_size_mb only keeps big cached blocks whole for big requests and would not merge the scattered holes"
            } else {
                "keeps cached blocks above the limit from being split by smaller requests; it helps when large blocks get carved up, at the cost of more reserved memory"
            };
            remedies.push(Remedy {
                action: "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:<N>".into(),
                assessment: split_note.into(),
            });
            remedies.push(Remedy {
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
            let g = growth.as_ref().expect("leak implies growth");
            remedies.push(Remedy {
                action: "find what keeps tensors alive across steps (see the leak findings): `.item()` on accumulated losses, `torch.no_grad()` in evaluation, `.detach()` before storing".into(),
                assessment: format!(
                    "memory that survives between steps grew by {} before the OOM; a bigger GPU or smaller batch only delays it",
                    bytes(g.floor_end_bytes.saturating_sub(g.floor_start_bytes))
                ),
            });
            format!(
                "leak: memory that survives between steps grew steadily from {} to {} until the {} request no longer fit",
                bytes(g.floor_start_bytes),
                bytes(g.floor_end_bytes),
                bytes(o.rounded_bytes)
            )
        }
        Cause::Capacity => {
            let left = free_reserved.saturating_add(o.device_free_bytes.unwrap_or(0));
            remedies.push(Remedy {
                action: "reduce the batch size or sequence length, use activation checkpointing or mixed precision".into(),
                assessment: format!(
                    "the workload needed more than was available: {} allocated when a further {} was requested",
                    bytes(c.allocated),
                    bytes(o.rounded_bytes)
                ),
            });
            if o.rounded_bytes > c.allocated / 2 {
                remedies.push(Remedy {
                    action: "split the large request (chunk the operation)".into(),
                    assessment: format!("one request of {} is large next to the {} in use", bytes(o.rounded_bytes), bytes(c.allocated)),
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
        Cause::Unknown => "unknown: the capture holds no allocation history before the OOM".to_string(),
    };
    Diagnosis {
        cause,
        summary,
        evidence,
        remedies,
        growth,
    }
}
