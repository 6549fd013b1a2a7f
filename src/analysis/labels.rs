//! Memory by the labels torch records on each trace entry (torch 2.6+): `user_metadata`, the
//! label the program set with `torch.cuda.memory._set_memory_metadata` (a phase, a step, a
//! request id), and `compile_context`, the torch.compile region that was running.
//!
//! One pass over the log, following each allocation by address from its `alloc` to its
//! `free_requested`: how many allocations each label made, their bytes, and the bytes each
//! label held at the allocated peak and at the end of the log. An `annotate` entry
//! (`_annotate_memory`, newer torch) relabels the live allocation at its address: its label is
//! the annotation from then on. Entries with no label are not counted: a capture with no label
//! at all has no breakdown, and the report says nothing of it.

use rustc_hash::FxHashMap as HashMap;

use crate::model::{Action, Device, Snapshot, Sym};

/// One label's allocations.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LabelTotal {
    /// The label as recorded (attacker data: every view escapes it).
    pub label: String,
    /// Allocations made under the label.
    pub allocations: u64,
    /// Their requested bytes, summed.
    pub allocated_bytes: u64,
    /// Bytes of its allocations live at the allocated peak (`None` where the log has no peak).
    pub live_bytes_at_peak: Option<u64>,
    /// Bytes of its allocations not freed by the end of the log.
    pub live_bytes_at_end: u64,
}

/// A device's breakdowns: by `user_metadata` and by `compile_context`, most bytes allocated
/// first. Both empty for a capture that records neither.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Breakdowns {
    pub user_labels: Vec<LabelTotal>,
    pub compiled_regions: Vec<LabelTotal>,
}

/// The breakdowns of `dev`'s log; `peak` is the event after which the allocated peak was
/// first reached.
pub fn of_device(snap: &Snapshot, dev: &Device, peak: Option<usize>) -> Breakdowns {
    if snap.metas.len() <= 1 {
        return Breakdowns::default();
    }
    Breakdowns {
        user_labels: breakdown(snap, dev, peak, |i| snap.meta(dev.events.meta(i)).user),
        compiled_regions: breakdown(snap, dev, peak, |i| snap.meta(dev.events.meta(i)).region),
    }
}

fn breakdown(
    snap: &Snapshot,
    dev: &Device,
    peak: Option<usize>,
    key: impl Fn(usize) -> Option<Sym>,
) -> Vec<LabelTotal> {
    // Per label: (allocations, bytes allocated, live now, live at the peak).
    let mut by: HashMap<Sym, (u64, u64, u64, Option<u64>)> = HashMap::default();
    // Live allocations by address: (label, bytes).
    let mut live: HashMap<u64, (Option<Sym>, u64)> = HashMap::default();
    for (i, e) in dev.events.iter().enumerate() {
        match e.action {
            Action::Alloc => {
                let l = key(i);
                if let Some(l) = l {
                    let t = by.entry(l).or_default();
                    t.0 += 1;
                    t.1 = t.1.saturating_add(e.size);
                    t.2 = t.2.saturating_add(e.size);
                }
                live.insert(e.addr, (l, e.size));
            }
            Action::FreeRequested => {
                if let Some((Some(l), size)) = live.remove(&e.addr) {
                    let t = by.entry(l).or_default();
                    t.2 = t.2.saturating_sub(size);
                }
            }
            Action::Annotate => {
                // The annotation labels the live allocation from now on: its bytes move to it.
                if let (Some(new), Some(&(old, size))) = (key(i), live.get(&e.addr)) {
                    if old != Some(new) {
                        if let Some(old) = old {
                            let t = by.entry(old).or_default();
                            t.2 = t.2.saturating_sub(size);
                        }
                        let t = by.entry(new).or_default();
                        t.2 = t.2.saturating_add(size);
                        live.insert(e.addr, (Some(new), size));
                    }
                }
            }
            _ => {}
        }
        if Some(i) == peak {
            for t in by.values_mut() {
                t.3 = Some(t.2);
            }
        }
    }
    let mut out: Vec<LabelTotal> = by
        .into_iter()
        .map(
            |(l, (allocations, allocated_bytes, end, at_peak))| LabelTotal {
                label: snap.stacks.str(l).to_owned(),
                allocations,
                allocated_bytes,
                // A label first seen after the peak held nothing then.
                live_bytes_at_peak: peak.map(|_| at_peak.unwrap_or(0)),
                live_bytes_at_end: end,
            },
        )
        .collect();
    out.sort_by(|a, b| {
        b.allocated_bytes
            .cmp(&a.allocated_bytes)
            .then_with(|| a.label.cmp(&b.label))
    });
    out
}
