//! The allocator's world as memscope reasons about it, independent of the file it came from.
//!
//! Loaders for every snapshot layout (torch 2.0's `history` blocks, 2.1's traces without
//! time, 2.11's annotations) converge here, so analyses never see format differences. Stacks
//! are interned once: a snapshot repeats the same few thousand stacks over a million events,
//! and analyses group by stack constantly, so a [`StackId`] comparison must be an integer
//! comparison. The model owns its strings, so it outlives the mapped input file.

pub mod events;
pub mod frames;
pub mod load_note;
pub mod model_code;
pub mod roles;
pub mod trace;

pub use events::{Event, EventData, Events};
pub use frames::{Frame, FrameId, FrameKind, FxNode, Site, StackId, Stacks, Sym};
pub use load_note::{LoadNote, UnknownState};
pub use roles::{FrameRole, OptimizerPart, StackRoles};

/// Which of the allocator's two pools a block or segment belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Pool {
    /// Requests of at most 1 MiB, served from 2 MiB segments.
    Small,
    Large,
}

/// Largest request (after rounding) served from the small pool.
pub const SMALL_SIZE: u64 = 1 << 20;
/// Size of a small-pool segment.
pub const SMALL_BUFFER: u64 = 2 << 20;
/// Minimum block size and request rounding quantum.
pub const MIN_BLOCK: u64 = 512;

impl Pool {
    pub fn for_rounded_size(rounded: u64) -> Pool {
        if rounded <= SMALL_SIZE {
            Pool::Small
        } else {
            Pool::Large
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Pool::Small => "small",
            Pool::Large => "large",
        }
    }
}

/// State of a block as the snapshot records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockState {
    /// Handed out to a tensor.
    ActiveAllocated,
    /// Freed by the program, but a stream it was used on has not finished with it (`record_stream`).
    ActivePendingFree,
    /// Free, cached by the allocator.
    Inactive,
}

impl BlockState {
    pub fn parse(s: &str) -> Option<BlockState> {
        match s {
            "active_allocated" => Some(BlockState::ActiveAllocated),
            "active_pending_free" => Some(BlockState::ActivePendingFree),
            "inactive" => Some(BlockState::Inactive),
            _ => None,
        }
    }
    pub fn is_active(self) -> bool {
        !matches!(self, BlockState::Inactive)
    }
}

/// A block of a segment, as listed in the snapshot's final state.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    pub address: u64,
    pub size: u64,
    /// The size the program asked for (0 where the snapshot does not say).
    pub requested_size: u64,
    pub state: BlockState,
    pub stack: StackId,
}

/// A segment: one `cudaMalloc` (or one expandable virtual range) owned by the allocator.
#[derive(Clone, Debug, PartialEq)]
pub struct Segment {
    pub device: u32,
    pub address: u64,
    pub total_size: u64,
    pub stream: u64,
    pub pool: Pool,
    /// `(pool id, graph id)` for CUDA-graph private pools; `None` in old layouts.
    pub segment_pool_id: Option<(i64, i64)>,
    pub is_expandable: bool,
    /// Where the segment was allocated (empty in old layouts).
    pub stack: StackId,
    pub blocks: Vec<Block>,
}

impl Segment {
    pub fn end(&self) -> u64 {
        self.address.saturating_add(self.total_size)
    }
    pub fn allocated_bytes(&self) -> u64 {
        self.blocks
            .iter()
            .filter(|b| b.state == BlockState::ActiveAllocated)
            .fold(0u64, |a, b| a.saturating_add(b.size))
    }
    pub fn active_bytes(&self) -> u64 {
        self.blocks
            .iter()
            .filter(|b| b.state.is_active())
            .fold(0u64, |a, b| a.saturating_add(b.size))
    }
}

/// What a trace entry records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Alloc,
    FreeRequested,
    FreeCompleted,
    SegmentAlloc,
    SegmentFree,
    SegmentMap,
    SegmentUnmap,
    /// The program called `_snapshot()` here (torch 2.0 layouts carry only this).
    Snapshot,
    /// An allocation failed; `size` is the request, `device_free` what the device had left.
    Oom,
    /// `torch.cuda.memory._annotate_memory` (newer torch): a note on the live allocation at
    /// `addr`, its text in the entry's `user_metadata`. It changes no memory.
    Annotate,
    /// An action this version of memscope does not know; kept so indices stay faithful.
    Other,
}

impl Action {
    pub fn parse(s: &str) -> Action {
        match s {
            "alloc" => Action::Alloc,
            "free_requested" => Action::FreeRequested,
            "free_completed" => Action::FreeCompleted,
            "segment_alloc" => Action::SegmentAlloc,
            "segment_free" => Action::SegmentFree,
            "segment_map" => Action::SegmentMap,
            "segment_unmap" => Action::SegmentUnmap,
            "snapshot" => Action::Snapshot,
            "oom" => Action::Oom,
            "annotate" => Action::Annotate,
            _ => Action::Other,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Action::Alloc => "alloc",
            Action::FreeRequested => "free_requested",
            Action::FreeCompleted => "free_completed",
            Action::SegmentAlloc => "segment_alloc",
            Action::SegmentFree => "segment_free",
            Action::SegmentMap => "segment_map",
            Action::SegmentUnmap => "segment_unmap",
            Action::Snapshot => "snapshot",
            Action::Oom => "oom",
            Action::Annotate => "annotate",
            Action::Other => "other",
        }
    }
}

/// Index of an entry's metadata in [`Snapshot::metas`]; 0 is "none".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MetaId(pub u32);

impl MetaId {
    pub const NONE: MetaId = MetaId(0);
}

/// What torch 2.6+ records beside an entry's frames, each interned in [`Snapshot::stacks`]
/// as one line. Attacker data like every string of a capture.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct EventMeta {
    /// `user_metadata`: the label `torch._C._cuda_setMemoryMetadata` (`_set_memory_metadata`)
    /// set when the entry was made, or an `annotate` entry's text (`None` for `""`).
    pub user: Option<Sym>,
    /// `compile_context`: the torch.compile region that ran (`"Torch-Compiled Region: 0/0"`;
    /// `None` for `"N/A"`, what torch writes outside one).
    pub region: Option<Sym>,
    /// `internal_metadata`: kept as an opaque string (no public torch source defines it).
    pub internal: Option<Sym>,
}

/// Index of an event in its device's trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct EventIdx(pub u32);

/// Per-device state: the final segments and the recorded event log.
#[derive(Clone, Debug, Default)]
pub struct Device {
    pub index: u32,
    pub segments: Vec<Segment>,
    pub events: Events,
}

#[cfg(test)]
impl Device {
    /// Device 0 with `events` and no final segments: what the passes' unit tests build.
    pub(crate) fn of_events(events: impl Into<Events>) -> Device {
        Device {
            index: 0,
            segments: Vec::new(),
            events: events.into(),
        }
    }
}

/// A `record_function` range boundary recorded by the allocator (`external_annotations`).
#[derive(Clone, Debug, PartialEq)]
pub struct Annotation {
    pub device: u32,
    pub name: String,
    pub start: bool,
    pub time_us: i64,
}

/// The allocator configuration recorded with the snapshot.
#[derive(Clone, Debug, PartialEq, Default, serde::Serialize)]
pub struct AllocatorSettings {
    /// `allocator_settings.trace_alloc_overflowed` (newer torch): the trace ring buffer dropped
    /// its oldest entries. `None` where torch did not say (2.11 and older).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_alloc_overflowed: Option<bool>,
    /// `allocator_settings.trace_alloc_max_entries`: the ring buffer's size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_alloc_max_entries: Option<u64>,
    /// `PYTORCH_CUDA_ALLOC_CONF` as the process saw it.
    pub conf: Option<String>,
    /// `max_split_size` in bytes; `None` means unlimited (torch reports -1 or `SIZE_MAX`).
    pub max_split_size: Option<u64>,
    pub expandable_segments: Option<bool>,
    pub garbage_collection_threshold: Option<f64>,
    /// Divisions per power-of-two interval, indexed from the 1 MiB interval up (all zero = plain rounding).
    pub roundup_power2_divisions: Vec<u64>,
    /// Whether the snapshot carried settings at all (torch >= 2.1).
    pub recorded: bool,
}

/// Which snapshot layout the file used, as far as it can be told.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    /// torch 2.0: blocks with `history`, no addresses, no trace beyond a `snapshot` entry.
    Torch20,
    /// torch 2.1-era: addresses and frames, trace entries without `time_us`.
    Torch21,
    /// torch 2.2+: `time_us`, usually `allocator_settings`.
    Modern,
}

/// A whole memory snapshot, as loaded.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub layout: Layout,
    pub devices: Vec<Device>,
    pub stacks: Stacks,
    pub annotations: Vec<Annotation>,
    pub settings: AllocatorSettings,
    /// Things the loader had to guess or skip, for the report's notes.
    pub load_notes: Vec<LoadNote>,
    /// Each device's memory size, where the capture records it (`memscope run` and
    /// `memscope.capture()` add it under the snapshot's `memscope` key; torch does not).
    pub device_memory: Vec<DeviceMemory>,
    /// What `memscope run` recorded about the process beside the allocator (issue #41): the
    /// NCCL settings, the ranks, the error of an OOM raised outside the allocator.
    pub device_record: Option<DeviceRecord>,
    /// Entry metadata, interned: `metas[0]` is the empty one (see [`Events::meta`]).
    pub metas: Vec<EventMeta>,
    /// A top-level `internal_metadata`, kept opaque (one line), where the capture has one.
    pub internal_metadata: Option<String>,
}

#[cfg(test)]
impl Snapshot {
    /// A snapshot of `devices` and `stacks` with nothing else recorded (no settings, notes,
    /// metadata): what the passes' unit tests build around their crafted event logs.
    pub(crate) fn of_devices(layout: Layout, devices: Vec<Device>, stacks: Stacks) -> Snapshot {
        Snapshot {
            layout,
            devices,
            stacks,
            annotations: Vec::new(),
            settings: AllocatorSettings::default(),
            load_notes: Vec::new(),
            device_memory: Vec::new(),
            device_record: None,
            metas: Vec::new(),
            internal_metadata: None,
        }
    }
}

/// A device's memory size as the process saw it (`torch.cuda.get_device_properties`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceMemory {
    pub index: u32,
    pub total_bytes: u64,
    /// Free bytes at the dump (`cudaMemGetInfo`, through `torch.cuda.mem_get_info`).
    pub free_bytes: Option<u64>,
    /// NVML's view at the dump, where NVML answered.
    pub nvml: Option<NvmlUsage>,
    /// The CUDA context measured when CUDA initialised on this device (NVML).
    pub context_bytes: Option<u64>,
    /// When `memscope run` measured it (NVML's bytes for the process less reserved), where
    /// recorded; None for the first recorder's start-up figure.
    pub context_moment: Option<ContextMoment>,
}

/// The moment the recorder measured the CUDA context: each one comes before NCCL or anything
/// else outside the allocator has run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ContextMoment {
    /// Right after CUDA initialised, the process already listed by NVML.
    CudaInit,
    /// Right after the program's `torch.cuda.set_device(i)`, on the device it chose.
    SetDevice,
    /// Just before `torch.distributed.init_process_group`.
    InitProcessGroup,
}

/// NVML's figures for one device at the dump.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NvmlUsage {
    pub used_bytes: u64,
    /// This process's bytes, where the driver lists processes.
    pub self_bytes: Option<u64>,
    /// Every other process's bytes on the device, and how many they are.
    pub others_bytes: Option<u64>,
    pub other_processes: Option<u32>,
}

/// Process-level facts `memscope run` records beside the devices (bounded strings).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct DeviceRecord {
    pub current_device: Option<u32>,
    pub rank: Option<u32>,
    pub local_rank: Option<u32>,
    pub world_size: Option<u32>,
    /// `NCCL_*` settings, name and value, at most 64.
    pub nccl_env: Vec<(String, String)>,
    /// The failure to allocate that was raised outside PyTorch's allocator, if any.
    pub outside_error: Option<OutsideError>,
    /// Where the capture was taken: torch's and CUDA's versions and the host (issue #40).
    pub origin: Origin,
}

/// Where a capture was taken, as `memscope run` records it (`torch.__version__`,
/// `torch.version.cuda`, `socket.gethostname()`): bounded, printable text, attacker data.
#[derive(Clone, Debug, PartialEq, Eq, Default, serde::Serialize)]
pub struct Origin {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub torch_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuda_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// Which library failed to allocate outside the caching allocator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OutsideSource {
    Nccl,
    Cublas,
    Cudnn,
    Cuda,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutsideError {
    pub source: OutsideSource,
    pub reading: OutsideReading,
    pub type_name: String,
    pub message: String,
}

/// Why the recorder took a library's error for an allocation failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OutsideReading {
    /// The error names a failed allocation (`CUBLAS_STATUS_ALLOC_FAILED`, NCCL's calloc, …).
    AllocationFailed,
    /// cuDNN said only `CUDNN_STATUS_INTERNAL_ERROR` (what it says when its handle cannot be
    /// made on a full card: measured on an H200 with 3.1 MiB free), and the recorder read the
    /// device's free bytes at the error below its threshold.
    InternalErrorOnFullCard {
        free_bytes: u64,
        threshold_bytes: u64,
    },
}

impl Snapshot {
    /// The memory size of device `index`, where the capture records it.
    pub fn device_total(&self, index: u32) -> Option<u64> {
        self.device_memory
            .iter()
            .find(|d| d.index == index)
            .map(|d| d.total_bytes)
    }

    pub fn device(&self, index: u32) -> Option<&Device> {
        self.devices.iter().find(|d| d.index == index)
    }

    /// The metadata of an entry (the empty one for `MetaId::NONE` or an id out of range);
    /// an entry's id is [`Events::meta`].
    pub fn meta(&self, id: MetaId) -> EventMeta {
        self.metas.get(id.0 as usize).copied().unwrap_or_default()
    }

    /// An entry's `user_metadata`, where it has one.
    pub fn user_label(&self, id: MetaId) -> Option<&str> {
        self.meta(id).user.map(|s| self.stacks.str(s))
    }

    /// An entry's `compile_context`, where it ran in a compiled region.
    pub fn compiled_region(&self, id: MetaId) -> Option<&str> {
        self.meta(id).region.map(|s| self.stacks.str(s))
    }
}
