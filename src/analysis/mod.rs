//! Analyses over the model: replaying the allocator, explaining OOMs, grouping by site.
//!
//! [`analyze`] is the one entry point views use: it runs every analysis of an opened capture
//! once and returns a [`Product`] whose report ([`Analysis`]) the text, JSON and TUI views only
//! render, and whose timelines they query. Its serialized form
//! is the `memscope.report/1` JSON schema, so field names here are a public contract.

pub mod analyzed;
pub mod categories;
pub mod device;
pub mod figures;
pub mod graph;
pub mod labels;
pub mod leaks;
pub mod loops;
pub mod notes;
pub mod oom;
pub mod oom_step;
pub mod pools;
pub mod product;
pub mod ranked;
pub mod replay;
pub mod reserved;
pub mod retry;
pub mod sites;
mod snapshot;
pub mod trace_report;
pub mod verdict;

pub use trace_report::analyze_trace;
pub mod plan;
pub mod steps;
pub mod trace_memory;
pub mod whatif;
mod work;

pub use crate::model::trace::CountedFrom;
use crate::model::Layout;
pub use analyzed::{Analyzed, DeviceProduct};
use categories::Categories;
use leaks::Leak;
use oom::Cause;
pub use product::{analyze, analyze_on, Analyze, Product, SnapshotProduct, TraceProduct};
use replay::Consistency;
use sites::{Site, SiteTotal};
pub use snapshot::{analyze_snapshot, analyze_snapshot_with};
use steps::StepSource;

pub const SCHEMA: &str = "memscope.report/1";

/// What was analysed.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Input {
    pub path: String,
    pub kind: CaptureKind,
    pub bytes: u64,
    /// Snapshot layout (`torch20`, `torch21`, `modern`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layout: Option<Layout>,
    /// Where the capture was taken (torch's and CUDA's versions, the host), where it records
    /// any of it (`memscope run`; issue #40).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<crate::model::Origin>,
    /// What the reader skipped or repaired (events that are not valid, strings that could
    /// not be decoded): also in `notes`; kept apart so that `check` can say it.
    #[serde(skip)]
    pub load_notes: Vec<crate::model::LoadNote>,
}

/// What a capture is: a snapshot pickle or a profiler trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CaptureKind {
    Snapshot,
    Trace,
}

impl CaptureKind {
    /// `snapshot` or `trace`, as JSON and summaries spell it.
    pub fn name(self) -> &'static str {
        match self {
            CaptureKind::Snapshot => "snapshot",
            CaptureKind::Trace => "trace",
        }
    }
}

impl std::fmt::Display for CaptureKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The moment a figure is taken at: the last OOM, the allocated peak, or the dump (a
/// snapshot with no log, which has no other moment).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Moment {
    Oom,
    Peak,
    Dump,
}

impl Moment {
    /// `oom`, `peak` or `dump`, as JSON spells it.
    pub fn name(self) -> &'static str {
        match self {
            Moment::Oom => "oom",
            Moment::Peak => "peak",
            Moment::Dump => "dump",
        }
    }
}

/// One OOM, explained.
#[derive(Clone, Debug, serde::Serialize)]
pub struct OomReport {
    /// Index of the `oom` entry in the device's trace.
    pub event: u32,
    pub time_us: Option<i64>,
    pub requested_bytes: u64,
    pub rounded_bytes: u64,
    pub device_free_bytes: Option<u64>,
    pub allocated_bytes: u64,
    pub reserved_bytes: u64,
    pub largest_free_block_bytes: u64,
    pub free_reserved_bytes: u64,
    pub cause: Cause,
    /// The figures the cause rests on; its sentence and facts (the JSON's `summary` and
    /// `evidence`) are the wording module's (`crate::wording::oom_summary`, `oom_evidence`).
    #[serde(skip)]
    pub facts: oom::OomEvidence,
    /// In JSON, each with its action and assessment (`report::json`).
    #[serde(skip)]
    pub remedies: Vec<oom::Remedy>,
    /// The user's line that made the failing request.
    pub site: Option<Site>,
    pub stack: Vec<String>,
    /// Index into the report's `leaks` of the finding behind a `leak` cause.
    pub leak: Option<usize>,
    /// What held memory at the OOM, by site.
    pub top_sites: Vec<SiteTotal>,
    /// What held memory at the OOM, by category.
    pub categories: Option<Categories>,
}

/// A device's allocated figures as changes from the trace's start, where that is all the
/// capture gives ([`CountedFrom::TraceStart`]): signed, as a change can be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FromStart {
    /// At the end of the trace.
    pub allocated_bytes: i64,
    /// The highest.
    pub peak_allocated_bytes: i64,
    /// The lowest, the start (0) included.
    pub lowest_allocated_bytes: i64,
}

impl FromStart {
    /// The least the bytes in use can be at a point whose change from the start is `change`:
    /// nothing is ever below 0 in use, so what was in use at the start is at least minus the
    /// lowest change.
    pub fn at_least(&self, change: i64) -> u64 {
        change.saturating_sub(self.lowest_allocated_bytes).max(0) as u64
    }
}

/// Per-device figures. Byte counts follow `torch.cuda.memory_stats()` names.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DeviceReport {
    pub device: u32,
    /// What the allocated figures count from: `zero` (bytes in use), or `trace_start` (a torch
    /// 1.9-era trace's running sums: changes since the trace began, given in `from_start`; the
    /// absolute `allocated_bytes` is then `null` and the peaks are lower bounds).
    pub allocated_counted_from: CountedFrom,
    /// `null` where the capture records no absolute figure (`allocated_counted_from` is
    /// `trace_start`).
    pub allocated_bytes: Option<u64>,
    /// Snapshot-only figures are `null` for traces, which do not record them.
    pub active_bytes: Option<u64>,
    /// `null` where the capture records no reserved total (a torch 1.9-era trace).
    pub reserved_bytes: Option<u64>,
    pub requested_bytes: Option<u64>,
    /// Peaks are `null` where history before the log is missing: see `observed_peak_*`.
    pub peak_allocated_bytes: Option<u64>,
    pub peak_active_bytes: Option<u64>,
    pub peak_reserved_bytes: Option<u64>,
    pub peak_requested_bytes: Option<u64>,
    pub peak_inactive_split_bytes: Option<u64>,
    /// Highest figures seen within the recorded log (lower bounds when the log starts mid-run).
    pub observed_peak_allocated_bytes: u64,
    pub observed_peak_reserved_bytes: Option<u64>,
    /// The capture does not say how much was reserved (a torch 1.9-era trace): the reserved
    /// figures are then `null`. Kept for readers of earlier reports, where they were 0.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reserved_unknown: bool,
    /// Highest requested bytes seen within the log (a lower bound like the two above).
    #[serde(default)]
    pub observed_peak_requested_bytes: u64,
    pub peak_exact: bool,
    /// Event index of the allocated peak, when it lies in the log.
    pub peak_event: Option<u32>,
    pub inactive_split_bytes: Option<u64>,
    /// Non-expandable segments (torch's `segment.all.current`).
    pub segments: Option<u64>,
    /// Expandable segments, which torch leaves out of `segment.all` and `inactive_split_bytes`.
    pub expandable_segments: Option<u64>,
    /// Free bytes inside expandable segments, whether or not they hold a live block.
    pub expandable_free_bytes: Option<u64>,
    /// Reserved minus active: cached by the allocator, usable by new requests that fit
    /// (`null` where reserved is not recorded).
    pub free_reserved_bytes: Option<u64>,
    pub largest_free_block_bytes: Option<u64>,
    /// Where `allocated_counted_from` is `trace_start`: the allocated figures as changes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_start: Option<FromStart>,
    pub events: usize,
    /// Whether the log holds allocation events (not just a `snapshot` marker).
    pub has_history: bool,
    pub replay_consistent: bool,
    pub consistency: Consistency,
    pub history_starts_mid_run: bool,
    /// In JSON, each with its sentences (`report::json`).
    #[serde(skip)]
    pub ooms: Vec<OomReport>,
    pub top_sites: Vec<SiteTotal>,
    pub top_sites_at_peak: Vec<SiteTotal>,
    /// Allocated memory at the allocated peak, by category.
    pub categories_at_peak: Option<Categories>,
    /// Allocated memory at the dump, by category, for a snapshot with no log (which has no peak
    /// to break down): each block by its own stack.
    pub categories_at_dump: Option<Categories>,
    /// What the log showed of the program's loops (how the steps were found).
    pub structure: steps::Structure,
    /// Whether this device's capture could support a judgement on leaks.
    pub leak_judgement: LeakJudgement,
    /// Allocations by the `user_metadata` label of their entries (torch 2.6+, where the
    /// program set one): absent from the JSON when the capture has none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub user_labels: Vec<labels::LabelTotal>,
    /// Allocations by the torch.compile region (`compile_context`) that made them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub compiled_regions: Vec<labels::LabelTotal>,
    /// Per memory pool (`segment_pool_id`); absent where the capture records no pool ids.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<pools::PoolReport>,
    /// Highest reserved bytes whose pool cannot be told (segments made and freed in the log);
    /// absent where there are none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unknown_pool_peak_reserved_bytes: Option<u64>,
    /// What the private pools did to the reserved peak (absent without a private pool).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool_whatif: Option<whatif::pools::PoolWhatIf>,
    /// Reserved far above allocated, with its evidence and fix (absent where it is not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserved_excess: Option<reserved::ReservedExcess>,
}

impl DeviceReport {
    /// The one builder of a device's report: nothing known but the device and its event count.
    /// Every figure the capture does not record stays unknown (`None`, empty), never 0; both
    /// pipelines (`snapshot`, `trace_report`) start from it and set what their passes found,
    /// so a new field is added here once.
    pub(crate) fn unknown(device: u32, events: usize) -> DeviceReport {
        DeviceReport {
            device,
            allocated_counted_from: CountedFrom::Zero,
            allocated_bytes: None,
            active_bytes: None,
            reserved_bytes: None,
            requested_bytes: None,
            peak_allocated_bytes: None,
            peak_active_bytes: None,
            peak_reserved_bytes: None,
            peak_requested_bytes: None,
            peak_inactive_split_bytes: None,
            observed_peak_allocated_bytes: 0,
            observed_peak_reserved_bytes: None,
            reserved_unknown: true,
            observed_peak_requested_bytes: 0,
            peak_exact: false,
            peak_event: None,
            inactive_split_bytes: None,
            segments: None,
            expandable_segments: None,
            expandable_free_bytes: None,
            free_reserved_bytes: None,
            largest_free_block_bytes: None,
            from_start: None,
            events,
            has_history: events > 0,
            replay_consistent: true,
            consistency: Consistency {
                consistent: true,
                ..Consistency::default()
            },
            history_starts_mid_run: false,
            ooms: Vec::new(),
            top_sites: Vec::new(),
            top_sites_at_peak: Vec::new(),
            categories_at_peak: None,
            categories_at_dump: None,
            structure: Default::default(),
            leak_judgement: LeakJudgement::not(NotJudged::NoHistory, 0),
            user_labels: Vec::new(),
            compiled_regions: Vec::new(),
            pools: Vec::new(),
            unknown_pool_peak_reserved_bytes: None,
            pool_whatif: None,
            reserved_excess: None,
        }
    }
}

/// A leak finding, with the device it was found on.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LeakReport {
    pub device: u32,
    #[serde(flatten)]
    pub leak: Leak,
}

/// Growth that stopped, with the device it was seen on.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BoundedGrowthReport {
    pub device: u32,
    #[serde(flatten)]
    pub growth: leaks::BoundedGrowth,
}

/// Growth a benign reading explains, with the device it was seen on.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ExcludedGrowthReport {
    pub device: u32,
    #[serde(flatten)]
    pub growth: leaks::ExcludedGrowth,
}

/// One step of the workload (a training iteration, a validation batch), as found in the log.
#[derive(Clone, Debug, serde::Serialize)]
pub struct StepReport {
    pub device: u32,
    pub name: String,
    /// Event indices in the snapshot's log (`null` for traces).
    pub start_event: Option<u32>,
    pub end_event: Option<u32>,
    /// Bytes in use; where the device's figures count from the trace's start, the least they
    /// can be (see `from_start`).
    pub peak_allocated_bytes: u64,
    pub end_allocated_bytes: u64,
    /// How the step was found: `annotation`, `pattern`, `setup` or `tail`.
    pub source: StepSource,
    /// Where the device's figures count from the trace's start: the step's as changes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_start: Option<StepFromStart>,
}

/// A step's allocated figures as changes from the trace's start ([`CountedFrom::TraceStart`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct StepFromStart {
    pub peak_allocated_bytes: i64,
    pub end_allocated_bytes: i64,
}

/// Memory by category, where it was taken.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CategoriesReport {
    pub device: u32,
    pub at: Moment,
    #[serde(flatten)]
    pub categories: Categories,
}

/// What the verdict says, computed once from the findings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    OomFragmentation,
    OomCapacity,
    OomLeak,
    OomRetainedAttempt,
    OomUnknown,
    /// A library outside the caching allocator failed to allocate (issue #41).
    OomOutsideAllocator,
    /// A leak finding (snapshot or trace).
    Leak,
    /// An autograd graph that grows every step (traces).
    GraphGrowth,
    /// No OOM and no leak, and the capture could support that judgement.
    Ok,
    /// No OOM found, and the capture cannot support a leak judgement (see `leak_judgement`).
    Unjudged,
}

impl VerdictKind {
    pub fn id(self) -> &'static str {
        match self {
            VerdictKind::OomFragmentation => "oom_fragmentation",
            VerdictKind::OomCapacity => "oom_capacity",
            VerdictKind::OomLeak => "oom_leak",
            VerdictKind::OomRetainedAttempt => "oom_retained_attempt",
            VerdictKind::OomUnknown => "oom_unknown",
            VerdictKind::OomOutsideAllocator => "oom_outside_allocator",
            VerdictKind::Leak => "leak",
            VerdictKind::GraphGrowth => "graph_growth",
            VerdictKind::Ok => "ok",
            VerdictKind::Unjudged => "unjudged",
        }
    }
    pub fn of_oom(c: Cause) -> Self {
        match c {
            Cause::Fragmentation => VerdictKind::OomFragmentation,
            Cause::Capacity => VerdictKind::OomCapacity,
            Cause::Leak => VerdictKind::OomLeak,
            Cause::RetainedAttempt => VerdictKind::OomRetainedAttempt,
            Cause::Unknown => VerdictKind::OomUnknown,
            Cause::OutsideAllocator => VerdictKind::OomOutsideAllocator,
        }
    }
    pub fn is_oom(self) -> bool {
        matches!(
            self,
            VerdictKind::OomFragmentation
                | VerdictKind::OomCapacity
                | VerdictKind::OomLeak
                | VerdictKind::OomRetainedAttempt
                | VerdictKind::OomUnknown
                | VerdictKind::OomOutsideAllocator
        )
    }
}

impl std::fmt::Display for VerdictKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

/// Why a capture cannot support a leak judgement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NotJudged {
    /// No allocation history: only the state at the dump.
    NoHistory,
    /// One pass through the program (a single forward, one benchmark call): not a loop.
    SinglePass,
    /// The log's loop is a decoding loop (a `generate`/`decode` function's tokens): tokens are
    /// not steps, and a KV cache grows with each.
    DecodingLoop,
    /// Fewer complete steps than any judgement needs.
    TooFewSteps,
    /// Enough steps to judge, but memory rose at the end of every one of them, and too few of
    /// them for a leak finding: growth seen that cannot be told from warm-up.
    RisingTooFewSteps,
    /// The trace holds no `[memory]` events (recorded without `profile_memory=True`).
    NoMemoryEvents,
    /// The trace was cut short (its file ends before its events do) and holds no `[memory]`
    /// event before the cut: they may lie past it, so nothing says how it was recorded.
    CutBeforeMemoryEvents,
    /// The trace was cut short after some memory events: the frees, backward passes and stacks
    /// of what it recorded may lie past the cut (a trace's file is not in time order).
    CutShort,
    /// The trace's memory events are all on the CPU.
    CpuOnly,
}

/// Whether the capture could support a judgement on leaks, and on how many steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct LeakJudgement {
    pub judged: bool,
    /// Complete steps the judgement rests on (the most on any device).
    pub steps: usize,
    /// Fewest steps a judgement needs.
    pub min_steps: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<NotJudged>,
}

impl LeakJudgement {
    pub fn judged(steps: usize) -> Self {
        LeakJudgement {
            judged: true,
            steps,
            min_steps: JUDGE_STEPS,
            reason: None,
        }
    }
    pub fn not(reason: NotJudged, steps: usize) -> Self {
        LeakJudgement {
            judged: false,
            steps,
            min_steps: JUDGE_STEPS,
            reason: Some(reason),
        }
    }
}

/// Fewest complete steps for any leak judgement: with fewer, warm-up (optimizer state, caches
/// filled on the first steps) cannot be told from growth.
pub const JUDGE_STEPS: usize = 3;

/// The leak judgement a device's complete steps support, from the allocated bytes at each
/// step's end. From [`JUDGE_STEPS`] steps on, ends that do not rise at every step are a
/// judgement of no leak. A leak finding needs growth at [`leaks::MIN_RISING_STEPS`]
/// boundaries, so where the ends rise at every boundary but there are too few steps for a
/// finding, nothing is judged: growth was seen and could not be told from warm-up.
pub fn judge_steps(step_ends: &[u64], single_pass: bool) -> LeakJudgement {
    let n = step_ends.len();
    if n < JUDGE_STEPS {
        return if single_pass && n == 0 {
            LeakJudgement::not(NotJudged::SinglePass, 1)
        } else {
            LeakJudgement::not(NotJudged::TooFewSteps, n)
        };
    }
    let rising = step_ends
        .windows(2)
        .all(|w| w[1] > w[0].saturating_add(1 << 20));
    if n <= leaks::MIN_RISING_STEPS && rising {
        return LeakJudgement::not(NotJudged::RisingTooFewSteps, n);
    }
    LeakJudgement::judged(n)
}

/// The verdict: one line a user reads first.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Verdict {
    pub kind: VerdictKind,
    /// What the verdict rests on; its sentence (the JSON's `summary`) is
    /// [`crate::wording::verdict`]'s.
    #[serde(skip)]
    pub evidence: verdict::VerdictEvidence,
    /// Whether leaks could be judged at all (an `ok` needs it; `unjudged` says why not).
    pub leak_judgement: LeakJudgement,
    /// A trace whose file ends before its events do: where it was cut, and what was read
    /// before it. Everything the verdict says is about what came before the cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut: Option<verdict::TraceCut>,
}

/// Everything `analyze` found; serialized as the `memscope.report/1` JSON document.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Analysis {
    pub schema: &'static str,
    pub input: Input,
    pub verdict: Verdict,
    pub devices: Vec<DeviceReport>,
    pub leaks: Vec<LeakReport>,
    /// Growth that stopped and was released (bounded caches, warm-up): not leaks.
    pub bounded_growth: Vec<BoundedGrowthReport>,
    /// Growth a benign reading explains (replacement, a bounded container, immaterial growth),
    /// with its figures: not leaks.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub excluded_growth: Vec<ExcludedGrowthReport>,
    pub steps: Vec<StepReport>,
    /// Allocated memory by category at the last OOM, else at the allocated peak.
    pub categories: Option<CategoriesReport>,
    /// Autograd graph growth (traces only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph: Option<trace_report::GraphSection>,
    /// In JSON, each in words (`report::json`, `crate::wording::note`).
    #[serde(skip)]
    pub notes: Vec<notes::Note>,
    /// The device beyond the allocator (snapshots only; issue #41).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<device::DeviceSection>,
}

impl Analysis {
    /// The last OOM, the one that ended the run (earlier ones were caught by the program), and
    /// its device: what every view shows first.
    pub fn last_oom(&self) -> Option<(u32, &OomReport)> {
        last_oom_in(&self.devices)
    }
}

fn last_oom_in(devices: &[DeviceReport]) -> Option<(u32, &OomReport)> {
    devices
        .iter()
        .flat_map(|d| d.ooms.iter().map(move |o| (d.device, o)))
        .max_by_key(|(_, o)| (o.time_us.unwrap_or(0), o.event))
}

/// How many sites each list keeps.
pub const TOP_SITES: usize = 10;

fn top(mut v: Vec<SiteTotal>) -> Vec<SiteTotal> {
    v.truncate(TOP_SITES);
    v
}

/// The capture's leak judgement: judged if any device could be judged (on its most steps),
/// else the reason of the device that came closest.
pub fn overall_judgement(devices: &[DeviceReport]) -> LeakJudgement {
    devices
        .iter()
        .map(|d| d.leak_judgement)
        .max_by_key(|j| (j.judged, j.steps))
        .unwrap_or(LeakJudgement::not(NotJudged::NoHistory, 0))
}
