//! The report's notes as facts: what limits a figure or a judgement (a log that starts mid-run,
//! a trace with no memory events, a graph that cannot be followed), with the numbers, devices
//! and ops it rests on.
//!
//! The analysis decides that a note is due and what it is about; `crate::wording::note` says
//! it, for every view (text, HTML, JSON, TUI). A test asks about the fact (which op, how many
//! events), never about a sentence, and rewording a note never touches the analysis. Each
//! family is its own enum, made by the analysis that finds it: a snapshot's devices
//! (`snapshot`), a trace's memory (`trace_memory`, `trace_report`), its autograd graph
//! (`graph`), and the loader's own notes ([`LoadNote`]), which the model layer keeps.

use super::replay::Mismatch;
use crate::model::trace::DeviceKey;
use crate::model::LoadNote;

/// One note of the report.
#[derive(Clone, Debug, PartialEq)]
pub enum Note {
    /// What the loader skipped, repaired or guessed.
    Load(LoadNote),
    Snapshot(SnapshotNote),
    Trace(TraceNote),
    Graph(GraphNote),
}

/// What a snapshot's figures need said: how much of the run its log shows, and whether the
/// replay matches the dump.
#[derive(Clone, Debug, PartialEq)]
pub enum SnapshotNote {
    /// The device's log starts while `reserved` bytes were already reserved: peaks before
    /// it are unknown.
    StartsMidRun {
        device: u32,
        reserved: u64,
        why: MidRun,
    },
    /// The device has no allocation history: current figures only.
    NoHistory { device: u32 },
    /// Blocks from before the log that were freed in it, sized by their rounded requests.
    ApproximateInitialBlocks { device: u32, blocks: usize },
    /// The replayed end state differs from the snapshot's segments.
    ReplayDiffers {
        device: u32,
        mismatches: usize,
        first: Option<Mismatch>,
    },
    /// A torch 2.0 snapshot: no event history, no OOM entries.
    Torch20,
    /// No segments and no events at all.
    Empty,
    /// The snapshot says its trace ring buffer overflowed
    /// (`allocator_settings.trace_alloc_overflowed`, newer torch): the log lost its oldest
    /// entries.
    RingOverflowed {
        device: u32,
        max_entries: Option<u64>,
    },
}

/// Why a log starts mid-run, as far as the blocks from before it tell
/// (`sites::FramelessEvidence`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MidRun {
    /// Blocks from before the log keep their own stacks: the ring buffer dropped entries.
    RingBufferDropped,
    /// No block from before the log has a stack: recording began late.
    RecordingBeganLate,
    /// The blocks cannot tell the two apart.
    Either,
    /// The snapshot says (`allocator_settings.trace_alloc_overflowed`, newer torch): the
    /// allocator's own flag, authoritative over the blocks' evidence.
    Recorded {
        overflowed: bool,
        /// `trace_alloc_max_entries`, the ring buffer's size, where recorded.
        max_entries: Option<u64>,
    },
}

/// What a trace's memory figures need said.
#[derive(Clone, Debug, PartialEq)]
pub enum TraceNote {
    /// No `[memory]` events: recorded without `profile_memory=True`.
    NoMemoryEvents,
    /// `[memory]` events without `Total Allocated`, whose totals were rebuilt as running sums.
    ReconstructedTotals { events: u64 },
    /// `[memory]` events without `Addr`, paired with their frees by size.
    WithoutAddress { events: u64 },
    /// Memory events but no `ProfilerStep` spans.
    NoProfilerSteps,
    /// Bytes already allocated on a device when profiling began.
    AllocatedBeforeProfiling { device: DeviceKey, bytes: u64 },
    /// Devices other than CUDA ones, whose memory events are not analysed.
    NotCuda { devices: Vec<DeviceKey> },
    /// Profiler steps, but no CUDA memory event to give them figures.
    StepsWithoutMemory {
        steps: usize,
        first: String,
        last: String,
    },
}

/// Why the autograd graph's growth could not be judged, or what it left out.
#[derive(Clone, Debug, PartialEq)]
pub enum GraphNote {
    /// No op carries an autograd sequence number.
    NoSequenceNumbers,
    /// Forward ops ran with grad mode on, and no backward pass ran.
    NoBackward { forward_nodes: usize },
    /// Fewer profiled steps than growth across steps needs.
    TooFewSteps { steps: usize },
    /// Ops whose autograd nodes no backward consumes in step after step, but that do not
    /// accumulate across steps (values computed with grad on and not used for the loss), most
    /// nodes per step first.
    UnconsumedNotAccumulating { ops: Vec<UnconsumedOp> },
}

/// One op of [`GraphNote::UnconsumedNotAccumulating`].
#[derive(Clone, Debug, PartialEq)]
pub struct UnconsumedOp {
    pub op: String,
    /// The user's function it ran in, where a stack says.
    pub function: Option<String>,
    pub nodes_per_step: f64,
}

impl From<LoadNote> for Note {
    fn from(n: LoadNote) -> Note {
        Note::Load(n)
    }
}

impl From<SnapshotNote> for Note {
    fn from(n: SnapshotNote) -> Note {
        Note::Snapshot(n)
    }
}

impl From<TraceNote> for Note {
    fn from(n: TraceNote) -> Note {
        Note::Trace(n)
    }
}

impl From<GraphNote> for Note {
    fn from(n: GraphNote) -> Note {
        Note::Graph(n)
    }
}
