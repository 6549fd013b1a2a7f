//! Capacity planning from one capture: will it fit at another batch size, and what is the
//! largest batch that does.
//!
//! Counting weights and optimizer state (accelerate's and DeepSpeed's estimators) misses what
//! usually decides an OOM: activations, temporaries and the allocator's rounding, splitting and
//! fragmentation. The capture already holds every request of the recorded run in order, and the
//! what-if allocator model ([`super::whatif::alloc`]) replays requests exactly. So a plan:
//!
//! 1. sorts each request into one that grows with the batch (activations, temporaries,
//!    per-sample buffers) or one that does not (weights, gradients, optimizer state,
//!    workspaces), from its stack, its category and its lifetime ([`classify`]), or, given a
//!    second capture at another batch size, from the two sizes of the same request ([`fit`]);
//! 2. scales the first kind to the batch asked for and replays the whole log through the
//!    allocator model ([`model`]): the answer is a reserved peak, not a sum;
//! 3. searches the largest batch whose replay fits under the cap, on the safe side of every
//!    request the capture cannot place.
//!
//! Where the capture cannot tell a request's kind, the plan carries both readings: the
//! `central` one (the likelier) and the `upper` one (every unsure request grows); OOMs and the
//! largest batch are decided on the upper one, and the difference is reported.

pub mod band;
mod casts;
pub mod classify;
pub mod fit;
pub mod model;
mod op_site;
pub mod prelog;
mod recurrent;
pub mod step_sizes;

pub use band::{Band, BandEvidence, BandRule, CaptureReplay};
pub use prelog::PrelogFit;
pub use step_sizes::StepSizes;

use crate::analysis::analyzed::Analyzed;
use crate::analysis::whatif::{self, AllocConf, CapInfo};
use crate::model::{Action, Snapshot};

/// A point of the workload's shape: its batch size and, where given, its sequence length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Shape {
    pub batch: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
}

/// `batch 8 x seq 256`, or `batch 8`: how every view names a shape.
impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.seq {
            Some(q) => write!(f, "batch {} x seq {q}", self.batch),
            None => write!(f, "batch {}", self.batch),
        }
    }
}

/// How a request's size depends on one axis (batch or sequence) of the workload.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Term {
    /// The same size whatever the axis.
    Fixed,
    /// Proportional to the axis.
    Linear,
    /// Proportional to its square (attention scores over the sequence).
    Quadratic,
    /// `base + per_unit × axis`, fitted from two captures.
    Affine { base: f64, per_unit: f64 },
}

impl Term {
    /// The size at axis value `to`, for a request of `size` bytes recorded at `from`.
    pub fn scale(self, size: u64, from: u64, to: u64) -> u64 {
        if from == to {
            return size;
        }
        let r = to as f64 / from.max(1) as f64;
        let v = match self {
            Term::Fixed => return size,
            Term::Linear => size as f64 * r,
            Term::Quadratic => size as f64 * r * r,
            Term::Affine { base, per_unit } => base + per_unit * to as f64,
        };
        v.max(1.0).ceil() as u64
    }
}

/// Why a request was given its terms: the evidence, typed (the words are the wording's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// Alive before recording began: weights, buffers, state of earlier steps.
    BeforeRecording,
    Parameter,
    OptimizerState,
    OptimizerTemporary,
    /// Made by a backward pass and kept past its step: parameter gradients.
    ParameterGradient,
    /// A cuBLAS workspace (its native frame says so).
    Workspace,
    /// Allocated once and never freed, by a stack that allocates nothing later: a lazily made
    /// buffer (a workspace, a cache of the first call), not per-step memory.
    MadeOnce,
    /// Its size is no multiple of the recorded batch: it cannot be per-sample memory.
    NotPerSample,
    /// A backward temporary of exactly a parameter's size (a weight's gradient before it
    /// is accumulated).
    ParameterSizedGradient,
    /// A forward block of half a parameter's size (a weight cast to 16 bits under autocast):
    /// fixed, unless the coincidence is a 16-bit activation's.
    ParameterSizedForward,
    /// Under autocast, a request an `nn.Linear` or `nn.Conv*` call made before its output, of
    /// half one of the parameters' size: the module's weight cast to 16 bits.
    WeightCast,
    Activation,
    ForwardTemporary,
    GradientTemporary,
    /// Inference: outputs and states a forward kept.
    Output,
    KvCache,
    /// Made by user code and freed within its step (inputs made in the loop, losses).
    UserTemporary,
    /// Made by user code and kept past its step (the last batch's inputs, user buffers).
    UserKept,
    /// No Python frame, outside any backward: native work whose size the capture cannot explain.
    Native,
    /// Two captures: the same request had the same size in both.
    MatchedSame,
    /// Two captures: the same request grew between them; the terms are fitted to its sizes.
    MatchedFitted,
}

/// The terms of one request: its size as a function of batch and sequence, for both readings.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Growth {
    pub batch: Term,
    pub seq: Term,
}

impl Growth {
    pub const FIXED: Growth = Growth {
        batch: Term::Fixed,
        seq: Term::Fixed,
    };
    pub fn size(self, size: u64, rec: Shape, at: Shape) -> u64 {
        let s = self.batch.scale(size, rec.batch, at.batch);
        match (rec.seq, at.seq) {
            (Some(a), Some(b)) => self.seq.scale(s, a, b),
            _ => s,
        }
    }
    pub fn grows(self) -> bool {
        self != Growth::FIXED
    }
}

/// One request of the log (an `alloc`, or an `oom` entry's failed request), classified.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Request {
    pub size: u64,
    pub basis: Basis,
    pub central: Growth,
    /// Where the capture cannot tell, the reading in which the request grows most.
    pub upper: Growth,
    /// A convolution's workspace: cuDNN asks for it and, when the allocator cannot give it,
    /// runs another algorithm that needs less, so under a cap the replay goes on without it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub elastic: bool,
    /// Two captures: a workspace whose sizes fit no exact term (the algorithm picked changes
    /// its request with the shape), replayed on the line through its sizes. Another shape's
    /// algorithm can ask for another size: its error is carried as the plan's workspace band.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub varies: bool,
    /// A recurrent module's cuDNN workspace ([`recurrent`]): paired across captures whatever
    /// its sizes and replayed on the line through the two largest captures' sizes (flat where
    /// they are equal), never skipped under the cap.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub recurrent: bool,
}

impl Request {
    pub fn unsure(&self) -> bool {
        self.central != self.upper
    }
}

/// Which reading of the unsure requests a replay uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    Central,
    Upper,
}

/// What the user asks: the recorded shape, the shapes to predict, the cap, the settings.
#[derive(Clone, Debug)]
pub struct Ask {
    pub recorded: Shape,
    pub at: Vec<Shape>,
    pub cap: Option<u64>,
    pub conf: AllocConf,
}

impl Ask {
    /// The ask from the command line: `at` as given (`(batch, seq)`, a missing sequence length
    /// being the recorded one), or 2, 4 and 8 times the recorded batch; checked
    /// ([`PlanError`]) before any capture is read.
    pub fn new(
        recorded: Shape,
        at: &[(u64, Option<u64>)],
        cap: Option<u64>,
        conf: AllocConf,
    ) -> Result<Ask, PlanError> {
        let at = if at.is_empty() {
            [2, 4, 8]
                .iter()
                .map(|k| Shape {
                    batch: recorded.batch.saturating_mul(*k),
                    seq: recorded.seq,
                })
                .collect()
        } else {
            at.iter()
                .map(|&(batch, seq)| Shape {
                    batch,
                    seq: seq.or(recorded.seq),
                })
                .collect()
        };
        let ask = Ask {
            recorded,
            at,
            cap,
            conf,
        };
        validate(&ask, None)?;
        Ok(ask)
    }
}

/// A second capture of the same program at another shape (`--with`).
pub struct Other<'a> {
    pub snap: &'a Snapshot,
    pub shape: Shape,
}

/// The prediction at one shape.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Prediction {
    pub batch: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// The likelier reading's peaks.
    pub peak_allocated_bytes: u64,
    pub peak_reserved_bytes: u64,
    /// Every unsure request growing: the peaks OOMs are judged on.
    pub peak_allocated_upper_bytes: u64,
    pub peak_reserved_upper_bytes: u64,
    /// Whether the replay under the cap fails (`None`: no cap known).
    pub oom: Option<bool>,
    /// The decision with the model's reserved error band ([`Band`]): an OOM only where the
    /// replay fails under the cap raised by the largest over-prediction measured, a fit only
    /// where it fits under the cap lowered by the usual under-prediction; between, no call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// The first request that fails under the cap, as a log event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oom_event: Option<u32>,
}

/// Fit or OOM under the cap, with the model's error band.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Fits,
    Oom,
    /// The replay's outcome flips within the band: the model's reserved error at this size
    /// could go either way.
    WithinBand,
}

/// The batch to capture next, where one capture leaves terms unsure.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct NextCapture {
    pub batch: u64,
    /// Steps to record: the first makes the optimizer state, the next ones repeat the peak.
    pub steps: u64,
}

/// The largest batch, and how it was made safe.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct MaxBatch {
    /// The largest batch the fit column says fits: its upper reading replays under the cap and
    /// under the cap lowered by the band's `under` share, as do the batches just below it.
    pub batch: u64,
    /// The largest batch the central reading alone would allow (no margin).
    pub central_batch: u64,
    /// What the answer was rounded down by, against `central_batch`.
    pub rounded_down_by: u64,
    /// The room kept under the cap: the band's `under` share of it (5%, measured on the truth
    /// sets, or the model's error at the recorded shape where larger).
    pub margin_bytes: u64,
    /// The search hit its ceiling (`SEARCH_LIMIT` × the recorded batch) without an OOM.
    pub at_search_limit: bool,
}

/// Why the largest batch is not given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NoMaxBatch {
    /// No cap was given and the capture records none.
    NoCap,
    /// The capture ends at an OOM: the rest of its step was never requested, so any batch's
    /// peak is only a lower bound.
    EndsInOom,
    /// Even batch 1 does not fit under the cap.
    NothingFits,
}

/// Bytes alive at the recorded allocated peak, by how they grow (the model's replay at the
/// recorded shape).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Split {
    pub fixed_bytes: u64,
    pub grows_bytes: u64,
    /// Of `grows_bytes`/`fixed_bytes`: the unsure ones (fixed in the central reading).
    pub unsure_bytes: u64,
    /// Of the growing bytes, those quadratic in the sequence (central reading).
    pub quadratic_bytes: u64,
    /// Bytes (at the peak) per basis, largest first.
    pub by_basis: Vec<(Basis, u64)>,
}

/// How the terms were found.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Fit {
    /// One capture: terms inferred from stacks, categories and lifetimes.
    OneCapture,
    /// Two captures: requests matched by stack and order; the terms of matched ones fitted.
    TwoCaptures {
        other: Shape,
        /// Captures beyond the second (`--also`), each request's term fitted from all.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        more: Vec<Shape>,
        matched: usize,
        /// Of `matched`: pairs found by Python frames alone, after the whole stacks (the
        /// native part differed, or one capture has none).
        by_python_stack: usize,
        requests: usize,
        /// Requests with no counterpart of a fixed or proportional size: a workspace sized by
        /// the algorithm picked, a path taken at one size only. They keep the inference.
        unmatched: usize,
    },
}

/// Everything `memscope plan` says about one device.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Plan {
    pub device: u32,
    pub recorded: Shape,
    /// The recorded run's peaks (the log) and the model's replay of it (its error bar).
    pub recorded_peak_allocated_bytes: u64,
    pub recorded_peak_reserved_bytes: u64,
    pub model_peak_allocated_bytes: u64,
    pub model_peak_reserved_bytes: u64,
    pub cap: CapInfo,
    pub predictions: Vec<Prediction>,
    /// Rendered by the formats (`max_batch`, and the reason where there is none).
    #[serde(skip)]
    pub max_batch: Result<MaxBatch, NoMaxBatch>,
    pub split: Split,
    pub fit: Fit,
    /// The capture's stacks show flash or memory-efficient attention (linear in the sequence).
    pub flash_attention: bool,
    /// The log starts from a layout with live blocks (recording began mid-run): with one
    /// capture it is replayed as recorded at every shape, with more paired and fitted across
    /// them ([`prelog`]).
    pub starts_mid_run: bool,
    /// Two captures or more of a log that starts mid-run: how its layout was paired.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prelog: Option<PrelogFit>,
    pub ends_in_oom: bool,
    /// A capture that ends at an OOM: the largest batch whose requests up to the OOM fit under
    /// the cap. The rest of the step only adds to it, so the real largest batch is at most this.
    pub max_batch_at_most: Option<u64>,
    /// Requests replayed, and how many of them the capture could not place.
    pub requests: usize,
    pub unsure_requests: usize,
    /// Sequence predictions: some growing requests could be linear or quadratic.
    pub seq_ambiguous: bool,
    /// Requests made by convolutions (forward, by their stacks): cuDNN picks its workspaces per
    /// shape, so the reserved peak at another batch can exceed the replay's.
    pub convolution_requests: usize,
    /// The error band the fit/OOM verdicts use, from `band_evidence` ([`band`]).
    pub band: Band,
    /// What the captures show about the plan's own error: the parts of `band`.
    pub band_evidence: BandEvidence,
    /// Two captures: cuDNN workspace requests whose sizes changed between the captures by no
    /// exact term ([`Request::varies`]): the upper reading grows them on the line through
    /// their sizes, so fits and the largest batch are judged with them grown, and an OOM only
    /// where they fail at their one-capture size too.
    pub varying_workspaces: usize,
    /// Whether the recorded iterations ask other sizes from one to the next (data-dependent
    /// shapes, [`step_sizes`]): then a fit is said only where the replay stays under the
    /// lowered cap without releasing cached segments.
    pub step_sizes: StepSizes,
    /// One capture whose two readings differ: the batch whose capture would settle them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_capture: Option<NextCapture>,
}

/// The largest multiple of the recorded batch the search tries. Further out the plan is not
/// offered: kernels chosen by size can make requests the capture never shows (on the holdout
/// `mlp_wide`, the allocated error was 0% up to 8x and grew to 6% at 12x and 7.5% at 32x), so
/// a largest batch beyond it is said as "this or more".
pub const SEARCH_LIMIT: u64 = 16;

/// Errors of `plan`.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    WhatIf(#[from] whatif::WhatIfError),
    #[error("--batch: the recorded batch size must be at least 1")]
    ZeroBatch,
    #[error("--at {0}: a batch size must be at least 1")]
    ZeroAt(u64),
    #[error("--seq: a sequence length must be at least 1")]
    ZeroSeq,
    #[error("--at {batch}x{seq}: a sequence length needs the recorded one (--seq)")]
    SeqWithoutRecorded { batch: u64, seq: u64 },
    #[error("--with: the two captures are at the same shape (batch {batch}): a fit needs two different batch sizes or sequence lengths")]
    SameShape { batch: u64 },
    #[error(
        "--with: the two captures differ in both batch and sequence length: vary one at a time"
    )]
    BothAxes,
    #[error("{} asks for requests past 4 PiB, more than any device holds", shape_words(.0))]
    BeyondAnyDevice(Shape),
    #[error("--with: the other capture has {other} device(s) with a history, this one {this}: they are not the same program")]
    DeviceCount { this: usize, other: usize },
}

fn shape_words(s: &Shape) -> String {
    match s.seq {
        Some(q) => format!("batch {} x sequence {q}", s.batch),
        None => format!("batch {}", s.batch),
    }
}

/// Plans every device of the capture with an allocation history.
pub fn plan(
    snap: &Snapshot,
    an: &Analyzed,
    ask: &Ask,
    other: Option<&Other>,
) -> Result<Vec<Plan>, PlanError> {
    let others: Vec<Other> = other
        .map(|o| Other {
            snap: o.snap,
            shape: o.shape,
        })
        .into_iter()
        .collect();
    plan_all(snap, an, ask, &others)
}

/// [`plan`] with any number of other captures of the program (`--with`, `--also`): each
/// request's term is fitted from all of them. The others after the first must vary the same
/// axis as it.
pub fn plan_all(
    snap: &Snapshot,
    an: &Analyzed,
    ask: &Ask,
    others: &[Other],
) -> Result<Vec<Plan>, PlanError> {
    for o in others {
        validate(ask, Some(o))?;
    }
    if let Some(first) = others.first() {
        let axis = |o: &Other| o.shape.batch != ask.recorded.batch;
        if others.iter().any(|o| axis(o) != axis(first)) {
            return Err(PlanError::BothAxes);
        }
    }
    let other = others.first();
    validate(ask, other)?;
    let mut out = Vec::new();
    let devs: Vec<usize> = (0..snap.devices.len())
        .filter(|&i| {
            snap.devices[i]
                .events
                .iter()
                .any(|e| e.action == Action::Alloc)
        })
        .collect();
    if devs.is_empty() {
        return Err(whatif::WhatIfError::NoDevices.into());
    }
    let other_devs: Vec<Vec<usize>> = others
        .iter()
        .map(|o| {
            (0..o.snap.devices.len())
                .filter(|&i| {
                    o.snap.devices[i]
                        .events
                        .iter()
                        .any(|e| e.action == Action::Alloc)
                })
                .collect()
        })
        .collect();
    for od in &other_devs {
        if od.len() != devs.len() {
            return Err(PlanError::DeviceCount {
                this: devs.len(),
                other: od.len(),
            });
        }
    }
    for (k, &i) in devs.iter().enumerate() {
        let dev = &snap.devices[i];
        if !whatif::plausible(dev) {
            return Err(whatif::WhatIfError::Implausible(dev.index).into());
        }
        let prod = &an.per_device[i];
        let mut reqs = classify::classify(snap, dev, prod, ask.recorded);
        for &at in &ask.at {
            let too_big = reqs
                .iter()
                .flatten()
                .any(|r| r.upper.size(r.size, ask.recorded, at) >= whatif::MAX_PLAUSIBLE);
            if too_big {
                return Err(PlanError::BeyondAnyDevice(at));
            }
        }
        let theirs: Vec<fit::Capture> = others
            .iter()
            .zip(&other_devs)
            .map(|(o, od)| fit::Capture {
                snap: o.snap,
                dev: &o.snap.devices[od[k]],
                shape: o.shape,
            })
            .collect();
        let fitted = fit_all(snap, dev, prod, ask.recorded, &theirs, &mut reqs);
        out.push(plan_device(snap, i, prod, ask, reqs, fitted));
    }
    Ok(out)
}

/// What the captures give a device's plan: how the terms were found, the layout before
/// recording, and the other captures' recorded peaks (for the band).
struct Fitted {
    fit: Fit,
    prelog: prelog::Prelog,
    seen: Vec<band::Seen>,
}

/// The terms of the requests and the layout before recording, from every capture: fitted
/// across them where there are others, else as one capture reads them; with the others'
/// recorded peaks, for the band.
fn fit_all(
    snap: &Snapshot,
    dev: &crate::model::Device,
    prod: &crate::analysis::analyzed::DeviceProduct,
    rec: Shape,
    theirs: &[fit::Capture],
    reqs: &mut [Option<Request>],
) -> Fitted {
    let initial = &prod.timeline.initial;
    let Some(first) = theirs.first() else {
        return Fitted {
            fit: Fit::OneCapture,
            prelog: prelog::Prelog::fixed(initial, rec.batch, true),
            seen: Vec::new(),
        };
    };
    let batch_axis = first.shape.batch != rec.batch;
    let axis = |s: Shape| {
        if batch_axis {
            s.batch
        } else {
            s.seq.unwrap_or(1)
        }
    };
    let quadratic = !batch_axis && !classify::flash_attention(&snap.stacks);
    let (fit, pairing) = fit::refine(snap, dev, theirs, rec, reqs);
    let timelines: Vec<crate::analysis::replay::Timeline> = theirs
        .iter()
        .map(|c| crate::analysis::replay::replay(c.dev, &c.snap.settings))
        .collect();
    let sides: Vec<prelog::Side> = theirs
        .iter()
        .zip(&timelines)
        .map(|(c, t)| prelog::Side {
            snap: c.snap,
            dev: c.dev,
            initial: &t.initial,
            x: axis(c.shape),
        })
        .collect();
    let here = prelog::Side {
        snap,
        dev,
        initial,
        x: axis(rec),
    };
    let prelog = prelog::Prelog::fitted(&here, &sides, &pairing, batch_axis, quadratic);
    let seen = theirs
        .iter()
        .zip(&timelines)
        .map(|(c, t)| band::Seen {
            peaks: (t.peaks.allocated.bytes, t.peaks.reserved.bytes),
            shape: c.shape,
        })
        .collect();
    Fitted { fit, prelog, seen }
}

fn validate(ask: &Ask, other: Option<&Other>) -> Result<(), PlanError> {
    if ask.recorded.batch == 0 {
        return Err(PlanError::ZeroBatch);
    }
    if ask.recorded.seq == Some(0) {
        return Err(PlanError::ZeroSeq);
    }
    for s in &ask.at {
        if s.batch == 0 {
            return Err(PlanError::ZeroAt(s.batch));
        }
        match (ask.recorded.seq, s.seq) {
            (None, Some(seq)) => {
                return Err(PlanError::SeqWithoutRecorded {
                    batch: s.batch,
                    seq,
                })
            }
            (_, Some(0)) => return Err(PlanError::ZeroSeq),
            _ => {}
        }
    }
    if let Some(o) = other {
        let r = ask.recorded;
        let seq_differs = r.seq.is_some() && o.shape.seq.is_some() && r.seq != o.shape.seq;
        if o.shape.batch == r.batch && !seq_differs {
            return Err(PlanError::SameShape { batch: r.batch });
        }
        if o.shape.batch != r.batch && seq_differs {
            return Err(PlanError::BothAxes);
        }
    }
    Ok(())
}

fn plan_device(
    snap: &Snapshot,
    i: usize,
    prod: &crate::analysis::analyzed::DeviceProduct,
    ask: &Ask,
    reqs: Vec<Option<Request>>,
    fitted: Fitted,
) -> Plan {
    let Fitted { fit, prelog, seen } = fitted;
    let dev = &snap.devices[i];
    let tl = &prod.timeline;
    let settings = ask.conf.apply(&snap.settings);
    let cap = match ask.cap {
        Some(c) => CapInfo {
            bytes: Some(c),
            source: whatif::CapSource::Given,
            range: None,
        },
        None => match whatif::derive_cap(tl) {
            c if c.bytes.is_some() => c,
            // No OOM to bound it: the device's size, where the capture records it.
            c => match snap.device_total(dev.index) {
                Some(t) => CapInfo {
                    bytes: Some(t),
                    source: whatif::CapSource::DeviceTotal,
                    range: None,
                },
                None => c,
            },
        },
    };
    let ends_in_oom = dev.events.iter().any(|e| e.action == Action::Oom);
    let step_sizes = step_sizes::evidence(dev, &prod.steps, tl.peaks.allocated.bytes);
    // Sizes that change from one iteration to the next cached segments before recording that
    // no batch term gives: the layout stays as recorded (holdout 6's mixture of experts: from
    // the fitted layout its reserved peak at the card's largest batch came out 10.4% under).
    let recorded_layout = prelog.as_recorded(&tl.initial);
    let prelog = if step_sizes.data_dependent {
        &recorded_layout
    } else {
        &prelog
    };
    let m = model::Model {
        snap,
        dev,
        initial: &tl.initial,
        prelog,
        reqs: &reqs,
        settings: &settings,
        recorded: ask.recorded,
        ops: whatif::ops(dev),
        data_dependent: step_sizes.data_dependent,
    };
    let at_rec = m.run(ask.recorded, Reading::Central, None);
    let convolution_requests = classify::convolution_requests(&snap.stacks, dev);
    // The band from what the captures show ([`band`]): how many requests each capture
    // explains by an exact term, and every capture's peaks against the model's replay.
    let band_evidence = band::evidence(
        &m,
        &reqs,
        &fit,
        (tl.peaks.allocated.bytes, tl.peaks.reserved.bytes),
        &seen,
        convolution_requests,
        &at_rec.split,
    );
    let band = Band::from_evidence(&band_evidence, cap.bytes);
    let predictions: Vec<Prediction> = ask
        .at
        .iter()
        .map(|&s| m.predict(s, cap.bytes, band))
        .collect();
    let max_batch_at_most = match cap.bytes {
        Some(c) if ends_in_oom => m.max_batch(c, band).ok().map(|b| b.central_batch),
        _ => None,
    };
    let max_batch = match cap.bytes {
        _ if ends_in_oom => Err(NoMaxBatch::EndsInOom),
        None => Err(NoMaxBatch::NoCap),
        Some(c) => m.max_batch(c, band),
    };
    let flash = classify::flash_attention(&snap.stacks);
    let unsure_requests = reqs.iter().flatten().filter(|r| r.unsure()).count();
    let seq_ambiguous =
        ask.recorded.seq.is_some() && reqs.iter().flatten().any(|r| r.central.seq != r.upper.seq);
    let next_capture = next_capture(&fit, ask.recorded, &predictions, &max_batch_ok(&max_batch));
    Plan {
        device: dev.index,
        recorded: ask.recorded,
        recorded_peak_allocated_bytes: tl.peaks.allocated.bytes,
        recorded_peak_reserved_bytes: tl.peaks.reserved.bytes,
        model_peak_allocated_bytes: at_rec.peak_allocated,
        model_peak_reserved_bytes: at_rec.peak_reserved,
        cap,
        predictions,
        max_batch,
        split: at_rec.split,
        fit,
        flash_attention: flash,
        starts_mid_run: !tl.initial.segments.is_empty(),
        prelog: prelog.fit.clone(),
        ends_in_oom,
        max_batch_at_most,
        requests: reqs.iter().flatten().count(),
        unsure_requests,
        seq_ambiguous,
        convolution_requests,
        band,
        band_evidence,
        varying_workspaces: reqs.iter().flatten().filter(|r| r.varies).count(),
        step_sizes,
        next_capture,
    }
}

fn max_batch_ok(m: &Result<MaxBatch, NoMaxBatch>) -> Option<MaxBatch> {
    m.as_ref().ok().cloned()
}

/// Steps a confirming capture records: step 1 makes the optimizer state, 2 and 3 repeat the
/// peak the plan replays.
pub const NEXT_CAPTURE_STEPS: u64 = 3;

/// From one capture whose readings differ (a prediction's central and upper peaks, or the
/// largest batch's two readings): twice the recorded batch, the size the two-capture fit was
/// measured with, or the safe largest batch where twice does not fit.
fn next_capture(
    fit: &Fit,
    rec: Shape,
    preds: &[Prediction],
    max: &Option<MaxBatch>,
) -> Option<NextCapture> {
    if *fit != Fit::OneCapture {
        return None;
    }
    let differ = preds.iter().any(|p| {
        p.peak_allocated_bytes != p.peak_allocated_upper_bytes
            || p.peak_reserved_bytes != p.peak_reserved_upper_bytes
    }) || max.as_ref().is_some_and(|m| m.rounded_down_by > 0);
    if !differ {
        return None;
    }
    let mut batch = rec.batch.saturating_mul(2);
    if let Some(m) = max {
        if m.batch < batch && m.batch > rec.batch {
            batch = m.batch;
        }
    }
    Some(NextCapture {
        batch,
        steps: NEXT_CAPTURE_STEPS,
    })
}
