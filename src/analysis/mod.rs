//! Analyses over the model: replaying the allocator, explaining OOMs, grouping by site.
//!
//! [`analyze_snapshot`] is the one entry point views use: it runs every analysis once and
//! returns an [`Analysis`] that the text, JSON and TUI views only render. Its serialized form
//! is the `memscope.report/1` JSON schema, so field names here are a public contract.

pub mod categories;
pub mod leaks;
pub mod oom;
pub mod replay;
pub mod sites;
pub mod steps;

use std::path::Path;

use crate::model::{Device, Layout, Snapshot};
use oom::{Cause, Diagnosis};
use replay::{Consistency, Timeline};
use sites::{Site, SiteTotal};

pub const SCHEMA: &str = "memscope.report/1";

/// What was analysed.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Input {
    pub path: String,
    /// `"snapshot"` or `"trace"`.
    pub kind: &'static str,
    pub bytes: u64,
    /// Snapshot layout (`torch20`, `torch21`, `modern`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layout: Option<Layout>,
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
    pub summary: String,
    pub evidence: Vec<String>,
    pub remedies: Vec<oom::Remedy>,
    /// The user's line that made the failing request.
    pub site: Option<Site>,
    pub stack: Vec<String>,
    /// What held memory at the OOM, by site.
    pub top_sites: Vec<SiteTotal>,
}

/// Per-device figures. Byte counts follow `torch.cuda.memory_stats()` names.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DeviceReport {
    pub device: u32,
    pub allocated_bytes: u64,
    pub active_bytes: u64,
    pub reserved_bytes: u64,
    pub requested_bytes: u64,
    /// Peaks are `null` where history before the log is missing: see `observed_peak_*`.
    pub peak_allocated_bytes: Option<u64>,
    pub peak_active_bytes: Option<u64>,
    pub peak_reserved_bytes: Option<u64>,
    pub peak_requested_bytes: Option<u64>,
    pub peak_inactive_split_bytes: Option<u64>,
    /// Highest figures seen within the recorded log (lower bounds when the log starts mid-run).
    pub observed_peak_allocated_bytes: u64,
    pub observed_peak_reserved_bytes: u64,
    pub peak_exact: bool,
    /// Event index of the allocated peak, when it lies in the log.
    pub peak_event: Option<u32>,
    pub inactive_split_bytes: u64,
    /// Non-expandable segments (torch's `segment.all.current`).
    pub segments: u64,
    /// Expandable segments, which torch leaves out of `segment.all` and `inactive_split_bytes`.
    pub expandable_segments: u64,
    /// Free bytes inside expandable segments that also hold live blocks.
    pub expandable_free_bytes: u64,
    /// Reserved minus active: cached by the allocator, usable by new requests that fit.
    pub free_reserved_bytes: u64,
    pub largest_free_block_bytes: u64,
    pub events: usize,
    /// Whether the log holds allocation events (not just a `snapshot` marker).
    pub has_history: bool,
    pub replay_consistent: bool,
    pub consistency: Consistency,
    pub history_starts_mid_run: bool,
    pub ooms: Vec<OomReport>,
    pub top_sites: Vec<SiteTotal>,
    pub top_sites_at_peak: Vec<SiteTotal>,
}

/// The verdict: one line a user reads first.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Verdict {
    /// `oom_fragmentation`, `oom_capacity`, `oom_leak`, `oom_unknown`, `leak`, `ok`.
    pub kind: String,
    pub summary: String,
}

/// Everything `analyze` found; serialized as the `memscope.report/1` JSON document.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Analysis {
    pub schema: &'static str,
    pub input: Input,
    pub verdict: Verdict,
    pub devices: Vec<DeviceReport>,
    pub notes: Vec<String>,
}

/// How many sites each list keeps.
pub const TOP_SITES: usize = 10;

fn top(mut v: Vec<SiteTotal>) -> Vec<SiteTotal> {
    v.truncate(TOP_SITES);
    v
}

fn device_report(snap: &Snapshot, dev: &Device, tl: &Timeline, notes: &mut Vec<String>) -> DeviceReport {
    // Current figures come from the snapshot's own segments: they are what torch recorded.
    // Sums saturate: a hostile file can declare sizes near 2^64.
    let mut allocated = 0u64;
    let mut active = 0u64;
    let mut requested = 0u64;
    let mut reserved = 0u64;
    let mut inactive_split = 0u64;
    let mut segments = 0u64;
    let mut exp_segments = 0u64;
    let mut exp_free = 0u64;
    let mut largest_free = 0;
    for s in &dev.segments {
        reserved = reserved.saturating_add(s.total_size);
        let seg_active = s.active_bytes();
        allocated = allocated.saturating_add(s.allocated_bytes());
        active = active.saturating_add(seg_active);
        requested = requested.saturating_add(s.blocks.iter().filter(|b| b.state.is_active()).fold(0u64, |a, b| a.saturating_add(b.requested_size)));
        let split_free = if s.blocks.iter().any(|b| b.state.is_active()) { s.total_size.saturating_sub(seg_active) } else { 0 };
        if s.is_expandable {
            exp_segments = exp_segments.saturating_add(1);
            exp_free = exp_free.saturating_add(split_free);
        } else {
            segments = segments.saturating_add(1);
            inactive_split = inactive_split.saturating_add(split_free);
        }
        for b in &s.blocks {
            if !b.state.is_active() {
                largest_free = largest_free.max(b.size);
            }
        }
        if s.blocks.is_empty() {
            largest_free = largest_free.max(s.total_size);
        }
    }
    let has_history = dev.events.iter().any(|e| !matches!(e.action, crate::model::Action::Snapshot | crate::model::Action::Other));
    let exact = !tl.starts_mid_run && has_history;
    let p = &tl.peaks;
    let peak = |v: u64| exact.then_some(v);
    let end_sites = sites::group(
        &snap.stacks,
        dev.segments
            .iter()
            .flat_map(|s| s.blocks.iter())
            .filter(|b| b.state.is_active())
            .map(|b| (b.stack, b.size)),
    );
    let peak_sites = match p.allocated.event {
        Some(ev) if exact || tl.starts_mid_run => {
            let st = tl.state_after(dev, &snap.settings, Some(ev.0 as usize));
            sites::group(&snap.stacks, st.live_blocks().filter(|b| b.state == crate::model::BlockState::ActiveAllocated).map(|b| (b.stack, b.size)))
        }
        _ => Vec::new(),
    };
    let ooms = tl
        .ooms
        .iter()
        .map(|o| {
            let d: Diagnosis = oom::diagnose(dev, tl, o);
            let st = tl.state_after(dev, &snap.settings, Some(o.event.0 as usize));
            let held = sites::group(&snap.stacks, st.live_blocks().filter(|b| b.state == crate::model::BlockState::ActiveAllocated).map(|b| (b.stack, b.size)));
            OomReport {
                event: o.event.0,
                time_us: o.time_us,
                requested_bytes: o.requested_bytes,
                rounded_bytes: o.rounded_bytes,
                device_free_bytes: o.device_free_bytes,
                allocated_bytes: o.counters.allocated,
                reserved_bytes: o.counters.reserved,
                largest_free_block_bytes: o.largest_free_block_bytes,
                free_reserved_bytes: o.counters.reserved.saturating_sub(o.counters.active),
                cause: d.cause,
                summary: d.summary,
                evidence: d.evidence,
                remedies: d.remedies,
                site: Site::of_stack(&snap.stacks, o.stack),
                stack: snap.stacks.frames(o.stack).iter().map(|&f| snap.stacks.frame_label(snap.stacks.frame(f))).collect(),
                top_sites: top(held),
            }
        })
        .collect();
    if tl.starts_mid_run && has_history {
        notes.push(format!(
            "device {}: the event log starts while {} were already reserved (recording began late, or the ring buffer dropped the oldest entries); peaks before the first entry are unknown, so peak figures are lower bounds",
            dev.index,
            crate::units::bytes(tl.initial.counters.reserved)
        ));
    }
    if !has_history {
        notes.push(format!(
            "device {}: the snapshot has no allocation history (recorded without _record_memory_history, or a torch 2.0 layout): current figures only, no peaks",
            dev.index
        ));
    }
    if tl.approximate_initial_blocks > 0 {
        notes.push(format!(
            "device {}: {} blocks allocated before the log began were freed in it; their sizes are taken as their rounded requests",
            dev.index, tl.approximate_initial_blocks
        ));
    }
    if !tl.consistency.consistent {
        notes.push(format!(
            "device {}: the replayed end state differs from the snapshot's segments in {} places; first: {}",
            dev.index,
            tl.consistency.mismatches,
            tl.consistency.first_mismatch.as_deref().unwrap_or("?")
        ));
    }
    DeviceReport {
        device: dev.index,
        allocated_bytes: allocated,
        active_bytes: active,
        reserved_bytes: reserved,
        requested_bytes: requested,
        peak_allocated_bytes: peak(p.allocated.bytes),
        peak_active_bytes: peak(p.active.bytes),
        peak_reserved_bytes: peak(p.reserved.bytes),
        peak_requested_bytes: peak(p.requested.bytes),
        peak_inactive_split_bytes: peak(p.inactive_split.bytes),
        observed_peak_allocated_bytes: p.allocated.bytes.max(allocated),
        observed_peak_reserved_bytes: p.reserved.bytes.max(reserved),
        peak_exact: exact,
        peak_event: p.allocated.event.map(|e| e.0),
        inactive_split_bytes: inactive_split,
        segments,
        expandable_segments: exp_segments,
        expandable_free_bytes: exp_free,
        free_reserved_bytes: reserved.saturating_sub(active),
        largest_free_block_bytes: largest_free,
        events: dev.events.len(),
        has_history,
        replay_consistent: tl.consistency.consistent,
        consistency: tl.consistency.clone(),
        history_starts_mid_run: tl.starts_mid_run,
        ooms,
        top_sites: top(end_sites),
        top_sites_at_peak: top(peak_sites),
    }
}

fn verdict(devices: &[DeviceReport]) -> Verdict {
    // The last OOM is the one that ended the run; earlier ones were caught by the program.
    let last_oom = devices
        .iter()
        .flat_map(|d| d.ooms.iter().map(move |o| (d.device, o)))
        .max_by_key(|(_, o)| (o.time_us.unwrap_or(0), o.event));
    if let Some((dev, o)) = last_oom {
        let n: usize = devices.iter().map(|d| d.ooms.len()).sum();
        let at = o.site.as_ref().map(|s| format!(" at {}:{}", s.file, s.line)).unwrap_or_default();
        let more = if n > 1 { format!(" ({n} OOMs in the capture; the last is explained)") } else { String::new() };
        return Verdict {
            kind: format!("oom_{}", o.cause.name()),
            summary: format!(
                "OOM on cuda:{dev} requesting {}{at}, caused by {}{more}",
                crate::units::bytes(o.rounded_bytes),
                o.summary,
            ),
        };
    }
    // Saturating: hostile files can declare sizes near 2^64 on several devices.
    let total_alloc = devices.iter().fold(0u64, |a, d| a.saturating_add(d.allocated_bytes));
    let total_res = devices.iter().fold(0u64, |a, d| a.saturating_add(d.reserved_bytes));
    Verdict {
        kind: "ok".into(),
        summary: format!(
            "no OOM recorded; {} allocated and {} reserved at the end across {} device(s)",
            crate::units::bytes(total_alloc),
            crate::units::bytes(total_res),
            devices.len()
        ),
    }
}

/// Runs every snapshot analysis.
pub fn analyze_snapshot(snap: &Snapshot, path: &Path, file_bytes: u64) -> Analysis {
    let mut notes = snap.load_notes.clone();
    let devices: Vec<DeviceReport> = snap
        .devices
        .iter()
        .map(|d| {
            let tl = replay::replay(d, &snap.settings);
            device_report(snap, d, &tl, &mut notes)
        })
        .collect();
    if snap.layout == Layout::Torch20 {
        notes.push("torch 2.0 snapshots record no event history and no OOM entries: if this one was dumped at an OOM, the sites above show what held the memory then".into());
    }
    if snap.devices.is_empty() {
        notes.push("the snapshot holds no segments and no events: nothing was allocated while recording".into());
    }
    Analysis {
        schema: SCHEMA,
        input: Input {
            path: path.display().to_string(),
            kind: "snapshot",
            bytes: file_bytes,
            layout: Some(snap.layout),
        },
        verdict: verdict(&devices),
        devices,
        notes,
    }
}
