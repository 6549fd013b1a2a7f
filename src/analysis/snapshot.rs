//! The snapshot pipeline: the passes over one device's replayed timeline, in order, each
//! consuming what the ones before it made.
//!
//! 1. replay (the timeline) beside the step search and what the categories need from the log;
//! 2. steps with their figures;
//! 3. three independent groups: leaks (the survivor walk); the classifier's breakdowns (the
//!    allocated peak's sites and categories, the dump's categories); and the passes that need
//!    only the timeline (current figures from the snapshot's own segments, the sites at the
//!    dump, retained failed attempts, labels, pools, the reserved excess);
//! 4. the leak judgement; each OOM's cause, held sites and categories;
//! 5. the device's report, then across devices the categories shown and the verdict.
//!
//! The groups of 1 and 3 run side by side where more than one thread is wanted
//! ([`crate::threads`], `MEMSCOPE_THREADS`); with one, in the order written, on the calling
//! thread. No pass reads another's result within a group, so the report is the same for any
//! count (`tests/it/concurrent43.rs`).
//!
//! The product ([`Analyzed`]) keeps what the passes leave for the views.

use std::path::Path;

use super::categories::{self, Classifier};
use super::leaks::{self, Leak};
use super::notes::{MidRun, Note, SnapshotNote};
use super::oom::{self, Cause, Diagnosis};
use super::replay::{self, Timeline};
use super::sites::{self, FramelessEvidence, Site, SiteTotal};
use super::steps::{self, Step};
use super::{
    judge_steps, last_oom_in, retry, top, verdict, whatif, Analysis, Analyzed, BoundedGrowthReport,
    CaptureKind, CategoriesReport, DeviceProduct, DeviceReport, Input, LeakJudgement, LeakReport,
    Moment, NotJudged, OomReport, StepReport, SCHEMA,
};
use crate::model::{Action, BlockState, Device, Layout, Snapshot};

/// Per-device results that feed the report's top-level lists.
struct DeviceFindings {
    report: DeviceReport,
    steps: Vec<Step>,
    leaks: Vec<Leak>,
    bounded_growth: Vec<leaks::BoundedGrowth>,
    excluded: Vec<leaks::ExcludedGrowth>,
}

/// The current figures, from the snapshot's own segments: what torch recorded.
struct Current {
    allocated: u64,
    active: u64,
    requested: u64,
    reserved: u64,
    inactive_split: u64,
    segments: u64,
    exp_segments: u64,
    exp_free: u64,
    largest_free: u64,
}

impl Current {
    fn of(dev: &Device) -> Current {
        // Sums saturate: a hostile file can declare sizes near 2^64.
        let mut allocated = 0u64;
        let mut active = 0u64;
        let mut requested = 0u64;
        let mut reserved = 0u64;
        let mut inactive_split = 0u64;
        let mut segments = 0u64;
        let mut exp_segments = 0u64;
        let mut exp_free = 0u64;
        let mut largest_free = 0;
        for s in &dev.segments {
            reserved = reserved.saturating_add(s.total_size);
            let seg_active = s.active_bytes();
            allocated = allocated.saturating_add(s.allocated_bytes());
            active = active.saturating_add(seg_active);
            requested = requested.saturating_add(
                s.blocks
                    .iter()
                    .filter(|b| b.state.is_active())
                    .fold(0u64, |a, b| a.saturating_add(b.requested_size)),
            );
            let split_free = if s.blocks.iter().any(|b| b.state.is_active()) {
                s.total_size.saturating_sub(seg_active)
            } else {
                0
            };
            if s.is_expandable {
                exp_segments = exp_segments.saturating_add(1);
                exp_free = exp_free.saturating_add(s.total_size.saturating_sub(seg_active));
            } else {
                segments = segments.saturating_add(1);
                inactive_split = inactive_split.saturating_add(split_free);
            }
            for b in &s.blocks {
                if !b.state.is_active() {
                    largest_free = largest_free.max(b.size);
                }
            }
            if s.blocks.is_empty() {
                largest_free = largest_free.max(s.total_size);
            }
        }
        Current {
            allocated,
            active,
            requested,
            reserved,
            inactive_split,
            segments,
            exp_segments,
            exp_free,
            largest_free,
        }
    }
}

/// Whether the log shows memory being taken: an alloc, a new segment or mapping, or an OOM. A
/// log of a few frees (the tail of an overflowed ring, a dump taken while a free completed)
/// is not a history.
fn has_history(dev: &Device) -> bool {
    dev.events.iter().any(|e| {
        matches!(
            e.action,
            Action::Alloc | Action::SegmentAlloc | Action::SegmentMap | Action::Oom
        )
    })
}

/// Live bytes by site in a replayed state (blocks allocated in the log carry their event).
fn sites_of_state(snap: &Snapshot, fl: &FramelessEvidence, st: &replay::State) -> Vec<SiteTotal> {
    sites::group_marked(
        &snap.stacks,
        st.live_blocks()
            .filter(|b| b.state == BlockState::ActiveAllocated)
            .map(|b| {
                let logged = b.alloc_event.is_some();
                let o = sites::origin_replayed(&snap.stacks, fl, b.stack, logged);
                (b.stack, b.size, o)
            }),
    )
}

/// Live bytes by site at the dump: blocks whose allocation is not in the log were made before
/// it began.
fn sites_at_dump(snap: &Snapshot, dev: &Device, fl: &FramelessEvidence) -> Vec<SiteTotal> {
    let allocated_in_log = sites::live_allocated_in_log(dev);
    sites::group_marked(
        &snap.stacks,
        dev.segments
            .iter()
            .flat_map(|s| s.blocks.iter())
            .filter(|b| b.state.is_active())
            .map(|b| {
                let logged = allocated_in_log.contains(&b.address);
                let origin = sites::origin_at_dump(&snap.stacks, fl, b.state, b.stack, logged);
                (b.stack, b.size, origin)
            }),
    )
}

/// What the allocated peak and the dump hold by category (and the peak by site): the passes
/// that use the device's classifier, kept together in their order. The peak's state is
/// replayed once for both breakdowns.
struct Breakdowns {
    peak_sites: Vec<SiteTotal>,
    categories_at_peak: Option<categories::Categories>,
    categories_at_dump: Option<categories::Categories>,
}

#[allow(clippy::too_many_arguments)]
fn peak_and_dump(
    snap: &Snapshot,
    dev: &Device,
    tl: &Timeline,
    classifier: &mut Classifier,
    fl: &FramelessEvidence,
    exact: bool,
    history: bool,
) -> Breakdowns {
    let peak_state = tl
        .peaks
        .allocated
        .event
        .map(|ev| (ev, tl.state_after(dev, &snap.settings, Some(ev.0 as usize))));
    let peak_sites = match &peak_state {
        Some((_, st)) if exact || tl.starts_mid_run => sites_of_state(snap, fl, st),
        _ => Vec::new(),
    };
    let categories_at_peak = match &peak_state {
        Some((ev, st)) if history => Some(categories::at_state_with(
            classifier,
            snap,
            dev,
            st,
            Some(*ev),
        )),
        _ => None,
    };
    drop(peak_state);
    let categories_at_dump = (!history && !dev.segments.is_empty())
        .then(|| categories::at_state_with(classifier, snap, dev, &tl.end, None));
    Breakdowns {
        peak_sites,
        categories_at_peak,
        categories_at_dump,
    }
}

/// The passes that need only the snapshot and the replayed timeline, not the steps, the leaks
/// or the classifier: the current figures, the sites at the dump, retained failed attempts,
/// the label breakdowns, the pools and the reserved excess.
struct Standalone {
    current: Current,
    end_sites: Vec<SiteTotal>,
    retention: retry::Retention,
    labels: super::labels::Breakdowns,
    pools: super::pools::DevicePools,
    reserved_excess: Option<super::reserved::ReservedExcess>,
}

impl Standalone {
    fn of(snap: &Snapshot, dev: &Device, tl: &Timeline, fl: &FramelessEvidence) -> Standalone {
        Standalone {
            current: Current::of(dev),
            end_sites: sites_at_dump(snap, dev, fl),
            retention: retry::find(snap, dev, tl),
            labels: super::labels::of_device(
                snap,
                dev,
                tl.peaks.allocated.event.map(|e| e.0 as usize),
            ),
            pools: super::pools::device_pools(snap, dev, tl),
            reserved_excess: super::reserved::find(snap, dev, tl),
        }
    }
}

/// Whether the device's steps support a leak judgement, and on how many.
fn judgement(history: bool, steps: &[Step], structure: &steps::Structure) -> LeakJudgement {
    if !history {
        return LeakJudgement::not(NotJudged::NoHistory, 0);
    }
    let step_ends: Vec<u64> = steps
        .iter()
        .filter(|s| s.is_iteration() && s.complete)
        .map(|s| s.end_allocated_bytes)
        .collect();
    match judge_steps(&step_ends, structure.single_pass) {
        j if step_ends.is_empty() && !structure.decoding_loops.is_empty() => {
            LeakJudgement::not(NotJudged::DecodingLoop, j.steps)
        }
        j => j,
    }
}

/// Everything the OOM pass needs from the passes before it.
struct OomInputs<'a> {
    steps: &'a [Step],
    leaks: &'a [Leak],
    retention: &'a retry::Retention,
    fl: &'a FramelessEvidence,
    leak_base: usize,
}

/// Each OOM of the device: its cause (with a leak's signal and the retained attempts), what
/// held the memory by site and by category.
fn oom_reports(
    snap: &Snapshot,
    dev: &Device,
    tl: &Timeline,
    classifier: &mut Classifier,
    i: &OomInputs,
) -> Vec<OomReport> {
    let (steps, leaks, retention, frameless, leak_base) =
        (i.steps, i.leaks, i.retention, i.fl, i.leak_base);
    let failing = crate::analysis::oom_step::failing_steps(snap, dev, tl, steps);
    tl.ooms
        .iter()
        .zip(failing)
        .map(|(o, step)| {
            let signal = leaks::leak_signal_from(steps, leaks, tl, o.event);
            let mut d: Diagnosis =
                oom::diagnose(dev, &snap.settings, o, signal.as_ref(), step.as_ref());
            oom::retained_attempts(&mut d, o, retention.alive_at(o.event));
            let expandable = d
                .remedies
                .iter()
                .any(|r| r.kind == oom::RemedyKind::ExpandableSegments);
            if expandable && matches!(d.cause, Cause::Fragmentation | Cause::Capacity) {
                // Replace the page-count judgement with the allocator model's prediction.
                if let Some(a) = whatif::expandable_assessment(snap, dev, tl, o.event.0) {
                    for r in d
                        .remedies
                        .iter_mut()
                        .filter(|r| r.kind == oom::RemedyKind::ExpandableSegments)
                    {
                        r.predicted = Some(a.clone());
                    }
                }
            }
            let st = tl.state_after(dev, &snap.settings, Some(o.event.0 as usize));
            let cats = categories::at_state_with(classifier, snap, dev, &st, Some(o.event));
            let held = sites_of_state(snap, frameless, &st);
            OomReport {
                event: o.event.0,
                time_us: o.time_us,
                requested_bytes: o.requested_bytes,
                rounded_bytes: o.rounded_bytes,
                device_free_bytes: o.device_free_bytes,
                allocated_bytes: o.counters.allocated,
                reserved_bytes: o.counters.reserved,
                largest_free_block_bytes: o.largest_free_block_bytes,
                free_reserved_bytes: o.counters.reserved.saturating_sub(o.counters.active),
                cause: d.cause,
                facts: d.evidence,
                remedies: d.remedies,
                site: Site::of_stack(&snap.stacks, o.stack),
                stack: snap
                    .stacks
                    .frames(o.stack)
                    .iter()
                    .map(|&f| snap.stacks.frame_label(snap.stacks.frame(f)))
                    .collect(),
                leak: signal
                    .filter(|_| d.cause == Cause::Leak)
                    .map(|s| leak_base + s.leak),
                top_sites: top(held),
                categories: Some(cats),
            }
        })
        .collect()
}

/// The notes a device's figures need: a log that starts mid-run, no history, approximated
/// blocks, a replay that does not match the dump.
fn device_notes(
    dev: &Device,
    tl: &Timeline,
    fl: &FramelessEvidence,
    history: bool,
    settings: &crate::model::AllocatorSettings,
) -> Vec<Note> {
    let device = dev.index;
    let mut notes = Vec::new();
    if tl.starts_mid_run && history {
        // Which of the two: the allocator's own word where the snapshot has it (newer torch's
        // `allocator_settings.trace_alloc_overflowed`), else what the blocks from before the
        // log tell (sites::FramelessEvidence).
        let why = if let Some(overflowed) = settings.trace_alloc_overflowed {
            MidRun::Recorded {
                overflowed,
                max_entries: settings.trace_alloc_max_entries,
            }
        } else if fl.unlogged_stacks {
            MidRun::RingBufferDropped
        } else if fl.unlogged_stackless && fl.stackless_unlogged() == sites::Origin::BeforeRecording
        {
            MidRun::RecordingBeganLate
        } else {
            MidRun::Either
        };
        notes.push(SnapshotNote::StartsMidRun {
            device,
            reserved: tl.initial.counters.reserved,
            why,
        });
    }
    if !history {
        notes.push(SnapshotNote::NoHistory { device });
    }
    if tl.approximate_initial_blocks > 0 {
        notes.push(SnapshotNote::ApproximateInitialBlocks {
            device,
            blocks: tl.approximate_initial_blocks,
        });
    }
    // The allocator's word that its ring dropped entries, where the mid-run note above did
    // not already give it (a log of frees only has no history to start mid-run).
    if settings.trace_alloc_overflowed == Some(true) && !(tl.starts_mid_run && history) {
        notes.push(SnapshotNote::RingOverflowed {
            device,
            max_entries: settings.trace_alloc_max_entries,
        });
    }
    if !tl.consistency.consistent {
        notes.push(SnapshotNote::ReplayDiffers {
            device,
            mismatches: tl.consistency.mismatches,
            first: tl.consistency.first_mismatch,
        });
    }
    notes.into_iter().map(Note::from).collect()
}

#[allow(clippy::too_many_arguments)]
fn device_report(
    snap: &Snapshot,
    dev: &Device,
    tl: &Timeline,
    bounds: steps::Bounds,
    classifier: &mut Classifier,
    leak_base: usize,
    notes: &mut Vec<Note>,
    threads: usize,
) -> DeviceFindings {
    let has_history = has_history(dev);
    let exact = !tl.starts_mid_run && has_history;
    // The classifier read it from the same stacks and log (one pass less here).
    let frameless = classifier.frameless();
    let structure = bounds.structure.clone();
    let steps = steps::with_figures(bounds, tl);
    // Three groups that read the same inputs and not each other: the leak search (the
    // survivor walk), the classifier's breakdowns at the peak and the dump, and the passes
    // that need only the timeline. On three threads where more than one is wanted.
    let ((found, shown), alone) = crate::threads::join(
        threads,
        || {
            crate::threads::join(
                threads,
                // Two of the threads are the other groups'; the survivors walk takes the rest.
                || leaks::find_on(snap, dev, tl, &steps, threads.saturating_sub(2).max(1)),
                || peak_and_dump(snap, dev, tl, classifier, &frameless, exact, has_history),
            )
        },
        || Standalone::of(snap, dev, tl, &frameless),
    );
    let Standalone {
        current: c,
        end_sites,
        retention,
        labels: breakdowns,
        pools,
        reserved_excess,
    } = alone;
    let Breakdowns {
        peak_sites,
        categories_at_peak,
        categories_at_dump,
    } = shown;
    let leaks::Findings {
        mut leaks,
        bounded_growth,
        excluded,
    } = found;
    // An OOM-retry loop that keeps its failed attempts alive is a finding of its own, and the
    // cause of the later OOMs it made. Findings are ranked by bytes at stake.
    leaks.extend(retention.finding(snap));
    leaks.sort_by_key(|l| std::cmp::Reverse(l.bytes_at_stake()));
    let leak_judgement = judgement(has_history, &steps, &structure);
    let ooms = oom_reports(
        snap,
        dev,
        tl,
        classifier,
        &OomInputs {
            steps: &steps,
            leaks: &leaks,
            retention: &retention,
            fl: &frameless,
            leak_base,
        },
    );
    notes.extend(device_notes(
        dev,
        tl,
        &frameless,
        has_history,
        &snap.settings,
    ));
    let p = &tl.peaks;
    let peak = |v: u64| exact.then_some(v);
    let report = DeviceReport {
        // Said only beside a private pool: with the default pool alone at the dump, an unknown
        // segment could only matter to a pool made and dropped within the log.
        unknown_pool_peak_reserved_bytes: (pools.has_private()
            && pools.unknown_pool_peak_reserved_bytes > 0)
            .then_some(pools.unknown_pool_peak_reserved_bytes),
        pool_whatif: pools.whatif,
        pools: pools.pools,
        reserved_excess,
        allocated_bytes: Some(c.allocated),
        active_bytes: Some(c.active),
        reserved_bytes: Some(c.reserved),
        requested_bytes: Some(c.requested),
        peak_allocated_bytes: peak(p.allocated.bytes),
        peak_active_bytes: peak(p.active.bytes),
        peak_reserved_bytes: peak(p.reserved.bytes),
        peak_requested_bytes: peak(p.requested.bytes),
        peak_inactive_split_bytes: peak(p.inactive_split.bytes),
        observed_peak_allocated_bytes: p.allocated.bytes.max(c.allocated),
        observed_peak_reserved_bytes: Some(p.reserved.bytes.max(c.reserved)),
        observed_peak_requested_bytes: p.requested.bytes.max(c.requested),
        reserved_unknown: false,
        peak_exact: exact,
        peak_event: p.allocated.event.map(|e| e.0),
        inactive_split_bytes: Some(c.inactive_split),
        segments: Some(c.segments),
        expandable_segments: Some(c.exp_segments),
        expandable_free_bytes: Some(c.exp_free),
        free_reserved_bytes: Some(c.reserved.saturating_sub(c.active)),
        largest_free_block_bytes: Some(c.largest_free),
        has_history,
        replay_consistent: tl.consistency.consistent,
        consistency: tl.consistency.clone(),
        // Only a log can start mid-run: a snapshot with no events has no history to start.
        history_starts_mid_run: tl.starts_mid_run && has_history,
        ooms,
        top_sites: top(end_sites),
        top_sites_at_peak: top(peak_sites),
        categories_at_peak,
        categories_at_dump,
        structure,
        leak_judgement,
        user_labels: breakdowns.user_labels,
        compiled_regions: breakdowns.compiled_regions,
        ..DeviceReport::unknown(dev.index, dev.events.len())
    };
    DeviceFindings {
        report,
        steps,
        leaks,
        bounded_growth,
        excluded,
    }
}

/// Pass 1: the replay, and beside it (on a second thread where more than one is wanted) what
/// needs only the events: the step search and what the categories need from the whole log.
fn replay_and_search(
    snap: &Snapshot,
    d: &Device,
    threads: usize,
) -> (Timeline, steps::Bounds, Classifier) {
    let (tl, (bounds, classifier)) = crate::threads::join(
        threads,
        || replay::replay_on(d, &snap.settings, threads),
        || {
            // The replay holds one thread (more where it is split); the search takes the rest.
            let b = steps::bounds_on(snap, d, threads.saturating_sub(1).max(1));
            let c = Classifier::from_ranges_on(snap, d, b.ranges(), threads);
            (b, c)
        },
    );
    (tl, bounds, classifier)
}

/// The categories the report shows first: at the last OOM, else at the first allocated peak,
/// else at the dump of a snapshot with no log.
fn shown_categories(devices: &[DeviceReport]) -> Option<CategoriesReport> {
    let at = |device: u32, at: Moment, c: &Option<categories::Categories>| {
        c.clone().map(|categories| CategoriesReport {
            device,
            at,
            categories,
        })
    };
    last_oom_in(devices)
        .and_then(|(dev, o)| at(dev, Moment::Oom, &o.categories))
        .or_else(|| {
            devices
                .iter()
                .find_map(|d| at(d.device, Moment::Peak, &d.categories_at_peak))
        })
        .or_else(|| {
            devices
                .iter()
                .find_map(|d| at(d.device, Moment::Dump, &d.categories_at_dump))
        })
}

/// Runs every snapshot analysis once: the report and what the views browse ([`Analyzed`]),
/// on as many threads as [`crate::threads::wanted`] gives.
pub fn analyze_snapshot(snap: &Snapshot, path: &Path, file_bytes: u64) -> Analyzed {
    analyze_snapshot_with(snap, path, file_bytes, crate::threads::wanted())
}

/// [`analyze_snapshot`] on at most `threads` threads at a time per group of independent passes
/// (1: every pass on the calling thread, in order). The report is the same for any count.
pub fn analyze_snapshot_with(
    snap: &Snapshot,
    path: &Path,
    file_bytes: u64,
    threads: usize,
) -> Analyzed {
    let mut products = Vec::new();
    let mut notes: Vec<Note> = snap.load_notes.iter().cloned().map(Note::from).collect();
    let mut devices = Vec::new();
    let mut leaks = Vec::new();
    let mut bounded_growth = Vec::new();
    let mut excluded_growth = Vec::new();
    let mut steps = Vec::new();
    for d in &snap.devices {
        let (tl, bounds, mut classifier) = replay_and_search(snap, d, threads);
        let f = device_report(
            snap,
            d,
            &tl,
            bounds,
            &mut classifier,
            leaks.len(),
            &mut notes,
            threads,
        );
        leaks.extend(f.leaks.into_iter().map(|leak| LeakReport {
            device: d.index,
            leak,
        }));
        bounded_growth.extend(
            f.bounded_growth
                .into_iter()
                .map(|growth| BoundedGrowthReport {
                    device: d.index,
                    growth,
                }),
        );
        excluded_growth.extend(
            f.excluded
                .into_iter()
                .map(|growth| super::ExcludedGrowthReport {
                    device: d.index,
                    growth,
                }),
        );
        steps.extend(
            f.steps
                .iter()
                .filter(|s| s.is_iteration())
                .map(|s| StepReport {
                    device: d.index,
                    name: s.name.clone(),
                    start_event: Some(s.start_event.0),
                    end_event: Some(s.end_event.0),
                    peak_allocated_bytes: s.peak_allocated_bytes,
                    end_allocated_bytes: s.end_allocated_bytes,
                    source: s.source,
                    from_start: None,
                }),
        );
        devices.push(f.report);
        products.push(DeviceProduct {
            timeline: tl,
            steps: f.steps,
            classifier,
        });
    }
    let categories = shown_categories(&devices);
    if snap.layout == Layout::Torch20 {
        notes.push(SnapshotNote::Torch20.into());
    }
    if snap.devices.is_empty() {
        notes.push(SnapshotNote::Empty.into());
    }
    let reserved: Vec<(u32, Option<u64>)> = devices
        .iter()
        .map(|d| (d.device, d.reserved_bytes))
        .collect();
    let device = super::device::section(snap, &reserved);
    let analysis = Analysis {
        schema: SCHEMA,
        input: Input {
            path: path.display().to_string(),
            kind: CaptureKind::Snapshot,
            bytes: file_bytes,
            layout: Some(snap.layout),
            origin: snap
                .device_record
                .as_ref()
                .map(|r| r.origin.clone())
                .filter(|o| *o != crate::model::Origin::default()),
            load_notes: snap.load_notes.clone(),
        },
        verdict: verdict::with_outside_oom(verdict::of_snapshot(&devices, &leaks), &device),
        device: Some(device),
        devices,
        leaks,
        bounded_growth,
        excluded_growth,
        steps,
        categories,
        graph: None,
        notes,
    };
    // One pass over the log per leak, each on its own: split across the threads.
    let leak_series = crate::threads::map(threads, &analysis.leaks, |l| {
        leaks::series::of(snap, &analysis, l)
    });
    Analyzed {
        analysis,
        per_device: products,
        leak_series,
    }
}
