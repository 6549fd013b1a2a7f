//! The words of the job view (several ranks read together): its verdict line, where the ranks'
//! numbers came from, the imbalance, and why inputs are no job, said once for the text, the
//! HTML, the TUI and the errors.
//!
//! `wording` sits below `job` (tools/layers.py): these functions take the job's typed figures
//! as plain values ([`JobVerdict`], a peak and whether it is exact, ...), never a `job` type,
//! so `job` uses them and not the reverse.

use crate::analysis::oom::Cause;
use crate::rank_name::RankFrom;
use crate::units::bytes;

/// `path: cannot tell which rank this is: …` ([`crate::job`]'s `JobError::NoRank`).
pub fn no_rank_error(path: &str, pattern_given: bool) -> String {
    format!(
        "{path}: cannot tell which rank this is: {}",
        no_rank(pattern_given)
    )
}

/// Two inputs of one rank ([`crate::job`]'s `JobError::Repeated`).
pub fn repeated_rank(rank: u32, first: &str, second: &str, from: RankFrom) -> String {
    format!(
        "{first} and {second} are both rank {rank} ({}); give each rank once, or number them with --rank-pattern",
        rank_from(from)
    )
}

/// Where a rank's number came from, as a clause (`… are both rank 0 (from the file name)`).
pub fn rank_from(f: RankFrom) -> &'static str {
    match f {
        RankFrom::Pattern => "from --rank-pattern",
        RankFrom::DistributedInfo => "from the trace's distributedInfo",
        RankFrom::FileName => "from the file name",
        RankFrom::Summary => "recorded in the summary",
        RankFrom::Device => "from the one CUDA device the snapshot uses",
    }
}

/// Why an input has no rank (after `cannot tell which rank this is: `).
pub fn no_rank(pattern_given: bool) -> &'static str {
    if pattern_given {
        "--rank-pattern does not match its path, and nothing in it gives a rank"
    } else {
        "its name follows no rank convention (rank{R}, snapshot_{R}.pickle, …_{R}.pt.trace.json) and nothing in it gives a rank; rename it or pass --rank-pattern"
    }
}

/// A short word for a table cell.
pub fn rank_from_cell(f: RankFrom) -> &'static str {
    match f {
        RankFrom::Pattern => "pattern",
        RankFrom::DistributedInfo => "trace",
        RankFrom::FileName => "name",
        RankFrom::Summary => "summary",
        RankFrom::Device => "device",
    }
}

/// `1.29x`: how many times the smallest peak the largest is (`max_over_min`: `None` where the
/// smallest is 0).
pub fn ratio(max_over_min: Option<f64>) -> String {
    match max_over_min {
        Some(r) => format!("{r:.2}x"),
        None => "unbounded (a rank peaked at 0 B)".into(),
    }
}

/// `61.5%`: the spread, `(max - min) / max`, in percent.
pub fn spread_percent(p: f64) -> String {
    format!("{p:.1}%")
}

/// How the imbalance is computed, said once wherever it is printed (`analyze` of a job,
/// `check`'s rank groups, the TUI's job view, MCP).
/// The Ranks view's keys, under its title.
pub const JOB_KEYS: &str =
    "(Up/Down select a rank, Enter opens it and q there comes back; q here quits)";

pub const IMBALANCE_HOW: &str = "imbalance, over each rank's peak allocated bytes: max/min = highest peak / lowest peak; spread = (highest - lowest) / highest, the figure --max-imbalance limits";

/// A peak and the rank it belongs to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RankPeak {
    pub rank: u32,
    pub bytes: u64,
}

/// How far apart the ranks' peaks are: the largest, the smallest, `max / min`, the spread
/// (`(max - min) / max`, in percent) and the mean.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    pub max_over_min: Option<f64>,
    pub spread_percent: f64,
    pub max: RankPeak,
    pub min: RankPeak,
    pub mean_bytes: u64,
}

/// The two figures of the imbalance: `max/min 2.60x, spread 61.5%`.
pub fn imbalance_figures(i: &Spread) -> String {
    format!(
        "max/min {}, spread {}",
        ratio(i.max_over_min),
        spread_percent(i.spread_percent)
    )
}

/// The imbalance in one line: its two figures, then max, min and mean (as torchrec prints
/// them), each with its rank.
pub fn imbalance(i: &Spread) -> String {
    format!(
        "{}: max {} (rank {}), min {} (rank {}), mean {}",
        imbalance_figures(i),
        bytes(i.max.bytes),
        i.max.rank,
        bytes(i.min.bytes),
        i.min.rank,
        bytes(i.mean_bytes)
    )
}

/// Captures of two programs given as one job ([`crate::check::diff::one_program`]): `first`
/// and `other` share no source file.
pub fn unrelated_programs(
    first: &str,
    first_files: &[String],
    other: &str,
    other_files: &[String],
) -> String {
    format!(
        "{first} and {other} share no source file ({first} allocates from {}, {other} from {}): they look like captures of different programs, not ranks of one job; give one job's captures (memscope diff --force compares two programs)",
        first_files.join(", "),
        other_files.join(", ")
    )
}

/// `ranks 0, 2`, or `rank 2`.
pub fn rank_list(ranks: &[u32]) -> String {
    let list: Vec<String> = ranks.iter().map(u32::to_string).collect();
    match ranks.len() {
        1 => format!("rank {}", list[0]),
        _ => format!("ranks {}", list.join(", ")),
    }
}

/// What the job's verdict says: which ranks hit an OOM or leak, and which peaked highest.
#[derive(Clone, Debug, PartialEq)]
pub struct JobVerdict<'a> {
    pub oom_ranks: &'a [u32],
    /// The cause of each OOM rank's last OOM, in `oom_ranks`' order (where one is known).
    pub oom_causes: Vec<Cause>,
    pub leak_ranks: &'a [u32],
    /// No rank's capture could support a leak judgement.
    pub none_judged: bool,
    /// The rank that peaked highest and the spread, with two ranks or more.
    pub highest: Option<(u32, Spread)>,
}

/// The job's verdict: which ranks hit an OOM or leak, and which peaked highest.
pub fn job_verdict(job: &JobVerdict) -> String {
    let mut parts = Vec::new();
    if !job.oom_ranks.is_empty() {
        let mut causes: Vec<&str> = job.oom_causes.iter().map(|c| c.name()).collect();
        causes.dedup();
        parts.push(format!(
            "{} hit an OOM (cause: {})",
            rank_list(job.oom_ranks),
            causes.join(", ")
        ));
    }
    if !job.leak_ranks.is_empty() {
        parts.push(format!("{} leaks", rank_list(job.leak_ranks)));
    }
    if parts.is_empty() {
        parts.push(if job.none_judged {
            "no OOM; leaks not judged on any rank".into()
        } else {
            "no OOM, no leak found".into()
        });
    }
    if let Some((p, i)) = &job.highest {
        parts.push(format!(
            "rank {p} peaked highest at {}, {} the lowest (rank {})",
            bytes(i.max.bytes),
            ratio(i.max_over_min),
            i.min.rank
        ));
    }
    parts.join("; ")
}

/// A rank's leak cell: the number of findings, or `-` where not judged (`None`).
pub fn leak_cell(leaks: Option<usize>) -> String {
    leaks.map_or_else(|| "-".into(), |n| n.to_string())
}

/// A rank's peak cell: exact, or `>=` where the log began after memory was in use.
pub fn peak_cell(exact: bool, v: u64) -> String {
    if exact {
        bytes(v)
    } else {
        format!(">= {}", bytes(v))
    }
}

/// The note under the table where some peaks are lower bounds.
pub const PEAKS_SEEN: &str = "`>=`: the rank's log began while memory was already in use; the peak is the highest the log saw (the true peak unless it came before recording began)";

/// The note under the table where some ranks could not be judged for leaks.
pub const LEAKS_UNJUDGED: &str =
    "leaks `-`: the capture cannot support a leak judgement (one pass, or too few steps)";
