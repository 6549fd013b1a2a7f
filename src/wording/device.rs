//! The device accounting in words (issue #41): each figure with its source, the NCCL estimate
//! with its range, and what a snapshot without device figures cannot tell.

use crate::analysis::device::{Accounting, DeviceSection, OutsideOom, Source};
use crate::model::{ContextMoment, OutsideReading, OutsideSource};
use crate::units::bytes;

pub fn source(s: Source) -> &'static str {
    match s {
        Source::DeviceProperties => "device properties",
        Source::AllocatorSegments => "allocator segments",
        Source::MemGetInfo => "cudaMemGetInfo at the dump",
        Source::Remainder => "total - reserved - free",
        Source::NvmlAtStartup => "NVML, measured when CUDA initialised",
        Source::NvmlProcessLessReserved => "NVML's bytes for the process less reserved",
        Source::NvmlProcesses => "NVML process list",
        Source::NcclSettingsEstimate => "estimate from NCCL settings",
    }
}

pub fn moment(m: ContextMoment) -> &'static str {
    match m {
        ContextMoment::CudaInit => "when CUDA initialised",
        ContextMoment::SetDevice => "right after set_device",
        ContextMoment::InitProcessGroup => "just before init_process_group",
    }
}

pub fn library(s: OutsideSource) -> &'static str {
    match s {
        OutsideSource::Nccl => "NCCL",
        OutsideSource::Cublas => "cuBLAS",
        OutsideSource::Cudnn => "cuDNN",
        OutsideSource::Cuda => "the CUDA runtime",
    }
}

/// The report's lines for the section (one line where nothing can be told).
pub fn lines(s: &DeviceSection) -> Vec<String> {
    match s {
        DeviceSection::NoDeviceFigures => vec![
            "device: not recorded (no `memscope` device figures): memory outside the allocator (CUDA context, NCCL, other processes) cannot be told; record with `memscope run`".into(),
        ],
        DeviceSection::NoFreeFigure => vec![
            "device: size recorded but not free memory: memory outside the allocator cannot be told; record with a newer `memscope run`".into(),
        ],
        DeviceSection::Accounted {
            devices,
            current_device,
            ..
        } => devices
            .iter()
            .filter(|a| current_device.is_none_or(|c| c == a.device) || devices.len() == 1)
            .flat_map(accounting)
            .collect(),
    }
}

/// One device: `total = reserved + outside + free`, then the parts of outside.
pub fn accounting(a: &Accounting) -> Vec<String> {
    let mut v = Vec::new();
    let outside = match a.outside {
        Some(o) => format!(
            "{} outside the allocator ({})",
            bytes(o.bytes),
            source(o.source)
        ),
        None => "reserved and free exceed the total (figures taken at different moments)".into(),
    };
    v.push(format!(
        "device cuda:{}: total {} ({}) = {} reserved ({}) + {} + {} free ({})",
        a.device,
        bytes(a.total.bytes),
        source(a.total.source),
        bytes(a.reserved.bytes),
        source(a.reserved.source),
        outside,
        bytes(a.free.bytes),
        source(a.free.source),
    ));
    let mut parts = Vec::new();
    if let Some(c) = a.context {
        let when = a.context_moment.map(|m| format!(", {}", moment(m)));
        parts.push(format!(
            "CUDA context {} ({}{})",
            bytes(c.bytes),
            source(c.source),
            when.unwrap_or_default()
        ));
    }
    if let Some(o) = a.other_processes {
        parts.push(format!(
            "other processes {} in {} process(es) ({})",
            bytes(o.bytes),
            a.other_process_count.unwrap_or(0),
            source(o.source)
        ));
    }
    if let Some(u) = a.unexplained_bytes {
        if a.context.is_none() {
            parts.push(format!(
                "unexplained {} (the CUDA context was not measured, so it is counted here: `memscope run` measures it after the program's set_device or before init_process_group)",
                bytes(u)
            ));
        } else {
            parts.push(format!("unexplained {}", bytes(u)));
        }
    }
    if !parts.is_empty() {
        v.push(format!("  outside the allocator: {}", parts.join("; ")));
    }
    if let Some(n) = a.nccl {
        v.push(format!(
            "  NCCL, an estimate: {} to {} (low: its channel buffers, {} per connection, {}..{} channels, {} ranks, NCCL_BUFFSIZE sizing from NCCL's environment documentation; high: all of the unexplained bytes)",
            bytes(n.low_bytes),
            bytes(n.high_bytes),
            bytes(n.buffsize_bytes),
            n.channels_low,
            n.channels_high,
            n.world_size
        ));
    }
    v
}

/// The verdict's cause for an OOM raised outside the allocator.
pub fn outside_oom(o: &OutsideOom, a: Option<&Accounting>) -> String {
    let first_line: String = o
        .message
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(160)
        .collect();
    let mut s = format!(
        "OOM raised outside the allocator by {} ({}: {first_line})",
        library(o.source),
        o.type_name
    );
    if let Some(a) = a {
        s.push_str(&format!(
            "; cuda:{} had {} free of {}, the allocator reserved {}",
            a.device,
            bytes(a.free.bytes),
            bytes(a.total.bytes),
            bytes(a.reserved.bytes)
        ));
        if let Some(o) = a.outside {
            s.push_str(&format!(" and {} was outside it", bytes(o.bytes)));
            if let (Some(c), Some(u)) = (a.context, a.unexplained_bytes) {
                let rest = if a.nccl.is_some() {
                    "NCCL and what no figure explains"
                } else {
                    "what no figure explains"
                };
                s.push_str(&format!(
                    " (the CUDA context {}, other processes {}, the rest {}: {rest})",
                    bytes(c.bytes),
                    bytes(a.other_processes.map_or(0, |p| p.bytes)),
                    bytes(u)
                ));
            }
        }
    }
    if let OutsideReading::InternalErrorOnFullCard {
        free_bytes,
        threshold_bytes,
    } = o.reading
    {
        s.push_str(&format!(
            "; {} named no failed allocation, only an internal error: it is read as out of memory because the card had {} free when it failed (the recorder reads it so only under {} free; on a card with room it would be a plain error)",
            library(o.source),
            bytes(free_bytes),
            bytes(threshold_bytes)
        ));
    }
    s
}
