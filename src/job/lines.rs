//! Per-rank summaries as JSON Lines (`memscope baseline --format jsonl`): one flat object per
//! line per rank, that DuckDB (`read_json_auto`) and Polars (`read_ndjson`) read into a table.
//!
//! At cluster scale each rank's capture is summarised where it was written (one `memscope
//! baseline` per rank, from the job's launcher or a Slurm array), and one machine reduces the
//! lines with `check` or `analyze`. Every column is a scalar of one type on every line (no
//! nulls, no nesting): the figures of the job table, and `summary`, the rank's whole
//! `memscope.baseline/1` summary as a JSON string, which is what `check` and `analyze` read
//! back (the other columns are for the query engines; reading never trusts them over it).

use serde::{Deserialize, Serialize};

use super::{Job, RankFrom};
use crate::analysis::oom::Cause;
use crate::analysis::{CaptureKind, VerdictKind};
use crate::check::summary::{no_echo, one_line_strings, BaselineError, RankInfo, RankSource};
use crate::check::InputSummary;

/// The `schema` column of every line.
pub const RANK_LINE_SCHEMA: &str = "memscope.rank/1";

/// One line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RankLine {
    pub schema: String,
    pub rank: u32,
    /// `pattern`, `distributed_info`, `file_name`, `summary` or `device`.
    pub rank_from: RankFrom,
    pub path: String,
    /// `snapshot` or `trace`.
    pub kind: CaptureKind,
    /// The verdict's id (`ok`, `oom_capacity`, ...).
    pub verdict: VerdictKind,
    pub devices: u64,
    pub peak_allocated_bytes: u64,
    pub peak_reserved_bytes: u64,
    pub peak_exact: bool,
    pub end_allocated_bytes: u64,
    pub end_reserved_bytes: u64,
    pub ooms: u64,
    /// The last OOM's cause, `""` without one (a column of one type on every line, no null).
    #[serde(with = "cause_or_empty")]
    pub oom_cause: Option<Cause>,
    pub leaks_judged: bool,
    /// 0 where not judged.
    pub leaks: u64,
    pub leak_live_bytes: u64,
    /// The rank's `InputSummary` as JSON text.
    pub summary: String,
}

/// An OOM's cause as its name, or `""` without one.
mod cause_or_empty {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::analysis::oom::Cause;

    pub fn serialize<S: Serializer>(c: &Option<Cause>, s: S) -> Result<S::Ok, S::Error> {
        match c {
            Some(c) => c.serialize(s),
            None => s.serialize_str(""),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Cause>, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Column {
            Cause(Cause),
            Other(String),
        }
        match Column::deserialize(d)? {
            Column::Cause(c) => Ok(Some(c)),
            Column::Other(t) if t.is_empty() => Ok(None),
            Column::Other(_) => Err(serde::de::Error::custom(
                "an OOM cause that memscope does not know",
            )),
        }
    }
}

fn snake<T: Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The lines of `job`, whose ranks are `summaries` (in the job's rank order).
pub fn lines(job: &Job, summaries: &[&InputSummary]) -> Result<String, serde_json::Error> {
    let mut out = String::new();
    for (r, s) in job.ranks.iter().zip(summaries) {
        let line = RankLine {
            schema: RANK_LINE_SCHEMA.into(),
            rank: r.rank,
            rank_from: r.rank_from,
            path: r.path.clone(),
            kind: r.kind,
            verdict: r.verdict,
            devices: s.devices.len() as u64,
            peak_allocated_bytes: r.peak_allocated_bytes,
            peak_reserved_bytes: r.peak_reserved_bytes,
            peak_exact: r.peak_exact,
            end_allocated_bytes: r.end_allocated_bytes,
            end_reserved_bytes: r.end_reserved_bytes,
            ooms: r.ooms as u64,
            oom_cause: r.oom_cause,
            leaks_judged: r.leaks.is_some(),
            leaks: r.leaks.unwrap_or(0) as u64,
            leak_live_bytes: r.leak_live_bytes,
            summary: serde_json::to_string(s)?,
        };
        out.push_str(&serde_json::to_string(&line)?);
        out.push('\n');
    }
    Ok(out)
}

/// Whether `head` (a file's first bytes) starts a file of rank lines.
pub fn is_rank_lines(head: &str) -> bool {
    head.contains(RANK_LINE_SCHEMA)
}

/// The longest rank line read (16 MiB; memscope writes a few KB a rank).
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// The most rank lines one file holds (as many as a job directory's captures).
pub const MAX_RANKS: usize = 100_000;

/// The most bytes of rank lines read from one file (256 MiB: 80,000 ranks of 3.3 KB). What a
/// line's summary becomes in memory is a few times the line, so this bounds the whole read,
/// whatever the file's size: a 2 GB file is refused after its first 256 MiB, not held.
pub const MAX_TEXT_BYTES: usize = 256 << 20;

/// Reads rank lines back into summaries, each numbered with its line's rank (blank lines are
/// skipped, so files joined with `cat` read as one). One line at a time: only its summary is
/// kept, and the limits above hold before a line is parsed.
/// Bytes, not text: each line is checked as UTF-8 when it is reached, so that a file past the
/// limits is never read (nor paged in) beyond them.
pub fn read(bytes: &[u8]) -> Result<Vec<InputSummary>, BaselineError> {
    read_within(bytes, MAX_RANKS, MAX_TEXT_BYTES)
}

fn read_within(
    bytes: &[u8],
    max_ranks: usize,
    max_text: usize,
) -> Result<Vec<InputSummary>, BaselineError> {
    let mut out = Vec::new();
    let mut read = 0usize;
    for (n, l) in bytes.split(|&b| b == b'\n').enumerate() {
        let bad = |what: String| BaselineError::Malformed {
            what: format!("line {}: {what}", n + 1),
        };
        if l.len() > MAX_LINE_BYTES {
            return Err(bad(format!(
                "{} bytes, over the limit of {MAX_LINE_BYTES} for one rank's line",
                l.len()
            )));
        }
        let l = std::str::from_utf8(l).map_err(|_| bad("not UTF-8".into()))?;
        if l.trim().is_empty() {
            continue;
        }
        read += l.len();
        if read > max_text || out.len() == max_ranks {
            return Err(bad(format!(
                "over the limit of {max_ranks} ranks or {max_text} bytes of rank lines in one file; split the job's lines"
            )));
        }
        let line: RankLine = serde_json::from_str(l).map_err(|e| bad(no_echo(&e)))?;
        if line.schema != RANK_LINE_SCHEMA {
            return Err(BaselineError::OtherSchema);
        }
        let mut v: serde_json::Value =
            serde_json::from_str(&line.summary).map_err(|e| bad(no_echo(&e)))?;
        one_line_strings(&mut v);
        let mut s: InputSummary = serde_json::from_value(v).map_err(|e| bad(no_echo(&e)))?;
        s.rank = Some(RankInfo {
            rank: line.rank,
            world_size: None,
            source: RankSource::Explicit,
        });
        out.push(s);
    }
    Ok(out)
}

/// `RankFrom` as the lines spell it (for tests and readers).
pub fn rank_from_name(f: RankFrom) -> String {
    snake(&f)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` lines of the one rank of fixtures/clean.pickle, numbered 0 to n - 1.
    fn lines_of_clean(n: u32) -> Vec<u8> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/clean.pickle");
        let s = crate::inputs::load_summaries(&[path], false)
            .unwrap()
            .remove(0);
        let summary = serde_json::to_string(&s).unwrap();
        let mut out = Vec::new();
        for rank in 0..n {
            let l = RankLine {
                schema: RANK_LINE_SCHEMA.into(),
                rank,
                rank_from: RankFrom::Pattern,
                path: format!("r{rank}.pickle"),
                kind: CaptureKind::Snapshot,
                verdict: VerdictKind::Ok,
                devices: 1,
                peak_allocated_bytes: 0,
                peak_reserved_bytes: 0,
                peak_exact: true,
                end_allocated_bytes: 0,
                end_reserved_bytes: 0,
                ooms: 0,
                oom_cause: None,
                leaks_judged: false,
                leaks: 0,
                leak_live_bytes: 0,
                summary: summary.clone(),
            };
            out.extend(serde_json::to_vec(&l).unwrap());
            out.extend(b"\r\n");
        }
        out
    }

    #[test]
    fn reading_stops_at_the_limits_before_parsing_past_them() {
        let text = lines_of_clean(5);
        assert_eq!(read_within(&text, 5, usize::MAX).unwrap().len(), 5);
        let e = read_within(&text, 4, usize::MAX).unwrap_err().to_string();
        assert!(e.contains("line 5: over the limit of 4 ranks"), "{e}");
        let one = text.len() / 5;
        let e = read_within(&text, 100, 2 * one).unwrap_err().to_string();
        assert!(e.contains("line 3: over the limit"), "{e}");
        let mut long = br#"{"schema": "memscope.rank/1", "summary": ""#.to_vec();
        long.resize(MAX_LINE_BYTES + 1, b'a');
        let e = read(&long).unwrap_err().to_string();
        assert!(
            e.contains("line 1:") && e.contains("for one rank's line"),
            "{e}"
        );
        let e = read(b"\xff\n").unwrap_err().to_string();
        assert!(e.contains("line 1: not UTF-8"), "{e}");
    }
}
