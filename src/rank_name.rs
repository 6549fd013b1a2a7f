//! Which rank a file is, from its name: the one rank-naming module for `check`'s rank groups
//! and the job view of `analyze`, `report` and `tui`.
//!
//! Large jobs write one capture per rank, named by their framework:
//!
//! | framework        | name                                                          |
//! |------------------|---------------------------------------------------------------|
//! | torchtitan       | `iteration_N/rank{R}_memory_snapshot.pickle`                  |
//! | Megatron-LM      | `oom_rank-{R}_….pickle`                                       |
//! | Megatron-Bridge  | `snapshot_{R}.pickle`, and `snapshot_oom_rank-{R}.pickle` for the rank that hit an OOM |
//! | verl             | `<tag>_rank{R}_pid{pid}.pickle`                               |
//! | `memscope run`   | `memscope-oom-rank{R}.pickle`                                 |
//! | torch.profiler   | `<worker>_{R}.<time>.pt.trace.json`                           |
//!
//! Any of them may carry a compression suffix (`.gz`). A name matches the first of: the
//! user's `--rank-pattern` (a regular expression over the path as given), Megatron-Bridge's
//! `snapshot_{R}` forms, a `rank` word followed by digits (`rank3`, `rank-3`, `rank_3`), and the
//! profiler's `_{R}.pt.trace`. Each match also names the run: the name up to the number with
//! `*` in its place, so that the ranks of one run share it (what follows the number often holds
//! a time or a pid, which differ between ranks; Megatron-Bridge's two forms share `snapshot_*`).

use regex::Regex;
use serde::{Deserialize, Serialize};

/// Where a rank's number came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RankFrom {
    /// `--rank-pattern`.
    Pattern,
    /// The trace's `distributedInfo.rank`.
    DistributedInfo,
    /// The file name, by a framework's convention.
    FileName,
    /// A rank the summary file recorded (`memscope baseline --rank`, or its file name there).
    Summary,
    /// The one CUDA device the snapshot's memory lives on.
    Device,
}

/// Which naming convention gave the rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Convention {
    /// `--rank-pattern`.
    User,
    /// `snapshot_{R}.pickle` / `snapshot_oom_rank-{R}.pickle`.
    MegatronBridge,
    /// `rank{R}`, `rank-{R}`, `rank_{R}` anywhere in the name (torchtitan, Megatron-LM, verl,
    /// `memscope run`).
    RankWord,
    /// `<worker>_{R}.pt.trace.json`.
    ProfilerTrace,
}

/// A rank read from a file name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankName {
    pub rank: u32,
    /// The run's name pattern (`rank*`, `snapshot_*`).
    pub run: String,
    pub convention: Convention,
}

/// A `--rank-pattern`: a regular expression whose group `rank` (or else its first group) is
/// the rank number.
#[derive(Clone, Debug)]
pub struct RankPattern {
    re: Regex,
}

/// Why a `--rank-pattern` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PatternError {
    #[error("--rank-pattern {pattern:?} is not a regular expression: {why}")]
    Invalid { pattern: String, why: String },
    #[error("--rank-pattern {pattern:?} has no group to hold the rank: write it as `(?P<rank>\\d+)` or `(\\d+)`")]
    NoGroup { pattern: String },
}

impl RankPattern {
    pub fn new(pattern: &str) -> Result<RankPattern, PatternError> {
        let re = regex::RegexBuilder::new(pattern)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| PatternError::Invalid {
                pattern: pattern.to_owned(),
                why: e.to_string().lines().last().unwrap_or("").trim().to_owned(),
            })?;
        if re.captures_len() < 2 {
            return Err(PatternError::NoGroup {
                pattern: pattern.to_owned(),
            });
        }
        Ok(RankPattern { re })
    }

    /// The rank in `path` (the path as given), where the pattern matches and its group holds
    /// a number.
    pub fn rank(&self, path: &str) -> Option<RankName> {
        let c = self.re.captures(path)?;
        let g = c.name("rank").or_else(|| c.get(1))?;
        let rank = g.as_str().parse().ok()?;
        let run = format!("{}*", &path[c.get(0)?.start()..g.start()]);
        Some(RankName {
            rank,
            run,
            convention: Convention::User,
        })
    }
}

/// The base name of a path, without the directories.
fn base(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// The digits of `name` from byte `i` (at most 6 of them, a rank and not a time).
fn digits_at(name: &str, i: usize) -> Option<(usize, usize)> {
    let end = i + name.as_bytes()[i.min(name.len())..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    (end > i && end - i <= 6).then_some((i, end))
}

/// Megatron-Bridge: `snapshot_{R}.pickle[.gz]` and `snapshot_oom_rank-{R}.pickle[.gz]`.
fn megatron_bridge(name: &str) -> Option<(usize, usize)> {
    let lower = name.to_ascii_lowercase();
    let at = ["snapshot_oom_rank-", "snapshot_"]
        .iter()
        .find_map(|p| lower.starts_with(p).then_some(p.len()))?;
    let (a, b) = digits_at(name, at)?;
    let rest = &lower[b..];
    [".pickle", ".pkl"]
        .iter()
        .any(|s| rest.starts_with(s))
        .then_some((a, b))
}

/// `rank3`, `rank-3`, `rank_3`, `rank.3` anywhere in the name: the first such.
fn rank_word(name: &str) -> Option<(usize, usize)> {
    let lower = name.to_ascii_lowercase();
    let mut from = 0;
    while let Some(p) = lower[from..].find("rank") {
        let mut i = from + p + 4;
        if matches!(lower.as_bytes().get(i), Some(b'-' | b'_' | b'.')) {
            i += 1;
        }
        if let Some(d) = digits_at(name, i) {
            return Some(d);
        }
        from += p + 4;
    }
    None
}

/// `name_3.pt.trace.json`: torch.profiler's tensorboard handler names files
/// `<worker>.<time>.pt.trace.json`; launchers often put the rank before the suffix.
fn profiler_trace(name: &str) -> Option<(usize, usize)> {
    let p = name.to_ascii_lowercase().find(".pt.trace")?;
    let head = &name[..p];
    let start = head.len() - head.bytes().rev().take_while(u8::is_ascii_digit).count();
    if start < head.len() && start > 0 && matches!(head.as_bytes()[start - 1], b'_' | b'-') {
        digits_at(name, start)
    } else {
        None
    }
}

/// The rank a file's name gives, by the frameworks' conventions (see the module's docs).
pub fn from_file_name(path: &str) -> Option<RankName> {
    let name = base(path);
    let (convention, (a, b)) = if let Some(d) = megatron_bridge(name) {
        (Convention::MegatronBridge, d)
    } else if let Some(d) = rank_word(name) {
        (Convention::RankWord, d)
    } else {
        (Convention::ProfilerTrace, profiler_trace(name)?)
    };
    let rank = name[a..b].parse().ok()?;
    let run = match convention {
        // Both of Megatron-Bridge's forms are one run.
        Convention::MegatronBridge => "snapshot_*".to_owned(),
        _ => format!("{}*", &name[..a]),
    };
    Some(RankName {
        rank,
        run,
        convention,
    })
}

/// The rank of `path`: the user's pattern where given (and only it: a pattern says how this
/// job names its files), else the frameworks' conventions.
pub fn rank_of(path: &str, user: Option<&RankPattern>) -> Option<RankName> {
    match user {
        Some(p) => p.rank(path),
        None => from_file_name(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(p: &str) -> Option<(u32, String)> {
        from_file_name(p).map(|n| (n.rank, n.run))
    }

    #[test]
    fn generic_names() {
        assert_eq!(r("out/rank3.pickle"), Some((3, "rank*".into())));
        assert_eq!(
            r("sampled_rank-1.json.gz"),
            Some((1, "sampled_rank-*".into()))
        );
        assert_eq!(
            r("rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"),
            Some((0, "rank-*".into()))
        );
        assert_eq!(
            r("job/worker_12.pt.trace.json"),
            Some((12, "worker_*".into()))
        );
        assert_eq!(r("RANK_7_mem.pickle"), Some((7, "RANK_*".into())));
        assert_eq!(r("rank_unavailable/rank_not_found.json.gz"), None);
        assert_eq!(r("clean_training.pickle"), None);
        assert_eq!(r("trace.json"), None);
        assert_eq!(
            r("rank1234567.pickle"),
            None,
            "7 digits: a time, not a rank"
        );
    }

    #[test]
    fn torchtitan() {
        let n = from_file_name("out/iteration_6/rank1_memory_snapshot.pickle.gz").unwrap();
        assert_eq!((n.rank, n.run.as_str()), (1, "rank*"));
        assert_eq!(n.convention, Convention::RankWord);
        assert_eq!(
            r("iteration_10/rank12_memory_snapshot.pickle"),
            Some((12, "rank*".into()))
        );
    }

    #[test]
    fn megatron_lm() {
        assert_eq!(
            r("oom_rank-3_2024-05-01-12-00-00.pickle"),
            Some((3, "oom_rank-*".into()))
        );
    }

    #[test]
    fn megatron_bridge() {
        for (p, rank) in [
            ("snapshot_0.pickle", 0),
            ("d/snapshot_1.pickle.gz", 1),
            ("snapshot_oom_rank-2.pickle.gz", 2),
            ("snapshot_oom_rank-17.pickle", 17),
        ] {
            let n = from_file_name(p).unwrap();
            assert_eq!((n.rank, n.run.as_str()), (rank, "snapshot_*"), "{p}");
            assert_eq!(n.convention, Convention::MegatronBridge);
        }
        // Its truth files or other `snapshot_N` names are no rank of it.
        assert_eq!(r("snapshot_0.truth.json"), None);
    }

    #[test]
    fn verl() {
        let n = from_file_name("verl/actor_rank1_pid533.pickle.gz").unwrap();
        assert_eq!((n.rank, n.run.as_str()), (1, "actor_rank*"));
        assert_eq!(
            r("critic_rank0_pid12.pickle"),
            Some((0, "critic_rank*".into()))
        );
    }

    #[test]
    fn memscope_run() {
        assert_eq!(
            r("out/memscope-oom-rank1.pickle"),
            Some((1, "memscope-oom-rank*".into()))
        );
    }

    #[test]
    fn user_pattern() {
        let p = RankPattern::new(r"node(?P<rank>\d+)/").unwrap();
        let n = rank_of("job/node12/mem.pickle", Some(&p)).unwrap();
        assert_eq!((n.rank, n.run.as_str()), (12, "node*"));
        assert_eq!(n.convention, Convention::User);
        // The pattern alone decides: a name it does not match has no rank.
        assert!(rank_of("rank3.pickle", Some(&p)).is_none());
        let first = RankPattern::new(r"gpu(\d+)").unwrap();
        assert_eq!(first.rank("gpu7.pickle").unwrap().rank, 7);
        assert!(matches!(
            RankPattern::new(r"gpu\d+"),
            Err(PatternError::NoGroup { .. })
        ));
        assert!(matches!(
            RankPattern::new(r"gpu(\d+"),
            Err(PatternError::Invalid { .. })
        ));
        // A group that holds no number gives no rank.
        assert!(RankPattern::new(r"(gpu)")
            .unwrap()
            .rank("gpu.pickle")
            .is_none());
    }
}
