//! The device figures `memscope run` writes under a snapshot's `memscope` key (issue #41):
//! free bytes, NVML usage, the CUDA context, NCCL settings, ranks and the error of an OOM
//! raised outside the allocator, and where the capture was taken (torch's and CUDA's versions,
//! the host: issue #40). Kept apart from the pickle walk: every field is optional, bounded, and
//! attacker data like the rest of the capture.

use super::pickle::{Arena, Value};
use crate::model::{DeviceRecord, NvmlUsage, Origin, OutsideError, OutsideReading, OutsideSource};

/// No device holds 4 PiB: larger figures are dropped.
const MAX_BYTES: i64 = 1 << 52;
const MAX_ENV: usize = 64;
const MAX_TEXT: usize = 2000;
/// A version (`2.11.0+cu128`, `12.8`) or a host name (at most 253 characters in DNS) is short.
const MAX_NAME: usize = 255;

pub(super) fn bytes(p: &Arena<'_>, v: Option<Value>) -> Option<u64> {
    let n = p.int(v?)?;
    (0..MAX_BYTES).contains(&n).then_some(n as u64)
}

fn small(p: &Arena<'_>, v: Option<Value>) -> Option<u32> {
    let n = p.int(v?)?;
    (0..=65_536).contains(&n).then_some(n as u32)
}

fn text(p: &Arena<'_>, v: Option<Value>) -> Option<String> {
    let s = p.str_bounded(v?)?;
    Some(s.chars().take(MAX_TEXT).collect())
}

/// `{"available": true, "used": .., "process_self": .., "process_others": .., "other_pids": ..}`.
pub(super) fn nvml(p: &Arena<'_>, v: Value) -> Option<NvmlUsage> {
    p.dict(v)?;
    let available = p.get(v, "available").and_then(|a| p.int(a)) == Some(1);
    if !available {
        return None;
    }
    Some(NvmlUsage {
        used_bytes: bytes(p, p.get(v, "used"))?,
        self_bytes: bytes(p, p.get(v, "process_self")),
        others_bytes: bytes(p, p.get(v, "process_others")),
        other_processes: small(p, p.get(v, "other_pids")),
    })
}

/// The process-level part; None when the key holds none of it (an older `memscope run`).
pub(super) fn record(p: &Arena<'_>, v: Value) -> Option<DeviceRecord> {
    p.dict(v)?;
    let mut nccl_env = Vec::new();
    if let Some(pairs) = p.get(v, "nccl_env").and_then(|e| p.dict(e)) {
        for &(k, val) in pairs.iter().take(MAX_ENV) {
            if let (Some(k), Some(val)) = (text(p, Some(k)), text(p, Some(val))) {
                nccl_env.push((k, val));
            }
        }
    }
    let outside_error = p.get(v, "error").and_then(|e| outside_error(p, e));
    let r = DeviceRecord {
        current_device: small(p, p.get(v, "current_device")),
        rank: small(p, p.get(v, "rank")),
        local_rank: small(p, p.get(v, "local_rank")),
        world_size: small(p, p.get(v, "world_size")),
        nccl_env,
        outside_error,
        origin: origin(p, v),
    };
    (r != DeviceRecord::default() || p.get(v, "current_device").is_some()).then_some(r)
}

/// A name-like field: at most [`MAX_NAME`] characters, none of them a control character
/// (which no version or host name holds: such a value is dropped, not trimmed).
fn name(p: &Arena<'_>, v: Option<Value>) -> Option<String> {
    let s = p.str_bounded(v?)?;
    let ok = !s.is_empty() && s.chars().count() <= MAX_NAME && !s.chars().any(char::is_control);
    ok.then(|| s.into_owned())
}

/// `torch_version`, `cuda_version`, `host`: where the capture was taken.
fn origin(p: &Arena<'_>, v: Value) -> Origin {
    Origin {
        torch_version: name(p, p.get(v, "torch_version")),
        cuda_version: name(p, p.get(v, "cuda_version")),
        host: name(p, p.get(v, "host")),
    }
}

fn outside_error(p: &Arena<'_>, e: Value) -> Option<OutsideError> {
    let source = match text(p, p.get(e, "source"))?.as_str() {
        "nccl" => OutsideSource::Nccl,
        "cublas" => OutsideSource::Cublas,
        "cudnn" => OutsideSource::Cudnn,
        "cuda" => OutsideSource::Cuda,
        _ => return None,
    };
    let reading = match p.get(e, "reading") {
        None => OutsideReading::AllocationFailed,
        Some(r) => match text(p, Some(r))?.as_str() {
            "internal_error_full_card" => OutsideReading::InternalErrorOnFullCard {
                free_bytes: bytes(p, p.get(e, "free_at_error"))?,
                threshold_bytes: bytes(p, p.get(e, "full_below"))?,
            },
            _ => return None,
        },
    };
    Some(OutsideError {
        source,
        reading,
        type_name: text(p, p.get(e, "type")).unwrap_or_default(),
        message: text(p, p.get(e, "message")).unwrap_or_default(),
    })
}

/// The context's `moment` (`cuda_init`, `set_device`, `init_process_group`), where the
/// recorder names one with the `nvml_process_less_reserved` source.
pub(super) fn context_moment(p: &Arena<'_>, c: Value) -> Option<crate::model::ContextMoment> {
    use crate::model::ContextMoment;
    if text(p, p.get(c, "source"))? != "nvml_process_less_reserved" {
        return None;
    }
    match text(p, p.get(c, "moment"))?.as_str() {
        "cuda_init" => Some(ContextMoment::CudaInit),
        "set_device" => Some(ContextMoment::SetDevice),
        "init_process_group" => Some(ContextMoment::InitProcessGroup),
        _ => None,
    }
}
