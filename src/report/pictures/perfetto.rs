//! The snapshot's timeline as a Chrome/Perfetto trace, to sit beside a profiler trace.
//!
//! Perfetto's UI is where people already read `torch.profiler` traces; putting the allocator's
//! counters and the longest-lived large blocks on the same kind of timeline lets them line a
//! memory spike up with the kernel or module that caused it without learning a new viewer.
//! The export summarises rather than copies: a million-event log becomes a few thousand
//! counter points per track (each bucket keeps its first point and the extremes of every
//! counter, so the peak survives downsampling exactly), and only the blocks that matter most
//! (size times lifetime) become slices. Times are the log's own `time_us`, so they line up
//! with a profiler trace of the same run; 2.1-era logs have no times, and then the event index
//! stands in for microseconds and the metadata says so.

use std::collections::HashMap;
use std::io::{self, Write};

use serde_json::{json, Value};

use crate::analysis::replay::Timeline;
use crate::analysis::sites::Site;
use crate::model::{Action, Device, Snapshot};
use crate::report::{Options as RenderOptions, Render};
use crate::units;

/// What to keep.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Buckets per counter track; each keeps up to 7 points (first, min and max of each counter).
    pub buckets: usize,
    /// Block lifetimes exported as slices, largest size × lifetime first.
    pub top_blocks: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            buckets: 4000,
            top_blocks: 200,
        }
    }
}

/// What was written, for the caller's message and for tests.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    pub counter_points: usize,
    pub slices: usize,
    pub instants: usize,
    /// Devices whose times are event indices (no `time_us` in the log).
    pub index_time_devices: Vec<u32>,
    /// Devices with no allocation history: nothing of theirs is on the timeline.
    pub no_history_devices: Vec<u32>,
}

impl Summary {
    /// Why the trace is empty, when it is (no device, or none with a history): the caller warns.
    pub fn empty_because(&self) -> Option<&'static str> {
        if self.counter_points > 0 {
            None
        } else if self.no_history_devices.is_empty() {
            Some("the snapshot holds no device: the trace has no memory counters")
        } else {
            Some("the snapshot has no allocation history (recorded without torch.cuda.memory._record_memory_history): the trace has no memory counters, block slices or OOM markers, only its device tracks")
        }
    }
}

/// Per-event timestamps of one device: `time_us` where the log has it (kept monotonic, since
/// entries from different threads can be a microsecond out of order), else the event index.
fn timestamps(dev: &Device) -> (Vec<f64>, bool) {
    let has_time = dev.events.iter().any(|e| e.time_us().is_some());
    if !has_time {
        return ((0..dev.events.len()).map(|i| i as f64).collect(), false);
    }
    let mut last = dev.events.iter().find_map(|e| e.time_us()).unwrap_or(0) as f64;
    let ts = dev
        .events
        .iter()
        .map(|e| {
            if let Some(t) = e.time_us() {
                last = last.max(t as f64);
            }
            last
        })
        .collect();
    (ts, true)
}

/// Indices of the points to keep: per bucket, the first and the extremes of each counter.
pub fn downsample(tl: &Timeline, buckets: usize) -> Vec<usize> {
    let n = tl.len();
    if n == 0 {
        return Vec::new();
    }
    let buckets = buckets.max(1);
    let s = &tl.series;
    let mut keep = Vec::new();
    let mut start = 0;
    for b in 0..buckets {
        let end = ((b + 1) * n).div_ceil(buckets).min(n);
        if end <= start {
            continue;
        }
        let mut idx = vec![start, end - 1];
        for v in [&s.allocated, &s.active, &s.reserved] {
            let slice = &v[start..end];
            let (mut lo, mut hi) = (0, 0);
            for (i, &x) in slice.iter().enumerate() {
                if x < slice[lo] {
                    lo = i;
                }
                if x > slice[hi] {
                    hi = i;
                }
            }
            idx.push(start + lo);
            idx.push(start + hi);
        }
        idx.sort_unstable();
        idx.dedup();
        keep.extend(idx);
        start = end;
    }
    keep
}

struct Life {
    alloc: usize,
    end: usize,
    live_at_end: bool,
    size: u64,
}

/// Lifetimes of the blocks allocated in the log (alloc to `free_requested`, else
/// `free_completed`, else the end of the log).
fn lifetimes(dev: &Device) -> Vec<Life> {
    let mut open: HashMap<u64, usize> = HashMap::new();
    let mut out = Vec::new();
    for (i, e) in dev.events.iter().enumerate() {
        match e.action {
            Action::Alloc => {
                open.insert(e.addr, i);
            }
            Action::FreeRequested | Action::FreeCompleted => {
                if let Some(a) = open.remove(&e.addr) {
                    out.push(Life {
                        alloc: a,
                        end: i,
                        live_at_end: false,
                        size: dev.events[a].size,
                    });
                }
            }
            _ => {}
        }
    }
    let last = dev.events.len().saturating_sub(1);
    out.extend(open.into_values().map(|a| Life {
        alloc: a,
        end: last,
        live_at_end: true,
        size: dev.events[a].size,
    }));
    out
}

/// The trace as built: the Chrome-trace document, and what it holds (for the caller's message
/// and for tests).
#[derive(Clone, Debug)]
pub struct Trace {
    pub doc: Value,
    pub summary: Summary,
}

/// Builds the trace.
pub fn document(snap: &Snapshot, timelines: &[Timeline], source: &str, o: &Options) -> Trace {
    let mut ev: Vec<Value> = Vec::new();
    let mut sum = Summary::default();
    for tl in timelines {
        let Some(dev) = snap.device(tl.device) else {
            continue;
        };
        let pid = dev.index;
        let (ts, timed) = timestamps(dev);
        if !timed && !dev.events.is_empty() {
            sum.index_time_devices.push(pid);
        }
        if dev.events.is_empty() {
            sum.no_history_devices.push(pid);
        }
        ev.push(
            json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
            "args": {"name": format!("cuda:{pid} memory (memscope)")}}),
        );
        ev.push(
            json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": 0,
            "args": {"name": "allocator events"}}),
        );
        let track = format!("cuda:{pid}");
        let s = &tl.series;
        for i in downsample(tl, o.buckets) {
            ev.push(json!({"ph": "C", "name": track, "pid": pid, "tid": 0, "ts": ts[i],
                "args": {"allocated": s.allocated[i], "active": s.active[i], "reserved": s.reserved[i]}}));
            sum.counter_points += 1;
        }
        for oom in &tl.ooms {
            let i = oom.event.0 as usize;
            ev.push(json!({"ph": "i", "s": "p", "name": format!("OOM requesting {}", units::bytes(oom.rounded_bytes)),
                "pid": pid, "tid": 0, "ts": ts.get(i).copied().unwrap_or(0.0),
                "args": {"event": i, "requested_bytes": oom.requested_bytes, "rounded_bytes": oom.rounded_bytes,
                    "allocated": units::bytes(oom.counters.allocated), "reserved": units::bytes(oom.counters.reserved),
                    "largest_free_block": units::bytes(oom.largest_free_block_bytes),
                    "device_free": oom.device_free_bytes.map(units::bytes),
                    "site": Site::of_stack(&snap.stacks, oom.stack).map(|s| s.to_string())}}));
            sum.instants += 1;
        }
        if timed {
            for a in snap.annotations.iter().filter(|a| a.device == pid) {
                ev.push(json!({"ph": "i", "s": "t", "name": a.name, "pid": pid, "tid": 0, "ts": a.time_us as f64,
                    "args": {"phase": if a.start { "start" } else { "end" }}}));
                sum.instants += 1;
            }
        }
        // The blocks that shaped the curve: largest size × lifetime.
        let mut lives = lifetimes(dev);
        let dur = |l: &Life| (ts[l.end] - ts[l.alloc]).max(0.0);
        lives.sort_by(|a, b| {
            let sa = a.size as f64 * dur(a).max(1.0);
            let sb = b.size as f64 * dur(b).max(1.0);
            sb.total_cmp(&sa).then(a.alloc.cmp(&b.alloc))
        });
        lives.truncate(o.top_blocks);
        lives.sort_by_key(|l| (l.alloc, l.end));
        // Slices on one thread must nest: give overlapping lifetimes their own lanes.
        let mut lane_end: Vec<f64> = Vec::new();
        for l in &lives {
            let (t0, t1) = (ts[l.alloc], ts[l.alloc] + dur(l));
            let lane = match lane_end.iter().position(|&e| e <= t0) {
                Some(k) => k,
                None => {
                    lane_end.push(0.0);
                    ev.push(
                        json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": lane_end.len(),
                        "args": {"name": format!("largest blocks, lane {}", lane_end.len())}}),
                    );
                    lane_end.len() - 1
                }
            };
            lane_end[lane] = t1;
            let e = &dev.events[l.alloc];
            let site = Site::of_stack(&snap.stacks, e.stack);
            let label = site
                .as_ref()
                .map(|s| format!("{}:{} {}", s.short_file(), s.line, s.function))
                .unwrap_or_else(|| "(no stack)".into());
            let stack: Vec<String> = snap
                .stacks
                .frames(e.stack)
                .iter()
                .take(12)
                .map(|&f| snap.stacks.frame_label(snap.stacks.frame(f)))
                .collect();
            ev.push(json!({"ph": "X", "name": format!("{} {}", units::bytes(l.size), label),
                "cat": "block", "pid": pid, "tid": lane + 1, "ts": t0, "dur": t1 - t0,
                "args": {"size": units::bytes(l.size), "size_bytes": l.size, "address": format!("0x{:x}", e.addr),
                    "alloc_event": l.alloc, "free_event": (!l.live_at_end).then_some(l.end),
                    "live_at_end": l.live_at_end, "site": site.map(|s| s.to_string()), "stack": stack}}));
            sum.slices += 1;
        }
    }
    let time_base = if sum.index_time_devices.is_empty() {
        "time_us: microseconds since the epoch, as the snapshot recorded them".to_string()
    } else {
        format!(
            "event index: the log of device(s) {:?} has no time_us (a 2.1-era snapshot), so each event's index in the log is used as its time in microseconds",
            sum.index_time_devices
        )
    };
    let mut doc = json!({
        "traceEvents": ev,
        "displayTimeUnit": "ms",
        "metadata": {
            "producer": "memscope",
            "source": source,
            "time_base": time_base,
            "counters": "allocated/active/reserved bytes per device (torch.cuda.memory_stats names), downsampled keeping each bucket's extremes",
            "slices": format!("up to {} blocks with the largest size x lifetime, from alloc to free_requested", o.top_blocks),
        }
    });
    // An empty trace says why in itself too, for whoever opens it without the warning.
    if let Some(why) = sum.empty_because() {
        doc["metadata"]["warning"] = json!(why);
    }
    Trace { doc, summary: sum }
}

/// The trace as Chrome-trace JSON on one line (what Perfetto and `chrome://tracing` open).
pub struct Json;

impl Render<Trace> for Json {
    fn render(&self, t: &Trace, _opts: &RenderOptions, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer(&mut *out, &t.doc).map_err(io::Error::from)?;
        writeln!(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{EventData, Layout, StackId, Stacks};

    fn ev(action: Action, addr: u64, size: u64) -> EventData {
        EventData {
            action,
            addr,
            size,
            stream: 0,
            time_us: None,
            stack: StackId::EMPTY,
            device_free: None,
            meta: crate::model::MetaId::NONE,
        }
    }

    #[test]
    fn untimed_logs_use_the_event_index_and_say_so() {
        let events = vec![
            ev(Action::SegmentAlloc, 0x1000, 2 << 20),
            ev(Action::Alloc, 0x1000, 4096),
            ev(Action::Alloc, 0x2000, 512),
            ev(Action::FreeRequested, 0x1000, 4096),
            ev(Action::FreeCompleted, 0x1000, 4096),
        ];
        let snap = Snapshot::of_devices(
            Layout::Torch21,
            vec![Device::of_events(events)],
            Stacks::new(),
        );
        let tls: Vec<Timeline> = snap
            .devices
            .iter()
            .map(|d| crate::analysis::replay::replay(d, &snap.settings))
            .collect();
        let Trace { doc, summary: sum } = document(&snap, &tls, "t", &Options::default());
        assert_eq!(sum.index_time_devices, vec![0]);
        assert!(doc["metadata"]["time_base"]
            .as_str()
            .unwrap()
            .starts_with("event index"));
        let evs = doc["traceEvents"].as_array().unwrap();
        let x: Vec<&Value> = evs.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(x.len(), 2);
        // The 4 KiB block lives from event 1 to its free_requested at event 3.
        let big = x.iter().find(|e| e["args"]["size_bytes"] == 4096).unwrap();
        assert_eq!(
            (big["ts"].as_f64(), big["dur"].as_f64()),
            (Some(1.0), Some(2.0))
        );
        let peak = evs
            .iter()
            .filter(|e| e["ph"] == "C")
            .filter_map(|e| e["args"]["allocated"].as_u64())
            .max();
        assert_eq!(peak, Some(tls[0].peaks.allocated.bytes));
    }

    #[test]
    fn a_snapshot_without_history_exports_an_empty_trace_that_says_why() {
        let snap =
            |devices: Vec<Device>| Snapshot::of_devices(Layout::Torch21, devices, Stacks::new());
        let bare = snap(vec![Device {
            index: 0,
            segments: Vec::new(),
            events: Default::default(),
        }]);
        let tls: Vec<Timeline> = bare
            .devices
            .iter()
            .map(|d| crate::analysis::replay::replay(d, &bare.settings))
            .collect();
        let Trace { doc, summary: sum } = document(&bare, &tls, "t", &Options::default());
        assert_eq!(sum.counter_points, 0);
        assert_eq!(sum.no_history_devices, vec![0]);
        let why = sum.empty_because().unwrap();
        assert!(why.contains("no allocation history"), "{why}");
        assert_eq!(doc["metadata"]["warning"], why);
        let none = snap(Vec::new());
        let Trace { doc, summary: sum } = document(&none, &[], "t", &Options::default());
        assert!(sum.empty_because().unwrap().contains("no device"));
        assert!(doc["metadata"]["warning"].is_string());
    }
}
