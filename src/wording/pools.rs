//! Memory pools in words: a pool's kind, how it was told, the graphs' effect on the peak, why
//! that effect could not be computed, and ghost blocks.

use crate::analysis::pools::{KindEvidence, PoolKind};
use crate::analysis::whatif::pools::{NoWhatIf, PoolWhatIf};
use crate::units::{bytes, signed_bytes};

/// A pool's kind as a table cell.
pub fn pool_kind(k: PoolKind) -> &'static str {
    match k {
        PoolKind::Default => "default",
        PoolKind::Graph => "CUDA graph",
        PoolKind::User => "user pool",
    }
}

/// How a pool's kind was told.
pub fn pool_kind_evidence(e: KindEvidence) -> &'static str {
    match e {
        KindEvidence::DefaultId => "id (0, 0): the default pool",
        KindEvidence::GraphId => "id (n, 0): the pool a CUDA graph capture makes for itself",
        KindEvidence::CaptureStack => {
            "id (0, n), made under a capture (torch.compile's CUDA graph trees or torch.cuda.graph in its segments' stacks)"
        }
        KindEvidence::UserId => {
            "id (0, n) with no capture in its segments' stacks: a torch.cuda.MemPool or a pool handle the program used itself"
        }
    }
}

/// The graphs' (or the private pools') effect on the reserved peak, in one sentence.
pub fn pool_whatif(w: &PoolWhatIf, has_graph: bool) -> String {
    let who = if has_graph {
        "CUDA graphs (their private pools)"
    } else {
        "private pools"
    };
    match *w {
        PoolWhatIf::Computed {
            recorded_peak_reserved_bytes: rec,
            default_pool_peak_reserved_bytes: model,
            raised_by_bytes: x,
            range,
        } => {
            let replay = format!(
                "{} recorded, {} with every request of the log served by the default pool on the program's main stream (the allocator model's replay, {})",
                bytes(rec),
                bytes(model),
                signed_bytes(x)
            );
            let twins = super::twins(&range);
            if range.sign_unknown() {
                return format!(
                    "{who}' effect on the reserved peak cannot be told: between {} and {} ({twins}); {replay}",
                    signed_bytes(range.truth_low),
                    signed_bytes(range.truth_high)
                );
            }
            let verb = if x >= 0 { "raised" } else { "lowered" };
            let (lo, hi) = if x >= 0 {
                (range.truth_low, range.truth_high)
            } else {
                (-range.truth_high, -range.truth_low)
            };
            format!(
                "{who} {verb} the reserved peak by {} to {} ({twins}); {replay}",
                bytes(lo.unsigned_abs()),
                bytes(hi.unsigned_abs())
            )
        }
        PoolWhatIf::NotComputed { reason } => {
            format!(
                "{who}' effect on the peak: not computed: {}",
                no_pool_whatif(reason)
            )
        }
    }
}

/// Why the log cannot support the graphs' effect on the peak.
pub fn no_pool_whatif(r: NoWhatIf) -> &'static str {
    match r {
        NoWhatIf::NoHistory => {
            "the capture holds no allocation history (only the state at the dump), so there are no requests to replay"
        }
        NoWhatIf::PoolBeforeLog => {
            "a private pool already held memory when the log began (recording began after the capture, or the ring buffer dropped it), so its requests are not in the log"
        }
        NoWhatIf::ReplayInconsistent => {
            "the replay could not explain the log (entries dropped or damaged), so its requests cannot be replayed faithfully"
        }
        NoWhatIf::RunOom => {
            "the run ran out of memory, so its peak is where the device's memory ended, not what the workload would have reached"
        }
    }
}

/// Ghost blocks of a pool, as memory_viz names them.
pub fn ghost_blocks(n: u64, size: u64) -> String {
    format!(
        "{n} ghost block(s), {}: allocated blocks of the dump that no log entry mentions (allocated before recording began, or their entries dropped from the ring buffer); memscope counts them as \"allocated before recording\"",
        bytes(size)
    )
}

/// Free memory held by private pools.
pub fn private_pool_free(size: u64) -> String {
    format!(
        "{} of the cached memory is free in private pools: reserved by design (a graph replays into the same addresses, a MemPool keeps its segments), usable only by the pool's own requests; neither a leak nor fragmentation",
        bytes(size)
    )
}

/// Segments whose pool cannot be told.
pub fn unknown_pool(size: u64) -> String {
    format!(
        "up to {} reserved at once in segments of unknown pool (made and freed within the log; torch's trace entries do not name the pool), so a pool's peak may be higher than shown where marked >=",
        bytes(size)
    )
}
