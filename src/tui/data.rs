//! Everything the TUI browses, computed once at load time.
//!
//! The views must render in milliseconds on a million events, so whatever does not depend on
//! the cursor is made on the loading thread, once: the analysis product (`analysis::analyze`:
//! the report, each device's replayed timeline with its checkpoints, the steps, the
//! classifiers, the leak series), which [`Data`] keeps whole and the views borrow, and what the
//! TUI adds to it (the markers, the findings list, the time axis).

use std::ops::Deref;
use std::path::{Path, PathBuf};

use crate::analysis::plan::{self, Ask, Plan};
use crate::analysis::replay::Timeline;
use crate::analysis::steps::StepSource;
use crate::analysis::{self, Analysis, SnapshotProduct};
use crate::load::Opened;
use crate::model::{Device, Snapshot, StackId};
use crate::units::bytes;

/// What a marker on the timeline stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkerKind {
    Peak,
    Oom,
    /// A `record_function` range start (`Snapshot.annotations`).
    Annotation,
    /// The first event of a step (a `ProfilerStep#N`, or a step found in the log).
    Step,
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
    /// A stack in the sites view, at the cursor: its site opened and its row selected (the
    /// allocator map's `Enter` on a block).
    Stack(StackId),
    /// A finding of the trace's autograd graph section (`graph.growth[i]`).
    Graph(usize),
    /// A leak of the report (`leaks[i]`): its evidence in the leaks view.
    Leak(usize),
    /// A trace device's steps.
    Steps {
        dev: usize,
    },
    /// The ops of a trace step, sorted by what is alive at the end when `live`, with the row of
    /// op `op` (by name) selected.
    StepOps {
        dev: usize,
        step: usize,
        op: Option<String>,
        live: bool,
    },
    /// The ops of trace step `step` with the op that made event `event` of device `dev`
    /// selected, and that event in its list (the trace timeline's `Enter`).
    OpOfEvent {
        dev: usize,
        step: usize,
        event: usize,
    },
    None,
}

impl Jump {
    /// The device the jump shows, where it names one.
    pub fn dev(&self) -> Option<usize> {
        match self {
            Jump::Event { dev, .. }
            | Jump::Site { dev, .. }
            | Jump::Steps { dev }
            | Jump::StepOps { dev, .. }
            | Jump::OpOfEvent { dev, .. } => Some(*dev),
            Jump::Stack(_) | Jump::Graph(_) | Jump::Leak(_) | Jump::None => None,
        }
    }

    /// Whether the cursor goes to the end of the log first: a site is what is held at the end.
    pub fn at_end(&self) -> bool {
        matches!(self, Jump::Site { .. })
    }
}

/// One selectable line of the overview.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    pub label: String,
    pub jump: Jump,
}

/// A loaded snapshot: the analysis product (the snapshot, its report, its timelines with their
/// checkpoints, steps, classifiers and leak series, which `Data` dereferences to), and what
/// the TUI adds to it once.
pub struct Data {
    pub path: PathBuf,
    pub product: SnapshotProduct,
    /// Per device, sorted by event.
    pub markers: Vec<Vec<Marker>>,
    pub findings: Vec<Finding>,
    /// Per device: each event's time in seconds from the first, where every event has one and
    /// they are in order (the timeline's time axis).
    pub times: Vec<Option<Vec<f64>>>,
    /// Per device: the streams its segments and events name, sorted: what the map numbers
    /// them by (`s0` the default stream, `s1`, `s2`... the others), instead of raw handles.
    pub streams: Vec<Vec<u64>>,
    /// `memscope tui --batch`: the capacity plan of every device, or why there is none, made
    /// from the same analysis at load time; the Plan view takes it when the views are built
    /// ([`super::loaded::Loaded::into_mode`]), so it is `None` after that.
    pub plan: Option<Planned>,
}

/// A capacity plan per device with an allocation history, or why none could be made.
pub type Planned = Result<Vec<Plan>, String>;

impl Deref for Data {
    type Target = SnapshotProduct;
    fn deref(&self) -> &SnapshotProduct {
        &self.product
    }
}

impl Data {
    /// Analyses `snap` (read from `file_len` stored bytes) and prepares its views.
    pub fn from_snapshot(path: &Path, snap: Snapshot, file_len: u64) -> Data {
        let opened = Opened {
            capture: snap,
            bytes: file_len,
        };
        Data::from_product(path, analysis::analyze(opened, path), None)
    }

    /// The views of an analysed snapshot, with the capacity plan `ask` asks for (`--batch`),
    /// made once from the product.
    pub fn from_product(path: &Path, product: SnapshotProduct, ask: Option<&Ask>) -> Data {
        let snap = &product.snap;
        let plan = ask.map(|a| plan::plan(snap, &product, a, None).map_err(|e| e.to_string()));
        let markers = snap
            .devices
            .iter()
            .zip(product.timelines())
            .map(|(d, tl)| markers(snap, &product.analysis, d, tl))
            .collect();
        let findings = findings(&product.analysis, snap);
        let times = snap.devices.iter().map(event_times).collect();
        let streams = snap.devices.iter().map(streams).collect();
        Data {
            path: path.to_path_buf(),
            product,
            markers,
            findings,
            times,
            streams,
            plan,
        }
    }

    /// How the map names stream `stream` of device `dev`: `s0` for the default stream (handle
    /// 0), `s1`, `s2`... for the others in handle order; a 64-bit handle (`s1208349744`) says
    /// nothing to a reader.
    pub fn stream_label(&self, dev: usize, stream: u64) -> String {
        stream_label(self.streams.get(dev).map_or(&[], |v| v.as_slice()), stream)
    }

    /// Microseconds of event `i` since the first timed event of the device.
    pub fn rel_time_us(&self, dev: usize, i: usize) -> Option<i64> {
        let d = self.snap.devices.get(dev)?;
        let t0 = d.events.iter().find_map(|e| e.time_us())?;
        d.events.get(i)?.time_us().map(|t| t - t0)
    }
}

fn streams(d: &Device) -> Vec<u64> {
    let mut v: Vec<u64> = d
        .segments
        .iter()
        .map(|s| s.stream)
        .chain((0..d.events.len()).map(|i| d.events.stream(i)))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// `s0` for the default stream, else `s` and the stream's rank among the device's other
/// streams (`sorted`), from 1; `s?` for a stream the device does not list.
pub fn stream_label(sorted: &[u64], stream: u64) -> String {
    if stream == 0 {
        return "s0".into();
    }
    let side = sorted.iter().filter(|&&s| s != 0);
    match side.clone().position(|&s| s == stream) {
        Some(i) => format!("s{}", i + 1),
        None => "s?".into(),
    }
}

fn event_times(d: &Device) -> Option<Vec<f64>> {
    let t0 = d.events.first()?.time_us()?;
    let v: Option<Vec<f64>> = d
        .events
        .iter()
        .map(|e| e.time_us().map(|t| (t - t0) as f64 / 1e6))
        .collect();
    v.filter(|v| v.windows(2).all(|w| w[0] <= w[1]))
}

fn markers(snap: &Snapshot, a: &Analysis, dev: &Device, tl: &Timeline) -> Vec<Marker> {
    let mut out = Vec::new();
    // Steps the analysis found from the loop's repeating allocations (annotated steps are
    // already marked by their annotations).
    for s in a
        .steps
        .iter()
        .filter(|s| s.device == dev.index && s.source == StepSource::Loop)
    {
        if let Some(e) = s.start_event {
            out.push(Marker {
                event: e as usize,
                kind: MarkerKind::Step,
                label: s.name.clone(),
            });
        }
    }
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
        .map(|e| e.time_us().unwrap_or(i64::MIN))
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
            label: leak_label(l),
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
        if let Some(free) = d.free_reserved_bytes.filter(|&f| f > 0) {
            let last = snap.devices.get(di).map(|x| x.events.len()).unwrap_or(0);
            out.push(Finding {
                label: format!(
                    "cached on cuda:{} at the end: {} reserved but free, largest free block {}",
                    d.device,
                    bytes(free),
                    d.largest_free_block_bytes
                        .map(bytes)
                        .unwrap_or_else(|| "unknown".into())
                ),
                jump: if last > 0 {
                    Jump::Event {
                        dev: di,
                        event: last - 1,
                    }
                } else {
                    Jump::None
                },
            });
        }
        for s in &d.top_sites {
            // The sites view labels a site as `sites::frame_label` does.
            let label = s
                .site
                .as_ref()
                .map(|x| super::sites::place_label(&x.file, x.line, &x.function))
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

/// One line for a leak finding.
pub fn leak_label(l: &crate::analysis::LeakReport) -> String {
    let site = l
        .leak
        .site
        .as_ref()
        .map(|s| super::sites::place_label(&s.file, s.line, &s.function))
        .unwrap_or_else(|| "(no stack)".into());
    // A released accumulation is not live at the end: its figure is the growth's peak.
    let held = if l.leak.extent.released() {
        format!("{} ({})", l.leak.extent.held(), l.leak.extent.label())
    } else {
        l.leak.extent.held().to_owned()
    };
    format!(
        "leak ({}, {}) on cuda:{}: {} {held} in {} tensors, +{}/step over {} steps, from {site}",
        l.leak.kind,
        l.leak.confidence,
        l.device,
        crate::units::bytes(l.leak.live_bytes),
        l.leak.count,
        crate::units::bytes(l.leak.growth_bytes_per_step.max(0.0) as u64),
        l.leak.steps
    )
}
