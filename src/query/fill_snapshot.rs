//! A snapshot's tables, from its analysis product ([`SnapshotProduct`]: the loaded model and
//! what [`Analyzed`] holds).
//!
//! `segments`, `blocks` and `frames` are the model as loaded; `events` is the log in place;
//! `live` is the replayed timeline asked for its state at moments (the product's
//! [`Analyzed::state_at`], from the nearest checkpoint: no new replay); the rest are the
//! report's typed findings. A site is always the rule `analyze` blames by ([`SiteDict`]).

use std::sync::{Arc, OnceLock};

use super::sites::{kind_name, site_cells, stack_cell, stack_cells, SiteDict};
use super::{Cell, Filled, Rows};
use crate::analysis::analyzed::{At, Resolved};
use crate::analysis::categories::{Categories, Category};
use crate::analysis::sites::SiteTotal;
use crate::analysis::steps::{Step, StepSource};
use crate::analysis::{Analyzed, DeviceReport, SnapshotProduct};
use crate::model::{BlockState, Snapshot, StackId};

/// Every table of a snapshot, read from its analysis product.
pub fn tables(p: Arc<SnapshotProduct>) -> Vec<Filled> {
    let (snap, an) = (&p.snap, &p.analyzed);
    let sites = Arc::new(SiteDict::new(&snap.stacks));
    let (segs, blocks) = segments(snap, &sites);
    vec![
        Filled::made("devices", devices(&an.devices)),
        Filled::made("segments", segs),
        Filled::made("blocks", blocks),
        Filled::new("events", Arc::new(Events::new(p.clone(), sites.clone()))),
        Filled::new(
            "live",
            Arc::new(Live {
                p: p.clone(),
                sites: sites.clone(),
                rows: OnceLock::new(),
            }),
        ),
        Filled::new(
            "frames",
            Arc::new(Frames::new(p.clone(), |p| &p.snap.stacks)),
        ),
        Filled::made("sites", site_rows(&sites)),
        Filled::made("steps", steps(snap, an)),
        Filled::made("leaks", leaks(an, &sites)),
        Filled::made("leak_steps", leak_steps(an)),
        Filled::made("ooms", ooms(an, &sites)),
        Filled::made("categories", categories(an)),
        Filled::made("top_sites", top_sites(an)),
    ]
}

/// The `devices` table (snapshots and traces alike: both analyses report their devices so).
pub(super) fn devices(devices: &[DeviceReport]) -> Vec<Vec<Cell>> {
    devices
        .iter()
        .map(|d| {
            vec![
                d.device.into(),
                d.events.into(),
                d.allocated_bytes.into(),
                d.reserved_bytes.into(),
                d.peak_allocated_bytes.into(),
                d.observed_peak_allocated_bytes.into(),
                d.peak_reserved_bytes.into(),
                d.peak_event.into(),
                d.ooms.len().into(),
            ]
        })
        .collect()
}

type TwoTables = (Vec<Vec<Cell>>, Vec<Vec<Cell>>);

fn segments(snap: &Snapshot, sites: &SiteDict) -> TwoTables {
    let (mut segs, mut blocks) = (Vec::new(), Vec::new());
    for d in &snap.devices {
        for s in &d.segments {
            let requested = s.blocks.iter().map(|b| b.requested_size).sum::<u64>();
            let active = s.blocks.iter().any(|b| b.state.is_active());
            let mut row: Vec<Cell> = vec![
                d.index.into(),
                s.address.into(),
                s.total_size.into(),
                requested.into(),
                s.allocated_bytes().into(),
                s.active_bytes().into(),
                s.blocks.len().into(),
                (if active { "active" } else { "inactive" }).into(),
                s.pool.name().into(),
                s.segment_pool_id
                    .filter(|&p| p != (0, 0))
                    .map(|p| p.0)
                    .into(),
                s.stream.into(),
                s.is_expandable.into(),
            ];
            row.extend(stack_cells(sites, s.stack));
            segs.push(row);
            for b in &s.blocks {
                let mut row: Vec<Cell> = vec![
                    d.index.into(),
                    s.address.into(),
                    b.address.into(),
                    b.size.into(),
                    b.requested_size.into(),
                    state_name(b.state).into(),
                    s.pool.name().into(),
                    s.stream.into(),
                ];
                row.extend(stack_cells(sites, b.stack));
                blocks.push(row);
            }
        }
    }
    (segs, blocks)
}

fn state_name(s: BlockState) -> &'static str {
    match s {
        BlockState::ActiveAllocated => "active_allocated",
        BlockState::ActivePendingFree => "active_pending_free",
        BlockState::Inactive => "inactive",
    }
}

/// The step of a device's steps that holds `event` (they cover the log in order).
fn step_of(steps: &[Step], event: u32) -> Option<usize> {
    let i = steps.partition_point(|s| s.end_event.0 < event);
    (i < steps.len() && steps[i].start_event.0 <= event).then_some(i)
}

/// The log, read in place: row `r` is the `r - offset[d]`th event of device `d`.
struct Events {
    p: Arc<SnapshotProduct>,
    sites: Arc<SiteDict>,
    /// Per device, the row of its first event; then the total.
    starts: Vec<usize>,
}

impl Events {
    fn new(p: Arc<SnapshotProduct>, sites: Arc<SiteDict>) -> Events {
        let mut starts = vec![0];
        for d in &p.snap.devices {
            starts.push(starts.last().copied().unwrap_or(0) + d.events.len());
        }
        Events { p, sites, starts }
    }
}

impl Rows for Events {
    fn len(&self) -> usize {
        self.starts.last().copied().unwrap_or(0)
    }
    fn get(&self, row: usize, col: usize) -> Cell {
        let pos = self.starts.partition_point(|&s| s <= row) - 1;
        let dev = &self.p.snap.devices[pos];
        let i = row - self.starts[pos];
        let e = &dev.events[i];
        match col {
            0 => i.into(),
            1 => dev.index.into(),
            2 => Cell::Name(e.action.name()),
            3 => e.addr.into(),
            4 => e.size.into(),
            5 => dev.events.stream(i).into(),
            6 => e.time_us().into(),
            7 => dev.events.device_free(i).into(),
            8 => self
                .p
                .per_device
                .get(pos)
                .and_then(|p| step_of(&p.steps, i as u32))
                .into(),
            c => stack_cell(&self.sites, e.stack, c - 9),
        }
    }
}

/// The allocated blocks of the replayed states at the peak, each OOM, each step's end and the
/// end; made when first read (a state per step is a replay from the nearest checkpoint). Rows
/// are kept compact (one per block and moment, ~80 bytes) and bounded: past
/// [`LIVE_ROWS`] rows, reading the table is an error rather than an abort under a memory limit.
struct Live {
    p: Arc<SnapshotProduct>,
    sites: Arc<SiteDict>,
    rows: OnceLock<Option<Vec<LiveRow>>>,
}

/// The most rows `live` holds (about 0.8 GB).
pub const LIVE_ROWS: usize = 10_000_000;

struct LiveRow {
    device: u32,
    moment: &'static str,
    at: Option<u32>,
    step: Option<u32>,
    block: crate::analysis::replay::LiveBlock,
    pool: crate::model::Pool,
}

impl Live {
    fn made(&self) -> Option<&Vec<LiveRow>> {
        self.rows.get_or_init(|| live_rows(&self.p)).as_ref()
    }
}

impl Rows for Live {
    fn len(&self) -> usize {
        self.made().map_or(0, Vec::len)
    }
    fn check(&self) -> Result<(), String> {
        match self.made() {
            Some(_) => Ok(()),
            None => Err(format!(
                "live: the states at the peak, the OOMs and every step's end hold more than {LIVE_ROWS} blocks; this capture is too large for the live table"
            )),
        }
    }
    fn get(&self, row: usize, col: usize) -> Cell {
        let r = &self.made().expect("checked before reading")[row];
        let b = &r.block;
        match col {
            0 => r.device.into(),
            1 => Cell::Name(r.moment),
            2 => r.at.into(),
            3 => r.step.into(),
            4 => b.address.into(),
            5 => b.size.into(),
            6 => b.requested.into(),
            7 => b.stream.into(),
            8 => Cell::Name(r.pool.name()),
            9 => b.alloc_event.map(|e| e.0).into(),
            c => stack_cell(&self.sites, b.stack, c - 10),
        }
    }
}

fn live_rows(product: &SnapshotProduct) -> Option<Vec<LiveRow>> {
    let mut rows = Vec::new();
    for (pos, p) in product.per_device.iter().enumerate() {
        let dev = product.snap.devices[pos].index;
        let mut moments: Vec<(&'static str, Option<u32>)> = Vec::new();
        if let Some(e) = p.timeline.peaks.allocated.event {
            moments.push(("peak", Some(e.0)));
        }
        moments.extend(p.timeline.ooms.iter().map(|o| ("oom", Some(o.event.0))));
        moments.extend(p.steps.iter().map(|s| ("step_end", Some(s.end_event.0))));
        moments.push(("end", None));
        for (moment, at) in moments {
            let m = Resolved {
                asked: at.map_or(At::End, At::Event),
                event: at.map(crate::model::EventIdx),
            };
            let state = product.analyzed.state_at(&product.snap, pos, m);
            let step = at.and_then(|e| step_of(&p.steps, e)).map(|s| s as u32);
            for seg in state.segments.values() {
                for b in seg
                    .blocks
                    .values()
                    .filter(|b| b.state == BlockState::ActiveAllocated)
                {
                    if rows.len() >= LIVE_ROWS {
                        return None;
                    }
                    rows.push(LiveRow {
                        device: dev,
                        moment,
                        at,
                        step,
                        block: b.clone(),
                        pool: seg.pool,
                    });
                }
            }
        }
    }
    Some(rows)
}

/// Every stack, a row per frame.
pub(super) struct Frames<T> {
    src: Arc<T>,
    stacks: fn(&T) -> &crate::model::Stacks,
    /// Row of each stack's first frame; then the total.
    starts: Vec<usize>,
}

impl<T> Frames<T> {
    pub(super) fn new(src: Arc<T>, stacks: fn(&T) -> &crate::model::Stacks) -> Frames<T> {
        let st = stacks(&src);
        let mut starts = Vec::with_capacity(st.stack_count() + 1);
        let mut n = 0;
        for i in 0..st.stack_count() {
            starts.push(n);
            n += st.frames(StackId(i as u32)).len();
        }
        starts.push(n);
        Frames {
            src,
            stacks,
            starts,
        }
    }
}

impl<T: Send + Sync> Rows for Frames<T> {
    fn len(&self) -> usize {
        self.starts.last().copied().unwrap_or(0)
    }
    fn get(&self, row: usize, col: usize) -> Cell {
        let st = (self.stacks)(&self.src);
        let s = self.starts.partition_point(|&x| x <= row) - 1;
        let depth = row - self.starts[s];
        let f = st.frame(st.frames(StackId(s as u32))[depth]);
        match col {
            0 => s.into(),
            1 => depth.into(),
            2 => st.str(f.file).into(),
            3 => f.line.into(),
            4 => st.str(f.name).into(),
            _ => Cell::Name(kind_name(f.kind)),
        }
    }
}

pub(super) fn site_rows(sites: &SiteDict) -> Vec<Vec<Cell>> {
    sites
        .sites
        .iter()
        .enumerate()
        .map(|(i, s)| {
            vec![
                i.into(),
                Cell::Text(s.file.clone()),
                s.line.into(),
                Cell::Text(s.function.clone()),
                kind_name(s.kind).into(),
            ]
        })
        .collect()
}

fn source_name(s: StepSource) -> &'static str {
    match s {
        StepSource::Setup => "setup",
        StepSource::Annotation => "annotation",
        StepSource::Loop => "loop",
        StepSource::Tail => "tail",
    }
}

fn steps(snap: &Snapshot, an: &Analyzed) -> Vec<Vec<Cell>> {
    let mut rows = Vec::new();
    for (pos, p) in an.per_device.iter().enumerate() {
        let dev = &snap.devices[pos];
        for (i, s) in p.steps.iter().enumerate() {
            let range = s.start_event.0 as usize..=s.end_event.0 as usize;
            let times = || dev.events.get(range.clone()).into_iter().flatten();
            let start = times().find_map(|e| e.time_us()).map(|t| t as f64);
            let end = times().rev().find_map(|e| e.time_us()).map(|t| t as f64);
            rows.push(vec![
                dev.index.into(),
                i.into(),
                s.name.as_str().into(),
                source_name(s.source).into(),
                s.complete.into(),
                s.start_event.0.into(),
                s.end_event.0.into(),
                start.into(),
                end.into(),
                s.peak_allocated_bytes.into(),
                s.end_allocated_bytes.into(),
            ]);
        }
    }
    rows
}

pub(super) fn leaks(an: &crate::analysis::Analysis, sites: &SiteDict) -> Vec<Vec<Cell>> {
    an.leaks
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let a = l.leak.allocation_site.as_ref();
            let mut row: Vec<Cell> = vec![
                i.into(),
                l.device.into(),
                l.leak.kind.id().into(),
                l.leak.confidence.name().into(),
                l.leak.live_bytes.into(),
                l.leak.count.into(),
                l.leak.growth_bytes_per_step.into(),
                l.leak.steps.into(),
                a.map(|s| s.file.as_str()).into(),
                a.map(|s| s.line).into(),
                a.map(|s| s.function.as_str()).into(),
            ];
            row.extend(site_cells(sites, l.leak.site.as_ref()));
            row
        })
        .collect()
}

fn leak_steps(an: &Analyzed) -> Vec<Vec<Cell>> {
    let mut rows = Vec::new();
    for (i, s) in an.leak_series.iter().enumerate() {
        for (j, (name, bytes)) in s.steps.iter().zip(&s.live_bytes).enumerate() {
            rows.push(vec![
                i.into(),
                j.into(),
                name.as_str().into(),
                (*bytes).into(),
            ]);
        }
    }
    rows
}

fn ooms(an: &Analyzed, sites: &SiteDict) -> Vec<Vec<Cell>> {
    let mut rows = Vec::new();
    for (pos, d) in an.devices.iter().enumerate() {
        let p = an.per_device.get(pos);
        for o in &d.ooms {
            let facts = p.and_then(|p| p.timeline.ooms.iter().find(|f| f.event.0 == o.event));
            let step = p.and_then(|p| step_of(&p.steps, o.event));
            let mut row: Vec<Cell> = vec![
                d.device.into(),
                o.event.into(),
                o.time_us.into(),
                facts.map(|f| f.stream).into(),
                facts.map(|f| f.pool.name()).into(),
                step.into(),
                o.cause.name().into(),
                o.requested_bytes.into(),
                o.rounded_bytes.into(),
                o.device_free_bytes.into(),
                o.allocated_bytes.into(),
                o.reserved_bytes.into(),
                o.largest_free_block_bytes.into(),
                o.free_reserved_bytes.into(),
            ];
            match facts {
                Some(f) => row.extend(stack_cells(sites, f.stack)),
                None => row.extend(site_cells(sites, o.site.as_ref())),
            }
            rows.push(row);
        }
    }
    rows
}

const CATEGORIES: [Category; 9] = [
    Category::Parameter,
    Category::OptimizerState,
    Category::Gradient,
    Category::Activation,
    Category::Temporary,
    Category::BeforeRecording,
    Category::KvCache,
    Category::Output,
    Category::Other,
];

fn category_rows(rows: &mut Vec<Vec<Cell>>, dev: u32, moment: &str, c: &Categories) {
    for cat in CATEGORIES {
        let blocks: u64 = c
            .basis
            .iter()
            .filter(|b| b.category == cat)
            .map(|b| b.blocks)
            .sum();
        rows.push(vec![
            dev.into(),
            moment.into(),
            c.at_event.map(|e| e.0).into(),
            cat.name().into(),
            c.bytes(cat).into(),
            blocks.into(),
        ]);
    }
}

fn categories(an: &Analyzed) -> Vec<Vec<Cell>> {
    let mut rows = Vec::new();
    for d in &an.devices {
        if let Some(c) = &d.categories_at_peak {
            category_rows(&mut rows, d.device, "peak", c);
        }
        for o in &d.ooms {
            if let Some(c) = &o.categories {
                category_rows(&mut rows, d.device, "oom", c);
            }
        }
        if let Some(c) = &d.categories_at_dump {
            category_rows(&mut rows, d.device, "dump", c);
        }
    }
    rows
}

fn site_total_rows(
    rows: &mut Vec<Vec<Cell>>,
    dev: u32,
    moment: &str,
    at: Option<u32>,
    v: &[SiteTotal],
) {
    for (i, t) in v.iter().enumerate() {
        let s = t.site.as_ref();
        rows.push(vec![
            dev.into(),
            moment.into(),
            at.into(),
            (i + 1).into(),
            t.bytes.into(),
            t.blocks.into(),
            s.map(|s| s.file.as_str()).into(),
            s.map(|s| s.line).into(),
            s.map(|s| s.function.as_str()).into(),
        ]);
    }
}

pub(super) fn top_sites(an: &crate::analysis::Analysis) -> Vec<Vec<Cell>> {
    let mut rows = Vec::new();
    for d in &an.devices {
        site_total_rows(&mut rows, d.device, "end", None, &d.top_sites);
        site_total_rows(&mut rows, d.device, "peak", None, &d.top_sites_at_peak);
        for o in &d.ooms {
            site_total_rows(&mut rows, d.device, "oom", Some(o.event), &o.top_sites);
        }
    }
    rows
}
