//! What if the allocator had been configured differently?
//!
//! A snapshot's event log holds the program's exact requests: sizes, streams, when each block
//! was freed (`free_requested`) and when it became reusable (`free_completed`, later when other
//! streams still used it), and the request that failed. [`simulate`] replays those requests,
//! not the recorded addresses, through [`alloc::Allocator`], a model of the caching allocator,
//! under any `PYTORCH_CUDA_ALLOC_CONF` and memory cap. Under the capture's own settings the
//! model must reproduce the recorded layout (the offset of every block in its segment), the
//! recorded OOMs and `memory_stats()`: [`Placement`] measures that, and `tests/it/whatif.rs` states
//! the figures reached on every capture.
//!
//! `torch.cuda.empty_cache()` is a request too: a run of `segment_free`/`segment_unmap` that is
//! followed neither by a new segment nor by an `oom` was not the allocator's own retry.

pub mod alloc;
pub mod error;
pub mod pools;

use std::collections::HashMap;

use crate::analysis::replay::{self, Rules, Timeline};
use crate::analysis::sites::Site;
use crate::model::{Action, AllocatorSettings, Device, Snapshot};
use alloc::{Allocator, Config, SegEvent};

/// Settings named in a `PYTORCH_CUDA_ALLOC_CONF` string; `None` leaves the recorded value.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct AllocConf {
    pub expandable_segments: Option<bool>,
    /// `Some(None)`: unlimited.
    pub max_split_size: Option<Option<u64>>,
    pub garbage_collection_threshold: Option<f64>,
    pub roundup_power2_divisions: Option<Vec<u64>>,
    /// Keys the model does not use (`backend`, `pinned_*`, ...).
    pub ignored: Vec<String>,
}

/// `PYTORCH_CUDA_ALLOC_CONF` keys the model uses.
pub const MODELLED: &[&str] = &[
    "expandable_segments",
    "max_split_size_mb",
    "garbage_collection_threshold",
    "roundup_power2_divisions",
];

/// Keys torch knows that do not change where blocks go (accepted, reported as not modelled).
pub const NOT_MODELLED: &[&str] = &[
    "backend",
    "release_lock_on_cudamalloc",
    "pinned_use_cuda_host_register",
    "pinned_num_register_threads",
    "pinned_use_background_threads",
    "graph_capture_record_stream_reuse",
    "per_process_memory_fraction",
];

/// Number of `roundup_power2_divisions` intervals (1 MiB .. 32 GiB), as in `CUDAAllocatorConfig`.
const DIVISION_INTERVALS: usize = 16;

/// Why a `PYTORCH_CUDA_ALLOC_CONF` string was refused: one variant per rule of
/// `CUDAAllocatorConfig` that the model checks, with the offending text or value.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum AllocConfError {
    #[error("`{0}`: expected key:value")]
    NotKeyValue(String),
    #[error("expandable_segments: `{0}` is not True or False")]
    ExpandableNotBool(String),
    #[error("max_split_size_mb: `{0}` is not an integer")]
    MaxSplitNotInteger(String),
    #[error("max_split_size_mb: {0} too small, must be > 20 (torch refuses it)")]
    MaxSplitTooSmall(i64),
    #[error("garbage_collection_threshold: `{0}` is not a number")]
    GcThresholdNotNumber(String),
    /// The message is torch's, which does not repeat the value.
    #[error("garbage_collection_threshold must be in (0.0, 1.0)")]
    GcThresholdOutOfRange(f64),
    /// A number of divisions that is not 0 or a power of 2.
    #[error("roundup_power2_divisions: {0} is not a power of 2")]
    DivisionsNotPowerOfTwo(u64),
    /// An interval (in MiB) of the list form that is not a power of 2.
    #[error("roundup_power2_divisions: {0} is not a power of 2")]
    IntervalNotPowerOfTwo(u64),
    /// A list entry that is not `MiB:divisions` or `>:divisions`.
    #[error("roundup_power2_divisions: `{0}`")]
    DivisionsEntry(String),
    #[error("roundup_power2_divisions: `{0}` is not an integer")]
    DivisionsNotInteger(String),
    #[error("unknown key `{0}`; known keys: {known}", known = known_keys())]
    UnknownKey(String),
}

/// Every key accepted, modelled ones first.
fn known_keys() -> String {
    MODELLED
        .iter()
        .chain(NOT_MODELLED)
        .copied()
        .collect::<Vec<_>>()
        .join(", ")
}

/// Parses `key:value[,key:value]` as `CUDAAllocatorConfig` does (the list form
/// `roundup_power2_divisions:[256:1,512:2,>:4]` included).
pub fn parse_alloc_conf(s: &str) -> Result<AllocConf, AllocConfError> {
    let mut out = AllocConf::default();
    for item in split_items(s)
        .iter()
        .map(|i| i.trim())
        .filter(|i| !i.is_empty())
    {
        let (k, v) = item
            .split_once(':')
            .ok_or_else(|| AllocConfError::NotKeyValue(item.to_string()))?;
        let (k, v) = (k.trim(), v.trim());
        match k {
            "expandable_segments" => {
                out.expandable_segments = Some(match v {
                    "True" | "true" | "1" => true,
                    "False" | "false" | "0" => false,
                    _ => return Err(AllocConfError::ExpandableNotBool(v.to_string())),
                })
            }
            "max_split_size_mb" => {
                let n: i64 = v
                    .parse()
                    .map_err(|_| AllocConfError::MaxSplitNotInteger(v.to_string()))?;
                out.max_split_size = Some(if n < 0 {
                    None
                } else {
                    if n <= 20 {
                        return Err(AllocConfError::MaxSplitTooSmall(n));
                    }
                    Some((n as u64) << 20)
                });
            }
            "garbage_collection_threshold" => {
                let f: f64 = v
                    .parse()
                    .map_err(|_| AllocConfError::GcThresholdNotNumber(v.to_string()))?;
                if !(f > 0.0 && f < 1.0) {
                    return Err(AllocConfError::GcThresholdOutOfRange(f));
                }
                out.garbage_collection_threshold = Some(f);
            }
            "roundup_power2_divisions" => out.roundup_power2_divisions = Some(parse_divisions(v)?),
            k if NOT_MODELLED.contains(&k) => out.ignored.push(k.to_string()),
            _ => return Err(AllocConfError::UnknownKey(k.to_string())),
        }
    }
    Ok(out)
}

/// The `key:value` items: the string split at commas outside brackets.
fn split_items(s: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    items.push(cur);
    items
}

fn parse_divisions(v: &str) -> Result<Vec<u64>, AllocConfError> {
    let check = |d: u64| {
        if d == 0 || d.is_power_of_two() {
            Ok(d)
        } else {
            Err(AllocConfError::DivisionsNotPowerOfTwo(d))
        }
    };
    let mut table = vec![0u64; DIVISION_INTERVALS];
    if let Some(list) = v.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
        let mut last: Option<usize> = None;
        for kv in list.split(',').map(str::trim).filter(|x| !x.is_empty()) {
            let entry = || AllocConfError::DivisionsEntry(kv.to_string());
            let (k, d) = kv.split_once(':').ok_or_else(entry)?;
            let d = check(d.trim().parse().map_err(|_| entry())?)?;
            if k.trim() == ">" {
                let from = last.map_or(0, |l| l + 1);
                for t in table.iter_mut().skip(from) {
                    *t = d;
                }
            } else {
                let mb: u64 = k.trim().parse().map_err(|_| entry())?;
                if !mb.is_power_of_two() {
                    return Err(AllocConfError::IntervalNotPowerOfTwo(mb));
                }
                let idx = (63 - mb.leading_zeros()) as usize;
                if last.is_none() {
                    for t in table.iter_mut().take(idx) {
                        *t = d;
                    }
                }
                if idx < DIVISION_INTERVALS {
                    table[idx] = d;
                }
                last = Some(idx);
            }
        }
    } else {
        let d = check(
            v.parse()
                .map_err(|_| AllocConfError::DivisionsNotInteger(v.to_string()))?,
        )?;
        table.fill(d);
    }
    Ok(table)
}

impl AllocConf {
    /// The recorded settings with these overrides.
    pub fn apply(&self, base: &AllocatorSettings) -> AllocatorSettings {
        let mut s = base.clone();
        if let Some(e) = self.expandable_segments {
            s.expandable_segments = Some(e);
        }
        if let Some(m) = self.max_split_size {
            s.max_split_size = m;
        }
        if let Some(g) = self.garbage_collection_threshold {
            s.garbage_collection_threshold = Some(g);
        }
        if let Some(d) = &self.roundup_power2_divisions {
            s.roundup_power2_divisions = d.clone();
        }
        s
    }
}

/// The settings in `PYTORCH_CUDA_ALLOC_CONF` words.
pub fn describe_settings(s: &AllocatorSettings) -> String {
    let mut parts = vec![format!(
        "expandable_segments:{}",
        if s.expandable_segments.unwrap_or(false) {
            "True"
        } else {
            "False"
        }
    )];
    if let Some(m) = s.max_split_size {
        parts.push(format!("max_split_size_mb:{}", m >> 20));
    }
    if let Some(g) = s.garbage_collection_threshold.filter(|g| *g > 0.0) {
        parts.push(format!("garbage_collection_threshold:{g}"));
    }
    if s.roundup_power2_divisions.iter().any(|d| *d > 1) {
        let d = &s.roundup_power2_divisions;
        if d.iter().all(|x| *x == d[0]) {
            parts.push(format!("roundup_power2_divisions:{}", d[0]));
        } else {
            parts.push(format!("roundup_power2_divisions:{d:?}"));
        }
    }
    parts.join(",")
}

/// One step of the program, as the model sees it.
#[derive(Clone, Debug)]
pub(crate) enum Op {
    /// A request (an `alloc`, or the `oom` entry's failed request).
    Malloc {
        size: u64,
        stream: u64,
        recorded_oom: bool,
        hints: Vec<(u64, u64)>,
    },
    FreeRequested,
    FreeCompleted,
    EmptyCache,
    /// Allocator output or bookkeeping: nothing to do.
    Skip,
}

/// Turns the log into requests (see the module docs for `empty_cache`).
pub(crate) fn ops(dev: &Device) -> Vec<Op> {
    let ev = &dev.events;
    let mut out = Vec::with_capacity(ev.len());
    let mut hints: Vec<(u64, u64)> = Vec::new();
    for (i, e) in ev.iter().enumerate() {
        let op = match e.action {
            Action::Alloc | Action::Oom => Op::Malloc {
                size: e.size,
                stream: ev.stream(i),
                recorded_oom: e.action == Action::Oom,
                hints: std::mem::take(&mut hints),
            },
            Action::FreeRequested => {
                hints.clear();
                Op::FreeRequested
            }
            Action::FreeCompleted => Op::FreeCompleted,
            Action::SegmentAlloc => {
                hints.push((e.size, e.addr));
                Op::Skip
            }
            Action::SegmentFree | Action::SegmentUnmap => {
                let starts_run = !ev[..i]
                    .iter()
                    .rev()
                    .find(|x| x.action != Action::FreeCompleted)
                    .is_some_and(|x| {
                        matches!(x.action, Action::SegmentFree | Action::SegmentUnmap)
                    });
                let next = ev[i + 1..]
                    .iter()
                    .find(|x| {
                        !matches!(
                            x.action,
                            Action::SegmentFree
                                | Action::SegmentUnmap
                                | Action::FreeCompleted
                                | Action::Snapshot
                                | Action::Annotate
                                | Action::Other
                        )
                    })
                    .map(|x| x.action);
                let internal = matches!(
                    next,
                    Some(Action::SegmentAlloc | Action::SegmentMap | Action::Oom)
                );
                if starts_run && !internal {
                    Op::EmptyCache
                } else {
                    Op::Skip
                }
            }
            _ => Op::Skip,
        };
        out.push(op);
    }
    out
}

/// An OOM of the model.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PredictedOom {
    /// Index of the log entry whose request failed.
    pub event: u32,
    /// How many requests came before it (comparable across captures of one workload).
    pub request_index: usize,
    pub requested_bytes: u64,
    pub rounded_bytes: u64,
    /// Reserved and allocated when it failed (after freeing cached blocks).
    pub reserved_bytes: u64,
    pub allocated_bytes: u64,
    /// The recorded run failed on this request too.
    pub recorded: bool,
    pub site: Option<Site>,
}

/// How the model's layout compares with the recorded one, request by request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Placement {
    pub allocs_compared: usize,
    /// Allocations the model put at the recorded offset in their segment.
    pub same_offset: usize,
    /// ... in a segment of the recorded (mapped) size.
    pub same_segment_size: usize,
    pub first_difference: Option<PlacementDifference>,
    /// Segment allocations/maps and frees/unmaps: (size) sequences of model and log.
    pub segment_events_model: usize,
    pub segment_events_recorded: usize,
    pub segment_events_same: bool,
}

/// The first allocation the model placed otherwise than the log: where each put it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlacementDifference {
    /// Index of the `alloc` entry in the log.
    pub event: usize,
    pub model_offset: u64,
    pub model_segment_bytes: u64,
    pub recorded_offset: u64,
    pub recorded_segment_bytes: u64,
}

impl Placement {
    pub fn offset_rate(&self) -> f64 {
        if self.allocs_compared == 0 {
            1.0
        } else {
            self.same_offset as f64 / self.allocs_compared as f64
        }
    }
}

/// What one run of the model gave.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RunResult {
    pub settings: String,
    pub cap_bytes: Option<u64>,
    pub stats: alloc::Stats,
    /// Log entry after which reserved memory first reached its peak.
    pub peak_reserved_event: Option<u32>,
    /// At that peak: reserved but not active, and the largest free block.
    pub free_reserved_at_peak_bytes: u64,
    pub largest_hole_at_peak_bytes: u64,
    pub inactive_split_bytes: u64,
    pub requests: usize,
    pub ooms: Vec<PredictedOom>,
    /// Recorded OOMs whose request the model satisfied.
    pub recorded_ooms_avoided: Vec<u32>,
    /// The run stopped at a new OOM (the program would have raised there).
    pub stopped_at: Option<u32>,
    /// How the layout compares with the log's. Not serialized with the figures: `whatif`'s
    /// JSON (`report::whatif`) adds it, its first difference in words.
    #[serde(skip)]
    pub placement: Placement,
}

/// The model configuration for `settings` and `cap`.
pub fn config(settings: &AllocatorSettings, cap: Option<u64>, gpu_total: Option<u64>) -> Config {
    let total = gpu_total.unwrap_or(1 << 40);
    Config {
        settings: settings.clone(),
        expandable_segments: settings.expandable_segments.unwrap_or(false),
        garbage_collection_threshold: settings.garbage_collection_threshold.unwrap_or(0.0),
        cap,
        expandable_va_bytes: total + total / 8,
        address_hints: true,
        descending_addresses: false,
    }
}

/// Places the layout a log starts with (`initial`: blocks from before its first event) in the
/// model, its blocks where they were; returns the address map that starts a replay (each live
/// block at its own address).
pub(crate) fn seed_layout(m: &mut Allocator, initial: &replay::State) -> HashMap<u64, u64> {
    let mut addr_map = HashMap::new();
    for s in initial.segments.values() {
        let live: Vec<(u64, u64, u64, bool)> = s
            .blocks
            .values()
            .map(|b| {
                (
                    b.address,
                    b.size,
                    b.requested,
                    b.state == crate::model::BlockState::ActivePendingFree,
                )
            })
            .collect();
        m.seed_segment(s.address, s.size, s.stream, s.pool, &live);
        for b in s.blocks.values() {
            addr_map.insert(b.address, b.address);
        }
    }
    addr_map
}

/// Replays the device's requests through the model. `snap` gives stacks for OOM sites and the
/// recorded settings (to place recorded blocks in their segments for [`Placement`]).
///
/// `initial` is the layout at the log's first event (empty when the log starts from an empty
/// allocator): its segments are placed in the model first, their live blocks where they were.
pub fn simulate(snap: &Snapshot, dev: &Device, cfg: Config, initial: &replay::State) -> RunResult {
    simulate_ops(snap, dev, cfg, initial, ops(dev))
}

/// [`simulate`] over requests already made from the log (one [`Op`] per entry).
pub(crate) fn simulate_ops(
    snap: &Snapshot,
    dev: &Device,
    cfg: Config,
    initial: &replay::State,
    ops: Vec<Op>,
) -> RunResult {
    let settings = describe_settings(&cfg.settings_with_expandable());
    let cap = cfg.cap;
    let mut m = Allocator::new(cfg);
    let mut recorded = replay::Replayer::new(
        Rules::from_settings(&snap.settings),
        &dev.events,
        initial.clone(),
    );
    let mut addr_map: HashMap<u64, u64> = seed_layout(&mut m, initial);
    let mut placement = Placement::default();
    let mut ooms = Vec::new();
    let mut avoided = Vec::new();
    let mut stopped_at = None;
    let mut peak_event = None;
    // The state the log starts with is the reserved peak until a new segment passes it.
    let mut frag_at_peak = m.fragmentation();
    let mut requests = 0usize;
    let mut rec_seg_events = Vec::new();
    let mut rec_exp = ExpandableLog::default();
    for (i, op) in ops.into_iter().enumerate() {
        let e = dev.events[i];
        recorded.step(i);
        match e.action {
            Action::SegmentAlloc => rec_seg_events.push(SegEvent::Alloc(e.size)),
            Action::SegmentFree => rec_seg_events.push(SegEvent::Free(e.size)),
            Action::SegmentMap => {
                rec_seg_events.push(SegEvent::Map(e.size));
                rec_exp.map(e.addr, e.size);
            }
            Action::SegmentUnmap => {
                rec_seg_events.push(SegEvent::Unmap(e.size));
                rec_exp.unmap(e.addr, e.size);
            }
            _ => {}
        }
        match op {
            Op::Malloc {
                size,
                stream,
                recorded_oom,
                mut hints,
            } => {
                let idx = requests;
                requests += 1;
                match m.malloc(size, stream, &mut hints) {
                    Ok(a) => {
                        if recorded_oom {
                            avoided.push(i as u32);
                        } else {
                            addr_map.insert(e.addr, a);
                            compare_placement(
                                &mut placement,
                                &m,
                                a,
                                recorded.state(),
                                &rec_exp,
                                e.addr,
                                i,
                            );
                        }
                    }
                    Err(o) => {
                        ooms.push(PredictedOom {
                            event: i as u32,
                            request_index: idx,
                            requested_bytes: size,
                            rounded_bytes: o.rounded,
                            reserved_bytes: o.reserved,
                            allocated_bytes: o.allocated,
                            recorded: recorded_oom,
                            site: Site::of_stack(&snap.stacks, e.stack),
                        });
                        if !recorded_oom {
                            stopped_at = Some(i as u32);
                        }
                    }
                }
            }
            Op::FreeRequested => {
                if let Some(&a) = addr_map.get(&e.addr) {
                    m.free_requested(a);
                }
            }
            Op::FreeCompleted => {
                if let Some(a) = addr_map.remove(&e.addr) {
                    m.free_block(a);
                }
            }
            Op::EmptyCache => m.release_cached_blocks(),
            Op::Skip => {}
        }
        if m.new_reserved_peak {
            m.new_reserved_peak = false;
            peak_event = Some(i as u32);
            frag_at_peak = m.fragmentation();
        }
        if stopped_at.is_some() {
            break;
        }
    }
    placement.segment_events_model = m.seg_events.len();
    placement.segment_events_recorded = rec_seg_events.len();
    placement.segment_events_same = m.seg_events == rec_seg_events;
    RunResult {
        settings,
        cap_bytes: cap,
        stats: m.stats,
        peak_reserved_event: peak_event,
        free_reserved_at_peak_bytes: frag_at_peak.0,
        largest_hole_at_peak_bytes: frag_at_peak.1,
        inactive_split_bytes: m.inactive_split_bytes(),
        requests,
        ooms,
        recorded_ooms_avoided: avoided,
        stopped_at,
        placement,
    }
}

impl Config {
    fn settings_with_expandable(&self) -> AllocatorSettings {
        let mut s = self.settings.clone();
        s.expandable_segments = Some(self.expandable_segments);
        s.garbage_collection_threshold = Some(self.garbage_collection_threshold);
        s
    }
}

/// The recorded expandable segments: one virtual range each, known by its first mapped
/// address; a map that lies in no known range's mapped extent starts a new one.
#[derive(Default)]
struct ExpandableLog {
    /// base -> (end of the highest mapping, mapped bytes)
    segs: std::collections::BTreeMap<u64, (u64, u64)>,
}

impl ExpandableLog {
    fn find(&self, addr: u64) -> Option<u64> {
        self.segs
            .range(..=addr)
            .next_back()
            .filter(|(_, (hw, _))| addr <= *hw)
            .map(|(b, _)| *b)
    }
    fn map(&mut self, addr: u64, size: u64) {
        let b = self.find(addr).unwrap_or(addr);
        let s = self.segs.entry(b).or_insert((addr, 0));
        s.0 = s.0.max(addr + size);
        s.1 += size;
    }
    fn unmap(&mut self, addr: u64, size: u64) {
        if let Some(b) = self.find(addr) {
            let s = self.segs.get_mut(&b).expect("found");
            s.1 = s.1.saturating_sub(size);
        }
    }
    /// (offset in its segment, mapped bytes of the segment).
    fn place(&self, addr: u64) -> Option<(u64, u64)> {
        let b = self
            .segs
            .range(..=addr)
            .next_back()
            .filter(|(_, (hw, _))| addr < *hw)?;
        Some((addr - b.0, b.1 .1))
    }
}

fn compare_placement(
    p: &mut Placement,
    m: &Allocator,
    model_addr: u64,
    rec: &replay::State,
    exp: &ExpandableLog,
    rec_addr: u64,
    i: usize,
) {
    let Some((off, seg_size, _)) = m.placement(model_addr) else {
        return;
    };
    let Some(seg) = rec.segment_of(rec_addr).and_then(|a| rec.segments.get(&a)) else {
        return;
    };
    let (rec_off, rec_size) = if seg.expandable {
        exp.place(rec_addr)
            .unwrap_or((rec_addr - seg.address, seg.size))
    } else {
        (rec_addr - seg.address, seg.size)
    };
    p.allocs_compared += 1;
    if rec_off == off {
        p.same_offset += 1;
    }
    if rec_size == seg_size {
        p.same_segment_size += 1;
    }
    if (rec_off != off || rec_size != seg_size) && p.first_difference.is_none() {
        p.first_difference = Some(PlacementDifference {
            event: i,
            model_offset: off,
            model_segment_bytes: seg_size,
            recorded_offset: rec_off,
            recorded_segment_bytes: rec_size,
        });
    }
}

/// The memory cap a run is replayed under, and where it came from.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CapInfo {
    pub bytes: Option<u64>,
    /// Serialized as its sentence (`whatif`'s and `plan`'s JSON, unchanged since it was one).
    pub source: CapSource,
    /// When derived: the range the recorded run allows.
    pub range: Option<(u64, u64)>,
}

/// Where a cap came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapSource {
    /// `--cap`.
    Given,
    /// The log's allocator retries bound it ([`retry_cap_range`]): the lower end of the range.
    Retries,
    /// Neither an OOM nor a retry in the log, and none given: no cap.
    None,
    /// The OOM found the device full: reserved + the driver's free memory.
    DeviceFull,
    /// The OOM met a per-process fraction: the lower end of the range the recorded run allows.
    PerProcessFraction,
    /// No OOM in the log: the device's memory size, which the capture records
    /// ([`crate::model::Snapshot::device_memory`]).
    DeviceTotal,
}

/// The cap the recorded run implies. An OOM under a per-process fraction means
/// `reserved + allocation size > cap` at the failed request while every earlier segment fit:
/// the cap lies between the recorded reserved peak and that sum; the lower end is used (the
/// prediction errs towards an OOM). When the driver itself had less free memory than the
/// request, the device was full: the cap is reserved + the driver's free memory.
///
/// With no OOM, the allocator's own retries bound the cap too: a run of segment frees followed
/// by a new segment is `cudaMalloc` failing, the cache released, and the request served
/// ([`retry_cap_range`]).
pub fn derive_cap(tl: &Timeline) -> CapInfo {
    derive_cap_with_retries(tl, None)
}

/// [`derive_cap`], with the bounds of the log's allocator retries where no OOM was recorded.
pub fn derive_cap_with_retries(tl: &Timeline, retries: Option<(u64, u64)>) -> CapInfo {
    let Some(o) = tl.ooms.first() else {
        if let Some((low, high)) = retries {
            let low = low.max(tl.peaks.reserved.bytes);
            return CapInfo {
                bytes: Some(low),
                source: CapSource::Retries,
                range: Some((low, high.max(low))),
            };
        }
        return CapInfo {
            bytes: None,
            source: CapSource::None,
            range: None,
        };
    };
    let reserved = o.counters.reserved;
    let alloc = alloc::allocation_size(o.rounded_bytes);
    if let Some(df) = o.device_free_bytes.filter(|df| *df < alloc) {
        return CapInfo {
            bytes: Some(reserved + df),
            source: CapSource::DeviceFull,
            range: None,
        };
    }
    let low = tl.peaks.reserved.bytes.max(reserved);
    let high = reserved + alloc - 1;
    CapInfo {
        bytes: Some(low),
        source: CapSource::PerProcessFraction,
        range: Some((low, high)),
    }
}

/// The device limit the log's allocator retries imply, as `(low, high)`: before each run of
/// segment frees that ends in a new segment (not in an OOM), `reserved + new > limit`; after it,
/// `reserved + new <= limit`. `None` when the log holds no such retry. Not meaningful under a
/// `garbage_collection_threshold`, whose frees come before any failure.
pub fn retry_cap_range(dev: &Device, initial_reserved: u64) -> Option<(u64, u64)> {
    let ev = &dev.events;
    let mut reserved = initial_reserved;
    let mut range: Option<(u64, u64)> = None;
    // A run that opens the log may have begun before it: its start is unknown.
    let mut run_start: Option<Option<u64>> = None;
    for (i, e) in ev.iter().enumerate() {
        match e.action {
            Action::SegmentFree | Action::SegmentUnmap => {
                run_start.get_or_insert((i > 0).then_some(reserved));
                reserved = reserved.saturating_sub(e.size);
            }
            Action::SegmentAlloc | Action::SegmentMap => {
                if let Some(Some(before)) = run_start.take() {
                    let low = reserved + e.size;
                    let high = (before + e.size).saturating_sub(1);
                    if low <= high {
                        range = Some(match range {
                            // Other processes may have changed what was free: where the
                            // retries disagree, the latest one stands.
                            Some((l, h)) if l.max(low) <= h.min(high) => (l.max(low), h.min(high)),
                            _ => (low, high),
                        });
                    }
                }
                run_start = None;
                reserved += e.size;
            }
            Action::FreeCompleted | Action::Snapshot | Action::Annotate | Action::Other => {}
            _ => run_start = None,
        }
    }
    range
}

/// The recorded run, in the same terms as a [`RunResult`].
#[derive(Clone, Debug, serde::Serialize)]
pub struct Recorded {
    pub settings: String,
    pub peak_reserved_bytes: u64,
    pub peak_allocated_bytes: u64,
    pub peak_segments: u64,
    pub free_reserved_at_peak_bytes: u64,
    pub largest_hole_at_peak_bytes: u64,
    pub ooms: Vec<PredictedOom>,
    pub requests: usize,
}

fn recorded(snap: &Snapshot, dev: &Device, tl: &Timeline) -> Recorded {
    // A log that never reserves past what it started with (recording began mid-run) has its
    // reserved peak in its initial state: the figures are that state's.
    let initial_is_peak = tl.peaks.reserved.event.is_none() && tl.initial.counters.reserved > 0;
    let (mut largest, mut free_reserved) = if initial_is_peak {
        let st = &tl.initial;
        (
            st.segments
                .values()
                .map(|s| s.largest_free())
                .max()
                .unwrap_or(0),
            st.counters.reserved.saturating_sub(st.counters.active),
        )
    } else {
        (0, 0)
    };
    if let Some(ev) = tl.peaks.reserved.event {
        // The peak is reached by a new segment; sample once the request it was made for is placed.
        let mut at = ev.0 as usize;
        while at + 1 < dev.events.len()
            && matches!(
                dev.events[at + 1].action,
                Action::SegmentAlloc | Action::SegmentMap | Action::Alloc
            )
        {
            at += 1;
            if dev.events[at].action == Action::Alloc {
                break;
            }
        }
        let st = tl.state_after(dev, &snap.settings, Some(at));
        largest = st
            .segments
            .values()
            .map(|s| s.largest_free())
            .max()
            .unwrap_or(0);
        free_reserved = st.counters.reserved.saturating_sub(st.counters.active);
    }
    let mut req = 0usize;
    let mut ooms = Vec::new();
    for (i, e) in dev.events.iter().enumerate() {
        match e.action {
            Action::Alloc => req += 1,
            Action::Oom => {
                let f = tl.ooms.iter().find(|o| o.event.0 as usize == i);
                ooms.push(PredictedOom {
                    event: i as u32,
                    request_index: req,
                    requested_bytes: e.size,
                    rounded_bytes: f.map_or(e.size, |f| f.rounded_bytes),
                    reserved_bytes: f.map_or(0, |f| f.counters.reserved),
                    allocated_bytes: f.map_or(0, |f| f.counters.allocated),
                    recorded: true,
                    site: Site::of_stack(&snap.stacks, e.stack),
                });
                req += 1;
            }
            _ => {}
        }
    }
    Recorded {
        settings: describe_settings(&snap.settings),
        peak_reserved_bytes: tl.peaks.reserved.bytes,
        peak_allocated_bytes: tl.peaks.allocated.bytes,
        peak_segments: tl.peaks.segments.bytes,
        free_reserved_at_peak_bytes: free_reserved,
        largest_hole_at_peak_bytes: largest,
        ooms,
        requests: req,
    }
}

/// The what-if answer for one device: the recorded run, the model under the recorded settings
/// (its error bar), and the model under the asked settings.
#[derive(Clone, Debug)]
pub struct WhatIf {
    pub device: u32,
    pub cap: CapInfo,
    pub recorded: Recorded,
    pub model_recorded_settings: RunResult,
    pub predicted: RunResult,
    pub notes: Vec<WhatIfNote>,
    /// The predicted peak reserved with the range the real run's lay in on every twin.
    pub predicted_peak_reserved: error::Bounded,
    /// Where the cap was derived as a range and the replay still fails at its lower end: the
    /// least cap in the range under which every recorded request is served, if one is. The
    /// answer then depends on the cap, which the log does not fix.
    pub served_from_cap: Option<u64>,
}

/// What the reader of a prediction should know about how it was made.
#[derive(Clone, Debug, PartialEq)]
pub enum WhatIfNote {
    /// The log starts mid-run: both runs start from the layout at its first event.
    MidRunStart {
        segments: usize,
        reserved_bytes: u64,
        live_bytes: u64,
    },
    /// `PYTORCH_CUDA_ALLOC_CONF` keys accepted but not modelled.
    NotModelled(Vec<String>),
    /// No cap: no OOM can be predicted.
    NoCap,
    /// Under the recorded settings the model placed fewer than 99% of the blocks where the log
    /// has them (the share it did place so).
    PoorPlacement { offset_rate: f64 },
    /// The requests replayed are the recorded ones (always said).
    RecordedRequests,
}

/// The prediction against the recorded run, as far as OOMs go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The recorded run hit an OOM; the prediction does not.
    OomAvoided,
    /// Both hit one.
    StillOoms,
    /// Only the prediction hits one.
    WouldOom,
    /// Neither does.
    NoOom,
}

impl WhatIf {
    pub fn outcome(&self) -> Outcome {
        match (
            self.recorded.ooms.is_empty(),
            self.predicted.ooms.is_empty(),
        ) {
            (false, true) => Outcome::OomAvoided,
            (false, false) => Outcome::StillOoms,
            (true, false) => Outcome::WouldOom,
            (true, true) => Outcome::NoOom,
        }
    }
}

/// Whether the log starts from an empty allocator: every freed block and segment was allocated
/// in it. (The replay's own test also counts expandable segments whose first pages were
/// unmapped as pre-existing; requests do not care.)
pub fn log_starts_empty(dev: &Device) -> bool {
    let mut blocks = std::collections::HashSet::new();
    let mut segs = std::collections::HashSet::new();
    for e in &dev.events {
        match e.action {
            Action::Alloc => {
                blocks.insert(e.addr);
            }
            Action::FreeRequested if !blocks.contains(&e.addr) => return false,
            Action::FreeCompleted if !blocks.remove(&e.addr) => return false,
            Action::SegmentAlloc => {
                segs.insert(e.addr);
            }
            Action::SegmentFree if !segs.remove(&e.addr) => return false,
            _ => {}
        }
    }
    !dev.segments.iter().any(|s| {
        !s.is_expandable
            && s.blocks
                .iter()
                .any(|b| b.state.is_active() && !blocks.contains(&b.address))
    })
}

/// Largest address or size the model accepts (4 PiB): far above any GPU, and low enough that
/// the model's sums cannot overflow. Values beyond it only come from damaged or forged files.
pub const MAX_PLAUSIBLE: u64 = 1 << 52;

/// Whether every size and address in the log and the segments is below [`MAX_PLAUSIBLE`].
pub fn plausible(dev: &Device) -> bool {
    dev.events.iter().enumerate().all(|(i, e)| {
        e.addr < MAX_PLAUSIBLE
            && e.size < MAX_PLAUSIBLE
            && dev.events.device_free(i).is_none_or(|d| d < MAX_PLAUSIBLE)
    }) && dev.segments.iter().all(|s| {
        s.address < MAX_PLAUSIBLE
            && s.total_size < MAX_PLAUSIBLE
            && s.blocks.iter().all(|b| b.size < MAX_PLAUSIBLE)
    })
}

/// Error when a log cannot be replayed as requests.
#[derive(Debug, thiserror::Error)]
pub enum WhatIfError {
    #[error("device {0}: sizes or addresses beyond 4 PiB: the capture is damaged, the allocator model does not run on it")]
    Implausible(u32),
    #[error("device {0}: the snapshot holds no allocation history (record it with torch.cuda.memory._record_memory_history before the work): there are no requests to replay, so no prediction can be made")]
    NoHistory(u32),
    #[error("the snapshot holds no device with an allocation history (record it with torch.cuda.memory._record_memory_history before the work): there are no requests to replay, so no prediction can be made")]
    NoDevices,
}

/// Answers "what if these settings (and this cap) had been used?" for every device.
pub fn what_if(
    snap: &Snapshot,
    conf: &AllocConf,
    cap: Option<CapInfo>,
    gpu_total: Option<u64>,
) -> Result<Vec<WhatIf>, WhatIfError> {
    let mut out = Vec::new();
    for dev in &snap.devices {
        if !dev.events.iter().any(|e| e.action == Action::Alloc) {
            return Err(WhatIfError::NoHistory(dev.index));
        }
        if !plausible(dev) {
            return Err(WhatIfError::Implausible(dev.index));
        }
        let tl = replay::replay(dev, &snap.settings);
        // Under a garbage-collection threshold the allocator frees cache before cudaMalloc
        // fails (at a fraction of the cap): its frees then bound the threshold, not the cap.
        let gc = snap
            .settings
            .garbage_collection_threshold
            .is_some_and(|t| t > 0.0);
        let retries = (!gc)
            .then(|| retry_cap_range(dev, tl.initial.counters.reserved))
            .flatten();
        let recorded_total = snap.device_total(dev.index);
        let cap = cap.clone().unwrap_or_else(|| {
            let c = derive_cap_with_retries(&tl, retries);
            match recorded_total {
                // Nothing in the log bounds it: the device's size, where the capture has it.
                Some(t) if c.bytes.is_none() => CapInfo {
                    bytes: Some(t),
                    source: CapSource::DeviceTotal,
                    range: None,
                },
                _ => c,
            }
        });
        let gpu_total = gpu_total.or(recorded_total);
        let base = config(&snap.settings, cap.bytes, gpu_total);
        let asked = config(&conf.apply(&snap.settings), cap.bytes, gpu_total);
        let model_rec = simulate(snap, dev, base, &tl.initial);
        let predicted = simulate(snap, dev, asked, &tl.initial);
        let served_from_cap = match cap.range {
            Some((low, high)) if !predicted.ooms.is_empty() => least_serving_cap(low, high, |c| {
                simulate(
                    snap,
                    dev,
                    config(&conf.apply(&snap.settings), Some(c), gpu_total),
                    &tl.initial,
                )
            }),
            _ => None,
        };
        let notes = notes(&tl, conf, &cap, &model_rec);
        out.push(WhatIf {
            device: dev.index,
            cap,
            recorded: recorded(snap, dev, &tl),
            model_recorded_settings: model_rec,
            predicted_peak_reserved: error::Bounded::of(
                error::FigureKind::WhatIfPeakReserved,
                predicted.stats.peak_reserved.min(i64::MAX as u64) as i64,
            ),
            predicted,
            notes,
            served_from_cap,
        });
    }
    if out.is_empty() {
        return Err(WhatIfError::NoDevices);
    }
    Ok(out)
}

/// What to say about how the prediction for one device was made.
fn notes(tl: &Timeline, conf: &AllocConf, cap: &CapInfo, model_rec: &RunResult) -> Vec<WhatIfNote> {
    let mut notes = Vec::new();
    if !tl.initial.segments.is_empty() {
        notes.push(WhatIfNote::MidRunStart {
            segments: tl.initial.segments.len(),
            reserved_bytes: tl.initial.counters.reserved,
            live_bytes: tl.initial.live_blocks().map(|b| b.size).sum(),
        });
    }
    if !conf.ignored.is_empty() {
        notes.push(WhatIfNote::NotModelled(conf.ignored.clone()));
    }
    if cap.bytes.is_none() {
        notes.push(WhatIfNote::NoCap);
    }
    if model_rec.placement.offset_rate() < 0.99 {
        notes.push(WhatIfNote::PoorPlacement {
            offset_rate: model_rec.placement.offset_rate(),
        });
    }
    notes.push(WhatIfNote::RecordedRequests);
    notes
}

/// The prediction that replaces a guess in the OOM diagnosis: would `expandable_segments:True`
/// have avoided the recorded OOM at `event`? `None` when the log cannot be replayed, or the
/// capture already ran with expandable segments.
pub fn expandable_assessment(
    snap: &Snapshot,
    dev: &Device,
    tl: &Timeline,
    event: u32,
) -> Option<ExpandableAssessment> {
    if snap.settings.expandable_segments == Some(true) || !plausible(dev) {
        return None;
    }
    let cap = derive_cap(tl);
    let mut s = snap.settings.clone();
    s.expandable_segments = Some(true);
    // A log that starts mid-run is replayed from the layout at its first event.
    let run = |c: Option<u64>| simulate(snap, dev, config(&s, c, None), &tl.initial);
    Some(ExpandableAssessment {
        outcome: expandable_outcome(event, &cap, run),
        from_mid_run: !tl.initial.segments.is_empty(),
    })
}

/// The allocator model's answer, for a recorded OOM, to "would `expandable_segments:True` (the
/// other recorded settings kept) have avoided it?".
#[derive(Clone, Debug, PartialEq)]
pub struct ExpandableAssessment {
    pub outcome: ExpandableOutcome,
    /// The log starts mid-run: it was replayed from the layout at its first event, the blocks
    /// live then kept where they were.
    pub from_mid_run: bool,
}

/// What the replay under expandable segments gave, against the recorded OOM.
#[derive(Clone, Debug, PartialEq)]
pub enum ExpandableOutcome {
    /// The recorded run only places the cap between `low` and `high`, and the answer changes
    /// within it: every request succeeds from a cap of `enough` (to 1 MiB), not below.
    DependsOnCap { low: u64, high: u64, enough: u64 },
    /// Every request succeeds, the failed one included.
    Avoided {
        cap: AssumedCap,
        peak_reserved_bytes: u64,
        /// Where the real run's peak lay for a prediction of this size, on every twin.
        peak_reserved: error::Bounded,
    },
    /// The same request fails again.
    FailsHere { cap: AssumedCap, oom: PredictedOom },
    /// The recorded OOM's request succeeds, a later one fails.
    FailsLater { cap: AssumedCap, oom: PredictedOom },
    /// An earlier request fails.
    FailsEarlier { cap: AssumedCap, oom: PredictedOom },
}

/// The cap an assessment's replay ran under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AssumedCap {
    /// Derived as a range (the replay used its lower end; the answer holds across it).
    Range { low: u64, high: u64 },
    /// One value.
    Exact(u64),
    /// None could be derived.
    None,
}

/// The least cap in `low..=high` (to 1 MiB) under which `run` serves every recorded request,
/// if `high` does.
fn least_serving_cap(low: u64, high: u64, run: impl Fn(u64) -> RunResult) -> Option<u64> {
    if !run(high).ooms.is_empty() {
        return None;
    }
    let (mut a, mut b) = (low, high);
    while b - a > 1 << 20 {
        let mid = a + (b - a) / 2;
        if run(mid).ooms.is_empty() {
            b = mid;
        } else {
            a = mid;
        }
    }
    Some(b)
}

/// The assessment of the OOM at `event`, `run` replaying the requests under a cap.
fn expandable_outcome(
    event: u32,
    cap: &CapInfo,
    run: impl Fn(Option<u64>) -> RunResult,
) -> ExpandableOutcome {
    let p = run(cap.bytes);
    if let (Some((low, high)), false) = (cap.range, p.ooms.is_empty()) {
        // The recorded run only bounds the cap: find the smallest cap in the range that avoids it.
        if let Some(enough) = least_serving_cap(low, high, |c| run(Some(c))) {
            return ExpandableOutcome::DependsOnCap { low, high, enough };
        }
    }
    let cap = match (cap.bytes, cap.range) {
        (Some(_), Some((low, high))) => AssumedCap::Range { low, high },
        (Some(c), None) => AssumedCap::Exact(c),
        (None, _) => AssumedCap::None,
    };
    match p.ooms.into_iter().next() {
        None => ExpandableOutcome::Avoided {
            cap,
            peak_reserved_bytes: p.stats.peak_reserved,
            peak_reserved: error::Bounded::of(
                error::FigureKind::WhatIfPeakReserved,
                p.stats.peak_reserved.min(i64::MAX as u64) as i64,
            ),
        },
        Some(oom) if oom.event == event => ExpandableOutcome::FailsHere { cap, oom },
        Some(oom) if oom.event > event => ExpandableOutcome::FailsLater { cap, oom },
        Some(oom) => ExpandableOutcome::FailsEarlier { cap, oom },
    }
}
