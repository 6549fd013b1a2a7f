//! Memory over time from a profiler trace's `[memory]` events, and the allocations that outlive
//! the step that made them.
//!
//! A trace records every allocation and free with the allocator's running totals, but it starts
//! late (memory in use before profiling shows only as frees with no allocation) and it ends
//! early (the last step's outputs are legitimately still alive). So totals are taken from the
//! events themselves, not summed, and a leak is only called when allocations from many earlier
//! steps are still alive at the end, steadily, not just the last step's.

use rustc_hash::FxHashMap as HashMap;

use super::notes::TraceNote;
use crate::model::trace::{CountedFrom, DeviceKey, MemEvent, OpIdx, Site, Trace, NO_ADDR};
use crate::model::{FrameId, FrameKind, StackId, Sym};

/// A point of the memory timeline (after the event at `ts`).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct MemPoint {
    pub ts: f64,
    pub allocated_bytes: i64,
    /// `None` where the event does not say (torch 1.9-era traces record no reserved total).
    pub reserved_bytes: Option<i64>,
}

/// Where the allocated peak was reached.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Peak {
    pub ts: f64,
    pub allocated_bytes: i64,
    pub reserved_bytes: Option<i64>,
    /// `ProfilerStep#N` number, when the peak fell inside a step.
    pub step: Option<u64>,
    /// Innermost op running when the peak allocation was made.
    pub op: Option<String>,
    /// Outermost op enclosing it (`autograd::engine::evaluate_function: ...`, `aten::linear`).
    pub top_op: Option<String>,
    /// The user's frame around the allocation; for allocations made by the backward pass, the
    /// frame around the forward op whose backward it was.
    pub site: Option<Site>,
}

/// Memory figures of one profiler step on one device.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct StepMemory {
    pub number: u64,
    pub start_allocated_bytes: Option<i64>,
    pub peak_allocated_bytes: Option<i64>,
    pub end_allocated_bytes: Option<i64>,
    pub peak_reserved_bytes: Option<i64>,
    /// Sum of the step's allocations and frees.
    pub allocated_bytes: u64,
    pub freed_bytes: u64,
    /// Allocations made in this step and still alive when the trace ends.
    pub live_at_end_bytes: u64,
    pub live_at_end_count: u32,
}

/// Allocations from one site that stay alive, step after step.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LiveGrowth {
    pub site: Option<Site>,
    /// The innermost user frame of their stacks that was already running when profiling began:
    /// the function whose loop runs the profiled steps, and so keeps what survives them. Its
    /// line is the one current when profiling began, not the line that keeps the memory.
    pub keeper: Option<Site>,
    /// What keeps them, where their stack shows a mechanism (a hook, a callback, a closure):
    /// read from the group's first allocation, for the largest groups only.
    pub kept_by: Option<crate::analysis::leaks::KeptBy>,
    /// Bytes of these survivors made by ops that recorded an autograd node (grad mode on) that
    /// no backward in the trace consumed: survivors that hold a graph.
    pub graph_bytes: u64,
    /// Innermost op of the allocations (the first one seen).
    pub op: Option<String>,
    /// Per profiled step: bytes allocated in that step at this site and alive at the end.
    pub per_step_bytes: Vec<u64>,
    pub per_step_count: Vec<u32>,
    /// The group's first allocation (an index into `Trace::memory`).
    #[serde(skip)]
    pub first_event: usize,
    pub steps_with_live: usize,
    pub bytes_per_step: f64,
    pub total_bytes: u64,
}

/// Memory of one device over the trace.
///
/// Every allocated figure here (start, end, peak, steps, timeline) is in the device's
/// [`CountedFrom`]: bytes in use, or, for a torch 1.9-era trace, a change from the trace's start.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct DeviceMemory {
    pub device: DeviceKey,
    pub label: String,
    /// What the allocated figures count from.
    pub counted_from: CountedFrom,
    pub events: usize,
    pub allocations: usize,
    pub frees: usize,
    /// Frees of blocks allocated before the trace began.
    pub frees_of_earlier_blocks: usize,
    /// Allocated before the first event (what was in use when profiling began).
    pub start_allocated_bytes: Option<i64>,
    pub end_allocated_bytes: Option<i64>,
    /// The lowest allocated total, the start included: where the figures count from the
    /// trace's start, what was in use then is at least minus this (no total is below 0), so
    /// each figure minus this is a lower bound of the bytes in use.
    pub lowest_allocated_bytes: Option<i64>,
    pub peak: Option<Peak>,
    /// `None` where no event records a reserved total.
    pub peak_reserved_bytes: Option<i64>,
    /// Allocations made during the trace and never freed in it.
    pub live_at_end_bytes: u64,
    pub live_at_end_count: usize,
    pub timeline: Vec<MemPoint>,
    pub steps: Vec<StepMemory>,
    /// Sites whose allocations from many steps are still alive at the end: leaks.
    pub growth: Vec<LiveGrowth>,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct StepSpan {
    pub number: u64,
    pub name: String,
    pub ts: f64,
    pub dur: f64,
}

/// Memory analysis of a trace: one entry per device with `[memory]` events.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TraceMemory {
    pub steps: Vec<StepSpan>,
    pub devices: Vec<DeviceMemory>,
    #[serde(skip)]
    pub notes: Vec<TraceNote>,
}

/// Alloc/free pairing by address, per device.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pairing {
    /// For each memory event that is an allocation, the index of the free that releases it.
    pub freed_by: Vec<Option<u32>>,
    /// Frees with no allocation in the trace (the block predates it).
    pub unmatched_frees: Vec<u32>,
}

impl Pairing {
    /// An allocation that no free in the trace released.
    pub fn live_at_end(&self, t: &Trace, i: usize) -> bool {
        t.memory[i].bytes > 0 && self.freed_by[i].is_none()
    }
}

/// Pairs each free with the latest unfreed allocation at the same address on the same device.
pub fn pair(t: &Trace) -> Pairing {
    let mut open: HashMap<(DeviceKey, u64), Vec<u32>> = HashMap::default();
    let mut p = Pairing {
        freed_by: vec![None; t.memory.len()],
        unmatched_frees: Vec::new(),
    };
    for (i, m) in t.memory.iter().enumerate() {
        // Without an address (torch 1.9), a free is paired with the latest open allocation of
        // its size: the only link the trace keeps.
        let key = if m.addr == NO_ADDR {
            (m.device, NO_ADDR - m.bytes.unsigned_abs())
        } else {
            (m.device, m.addr)
        };
        if m.bytes > 0 {
            open.entry(key).or_default().push(i as u32);
        } else if m.bytes < 0 {
            match open.get_mut(&key).and_then(|v| v.pop()) {
                Some(a) => p.freed_by[a as usize] = Some(i as u32),
                None => p.unmatched_frees.push(i as u32),
            }
        }
    }
    p
}

/// Whether a per-step count shows steady growth: present in at least two and at least half of
/// the steps before the last. The last step is left out of the judgement: what it made may
/// legitimately still be alive, or still waiting for a backward, when the trace ends.
pub fn steady(per_step: &[u32]) -> bool {
    let Some((_, complete)) = per_step.split_last() else {
        return false;
    };
    let with = complete.iter().filter(|&&c| c > 0).count();
    with >= 2 && with * 2 >= complete.len()
}

/// The Python stack that explains an event: its own, or for backward-pass work (which runs on
/// the autograd thread, outside any Python frame) the stack of the forward op it differentiates.
pub(crate) struct StackResolver {
    forward_by_seq: HashMap<i64, OpIdx>,
}

impl StackResolver {
    pub(crate) fn new(t: &Trace) -> StackResolver {
        let mut forward_by_seq = HashMap::default();
        for (i, o) in t.ops.iter().enumerate() {
            if let Some(s) = o.seq {
                if o.stack != StackId::EMPTY && !o.is_backward() {
                    forward_by_seq.insert(s, OpIdx(i as u32));
                }
            }
        }
        StackResolver { forward_by_seq }
    }

    pub(crate) fn stack_of(&self, t: &Trace, m: &MemEvent) -> StackId {
        if m.stack != StackId::EMPTY {
            return m.stack;
        }
        let mut cur = m.op;
        while let Some(o) = cur {
            let op = t.op(o);
            if let Some(s) = op.seq {
                if op.is_backward() {
                    if let Some(&f) = self.forward_by_seq.get(&s) {
                        return t.op(f).stack;
                    }
                }
            }
            cur = op.parent;
        }
        StackId::EMPTY
    }
}

/// Whether an allocation was made under a forward op that recorded an autograd node (it has a
/// sequence number: grad mode was on) which no backward op of the trace consumed.
fn holds_graph(t: &Trace, m: &MemEvent, backward_seqs: &rustc_hash::FxHashSet<i64>) -> bool {
    let mut cur = m.op;
    for _ in 0..t.ops.len() {
        let Some(o) = cur else { break };
        let op = t.op(o);
        if op.is_backward() {
            return false;
        }
        if let Some(seq) = op.seq {
            return !backward_seqs.contains(&seq);
        }
        cur = op.parent;
    }
    false
}

/// Growth groups whose holder is searched (largest first): each search reads the trace's
/// Python calls once, so the cost stays linear in the trace.
pub const KEPT_BY_GROUPS: usize = 16;

/// What keeps allocation `i`, where its stack shows a mechanism inside the loop's function
/// (`keeper`): for a forward hook, the hook itself is the user's function that the dispatch
/// (`module.py inner`) called after the allocating forward returned, as the trace's Python
/// calls record it (at its `def` line: a trace gives a call's line as of its entry).
fn kept_by(
    t: &Trace,
    resolver: &StackResolver,
    i: usize,
    keeper: Option<&Site>,
) -> Option<crate::analysis::leaks::KeptBy> {
    use crate::analysis::leaks::kept_by::{from_stack, Framed};
    use crate::analysis::leaks::Mechanism;
    let m = &t.memory[i];
    let ids = t.stacks.frames(resolver.stack_of(t, m));
    let frames: Vec<Framed> = ids
        .iter()
        .map(|&f| {
            let fr = t.stacks.frame(f);
            Framed {
                role: fr.role,
                kind: t.frame_kind(fr),
                site: t.site(fr),
            }
        })
        .collect();
    let (mut k, at) = from_stack(&frames, keeper)?;
    if k.mechanism == Mechanism::ForwardHook {
        // The dispatch's call around the allocation, then the user's call it made after it.
        let dispatch = ids[at];
        let call = t
            .python
            .iter()
            .filter(|p| p.frame == dispatch && p.ts <= m.ts && m.ts <= p.end())
            .max_by(|a, b| a.ts.total_cmp(&b.ts));
        if let Some(id) = call.and_then(|c| c.python_id) {
            k.site = t
                .python
                .iter()
                .filter(|p| p.parent_id == Some(id) && p.ts >= m.ts)
                .filter(|p| t.frame_kind(t.stacks.frame(p.frame)) == FrameKind::User)
                .min_by(|a, b| a.ts.total_cmp(&b.ts))
                .map(|p| t.site(t.stacks.frame(p.frame)));
        }
    } else {
        // A trace's lines are those current at a frame's entry.
        k.line_is_statement = false;
    }
    Some(k)
}

/// The memory timeline, peaks, per-step figures and leaking sites of every device.
pub fn analyze(t: &Trace) -> TraceMemory {
    analyze_with(t, &pair(t), &StackResolver::new(t), &TraceSets::new(t))
}

/// [`analyze`] with the pairing and the stack resolver built by the caller, who keeps them
/// (the TUI follows allocations to their frees and events to their user lines).
pub(crate) fn analyze_with(
    t: &Trace,
    pairing: &Pairing,
    resolver: &StackResolver,
    sets: &TraceSets,
) -> TraceMemory {
    let mut notes = Vec::new();
    // A file cut short before any memory event: the loader's note says where, and the
    // verdict that memory events may lie past the cut; nothing says how it was recorded.
    if t.memory.is_empty() && !t.truncated {
        notes.push(TraceNote::NoMemoryEvents);
    }
    if t.counts.reconstructed_totals > 0 {
        notes.push(TraceNote::ReconstructedTotals {
            events: t.counts.reconstructed_totals,
        });
    }
    if t.counts.without_address > 0 {
        notes.push(TraceNote::WithoutAddress {
            events: t.counts.without_address,
        });
    }
    if t.steps.is_empty() && !t.memory.is_empty() {
        notes.push(TraceNote::NoProfilerSteps);
    }
    // Each device's events, found in one pass (not one pass per device: a trace may name
    // 100k device ids).
    let mut by_device: rustc_hash::FxHashMap<DeviceKey, Vec<usize>> = Default::default();
    for (i, m) in t.memory.iter().enumerate() {
        by_device.entry(m.device).or_default().push(i);
    }
    let devices = t
        .memory_devices()
        .into_iter()
        .map(|d| {
            let idx = by_device.remove(&d).unwrap_or_default();
            device_memory(t, d, idx, pairing, resolver, sets)
        })
        .collect();
    TraceMemory {
        steps: t
            .steps
            .iter()
            .map(|s| StepSpan {
                number: s.number,
                name: s.name.clone(),
                ts: s.ts,
                dur: s.dur,
            })
            .collect(),
        devices,
        notes,
    }
}

/// What every device's pass reads of the ops and Python calls: found once, in one pass over
/// each list (issue #43: each device read both whole lists, 2 GB on a 9 GB trace).
pub(crate) struct TraceSets {
    /// Frames of calls that were running when tracing began.
    preexisting: rustc_hash::FxHashSet<FrameId>,
    /// Sequence numbers of backward ops.
    backward_seqs: rustc_hash::FxHashSet<i64>,
}

impl TraceSets {
    pub(crate) fn new(t: &Trace) -> TraceSets {
        TraceSets {
            preexisting: t
                .python
                .iter()
                .filter(|p| p.preexisting)
                .map(|p| p.frame)
                .collect(),
            backward_seqs: t
                .ops
                .iter()
                .filter(|o| o.is_backward())
                .filter_map(|o| o.seq)
                .collect(),
        }
    }
}

fn device_memory(
    t: &Trace,
    device: DeviceKey,
    idx: Vec<usize>,
    pairing: &Pairing,
    resolver: &StackResolver,
    sets: &TraceSets,
) -> DeviceMemory {
    let events: Vec<&MemEvent> = idx.iter().map(|&i| &t.memory[i]).collect();
    let timeline: Vec<MemPoint> = events
        .iter()
        .filter_map(|m| {
            Some(MemPoint {
                ts: m.ts,
                allocated_bytes: m.total_allocated?,
                reserved_bytes: m.total_reserved,
            })
        })
        .collect();
    let start_allocated_bytes = events
        .iter()
        .find_map(|m| m.total_allocated.map(|a| a - m.bytes));
    let end_allocated_bytes = events.iter().rev().find_map(|m| m.total_allocated);
    let lowest_allocated_bytes = timeline
        .iter()
        .map(|p| p.allocated_bytes)
        .chain(start_allocated_bytes)
        .min();
    let peak_reserved_bytes = events.iter().filter_map(|m| m.total_reserved).max();

    // Peak: the first event reaching the highest total.
    let mut peak_at: Option<usize> = None;
    for (k, m) in events.iter().enumerate() {
        if let Some(a) = m.total_allocated {
            if peak_at.is_none_or(|p| a > events[p].total_allocated.unwrap_or(i64::MIN)) {
                peak_at = Some(k);
            }
        }
    }
    let peak = peak_at.map(|k| {
        let m = events[k];
        let stack = resolver.stack_of(t, m);
        Peak {
            ts: m.ts,
            allocated_bytes: m.total_allocated.unwrap_or(0),
            reserved_bytes: m.total_reserved,
            step: t.step_at(m.ts).map(|s| t.step(s).number),
            op: m.op.map(|o| t.op_name(o).to_owned()),
            top_op: m.op.map(|o| t.op_name(t.top_op(o)).to_owned()),
            site: t.user_site(stack),
        }
    });

    let n_steps = t.steps.len();
    let mut steps: Vec<StepMemory> = t
        .steps
        .iter()
        .map(|s| StepMemory {
            number: s.number,
            start_allocated_bytes: None,
            peak_allocated_bytes: None,
            end_allocated_bytes: None,
            peak_reserved_bytes: None,
            allocated_bytes: 0,
            freed_bytes: 0,
            live_at_end_bytes: 0,
            live_at_end_count: 0,
        })
        .collect();
    // Allocated at a step's boundaries: the running total after the last event before it.
    for (si, s) in t.steps.iter().enumerate() {
        let before = events.partition_point(|m| m.ts < s.ts);
        let through = events.partition_point(|m| m.ts <= s.end());
        let total_before = events[..before]
            .iter()
            .rev()
            .find_map(|m| m.total_allocated);
        steps[si].start_allocated_bytes = total_before.or_else(|| {
            events[before..through]
                .iter()
                .find_map(|m| m.total_allocated.map(|a| a - m.bytes))
        });
        steps[si].end_allocated_bytes = events[..through]
            .iter()
            .rev()
            .find_map(|m| m.total_allocated);
        steps[si].peak_allocated_bytes = events[before..through]
            .iter()
            .filter_map(|m| m.total_allocated)
            .max()
            .or(steps[si].start_allocated_bytes);
        steps[si].peak_reserved_bytes = events[before..through]
            .iter()
            .filter_map(|m| m.total_reserved)
            .max();
    }

    let mut allocations = 0;
    let mut frees = 0;
    let mut live_at_end_bytes = 0u64;
    let mut live_at_end_count = 0usize;
    // (site, op name, keeper) -> per-step bytes and counts of allocations alive at the end,
    // and the bytes of those that hold an unconsumed autograd node.
    type Key = (Option<Site>, Option<String>, Option<Site>);
    // Each group's figures sit in `slots`, the map giving its slot: the map sees the same
    // keys in the same order as if it held the figures, so it iterates in the same order.
    let mut groups: HashMap<Key, usize> = HashMap::default();
    let mut slots: Vec<(Vec<u64>, Vec<u32>, u64, usize)> = Vec::new();
    // The key is a function of the event's stack and op name: found once per pair (issue
    // #43: a 9 GB trace has millions of live allocations and a few hundred such pairs).
    let mut slot_of: HashMap<(StackId, Option<Sym>), usize> = HashMap::default();
    let (preexisting, backward_seqs) = (&sets.preexisting, &sets.backward_seqs);
    for &i in &idx {
        let m = &t.memory[i];
        let step = t.step_at(m.ts).map(|s| s.0 as usize);
        if m.bytes > 0 {
            allocations += 1;
            if let Some(s) = step {
                steps[s].allocated_bytes += m.bytes as u64;
            }
        } else if m.bytes < 0 {
            frees += 1;
            if let Some(s) = step {
                steps[s].freed_bytes += m.bytes.unsigned_abs();
            }
        }
        if !pairing.live_at_end(t, i) {
            continue;
        }
        live_at_end_bytes += m.bytes as u64;
        live_at_end_count += 1;
        let Some(s) = step else {
            continue;
        };
        steps[s].live_at_end_bytes += m.bytes as u64;
        steps[s].live_at_end_count += 1;
        let stack = resolver.stack_of(t, m);
        let op_name = m.op.map(|o| t.op(o).name);
        let slot = *slot_of.entry((stack, op_name)).or_insert_with(|| {
            let site = t.user_site(stack);
            let keeper = t
                .stacks
                .frames(stack)
                .iter()
                .copied()
                .find(|&f| {
                    preexisting.contains(&f) && t.frame_kind(t.stacks.frame(f)) == FrameKind::User
                })
                .map(|f| t.site(t.stacks.frame(f)));
            let op = m.op.map(|o| t.op_name(o).to_owned());
            *groups.entry((site, op, keeper)).or_insert_with(|| {
                slots.push((vec![0; n_steps], vec![0; n_steps], 0, i));
                slots.len() - 1
            })
        });
        let g = &mut slots[slot];
        g.0[s] += m.bytes as u64;
        g.1[s] += 1;
        if holds_graph(t, m, backward_seqs) {
            g.2 += m.bytes as u64;
        }
    }
    let frees_of_earlier_blocks = pairing
        .unmatched_frees
        .iter()
        .filter(|&&f| t.memory[f as usize].device == device)
        .count();

    let mut growth: Vec<LiveGrowth> = groups
        .into_iter()
        .map(|(key, slot)| (key, std::mem::take(&mut slots[slot])))
        .filter(|(_, (_, counts, _, _))| steady(counts))
        .map(
            |((site, op, keeper), (per_step_bytes, per_step_count, graph_bytes, first))| {
                let total_bytes: u64 = per_step_bytes.iter().sum();
                let steps_with_live = per_step_count.iter().filter(|&&c| c > 0).count();
                let bytes_per_step = total_bytes as f64 / n_steps.max(1) as f64;
                LiveGrowth {
                    site,
                    kept_by: None,
                    first_event: first,
                    keeper,
                    graph_bytes,
                    op,
                    per_step_bytes,
                    per_step_count,
                    steps_with_live,
                    bytes_per_step,
                    total_bytes,
                }
            },
        )
        .collect();
    growth.sort_by(|a, b| {
        b.total_bytes
            .cmp(&a.total_bytes)
            .then_with(|| a.site.cmp(&b.site))
            .then_with(|| a.op.cmp(&b.op))
    });
    // Each search reads the Python calls once: only the largest groups are searched.
    for g in growth.iter_mut().take(KEPT_BY_GROUPS) {
        g.kept_by = kept_by(t, resolver, g.first_event, g.keeper.as_ref());
    }

    DeviceMemory {
        device,
        label: device.label(),
        counted_from: t.counted_from(device),
        events: events.len(),
        allocations,
        frees,
        frees_of_earlier_blocks,
        start_allocated_bytes,
        end_allocated_bytes,
        lowest_allocated_bytes,
        peak,
        peak_reserved_bytes,
        live_at_end_bytes,
        live_at_end_count,
        timeline,
        steps,
        growth,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::trace::{OpRecord, Tid, TraceBuilder};

    const CUDA0: DeviceKey = DeviceKey {
        device_type: 1,
        device_id: 0,
    };

    #[test]
    fn steady_rule() {
        assert!(steady(&[1, 1, 1, 1]));
        assert!(!steady(&[0, 0, 0, 3]));
        assert!(!steady(&[1, 0, 0, 0, 0, 1]));
        assert!(steady(&[1, 0, 1, 0, 0]));
        assert!(!steady(&[]));
        assert!(!steady(&[5, 5]));
    }

    /// Four steps; each leaks one 1 KiB block from `leaky`, and makes a temporary that is freed.
    fn leaky_trace() -> Trace {
        let mut b = TraceBuilder::new();
        let tid = Tid(1);
        b.add_python("train.py(5): main", 0.0, 1000.0, tid, Some(1), None);
        let mut total = 0i64;
        for k in 0..4u64 {
            let t0 = 10.0 + 200.0 * k as f64;
            b.add_step(k + 1, &format!("ProfilerStep#{}", k + 1), t0, 150.0, tid);
            b.add_python("train.py(20): leaky", t0 + 5.0, 20.0, tid, None, Some(1));
            b.add_op(OpRecord {
                name: "aten::empty",
                ts: t0 + 6.0,
                dur: 2.0,
                tid,
                seq: None,
                fwd_tid: None,
                external_id: None,
                scalar_inputs: None,
            });
            total += 1024;
            b.add_memory(
                t0 + 7.0,
                tid,
                0x1000 + k,
                1024,
                Some(total),
                Some(1 << 21),
                CUDA0,
            );
            total += 4096;
            b.add_memory(
                t0 + 40.0,
                tid,
                0x9000,
                4096,
                Some(total),
                Some(1 << 21),
                CUDA0,
            );
            total -= 4096;
            b.add_memory(
                t0 + 50.0,
                tid,
                0x9000,
                -4096,
                Some(total),
                Some(1 << 21),
                CUDA0,
            );
        }
        b.build()
    }

    #[test]
    fn leak_found_with_site_and_steps() {
        let t = leaky_trace();
        let m = analyze(&t);
        assert_eq!(m.devices.len(), 1);
        let d = &m.devices[0];
        assert_eq!(d.allocations, 8);
        assert_eq!(d.frees, 4);
        assert_eq!(d.live_at_end_bytes, 4096);
        assert_eq!(d.steps.len(), 4);
        assert_eq!(d.steps[0].peak_allocated_bytes, Some(1024 + 4096));
        assert_eq!(d.steps[0].end_allocated_bytes, Some(1024));
        assert_eq!(d.steps[3].end_allocated_bytes, Some(4096));
        let peak = d.peak.as_ref().unwrap();
        assert_eq!(peak.allocated_bytes, 3 * 1024 + 4096 + 1024);
        assert_eq!(peak.step, Some(4));
        assert_eq!(d.growth.len(), 1);
        let g = &d.growth[0];
        assert_eq!(g.site.as_ref().unwrap().function, "leaky");
        assert_eq!(g.op.as_deref(), Some("aten::empty"));
        assert_eq!(g.per_step_bytes, vec![1024; 4]);
    }
}
