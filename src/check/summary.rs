//! The small, stable summary of one capture that checks, baselines and diffs compare.
//!
//! It is built from the [`Analysis`](crate::analysis::Analysis)'s own Rust fields (see
//! [`super::typed`]), never from a re-read of its JSON: a renamed field is a compile error in
//! the gate, not a rule that silently reads 0. Optional parts say "not analysed" (`None`)
//! instead of "none found", and [`InputSummary::leak_judgement`] says whether the capture
//! could support a leak judgement at all (the leak rules SKIP where it could not).
//!
//! A summary is also a file: `memscope baseline CAPTURE -o s.json` writes a
//! `memscope.baseline/1` document holding one, and `check` and `diff` accept it wherever they
//! accept a capture, so a cluster's job array can reduce each rank's capture to a summary
//! where it was recorded.
//!
//! A baseline file (`memscope.baseline/1`) is a list of these summaries, one per input (one
//! per rank), with sorted keys and no timings or absolute figures that vary between runs of
//! the same program, so it can be committed and reviewed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::analysis::leaks::LeakKind;
use crate::analysis::oom::Cause;
use crate::analysis::sites::Site;
use crate::analysis::{CaptureKind, VerdictKind};

pub const BASELINE_SCHEMA: &str = "memscope.baseline/1";

/// Live bytes of one site, as kept in a summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SiteBytes {
    /// `None`: blocks with no recorded Python stack.
    pub site: Option<Site>,
    pub bytes: u64,
    #[serde(default)]
    pub blocks: u64,
    /// The functions of the site's heaviest stack, innermost first: what `diff` matches
    /// sites by, so that a line that moved is "moved", not new and gone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chain: Vec<String>,
}

/// One device (a CUDA device of a snapshot, or a memory device of a trace).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceSummary {
    /// `cuda:0`, ...
    pub device: String,
    /// Highest allocated bytes (exact, or the highest seen in the log when not exact).
    pub peak_allocated_bytes: u64,
    pub peak_reserved_bytes: u64,
    /// Whether the peaks are exact (the log starts from an empty allocator).
    #[serde(default)]
    pub peak_exact: bool,
    /// Allocated (live) bytes at the end of the capture.
    pub end_allocated_bytes: u64,
    pub end_reserved_bytes: u64,
    /// What was live at the allocated peak, by site (largest first; the analysis keeps the top 10).
    #[serde(default)]
    pub sites_at_peak: Vec<SiteBytes>,
    /// What was live at the end, by site.
    #[serde(default)]
    pub sites_at_end: Vec<SiteBytes>,
    /// Per memory pool, where the device has a private one (a CUDA graph's, a `MemPool`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<PoolSummary>,
    /// What the private pools did to the reserved peak, where the log supports the figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pools_raised_peak_bytes: Option<i64>,
}

/// One memory pool of a device, as kept in a summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PoolSummary {
    pub pool_id: [i64; 2],
    pub kind: crate::analysis::pools::PoolKind,
    pub reserved_bytes: u64,
    pub allocated_bytes: u64,
    pub peak_reserved_bytes: u64,
    pub segments: u64,
}

/// One OOM of the capture.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OomSummary {
    pub device: String,
    /// `fragmentation`, `capacity`, `leak`, `retained_attempt`, `unknown`.
    pub cause: Cause,
    pub requested_bytes: u64,
    pub site: Option<Site>,
    pub summary: String,
}

/// One leak finding (from the analysis' `leaks[]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LeakSummary {
    pub kind: LeakKind,
    /// Alive at the end, or released only after the loop that grew it (still a finding: the
    /// peak grows with the number of steps). Summaries written before it was recorded are `alive`.
    #[serde(default)]
    pub extent: crate::analysis::leaks::Extent,
    pub site: Option<Site>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause_site: Option<Site>,
    pub growth_bytes_per_step: f64,
    pub steps: u64,
    pub live_bytes: u64,
    #[serde(default)]
    pub explanation: String,
    #[serde(default)]
    pub fix: String,
}

/// One op whose autograd graph grows every step (from the analysis' `graph.growth[]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GraphGrowthSummary {
    pub op: String,
    pub site: Option<Site>,
    pub nodes_per_step: f64,
    pub steps: u64,
}

/// One step (iteration) of the capture.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepSummary {
    pub name: String,
    pub peak_allocated_bytes: u64,
    pub end_allocated_bytes: u64,
}

/// The summary of one input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InputSummary {
    /// The path as given on the command line.
    pub path: String,
    /// `snapshot` or `trace`.
    pub kind: CaptureKind,
    /// The analysis' verdict kind (`ok`, `oom_leak`, ...).
    pub verdict: VerdictKind,
    pub devices: Vec<DeviceSummary>,
    #[serde(default)]
    pub ooms: Vec<OomSummary>,
    /// `None` where the analysis did not look for leaks (not "no leaks").
    #[serde(default)]
    pub leaks: Option<Vec<LeakSummary>>,
    /// `None` where the analysis did not look at the autograd graph (snapshots).
    #[serde(default)]
    pub graph_growth: Option<Vec<GraphGrowthSummary>>,
    #[serde(default)]
    pub steps: Option<Vec<StepSummary>>,
    /// Allocated bytes by category (at the peak where the analysis gives it), sorted by name.
    #[serde(default)]
    pub categories: Option<BTreeMap<String, u64>>,
    /// Whether the capture could support a leak judgement (`None`: a summary written before
    /// memscope recorded it; its `leaks` are then taken as they are).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leak_judgement: Option<Judgement>,
    /// Why the trace's autograd graph could not be judged for growth (no grad-mode ops, no
    /// backward pass, fewer than three profiled steps); `None` where it was, or for snapshots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_not_judged: Option<String>,
    /// Which rank of which run the capture is, where anything says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<RankInfo>,
    /// What the reader skipped or repaired in the capture: events a rule never saw.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub load_notes: Vec<String>,
    /// Devices whose allocated bytes the capture gives only as changes from the trace's start
    /// (a torch 1.9-era trace): their `*_allocated_bytes` here are the least the bytes in use
    /// can be, not measurements, and [`InputSummary::allocated_standing`] says so to the rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allocated_from_trace_start: Vec<String>,
    /// Devices whose reserved bytes the capture does not record: their `*_reserved_bytes` are 0
    /// for want of a figure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reserved_unrecorded: Vec<String>,
}

/// What a device's figure in a summary is: a measurement, the least the true value can be, or
/// nothing the capture records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    Measured,
    AtLeast,
    Unrecorded,
}

/// [`crate::analysis::LeakJudgement`], as kept in a summary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Judgement {
    pub judged: bool,
    /// Complete steps the judgement rests on.
    pub steps: usize,
    /// Fewest steps a judgement needs.
    pub min_steps: usize,
    /// Why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Unjudged>,
}

/// Why a capture could not support a leak judgement (the summary's form of the analysis'
/// `NotJudged`, mapped by an exhaustive `match` in [`super::typed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unjudged {
    /// A snapshot without allocation history: only the state at the dump.
    NoHistory,
    SinglePass,
    /// A decoding loop: tokens, not steps.
    DecodingLoop,
    TooFewSteps,
    /// Memory rose at every complete step, too few of them for a leak finding.
    RisingTooFewSteps,
    /// A trace recorded without `profile_memory=True`.
    NoMemoryEvents,
    /// A trace cut short before any memory event (they may lie past the cut).
    CutBeforeMemoryEvents,
    /// A trace cut short after some memory events (frees may lie past the cut).
    CutShort,
    CpuOnly,
}

impl Unjudged {
    /// The analysis' reason this is the summary form of.
    pub fn reason(self) -> crate::analysis::NotJudged {
        use crate::analysis::NotJudged;
        match self {
            Unjudged::NoHistory => NotJudged::NoHistory,
            Unjudged::SinglePass => NotJudged::SinglePass,
            Unjudged::DecodingLoop => NotJudged::DecodingLoop,
            Unjudged::TooFewSteps => NotJudged::TooFewSteps,
            Unjudged::RisingTooFewSteps => NotJudged::RisingTooFewSteps,
            Unjudged::NoMemoryEvents => NotJudged::NoMemoryEvents,
            Unjudged::CutBeforeMemoryEvents => NotJudged::CutBeforeMemoryEvents,
            Unjudged::CutShort => NotJudged::CutShort,
            Unjudged::CpuOnly => NotJudged::CpuOnly,
        }
    }
}

impl Judgement {
    /// Why the capture could not be judged, in the gate's words (`None` when it was judged).
    pub fn why_not(&self) -> Option<String> {
        (!self.judged).then(|| {
            crate::wording::gate_not_judged(
                self.reason.map(Unjudged::reason),
                self.steps,
                self.min_steps,
            )
        })
    }

    /// Why an OOM could not have been recorded, where it could not: a snapshot records OOMs
    /// in its allocation history, a trace as memory events.
    pub fn why_no_oom_record(&self) -> Option<&'static str> {
        crate::wording::no_oom_record(self.reason?.reason())
    }
}

/// Where a rank number came from, strongest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RankSource {
    /// `--rank N=FILE` on the command line.
    Explicit,
    /// The trace's `distributedInfo.rank`.
    DistributedInfo,
    /// The file name (`rank3`, `rank-3`, `_3.pt.trace`).
    FileName,
    /// The one CUDA device a snapshot's memory lives on.
    Device,
}

/// Which rank of which run a capture is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankInfo {
    pub rank: u32,
    /// `distributedInfo.world_size`, where the trace gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world_size: Option<u32>,
    pub source: RankSource,
}

impl InputSummary {
    /// The run ended in an OOM raised outside the allocator (NCCL, cuBLAS...): the verdict
    /// says so, and the allocator's own OOMs (if any) are ones the program caught before it.
    pub fn ended_by_outside_oom(&self) -> bool {
        self.verdict == VerdictKind::OomOutsideAllocator
    }

    /// The largest per-step growth of any leak finding (`None`: leaks not analysed).
    pub fn max_growth_per_step(&self) -> Option<(f64, Option<&LeakSummary>)> {
        let leaks = self.leaks.as_ref()?;
        Some(
            leaks
                .iter()
                .max_by(|a, b| a.growth_bytes_per_step.total_cmp(&b.growth_bytes_per_step))
                .map_or((0.0, None), |l| (l.growth_bytes_per_step, Some(l))),
        )
    }

    /// The largest graph growth, in nodes per step (`None`: graph not analysed).
    pub fn max_graph_growth(&self) -> Option<(f64, Option<&GraphGrowthSummary>)> {
        let g = self.graph_growth.as_ref()?;
        Some(
            g.iter()
                .max_by(|a, b| a.nodes_per_step.total_cmp(&b.nodes_per_step))
                .map_or((0.0, None), |g| (g.nodes_per_step, Some(g))),
        )
    }

    /// What the allocated figures of device `label` are.
    pub fn allocated_standing(&self, label: &str) -> Standing {
        if self.allocated_from_trace_start.iter().any(|d| d == label) {
            Standing::AtLeast
        } else {
            Standing::Measured
        }
    }

    /// What the reserved figures of device `label` are.
    pub fn reserved_standing(&self, label: &str) -> Standing {
        if self.reserved_unrecorded.iter().any(|d| d == label) {
            Standing::Unrecorded
        } else {
            Standing::Measured
        }
    }

    pub fn device(&self, label: &str) -> Option<&DeviceSummary> {
        self.devices.iter().find(|d| d.device == label)
    }

    /// The file name without directories.
    pub fn file_name(&self) -> &str {
        self.path.rsplit(['/', '\\']).next().unwrap_or(&self.path)
    }
}

/// A baseline file: `memscope.baseline/1`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    pub schema: String,
    /// The memscope version that wrote it (informative; comparisons do not depend on it).
    pub generator: String,
    pub inputs: Vec<InputSummary>,
}

impl Baseline {
    pub fn new(inputs: Vec<InputSummary>) -> Baseline {
        Baseline {
            schema: BASELINE_SCHEMA.into(),
            generator: concat!("memscope ", env!("CARGO_PKG_VERSION")).into(),
            inputs,
        }
    }

    /// Parses a baseline document, refusing other schemas with a message that says which.
    pub fn from_json(text: &str) -> Result<Baseline, BaselineError> {
        let mut v: Value =
            serde_json::from_str(text).map_err(|e| BaselineError::NotJson { what: no_echo(&e) })?;
        one_line_strings(&mut v);
        // A baseline inside a `memscope/1` envelope (memscope writes baselines bare, but a
        // tool may keep what it was handed whole): its `data`.
        if v.get("envelope")
            .and_then(Value::as_str)
            .is_some_and(|e| e.starts_with("memscope/"))
        {
            v = v.get_mut("data").map(Value::take).unwrap_or(Value::Null);
        }
        match v.get("schema").and_then(Value::as_str) {
            Some(BASELINE_SCHEMA) => {}
            Some(_) => return Err(BaselineError::OtherSchema),
            None => return Err(BaselineError::NoSchema),
        }
        serde_json::from_value(v).map_err(|e| BaselineError::Malformed { what: no_echo(&e) })
    }

    /// The baseline entry to compare input `i` of `n` against: the same index when the
    /// baseline has one entry per input, else the entry with the same file name, else the
    /// only entry.
    pub fn entry_for(&self, i: usize, n: usize, file_name: &str) -> Option<&InputSummary> {
        if self.inputs.len() == n {
            return self.inputs.get(i);
        }
        self.inputs
            .iter()
            .find(|b| b.file_name() == file_name)
            .or_else(|| (self.inputs.len() == 1).then(|| &self.inputs[0]))
    }
}

/// Why a file is not a usable `memscope.baseline/1` document. The messages never quote the
/// document: a baseline path may name any file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BaselineError {
    /// What went wrong, in words that never quote the document.
    #[error("not JSON ({what})")]
    NotJson { what: String },
    #[error("its schema is not {BASELINE_SCHEMA:?} (write one with `memscope baseline`)")]
    OtherSchema,
    #[error("no \"schema\" field: not a memscope baseline ({BASELINE_SCHEMA})")]
    NoSchema,
    /// JSON of the schema, with a field missing or of the wrong type.
    #[error("malformed {BASELINE_SCHEMA} document: {what}")]
    Malformed { what: String },
}

/// What went wrong in a JSON document, without quoting it: serde's messages quote the values
/// they refuse (`invalid type: string "..."`), and a baseline path may name any file.
pub(crate) fn no_echo(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let msg = e.to_string();
    let what = if msg.starts_with("missing field") || msg.starts_with("duplicate field") {
        // Field names are the schema's own.
        msg.split(" at line").next().unwrap_or(&msg).to_owned()
    } else if msg.starts_with("invalid type") {
        "a value of the wrong type".to_owned()
    } else if msg.starts_with("invalid value") || msg.starts_with("invalid length") {
        "a value out of range".to_owned()
    } else if msg.starts_with("unknown variant") {
        "an unknown value".to_owned()
    } else {
        match e.classify() {
            Category::Eof => "cut short".to_owned(),
            Category::Syntax => "a syntax error".to_owned(),
            Category::Data => "a malformed value".to_owned(),
            Category::Io => "a read error".to_owned(),
        }
    };
    if e.line() > 0 {
        format!("{what} at line {}, column {}", e.line(), e.column())
    } else {
        what
    }
}

/// Every string of a summary read as input made one line (`report::escape::one_line`): a
/// summary is as untrusted as the capture it was made from.
pub(crate) fn one_line_strings(v: &mut Value) {
    let mut todo = vec![v];
    while let Some(v) = todo.pop() {
        match v {
            Value::String(s) => {
                if let std::borrow::Cow::Owned(o) = crate::escape::one_line(s) {
                    *s = o;
                }
            }
            Value::Array(a) => todo.extend(a.iter_mut()),
            Value::Object(m) => {
                if m.keys()
                    .any(|k| k.contains(|c: char| c.is_control() || c > '\u{2000}'))
                {
                    let old = std::mem::take(m);
                    for (k, x) in old {
                        m.insert(crate::escape::one_line(&k).into_owned(), x);
                    }
                }
                todo.extend(m.values_mut());
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judgement(reason: Unjudged) -> Judgement {
        Judgement {
            judged: false,
            steps: 0,
            min_steps: 3,
            reason: Some(reason),
        }
    }

    /// The summary's kinds are the analysis' enums, under the names summaries have always
    /// had (`memscope.baseline/1` files stay byte-identical, and old ones load).
    #[test]
    fn kinds_keep_their_names_both_ways() {
        for (cause, name) in [
            (Cause::Fragmentation, "fragmentation"),
            (Cause::Capacity, "capacity"),
            (Cause::Leak, "leak"),
            (Cause::RetainedAttempt, "retained_attempt"),
            (Cause::Unknown, "unknown"),
        ] {
            assert_eq!(cause.name(), name);
            let o = OomSummary {
                device: "cuda:0".into(),
                cause,
                requested_bytes: 1,
                site: None,
                summary: String::new(),
            };
            let v = serde_json::to_value(&o).unwrap();
            assert_eq!(v["cause"], name);
            assert_eq!(v["cause"], serde_json::to_value(cause).unwrap());
            assert_eq!(serde_json::from_value::<OomSummary>(v).unwrap(), o);
        }
        for v in [
            VerdictKind::OomFragmentation,
            VerdictKind::OomCapacity,
            VerdictKind::OomLeak,
            VerdictKind::OomRetainedAttempt,
            VerdictKind::OomUnknown,
            VerdictKind::Leak,
            VerdictKind::GraphGrowth,
            VerdictKind::Ok,
            VerdictKind::Unjudged,
        ] {
            let j = serde_json::to_value(v).unwrap();
            assert_eq!(j, v.id());
            assert_eq!(serde_json::from_value::<VerdictKind>(j).unwrap(), v);
        }
        for k in [CaptureKind::Snapshot, CaptureKind::Trace] {
            assert_eq!(serde_json::to_value(k).unwrap(), k.name());
        }
        for k in [
            LeakKind::AccumulatedLoss,
            LeakKind::RetainedGraph,
            LeakKind::HookCache,
            LeakKind::KeptOutputs,
            LeakKind::TensorCache,
            LeakKind::SteadyGrowth,
            LeakKind::RetainedAttempt,
        ] {
            let j = serde_json::to_value(k).unwrap();
            assert_eq!(j, k.id());
            assert_eq!(serde_json::from_value::<LeakKind>(j).unwrap(), k);
        }
        // Trace summaries written before traces shared the snapshot rules.
        let old: LeakKind = serde_json::from_value(serde_json::json!("live_growth")).unwrap();
        assert_eq!(old, LeakKind::SteadyGrowth);
        assert!(serde_json::from_value::<LeakKind>(serde_json::json!("no_such_kind")).is_err());
    }

    #[test]
    fn captures_that_record_no_cuda_memory_cannot_show_an_oom() {
        for r in [
            Unjudged::NoHistory,
            Unjudged::NoMemoryEvents,
            Unjudged::CutBeforeMemoryEvents,
            Unjudged::CutShort,
            Unjudged::CpuOnly,
        ] {
            assert!(judgement(r).why_no_oom_record().is_some(), "{r:?}");
        }
        for r in [
            Unjudged::SinglePass,
            Unjudged::TooFewSteps,
            Unjudged::RisingTooFewSteps,
        ] {
            assert!(judgement(r).why_no_oom_record().is_none(), "{r:?}");
        }
    }
}
