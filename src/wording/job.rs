//! The words of the job view (several ranks read together): its verdict line, where the ranks'
//! numbers came from, and the imbalance, said once for the text, the HTML and the TUI.

use crate::job::{Imbalance, Job, RankFigures, RankFrom};
use crate::units::bytes;

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

/// `1.29x`: how many times the smallest peak the largest is.
pub fn ratio(i: &Imbalance) -> String {
    match i.max_over_min {
        Some(r) => format!("{r:.2}x"),
        None => "unbounded (a rank peaked at 0 B)".into(),
    }
}

/// The imbalance in one line, as torchrec prints it: max over min, then max, min and mean.
pub fn imbalance(i: &Imbalance) -> String {
    format!(
        "max/min {}: max {} (rank {}), min {} (rank {}), mean {}",
        ratio(i),
        bytes(i.max.bytes),
        i.max.rank,
        bytes(i.min.bytes),
        i.min.rank,
        bytes(i.mean_bytes)
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

/// The job's verdict: which ranks hit an OOM or leak, and which peaked highest.
pub fn job_verdict(job: &Job) -> String {
    let mut parts = Vec::new();
    if !job.oom_ranks.is_empty() {
        let causes: Vec<&str> = job
            .oom_ranks
            .iter()
            .filter_map(|r| job.ranks.iter().find(|f| f.rank == *r)?.oom_cause)
            .map(|c| c.name())
            .collect();
        let mut causes = causes;
        causes.dedup();
        parts.push(format!(
            "{} hit an OOM (cause: {})",
            rank_list(&job.oom_ranks),
            causes.join(", ")
        ));
    }
    if !job.leak_ranks.is_empty() {
        parts.push(format!("{} leaks", rank_list(&job.leak_ranks)));
    }
    if parts.is_empty() {
        parts.push(if job.unjudged_ranks.len() == job.ranks.len() {
            "no OOM; leaks not judged on any rank".into()
        } else {
            "no OOM, no leak found".into()
        });
    }
    if let (Some(i), Some(p)) = (&job.imbalance, job.peak_rank) {
        parts.push(format!(
            "rank {p} peaked highest at {}, {} the lowest (rank {})",
            bytes(i.max.bytes),
            ratio(i),
            i.min.rank
        ));
    }
    parts.join("; ")
}

/// A rank's leak cell: the number of findings, or `-` where not judged.
pub fn leak_cell(r: &RankFigures) -> String {
    r.leaks.map_or_else(|| "-".into(), |n| n.to_string())
}

/// A rank's peak cell: exact, or `>=` where the log began after memory was in use.
pub fn peak_cell(r: &RankFigures, v: u64) -> String {
    if r.peak_exact {
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
