//! One capture in, rows out: the map step's driver.
//!
//! It reads the capture the way `check` and the job view do ([`crate::inputs`]: a trace's
//! `distributedInfo` rank read from its raw text, then one analysis), keeps what the rows need
//! beyond the gate's summary (the device's size, the OOM's free bytes and time, the snapshot's
//! layout), makes the rows, and drops the product before returning: a batch holds one capture
//! at a time. A capture that cannot be read is a `rank_summary` row with its status.

use std::path::Path;

use crate::analysis::{Analysis, Product};
use crate::check::summarize;
use crate::check::summary::{RankInfo, RankSource};
use crate::job::{self, Job, RankFrom};
use crate::load::LoadError;

use super::rows::{self, Extra, HostFrom, Key, RankRow, Rows, Status};

/// What the map step is told besides the file.
#[derive(Clone, Debug, Default)]
pub struct Given {
    pub job: String,
    pub step: String,
    /// `--rank`: the capture's rank, over what its name or content says.
    pub rank: Option<u32>,
    /// `--host`: the host, over what the capture records.
    pub host: Option<String>,
    /// `--repo-root`: the repositories' roots, as the capturing hosts spelled them; a site's
    /// file below one is identified by its path below it ([`super::site_id`]).
    pub repo_roots: Vec<String>,
}

fn status_of(e: &LoadError) -> Status {
    match e {
        LoadError::Io { err, .. } if err.kind() == std::io::ErrorKind::NotFound => Status::Missing,
        LoadError::Io { .. } => Status::Unreadable,
        LoadError::Cut { .. } | LoadError::Gzip { .. } => Status::Truncated,
        _ => Status::Invalid,
    }
}

/// The rows of one capture. Never fails: what went wrong is the row's status.
pub fn summarize_file(path: &Path, given: &Given) -> Rows {
    let shown = path.display().to_string();
    // The rank of a capture that gives no figures: `--rank`, else its name.
    let failed = |status: Status, detail: String| {
        let (rank, from) = match given.rank {
            Some(n) => (Some(n), Some(RankFrom::Summary)),
            None => match crate::rank_name::from_file_name(&shown) {
                Some(n) => (Some(n.rank), Some(RankFrom::FileName)),
                None => (None, None),
            },
        };
        let key = Key {
            job: given.job.clone(),
            step: given.step.clone(),
            rank,
        };
        let mut r = RankRow::failed(&key, from, &shown, status, detail);
        r.host = given.host.clone();
        r.host_from = given.host.as_ref().map(|_| HostFrom::Summary);
        Rows {
            rank: vec![r],
            ..Rows::default()
        }
    };
    let input = match crate::load::read_input(path) {
        Ok(i) => i,
        Err(e) => return failed(status_of(&e), e.to_string()),
    };
    let json = crate::load::sniff(&input) == crate::load::Sniffed::Json;
    if json {
        let head = String::from_utf8_lossy(&input[..input.len().min(256)]);
        if head.contains("\"memscope.") || head.contains("\"envelope\"") {
            return failed(
                Status::NotACapture,
                format!("{shown}: a memscope document, not a capture"),
            );
        }
    }
    let rank_info = json
        .then(|| crate::inputs::distributed_info(&input))
        .flatten();
    let opened = match crate::load::open_read(path, &input) {
        Ok(o) => o,
        Err(e) => return failed(status_of(&e), e.to_string()),
    };
    drop(input);
    let product = crate::analysis::analyze(opened, path);
    let a = product.report();
    let mut s = summarize(a);
    s.path = shown.clone();
    s.rank = match given.rank {
        Some(rank) => Some(RankInfo {
            rank,
            world_size: None,
            source: RankSource::Explicit,
        }),
        None => rank_info,
    };
    let main = main_device_index(a, &s);
    let extra = extra(&product, main);
    drop(product);
    let members = match job::identify(vec![s], None) {
        Ok(m) => m,
        Err(e) => return failed(Status::NoRank, e.to_string()),
    };
    let j = Job::new(&members);
    let key = Key {
        job: given.job.clone(),
        step: given.step.clone(),
        rank: Some(members[0].rank),
    };
    let mut out = rows::of_capture(
        &key,
        &j.ranks[0],
        &members[0].summary,
        extra,
        &given.repo_roots,
    );
    if let Some(h) = &given.host {
        out.rank[0].host = Some(h.clone());
        out.rank[0].host_from = Some(HostFrom::Summary);
    }
    out
}

/// The index (in the analysis' devices) of the summary's main device.
fn main_device_index(a: &Analysis, s: &crate::check::InputSummary) -> Option<usize> {
    rows::main_device(s).filter(|&i| i < a.devices.len())
}

/// What the product knows beyond the summary, on the main device (`main`, its index in the
/// analysis' devices).
fn extra(p: &Product, main: Option<usize>) -> Extra {
    let a = p.report();
    let first_oom_time_us = a
        .devices
        .iter()
        .flat_map(|d| d.ooms.iter().filter_map(|o| o.time_us))
        .min();
    let Product::Snapshot(sp) = p else {
        return Extra {
            first_oom_time_us,
            ..Extra::default()
        };
    };
    let total = main.and_then(|i| sp.snap.device_total(a.devices[i].device));
    Extra {
        origin: sp
            .snap
            .device_record
            .as_ref()
            .map(|r| r.origin.clone())
            .unwrap_or_default(),
        torch_layout: serde_json::to_value(sp.snap.layout)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned)),
        device_total_bytes: total,
        first_oom_time_us,
        outside_allocator_bytes: main.and_then(|i| outside(a, i, total)),
    }
}

/// Memory outside the allocator at the last OOM on the main device: the device's size less
/// what the driver said was free and what the allocator had reserved.
fn outside(a: &Analysis, main: usize, total: Option<u64>) -> Option<u64> {
    let d = &a.devices[main];
    let o = d.ooms.last()?;
    let free = o.device_free_bytes?;
    total?.checked_sub(free)?.checked_sub(o.reserved_bytes)
}
