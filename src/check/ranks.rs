//! Which inputs are ranks of one run, so that imbalance compares like with like.
//!
//! Several files given to `check` are not always ranks: a snapshot and a trace of one run are
//! two views of the same rank, checked side by side. Inputs are grouped by kind and run;
//! only inputs of one group are ranks, and imbalance is computed within a group. A rank
//! number comes from, strongest first: `--rank N=FILE`, the trace's `distributedInfo.rank`,
//! the file name (the frameworks' conventions, [`crate::rank_name`]), the one CUDA device a
//! snapshot's memory lives on. Where a group's numbers are missing or repeat, its members are
//! ranks in the order given (and the table says so).

use serde::Serialize;

use super::diff::Unrelated;
use super::summary::{InputSummary, RankInfo, RankSource};
use crate::analysis::CaptureKind;

/// A rank number read from a file name (by [`crate::rank_name`]), and the run's name pattern.
pub fn from_file_name(path: &str) -> Option<(u32, String)> {
    crate::rank_name::from_file_name(path).map(|n| (n.rank, n.run))
}

/// One rank of a group.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RankRow {
    /// Index of the input (into the report's `files`).
    pub input: usize,
    pub rank: u32,
    /// Where the number came from (`None`: the order given).
    pub source: Option<RankSource>,
    pub path: String,
    pub peak_allocated_bytes: u64,
    pub peak_reserved_bytes: u64,
    pub end_allocated_bytes: u64,
    pub ooms: usize,
    /// `None`: leaks not analysed, or the capture could not support a judgement.
    pub leaks: Option<usize>,
    /// Whether the capture recorded device memory (else its peaks are no measurement).
    pub has_memory: bool,
    /// The capture gives allocated bytes only as changes from its trace's start (torch 1.9):
    /// its figures here are lower bounds, and peaks cannot be compared across ranks.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_trace_start: bool,
    /// The capture records no reserved bytes (torch 1.9): `peak_reserved_bytes` is no figure.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reserved_unrecorded: bool,
    pub passed: bool,
}

pub use super::imbalance::Imbalance;

/// Ranks of one run and kind.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RankGroup {
    /// `snapshot` or `trace`.
    pub kind: CaptureKind,
    /// What ties the group together: `world size 128`, a file-name pattern, or `""`.
    pub run: String,
    pub ranks: Vec<RankRow>,
    /// `None` where a rank recorded no device memory (a trace without memory events): its
    /// peak is no measurement, so neither is the imbalance.
    pub imbalance: Option<Imbalance>,
}

impl RankGroup {
    /// `trace ranks (world size 128)`, for messages.
    pub fn label(&self) -> String {
        if self.run.is_empty() {
            format!("{} ranks", self.kind)
        } else {
            format!("{} ranks ({})", self.kind, self.run)
        }
    }
}

/// The strongest rank hint of an input, and its run key.
fn hint(s: &InputSummary, explicit: Option<u32>) -> (Option<RankInfo>, String) {
    if let Some(rank) = explicit {
        let info = RankInfo {
            rank,
            world_size: None,
            source: RankSource::Explicit,
        };
        return (Some(info), String::new());
    }
    if let Some(r) = s
        .rank
        .as_ref()
        .filter(|r| r.source <= RankSource::DistributedInfo)
    {
        let run = r
            .world_size
            .map_or_else(String::new, |w| format!("world size {w}"));
        return (Some(r.clone()), run);
    }
    if let Some((rank, pattern)) = from_file_name(&s.path) {
        let info = RankInfo {
            rank,
            world_size: None,
            source: RankSource::FileName,
        };
        return (Some(info), pattern);
    }
    (s.rank.clone(), String::new())
}

fn peak(s: &InputSummary) -> u64 {
    s.devices
        .iter()
        .map(|d| d.peak_allocated_bytes)
        .max()
        .unwrap_or(0)
}

/// Groups `inputs` into runs of ranks; `explicit[i]` is input `i`'s `--rank`, `passed[i]`
/// its result. Only groups of two ranks or more are returned; a would-be group whose inputs
/// are captures of different programs ([`super::diff::one_program`]) is no group, and comes
/// back in the second list.
pub fn group(
    inputs: &[InputSummary],
    explicit: &[Option<u32>],
    passed: &[bool],
) -> (Vec<RankGroup>, Vec<Unrelated>) {
    // (kind, run) -> (input index, rank hint), in the order given.
    type Members = Vec<(usize, Option<RankInfo>)>;
    let mut keyed: Vec<((CaptureKind, String), Members)> = Vec::new();
    for (i, s) in inputs.iter().enumerate() {
        let (info, run) = hint(s, explicit.get(i).copied().flatten());
        let key = (s.kind, run);
        match keyed.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push((i, info)),
            None => keyed.push((key, vec![(i, info)])),
        }
    }
    let mut out = Vec::new();
    let mut unrelated = Vec::new();
    for ((kind, run), members) in keyed {
        if members.len() < 2 {
            continue;
        }
        if let Err(u) = super::diff::one_program(members.iter().map(|(i, _)| &inputs[*i])) {
            unrelated.push(u);
            continue;
        }
        let mut numbers: Vec<u32> = members
            .iter()
            .filter_map(|(_, r)| r.as_ref().map(|r| r.rank))
            .collect();
        numbers.sort_unstable();
        numbers.dedup();
        let numbered = numbers.len() == members.len();
        let mut ranks: Vec<RankRow> = members
            .iter()
            .enumerate()
            .map(|(n, (i, info))| {
                let s = &inputs[*i];
                let (rank, source) = match info {
                    Some(r) if numbered => (r.rank, Some(r.source)),
                    _ => (n as u32, None),
                };
                RankRow {
                    input: *i,
                    rank,
                    source,
                    path: s.path.clone(),
                    peak_allocated_bytes: peak(s),
                    peak_reserved_bytes: s
                        .devices
                        .iter()
                        .map(|d| d.peak_reserved_bytes)
                        .max()
                        .unwrap_or(0),
                    end_allocated_bytes: s
                        .devices
                        .iter()
                        .map(|d| d.end_allocated_bytes)
                        .max()
                        .unwrap_or(0),
                    ooms: s.ooms.len(),
                    leaks: s
                        .leaks
                        .as_ref()
                        .filter(|l| {
                            !l.is_empty() || s.leak_judgement.as_ref().is_none_or(|j| j.judged)
                        })
                        .map(Vec::len),
                    has_memory: !s.devices.is_empty(),
                    from_trace_start: !s.allocated_from_trace_start.is_empty(),
                    reserved_unrecorded: !s.reserved_unrecorded.is_empty(),
                    passed: passed.get(*i).copied().unwrap_or(true),
                }
            })
            .collect();
        ranks.sort_by_key(|r| r.rank);
        let imbalance = ranks
            .iter()
            .all(|r| r.has_memory && !r.from_trace_start)
            .then(|| imbalance(&ranks))
            .flatten();
        out.push(RankGroup {
            kind,
            run,
            ranks,
            imbalance,
        });
    }
    (out, unrelated)
}

/// How far apart the peaks of `ranks` (two or more, each with device memory) are: the one
/// definition ([`super::imbalance`]).
fn imbalance(ranks: &[RankRow]) -> Option<Imbalance> {
    let peaks: Vec<(u32, u64)> = ranks
        .iter()
        .map(|r| (r.rank, r.peak_allocated_bytes))
        .collect();
    super::imbalance::imbalance(&peaks)
}
