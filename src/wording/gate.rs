//! The gate's words: every rule's outcome, typed ([`Reason`], a SKIP's [`Skip`]), and its
//! one-line message; why leaks were not judged (said of "the capture", as a SKIP reason), and
//! why "no OOM recorded" is no evidence.

use serde::Serialize;

use crate::analysis::leaks::{Extent, LeakKind, MIN_RISING_STEPS};
use crate::analysis::oom::Cause;
use crate::analysis::sites::Site;
use crate::analysis::{CaptureKind, NotJudged};
use crate::units;

/// Why a capture could not support a leak judgement, as the gate says it.
pub fn gate_not_judged(reason: Option<NotJudged>, steps: usize, min_steps: usize) -> String {
    match reason {
        Some(NotJudged::NoHistory) => {
            "the capture has no allocation history (only the state at the dump)".into()
        }
        Some(NotJudged::SinglePass) => {
            "the capture is one pass through the program, not a loop".into()
        }
        Some(NotJudged::DecodingLoop) => {
            "the capture's loop is a decoding loop: tokens are not steps".into()
        }
        Some(NotJudged::TooFewSteps) => format!(
            "the capture has {steps} complete step{}; a leak judgement needs {min_steps}",
            if steps == 1 { "" } else { "s" },
        ),
        Some(NotJudged::RisingTooFewSteps) => format!(
            "memory rose at the end of every one of the capture's {steps} complete steps, too \
             few to tell a leak from warm-up (a leak finding needs {MIN_RISING_STEPS} rising steps)"
        ),
        Some(NotJudged::NoMemoryEvents) => {
            "the trace holds no memory events (recorded without profile_memory=True)".into()
        }
        Some(NotJudged::CutBeforeMemoryEvents) => {
            "the trace is cut short before any memory event (memory events may lie past the cut)"
                .into()
        }
        Some(NotJudged::CutShort) => {
            "the trace is cut short: frees, backward passes and memory events may lie past the cut"
                .into()
        }
        Some(NotJudged::CpuOnly) => "the trace's memory events are all on the CPU".into(),
        None => "the capture cannot support a leak judgement".into(),
    }
}

/// Why an OOM could not have been recorded, where it could not: a snapshot records OOMs in its
/// allocation history, a trace as memory events.
pub fn no_oom_record(reason: NotJudged) -> Option<&'static str> {
    match reason {
        NotJudged::NoHistory => {
            Some("the capture has no allocation history, where a snapshot records its OOMs")
        }
        NotJudged::NoMemoryEvents => Some(
            "the trace holds no memory events (recorded without profile_memory=True), \
             where a trace records its OOMs",
        ),
        NotJudged::CutBeforeMemoryEvents => Some(
            "the trace is cut short before any memory event, where a trace records its OOMs: \
             an OOM may lie past the cut",
        ),
        NotJudged::CutShort => Some(
            "the trace is cut short, and a trace records its OOMs as memory events: an OOM may \
             lie past the cut",
        ),
        NotJudged::CpuOnly => Some(
            "the trace's memory events are all on the CPU: it records no CUDA memory, so no \
             CUDA OOM",
        ),
        NotJudged::SinglePass
        | NotJudged::DecodingLoop
        | NotJudged::TooFewSteps
        | NotJudged::RisingTooFewSteps => None,
    }
}

// ---------------------------------------------------------------------------------------------
// The gate's outcomes, typed, and their sentences.
//
// Each rule of `check` returns a [`Reason`]: a figure held to a limit ([`Reason::Within`],
// [`Reason::Over`]), a count rule's own outcome (OOMs recorded, a leak found, an OOM a leak
// caused, ...), or a SKIP with its typed [`Skip`] reason. The gate keeps the reason beside the
// sentence said here (`memscope.check/3`'s `reason`, by [`Reason::code`]), so a reader of the
// JSON never parses the message. `wording` sits below `check`: these types are the gate's
// vocabulary, filled by its rules from the summaries' typed figures.

/// What a rule measures, for formatting values (`memscope.check/3`'s `unit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Bytes,
    BytesPerStep,
    NodesPerStep,
    Count,
    Fraction,
}

impl Unit {
    pub fn format(self, v: f64) -> String {
        match self {
            Unit::Bytes => units::bytes(v.max(0.0).round() as u64),
            Unit::BytesPerStep => format!("{}/step", units::bytes(v.max(0.0).round() as u64)),
            Unit::NodesPerStep => format!("{} nodes/step", trim_float(v)),
            Unit::Count => format!("{}", v.round() as i64),
            Unit::Fraction => format!("{:.1}%", v * 100.0),
        }
    }
}

/// `3`, or `2.50`: a whole number without its decimals.
pub fn trim_float(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round() as i64)
    } else {
        format!("{v:.2}")
    }
}

/// What a limit holds, said before its figures (`peak allocated on cuda:0 2.0 GiB > limit …`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Measure {
    PeakAllocated {
        device: String,
    },
    PeakReserved {
        device: String,
    },
    LiveAtEnd {
        device: String,
    },
    Leaks,
    Ooms,
    FragmentationOoms,
    GraphGrowth,
    LargestGrowth,
    /// Between the ranks of one group (its label: `trace ranks (world size 128)`).
    Imbalance {
        group: String,
    },
}

impl Measure {
    fn words(&self) -> String {
        match self {
            Measure::PeakAllocated { device } => format!("peak allocated on {device}"),
            Measure::PeakReserved { device } => format!("peak reserved on {device}"),
            Measure::LiveAtEnd { device } => format!("live at the end on {device}"),
            Measure::Leaks => "leaks:".into(),
            Measure::Ooms => "OOMs:".into(),
            Measure::FragmentationOoms => "fragmentation OOMs:".into(),
            Measure::GraphGrowth => "graph growth".into(),
            Measure::LargestGrowth => "largest growth".into(),
            Measure::Imbalance { group } => format!("imbalance spread between {group}"),
        }
    }
}

/// What is said after a figure held to a limit, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Caveat {
    /// A snapshot whose history before the log is missing: its peak is a lower bound.
    HistoryMissing,
    /// A trace that records allocated bytes only as changes from its start: the figure over
    /// the limit is a lower bound.
    FromTraceStart,
    /// The op whose autograd graph grows most.
    Op(String),
    /// The baseline's figure and the tolerance the limit adds to it.
    Baseline { bytes: u64, tolerance: f64 },
}

impl std::fmt::Display for Caveat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Caveat::HistoryMissing => {
                f.write_str(" (a lower bound: history before the log is missing)")
            }
            Caveat::FromTraceStart => f.write_str(
                " (a lower bound: the trace records allocated bytes only as changes from its start)",
            ),
            Caveat::Op(op) => write!(f, ": {op}"),
            Caveat::Baseline { bytes, tolerance } => write!(
                f,
                " (baseline {} + {:.1}%)",
                units::bytes(*bytes),
                tolerance * 100.0
            ),
        }
    }
}

/// A figure held to a limit.
#[derive(Clone, Debug, PartialEq)]
pub struct Held {
    pub measure: Measure,
    pub unit: Unit,
    pub measured: f64,
    pub limit: f64,
    pub caveats: Vec<Caveat>,
}

/// The last OOM of a capture's `count`.
#[derive(Clone, Debug, PartialEq)]
pub struct OomFigures {
    pub count: usize,
    pub requested_bytes: u64,
    pub device: String,
    pub cause: Cause,
}

/// A capture's leak findings: how many, how many were released after their loop, and the
/// largest's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct LeakFigures {
    pub findings: usize,
    pub released: usize,
    pub kind: LeakKind,
    pub growth_bytes_per_step: f64,
    pub steps: u64,
    pub live_bytes: u64,
    pub extent: Extent,
}

/// Why a capture cannot support a leak judgement (the leak rules SKIP with it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoLeakJudgement {
    /// The summary holds no leak section (the analysis did not look).
    NotAnalysed,
    /// The capture could not support one: the judgement's reason and its steps.
    NotJudged {
        reason: Option<NotJudged>,
        steps: usize,
        min_steps: usize,
    },
}

impl std::fmt::Display for NoLeakJudgement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoLeakJudgement::NotAnalysed => f.write_str("this analysis has no leak findings"),
            NoLeakJudgement::NotJudged {
                reason,
                steps,
                min_steps,
            } => write!(
                f,
                "leaks not judged: {}",
                gate_not_judged(*reason, *steps, *min_steps)
            ),
        }
    }
}

/// Why a device's figure cannot be held to a limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unmeasured {
    /// The capture records no reserved bytes on the device (a torch 1.9 trace).
    NoReserved { device: String },
    /// The figure is known only from below (changes from a trace's start), and the bound is
    /// within the limit: it cannot show the figure is.
    BoundWithin { measure: Measure, bound: u64 },
}

impl std::fmt::Display for Unmeasured {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unmeasured::NoReserved { device } => write!(
                f,
                "the trace records no reserved bytes on {device} (its [memory] events carry no `Total Reserved`)"
            ),
            Unmeasured::BoundWithin { measure, bound } => write!(
                f,
                "{} is known only as a change from the trace's start (its [memory] \
                 events carry no `Total Allocated`): at least {}, which cannot show it within the limit",
                measure.words(),
                units::bytes(*bound)
            ),
        }
    }
}

/// Why one device's figure cannot be compared with the baseline's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Uncompared {
    /// The input's own figure.
    Here(Unmeasured),
    /// The baseline records no such figure.
    Baseline(Unmeasured),
    /// The baseline's figure is a lower bound: no limit to hold the input to.
    BaselineBound { measure: Measure },
}

impl std::fmt::Display for Uncompared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Uncompared::Here(u) => write!(f, "{u}"),
            Uncompared::Baseline(u) => write!(f, "the baseline's {u}"),
            Uncompared::BaselineBound { measure } => write!(
                f,
                "the baseline's {} is known only as a change from its trace's start: no \
                 limit to hold it to",
                measure.words()
            ),
        }
    }
}

/// Why a rule SKIPs (or, for a limit the user set, why `check` refuses with exit 2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Skip {
    NoDeviceMemory,
    Unmeasured(Unmeasured),
    Leaks(NoLeakJudgement),
    /// A capture without OOMs that could not have recorded one (the judgement's reason).
    OomsNotJudged(NotJudged),
    /// Graph growth not judged: the summary's words (summary files keep them as text).
    GraphNotJudged(String),
    /// A capture of a kind without an autograd graph (a snapshot).
    NoGraph(CaptureKind),
    NoGrowthFindings,
    /// No device in common with the baseline: the devices here and there.
    NoCommonDevice {
        here: Vec<String>,
        there: Vec<String>,
    },
    Uncompared(Uncompared),
    BaselineLeaks(NoLeakJudgement),
    GrowthNotAnalysed,
    GraphOneSide,
}

impl Skip {
    /// The stable snake_case code of `memscope.check/3`'s `reason`.
    pub fn code(&self) -> &'static str {
        match self {
            Skip::NoDeviceMemory => "no_device_memory",
            Skip::Unmeasured(Unmeasured::NoReserved { .. }) => "no_reserved_bytes",
            Skip::Unmeasured(Unmeasured::BoundWithin { .. }) => "lower_bound_within_limit",
            Skip::Leaks(NoLeakJudgement::NotAnalysed) => "leaks_not_analysed",
            Skip::Leaks(NoLeakJudgement::NotJudged { .. }) => "leaks_not_judged",
            Skip::OomsNotJudged(_) => "ooms_not_judged",
            Skip::GraphNotJudged(_) => "graph_not_judged",
            Skip::NoGraph(_) => "no_autograd_graph",
            Skip::NoGrowthFindings => "no_growth_findings",
            Skip::NoCommonDevice { .. } => "no_common_device",
            Skip::Uncompared(Uncompared::Here(u)) => Skip::Unmeasured(u.clone()).code(),
            Skip::Uncompared(Uncompared::Baseline(_)) => "baseline_no_reserved_bytes",
            Skip::Uncompared(Uncompared::BaselineBound { .. }) => "baseline_lower_bound",
            Skip::BaselineLeaks(NoLeakJudgement::NotAnalysed) => "baseline_leaks_not_analysed",
            Skip::BaselineLeaks(NoLeakJudgement::NotJudged { .. }) => "baseline_leaks_not_judged",
            Skip::GrowthNotAnalysed => "growth_not_analysed",
            Skip::GraphOneSide => "graph_growth_one_side",
        }
    }
}

impl std::fmt::Display for Skip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Skip::NoDeviceMemory => f.write_str("no device memory recorded"),
            Skip::Unmeasured(u) => write!(f, "{u}"),
            Skip::Leaks(l) => write!(f, "{l}"),
            Skip::OomsNotJudged(r) => {
                write!(
                    f,
                    "OOMs not judged: {}",
                    no_oom_record(*r).unwrap_or_default()
                )
            }
            Skip::GraphNotJudged(why) => write!(f, "graph growth not judged: {why}"),
            Skip::NoGraph(kind) => {
                write!(
                    f,
                    "no autograd graph in a {kind} (profiler traces have one)"
                )
            }
            Skip::NoGrowthFindings => f.write_str("this analysis has no per-step growth findings"),
            Skip::NoCommonDevice { here, there } => match (here.is_empty(), there.is_empty()) {
                (true, true) => f.write_str("no device memory recorded, here or in the baseline"),
                (true, false) => f.write_str("no device memory recorded (the baseline has some)"),
                (false, true) => f.write_str("the baseline recorded no device memory"),
                (false, false) => write!(
                    f,
                    "no device in common with the baseline ({} here, {} there)",
                    here.join(", "),
                    there.join(", ")
                ),
            },
            Skip::Uncompared(u) => write!(f, "{u}"),
            Skip::BaselineLeaks(l) => write!(f, "the baseline's {l}"),
            Skip::GrowthNotAnalysed => {
                f.write_str("per-step growth not analysed in the input or the baseline")
            }
            Skip::GraphOneSide => f.write_str("graph growth analysed on one side only"),
        }
    }
}

/// A rule's outcome on one input (or one group of ranks), typed: what its message says.
#[derive(Clone, Debug, PartialEq)]
pub enum Reason {
    /// A figure within its limit (PASS).
    Within(Held),
    /// A figure over its limit (FAIL).
    Over(Held),
    /// `oom`: none recorded.
    NoOom,
    /// `oom`: OOMs recorded, the last one's figures.
    Ooms(OomFigures),
    /// `oom`: the run ended in an OOM raised outside the allocator (NCCL, cuBLAS, cuDNN, CUDA),
    /// after `allocator_ooms` OOMs of the allocator's own.
    OutsideOom { allocator_ooms: usize },
    /// `fragmentation`: no OOM of that cause.
    NoFragmentationOom,
    /// `fragmentation`: the last OOM of that cause.
    FragmentationOom {
        device: String,
        requested_bytes: u64,
    },
    /// `leak`: none found (over the judgement's steps, where known).
    NoLeak { steps: Option<usize> },
    /// `leak`: findings.
    Leaks(LeakFigures),
    /// `leak`: an OOM the analysis blames on a leak, without a finding of its own.
    OomCausedByLeak { device: String },
    /// `baseline`: the baseline (of `entries` entries) holds none for the input's file.
    NoBaselineEntry { file: String, entries: usize },
    /// The rule cannot judge the input.
    Skip(Skip),
}

impl Reason {
    /// The stable snake_case code of `memscope.check/3`'s `reason`.
    pub fn code(&self) -> &'static str {
        match self {
            Reason::Within(_) => "within_limit",
            Reason::Over(_) => "over_limit",
            Reason::NoOom => "no_oom",
            Reason::Ooms(_) => "oom_recorded",
            Reason::OutsideOom { .. } => "oom_outside_allocator",
            Reason::NoFragmentationOom => "no_fragmentation_oom",
            Reason::FragmentationOom { .. } => "fragmentation_oom",
            Reason::NoLeak { .. } => "no_leak",
            Reason::Leaks(_) => "leak_found",
            Reason::OomCausedByLeak { .. } => "oom_caused_by_leak",
            Reason::NoBaselineEntry { .. } => "no_baseline_entry",
            Reason::Skip(s) => s.code(),
        }
    }
}

impl Serialize for Reason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.code())
    }
}

/// A count: `1 OOM`, `2 OOMs` (the noun's plural `s` where `n != 1`).
fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

impl std::fmt::Display for Reason {
    /// The rule's one-line message.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::Within(h) | Reason::Over(h) => {
                let op = if matches!(self, Reason::Within(_)) {
                    "<="
                } else {
                    ">"
                };
                write!(
                    f,
                    "{} {} {op} limit {}",
                    h.measure.words(),
                    h.unit.format(h.measured),
                    h.unit.format(h.limit)
                )?;
                h.caveats.iter().try_for_each(|c| write!(f, "{c}"))
            }
            Reason::NoOom => f.write_str("no OOM recorded"),
            Reason::Ooms(o) => write!(
                f,
                "{} OOM{} recorded; the last requested {} on {}, cause: {}",
                o.count,
                plural(o.count),
                units::bytes(o.requested_bytes),
                o.device,
                o.cause.name()
            ),
            Reason::OutsideOom { allocator_ooms } => {
                f.write_str(
                    "an OOM raised outside the allocator ended the run \
                     (`memscope analyze` gives its source and the device's accounting)",
                )?;
                match allocator_ooms {
                    0 => Ok(()),
                    n => write!(f, "; {n} allocator OOM{} recorded before it", plural(*n)),
                }
            }
            Reason::NoFragmentationOom => f.write_str("no OOM caused by fragmentation"),
            Reason::FragmentationOom {
                device,
                requested_bytes,
            } => write!(
                f,
                "OOM caused by fragmentation on {device}: {} request did not fit",
                units::bytes(*requested_bytes)
            ),
            Reason::NoLeak { steps: Some(n) } => write!(f, "no leak found over {n} steps"),
            Reason::NoLeak { steps: None } => f.write_str("no leak found"),
            Reason::Leaks(l) => {
                let also = match l.released {
                    0 => String::new(),
                    n => format!(
                        " ({n} released only after its loop ended: the peak still grows with the steps)"
                    ),
                };
                let live = if l.extent.released() {
                    format!(
                        "{} at its peak, {}",
                        units::bytes(l.live_bytes),
                        l.extent.label()
                    )
                } else {
                    format!("{} live", units::bytes(l.live_bytes))
                };
                write!(
                    f,
                    "{} leak finding{}{also}; the largest ({}) grows {}/step over {} steps, {live}",
                    l.findings,
                    plural(l.findings),
                    l.kind,
                    units::bytes(l.growth_bytes_per_step.round() as u64),
                    l.steps,
                )
            }
            Reason::OomCausedByLeak { device } => {
                write!(f, "the OOM on {device} was caused by a leak")
            }
            Reason::NoBaselineEntry { file, entries } => {
                write!(f, "no entry for {file} in the baseline ({entries} entries)")
            }
            Reason::Skip(s) => write!(f, "{s}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The evidence lines under a FAIL.

/// Whether a site is a native frame (no Python frame in its stack, e.g. the autograd
/// engine's thread or a C++ allocation): no file, no line.
pub fn is_native(site: &Site) -> bool {
    site.line == 0 && !site.file.ends_with(".py")
}

/// A site in words: `file:line in function`; `file in function` where the line is not the
/// statement's (profiler traces); `function (native; no Python frame)` for a native frame.
pub fn site_words(site: &Site, line_known: bool) -> String {
    if is_native(site) {
        format!("{} (native; no Python frame)", site.function)
    } else if line_known {
        site.to_string()
    } else {
        format!("{} in {}", site.file, site.function)
    }
}

/// A site in words, or `(no Python stack)`; `line_known: false` (profiler traces, which record a
/// frame's line as of when the frame was entered) names the file and function only.
pub fn gate_site(s: &Option<Site>, line_known: bool) -> String {
    match s {
        None => "(no Python stack)".into(),
        Some(s) => site_words(s, line_known),
    }
}

/// `1.0 GiB held by train.py:12 in step`: what a line held at the peak.
pub fn held_by(bytes: u64, site: &Option<Site>, line_known: bool) -> String {
    format!(
        "{} held by {}",
        units::bytes(bytes),
        gate_site(site, line_known)
    )
}

/// `kept alive by …`: what keeps a leak alive.
pub fn kept_alive_by(site: &Option<Site>, line_known: bool) -> String {
    format!("kept alive by {}", gate_site(site, line_known))
}

/// `fix: …`: a finding's own fix, the last evidence line.
pub fn fix_line(fix: &str) -> String {
    format!("fix: {fix}")
}

/// One growing op of the autograd graph, as evidence.
pub fn graph_growth_line(
    op: &str,
    nodes_per_step: f64,
    steps: u64,
    site: &Option<Site>,
    line_known: bool,
) -> String {
    format!(
        "{op} adds {} autograd nodes per step over {steps} steps at {}",
        trim_float(nodes_per_step),
        gate_site(site, line_known)
    )
}

/// The leak that grows fastest, as evidence: its line, steps, live bytes and kind.
pub fn growth_line(
    site: &Option<Site>,
    line_known: bool,
    steps: u64,
    live_bytes: u64,
    kind: LeakKind,
) -> String {
    format!(
        "{} over {steps} steps, {} live ({kind})",
        gate_site(site, line_known),
        units::bytes(live_bytes),
    )
}

// ---------------------------------------------------------------------------------------------
// Why a check cannot run (`check`'s `CheckError`, exit 2).

/// Why a rank's peak cannot be compared with another rank's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RankPeakUnknown {
    NoMemory,
    FromTraceStart,
}

impl std::fmt::Display for RankPeakUnknown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RankPeakUnknown::NoMemory => "recorded no device memory",
            RankPeakUnknown::FromTraceStart => {
                "records allocated bytes only as changes from its trace's start: its \
                 peak cannot be compared with another rank's"
            }
        })
    }
}

/// Two files given one `--rank`.
pub fn rank_twice(rank: u32, first: &str, second: &str) -> String {
    format!("--rank {rank} is given to two files: {first} and {second}")
}

/// A limit the user set (`--{rule}`) with nothing to measure in `path` (or in any input).
pub fn nothing_to_measure(rule: &str, path: Option<&str>, why: &Skip) -> String {
    match path {
        Some(path) => format!("--{rule} is set, but {path} has nothing to measure: {why}"),
        None => format!("--{rule} is set, but no input has anything to measure: {why}"),
    }
}

/// `--max-imbalance` over inputs none of which are ranks of one run and kind.
pub const NO_RANKS: &str =
    "--max-imbalance is set, but no two inputs are ranks of one run and kind \
     (a snapshot and a trace are two views of one rank; give ranks with --rank N=FILE)";

/// `--max-imbalance` over one input.
pub const ONE_INPUT: &str =
    "--max-imbalance is set, but there is one input: imbalance needs two ranks";

/// `--max-imbalance` over a group with a rank whose peak is no measurement.
pub fn rank_unmeasurable(rank: u32, group: &str, path: &str, why: RankPeakUnknown) -> String {
    format!("--max-imbalance is set, but rank {rank} of the {group} ({path}) {why}")
}

/// Why a trace's autograd graph cannot support a judgement on growth (the gate's summary keeps
/// the words, as `graph_not_judged`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphUnjudged {
    /// No op carries an autograd sequence number.
    NoSequenceNumbers,
    /// Ops ran with grad mode on, and no backward pass.
    NoBackward { forward_ops: usize },
    /// Fewer profiled steps than a judgement needs.
    TooFewSteps { steps: usize, needed: usize },
}

/// [`GraphUnjudged`] in words.
pub fn graph_not_judged(why: GraphUnjudged) -> String {
    match why {
        GraphUnjudged::NoSequenceNumbers => {
            "no op carries an autograd sequence number: the graph cannot be followed".into()
        }
        GraphUnjudged::NoBackward { forward_ops } => format!(
            "{forward_ops} forward ops ran with grad mode on but the trace holds no backward pass"
        ),
        GraphUnjudged::TooFewSteps { steps, needed } => format!(
            "{steps} profiled step{}: graph growth across steps needs at least {needed}",
            plural(steps)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every outcome has its own code, and every SKIP says why in words.
    #[test]
    fn each_outcome_has_its_own_code() {
        let held = Held {
            measure: Measure::Ooms,
            unit: Unit::Count,
            measured: 0.0,
            limit: 0.0,
            caveats: Vec::new(),
        };
        let no = NoLeakJudgement::NotJudged {
            reason: Some(NotJudged::SinglePass),
            steps: 1,
            min_steps: 3,
        };
        let dev = || "cuda:0".to_owned();
        let skips = [
            Skip::NoDeviceMemory,
            Skip::Unmeasured(Unmeasured::NoReserved { device: dev() }),
            Skip::Unmeasured(Unmeasured::BoundWithin {
                measure: Measure::PeakAllocated { device: dev() },
                bound: 1,
            }),
            Skip::Leaks(NoLeakJudgement::NotAnalysed),
            Skip::Leaks(no.clone()),
            Skip::OomsNotJudged(NotJudged::NoHistory),
            Skip::GraphNotJudged("two profiled steps".into()),
            Skip::NoGraph(CaptureKind::Snapshot),
            Skip::NoGrowthFindings,
            Skip::NoCommonDevice {
                here: vec![dev()],
                there: Vec::new(),
            },
            Skip::Uncompared(Uncompared::Baseline(Unmeasured::NoReserved {
                device: dev(),
            })),
            Skip::Uncompared(Uncompared::BaselineBound {
                measure: Measure::LiveAtEnd { device: dev() },
            }),
            Skip::BaselineLeaks(NoLeakJudgement::NotAnalysed),
            Skip::BaselineLeaks(no),
            Skip::GrowthNotAnalysed,
            Skip::GraphOneSide,
        ];
        let mut reasons: Vec<Reason> = vec![
            Reason::Within(held.clone()),
            Reason::Over(held),
            Reason::NoOom,
            Reason::OutsideOom { allocator_ooms: 2 },
            Reason::NoFragmentationOom,
            Reason::NoLeak { steps: None },
            Reason::OomCausedByLeak { device: dev() },
            Reason::FragmentationOom {
                device: dev(),
                requested_bytes: 1,
            },
            Reason::NoBaselineEntry {
                file: "a.pickle".into(),
                entries: 2,
            },
        ];
        for s in &skips {
            assert!(!s.to_string().is_empty(), "{s:?}");
        }
        reasons.extend(skips.into_iter().map(Reason::Skip));
        let mut codes: Vec<&str> = reasons.iter().map(Reason::code).collect();
        let n = codes.len();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), n, "{codes:?}");
        assert_eq!(
            serde_json::to_value(Reason::NoOom).unwrap(),
            serde_json::Value::from("no_oom")
        );
    }
}
