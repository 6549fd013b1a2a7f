//! A profiler trace with memscope's findings on it, for Perfetto's UI.
//!
//! The user already reads the trace in Perfetto: the export keeps every one of its events,
//! byte for byte, and adds memscope's own as one more process ("memscope findings"): the
//! allocated and reserved curve per device as counter tracks (the profiler's `[memory]`
//! instants are not drawn as a curve), the allocated peak as a global instant, each leak as a
//! slice over the steps whose allocations it keeps, each graph growth likewise, and the
//! verdict. The original text is copied, not re-serialised, so a 500 MB trace costs one pass
//! and nothing of it is lost; memscope's events go first in its `traceEvents` array.

use std::io::{self, Write};

use serde_json::{json, Value};

use crate::analysis::trace_memory::MemPoint;
use crate::analysis::TraceProduct;
use crate::report::{Options as RenderOptions, Render};

/// The process id of memscope's tracks: far above any pid a profiler records.
pub const PID: i64 = 2_000_000_000;

/// Counter points kept per device (each bucket keeps its first point and its extremes).
pub const BUCKETS: usize = 4000;

/// The trace's text and memscope's events to add to it.
pub struct Annotated<'a> {
    pub raw: &'a [u8],
    pub events: Vec<Value>,
    pub summary: Summary,
}

/// What was added, for the caller's message and the tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub counter_points: usize,
    pub slices: usize,
    pub instants: usize,
}

/// Indices of the points of a timeline kept in at most `buckets` buckets: each bucket's
/// first point and those of its lowest and highest allocated and reserved figures, so the
/// peak survives exactly.
fn downsample(tl: &[MemPoint], buckets: usize) -> Vec<usize> {
    let n = tl.len();
    if n <= buckets * 3 {
        return (0..n).collect();
    }
    let mut keep = Vec::new();
    for b in 0..buckets {
        let (lo, hi) = (b * n / buckets, ((b + 1) * n / buckets).min(n));
        if lo >= hi {
            continue;
        }
        let r = lo..hi;
        let key_a = |i: &usize| tl[*i].allocated_bytes;
        let key_r = |i: &usize| tl[*i].reserved_bytes.unwrap_or(0);
        let mut v = vec![
            lo,
            r.clone().min_by_key(key_a).unwrap_or(lo),
            r.clone().max_by_key(key_a).unwrap_or(lo),
            r.clone().min_by_key(key_r).unwrap_or(lo),
            r.clone().max_by_key(key_r).unwrap_or(lo),
        ];
        v.sort_unstable();
        v.dedup();
        keep.extend(v);
    }
    keep
}

/// memscope's events for a trace: counters, the peak, the leaks, the graph growth, the verdict.
pub fn events(p: &TraceProduct) -> (Vec<Value>, Summary) {
    let a = &p.analysis;
    let t = &p.trace;
    let mut ev = vec![
        json!({"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": "memscope findings"}}),
        json!({"ph": "M", "name": "process_sort_index", "pid": PID, "tid": 0, "args": {"sort_index": -1}}),
        json!({"ph": "M", "name": "thread_name", "pid": PID, "tid": 1, "args": {"name": "findings"}}),
    ];
    let mut sum = Summary::default();
    let start = t
        .memory
        .first()
        .map(|m| m.ts)
        .or(t.steps.first().map(|s| s.ts));
    let end = t.memory.last().map(|m| m.ts).unwrap_or(0.0);
    let end = t.steps.last().map_or(end, |s| s.end().max(end));
    if let Some(ts) = start {
        ev.push(json!({"ph": "i", "s": "p", "name": format!("memscope: {}", crate::wording::verdict(&a.verdict)),
            "pid": PID, "tid": 1, "ts": ts}));
        sum.instants += 1;
    }
    for d in p.memory.devices.iter().filter(|d| d.device.is_cuda()) {
        let name = format!("{} memory (memscope)", d.label);
        for i in downsample(&d.timeline, BUCKETS) {
            let pt = &d.timeline[i];
            let mut args = json!({"allocated": pt.allocated_bytes});
            if let Some(r) = pt.reserved_bytes {
                args["reserved"] = json!(r);
            }
            ev.push(
                json!({"ph": "C", "name": name, "pid": PID, "tid": 0, "ts": pt.ts, "args": args}),
            );
            sum.counter_points += 1;
        }
        if let Some(pk) = &d.peak {
            let site = pk
                .site
                .as_ref()
                .map(|s| format!("{}:{}", s.file, s.function));
            ev.push(json!({"ph": "i", "s": "g",
                "name": crate::wording::peak_annotation(pk.allocated_bytes, pk.top_op.as_deref(), site.as_deref()),
                "pid": PID, "tid": 1, "ts": pk.ts,
                "args": {"device": d.label, "allocated_bytes": pk.allocated_bytes, "reserved_bytes": pk.reserved_bytes,
                    "step": pk.step, "op": pk.op, "top_op": pk.top_op, "site": site}}));
            sum.instants += 1;
        }
    }
    for (k, l) in a.leaks.iter().enumerate() {
        let first = p
            .leak_series
            .get(k)
            .and_then(|s| s.iter().position(|&b| b > 0))
            .and_then(|i| t.steps.get(i))
            .map(|s| s.ts)
            .or(start)
            .unwrap_or(0.0);
        let site = crate::wording::trace_site(&l.leak.site, l.leak.line_known);
        ev.push(json!({"ph": "X", "cat": "memscope",
            "name": crate::wording::leak_annotation(l.leak.growth_bytes_per_step.max(0.0) as u64, &site),
            "pid": PID, "tid": 1, "ts": first, "dur": (end - first).max(0.0),
            "args": {"device": format!("cuda:{}", l.device), "why": crate::wording::leak_explanation(&l.leak),
                "fix": crate::wording::leak_fix(&l.leak), "live_bytes": l.leak.live_bytes,
                "per_step_bytes": p.leak_series.get(k)}}));
        sum.slices += 1;
    }
    if let Some(g) = &a.graph {
        let first = t.steps.first().map(|s| s.ts).or(start).unwrap_or(0.0);
        for f in &g.growth {
            ev.push(json!({"ph": "X", "cat": "memscope",
                "name": crate::wording::graph_annotation(f.nodes_per_step, &f.op),
                "pid": PID, "tid": 1, "ts": first, "dur": (end - first).max(0.0),
                "args": {"why": crate::wording::graph_explanation(f), "fix": crate::wording::graph_fix(f)}}));
            sum.slices += 1;
        }
    }
    (ev, sum)
}

/// Where memscope's events go in the trace's text: just after the `[` of its top-level
/// `traceEvents` array (or of the top-level array), and whether that array is empty. A scan of
/// the JSON's structure (strings and nesting), linear and without building anything.
pub fn insertion_point(raw: &[u8]) -> Option<(usize, bool)> {
    let first = raw.iter().position(|b| !b.is_ascii_whitespace())?;
    let after = |i: usize| {
        let j = raw[i..]
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .map(|k| i + k);
        (i, j.is_none_or(|j| raw[j] == b']'))
    };
    if raw[first] == b'[' {
        return Some(after(first + 1));
    }
    if raw[first] != b'{' {
        return None;
    }
    let (mut depth, mut i) = (0usize, first);
    let mut last_key: Option<(usize, usize)> = None;
    while i < raw.len() {
        match raw[i] {
            b'"' => {
                let s = i + 1;
                i += 1;
                while i < raw.len() && raw[i] != b'"' {
                    i += if raw[i] == b'\\' { 2 } else { 1 };
                }
                last_key = (depth == 1).then_some((s, i.min(raw.len())));
            }
            b':' => {
                let is_events =
                    last_key.is_some_and(|(s, e)| &raw[s..e] == b"traceEvents") && depth == 1;
                if is_events {
                    let j = raw[i + 1..].iter().position(|b| !b.is_ascii_whitespace())? + i + 1;
                    if raw[j] == b'[' {
                        return Some(after(j + 1));
                    }
                }
                last_key = None;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
}

/// Writes the trace with memscope's events first in its `traceEvents`.
pub struct Json;

impl Render<Annotated<'_>> for Json {
    fn render(&self, a: &Annotated<'_>, _o: &RenderOptions, out: &mut dyn Write) -> io::Result<()> {
        let ours: Vec<String> = a.events.iter().map(|v| v.to_string()).collect();
        match insertion_point(a.raw) {
            Some((at, empty)) => {
                out.write_all(&a.raw[..at])?;
                out.write_all(ours.join(",\n").as_bytes())?;
                if !empty && !ours.is_empty() {
                    out.write_all(b",\n")?;
                }
                out.write_all(&a.raw[at..])
            }
            None => {
                let doc = json!({"traceEvents": a.events, "displayTimeUnit": "ms"});
                serde_json::to_writer(&mut *out, &doc).map_err(io::Error::from)?;
                writeln!(out)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::insertion_point;

    #[test]
    fn finds_the_top_level_events_array_only() {
        let raw = br#"{"a": {"traceEvents": [1]}, "s": "x\"traceEvents\": [", "traceEvents" : [ {"x":1}]}"#;
        let (at, empty) = insertion_point(raw).unwrap();
        assert!(!empty);
        assert_eq!(&raw[at..at + 2], b" {");
        assert_eq!(insertion_point(b"[ ]"), Some((1, true)));
        assert_eq!(insertion_point(br#"{"traceEvents":[]}"#), Some((16, true)));
        assert_eq!(insertion_point(br#"{"other": 1}"#), None);
        assert_eq!(insertion_point(b"\"x\""), None);
    }
}
