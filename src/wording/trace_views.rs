//! The words of the pictures drawn from a profiler trace (`report`, `flamegraph`, `export` on a
//! trace), and of the commands that cannot take one (`whatif`, `plan`).

use crate::analysis::trace_report::TraceMoment;
use crate::units::bytes;

/// A commands that needs a snapshot's addresses and segments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotOnly {
    Whatif,
    Plan,
}

/// Why `whatif` / `plan` refuse a profiler trace, and the capture to take instead.
pub fn snapshot_needed(cmd: SnapshotOnly) -> String {
    let (name, what) = match cmd {
        SnapshotOnly::Whatif => (
            "whatif",
            "replays the caching allocator under other settings",
        ),
        SnapshotOnly::Plan => ("plan", "replays the caching allocator at other batch sizes"),
    };
    format!(
        "this is a profiler trace: `memscope {name}` {what}, which needs every block's address and the segments that hold it, and a trace records only each allocation's size and the running totals. \
Take a snapshot of the same run instead: `memscope run -o DIR -- python train.py` (it writes DIR/memscope-oom.pickle on an OOM, or with `--snapshot-on exit` DIR/memscope-exit.pickle), \
or in the script `torch.cuda.memory._record_memory_history(max_entries=100000)` before the steps and `torch.cuda.memory._dump_snapshot(\"run.pickle\")` after them"
    )
}

/// A moment of a trace in words: `the allocated peak (ProfilerStep#5)`, `the peak of
/// ProfilerStep#3`, `the end of the trace`. `step` is the step the moment fell in.
pub fn trace_moment(at: TraceMoment, step: Option<&str>) -> String {
    match (at, step) {
        (TraceMoment::Peak, Some(s)) => format!("the allocated peak (in {s})"),
        (TraceMoment::Peak, None) => "the allocated peak".into(),
        (TraceMoment::Step(_), Some(s)) => format!("the peak of {s}"),
        (TraceMoment::Step(n), None) => format!("the peak of step {n}"),
        (TraceMoment::End, _) => "the end of the trace".into(),
    }
}

/// The title of a trace's flamegraph.
pub fn trace_flame_title(device: &str, moment: &str, total: u64) -> String {
    format!("Live memory on {device} at {moment}: {}", bytes(total))
}

/// `--step N` names no profiled step.
pub fn no_such_step(n: u64, first: Option<u64>, last: Option<u64>) -> String {
    match (first, last) {
        (Some(a), Some(b)) => format!("--step {n}: the trace's profiled steps are {a} to {b}"),
        _ => format!("--step {n}: the trace has no ProfilerStep# ranges"),
    }
}

/// `--at` on a trace: only the peak and the end are moments of a trace's running totals.
pub fn trace_at_values(given: &str) -> String {
    format!("--at {given}: on a profiler trace, expected peak or end (or --step N for a step's peak); OOMs and event indices are a snapshot's")
}

/// The annotation memscope puts on a trace's allocated peak (Perfetto export).
pub fn peak_annotation(total: i64, op: Option<&str>, site: Option<&str>) -> String {
    let mut s = format!("memscope: allocated peak {}", bytes(total.max(0) as u64));
    if let Some(o) = op {
        s.push_str(&format!(" in {o}"));
    }
    if let Some(l) = site {
        s.push_str(&format!(" at {l}"));
    }
    s
}

/// The name of a leak's annotation slice (Perfetto export).
pub fn leak_annotation(per_step: u64, site: &str) -> String {
    format!("memscope: leak {} per step at {site}", bytes(per_step))
}

/// The name of a graph-growth annotation (Perfetto export).
pub fn graph_annotation(nodes_per_step: f64, op: &str) -> String {
    format!("memscope: {nodes_per_step} `{op}` node(s) per step never backpropagated")
}

/// A trace's site: `file:line (in function)` where the line is the statement's, else `function
/// (file; line not recorded)` (a trace records a frame's line as of its entry).
pub fn trace_site(s: &Option<crate::analysis::sites::Site>, line_known: bool) -> String {
    match s {
        None => "allocations with no recorded stack".into(),
        Some(s) if line_known => format!("{}:{} (in {})", s.file, s.line, s.function),
        Some(s) => format!("{} ({}; line not recorded)", s.function, s.file),
    }
}

/// `flamegraph` of a trace with no CUDA memory event: the note the SVG holds.
pub const NO_TRACE_MEMORY: &str = "the trace holds no CUDA memory events: no GPU memory to draw";

/// `flamegraph --step N` on a snapshot whose analysis found fewer than N steps (`found`).
pub fn no_snapshot_step(n: u64, found: usize) -> String {
    match found {
        0 => format!("--step {n}: the analysis found no steps in this snapshot's history (no annotations, no repeating loop, or no history recorded); pick the moment with --at"),
        k => format!("--step {n}: the snapshot's recorded history holds steps 1 to {k}"),
    }
}

/// The moment `flamegraph --step N` draws on a snapshot.
pub fn snapshot_step_moment(step: &str, event: u32) -> String {
    format!("the peak of {step} (event {event})")
}

/// `flamegraph --device N` names a device the trace has no memory events of.
pub fn no_trace_device(n: u32) -> String {
    format!("the trace has no memory events of cuda:{n}")
}

/// `export` of a trace whose file ends before its events do.
pub fn export_cut(at: u64) -> String {
    format!("the trace ends at byte {at}, before its events do: the export is cut at the same place (Perfetto reads the events before it)")
}

/// The trace page draws the devices with the highest peaks only.
pub fn devices_left_out(n: usize, shown: usize) -> String {
    format!("{n} more CUDA device(s) with memory events are not drawn (the {shown} with the highest allocated peaks are); `memscope analyze` lists them all")
}
