//! The autograd graph as a profiler trace shows it, and the forward nodes that no backward
//! ever consumes: a graph that grows step after step.
//!
//! Every op run with grad mode on records the autograd `Sequence number` it would give a new
//! node; backward ops record the number of the node they evaluate (and the forward thread's
//! id), and `fwdbwd` flow events join the two. Forward nodes left without a backward are
//! normal in small numbers (a value computed for logging, the last step's work when the trace
//! ends before its backward), so a finding needs the same op at the same site to leave a node
//! behind step after step. That is the signature of a tensor that requires grad carried across
//! iterations, `total += loss` being the classic: memory hardly moves, because each node holds
//! little, so memory curves alone miss it.
//!
//! The site is the innermost user frame around the op, but only the function can be trusted:
//! the profiler's Python tracer records each call at its first line, and frames already running
//! when profiling began (the training loop) at the line current then (the `prof.step()` call).

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::Direction;

use crate::analysis::notes::{GraphNote, UnconsumedOp};
use crate::analysis::trace_memory::{pair, steady};
use crate::model::trace::{OpIdx, Site, Trace};
use crate::model::FrameRole;

/// One finding: an op at a site that leaves never-consumed autograd nodes behind, step after step.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct GraphGrowth {
    pub op: String,
    pub site: Option<Site>,
    /// Whether `site.line` is the line of the op. The profiler never records that, so this is
    /// `false` for traces; `site.function` is what can be trusted.
    pub line_known: bool,
    pub nodes_per_step: f64,
    /// Profiled steps.
    pub steps: usize,
    /// Never-consumed nodes created in each step.
    pub per_step: Vec<u32>,
    /// Bytes allocated by these ops and still alive at the end of the trace.
    pub bytes_attributed: u64,
    /// The site's function was already running when profiling began: its recorded line is
    /// where it was then, not the line of the op.
    pub started_before_profiling: bool,
    /// Steps in which the op left a never-consumed node.
    pub steps_with_nodes: usize,
}

/// The autograd graph's size and the growth findings.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct GraphReport {
    /// Forward nodes (distinct `(forward thread, sequence number)`).
    pub forward_nodes: usize,
    /// Backward nodes: nodes of the graph autograd's engine evaluated (one per evaluated
    /// node, whether recorded once or twice), each tied to its forward op by a sequence number.
    pub backward_nodes: usize,
    /// The engine's `AccumulateGrad` evaluations (writing leaves' `.grad`), counted apart.
    pub leaf_accumulations: usize,
    pub links_by_sequence: usize,
    pub links_by_flow: usize,
    /// Forward nodes no backward consumed by the end of the trace, in steps or not.
    pub unconsumed_nodes: usize,
    pub steps: usize,
    pub findings: Vec<GraphGrowth>,
    #[serde(skip)]
    pub notes: Vec<GraphNote>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Node {
    /// A forward node and the op that created it (the last op recorded with its number).
    Forward {
        creator: OpIdx,
    },
    Backward {
        op: OpIdx,
    },
    /// The engine's evaluation of a node with no sequence number: `AccumulateGrad`, writing a
    /// leaf's `.grad` (one per parameter per backward). Backward work, but not a node of the
    /// forward graph's backward: counted apart.
    Accumulate,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Link {
    Sequence,
    Flow,
}

/// The forward/backward graph of a trace.
pub struct AutogradGraph {
    graph: DiGraph<Node, Link>,
    pub links_by_sequence: usize,
    pub links_by_flow: usize,
}

impl AutogradGraph {
    pub fn forward_nodes(&self) -> impl Iterator<Item = OpIdx> + '_ {
        self.graph.node_weights().filter_map(|n| match n {
            Node::Forward { creator } => Some(*creator),
            Node::Backward { .. } | Node::Accumulate => None,
        })
    }
    /// `AccumulateGrad` evaluations (see [`Node::Accumulate`]).
    pub fn accumulate_count(&self) -> usize {
        self.graph
            .node_weights()
            .filter(|n| matches!(n, Node::Accumulate))
            .count()
    }
    pub fn backward_count(&self) -> usize {
        self.graph
            .node_weights()
            .filter(|n| matches!(n, Node::Backward { .. }))
            .count()
    }
    /// Each forward node's creating op, and whether a backward consumed it (`memscope query`'s
    /// `graph_nodes`), in the graph's order.
    pub fn forward_consumed(&self) -> Vec<(OpIdx, bool)> {
        self.graph
            .node_indices()
            .filter_map(|n| match self.graph[n] {
                Node::Forward { creator } => Some((
                    creator,
                    self.graph
                        .neighbors_directed(n, Direction::Outgoing)
                        .next()
                        .is_some(),
                )),
                _ => None,
            })
            .collect()
    }
    /// Creator ops of the forward nodes that no backward consumed.
    pub fn unconsumed(&self) -> Vec<OpIdx> {
        let mut v: Vec<OpIdx> = self
            .graph
            .node_indices()
            .filter_map(|n| match self.graph[n] {
                Node::Forward { creator }
                    if self
                        .graph
                        .neighbors_directed(n, Direction::Outgoing)
                        .next()
                        .is_none() =>
                {
                    Some(creator)
                }
                _ => None,
            })
            .collect();
        v.sort_unstable();
        v
    }
}

/// Sequence numbers count per forward thread, and backward ops name that thread by the
/// profiler's internal id, not by the trace's `tid`. Flows tie the two; failing that, a single
/// forward thread and a single internal id are the same thread.
fn thread_map(t: &Trace) -> HashMap<i64, i64> {
    let mut map: HashMap<i64, i64> = HashMap::default();
    for l in &t.flows {
        if let Some(f) = t.op(l.to).fwd_tid {
            map.entry(t.op(l.from).tid.0).or_insert(f);
        }
    }
    let mapped: HashSet<i64> = map.values().copied().collect();
    let mut fwd_tids: HashSet<i64> = HashSet::default();
    let mut bwd_ids: HashSet<i64> = HashSet::default();
    for o in &t.ops {
        if o.seq.is_none() {
            continue;
        }
        if o.is_backward() {
            if let Some(f) = o.fwd_tid {
                if !mapped.contains(&f) {
                    bwd_ids.insert(f);
                }
            }
        } else if !map.contains_key(&o.tid.0) {
            fwd_tids.insert(o.tid.0);
        }
    }
    if fwd_tids.len() == 1 && bwd_ids.len() == 1 {
        if let (Some(&a), Some(&b)) = (fwd_tids.iter().next(), bwd_ids.iter().next()) {
            map.insert(a, b);
        }
    }
    map
}

/// Builds the forward/backward graph: nodes per sequence number, linked by number and by flow.
pub fn build(t: &Trace) -> AutogradGraph {
    let threads = thread_map(t);
    let mut graph: DiGraph<Node, Link> = DiGraph::new();
    // Forward nodes keyed by (internal forward thread id if known, sequence number).
    let mut forward: HashMap<(Option<i64>, i64), NodeIndex> = HashMap::default();
    let mut forward_by_seq: HashMap<i64, Vec<(Option<i64>, NodeIndex)>> = HashMap::default();
    let mut op_node: HashMap<OpIdx, NodeIndex> = HashMap::default();
    let mut backward: HashMap<(Option<i64>, i64), NodeIndex> = HashMap::default();
    for (i, o) in t.ops.iter().enumerate() {
        let op = OpIdx(i as u32);
        let Some(seq) = o.seq.filter(|&s| s >= 0) else {
            // The engine's evaluation of a node without a sequence number is backward work
            // too, linked to no forward op; AccumulateGrad (writing a leaf's .grad) is
            // counted apart.
            if o.role.contains(FrameRole::AUTOGRAD_ENGINE) {
                let n = graph.add_node(if o.role.contains(FrameRole::ACCUMULATE_GRAD) {
                    Node::Accumulate
                } else {
                    Node::Backward { op }
                });
                op_node.insert(op, n);
            }
            continue;
        };
        if o.is_backward() {
            let n = *backward
                .entry((o.fwd_tid, seq))
                .or_insert_with(|| graph.add_node(Node::Backward { op }));
            op_node.insert(op, n);
        } else {
            let key = (threads.get(&o.tid.0).copied(), seq);
            let n = match forward.get(&key) {
                Some(&n) => {
                    // Ops come in start order: the last one recorded with a number made the node.
                    graph[n] = Node::Forward { creator: op };
                    n
                }
                None => {
                    let n = graph.add_node(Node::Forward { creator: op });
                    forward.insert(key, n);
                    forward_by_seq.entry(seq).or_default().push((key.0, n));
                    n
                }
            };
            op_node.insert(op, n);
        }
    }
    let mut links_by_sequence = 0;
    for (&(fwd_tid, seq), &b) in &backward {
        let targets: Vec<NodeIndex> = match forward.get(&(fwd_tid, seq)) {
            Some(&f) => vec![f],
            // The forward thread could not be told: any forward node with this number.
            None => forward_by_seq
                .get(&seq)
                .map(|v| {
                    v.iter()
                        .filter(|(thread, _)| thread.is_none() || *thread == fwd_tid)
                        .map(|&(_, n)| n)
                        .collect()
                })
                .unwrap_or_default(),
        };
        for f in targets {
            graph.add_edge(f, b, Link::Sequence);
            links_by_sequence += 1;
        }
    }
    let mut links_by_flow = 0;
    for l in &t.flows {
        if let (Some(&f), Some(&b)) = (op_node.get(&l.from), op_node.get(&l.to)) {
            if matches!(graph[f], Node::Forward { .. }) && matches!(graph[b], Node::Backward { .. })
            {
                graph.add_edge(f, b, Link::Flow);
                links_by_flow += 1;
            }
        }
    }
    AutogradGraph {
        graph,
        links_by_sequence,
        links_by_flow,
    }
}

/// Whether a never-consumed node looks like an accumulator carried across steps: an in-place
/// update (`add_`), or an op on 0-dim tensors only (a loss or metric summed up).
fn accumulates(t: &Trace, creator: OpIdx) -> bool {
    let op = t.op(creator);
    let name = t.stacks.str(op.name);
    let base = name.rsplit("::").next().unwrap_or(name);
    let in_place = base.ends_with('_') && !base.ends_with("__");
    in_place || op.scalar_inputs == Some(true)
}

/// Graph growth findings: per step, the forward nodes never consumed, grouped by op and site.
pub fn growth(t: &Trace) -> GraphReport {
    growth_of(t, &build(t))
}

/// [`growth`] over the graph [`build`] made of `t` (the trace's analysis keeps the graph for
/// the views that list its nodes).
pub fn growth_of(t: &Trace, g: &AutogradGraph) -> GraphReport {
    let unconsumed = g.unconsumed();
    let forward_nodes = g.forward_nodes().count();
    let backward_nodes = g.backward_count();
    let leaf_accumulations = g.accumulate_count();
    let n_steps = t.steps.len();
    let mut notes = Vec::new();
    let mut findings = Vec::new();
    let report = |findings, notes| GraphReport {
        forward_nodes,
        backward_nodes,
        leaf_accumulations,
        links_by_sequence: g.links_by_sequence,
        links_by_flow: g.links_by_flow,
        unconsumed_nodes: unconsumed.len(),
        steps: n_steps,
        findings,
        notes,
    };
    if forward_nodes == 0 {
        notes.push(GraphNote::NoSequenceNumbers);
        return report(findings, notes);
    }
    if backward_nodes + leaf_accumulations == 0 {
        notes.push(GraphNote::NoBackward { forward_nodes });
        return report(findings, notes);
    }
    if n_steps < 3 {
        notes.push(GraphNote::TooFewSteps { steps: n_steps });
        return report(findings, notes);
    }

    // Bytes still alive at the end, made inside an unconsumed node's creator op.
    let pairing = pair(t);
    let creators: HashSet<OpIdx> = unconsumed.iter().copied().collect();
    let mut bytes_by_creator: HashMap<OpIdx, u64> = HashMap::default();
    for (i, m) in t.memory.iter().enumerate() {
        if !pairing.live_at_end(t, i) {
            continue;
        }
        let mut cur = m.op;
        let mut guard = 0;
        while let Some(o) = cur {
            if creators.contains(&o) {
                *bytes_by_creator.entry(o).or_default() += m.bytes as u64;
                break;
            }
            cur = t.op(o).parent;
            guard += 1;
            if guard > 256 {
                break;
            }
        }
    }

    struct Group {
        per_step: Vec<u32>,
        bytes: u64,
        preexisting: bool,
        accumulates: bool,
    }
    let mut groups: HashMap<(String, Option<Site>), Group> = HashMap::default();
    for &c in &unconsumed {
        let op = t.op(c);
        let Some(step) = t.step_at(op.ts) else {
            continue;
        };
        let frame = t.user_frame_id(op.stack);
        let site = frame.map(|f| t.site(t.stacks.frame(f)));
        let preexisting = frame.is_some_and(|f| t.frame_preexisting(f));
        let grp = groups
            .entry((t.op_name(c).to_owned(), site))
            .or_insert_with(|| Group {
                per_step: vec![0; n_steps],
                bytes: 0,
                preexisting,
                accumulates: false,
            });
        grp.accumulates |= accumulates(t, c);
        grp.per_step[step.0 as usize] += 1;
        grp.bytes += bytes_by_creator.get(&c).copied().unwrap_or(0);
    }
    let mut dropped: Vec<(String, Option<Site>, f64)> = Vec::new();
    for ((op, site), grp) in groups {
        if !steady(&grp.per_step) {
            continue;
        }
        let total: u32 = grp.per_step.iter().sum();
        let with = grp.per_step.iter().filter(|&&c| c > 0).count();
        let nodes_per_step = f64::from(total) / n_steps as f64;
        if !grp.accumulates {
            dropped.push((op, site, nodes_per_step));
            continue;
        }
        findings.push(GraphGrowth {
            op,
            site,
            line_known: false,
            started_before_profiling: grp.preexisting,
            nodes_per_step,
            steps: n_steps,
            steps_with_nodes: with,
            per_step: grp.per_step,
            bytes_attributed: grp.bytes,
        });
    }
    dropped.sort_by(|a, b| b.2.total_cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
    if !dropped.is_empty() {
        let ops = dropped
            .into_iter()
            .map(|(op, site, nodes_per_step)| UnconsumedOp {
                op,
                function: site.map(|s| s.function),
                nodes_per_step,
            })
            .collect();
        notes.push(GraphNote::UnconsumedNotAccumulating { ops });
    }
    findings.sort_by(|a, b| {
        b.nodes_per_step
            .total_cmp(&a.nodes_per_step)
            .then_with(|| a.op.cmp(&b.op))
            .then_with(|| a.site.cmp(&b.site))
    });
    report(findings, notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::trace::{OpRecord, Tid, TraceBuilder};

    fn op(b: &mut TraceBuilder, name: &str, ts: f64, tid: i64, seq: Option<i64>, fwd: i64) {
        b.add_op(OpRecord {
            name,
            ts,
            dur: 1.0,
            tid: Tid(tid),
            seq,
            fwd_tid: Some(fwd),
            external_id: None,
            scalar_inputs: None,
        });
    }

    /// `steps` steps of: mm (consumed), add_ into an accumulator (never consumed) when `leak`.
    fn loop_trace(steps: u64, leak: bool) -> Trace {
        let mut b = TraceBuilder::new();
        b.add_python("train.py(30): loop", 0.0, 10_000.0, Tid(1), Some(1), None);
        let mut seq = 0;
        for k in 0..steps {
            let t0 = 100.0 + 100.0 * k as f64;
            b.add_step(k, &format!("ProfilerStep#{k}"), t0, 90.0, Tid(1));
            op(&mut b, "aten::mm", t0 + 1.0, 1, Some(seq), 0);
            op(
                &mut b,
                "autograd::engine::evaluate_function: MmBackward0",
                t0 + 50.0,
                2,
                Some(seq),
                1,
            );
            op(&mut b, "MmBackward0", t0 + 50.5, 2, Some(seq), 1);
            seq += 1;
            if leak {
                op(&mut b, "aten::add_", t0 + 60.0, 1, Some(seq), 0);
                seq += 1;
            }
            op(&mut b, "aten::item", t0 + 70.0, 1, Some(seq), 0);
        }
        b.build()
    }

    #[test]
    fn finds_accumulator() {
        let r = growth(&loop_trace(6, true));
        assert_eq!(r.backward_nodes, 6);
        assert_eq!(r.findings.len(), 1, "{:?}", r.findings);
        let f = &r.findings[0];
        assert_eq!(f.op, "aten::add_");
        assert_eq!(f.per_step, vec![1; 6]);
        assert_eq!(f.site.as_ref().unwrap().function, "loop");
        assert!(!f.line_known);
        assert!(f.started_before_profiling);
    }

    #[test]
    fn dropped_predictions_are_a_note_not_a_finding() {
        let mut b = TraceBuilder::new();
        let mut seq = 0;
        for k in 0..5u64 {
            let t0 = 100.0 * k as f64;
            b.add_step(k, &format!("ProfilerStep#{k}"), t0, 90.0, Tid(1));
            op(&mut b, "aten::mm", t0 + 1.0, 1, Some(seq), 0);
            op(&mut b, "MmBackward0", t0 + 50.0, 2, Some(seq), 1);
            seq += 1;
            b.add_op(OpRecord {
                name: "aten::sigmoid",
                ts: t0 + 20.0,
                dur: 1.0,
                tid: Tid(1),
                seq: Some(seq),
                fwd_tid: Some(0),
                external_id: None,
                scalar_inputs: Some(false),
            });
            seq += 1;
        }
        let r = growth(&b.build());
        assert!(r.findings.is_empty(), "{:?}", r.findings);
        assert!(
            r.notes.iter().any(|n| matches!(
                n,
                GraphNote::UnconsumedNotAccumulating { ops }
                    if ops.iter().any(|o| o.op == "aten::sigmoid")
            )),
            "{:?}",
            r.notes
        );
    }

    #[test]
    fn clean_loop_has_no_finding() {
        let r = growth(&loop_trace(6, false));
        assert!(r.findings.is_empty(), "{:?}", r.findings);
        // The last step's `item` holds the number no node took: unconsumed, but not growth.
        assert_eq!(r.unconsumed_nodes, 1);
    }
}
