//! OOM-retry retention: memory of an attempt that ended in an OOM, still alive while a later
//! attempt runs.
//!
//! The usual way to survive an OOM is to catch it and try again smaller
//! (`except torch.OutOfMemoryError as e: errors.append(e); batch //= 2`). The exception's
//! traceback holds every frame of the failed attempt, and the frames hold their tensors: as long
//! as the exception lives (stored in a list, kept by `sys.exc_info()`, or because the retry runs
//! inside the `except` block), the failed attempt's memory stays allocated, and the retry, which
//! needs less, fails too. PyTorch's FAQ documents the pattern.
//!
//! What the log shows: the OOM's stack and the next attempt's (the next OOM, or the peak after
//! this one) share the frames down to the retry's call (the loop's line that calls the attempt).
//! Blocks allocated under that call between the previous OOM and this one are the failed
//! attempt's; those still alive where the next attempt is measured were retained. A clean retry
//! (the exception not stored, the retry after the `except` block) frees them before it starts.
//!
//! When it cannot judge: no OOM, or nothing allocated after the last one (the dump came in its
//! `except` block), or attempts with no user frame in common (no retry call to follow).
//! What keeps the memory is inferred from the shape; a snapshot records no references.

use std::rc::Rc;

use rustc_hash::FxHashMap as HashMap;

use crate::analysis::leaks::{
    Blame, Confidence, Extent, Leak, LeakEvidence, LeakKind, RetryEvidence, StepLabel,
};
use crate::analysis::loops;
use crate::analysis::replay::Timeline;
use crate::analysis::sites::Site;
use crate::model::{Action, Device, EventIdx, Snapshot, StackId, Sym};

/// Least bytes of a failed attempt alive at the next one for a finding.
pub const MIN_RETAINED_BYTES: u64 = 1 << 20;
/// Least share of the memory allocated where the next attempt is measured.
pub const MIN_RETAINED_SHARE: f64 = 0.01;

/// One failed attempt whose memory was still alive when the next attempt ran.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Attempt {
    /// The OOM that ended the attempt.
    pub oom_event: EventIdx,
    /// Where the next attempt was measured: the next OOM, or the highest allocation after this one.
    pub measured_at: EventIdx,
    /// Whether `measured_at` is another OOM.
    pub next_oomed: bool,
    /// The attempt's bytes and blocks still alive there.
    pub bytes: u64,
    pub count: u64,
    /// Bytes allocated at `measured_at`.
    pub allocated_bytes: u64,
}

/// What the retry analysis found on one device.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Retention {
    pub attempts: Vec<Attempt>,
    /// The line that calls each attempt (the deepest user frame the attempts share).
    pub call_site: Option<Site>,
    /// The innermost user frame of the heaviest retained stack.
    pub allocation_site: Option<Site>,
    pub heaviest_stack: StackId,
    /// Per OOM (in log order): bytes of earlier failed attempts alive at it.
    pub alive_at_oom: Vec<(EventIdx, u64)>,
}

impl Retention {
    /// Bytes of earlier failed attempts alive at the OOM at `event`.
    pub fn alive_at(&self, event: EventIdx) -> u64 {
        self.alive_at_oom
            .iter()
            .find(|(e, _)| *e == event)
            .map_or(0, |x| x.1)
    }
}

type Link = (Sym, Sym, u32);

fn chain(snap: &Snapshot, s: StackId) -> Vec<Link> {
    loops::user_chain(&snap.stacks, s)
}

/// Stops following a block of one attempt (freed, or its address reused unseen).
fn untrack(
    sum: &mut (u64, u64),
    total: &mut u64,
    by_stack: &mut HashMap<StackId, u64>,
    size: u64,
    st: StackId,
) {
    sum.0 = sum.0.saturating_sub(size);
    sum.1 = sum.1.saturating_sub(1);
    *total = total.saturating_sub(size);
    let b = by_stack.entry(st).or_default();
    *b = b.saturating_sub(size);
}

fn common(a: &[Link], b: &[Link]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Finds the failed attempts retained past the next attempt, in one pass over the log.
pub fn find(snap: &Snapshot, dev: &Device, tl: &Timeline) -> Retention {
    let ooms: Vec<usize> = tl.ooms.iter().map(|o| o.event.0 as usize).collect();
    let n = dev.events.len();
    if ooms.is_empty() || n == 0 {
        return Retention::default();
    }
    // One chain per stack, shared: asked for at every allocation of an attempt.
    let mut chains: HashMap<StackId, Rc<[Link]>> = HashMap::default();
    let mut chain_of = |s: StackId| -> Rc<[Link]> {
        chains
            .entry(s)
            .or_insert_with(|| chain(snap, s).into())
            .clone()
    };
    // Per OOM k: where the next attempt is measured, the retry call's frames, and the first
    // event of the failed attempt.
    let mut measure: Vec<Option<usize>> = Vec::with_capacity(ooms.len());
    let mut prefix: Vec<Vec<Link>> = Vec::with_capacity(ooms.len());
    let mut begin: Vec<usize> = Vec::with_capacity(ooms.len());
    for (k, &o) in ooms.iter().enumerate() {
        let at = match ooms.get(k + 1) {
            Some(&next) => Some(next),
            None => (o + 1..n)
                .filter(|&i| dev.events[i].action == Action::Alloc)
                .max_by_key(|&i| {
                    (
                        tl.series.allocated.get(i).copied().unwrap_or(0),
                        usize::MAX - i,
                    )
                }),
        };
        let failed = chain_of(dev.events[o].stack);
        let judged = at.and_then(|a| {
            let next = chain_of(dev.events[a].stack);
            // The frames down to the retry's call; the frame below it (the callee, or the
            // loop's own frame) must start over after the OOM: a retry, not the program going on.
            let c = common(&failed, &next).min(failed.len().saturating_sub(1));
            let callee = failed.get(c)?;
            let p = &failed[..c];
            // (An attempt whose first request fails shows only its OOM.)
            let restart = (o + 1..=a).find_map(|i| {
                let e = &dev.events[i];
                if !matches!(e.action, Action::Alloc | Action::Oom) {
                    return None;
                }
                let ch = chain_of(e.stack);
                (ch.starts_with(p) && ch.len() > c).then(|| ch[c])
            })?;
            let starts_over =
                (restart.0, restart.1) == (callee.0, callee.1) && restart.2 <= callee.2;
            if !starts_over {
                return None;
            }
            // The failed attempt began after the previous OOM, and after the last allocation
            // under the call at a line before the retry's first line (setup before the loop).
            let floor = if k == 0 { 0 } else { ooms[k - 1] + 1 };
            let from = (floor..o)
                .rev()
                .find(|&i| {
                    let e = &dev.events[i];
                    e.action == Action::Alloc && {
                        let ch = chain_of(e.stack);
                        !ch.starts_with(p) || ch.len() <= c || ch[c].2 < restart.2
                    }
                })
                .map_or(floor, |i| i + 1);
            Some((a, p.to_vec(), from))
        });
        match judged {
            Some((a, p, from)) => {
                measure.push(Some(a));
                prefix.push(p);
                begin.push(from);
            }
            None => {
                measure.push(None);
                prefix.push(Vec::new());
                begin.push(o);
            }
        }
    }
    let mut live: HashMap<u64, (usize, u64, StackId)> = HashMap::default();
    let mut sums = vec![(0u64, 0u64); ooms.len()];
    let mut total = 0u64;
    let mut by_stack: Vec<HashMap<StackId, u64>> = vec![HashMap::default(); ooms.len()];
    let mut at_measure: HashMap<usize, Vec<usize>> = HashMap::default();
    for (kk, m) in measure.iter().enumerate() {
        if let Some(m) = m {
            at_measure.entry(*m).or_default().push(kk);
        }
    }
    let mut out = Retention::default();
    let mut best: Option<(u64, usize, StackId)> = None;
    // The attempt an allocation at `i` belongs to: the first OOM at or after it.
    let mut k = 0usize;
    for i in 0..n {
        let e = &dev.events[i];
        while k < ooms.len() && ooms[k] < i {
            k += 1;
        }
        match e.action {
            Action::Alloc => {
                if let Some((kk, size, st)) = live.remove(&e.addr) {
                    untrack(&mut sums[kk], &mut total, &mut by_stack[kk], size, st);
                }
                if k < ooms.len() && measure[k].is_some() && i >= begin[k] {
                    let ch = chain_of(e.stack);
                    if ch.starts_with(&prefix[k]) {
                        let size = crate::analysis::replay::round_size(e.size, &snap.settings);
                        live.insert(e.addr, (k, size, e.stack));
                        sums[k].0 = sums[k].0.saturating_add(size);
                        sums[k].1 += 1;
                        total = total.saturating_add(size);
                        let b = by_stack[k].entry(e.stack).or_default();
                        *b = b.saturating_add(size);
                    }
                }
            }
            Action::FreeRequested | Action::FreeCompleted => {
                if let Some((kk, size, st)) = live.remove(&e.addr) {
                    untrack(&mut sums[kk], &mut total, &mut by_stack[kk], size, st);
                }
            }
            Action::Oom => {
                // Tracked blocks belong to this attempt or earlier ones: the earlier ones' are
                // the total less this attempt's.
                let own = sums.get(k).map_or(0, |s| s.0);
                out.alive_at_oom
                    .push((EventIdx(i as u32), total.saturating_sub(own)));
            }
            _ => {}
        }
        for &kk in at_measure.get(&i).map(Vec::as_slice).unwrap_or(&[]) {
            let (bytes, count) = sums[kk];
            let allocated = tl.series.allocated.get(i).copied().unwrap_or(0);
            if bytes < MIN_RETAINED_BYTES || (bytes as f64) < MIN_RETAINED_SHARE * allocated as f64
            {
                continue;
            }
            out.attempts.push(Attempt {
                oom_event: EventIdx(ooms[kk] as u32),
                measured_at: EventIdx(i as u32),
                next_oomed: ooms.get(kk + 1) == Some(&i),
                bytes,
                count,
                allocated_bytes: allocated,
            });
            if best.is_none_or(|b| bytes > b.0) {
                let heavy = by_stack[kk]
                    .iter()
                    .max_by_key(|(s, &b)| (b, std::cmp::Reverse(**s)));
                if let Some((s, _)) = heavy {
                    best = Some((bytes, kk, *s));
                }
            }
        }
    }
    if let Some((_, kk, st)) = best {
        let s = &snap.stacks;
        let site = |l: &Link| Site {
            file: s.str(l.0).to_owned(),
            line: l.2,
            function: s.str(l.1).to_owned(),
        };
        out.call_site = prefix[kk].last().map(site);
        out.allocation_site = chain(snap, st).last().map(site);
        out.heaviest_stack = st;
    }
    out
}

impl Retention {
    /// The finding, when a failed attempt was retained.
    pub fn finding(&self, snap: &Snapshot) -> Option<Leak> {
        let first = self.attempts.first()?;
        let last = self.attempts.last()?;
        let most = self.attempts.iter().max_by_key(|a| a.bytes)?;
        let n = self.attempts.len();
        let total = self
            .attempts
            .iter()
            .fold(0u64, |t, a| t.saturating_add(a.bytes));
        let later = self.attempts.iter().filter(|a| a.next_oomed).count();
        let evidence = LeakEvidence::RetainedAttempts(RetryEvidence {
            attempts: n,
            call: self.call_site.clone(),
            most_bytes: most.bytes,
            most_blocks: most.count,
            most_after_oom: most.oom_event,
            total_bytes: total,
            later_ooms: later,
        });
        Some(Leak {
            kind: LeakKind::RetainedAttempt,
            extent: Extent::Alive,
            release: None,
            site: self
                .call_site
                .clone()
                .or_else(|| self.allocation_site.clone()),
            blame: if self.call_site.is_some() {
                Blame::LoopLine
            } else {
                Blame::AllocatingLine
            },
            line_known: true,
            allocation_site: self.allocation_site.clone(),
            cause_site: None,
            kept_by: None,
            confidence: Confidence::Medium,
            live_bytes: most.bytes,
            freed_by_fix_at_least: None,
            count: most.count,
            growth_bytes_per_step: total as f64 / n as f64,
            growth_tensors_per_step: self.attempts.iter().map(|a| a.count as f64).sum::<f64>()
                / n as f64,
            steps: n,
            first_step: StepLabel::OomAt(first.oom_event),
            last_step: StepLabel::OomAt(last.oom_event),
            window_start_event: first.oom_event,
            window_end_event: last.measured_at,
            r2: 1.0,
            evidence,
            ruled_out: None,
            samples: Vec::new(),
            related_sites: Vec::new(),
            stack: snap
                .stacks
                .frames(self.heaviest_stack)
                .iter()
                .map(|&f| snap.stacks.frame_label(snap.stacks.frame(f)))
                .collect(),
        })
    }
}
