//! The replay of a plan: the recorded log's requests, each scaled to the shape asked for,
//! through the caching-allocator model, so that rounding, the small and large pools, segment
//! sizes, splitting and fragmentation all count in the peaks.
//!
//! Frees follow the log (a request freed at event `j` is freed at `j` whatever its size), and
//! `empty_cache` calls are replayed where the log shows them, as what-if does. A run under a cap
//! stops at the first request that does not fit: the program would have raised there.

use rustc_hash::FxHashMap as HashMap;

use super::prelog::Prelog;
use super::whatif::alloc::Allocator;
use super::whatif::{config, Op};
use super::{
    Band, Basis, MaxBatch, NoMaxBatch, Prediction, Reading, Request, Shape, Split, Term, Verdict,
    SEARCH_LIMIT,
};
use crate::analysis::replay::State;
use crate::model::{AllocatorSettings, Device, Snapshot};

/// What a plan replays: one device's log, its classified requests and the recorded shape.
pub struct Model<'a> {
    pub snap: &'a Snapshot,
    pub dev: &'a Device,
    /// The layout at the log's first event as recorded (the split at the recorded shape).
    pub initial: &'a State,
    /// That layout as a function of the shape: as recorded with one capture, paired and fitted
    /// across captures with more ([`super::prelog`]).
    pub prelog: &'a Prelog,
    /// Per log event: the request it makes, if any.
    pub reqs: &'a [Option<Request>],
    pub settings: &'a AllocatorSettings,
    pub recorded: Shape,
    /// The log as requests ([`super::whatif::ops`]), made once for every replay of the plan.
    pub(crate) ops: Vec<Op>,
    /// The recorded iterations ask other sizes from one to the next ([`super::step_sizes`]).
    pub data_dependent: bool,
}

/// The most batches below the largest found that the search also tries (5% of it, at least 2):
/// each costs two replays of the whole log.
const WINDOW: u64 = 8;

/// Where the model puts a segment it makes (the log has no address for it). Best fit breaks
/// ties between free blocks of one size by address, so the order decides which block a
/// long-lived request splits, and so which later request needs a segment of its own.
/// On the H100 of fixtures/plan/segments39 the driver put each large segment below the last:
/// with segments placed so, gpt_ctxall_amp's reserved peaks at b48, b64 and b96 replay to the
/// byte from captures at b16 and b32, and 14% under (one 384 MiB segment short) with them
/// placed upwards. Other drivers and other sizes may do otherwise, so an OOM or a fit is said,
/// and a largest batch is safe, only where both orders agree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    Descending,
    Ascending,
}

/// One replay's outcome.
#[derive(Clone, Debug, Default)]
pub struct RunOut {
    pub peak_allocated: u64,
    pub peak_reserved: u64,
    /// The log event whose request did not fit under the cap.
    pub oom_event: Option<u32>,
    /// A request grew past any device (4 PiB): the run stopped there.
    pub beyond: bool,
    /// At the allocated peak, by how the live bytes grow (kept for the recorded shape only).
    pub split: Split,
}

/// Live bytes by kind while a run tracks its split.
#[derive(Default)]
struct Tally {
    fixed: u64,
    grows: u64,
    unsure: u64,
    quadratic: u64,
    by_basis: HashMap<Basis, u64>,
}

impl Tally {
    fn add(&mut self, r: Option<&Request>, bytes: u64, sign: bool) {
        let op = |v: &mut u64| {
            *v = if sign {
                v.saturating_add(bytes)
            } else {
                v.saturating_sub(bytes)
            }
        };
        let basis = r.map_or(Basis::BeforeRecording, |r| r.basis);
        op(self.by_basis.entry(basis).or_default());
        match r {
            Some(r) if r.central.grows() => {
                op(&mut self.grows);
                if r.central.seq == Term::Quadratic {
                    op(&mut self.quadratic);
                }
            }
            _ => op(&mut self.fixed),
        }
        if r.is_some_and(|r| r.unsure()) {
            op(&mut self.unsure);
        }
    }
    fn split(&self) -> Split {
        let mut by_basis: Vec<(Basis, u64)> = self
            .by_basis
            .iter()
            .filter(|(_, &b)| b > 0)
            .map(|(&k, &v)| (k, v))
            .collect();
        by_basis.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        Split {
            fixed_bytes: self.fixed,
            grows_bytes: self.grows,
            unsure_bytes: self.unsure,
            quadratic_bytes: self.quadratic,
            by_basis,
        }
    }
}

/// A request's block size as the allocator rounds it (for the split's byte counts).
fn rounded(size: u64) -> u64 {
    size.max(1).div_ceil(512) * 512
}

impl Model<'_> {
    /// Replays the log at `at`, reading unsure requests as `reading`, under `cap` if given,
    /// with new segments placed as the driver placed them (each below the last).
    pub fn run(&self, at: Shape, reading: Reading, cap: Option<u64>) -> RunOut {
        self.run_placed(at, reading, cap, Order::Descending)
    }

    /// Whether the upper reading at `at` fails under `cap` with new segments placed in either
    /// order ([`Order`]): a decision the placement could turn is no decision.
    fn fails_either(&self, at: Shape, cap: u64) -> (bool, bool) {
        let f = |o| {
            self.run_placed(at, Reading::Upper, Some(cap), o)
                .oom_event
                .is_some()
        };
        (f(Order::Descending), f(Order::Ascending))
    }

    /// Whether the upper reading at `at` replays under `cap` lowered by the band's `under` share
    /// with new segments placed in either order: with its replay under the cap itself, what the
    /// fit column asks before it says `fits`.
    ///
    /// With data-dependent sizes the layout under pressure is not the recorded one scaled (other
    /// sizes free other segments), so the fit must not rest on the model's release of cached
    /// segments: the upper reading's reserved peak without a cap stays under the lowered cap in
    /// either placement. Holdout 6's mixture of experts replayed under its cap less 5% at batch
    /// 46 only by releasing segments (3.7% over the cap without), and the card failed 46.
    fn fits_below_band(&self, at: Shape, cap: u64, band: Band) -> bool {
        let lowered = band.lowered(cap);
        if self.data_dependent {
            return [Order::Descending, Order::Ascending]
                .into_iter()
                .all(|o| self.run_placed(at, Reading::Upper, None, o).peak_reserved <= lowered);
        }
        self.fails_either(at, lowered) == (false, false)
    }

    /// [`Model::run`] with new segments placed in `order`.
    fn run_placed(&self, at: Shape, reading: Reading, cap: Option<u64>, order: Order) -> RunOut {
        self.run_from(self.prelog, at, reading, cap, order)
    }

    /// The likelier reading at `at`, no cap, from the layout before recording `prelog` (the
    /// band's check of the fitted layout: a capture's shape from the other captures' layouts).
    pub fn run_with_layout(&self, prelog: &Prelog, at: Shape) -> RunOut {
        self.run_from(prelog, at, Reading::Central, None, Order::Descending)
    }

    fn run_from(
        &self,
        prelog: &Prelog,
        at: Shape,
        reading: Reading,
        cap: Option<u64>,
        order: Order,
    ) -> RunOut {
        let track = at == self.recorded && reading == Reading::Central && cap.is_none();
        let mut cfg = config(self.settings, cap, None);
        cfg.descending_addresses = order == Order::Descending;
        let mut m = Allocator::new(cfg);
        let mut addr_map = prelog.seed(&mut m, at);
        let mut tally = Tally::default();
        // Recorded address -> (the request, its bytes in the tally).
        let mut live: HashMap<u64, (Option<Request>, u64)> = HashMap::default();
        if track {
            for b in self.initial.live_blocks() {
                tally.add(None, b.size, true);
                live.insert(b.address, (None, b.size));
            }
        }
        let mut out = RunOut::default();
        let mut peak_alloc = m.stats.allocated;
        if track {
            out.split = tally.split();
        }
        for (i, op) in self.ops.iter().enumerate() {
            let e = self.dev.events[i];
            match op {
                &Op::Malloc { stream, .. } => {
                    let r = self.reqs[i];
                    let size = r.map_or(e.size, |r| {
                        let c = r.central.size(r.size, self.recorded, at);
                        match reading {
                            Reading::Central => c,
                            // A workspace of the band: whichever reading asks more.
                            Reading::Upper if r.varies => {
                                c.max(r.upper.size(r.size, self.recorded, at))
                            }
                            Reading::Upper => r.upper.size(r.size, self.recorded, at),
                        }
                    });
                    // No device holds a request past 4 PiB (nor do the model's sums): it fails.
                    if size >= super::whatif::MAX_PLAUSIBLE {
                        out.oom_event = Some(i as u32);
                        out.beyond = true;
                        break;
                    }
                    match m.malloc(size, stream, &mut Vec::new()) {
                        Ok(a) => {
                            addr_map.insert(e.addr, a);
                            if track {
                                tally.add(r.as_ref(), rounded(size), true);
                                live.insert(e.addr, (r, rounded(size)));
                            }
                        }
                        // cuDNN runs another algorithm when its workspace does not fit.
                        Err(_) if r.is_some_and(|r| r.elastic) => {}
                        Err(_) if cap.is_some() => {
                            out.oom_event = Some(i as u32);
                            break;
                        }
                        Err(_) => {}
                    }
                }
                Op::FreeRequested => {
                    if let Some(&a) = addr_map.get(&e.addr) {
                        m.free_requested(a);
                    }
                    if let Some((r, b)) = live.remove(&e.addr) {
                        tally.add(r.as_ref(), b, false);
                    }
                }
                Op::FreeCompleted => {
                    if let Some(a) = addr_map.remove(&e.addr) {
                        m.free_block(a);
                    }
                }
                Op::EmptyCache => m.release_cached_blocks(),
                Op::Skip => {}
            }
            if track && m.stats.allocated > peak_alloc {
                peak_alloc = m.stats.allocated;
                out.split = tally.split();
            }
        }
        out.peak_allocated = m.stats.peak_allocated;
        out.peak_reserved = m.stats.peak_reserved;
        out
    }

    /// The prediction at `at`: both readings' peaks (no cap), and whether the upper reading
    /// fails under `cap`.
    pub fn predict(&self, at: Shape, cap: Option<u64>, band: Band) -> Prediction {
        let c = self.run(at, Reading::Central, None);
        let u = self.run(at, Reading::Upper, None);
        let capped = cap.map(|cap| self.run(at, Reading::Upper, Some(cap)));
        let scaled = |cap: u64, k: f64| (cap as f64 * k) as u64;
        // OOM only where both placements fail above the band, a fit only where both fit
        // below it.
        // Where workspaces carry the band ([`Request::varies`]), an OOM also needs the
        // likelier reading (their sizes as one capture read them) to fail: a batch between the
        // two readings is no call.
        let varies = self.reqs.iter().flatten().any(|r| r.varies);
        let central_fails = |cap: u64| {
            self.run_placed(at, Reading::Central, Some(cap), Order::Descending)
                .oom_event
                .is_some()
        };
        let verdict =
            cap.zip(capped.as_ref())
                .map(|(cap, r)| match (r.oom_event.is_some(), band) {
                    (true, b)
                        if self.fails_either(at, scaled(cap, 1.0 + b.over)) == (true, true)
                            && (!varies || central_fails(scaled(cap, 1.0 + b.over))) =>
                    {
                        Verdict::Oom
                    }
                    (false, b) if self.fits_below_band(at, cap, b) => Verdict::Fits,
                    _ => Verdict::WithinBand,
                });
        Prediction {
            batch: at.batch,
            seq: at.seq,
            peak_allocated_bytes: c.peak_allocated,
            peak_reserved_bytes: c.peak_reserved,
            peak_allocated_upper_bytes: u.peak_allocated,
            peak_reserved_upper_bytes: u.peak_reserved,
            oom: capped.as_ref().map(|r| r.oom_event.is_some()),
            verdict,
            oom_event: capped.and_then(|r| r.oom_event),
        }
    }

    /// The largest batch (at the recorded sequence length) the fit column says fits under `cap`
    /// ([`Model::predict`] with `band`), every batch just below it fitting too.
    pub fn max_batch(&self, cap: u64, band: Band) -> Result<MaxBatch, NoMaxBatch> {
        let fits_under = |b: u64, reading: Reading, cap: u64| {
            let at = Shape {
                batch: b,
                seq: self.recorded.seq,
            };
            self.run(at, reading, Some(cap)).oom_event.is_none()
        };
        // The answer is a batch the column says fits: the upper reading replays under the cap,
        // and under the cap lowered by the band in either placement ([`Order`]). Before
        // (session 14) it asked the cap less a 3% margin, and on the truth sets said 11 where
        // the card fits 10 (holdout 2's gpt_amp_collide, one capture) and 46 where it failed 46
        // four times in four (holdout 5's unet_fp16_scaler, three captures): batches the column
        // itself gave as no call. A lower cap alone is no margin (the allocator frees its
        // cache sooner there and packs tighter: holdout 2's hf_bert_amp fails 46 to 48 under
        // its cap and fits 48 under the cap less 3%), so the cap itself is asked too.
        let safe = |b: u64| {
            let at = Shape {
                batch: b,
                seq: self.recorded.seq,
            };
            fits_under(b, Reading::Upper, cap) && self.fits_below_band(at, cap, band)
        };
        let central = |b: u64| fits_under(b, Reading::Central, cap);
        let limit = SEARCH_LIMIT.saturating_mul(self.recorded.batch);
        let search = |fits: &dyn Fn(u64) -> bool| -> Option<(u64, bool)> {
            if !fits(1) {
                return None;
            }
            // Grow until a batch fails, then bisect between the last that fit and it.
            let (mut lo, mut hi) = (1u64, self.recorded.batch.max(2));
            while fits(hi) {
                lo = hi;
                if hi >= limit {
                    return Some((lo, true));
                }
                hi = hi.saturating_mul(2).min(limit);
            }
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if fits(mid) {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            // Near its cap a program can fail at one batch and fit at a larger one (the
            // allocator's placement; real runs do it too: holdout 2's vit_amp fits 50 and 52,
            // not 51). The answer is a batch under which every batch fits, so the batches just
            // below the one found are tried too: a failure there lowers the answer below it,
            // to a batch tried in its turn (before session 14 the batch below a failure was
            // taken untried: holdout 2's hf_bert_amp, two captures, answered 42, no call).
            let window = (lo / 20).clamp(2, WINDOW);
            let mut b = lo;
            let mut k = 1;
            while k <= window && k < b {
                if fits(b - k) {
                    k += 1;
                } else {
                    b -= k + 1;
                    k = 0;
                }
            }
            Some((b.max(1), false))
        };
        let (batch, at_limit) = search(&safe).ok_or(NoMaxBatch::NothingFits)?;
        let central = search(&central).map_or(batch, |(b, _)| b);
        Ok(MaxBatch {
            batch,
            central_batch: central.max(batch),
            rounded_down_by: central.saturating_sub(batch),
            margin_bytes: cap - band.lowered(cap),
            at_search_limit: at_limit,
        })
    }
}
