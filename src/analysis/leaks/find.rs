//! Finding the leaks of one device: the candidates whose survivors grow along a straight line,
//! the second pass that gathers their survivors' details, the evidence the rules judge, and the
//! grouping of sites that grow together into one finding.

#[allow(unused_imports)]
use super::*;

/// A site whose survivors grew, before grouping.
#[derive(Clone, Debug)]
pub(super) struct Candidate {
    pub(super) site: SiteId,
    pub(super) window: Window,
    pub(super) slope_bytes: f64,
    pub(super) slope_count: f64,
    pub(super) r2: f64,
    pub(super) live_bytes: u64,
    pub(super) count: u64,
    /// The figures against the benign readings (`steps_to_peak` is filled in per finding).
    pub(super) ruled: RuledOut,
}

/// Survivor details of one candidate, from the second pass.
#[derive(Clone, Debug, Default)]
pub(super) struct Details {
    pub(super) survivors: Vec<(u64, Rec)>,
    pub(super) stack_bytes: HashMap<StackId, u64>,
    /// Allocations the site made inside the window, survivors or not.
    pub(super) allocations: usize,
    /// Bytes of those survivors still alive at the judgement point (the end, or the last OOM).
    pub(super) persisting_bytes: u64,
}

impl Details {
    pub(super) fn grown_bytes(&self) -> u64 {
        self.survivors
            .iter()
            .fold(0u64, |t, (_, r)| t.saturating_add(r.size))
    }
    pub(super) fn persisting_share(&self) -> f64 {
        let g = self.grown_bytes();
        if g == 0 {
            return 0.0;
        }
        self.persisting_bytes as f64 / g as f64
    }
}

/// Finds the leaks of one device. `steps` comes from [`steps::split`].
pub fn find(snap: &Snapshot, dev: &Device, tl: &Timeline, steps: &[Step]) -> Findings {
    find_on(snap, dev, tl, steps, crate::threads::wanted())
}

/// [`find`] with the survivors walked on `threads` threads where the log is long enough
/// ([`SPLIT_MIN_VAR`]); the findings are the serial search's either way.
pub fn find_on(
    snap: &Snapshot,
    dev: &Device,
    tl: &Timeline,
    steps: &[Step],
    threads: usize,
) -> Findings {
    let mut bounds = steps::boundaries(steps);
    // A run that ended in an OOM is also sampled at the OOM: what grew up to it is what filled
    // the memory, and the step the OOM interrupted never reaches a boundary.
    let oom = tl.ooms.last().map(|o| o.event.0 as usize);
    let oom_sample = oom.filter(|&o| bounds.last().is_none_or(|b| o > b.0));
    if let Some(o) = oom_sample {
        let step = steps
            .iter()
            .position(|s| s.contains(o))
            .unwrap_or(steps.len().saturating_sub(1));
        bounds.push((o, step));
    }
    let min_bounds = if oom_sample.is_some() {
        OOM_MIN_RISING_STEPS + 1
    } else {
        MIN_RISING_STEPS + 1
    };
    if bounds.len() < min_bounds {
        return Findings::default();
    }
    let allocated_at_oom = oom
        .and_then(|o| tl.series.allocated.get(o).copied())
        .unwrap_or(0);
    let mut sites = SiteTable::new(&snap.stacks);
    let surv = walk_on(dev, snap, &mut sites, &bounds, threads);
    let nb = bounds.len();
    // Boundaries of complete steps: the OOM's sample ends no step.
    let complete = nb - usize::from(oom_sample.is_some());
    let peak = tl.peaks.allocated.bytes;
    let sampling = Sampling {
        bounds: &bounds,
        min_bounds,
        complete,
        oom_sample: oom_sample.is_some(),
        allocated_at_oom,
    };
    let Scanned {
        cands,
        irregular: irregular_cands,
        mut excluded,
    } = scan_sites(dev, &mut sites, &surv, &sampling);
    let loop_frame = loop_frame(snap, dev, steps);
    let judge_at = tl
        .ooms
        .last()
        .map(|o| o.event.0 as usize)
        .unwrap_or(dev.events.len().saturating_sub(1));
    let irregular_leaks = irregular_findings(
        snap,
        dev,
        steps,
        &bounds,
        &mut sites,
        &irregular_cands,
        judge_at,
        loop_frame,
    );
    let irregular_leaks = keep_material(irregular_leaks, peak, &mut excluded);
    if cands.is_empty() {
        return Findings {
            leaks: irregular_leaks,
            bounded_growth: Vec::new(),
            excluded,
        };
    }
    // Growth persists when what grew is still alive where the capture ends, or at its last
    // OOM (what the program freed while unwinding from the OOM does not count).
    let details = second_pass(dev, snap, &mut sites, &bounds, &cands, judge_at);
    let model = ModelCode::new(&snap.stacks);
    // What grew and was mostly freed by the end is judged over the loop's life: freed only
    // after the loop (or all at once each epoch) it is still an accumulation; freed while the
    // steps went on it was bounded (`extent` module docs).
    let freed = extent::scan(dev, &bounds, &cands, &details, judge_at);
    let mut keep = Vec::new();
    let mut extents: Vec<(Extent, Option<Release>)> = Vec::new();
    let mut bounded = Vec::new();
    for (ci, d) in details.iter().enumerate() {
        if d.persisting_share() >= MIN_PERSISTING_SHARE {
            keep.push(ci);
            extents.push((Extent::Alive, None));
            continue;
        }
        let (b, _) = surv.series(cands[ci].site, nb);
        match extent::judge(&b, &cands[ci], freed[ci], &bounds) {
            Some(j) => {
                let share = 1.0 - d.persisting_share();
                let rel = extent::release(snap, dev, freed[ci], &j, share, loop_frame);
                keep.push(ci);
                extents.push((j.extent, rel));
            }
            None => bounded.push(ci),
        }
    }
    let pick = |v: &[usize]| -> (Vec<Candidate>, Vec<Details>) {
        (
            v.iter().map(|&i| cands[i].clone()).collect(),
            v.iter().map(|&i| details[i].clone()).collect(),
        )
    };
    let (b_cands, b_details) = pick(&bounded);
    let bounded_growth = b_cands
        .iter()
        .zip(&b_details)
        .map(|(c, d)| BoundedGrowth {
            site: sites.site(c.site),
            growth_bytes_per_step: c.slope_bytes,
            steps: c.window.end - c.window.start,
            grown_bytes: d.grown_bytes(),
            freed_share: 1.0 - d.persisting_share(),
        })
        .collect();
    let (cands, details) = pick(&keep);
    let evidence: Vec<SiteEvidence> = cands
        .iter()
        .zip(&details)
        .map(|(c, d)| evidence_of(dev, snap, &mut sites, &model, c, d))
        .collect();
    let mut leaks = group(
        snap, dev, steps, &bounds, &sites, &cands, &details, &evidence, &extents, loop_frame,
    );
    // Growth over fewer steps than a finding normally needs stands only as the OOM's leak:
    // the finding's sites together held most of the memory allocated at the OOM.
    leaks.retain(|l| {
        let short = l.steps < MIN_RISING_STEPS;
        let held = l.live_bytes + l.related_sites.iter().map(|r| r.live_bytes).sum::<u64>();
        !short || held as f64 >= OOM_DOMINANT_SHARE * allocated_at_oom as f64
    });
    let mut leaks = keep_material(leaks, peak, &mut excluded);
    leaks.extend(irregular_leaks);
    leaks.sort_by_key(|l| std::cmp::Reverse(l.bytes_at_stake()));
    Findings {
        leaks,
        bounded_growth,
        excluded,
    }
}

/// Most bounded containers whose bound is counted by a pass of its own over the log
/// ([`benign::bound_entries`]).
pub const MAX_BOUND_PASSES: usize = 8;

/// How the survivors were sampled: at the boundaries of complete steps, and at the OOM.
struct Sampling<'a> {
    bounds: &'a [(usize, usize)],
    /// Fewest boundaries a linear growth window needs.
    min_bounds: usize,
    /// Boundaries of complete steps (the OOM's sample ends no step).
    complete: usize,
    oom_sample: bool,
    allocated_at_oom: u64,
}

/// What the scan of every site's series found.
struct Scanned {
    /// Linear growth no benign reading explains.
    cands: Vec<Candidate>,
    /// Irregular growth, with the boundaries at which it gained.
    irregular: Vec<(Candidate, Vec<usize>)>,
    /// Growth a benign reading explains.
    excluded: Vec<ExcludedGrowth>,
}

/// Every site's series judged: a straight-line growth window (or growth up to the OOM), then
/// the benign readings, else irregular growth.
fn scan_sites(dev: &Device, sites: &mut SiteTable, surv: &Survivors, s: &Sampling) -> Scanned {
    let nb = s.bounds.len();
    let mut bound_passes = 0usize;
    let mut cands: Vec<Candidate> = Vec::new();
    let mut irregular_cands: Vec<(Candidate, Vec<usize>)> = Vec::new();
    let mut excluded: Vec<ExcludedGrowth> = Vec::new();
    for (k, ch) in surv.changes.iter().enumerate() {
        if ch.len() < (s.min_bounds - 1).min(irregular::MIN_GAINS) {
            continue;
        }
        let site = SiteId(k as u32);
        let (b, c) = surv.series(site, nb);
        let ev = surv.evicted(site, nb);
        let series = benign::SiteSeries {
            bytes: &b,
            blocks: &c,
            evicted: &ev,
        };
        // Growth that ran up to the OOM and holds most of what was allocated there is the
        // OOM's leak even over a few steps (an inference server keeping every request's cache).
        let up_to_oom = || {
            growth_window_min(&b, OOM_MIN_RISING_STEPS).filter(|w| {
                // Up to the OOM, or to the last step's end before it (the step the OOM
                // interrupted may not have added to it yet).
                s.oom_sample
                    && w.end + 2 >= nb
                    && b[nb - 1] >= b[w.end]
                    && b[nb - 1] as f64 >= OOM_SITE_SHARE * s.allocated_at_oom as f64
            })
        };
        let window = if ch.len() >= s.min_bounds - 1 {
            growth_window(&b).or_else(up_to_oom)
        } else {
            None
        };
        let linear = window.and_then(|w| {
            let vb: Vec<f64> = b[w.start..=w.end].iter().map(|&x| x as f64).collect();
            let r2 = r_squared(&vb);
            let slope = theil_sen(&vb);
            (r2 >= MIN_R2 && slope > 0.0).then_some((w, r2, slope))
        });
        let Some((w, r2, slope_bytes)) = linear else {
            // Not a line: a cache that gains entries on some steps and never frees them.
            if let Some((gains, w)) = irregular::find(&series, s.complete) {
                let cand = candidate(site, w, &b, &c, &ev, s.complete);
                irregular_cands.push((cand, gains));
            }
            continue;
        };
        let vc: Vec<f64> = c[w.start..=w.end].iter().map(|&x| x as f64).collect();
        // Each bound is one more pass over the log: at most MAX_BOUND_PASSES of them, so the
        // cost stays linear (beyond them, the bound is the site's block count).
        let refine = bound_passes < MAX_BOUND_PASSES;
        let benign = benign_reading(dev, sites, s.bounds, site, &series, w, s.complete, refine);
        bound_passes += usize::from(refine && benign.is_some());
        if let Some(reading) = benign {
            excluded.push(ExcludedGrowth {
                site: sites.site(site),
                growth_bytes_per_step: slope_bytes,
                steps: w.end - w.start,
                live_bytes: b[w.end],
                count: c[w.end],
                reading,
            });
            continue;
        }
        cands.push(Candidate {
            slope_bytes,
            slope_count: theil_sen(&vc),
            r2,
            ..candidate(site, w, &b, &c, &ev, s.complete)
        });
    }
    Scanned {
        cands,
        irregular: irregular_cands,
        excluded,
    }
}

/// The benign reading of a linear growth window, if one applies. A container at its bound whose
/// entries outlive a step (an LRU of masks) is read as such even where its blocks also stayed
/// constant over the growth; one block replaced each step (a curriculum's input) is a replacement.
#[allow(clippy::too_many_arguments)]
fn benign_reading(
    dev: &Device,
    sites: &mut SiteTable,
    bounds: &[(usize, usize)],
    site: SiteId,
    series: &benign::SiteSeries,
    w: Window,
    complete: usize,
    refine: bool,
) -> Option<BenignReading> {
    let bounded = benign::bounded(series, w, complete).map(|mut r| {
        if let (true, BenignReading::BoundedContainer { bound_blocks, .. }) = (refine, &mut r) {
            let span = (w.start, w.end, complete - 1);
            let kept = benign::bound_entries(dev, sites, bounds, site, span);
            *bound_blocks = kept.unwrap_or(*bound_blocks);
        }
        r
    });
    let kept_entries = matches!(
        bounded,
        Some(BenignReading::BoundedContainer { bound_blocks, .. }) if bound_blocks >= 2
    );
    if kept_entries {
        bounded
    } else {
        benign::replacement(series, w).or(bounded)
    }
}

/// A candidate over window `w` with its figures from the series (slopes from the window's ends;
/// the linear search replaces them with robust fits).
fn candidate(
    site: SiteId,
    w: Window,
    b: &[u64],
    c: &[u64],
    ev: &[u64],
    complete: usize,
) -> Candidate {
    let span = (w.end - w.start).max(1) as f64;
    let vb: Vec<f64> = b[w.start..=w.end].iter().map(|&x| x as f64).collect();
    let last = complete.clamp(w.end + 1, b.len()) - 1;
    Candidate {
        site,
        window: w,
        slope_bytes: b[w.end].saturating_sub(b[w.start]) as f64 / span,
        slope_count: c[w.end].saturating_sub(c[w.start]) as f64 / span,
        r2: r_squared(&vb),
        live_bytes: b[w.end],
        count: c[w.end],
        ruled: RuledOut {
            blocks_at_start: c[w.start],
            blocks_at_end: c[w.end],
            steps_after: last - w.end,
            evicted_after: ev[last].saturating_sub(ev[w.end]),
            steps_to_peak: None,
            peak_allocated_bytes: 0,
        },
    }
}

/// Fills in each finding's figures against the peak, and moves immaterial growth
/// ([`benign::MATERIAL_STEPS`]) to `excluded`. A finding whose survivors are scalars (a kept
/// loss, which holds its autograd graph) is exempt.
fn keep_material(leaks: Vec<Leak>, peak: u64, excluded: &mut Vec<ExcludedGrowth>) -> Vec<Leak> {
    let mut kept = Vec::with_capacity(leaks.len());
    for mut l in leaks {
        let scalars = match &l.evidence {
            LeakEvidence::Log(e) => e.max_requested <= 16,
            _ => false,
        };
        let per_step = l.growth_bytes_per_step
            + l.related_sites
                .iter()
                .map(|r| r.growth_bytes_per_step)
                .sum::<f64>();
        let to_peak = benign::steps_to_peak(per_step, peak);
        if let Some(r) = &mut l.ruled_out {
            r.peak_allocated_bytes = peak;
            r.steps_to_peak = (!scalars).then_some(to_peak);
        }
        if scalars || !benign::immaterial(per_step, peak) {
            kept.push(l);
            continue;
        }
        excluded.push(ExcludedGrowth {
            site: l.site.clone(),
            growth_bytes_per_step: per_step,
            steps: l.steps,
            live_bytes: l.bytes_at_stake(),
            count: l.count,
            reading: BenignReading::Immaterial {
                kind: l.kind,
                peak_allocated_bytes: peak,
                steps_to_peak: to_peak,
            },
        });
    }
    kept
}

/// The irregular growth findings: one more pass gathers their survivors.
#[allow(clippy::too_many_arguments)]
fn irregular_findings(
    snap: &Snapshot,
    dev: &Device,
    steps: &[Step],
    bounds: &[(usize, usize)],
    sites: &mut SiteTable,
    found: &[(Candidate, Vec<usize>)],
    judge_at: usize,
    loop_frame: Option<(Sym, Sym)>,
) -> Vec<Leak> {
    if found.is_empty() {
        return Vec::new();
    }
    let cands: Vec<Candidate> = found.iter().map(|(c, _)| c.clone()).collect();
    let details = second_pass(dev, snap, sites, bounds, &cands, judge_at);
    found
        .iter()
        .zip(&details)
        .map(|((c, gains), d)| {
            irregular::leak(
                snap,
                dev,
                steps,
                bounds,
                sites,
                c,
                d,
                gains,
                loop_frame,
                c.ruled.clone(),
            )
        })
        .collect()
}

/// Least rising boundaries for growth that runs up to an OOM and holds at least
/// [`OOM_DOMINANT_SHARE`] of the memory allocated there.
pub const OOM_MIN_RISING_STEPS: usize = 3;
/// Share of the allocated memory at an OOM that a finding's sites together must hold for
/// growth over fewer steps than [`MIN_RISING_STEPS`] to be the OOM's leak.
pub const OOM_DOMINANT_SHARE: f64 = 0.5;
/// Share each such site must hold on its own to be considered.
pub const OOM_SITE_SHARE: f64 = 0.2;

/// Least share of a site's allocations in the window that survive for a retained graph: a
/// forward with autograd keeps what it saves for backward (on real captures 0.3 and more of
/// the site's allocations); a cache keeps one result of many (a KV cache grown by `torch.cat`
/// per token keeps about one in seventeen).
pub const MIN_GRAPH_SURVIVAL: f64 = 0.2;

/// Share of a candidate's grown bytes that must still be alive at the end (or the OOM) for
/// the growth to be a leak: a bounded cache (`deque(maxlen=N)`) or a list trimmed to its last
/// entries grows for a while and then releases its oldest tensors.
pub const MIN_PERSISTING_SHARE: f64 = 0.5;

/// Growth that stopped and was released: a bounded cache, warm-up, memory freed later. Not a
/// leak; reported so that a user who sees memory rise for a while knows why it was not flagged.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct BoundedGrowth {
    pub site: Option<Site>,
    pub growth_bytes_per_step: f64,
    pub steps: usize,
    /// Bytes the site's survivors gained over the growth.
    pub grown_bytes: u64,
    /// Share of those bytes freed by the end of the capture (or its last OOM).
    pub freed_share: f64,
}

/// What the leak search found on one device.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Findings {
    /// Ranked by bytes at stake ([`Leak::bytes_at_stake`]).
    pub leaks: Vec<Leak>,
    pub bounded_growth: Vec<BoundedGrowth>,
    /// Growth a benign reading explains ([`benign`]).
    pub excluded: Vec<ExcludedGrowth>,
}

/// The user's frame that runs the steps' loop: across the allocations of the steps, the first
/// depth of their user chains ([`loops::user_chain`]) where the lines differ, the function
/// being the same. Blame for memory kept across steps lands on that frame's line: the line of
/// the loop body the memory came from.
pub(super) fn loop_frame(snap: &Snapshot, dev: &Device, steps: &[Step]) -> Option<(Sym, Sym)> {
    let mut memo: HashMap<StackId, Vec<(Sym, Sym, u32)>> = HashMap::default();
    // The shallowest frame whose line moves between consecutive allocations (each compared
    // with the one before it, so that a short chain, an optimizer's allocation under the call
    // line alone, hides nothing), and its function.
    let mut found: Option<(usize, (Sym, Sym))> = None;
    let mut prev: Option<Vec<(Sym, Sym, u32)>> = None;
    // The first step also holds what ran before the loop (steps cut at `Optimizer.step` ends
    // begin at the log's start): skip it where there are others.
    let iterations = steps.iter().filter(|s| s.is_iteration()).count();
    let skip = usize::from(iterations >= 3);
    for st in steps.iter().filter(|s| s.is_iteration()).skip(skip).take(8) {
        for e in &dev.events[st.start_event.0 as usize..=st.end_event.0 as usize] {
            if e.action != Action::Alloc {
                continue;
            }
            let ch = memo
                .entry(e.stack)
                .or_insert_with(|| loops::user_chain(&snap.stacks, e.stack));
            if ch.is_empty() {
                continue;
            }
            if let Some(p) = &prev {
                let m = p.len().min(ch.len());
                if let Some(k) = (0..m).find(|&k| p[k] != ch[k]) {
                    let same = (p[k].0, p[k].1) == (ch[k].0, ch[k].1);
                    if same && found.is_none_or(|(d, _)| k < d) {
                        found = Some((k, (ch[k].0, ch[k].1)));
                    }
                }
            }
            prev = Some(ch.clone());
        }
    }
    found.map(|(_, f)| f)
}

/// The line of `func` in a stack (the loop body's line the memory came from).
/// The holder a snapshot's stack shows between the loop line and the allocation
/// ([`super::kept_by`]).
fn kept_by_of(stacks: &Stacks, s: StackId, loop_line: Option<&Site>) -> Option<super::KeptBy> {
    let frames: Vec<super::kept_by::Framed> = stacks
        .frames(s)
        .iter()
        .map(|&f| {
            let fr = stacks.frame(f);
            super::kept_by::Framed {
                role: fr.role,
                kind: fr.kind,
                site: Site::from_frame(stacks, fr),
            }
        })
        .collect();
    // A hook dispatch frame alone shows only that the module has forward hooks, which FSDP2
    // and other wrappers register too (fixtures/ranks/multi40/fsdp2: rank 0's kept logits pass
    // through FSDP's hooks, and the user's list keeps them). Without the hook's own line, which
    // a snapshot never has, that is no evidence of what keeps the memory: no holder is claimed.
    super::kept_by::from_stack(&frames, loop_line)
        .map(|(k, _)| k)
        .filter(|k| !(k.mechanism == super::kept_by::Mechanism::ForwardHook && k.site.is_none()))
}

pub(super) fn line_in(stacks: &Stacks, s: StackId, func: (Sym, Sym)) -> Option<Site> {
    stacks.frames(s).iter().rev().find_map(|&f| {
        let fr = stacks.frame(f);
        ((fr.file, fr.name) == func).then(|| Site {
            file: stacks.str(fr.file).to_owned(),
            line: fr.line,
            function: stacks.str(fr.name).to_owned(),
        })
    })
}

pub(super) fn second_pass(
    dev: &Device,
    snap: &Snapshot,
    sites: &mut SiteTable,
    bounds: &[(usize, usize)],
    cands: &[Candidate],
    judge_at: usize,
) -> Vec<Details> {
    // Boundary -> candidates whose window ends there.
    let mut at: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (ci, c) in cands.iter().enumerate() {
        at.entry(bounds[c.window.end].0).or_default().push(ci);
    }
    let mut out = vec![Details::default(); cands.len()];
    // Site -> candidates, to count each candidate's allocations inside its window in this pass.
    let mut by_site: HashMap<SiteId, Vec<usize>> = HashMap::default();
    for (ci, c) in cands.iter().enumerate() {
        by_site.entry(c.site).or_default().push(ci);
    }
    let mut live: HashMap<u64, Rec> = HashMap::default();
    let last = at.keys().next_back().copied().unwrap_or(0);
    for i in 0..=last.min(dev.events.len().saturating_sub(1)) {
        apply(dev, snap, sites, &mut live, i);
        if dev.events[i].action == Action::Alloc {
            if let Some(cs) = by_site.get(&sites.of(dev.events[i].stack)) {
                for &ci in cs {
                    let w = cands[ci].window;
                    if i > bounds[w.start].0 && i <= bounds[w.end].0 {
                        out[ci].allocations += 1;
                    }
                }
            }
        }
        let Some(cs) = at.get(&i) else { continue };
        for &ci in cs {
            let c = &cands[ci];
            let from = bounds[c.window.start].0 as u32;
            let d = &mut out[ci];
            for (&addr, r) in &live {
                if r.site == c.site && r.alloc > from {
                    d.survivors.push((addr, *r));
                    *d.stack_bytes
                        .entry(dev.events[r.alloc as usize].stack)
                        .or_default() += r.size;
                }
            }
            d.survivors.sort_by_key(|(_, r)| r.alloc);
        }
    }
    // On to the judgement point: which survivors are still alive there.
    let end = judge_at.min(dev.events.len().saturating_sub(1));
    for i in (last + 1)..=end {
        apply(dev, snap, sites, &mut live, i);
    }
    for d in &mut out {
        d.persisting_bytes = d
            .survivors
            .iter()
            .filter(|(addr, r)| live.get(addr).is_some_and(|x| x.alloc == r.alloc))
            .map(|(_, r)| r.size)
            .sum();
    }
    out
}

/// Number of module `forward` frames in a stack (2 or more: a layer inside a model).
pub(super) fn forward_depth(stacks: &Stacks, s: StackId) -> usize {
    stacks
        .frames(s)
        .iter()
        .filter(|&&f| {
            let fr = stacks.frame(f);
            fr.kind == FrameKind::Torch
                && stacks.str(fr.file).contains("torch/nn/modules/")
                && stacks.str(fr.name) == "forward"
        })
        .count()
}

pub(super) fn in_module(stacks: &Stacks, s: StackId) -> bool {
    stacks.frames(s).iter().any(|&f| {
        let fr = stacks.frame(f);
        fr.kind == FrameKind::Torch && stacks.str(fr.file).contains("torch/nn/modules/")
    })
}

/// Whether the innermost frame that is not native is the user's own.
pub(super) fn direct_user(stacks: &Stacks, s: StackId) -> bool {
    stacks
        .first_python_frame(s)
        .is_some_and(|f| f.kind == FrameKind::User)
}

pub(super) fn evidence_of(
    dev: &Device,
    snap: &Snapshot,
    sites: &mut SiteTable,
    _model: &ModelCode,
    c: &Candidate,
    d: &Details,
) -> SiteEvidence {
    let st = &snap.stacks;
    let n = d.survivors.len().max(1) as f64;
    let mut in_mod = 0usize;
    let mut inter = 0usize;
    let mut direct = 0usize;
    let mut max_req = 0u64;
    let mut nested = 0usize;
    let mut scalars = 0usize;
    for (_, r) in &d.survivors {
        let e = &dev.events[r.alloc as usize];
        max_req = max_req.max(r.requested);
        if forward_depth(st, e.stack) >= 2 {
            nested += 1;
        }
        if r.requested <= 16 {
            scalars += 1;
        }
        if in_module(st, e.stack) {
            in_mod += 1;
        }
        if direct_user(st, e.stack) {
            direct += 1;
        }
        // The next allocation: same site, under a module call too -> an intermediate.
        let next = dev.events[r.alloc as usize + 1..]
            .iter()
            .find(|x| x.action == Action::Alloc);
        if let Some(x) = next {
            if sites.of(x.stack) == c.site && in_module(st, x.stack) {
                inter += 1;
            }
        }
    }
    SiteEvidence {
        site: sites.site(c.site),
        growth_bytes_per_step: c.slope_bytes,
        growth_tensors_per_step: c.slope_count,
        steps: c.window.end - c.window.start,
        r2: c.r2,
        live_bytes: c.live_bytes,
        count: c.count,
        survivors: d.survivors.len(),
        max_requested: max_req,
        in_module_share: in_mod as f64 / n,
        survival_share: d.survivors.len() as f64 / d.allocations.max(1) as f64,
        intermediate_share: inter as f64 / n,
        direct_share: direct as f64 / n,
        nested_share: nested as f64 / n,
        scalars_per_step: scalars as f64 / (c.window.end - c.window.start).max(1) as f64,
    }
}

/// `(file, function)` of the user frames of a stack, the module level excepted.
pub(super) fn user_functions(stacks: &Stacks, s: StackId) -> impl Iterator<Item = (Sym, Sym)> + '_ {
    stacks.frames(s).iter().filter_map(move |&f| {
        let fr = stacks.frame(f);
        (fr.kind == FrameKind::User && stacks.str(fr.name) != "<module>")
            .then_some((fr.file, fr.name))
    })
}

/// The user line (in `func`) that ran backward during the candidate's window, and in how many
/// of the window's steps it did.
pub(super) fn backward_site(
    snap: &Snapshot,
    dev: &Device,
    bounds: &[(usize, usize)],
    c: &Candidate,
    func: Option<(Sym, Sym)>,
) -> Option<(Site, usize)> {
    let func = func?;
    let st = &snap.stacks;
    let mut by_line: HashMap<u32, std::collections::BTreeSet<usize>> = HashMap::default();
    let mut memo: HashMap<StackId, Option<u32>> = HashMap::default();
    for k in c.window.start..c.window.end {
        let (from, to) = (bounds[k].0 + 1, bounds[k + 1].0);
        for e in dev.events.get(from..=to).unwrap_or(&[]) {
            if e.action != Action::Alloc {
                continue;
            }
            let line = *memo.entry(e.stack).or_insert_with(|| {
                let frames = st.frames(e.stack);
                let in_backward = frames.iter().any(|&f| {
                    let fr = st.frame(f);
                    fr.kind == FrameKind::Torch && stacks_backward(fr)
                });
                if !in_backward {
                    return None;
                }
                frames
                    .iter()
                    .map(|&f| st.frame(f))
                    .find(|fr| fr.kind == FrameKind::User && (fr.file, fr.name) == func)
                    .map(|fr| fr.line)
            });
            if let Some(l) = line {
                by_line.entry(l).or_default().insert(k);
            }
        }
    }
    let (line, ks) = by_line
        .into_iter()
        .max_by_key(|(l, ks)| (ks.len(), std::cmp::Reverse(*l)))?;
    let steps = c.window.end - c.window.start;
    (ks.len() * 2 >= steps).then(|| {
        (
            Site {
                file: st.str(func.0).to_owned(),
                line,
                function: st.str(func.1).to_owned(),
            },
            ks.len(),
        )
    })
}

/// A frame that starts a backward (its role: `Tensor.backward`, `torch.autograd.backward`).
pub(super) fn stacks_backward(fr: &crate::model::Frame) -> bool {
    fr.role.contains(crate::model::FrameRole::BACKWARD_ENTRY)
}

pub(super) fn samples(dev: &Device, d: &Details) -> Vec<Sample> {
    let v = &d.survivors;
    let pick: Vec<usize> = if v.len() <= 5 {
        (0..v.len()).collect()
    } else {
        vec![0, 1, 2, v.len() - 2, v.len() - 1]
    };
    pick.into_iter()
        .map(|i| {
            let (addr, r) = v[i];
            Sample {
                address: addr,
                size: r.size,
                requested_size: r.requested,
                alloc_event: EventIdx(r.alloc),
                time_us: dev.events[r.alloc as usize].time_us(),
            }
        })
        .collect()
}

/// Groups candidates of one function whose windows overlap into one finding: the site that
/// grew most is the finding's site, the others are related. For a retained graph, a small
/// one-per-step survivor after it in the same function is taken as the cause (module docs).
#[allow(clippy::too_many_arguments)]
pub(super) fn group(
    snap: &Snapshot,
    dev: &Device,
    steps: &[Step],
    bounds: &[(usize, usize)],
    sites: &SiteTable,
    cands: &[Candidate],
    details: &[Details],
    evidence: &[SiteEvidence],
    extents: &[(Extent, Option<Release>)],
    loop_frame: Option<(Sym, Sym)>,
) -> Vec<Leak> {
    // Each candidate's heaviest stack, and the loop body's line it came from.
    let heaviest: Vec<StackId> = details
        .iter()
        .map(|d| {
            d.stack_bytes
                .iter()
                .max_by_key(|(s, b)| (**b, std::cmp::Reverse(**s)))
                .map(|(s, _)| *s)
                .unwrap_or(StackId::EMPTY)
        })
        .collect();
    let loop_line: Vec<Option<Site>> = heaviest
        .iter()
        .map(|&h| loop_frame.and_then(|f| line_in(&snap.stacks, h, f)))
        .collect();
    let mut order: Vec<usize> = (0..cands.len()).collect();
    order.sort_by(|&a, &b| cands[b].slope_bytes.total_cmp(&cands[a].slope_bytes));
    let mut taken = vec![false; cands.len()];
    let mut out = Vec::new();
    for &m in &order {
        if taken[m] {
            continue;
        }
        taken[m] = true;
        let main = &cands[m];
        let ev = &evidence[m];
        let mat = classify(ev);
        let retained = mat.kind == LeakKind::RetainedGraph;
        let overlaps =
            |o: &Candidate| o.window.start <= main.window.end && main.window.start <= o.window.end;
        // Where the loop is known, blame and grouping happen at the loop body's lines: a
        // retained graph takes every line of the loop that grew over the same steps (the
        // forward's activations, the loss), one finding with its sites; any other shape takes
        // the sites reached from the same loop line. Without a loop frame, sites of one
        // function (or a helper called from it) are grouped, as the allocation shows them.
        let main_loop = loop_line[m].clone();
        let func = sites.function(main.site);
        let members: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&o| {
                if taken[o] || !overlaps(&cands[o]) || extents[o].0 != extents[m].0 {
                    return false;
                }
                match (&main_loop, &loop_line[o]) {
                    (Some(a), Some(b)) => retained || a.line == b.line,
                    (Some(_), None) => false,
                    (None, _) => {
                        func.is_some()
                            && (sites.function(cands[o].site) == func
                                || details[o].stack_bytes.keys().any(|&st| {
                                    user_functions(&snap.stacks, st).any(|f| Some(f) == func)
                                }))
                    }
                }
            })
            .collect();
        for &o in &members {
            taken[o] = true;
        }
        let line_of = |o: usize| -> u32 {
            loop_line[o]
                .as_ref()
                .or(evidence[o].site.as_ref())
                .map(|s| s.line)
                .unwrap_or(0)
        };
        let same_func = |o: usize| -> bool {
            match (&main_loop, &loop_line[o]) {
                (Some(_), Some(_)) => true,
                _ => sites.function(cands[o].site) == func,
            }
        };
        let main_line = line_of(m);
        // The graph's root: small (at most a few KiB per step, or 1/64 of the main site),
        // one or two tensors per step, on a later line of the same function.
        let cause = if retained {
            members
                .iter()
                .copied()
                .filter(|&o| {
                    let e = &evidence[o];
                    same_func(o)
                        && line_of(o) > main_line
                        && e.growth_tensors_per_step <= 3.5
                        && e.growth_bytes_per_step
                            <= (64.0 * 1024.0f64).max(ev.growth_bytes_per_step / 64.0)
                })
                .min_by_key(|&o| line_of(o))
        } else {
            None
        };
        // A backward pass run from the same function inside the window: the graph survived it.
        let backward = if retained {
            backward_site(snap, dev, bounds, main, loop_frame.or(func))
        } else {
            None
        };
        let mut confidence = mat.confidence;
        let mut cause_site = None;
        let backward_found = backward.is_some();
        let holder = if let Some((bsite, bsteps)) = backward {
            confidence = confidence.min(Confidence::Medium);
            cause_site = Some(bsite.clone());
            Some(Holder::RetainedBackward {
                site: bsite,
                backward_steps: bsteps,
            })
        } else if let Some(o) = cause {
            let cs = loop_line[o].clone().or_else(|| evidence[o].site.clone());
            cause_site = cs.clone();
            cs.map(|site| Holder::GraphRoot {
                site,
                tensors_per_step: evidence[o].growth_tensors_per_step,
                bytes_per_step: evidence[o].growth_bytes_per_step,
            })
        } else if retained && ev.scalars_per_step >= 0.5 {
            Some(Holder::LossOnSameLine {
                scalars_per_step: ev.scalars_per_step,
            })
        } else if retained {
            confidence = confidence.min(Confidence::Medium);
            Some(Holder::ForwardWithGrad)
        } else {
            None
        };
        let member_lines: Vec<Site> = members
            .iter()
            .filter_map(|&o| evidence[o].site.clone())
            .collect();
        let loop_line_of_call = match (&main_loop, &ev.site) {
            (Some(l), Some(a)) if l != a => Some(l.clone()),
            _ => None,
        };
        let blame = if backward_found {
            Blame::RetainedBackward
        } else if cause_site.is_some() {
            Blame::GraphRoot
        } else if main_loop.is_some() {
            Blame::LoopLine
        } else {
            Blame::AllocatingLine
        };
        let step =
            |i: usize| StepLabel::Step(steps.get(i).map(|s| s.name.clone()).unwrap_or_default());
        let first_step = step(bounds[main.window.start].1 + 1);
        let last_step = step(bounds[main.window.end].1);
        let heaviest = heaviest[m];
        let (extent, release) = extents[m].clone();
        let kept_by = kept_by_of(&snap.stacks, heaviest, main_loop.as_ref());
        out.push(Leak {
            kind: mat.kind,
            extent,
            release,
            site: main_loop.clone().or_else(|| ev.site.clone()),
            blame,
            line_known: true,
            allocation_site: ev.site.clone(),
            cause_site,
            kept_by,
            confidence,
            live_bytes: main.live_bytes,
            freed_by_fix_at_least: Some(
                std::iter::once(m)
                    .chain(members.iter().copied())
                    .map(|o| details[o].grown_bytes())
                    .sum(),
            ),
            count: main.count,
            growth_bytes_per_step: main.slope_bytes,
            growth_tensors_per_step: main.slope_count,
            steps: ev.steps,
            first_step,
            last_step,
            window_start_event: EventIdx(bounds[main.window.start].0 as u32),
            window_end_event: EventIdx(bounds[main.window.end].0 as u32),
            r2: main.r2,
            ruled_out: Some(main.ruled.clone()),
            evidence: LeakEvidence::Log(LogEvidence {
                site: ev.site.clone(),
                growth_bytes_per_step: ev.growth_bytes_per_step,
                growth_tensors_per_step: ev.growth_tensors_per_step,
                steps: ev.steps,
                live_bytes: ev.live_bytes,
                max_requested: ev.max_requested,
                holder,
                members: member_lines,
                loop_line: loop_line_of_call,
            }),
            samples: samples(dev, &details[m]),
            related_sites: members
                .iter()
                .map(|&o| RelatedSite {
                    site: evidence[o].site.clone(),
                    live_bytes: cands[o].live_bytes,
                    count: cands[o].count,
                    growth_bytes_per_step: cands[o].slope_bytes,
                    growth_tensors_per_step: cands[o].slope_count,
                })
                .collect(),
            stack: snap
                .stacks
                .frames(heaviest)
                .iter()
                .map(|&f| snap.stacks.frame_label(snap.stacks.frame(f)))
                .collect(),
        });
    }
    out.sort_by_key(|l| std::cmp::Reverse(l.bytes_at_stake()));
    out
}
