//! A leak's series: the bytes live from the finding's sites at the end of each step, the
//! curve the TUI draws under a finding. Computed once with the analysis (one pass over the
//! log per finding) and kept in the product, so no view walks the log for it.

use rustc_hash::FxHashMap as HashMap;

use crate::analysis::steps::StepSource;
use crate::analysis::{Analysis, LeakReport};
use crate::model::{Action as Ev, Site, Snapshot, StackId};

/// One finding's series.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LeakSeries {
    /// The names of the steps of the finding's device (the loop's iterations).
    pub steps: Vec<String>,
    /// At each of those steps' end: the bytes live from the finding's sites, allocated in the log.
    pub live_bytes: Vec<u64>,
}

/// The series of every finding of `a`, in `a.leaks` order.
pub fn all(snap: &Snapshot, a: &Analysis) -> Vec<LeakSeries> {
    a.leaks.iter().map(|l| of(snap, a, l)).collect()
}

/// Bytes live from a leak's sites at the end of each step of its device: one pass over the log.
pub(crate) fn of(snap: &Snapshot, a: &Analysis, l: &LeakReport) -> LeakSeries {
    let Some(dev) = snap.devices.iter().find(|d| d.index == l.device) else {
        return LeakSeries::default();
    };
    let steps: Vec<(&str, usize)> = a
        .steps
        .iter()
        .filter(|s| {
            s.device == l.device && matches!(s.source, StepSource::Annotation | StepSource::Loop)
        })
        .filter_map(|s| Some((s.name.as_str(), s.end_event? as usize)))
        .collect();
    let mut sites: Vec<&Option<Site>> = vec![&l.leak.site];
    sites.extend(l.leak.related_sites.iter().map(|r| &r.site));
    let mut memo: HashMap<StackId, bool> = HashMap::default();
    let mut live: HashMap<u64, u64> = HashMap::default();
    let mut total = 0u64;
    let mut out = Vec::with_capacity(steps.len());
    let mut next = 0;
    for (i, e) in dev.events.iter().enumerate() {
        if next >= steps.len() {
            break;
        }
        match e.action {
            Ev::Alloc => {
                let hit = *memo.entry(e.stack).or_insert_with(|| {
                    let s = Site::of_stack(&snap.stacks, e.stack);
                    sites.iter().any(|x| **x == s)
                });
                if hit {
                    total += e.size;
                    if let Some(old) = live.insert(e.addr, e.size) {
                        total -= old;
                    }
                }
            }
            Ev::FreeRequested | Ev::FreeCompleted => {
                if let Some(sz) = live.remove(&e.addr) {
                    total -= sz;
                }
            }
            _ => {}
        }
        while next < steps.len() && steps[next].1 == i {
            out.push(total);
            next += 1;
        }
    }
    let names = steps.iter().map(|s| s.0.to_owned()).collect();
    out.resize(steps.len(), total);
    LeakSeries {
        steps: names,
        live_bytes: out,
    }
}
