//! Everything the TUI browses, computed once at load time.
//!
//! The views must render in milliseconds on a million events, so whatever does not depend on
//! the cursor (the analysis, each device's replayed timeline with its checkpoints, the markers,
//! the findings list) is built here, on the loading thread, and never again.

use std::path::{Path, PathBuf};

use crate::analysis::replay::Timeline;
use crate::analysis::{self, Analysis};
use crate::load::{self, LoadError};
use crate::model::{Device, Snapshot};
use crate::units::bytes;

/// What a marker on the timeline stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkerKind {
    Peak,
    Oom,
    /// A `record_function` range start (`Snapshot.annotations`).
    Annotation,
}

/// A point of interest on a device's event log.
#[derive(Clone, Debug, PartialEq)]
pub struct Marker {
    pub event: usize,
    pub kind: MarkerKind,
    pub label: String,
}

/// Where a finding's evidence lies.
#[derive(Clone, Debug, PartialEq)]
pub enum Jump {
    /// An event of a device (index into `snap.devices`): the timeline cursor goes there.
    Event {
        dev: usize,
        event: usize,
    },
    /// A site in the sites view, at the end of the log.
    Site {
        dev: usize,
        label: String,
    },
    None,
}

/// One selectable line of the overview.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    pub label: String,
    pub jump: Jump,
}

/// A loaded capture.
pub struct Data {
    pub path: PathBuf,
    pub snap: Snapshot,
    pub analysis: Analysis,
    /// One per `snap.devices` entry, same order.
    pub timelines: Vec<Timeline>,
    /// Per device, sorted by event.
    pub markers: Vec<Vec<Marker>>,
    pub findings: Vec<Finding>,
}

impl Data {
    /// Reads, parses, analyses and replays a snapshot.
    pub fn load(path: &Path) -> Result<Data, LoadError> {
        let raw = load::read_input(path)?;
        let file_len = std::fs::metadata(path)
            .map(|m| m.len())
            .unwrap_or(raw.len() as u64);
        let snap = load::snapshot_from_bytes(path, &raw)?;
        drop(raw);
        Ok(Data::from_snapshot(path, snap, file_len))
    }

    pub fn from_snapshot(path: &Path, snap: Snapshot, file_len: u64) -> Data {
        let (analysis, timelines) =
            analysis::analyze_snapshot_with_timelines(&snap, path, file_len);
        let markers = snap
            .devices
            .iter()
            .zip(&timelines)
            .map(|(d, tl)| markers(&snap, d, tl))
            .collect();
        let findings = findings(&analysis, &snap);
        Data {
            path: path.to_path_buf(),
            snap,
            analysis,
            timelines,
            markers,
            findings,
        }
    }

    /// Microseconds of event `i` since the first timed event of the device.
    pub fn rel_time_us(&self, dev: usize, i: usize) -> Option<i64> {
        let d = self.snap.devices.get(dev)?;
        let t0 = d.events.iter().find_map(|e| e.time_us)?;
        d.events.get(i)?.time_us.map(|t| t - t0)
    }
}

fn markers(snap: &Snapshot, dev: &Device, tl: &Timeline) -> Vec<Marker> {
    let mut out = Vec::new();
    if let Some(p) = tl.peaks.allocated.event {
        out.push(Marker {
            event: p.0 as usize,
            kind: MarkerKind::Peak,
            label: format!("peak {} allocated", bytes(tl.peaks.allocated.bytes)),
        });
    }
    for o in &tl.ooms {
        out.push(Marker {
            event: o.event.0 as usize,
            kind: MarkerKind::Oom,
            label: format!("OOM requesting {}", bytes(o.rounded_bytes)),
        });
    }
    // Annotations carry times; events are in time order, so each maps to the first event at or
    // after it.
    let times: Vec<i64> = dev
        .events
        .iter()
        .map(|e| e.time_us.unwrap_or(i64::MIN))
        .collect();
    if !times.is_empty() && times.iter().any(|&t| t != i64::MIN) {
        for a in snap
            .annotations
            .iter()
            .filter(|a| a.device == dev.index && a.start)
        {
            let i = times.partition_point(|&t| t < a.time_us);
            if i < times.len() {
                out.push(Marker {
                    event: i,
                    kind: MarkerKind::Annotation,
                    label: a.name.clone(),
                });
            }
        }
    }
    out.sort_by_key(|m| m.event);
    out
}

fn findings(a: &Analysis, snap: &Snapshot) -> Vec<Finding> {
    let mut out = Vec::new();
    let dev_pos = |d: u32| snap.devices.iter().position(|x| x.index == d).unwrap_or(0);
    for l in &a.leaks {
        out.push(Finding {
            label: super::app::leak_label(l),
            jump: Jump::Event {
                dev: dev_pos(l.device),
                event: l.leak.window_end_event.0 as usize,
            },
        });
    }
    for d in &a.devices {
        let di = dev_pos(d.device);
        for o in &d.ooms {
            out.push(Finding {
                label: format!(
                    "OOM on cuda:{} at event {}: {} ({})",
                    d.device,
                    o.event,
                    bytes(o.rounded_bytes),
                    o.cause.name()
                ),
                jump: Jump::Event {
                    dev: di,
                    event: o.event as usize,
                },
            });
        }
        if let Some(p) = d.peak_event {
            out.push(Finding {
                label: format!(
                    "peak on cuda:{} at event {}: {} allocated",
                    d.device,
                    p,
                    bytes(d.observed_peak_allocated_bytes)
                ),
                jump: Jump::Event {
                    dev: di,
                    event: p as usize,
                },
            });
        }
        if d.free_reserved_bytes > 0 {
            let last = snap.devices.get(di).map(|x| x.events.len()).unwrap_or(0);
            out.push(Finding {
                label: format!(
                    "fragmentation on cuda:{} at the end: {} reserved but free, largest free block {}",
                    d.device,
                    bytes(d.free_reserved_bytes),
                    d.largest_free_block_bytes.map(bytes).unwrap_or_else(|| "unknown".into())
                ),
                jump: if last > 0 { Jump::Event { dev: di, event: last - 1 } } else { Jump::None },
            });
        }
        for s in &d.top_sites {
            // The sites view labels a site as `Stacks::frame_label` does.
            let label = s
                .site
                .as_ref()
                .map(|x| format!("{}:{} {}", x.file, x.line, x.function))
                .unwrap_or_else(|| "(no stack)".into());
            out.push(Finding {
                label: format!(
                    "held at the end on cuda:{}: {} in {} blocks from {}",
                    d.device,
                    bytes(s.bytes),
                    s.blocks,
                    label
                ),
                jump: Jump::Site { dev: di, label },
            });
        }
    }
    out
}
