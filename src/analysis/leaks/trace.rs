//! Leaks in a profiler trace: the survivors `trace_memory` found, grouped into findings and
//! judged by the same rules as a snapshot's sites ([`super::rules::classify_trace`]).
//!
//! One finding per thing the user fixes. Survivors kept across the steps by the same loop (the
//! same `keeper`: the frame that was running when profiling began) are one finding, however
//! many sites made them: one retained graph, or one list of kept tensors. Without a keeper (no
//! Python stacks), one finding per allocating site. The rules that read a trace then say what
//! shape the group is; those that read what a trace lacks (requested sizes, module calls) never
//! fire on one, and their rows say so ([`super::rules::OnTrace`]).

use super::{
    classify_trace, r_squared, Blame, Extent, Leak, LeakEvidence, RelatedSite, StepLabel,
    TraceEvidence, TraceSiteEvidence,
};
use crate::analysis::trace_memory::LiveGrowth;
use crate::model::{EventIdx, Site};

/// A group's sites, largest first: (site, bytes, count, ops).
type Sites = Vec<(Option<Site>, u64, u64, Vec<String>)>;

/// The leak findings of one device's survivors, largest growth first.
pub fn find(growth: &[LiveGrowth], steps: &[String]) -> Vec<Leak> {
    let n_steps = growth
        .iter()
        .map(|g| g.per_step_bytes.len())
        .max()
        .unwrap_or(0);
    let mut out: Vec<Leak> = groups(growth)
        .into_iter()
        .map(|gs| finding(&gs, n_steps, steps))
        .collect();
    out.sort_by(|a, b| b.grown_bytes().total_cmp(&a.grown_bytes()));
    out
}

/// The survivors grouped by the loop that keeps them, or without one, by their site.
fn groups(growth: &[LiveGrowth]) -> Vec<Vec<&LiveGrowth>> {
    type Key = (Option<(String, String)>, Option<Site>);
    let mut groups: Vec<(Key, Vec<&LiveGrowth>)> = Vec::new();
    for g in growth {
        let key: Key = match &g.keeper {
            Some(k) => (Some((k.file.clone(), k.function.clone())), None),
            None => (None, g.site.clone()),
        };
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(g),
            None => groups.push((key, vec![g])),
        }
    }
    groups.into_iter().map(|(_, v)| v).collect()
}

/// One group's evidence, what the rules judge, and its sites largest first.
struct Group {
    ev: TraceSiteEvidence,
    sites: Sites,
    per_step: Vec<u64>,
}

fn gather(gs: &[&LiveGrowth], n_steps: usize) -> Group {
    let mut sites: Sites = Vec::new();
    let mut per_step = vec![0u64; n_steps];
    let (mut total, mut graph_bytes, mut with_live, mut count) = (0u64, 0u64, 0, 0u64);
    for g in gs {
        for (i, b) in g.per_step_bytes.iter().enumerate() {
            per_step[i] += b;
        }
        let c: u64 = g.per_step_count.iter().map(|&c| c as u64).sum();
        total += g.total_bytes;
        graph_bytes += g.graph_bytes;
        with_live = with_live.max(g.steps_with_live);
        count += c;
        let i = match sites.iter().position(|x| x.0 == g.site) {
            Some(i) => i,
            None => {
                sites.push((g.site.clone(), 0, 0, Vec::new()));
                sites.len() - 1
            }
        };
        sites[i].1 += g.total_bytes;
        sites[i].2 += c;
        sites[i].3.extend(g.op.clone());
    }
    sites.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Group {
        ev: TraceSiteEvidence {
            total_bytes: total,
            graph_bytes,
            count,
            sites: sites.len(),
            steps_with_live: with_live,
            profiled_steps: n_steps,
        },
        sites,
        per_step,
    }
}

/// R² of the straight-line fit of the cumulative survivors over the steps.
fn cumulative_r2(per_step: &[u64]) -> f64 {
    let mut acc = 0.0;
    let ys: Vec<f64> = per_step
        .iter()
        .map(|&b| {
            acc += b as f64;
            acc
        })
        .collect();
    r_squared(&ys)
}

/// A group's finding, of the kind the rules give it.
fn finding(gs: &[&LiveGrowth], n_steps: usize, steps: &[String]) -> Leak {
    let n = n_steps.max(1) as f64;
    let Group {
        ev,
        sites,
        per_step,
    } = gather(gs, n_steps);
    let judged = classify_trace(&ev);
    let keeper = gs[0].keeper.clone();
    let (main_site, main_bytes, main_count, _) = sites[0].clone();
    let ops: Vec<String> = {
        let mut v: Vec<String> = sites.iter().flat_map(|x| x.3.clone()).collect();
        v.dedup();
        v.truncate(6);
        v
    };
    let steps_with_live = ev.steps_with_live;
    let evidence = LeakEvidence::Trace(TraceEvidence {
        per_step_bytes: (ev.total_bytes as f64 / n) as u64,
        group: ev,
        main_site: main_site.clone(),
        main_bytes,
        ops,
        keeper: keeper.clone(),
    });
    Leak {
        kind: judged.kind,
        // Alive when profiling stopped: a trace sees only its profiled steps.
        extent: Extent::Alive,
        release: None,
        allocation_site: main_site.clone(),
        site: main_site.clone(),
        blame: Blame::AllocatingLine,
        line_known: false,
        // The keeper named apart only where it is not the function that allocated.
        cause_site: keeper.filter(|k| {
            main_site
                .as_ref()
                .is_none_or(|m| (&m.file, &m.function) != (&k.file, &k.function))
        }),
        kept_by: gs.iter().find_map(|g| g.kept_by.clone()),
        confidence: judged.confidence,
        live_bytes: main_bytes,
        freed_by_fix_at_least: None,
        count: main_count,
        growth_bytes_per_step: main_bytes as f64 / n,
        growth_tensors_per_step: main_count as f64 / n,
        steps: steps_with_live,
        first_step: StepLabel::Step(steps.first().cloned().unwrap_or_default()),
        last_step: StepLabel::Step(steps.last().cloned().unwrap_or_default()),
        window_start_event: EventIdx(0),
        window_end_event: EventIdx(0),
        r2: cumulative_r2(&per_step),
        evidence,
        ruled_out: None,
        samples: Vec::new(),
        related_sites: sites[1..]
            .iter()
            .map(|(site, b, c, _)| RelatedSite {
                site: site.clone(),
                live_bytes: *b,
                count: *c,
                growth_bytes_per_step: *b as f64 / n,
                growth_tensors_per_step: *c as f64 / n,
            })
            .collect(),
        stack: Vec::new(),
    }
}
