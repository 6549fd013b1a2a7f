//! A profiler trace in the TUI: what is computed once at load, and the per-step drill-down.
//!
//! A trace has no allocator state to rebuild (the profiler logged the allocator's running
//! totals with every event), but it has what a snapshot lacks: steps, the ops that ran in each,
//! and the autograd graph. So the trace views are the memory curve (from the logged totals),
//! the steps with their memory, the ops and allocations inside a step, graph growth and leaks.
//! Everything a keypress needs is either built here once or, for the ops of one step, built on
//! demand from the step's slice of the (time-sorted) memory events: never a pass over the
//! whole trace.

use std::ops::Deref;
use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap as HashMap;

use super::data::{Finding, Jump, Marker, MarkerKind};
use crate::analysis::trace_memory::TraceMemory;
use crate::analysis::TraceProduct;
use crate::model::trace::{CountedFrom, DeviceKey, OpIdx, Site, Trace};
use crate::units::{bytes, signed_bytes};

/// One device's `[memory]` events, as the timeline plots them.
pub struct TraceDev {
    pub key: DeviceKey,
    pub label: String,
    /// Indices into `Trace::memory`, in time order.
    pub events: Vec<u32>,
    /// Allocator totals after each event (the logged ones; a running sum where missing). Where
    /// the totals count from the trace's start, each change minus `from_start` (the least the
    /// bytes in use can be: a curve that never dips below its axis).
    pub allocated: Vec<u64>,
    /// `None` where no event records a reserved total (torch 1.9-era traces): never made up.
    pub reserved: Option<Vec<u64>>,
    /// Where the totals count from the trace's start ([`CountedFrom::TraceStart`]): the lowest
    /// change, 0 or below, which `allocated` is measured from. Figures are then shown as
    /// changes from the start, never as bytes in use.
    pub from_start: Option<i64>,
    /// Each event's time in seconds from the trace's first memory event.
    pub times: Vec<f64>,
    /// Index into `TraceMemory::devices`.
    pub mem: usize,
    pub markers: Vec<Marker>,
    /// Per step of `Trace::steps`: the range of `events` inside it.
    pub step_events: Vec<(usize, usize)>,
}

/// A loaded trace: the analysis product (the trace, its report, its memory timeline, pairing,
/// resolver and leak series, which `TraceData` dereferences to), and what the TUI adds to it
/// once.
pub struct TraceData {
    pub path: PathBuf,
    pub product: TraceProduct,
    /// For each memory event that frees a block allocated in the trace, that allocation.
    pub alloc_of: Vec<Option<u32>>,
    /// CUDA devices first, then the others (CPU memory events, if profiled).
    pub devs: Vec<TraceDev>,
    pub findings: Vec<Finding>,
    /// Per `analysis.leaks` entry: its device's index in `devs` (its per-step bytes are the
    /// product's `leak_series`).
    pub leak_devs: Vec<usize>,
    /// The user lines of frames already running when profiling began (the training loop): their
    /// recorded line is where they were then (typically `prof.step()`), not the line of an op.
    /// Sorted, for `binary_search`.
    pub preexisting_sites: Vec<Site>,
}

impl Deref for TraceData {
    type Target = TraceProduct;
    fn deref(&self) -> &TraceProduct {
        &self.product
    }
}

/// How the ops of a step are ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpSort {
    Time,
    Allocated,
    LiveAtEnd,
}

impl OpSort {
    pub fn next(self) -> OpSort {
        match self {
            OpSort::Allocated => OpSort::LiveAtEnd,
            OpSort::LiveAtEnd => OpSort::Time,
            OpSort::Time => OpSort::Allocated,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            OpSort::Time => "time",
            OpSort::Allocated => "bytes allocated",
            OpSort::LiveAtEnd => "bytes alive at the end",
        }
    }
}

/// A top-level op of a step and the memory work done under it on one device.
#[derive(Clone, Debug, PartialEq)]
pub struct OpRow {
    /// `None`: memory events outside any op.
    pub op: Option<OpIdx>,
    pub name: String,
    pub ts: f64,
    pub dur: f64,
    pub backward: bool,
    pub allocs: u32,
    pub frees: u32,
    pub alloc_bytes: u64,
    pub freed_bytes: u64,
    /// Allocated under this op and never freed in the trace.
    pub live_at_end_bytes: u64,
    /// Highest allocated total reached during the op.
    pub peak_allocated: u64,
    /// Positions in the device's `events`.
    pub events: Vec<usize>,
    /// The user's line the op's memory comes from (for backward ops: its forward's).
    pub site: Option<Site>,
}

impl OpRow {
    /// A row with no memory work counted yet.
    fn new(
        op: Option<OpIdx>,
        name: String,
        ts: f64,
        dur: f64,
        backward: bool,
        site: Option<Site>,
    ) -> OpRow {
        OpRow {
            op,
            name,
            ts,
            dur,
            backward,
            allocs: 0,
            frees: 0,
            alloc_bytes: 0,
            freed_bytes: 0,
            live_at_end_bytes: 0,
            peak_allocated: 0,
            events: Vec::new(),
            site,
        }
    }
}

/// The ops of one step on one device, with the counts of what is not listed.
#[derive(Clone, Debug, PartialEq)]
pub struct StepOps {
    pub dev: usize,
    pub step: usize,
    pub sort: OpSort,
    pub rows: Vec<OpRow>,
    /// How many of `rows` did memory work on this device.
    pub with_memory: usize,
}

impl TraceData {
    /// The views of an analysed trace.
    pub fn from_product(path: &Path, product: TraceProduct) -> TraceData {
        let trace = &product.trace;
        let mut alloc_of = vec![None; trace.memory.len()];
        for (a, f) in product.pairing.freed_by.iter().enumerate() {
            if let Some(f) = f {
                alloc_of[*f as usize] = Some(a as u32);
            }
        }
        let mut keys = trace.memory_devices();
        keys.sort_by_key(|k| (!k.is_cuda(), *k));
        let devs: Vec<TraceDev> = keys
            .iter()
            .map(|&k| device(trace, &product.memory, k))
            .collect();
        let mut preexisting_sites: Vec<Site> = trace
            .python
            .iter()
            .filter(|p| p.preexisting)
            .map(|p| trace.site(trace.stacks.frame(p.frame)))
            .collect();
        preexisting_sites.sort();
        preexisting_sites.dedup();
        let mut data = TraceData {
            path: path.to_path_buf(),
            product,
            alloc_of,
            devs,
            findings: Vec::new(),
            leak_devs: Vec::new(),
            preexisting_sites,
        };
        data.leak_devs = data
            .analysis
            .leaks
            .iter()
            .map(|l| data.dev_of_cuda(l.device).unwrap_or(0))
            .collect();
        data.findings = findings(&data);
        data
    }

    /// The first and the last step's names, for a chart's axis across the steps.
    pub fn step_names(&self) -> (&str, &str) {
        let s = &self.trace.steps;
        (
            s.first().map(|x| x.name.as_str()).unwrap_or(""),
            s.last().map(|x| x.name.as_str()).unwrap_or(""),
        )
    }

    /// Whether `site` is the line of a frame that was already running when profiling began.
    pub fn line_as_recorded(&self, site: Option<&Site>) -> bool {
        site.is_some_and(|s| self.preexisting_sites.binary_search(s).is_ok())
    }

    /// The position in `devs` of a CUDA device of the report (`cuda:N`).
    pub fn dev_of_cuda(&self, index: u32) -> Option<usize> {
        self.devs
            .iter()
            .position(|d| d.key.is_cuda() && d.key.device_id == index as i64)
    }

    /// The memory event at position `i` of device `dev`.
    pub fn event(&self, dev: usize, i: usize) -> Option<&crate::model::trace::MemEvent> {
        let d = self.devs.get(dev)?;
        d.events.get(i).map(|&k| &self.trace.memory[k as usize])
    }

    /// Microseconds of a device's event since the trace's first memory event.
    pub fn rel_time_us(&self, dev: usize, i: usize) -> Option<f64> {
        let t0 = self.trace.memory.first()?.ts;
        self.event(dev, i).map(|m| m.ts - t0)
    }

    /// The step a device's event falls in.
    pub fn step_of_event(&self, dev: usize, i: usize) -> Option<usize> {
        let m = self.event(dev, i)?;
        self.trace.step_at(m.ts).map(|s| s.0 as usize)
    }

    /// The user's line behind a memory event (for backward work, the forward op's line).
    pub fn event_site(&self, dev: usize, i: usize) -> Option<Site> {
        let m = self.event(dev, i)?;
        self.trace.user_site(self.resolver.stack_of(&self.trace, m))
    }

    /// The innermost op running at a memory event, and the outermost one around it.
    pub fn event_ops(&self, dev: usize, i: usize) -> (Option<&str>, Option<&str>) {
        let Some(m) = self.event(dev, i) else {
            return (None, None);
        };
        match m.op {
            Some(o) => (
                Some(self.trace.op_name(o)),
                Some(self.trace.op_name(self.trace.top_op(o))),
            ),
            None => (None, None),
        }
    }

    /// Where the block allocated at event `i` of `dev` is freed: its position, or `None` when it
    /// is still alive at the end of the trace (or `i` is not an allocation).
    pub fn freed_at(&self, dev: usize, i: usize) -> Option<usize> {
        let d = self.devs.get(dev)?;
        let k = *d.events.get(i)? as usize;
        let f = self.pairing.freed_by.get(k).copied().flatten()?;
        d.events.binary_search(&f).ok()
    }

    /// Where the block freed at event `i` of `dev` was allocated, if in the trace.
    pub fn allocated_at(&self, dev: usize, i: usize) -> Option<usize> {
        let d = self.devs.get(dev)?;
        let k = *d.events.get(i)? as usize;
        let a = self.alloc_of.get(k).copied().flatten()?;
        d.events.binary_search(&a).ok()
    }

    /// The ops of step `step` on device `dev`, sorted.
    pub fn step_ops(&self, dev: usize, step: usize, sort: OpSort) -> StepOps {
        let t = &self.trace;
        let mut out = StepOps {
            dev,
            step,
            sort,
            rows: Vec::new(),
            with_memory: 0,
        };
        let (Some(d), Some(s)) = (self.devs.get(dev), t.steps.get(step)) else {
            return out;
        };
        let (lo, hi) = d.step_events.get(step).copied().unwrap_or((0, 0));
        let mut by_op: HashMap<Option<OpIdx>, usize> = HashMap::default();
        for pos in lo..hi {
            let k = d.events[pos] as usize;
            let m = &t.memory[k];
            let top = m.op.map(|o| t.top_op(o));
            let row = *by_op.entry(top).or_insert_with(|| {
                let (name, ts, dur, backward) = match top {
                    Some(o) => {
                        let op = t.op(o);
                        let name = t.op_name(o).to_owned();
                        let bw = op.is_backward();
                        (name, op.ts, op.dur, bw)
                    }
                    None => ("(outside any op)".to_owned(), m.ts, 0.0, false),
                };
                let site = t.user_site(self.resolver.stack_of(t, m));
                out.rows
                    .push(OpRow::new(top, name, ts, dur, backward, site));
                out.rows.len() - 1
            });
            let r = &mut out.rows[row];
            r.events.push(pos);
            r.peak_allocated = r.peak_allocated.max(d.allocated[pos]);
            if m.bytes > 0 {
                r.allocs += 1;
                r.alloc_bytes += m.bytes as u64;
                if self.pairing.live_at_end(t, k) {
                    r.live_at_end_bytes += m.bytes as u64;
                }
            } else if m.bytes < 0 {
                r.frees += 1;
                r.freed_bytes += m.bytes.unsigned_abs();
            }
            if r.site.is_none() {
                r.site = t.user_site(self.resolver.stack_of(t, m));
            }
        }
        out.with_memory = out.rows.len();
        // The step's other top-level ops (on any thread): they did no memory work here, but an
        // in-place op that allocates nothing can still be the one that keeps a graph alive.
        let first = t.ops.partition_point(|o| o.ts < s.ts);
        for (j, o) in t.ops[first..]
            .iter()
            .enumerate()
            .take_while(|(_, o)| o.ts <= s.end())
        {
            let idx = OpIdx((first + j) as u32);
            if o.parent.is_some() || by_op.contains_key(&Some(idx)) {
                continue;
            }
            let name = t.op_name(idx).to_owned();
            let backward = o.is_backward();
            out.rows.push(OpRow::new(
                Some(idx),
                name,
                o.ts,
                o.dur,
                backward,
                t.user_site(o.stack),
            ));
        }
        sort_rows(&mut out.rows, sort);
        out
    }
}

pub fn sort_rows(rows: &mut [OpRow], sort: OpSort) {
    match sort {
        OpSort::Time => rows.sort_by(|a, b| a.ts.total_cmp(&b.ts)),
        OpSort::Allocated => rows.sort_by(|a, b| {
            b.alloc_bytes
                .cmp(&a.alloc_bytes)
                .then(a.ts.total_cmp(&b.ts))
        }),
        OpSort::LiveAtEnd => rows.sort_by(|a, b| {
            b.live_at_end_bytes
                .cmp(&a.live_at_end_bytes)
                .then(b.alloc_bytes.cmp(&a.alloc_bytes))
                .then(a.ts.total_cmp(&b.ts))
        }),
    }
}

impl TraceDev {
    /// A total of this device's own count (a [`StepMemory`](crate::analysis::trace_memory::StepMemory)
    /// figure) in words: bytes in use, or the signed change from the trace's start.
    pub fn total_words(&self, v: i64) -> String {
        match self.from_start {
            Some(_) => signed_bytes(v),
            None => bytes(v.max(0) as u64),
        }
    }

    /// A point of `allocated` in words (see [`TraceDev::total_words`]).
    pub fn curve_words(&self, v: u64) -> String {
        match self.from_start {
            Some(lo) => signed_bytes((v as i64).saturating_add(lo)),
            None => bytes(v),
        }
    }

    /// The reserved total after event `i`, in words.
    pub fn reserved_words(&self, i: usize) -> String {
        self.reserved
            .as_ref()
            .and_then(|r| r.get(i))
            .map_or_else(|| "unknown".into(), |&v| bytes(v))
    }
}

/// The totals after each of `events`: allocated (measured from `from_start` where the totals
/// count from the trace's start), and reserved where any event records it (carried over the
/// events that do not).
fn totals(t: &Trace, events: &[u32], from_start: Option<i64>) -> (Vec<u64>, Option<Vec<u64>>) {
    let mut allocated = Vec::with_capacity(events.len());
    let mut reserved = Vec::with_capacity(events.len());
    let (mut a, mut r) = (0i64, None::<i64>);
    for &i in events {
        let m = &t.memory[i as usize];
        a = m.total_allocated.unwrap_or(a + m.bytes);
        r = m.total_reserved.or(r);
        allocated.push(a.saturating_sub(from_start.unwrap_or(0)).max(0) as u64);
        reserved.push(r.unwrap_or(0).max(0) as u64);
    }
    let recorded = events
        .iter()
        .any(|&i| t.memory[i as usize].total_reserved.is_some());
    (allocated, recorded.then_some(reserved))
}

fn device(t: &Trace, mem: &TraceMemory, key: DeviceKey) -> TraceDev {
    let events: Vec<u32> = t
        .memory
        .iter()
        .enumerate()
        .filter(|(_, m)| m.device == key)
        .map(|(i, _)| i as u32)
        .collect();
    let mem_index = mem
        .devices
        .iter()
        .position(|d| d.device == key)
        .unwrap_or(0);
    let from_start = mem
        .devices
        .get(mem_index)
        .filter(|d| d.counted_from == CountedFrom::TraceStart)
        .map(|d| d.lowest_allocated_bytes.unwrap_or(0).min(0));
    let (allocated, reserved) = totals(t, &events, from_start);
    let step_events: Vec<(usize, usize)> = t
        .steps
        .iter()
        .map(|s| {
            let lo = events.partition_point(|&i| t.memory[i as usize].ts < s.ts);
            let hi = events.partition_point(|&i| t.memory[i as usize].ts <= s.end());
            (lo, hi.max(lo))
        })
        .collect();
    let mut markers = Vec::new();
    // The peak: the first event reaching the highest total.
    if let Some((pos, v)) =
        allocated
            .iter()
            .enumerate()
            .fold(None, |best: Option<(usize, u64)>, (i, &v)| match best {
                Some((_, b)) if b >= v => best,
                _ => Some((i, v)),
            })
    {
        let v = match from_start {
            Some(lo) => format!("{} from the trace's start", signed_bytes(v as i64 + lo)),
            None => bytes(v),
        };
        markers.push(Marker {
            event: pos,
            kind: MarkerKind::Peak,
            label: format!("peak {v} allocated"),
        });
    }
    for (s, &(lo, hi)) in t.steps.iter().zip(&step_events) {
        if lo < hi {
            markers.push(Marker {
                event: lo,
                kind: MarkerKind::Step,
                label: s.name.clone(),
            });
        }
    }
    markers.sort_by_key(|m| (m.event, m.kind != MarkerKind::Peak));
    let t0 = t.memory.first().map(|m| m.ts).unwrap_or(0.0);
    let times = events
        .iter()
        .map(|&i| (t.memory[i as usize].ts - t0) / 1e6)
        .collect();
    TraceDev {
        key,
        label: key.label(),
        times,
        events,
        allocated,
        reserved,
        from_start,
        mem: mem_index,
        markers,
        step_events,
    }
}

/// A user frame as `file.py:12 function` (nothing where there is none).
pub fn site_text(s: &Option<Site>) -> String {
    crate::wording::short_site(s)
}

fn findings(d: &TraceData) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(g) = &d.analysis.graph {
        for (i, f) in g.growth.iter().enumerate() {
            out.push(Finding {
                label: format!(
                    "graph growth: `{}` +{} never-backpropagated node(s)/step over {} steps, from {}{}",
                    f.op,
                    f.nodes_per_step,
                    f.steps,
                    crate::wording::short_site_label(&f.site),
                    if f.line_known { "" } else { " (line as recorded)" }
                ),
                jump: Jump::Graph(i),
            });
        }
    }
    for (i, l) in d.analysis.leaks.iter().enumerate() {
        out.push(Finding {
            label: super::data::leak_label(l),
            jump: Jump::Leak(i),
        });
    }
    for (di, dev) in d.devs.iter().enumerate().filter(|(_, x)| x.key.is_cuda()) {
        let Some(dm) = d.memory.devices.get(dev.mem) else {
            continue;
        };
        if let Some(p) = &dm.peak {
            let pos = dev
                .markers
                .iter()
                .find(|m| m.kind == MarkerKind::Peak)
                .map(|m| m.event);
            let step = p
                .step
                .map(|s| format!(" in ProfilerStep#{s}"))
                .unwrap_or_default();
            let op = match (&p.op, &p.top_op) {
                (Some(o), Some(t)) if o != t => format!(" during {o} (under {t})"),
                (Some(o), _) => format!(" during {o}"),
                _ => String::new(),
            };
            let site = p
                .site
                .as_ref()
                .map(|s| format!(" from {}:{}", super::sites::short(&s.file), s.line))
                .unwrap_or_default();
            let amount = match dev.from_start {
                Some(_) => format!(
                    "allocated {} above the trace's start",
                    signed_bytes(p.allocated_bytes)
                ),
                None => format!("{} allocated", bytes(p.allocated_bytes.max(0) as u64)),
            };
            out.push(Finding {
                label: format!("peak on {}: {amount}{step}{op}{site}", dev.label),
                jump: pos
                    .map(|e| Jump::Event { dev: di, event: e })
                    .unwrap_or(Jump::None),
            });
        }
        let ends: Vec<i64> = dm
            .steps
            .iter()
            .filter_map(|s| s.end_allocated_bytes)
            .collect();
        if let (Some(&first), Some(&last)) = (ends.first(), ends.last()) {
            let from = if dev.from_start.is_some() {
                " (changes from the trace's start)"
            } else {
                ""
            };
            out.push(Finding {
                label: format!(
                    "{} steps on {}: allocated at step end{from} {} → {} ({})",
                    ends.len(),
                    dev.label,
                    dev.total_words(first),
                    dev.total_words(last),
                    signed_bytes(last.saturating_sub(first))
                ),
                jump: Jump::Steps { dev: di },
            });
        }
    }
    out
}
