//! The passes of [`super::TraceBuilder::build`] after the sorts: each op's enclosing op, each
//! memory event's op, every op's and memory event's Python stack, the `fwdbwd` flows' ops, and
//! the Python calls that were running when tracing began.
//!
//! Why side by side, and why this shape (issue #43): on a 9 GB trace these passes took 2.3 s
//! one after the other, each one a walk of hundreds of megabytes. They read the same sorted
//! lists but write different fields, so each pass finds its answers into a vector of its own,
//! reading the trace only (the stacks pass also interns into the trace's [`Stacks`]); three
//! run side by side ([`crate::threads::join`]), then the answers are written into the ops and
//! memory events in one pass. Splitting a pass itself by time gave nothing (BENCHMARKS.md,
//! session 14), so each pass is the serial one; the ids it interns come in the same order, so
//! the trace is the same on any thread count.

use rustc_hash::FxHashMap as HashMap;

use super::phases::Phase;
use super::{FlowEnd, FlowLink, MemEvent, Op, OpIdx, PyCall, Step, Tid, Trace};
use crate::model::frames::{FrameId, StackId, Stacks};

/// Resolves nesting, stacks, flows and pre-existing calls of a trace whose ops, Python calls,
/// memory events and steps are sorted, on `threads` threads (1: in order on this one).
pub(super) fn link(t: &mut Trace, flow_ends: &[FlowEnd], threads: usize) {
    use crate::threads::join;
    let p = Phase::start("build.groups");
    let (op_groups, mem_groups) = join(
        threads,
        || by_tid(&t.ops, |o| o.tid),
        || by_tid(&t.memory, |m| m.tid),
    );
    p.end();
    let p = Phase::start("build.passes");
    let Trace {
        stacks,
        ops,
        python,
        memory,
        steps,
        flows,
        ..
    } = t;
    let (ops_r, python_r, memory_r): (&[Op], &[PyCall], &[MemEvent]) = (ops, python, memory);
    let ((nest, links), (found, first_end)) = join(
        threads,
        || {
            let _p = Phase::start("build.nest+flows");
            let nest = nest_ops(ops_r, memory_r, &op_groups, &mem_groups);
            let links = resolve_flows(ops_r, &nest.op_parent, &op_groups, flow_ends);
            (nest, links)
        },
        || {
            join(
                threads,
                || {
                    let _p = Phase::start("build.stacks");
                    attach_stacks(stacks, python_r, ops_r, memory_r, &op_groups, &mem_groups)
                },
                || {
                    let _p = Phase::start("build.first_ends");
                    first_ends(python_r)
                },
            )
        },
    );
    p.end();
    let p = Phase::start("build.write");
    *flows = links;
    mark_preexisting(python, steps, &first_end);
    write_into(ops, threads, WRITE_RUN_MIN, |i, o| {
        o.parent = nest.op_parent[i];
        o.stack = found.op_stack[i];
    });
    write_into(memory, threads, WRITE_RUN_MIN, |i, m| {
        m.op = nest.mem_op[i];
        m.stack = found.mem_stack[i];
    });
    p.end();
}

/// Items written on one thread at least (fewer are not worth a thread).
const WRITE_RUN_MIN: usize = 1 << 16;

/// Calls `f(i, &mut items[i])` for every item, the items split into runs of `min_run` or more
/// on `threads` threads.
fn write_into<T: Send>(
    items: &mut [T],
    threads: usize,
    min_run: usize,
    f: impl Fn(usize, &mut T) + Sync,
) {
    let per = items.len().div_ceil(threads.max(1)).max(min_run.max(1));
    if threads <= 1 || items.len() <= per {
        for (i, it) in items.iter_mut().enumerate() {
            f(i, it);
        }
        return;
    }
    let f = &f;
    std::thread::scope(|s| {
        for (k, run) in items.chunks_mut(per).enumerate() {
            crate::threads::spawn_or_run(s, move || {
                for (j, it) in run.iter_mut().enumerate() {
                    f(k * per + j, it);
                }
            });
        }
    });
}

/// Per thread, the earliest end of a Python call on it.
fn first_ends(python: &[PyCall]) -> HashMap<Tid, f64> {
    let mut first_end: HashMap<Tid, f64> = HashMap::default();
    for p in python {
        let e = first_end.entry(p.tid).or_insert(f64::INFINITY);
        if p.end() < *e {
            *e = p.end();
        }
    }
    first_end
}

/// Calls on the stack when the tracer started are recorded first, outermost first, before any
/// call has returned; of those, the ones still open when the first step starts are the frames
/// that were running all along (the training loop and its callers). The calls are sorted by
/// start, so none starting at or after the latest of the threads' first returns can be one:
/// only those before it are looked at (the rest were built `false`).
fn mark_preexisting(python: &mut [PyCall], steps: &[Step], first_end: &HashMap<Tid, f64>) {
    let latest = first_end
        .values()
        .copied()
        .fold(f64::NEG_INFINITY, f64::max);
    let cut = python.partition_point(|p| p.ts < latest);
    let first_step = steps.first().map(|s| s.ts);
    for p in &mut python[..cut] {
        let before_any_return = first_end.get(&p.tid).is_some_and(|&e| p.ts < e);
        let spans_first_step = first_step.is_none_or(|s| p.ts <= s && p.end() >= s);
        p.preexisting = before_any_return && spans_first_step;
    }
}

fn by_tid<T>(items: &[T], tid: impl Fn(&T) -> Tid) -> HashMap<Tid, Vec<u32>> {
    let mut m: HashMap<Tid, Vec<u32>> = HashMap::default();
    for (i, it) in items.iter().enumerate() {
        m.entry(tid(it)).or_default().push(i as u32);
    }
    m
}

/// Slack for a child that ends a rounding error after its parent (timestamps have ns precision).
const NEST_EPS: f64 = 0.002;

/// Each op's enclosing op and each memory event's innermost open op, by index.
struct Nesting {
    op_parent: Vec<Option<OpIdx>>,
    mem_op: Vec<Option<OpIdx>>,
}

fn nest_ops(
    ops: &[Op],
    memory: &[MemEvent],
    groups: &HashMap<Tid, Vec<u32>>,
    mem_groups: &HashMap<Tid, Vec<u32>>,
) -> Nesting {
    let mut op_parent = vec![None; ops.len()];
    for idx in groups.values() {
        let mut open: Vec<u32> = Vec::new();
        for &i in idx {
            let (ts, end) = (ops[i as usize].ts, ops[i as usize].end());
            while let Some(&top) = open.last() {
                if ops[top as usize].end() < ts || ops[top as usize].end() + NEST_EPS < end {
                    open.pop();
                } else {
                    break;
                }
            }
            op_parent[i as usize] = open.last().map(|&p| OpIdx(p));
            open.push(i);
        }
    }
    // Memory events: innermost op open on their thread.
    let mut mem_op = vec![None; memory.len()];
    for (tid, mem_idx) in mem_groups {
        let Some(op_idx) = groups.get(tid) else {
            continue;
        };
        let mut open: Vec<u32> = Vec::new();
        let mut next = 0;
        for &m in mem_idx {
            let ts = memory[m as usize].ts;
            while next < op_idx.len() && ops[op_idx[next] as usize].ts <= ts {
                let o = op_idx[next];
                while open
                    .last()
                    .is_some_and(|&top| ops[top as usize].end() < ops[o as usize].ts)
                {
                    open.pop();
                }
                open.push(o);
                next += 1;
            }
            while open.last().is_some_and(|&top| ops[top as usize].end() < ts) {
                open.pop();
            }
            mem_op[m as usize] = open.last().map(|&o| OpIdx(o));
        }
    }
    Nesting { op_parent, mem_op }
}

/// The Python stack open at each op's and memory event's time on its thread.
struct Found {
    op_stack: Vec<StackId>,
    mem_stack: Vec<StackId>,
}

/// Finds every op's and memory event's Python stack, interning the stacks into `stacks` in the
/// order a walk of each thread meets them (threads in the order of their Python calls' map).
fn attach_stacks(
    stacks: &mut Stacks,
    python: &[PyCall],
    ops: &[Op],
    memory: &[MemEvent],
    op_groups: &HashMap<Tid, Vec<u32>>,
    mem_groups: &HashMap<Tid, Vec<u32>>,
) -> Found {
    let mut op_stack = vec![StackId::EMPTY; ops.len()];
    let mut mem_stack = vec![StackId::EMPTY; memory.len()];
    let py_groups = by_tid(python, |p| p.tid);
    let empty = Vec::new();
    for (tid, py_idx) in &py_groups {
        // Queries in time order: (ts, is_memory, index).
        let op_idx = op_groups.get(tid).unwrap_or(&empty);
        let mems = mem_groups.get(tid).unwrap_or(&empty);
        let mut queries: Vec<(f64, bool, u32)> = op_idx
            .iter()
            .map(|&i| (ops[i as usize].ts, false, i))
            .chain(mems.iter().map(|&i| (memory[i as usize].ts, true, i)))
            .collect();
        queries.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut open: Vec<u32> = Vec::new();
        let mut next = 0;
        let mut cached: Option<StackId> = None;
        for (ts, is_mem, i) in queries {
            while next < py_idx.len() && python[py_idx[next] as usize].ts <= ts {
                let p = py_idx[next];
                let start = python[p as usize].ts;
                while open
                    .last()
                    .is_some_and(|&top| python[top as usize].end() < start)
                {
                    open.pop();
                }
                open.push(p);
                cached = None;
                next += 1;
            }
            while open
                .last()
                .is_some_and(|&top| python[top as usize].end() < ts)
            {
                open.pop();
                cached = None;
            }
            let stack = match cached {
                Some(s) => s,
                None => {
                    let frames: Vec<FrameId> = open
                        .iter()
                        .rev()
                        .map(|&p| python[p as usize].frame)
                        .collect();
                    let s = stacks.intern_stack(&frames);
                    cached = Some(s);
                    s
                }
            };
            if is_mem {
                mem_stack[i as usize] = stack;
            } else {
                op_stack[i as usize] = stack;
            }
        }
    }
    Found {
        op_stack,
        mem_stack,
    }
}

/// The op a flow end points at: one starting exactly there (preferring one with a sequence
/// number, as the flow's op always has one), else the innermost op open at that time.
fn op_at(
    ops: &[Op],
    parent: &[Option<OpIdx>],
    per_tid: &HashMap<Tid, Vec<u32>>,
    tid: Tid,
    ts: f64,
) -> Option<OpIdx> {
    let idx = per_tid.get(&tid)?;
    let after = idx.partition_point(|&i| ops[i as usize].ts <= ts);
    let mut exact: Option<u32> = None;
    for &i in idx[..after].iter().rev() {
        if ops[i as usize].ts != ts {
            break;
        }
        if exact.is_none() || ops[i as usize].seq.is_some() {
            exact = Some(i);
            if ops[i as usize].seq.is_some() {
                break;
            }
        }
    }
    if let Some(i) = exact {
        return Some(OpIdx(i));
    }
    let mut cur = idx[..after].last().map(|&i| OpIdx(i));
    let mut guard = 0;
    while let Some(c) = cur {
        if ops[c.0 as usize].end() >= ts {
            return Some(c);
        }
        cur = parent[c.0 as usize];
        guard += 1;
        if guard > ops.len() {
            break;
        }
    }
    None
}

fn resolve_flows(
    ops: &[Op],
    parent: &[Option<OpIdx>],
    per_tid: &HashMap<Tid, Vec<u32>>,
    ends: &[FlowEnd],
) -> Vec<FlowLink> {
    let mut starts: HashMap<i64, OpIdx> = HashMap::default();
    let mut finishes: Vec<(i64, OpIdx)> = Vec::new();
    for e in ends {
        if let Some(op) = op_at(ops, parent, per_tid, e.tid, e.ts) {
            if e.start {
                starts.entry(e.id).or_insert(op);
            } else {
                finishes.push((e.id, op));
            }
        }
    }
    let mut links: Vec<FlowLink> = finishes
        .into_iter()
        .filter_map(|(id, to)| starts.get(&id).map(|&from| FlowLink { id, from, to }))
        .collect();
    links.sort_by_key(|l| (l.from, l.to));
    links.dedup();
    links
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_runs_reach_every_item_with_its_own_index() {
        for (n, threads, min_run) in [(1000, 4, 7), (1000, 3, 1), (5, 16, 1), (0, 4, 1), (9, 1, 1)]
        {
            let mut v = vec![0usize; n];
            write_into(&mut v, threads, min_run, |i, x| *x = i + 1);
            assert!(
                v.iter().enumerate().all(|(i, &x)| x == i + 1),
                "{n} {threads}"
            );
        }
    }
}
