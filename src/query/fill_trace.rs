//! A profiler trace's tables, from the loaded trace and its analysis product
//! ([`AnalyzedTrace`]): ops and `[memory]` events in place, each allocation with the free the
//! memory pass paired it with, each event's site by the resolver the analysis used (a
//! backward's allocation is blamed on its forward op's line).

use std::sync::{Arc, OnceLock};

use super::fill_snapshot::{leaks, site_rows, top_sites, Frames};
use super::sites::{stack_cell, stack_cells, SiteDict};
use super::{Cell, Filled, Made, Rows};
use crate::analysis::trace_report::AnalyzedTrace;
use crate::analysis::TraceProduct;
use crate::model::trace::Trace;

/// Every table of a trace, read from its analysis product.
pub fn tables(p: Arc<TraceProduct>) -> Vec<Filled> {
    let (t, an) = (&p.trace, &p.analyzed);
    let sites = Arc::new(SiteDict::new(&t.stacks));
    vec![
        Filled::made(
            "devices",
            super::fill_snapshot::devices(&an.analysis.devices),
        ),
        Filled::new(
            "frames",
            Arc::new(Frames::new(p.clone(), |p| &p.trace.stacks)),
        ),
        Filled::made("sites", site_rows(&sites)),
        Filled::made("steps", steps(t, an)),
        Filled::made("leaks", leaks(&an.analysis, &sites)),
        Filled::made("leak_steps", leak_steps(t, an)),
        Filled::made("top_sites", top_sites(&an.analysis)),
        Filled::new(
            "ops",
            Arc::new(Ops {
                p: p.clone(),
                sites: sites.clone(),
            }),
        ),
        Filled::new(
            "memory_events",
            Arc::new(MemoryEvents {
                p: p.clone(),
                sites: sites.clone(),
            }),
        ),
        Filled::new(
            "graph_nodes",
            Arc::new(GraphNodes {
                p,
                sites,
                rows: OnceLock::new(),
            }),
        ),
    ]
}

fn step_number(t: &Trace, ts: f64) -> Option<u64> {
    t.step_at(ts).map(|i| t.step(i).number)
}

fn steps(t: &Trace, an: &AnalyzedTrace) -> Vec<Vec<Cell>> {
    let mut rows = Vec::new();
    let span = |n: u64| an.memory.steps.iter().find(|s| s.number == n);
    for d in &an.memory.devices {
        let dev = d.device.is_cuda().then_some(d.device.device_id);
        for (i, s) in d.steps.iter().enumerate() {
            let sp = span(s.number);
            rows.push(vec![
                dev.into(),
                i.into(),
                sp.map(|s| s.name.as_str()).into(),
                "profiler".into(),
                true.into(),
                Cell::Null,
                Cell::Null,
                sp.map(|s| s.ts).into(),
                sp.map(|s| s.ts + s.dur).into(),
                s.peak_allocated_bytes.into(),
                s.end_allocated_bytes.into(),
            ]);
        }
    }
    if an.memory.devices.is_empty() {
        for (i, s) in t.steps.iter().enumerate() {
            rows.push(vec![
                Cell::Null,
                i.into(),
                s.name.as_str().into(),
                "profiler".into(),
                true.into(),
                Cell::Null,
                Cell::Null,
                s.ts.into(),
                (s.ts + s.dur).into(),
                Cell::Null,
                Cell::Null,
            ]);
        }
    }
    rows
}

fn leak_steps(t: &Trace, an: &AnalyzedTrace) -> Vec<Vec<Cell>> {
    let mut rows = Vec::new();
    for (i, per) in an.leak_series.iter().enumerate() {
        for (j, b) in per.iter().enumerate() {
            let name = t.steps.get(j).map(|s| s.name.as_str());
            rows.push(vec![i.into(), j.into(), name.into(), (*b).into()]);
        }
    }
    rows
}

struct Ops {
    p: Arc<TraceProduct>,
    sites: Arc<SiteDict>,
}

impl Rows for Ops {
    fn len(&self) -> usize {
        self.p.trace.ops.len()
    }
    fn get(&self, row: usize, col: usize) -> Cell {
        let o = &self.p.trace.ops[row];
        match col {
            0 => row.into(),
            1 => self.p.trace.stacks.str(o.name).into(),
            2 => o.ts.into(),
            3 => o.dur.into(),
            4 => o.tid.0.into(),
            5 => o.seq.into(),
            6 => o.parent.map(|p| p.0).into(),
            7 => step_number(&self.p.trace, o.ts).into(),
            c => stack_cell(&self.sites, o.stack, c - 8),
        }
    }
}

struct MemoryEvents {
    p: Arc<TraceProduct>,
    sites: Arc<SiteDict>,
}

impl Rows for MemoryEvents {
    fn len(&self) -> usize {
        self.p.trace.memory.len()
    }
    fn get(&self, row: usize, col: usize) -> Cell {
        let m = &self.p.trace.memory[row];
        match col {
            0 => row.into(),
            1 => m.device.device_id.into(),
            2 => Cell::Name(if m.device.is_cuda() { "cuda" } else { "cpu" }),
            3 => m.ts.into(),
            4 => Cell::Name(if m.bytes > 0 { "alloc" } else { "free" }),
            5 => m.addr.into(),
            6 => m.bytes.unsigned_abs().into(),
            7 => m.total_allocated.into(),
            8 => m.total_reserved.into(),
            9 => m.op.map(|o| o.0).into(),
            10 => self.p.pairing.freed_by.get(row).copied().flatten().into(),
            11 => step_number(&self.p.trace, m.ts).into(),
            c => stack_cell(
                &self.sites,
                self.p.resolver.stack_of(&self.p.trace, m),
                c - 12,
            ),
        }
    }
}

/// The forward nodes of the analysis' autograd graph, listed when first read.
struct GraphNodes {
    /// The analysis product, which holds the graph its growth findings were read from.
    p: Arc<TraceProduct>,
    sites: Arc<SiteDict>,
    rows: OnceLock<Made>,
}

impl GraphNodes {
    fn made(&self) -> &Made {
        self.rows.get_or_init(|| {
            let t = &self.p.trace;
            let g = &self.p.graph;
            Made(
                g.forward_consumed()
                    .into_iter()
                    .map(|(op, consumed)| {
                        let o = t.op(op);
                        let mut row: Vec<Cell> = vec![
                            op.0.into(),
                            t.stacks.str(o.name).into(),
                            o.seq.into(),
                            consumed.into(),
                            step_number(t, o.ts).into(),
                        ];
                        row.extend(stack_cells(&self.sites, o.stack));
                        row
                    })
                    .collect(),
            )
        })
    }
}

impl Rows for GraphNodes {
    fn len(&self) -> usize {
        self.made().len()
    }
    fn get(&self, row: usize, col: usize) -> Cell {
        self.made().get(row, col)
    }
}
