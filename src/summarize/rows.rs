//! The rows of the four tables, as one capture's product gives them.
//!
//! Every column is a scalar (no nesting), so that DuckDB, Spark SQL and BigQuery read the files
//! with no loader code; a fact the capture does not record is `null`, never 0. The rank's
//! figures are the job view's own ([`crate::job::RankFigures`], made from the gate's
//! [`InputSummary`]): a job reduced from these rows and the job read from the captures show
//! the same numbers.

use serde::{Deserialize, Serialize};

use crate::analysis::oom::Cause;
use crate::analysis::sites::Site;
use crate::analysis::{CaptureKind, VerdictKind};
use crate::check::summary::SiteBytes;
use crate::check::InputSummary;
use crate::job::{RankFigures, RankFrom};

use super::site_id::{relative_path_in, site_id_in};

/// The `schema` column of every row of every table.
pub const SUMMARIES_SCHEMA: &str = "memscope.summaries/1";

/// What became of a capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Analysed: the figures are filled in.
    Ok,
    /// No file at the path.
    Missing,
    /// The file could not be read (permissions, an I/O error).
    Unreadable,
    /// The file ends early: a cut pickle or gzip stream.
    Truncated,
    /// Read, but not a capture memscope can load (damaged, another format).
    Invalid,
    /// A memscope document (a report, a summary), not a capture.
    NotACapture,
    /// Analysed, but nothing tells its rank (give `--rank`): no figures are kept, since no
    /// reduce could place them.
    NoRank,
}

/// `rank_summary`: one row per capture, whatever became of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RankRow {
    pub schema: String,
    pub job: String,
    pub step: String,
    /// `null` where nothing tells the rank (a rank-less capture that could not be read).
    pub rank: Option<u32>,
    pub rank_from: Option<RankFrom>,
    /// The host: `--host` where given, else the capture's own record (`memscope run` writes
    /// it since issue #40), else `null`.
    pub host: Option<String>,
    /// Where `host` comes from.
    pub host_from: Option<HostFrom>,
    /// The path as given to `summarize`.
    pub path: String,
    pub status: Status,
    /// Why not `ok`, in words.
    pub status_detail: Option<String>,
    pub kind: Option<CaptureKind>,
    /// The snapshot's layout (`torch20`, `torch21`, `modern`): what the capture tells of its
    /// torch version (torch records no version in a snapshot).
    pub torch_layout: Option<String>,
    /// `torch.__version__` and `torch.version.cuda`, where `memscope run` recorded them.
    pub torch_version: Option<String>,
    pub cuda_version: Option<String>,
    /// The device the figures and sites come from: the one with the highest peak.
    pub device: Option<String>,
    pub devices: Option<u64>,
    /// The device's memory size, where the capture records it (`memscope run`, `memscope.capture`).
    pub device_total_bytes: Option<u64>,
    /// Whether the log starts from an empty allocator, so the peaks are exact; else they are
    /// the highest the log saw.
    pub history_complete: Option<bool>,
    pub peak_allocated_bytes: Option<u64>,
    pub peak_reserved_bytes: Option<u64>,
    pub end_allocated_bytes: Option<u64>,
    pub end_reserved_bytes: Option<u64>,
    pub ooms: Option<u64>,
    /// The last OOM's cause and request (the one that ended the run).
    pub oom_cause: Option<Cause>,
    pub oom_requested_bytes: Option<u64>,
    /// The rank's first OOM's time (microseconds since the epoch), where the log has times.
    pub first_oom_time_us: Option<i64>,
    /// At the last OOM: the device's memory less what the allocator reserved and what the
    /// driver said was free: memory held outside this allocator (the CUDA context, NCCL,
    /// other processes). Where the capture records the device's size and the OOM's free bytes.
    pub outside_allocator_bytes: Option<u64>,
    /// Leak findings; `null` where the capture could not support a judgement.
    pub leaks: Option<u64>,
    pub leak_live_bytes: Option<u64>,
    pub verdict: Option<VerdictKind>,
    /// How many `site_at_peak` rows the rank has (the analysis keeps its top sites).
    pub sites_listed: Option<u64>,
}

/// Where a row's `host` comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostFrom {
    /// `--host` (as `rank_from`'s `summary` is `--rank`).
    Summary,
    /// The capture's own record (`socket.gethostname()` in `memscope run`).
    Capture,
}

/// `site_at_peak`: the main device's top sites live at its allocated peak, largest first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SiteRow {
    pub schema: String,
    pub job: String,
    pub step: String,
    pub rank: Option<u32>,
    /// 0 for the largest.
    pub position: u32,
    /// `null` for the blocks without a Python stack.
    pub site_id: Option<String>,
    pub rel_path: Option<String>,
    /// The file as the capture recorded it.
    pub file: Option<String>,
    pub function: Option<String>,
    pub line: Option<u32>,
    pub bytes: u64,
    pub blocks: u64,
}

/// `step_series`: each step's peak and end on the main device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepRow {
    pub schema: String,
    pub job: String,
    pub step: String,
    pub rank: Option<u32>,
    /// 0 for the first step of the capture.
    pub index: u32,
    pub name: String,
    pub peak_allocated_bytes: u64,
    pub end_allocated_bytes: u64,
}

/// `leak_site`: one row per leak finding, with its line's identity.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LeakRow {
    pub schema: String,
    pub job: String,
    pub step: String,
    pub rank: Option<u32>,
    pub site_id: Option<String>,
    pub rel_path: Option<String>,
    pub file: Option<String>,
    pub function: Option<String>,
    pub line: Option<u32>,
    /// The leak rule's id.
    pub leak_kind: String,
    pub live_bytes: u64,
    pub growth_bytes_per_step: f64,
    pub steps: u64,
}

/// One capture's rows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rows {
    pub rank: Vec<RankRow>,
    pub sites: Vec<SiteRow>,
    pub steps: Vec<StepRow>,
    pub leaks: Vec<LeakRow>,
}

/// Where the rows go: the job and step they are filed under.
#[derive(Clone, Debug)]
pub struct Key {
    pub job: String,
    pub step: String,
    pub rank: Option<u32>,
}

/// A site's location columns: identity, relative path, file, function, line.
type Located = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<u32>,
);

fn located(s: Option<&Site>, roots: &[String]) -> Located {
    match s {
        Some(s) => (
            Some(site_id_in(&s.file, &s.function, s.line, roots)),
            Some(relative_path_in(&s.file, roots).to_owned()),
            Some(s.file.clone()),
            Some(s.function.clone()),
            Some(s.line),
        ),
        None => (None, None, None, None, None),
    }
}

impl RankRow {
    /// The row of a capture that gave no figures.
    pub fn failed(
        key: &Key,
        from: Option<RankFrom>,
        path: &str,
        status: Status,
        detail: String,
    ) -> RankRow {
        RankRow {
            schema: SUMMARIES_SCHEMA.into(),
            job: key.job.clone(),
            step: key.step.clone(),
            rank: key.rank,
            rank_from: from,
            host: None,
            host_from: None,
            path: path.to_owned(),
            status,
            status_detail: Some(detail),
            kind: None,
            torch_layout: None,
            torch_version: None,
            cuda_version: None,
            device: None,
            devices: None,
            device_total_bytes: None,
            history_complete: None,
            peak_allocated_bytes: None,
            peak_reserved_bytes: None,
            end_allocated_bytes: None,
            end_reserved_bytes: None,
            ooms: None,
            oom_cause: None,
            oom_requested_bytes: None,
            first_oom_time_us: None,
            outside_allocator_bytes: None,
            leaks: None,
            leak_live_bytes: None,
            verdict: None,
            sites_listed: None,
        }
    }
}

/// What the analysis knows beyond the summary (`None` where the capture does not say).
#[derive(Clone, Debug, Default)]
pub struct Extra {
    pub torch_layout: Option<String>,
    /// Where the capture was taken, as it records it.
    pub origin: crate::model::Origin,
    pub device_total_bytes: Option<u64>,
    pub first_oom_time_us: Option<i64>,
    pub outside_allocator_bytes: Option<u64>,
}

/// The main device of a summary: the one with the highest peak (the job view's choice).
pub fn main_device(s: &InputSummary) -> Option<usize> {
    s.devices
        .iter()
        .enumerate()
        .max_by_key(|(_, d)| d.peak_allocated_bytes)
        .map(|(i, _)| i)
}

/// The rows of an analysed capture: `f` its job figures, `s` its summary, `roots` the
/// repositories' roots its sites' paths are taken below (`--repo-root`).
pub fn of_capture(
    key: &Key,
    f: &RankFigures,
    s: &InputSummary,
    extra: Extra,
    roots: &[String],
) -> Rows {
    let dev = main_device(s).map(|i| &s.devices[i]);
    let sites: &[SiteBytes] = dev.map_or(&[], |d| &d.sites_at_peak);
    let last = s.ooms.last();
    let rank = RankRow {
        schema: SUMMARIES_SCHEMA.into(),
        job: key.job.clone(),
        step: key.step.clone(),
        rank: Some(f.rank),
        rank_from: Some(f.rank_from),
        host_from: extra.origin.host.as_ref().map(|_| HostFrom::Capture),
        host: extra.origin.host,
        path: f.path.clone(),
        status: Status::Ok,
        status_detail: None,
        kind: Some(f.kind),
        torch_layout: extra.torch_layout,
        torch_version: extra.origin.torch_version,
        cuda_version: extra.origin.cuda_version,
        device: dev.map(|d| d.device.clone()),
        devices: Some(s.devices.len() as u64),
        device_total_bytes: extra.device_total_bytes,
        history_complete: Some(f.peak_exact),
        peak_allocated_bytes: Some(f.peak_allocated_bytes),
        peak_reserved_bytes: Some(f.peak_reserved_bytes),
        end_allocated_bytes: Some(f.end_allocated_bytes),
        end_reserved_bytes: Some(f.end_reserved_bytes),
        ooms: Some(f.ooms as u64),
        oom_cause: f.oom_cause,
        oom_requested_bytes: last.map(|o| o.requested_bytes),
        first_oom_time_us: extra.first_oom_time_us,
        outside_allocator_bytes: extra.outside_allocator_bytes,
        leaks: f.leaks.map(|n| n as u64),
        leak_live_bytes: Some(f.leak_live_bytes),
        verdict: Some(f.verdict),
        sites_listed: Some(sites.len() as u64),
    };
    let r = Some(f.rank);
    let site_rows = sites
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let (site_id, rel_path, file, function, line) = located(b.site.as_ref(), roots);
            SiteRow {
                schema: SUMMARIES_SCHEMA.into(),
                job: key.job.clone(),
                step: key.step.clone(),
                rank: r,
                position: i as u32,
                site_id,
                rel_path,
                file,
                function,
                line,
                bytes: b.bytes,
                blocks: b.blocks,
            }
        })
        .collect();
    let steps = s
        .steps
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, st)| StepRow {
            schema: SUMMARIES_SCHEMA.into(),
            job: key.job.clone(),
            step: key.step.clone(),
            rank: r,
            index: i as u32,
            name: st.name.clone(),
            peak_allocated_bytes: st.peak_allocated_bytes,
            end_allocated_bytes: st.end_allocated_bytes,
        })
        .collect();
    let leaks = s
        .leaks
        .iter()
        .flatten()
        .map(|l| {
            let (site_id, rel_path, file, function, line) = located(l.site.as_ref(), roots);
            LeakRow {
                schema: SUMMARIES_SCHEMA.into(),
                job: key.job.clone(),
                step: key.step.clone(),
                rank: r,
                site_id,
                rel_path,
                file,
                function,
                line,
                leak_kind: serde_json::to_value(l.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                live_bytes: l.live_bytes,
                growth_bytes_per_step: l.growth_bytes_per_step,
                steps: l.steps,
            }
        })
        .collect();
    Rows {
        rank: vec![rank],
        sites: site_rows,
        steps,
        leaks,
    }
}

impl SiteRow {
    /// The site as the job view compares it (its heaviest stack is not kept: the job view
    /// leaves it out too).
    pub fn site_bytes(&self) -> SiteBytes {
        let site = match (&self.file, &self.function, self.line) {
            (Some(file), Some(function), Some(line)) => Some(Site {
                file: file.clone(),
                line,
                function: function.clone(),
            }),
            _ => None,
        };
        SiteBytes {
            site,
            bytes: self.bytes,
            blocks: self.blocks,
            chain: Vec::new(),
        }
    }
}
