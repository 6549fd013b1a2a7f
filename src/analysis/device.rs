//! The device beyond the caching allocator (issue #41): what the snapshot's allocator state
//! cannot show, from the figures `memscope run` records beside it.
//!
//! The device's memory is split as `total = allocator reserved + outside the allocator + free`.
//! Each figure names its source: the device size (`cudaGetDeviceProperties`), reserved (the
//! snapshot's segments), free (`cudaMemGetInfo` at the dump). Outside the allocator is the
//! remainder, split where it can be told: the CUDA context (measured on the same card when CUDA
//! initialised), other processes (NVML's process list), NCCL (an *estimate* from its settings,
//! with a range), and what is left unexplained (cuBLAS/cuDNN workspaces, module images, NCCL
//! beyond the estimate). An OOM raised outside the allocator (NCCL, cuBLAS, cuDNN, CUDA) has no
//! allocator OOM event: it is carried here with this accounting.

use crate::model::{ContextMoment, DeviceRecord, OutsideReading, OutsideSource, Snapshot};

/// NCCL's default `NCCL_BUFFSIZE` (the SIMPLE protocol's buffer per connection): 4 MiB.
/// See NCCL's environment documentation, `NCCL_BUFFSIZE`
/// (<https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-buffsize>).
pub const NCCL_DEFAULT_BUFFSIZE: u64 = 4 << 20;
/// Channels when the settings name none: NCCL picks 2 at least and, on NVLink systems of the
/// H100 generation, up to 32.
pub const NCCL_MIN_CHANNELS: u64 = 2;
pub const NCCL_MAX_CHANNELS: u64 = 32;

/// Where a figure comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// `torch.cuda.get_device_properties().total_memory`.
    DeviceProperties,
    /// The snapshot's segments (the allocator's reserved bytes at the dump).
    AllocatorSegments,
    /// `cudaMemGetInfo` at the dump (`torch.cuda.mem_get_info`).
    MemGetInfo,
    /// `total - reserved - free`.
    Remainder,
    /// NVML's used bytes of this process right after CUDA initialised.
    NvmlAtStartup,
    /// NVML's bytes for this process less the allocator's reserved bytes, at a moment before
    /// NCCL or anything else outside the allocator ran ([`ContextMoment`]).
    NvmlProcessLessReserved,
    /// NVML's process list at the dump.
    NvmlProcesses,
    /// An estimate from `NCCL_*` settings, ranks and channels.
    NcclSettingsEstimate,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Figure {
    pub bytes: u64,
    pub source: Source,
}

/// An estimate with its range (`low..=high`). For NCCL: low is its channel buffers from the
/// settings (a floor: NCCL also holds its communicator, proxy and P2P structures, and the
/// process loads kernels lazily); high is all of outside that no measured part explains (NCCL
/// can hold no more). On the device41 captures (2x H200, NCCL 2.28) the process's growth beyond
/// the allocator across setup and steps (nvidia-smi) lay inside it each time: 826 MiB in
/// 256 MiB..1.3 GiB, 1066 MiB in 16 MiB..1.6 GiB, 646 MiB in 4 MiB..1.1 GiB; with the CUDA
/// context measured (518 MiB, the second round), high ends 8 MiB above each: 834, 1074 and
/// 654 MiB.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Estimate {
    pub low_bytes: u64,
    pub high_bytes: u64,
    pub source: Source,
    /// The inputs: buffer bytes per connection, channels (low and high), peers per channel.
    pub buffsize_bytes: u64,
    pub channels_low: u64,
    pub channels_high: u64,
    pub world_size: u32,
}

/// One device's accounting.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Accounting {
    pub device: u32,
    pub total: Figure,
    pub reserved: Figure,
    pub free: Figure,
    /// `total - reserved - free`; None where reserved and free exceed total (figures taken at
    /// different moments).
    pub outside: Option<Figure>,
    pub context: Option<Figure>,
    /// When the context was measured, where the recorder says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_moment: Option<ContextMoment>,
    pub other_processes: Option<Figure>,
    pub other_process_count: Option<u32>,
    pub nccl: Option<Estimate>,
    /// Outside bytes no measured part explains (the NCCL estimate is not subtracted).
    pub unexplained_bytes: Option<u64>,
}

/// An OOM raised outside the allocator.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct OutsideOom {
    pub source: OutsideSource,
    pub reading: OutsideReading,
    pub type_name: String,
    pub message: String,
}

/// What the device section holds: the accounting, or why it cannot be made.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum DeviceSection {
    Accounted {
        devices: Vec<Accounting>,
        /// The process's own device (`torch.cuda.current_device()` at the dump).
        current_device: Option<u32>,
        rank: Option<u32>,
        world_size: Option<u32>,
        outside_oom: Option<OutsideOom>,
    },
    /// The snapshot records the device sizes but not free memory (an older `memscope run`
    /// or `memscope.capture()`).
    NoFreeFigure,
    /// No device figures at all (a snapshot not written by `memscope run`).
    NoDeviceFigures,
}

/// The section for `snap`, with each device's reserved bytes at the dump.
pub fn section(snap: &Snapshot, reserved: &[(u32, Option<u64>)]) -> DeviceSection {
    if snap.device_memory.is_empty() {
        return DeviceSection::NoDeviceFigures;
    }
    let record = snap.device_record.as_ref();
    let devices: Vec<Accounting> = snap
        .device_memory
        .iter()
        .filter_map(|d| {
            let free = d.free_bytes?;
            let reserved = reserved
                .iter()
                .find(|(i, _)| *i == d.index)
                .and_then(|(_, r)| *r)
                .unwrap_or(0);
            Some(account(d, reserved, free, record))
        })
        .take(64)
        .collect();
    if devices.is_empty() {
        return DeviceSection::NoFreeFigure;
    }
    DeviceSection::Accounted {
        devices,
        current_device: record.and_then(|r| r.current_device),
        rank: record.and_then(|r| r.rank),
        world_size: record.and_then(|r| r.world_size),
        outside_oom: record
            .and_then(|r| r.outside_error.as_ref())
            .map(|e| OutsideOom {
                source: e.source,
                reading: e.reading,
                type_name: e.type_name.clone(),
                message: e.message.clone(),
            }),
    }
}

fn account(
    d: &crate::model::DeviceMemory,
    reserved: u64,
    free: u64,
    record: Option<&DeviceRecord>,
) -> Accounting {
    let outside = d
        .total_bytes
        .checked_sub(reserved)
        .and_then(|x| x.checked_sub(free));
    let context = d.context_bytes.map(|b| Figure {
        bytes: b,
        source: match d.context_moment {
            Some(_) => Source::NvmlProcessLessReserved,
            None => Source::NvmlAtStartup,
        },
    });
    let nvml = d.nvml.as_ref();
    let other_processes = nvml.and_then(|n| n.others_bytes).map(|b| Figure {
        bytes: b,
        source: Source::NvmlProcesses,
    });
    let current = record.and_then(|r| r.current_device);
    // NCCL lives on the process's own device only.
    let measured = context.map_or(0, |c| c.bytes) + other_processes.map_or(0, |o| o.bytes);
    let unexplained = outside.map(|o| o.saturating_sub(measured));
    let nccl = record
        .filter(|_| current.is_none_or(|c| c == d.index))
        .and_then(|r| nccl_estimate(r, unexplained?));
    Accounting {
        device: d.index,
        total: Figure {
            bytes: d.total_bytes,
            source: Source::DeviceProperties,
        },
        reserved: Figure {
            bytes: reserved,
            source: Source::AllocatorSegments,
        },
        free: Figure {
            bytes: free,
            source: Source::MemGetInfo,
        },
        outside: outside.map(|b| Figure {
            bytes: b,
            source: Source::Remainder,
        }),
        context,
        context_moment: d.context_moment,
        other_processes,
        other_process_count: nvml.and_then(|n| n.other_processes),
        nccl,
        unexplained_bytes: unexplained,
    }
}

fn env_u64(r: &DeviceRecord, name: &str) -> Option<u64> {
    r.nccl_env
        .iter()
        .find(|(k, _)| k == name)
        .and_then(|(_, v)| v.trim().parse::<u64>().ok())
}

/// NCCL's bytes for a job of more than one rank, `rest` being the outside bytes no measured
/// part explains. Low: per channel, a send and a receive connection to each ring neighbour,
/// each holding `NCCL_BUFFSIZE` (SIMPLE); high: `rest` (never below low). Channels come from
/// `NCCL_MIN_NCHANNELS`/`NCCL_MAX_NCHANNELS` (older names `NCCL_MIN_NRINGS`/`NCCL_MAX_NRINGS`)
/// where set, else 2..=32. NCCL's own structures, proxy and P2P/IPC mappings are not counted.
fn nccl_estimate(r: &DeviceRecord, rest: u64) -> Option<Estimate> {
    let world = r.world_size.filter(|w| *w > 1)?;
    let buff = env_u64(r, "NCCL_BUFFSIZE")
        .filter(|b| (1..=1 << 34).contains(b))
        .unwrap_or(NCCL_DEFAULT_BUFFSIZE);
    let min = env_u64(r, "NCCL_MIN_NCHANNELS")
        .or_else(|| env_u64(r, "NCCL_MIN_NRINGS"))
        .filter(|c| (1..=64).contains(c));
    let max = env_u64(r, "NCCL_MAX_NCHANNELS")
        .or_else(|| env_u64(r, "NCCL_MAX_NRINGS"))
        .filter(|c| (1..=64).contains(c));
    let high_ch = max.unwrap_or(NCCL_MAX_CHANNELS).max(min.unwrap_or(1));
    let low_ch = min.unwrap_or(NCCL_MIN_CHANNELS.min(high_ch)).min(high_ch);
    // A 2-rank ring has one neighbour, more ranks two.
    let peers: u64 = if world == 2 { 1 } else { 2 };
    let low = low_ch * peers * 2 * buff;
    let high = rest.max(low);
    Some(Estimate {
        low_bytes: low,
        high_bytes: high,
        source: Source::NcclSettingsEstimate,
        buffsize_bytes: buff,
        channels_low: low_ch,
        channels_high: high_ch,
        world_size: world,
    })
}

impl DeviceSection {
    /// The accounting of the process's own device (the first one where none is recorded).
    pub fn own(&self) -> Option<&Accounting> {
        let DeviceSection::Accounted {
            devices,
            current_device,
            ..
        } = self
        else {
            return None;
        };
        current_device
            .and_then(|c| devices.iter().find(|a| a.device == c))
            .or(devices.first())
    }
}
