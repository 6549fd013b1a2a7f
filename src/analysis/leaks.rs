//! Leaks: memory allocated by one line of the program that survives more steps each step.
//!
//! Total memory is a poor leak detector: the caching allocator keeps what it reserved, the
//! first steps allocate optimizer state, and a leak of 512 bytes per step disappears in the
//! noise of gigabytes. So survivors are counted per allocation site (the first user frame) at
//! every step boundary, from one pass over the log, and a site is a suspect only when its
//! survivors rise at nearly every boundary for several steps in a row, along a straight line.
//! That rules out, by construction: parameters and optimizer state (allocated once, then
//! flat), warm-up (one or two rising steps), the caching allocator (reserved memory is not
//! counted at all), and the last step's live tensors (the end of the log is not a boundary).
//!
//! The site is where memory was allocated; what keeps it alive is usually another line. A
//! snapshot records no references, so the cause line is inferred, and only in the one case
//! where the log shows it: when a retained autograd graph holds a forward pass's activations,
//! the tensor that roots the graph (the accumulated loss) is itself a small survivor, one per
//! step, allocated in the same function right after the leaking activations. Its line is
//! named as `cause_site`, with that reasoning in the explanation. Elsewhere (a list append, a
//! hook, a dict) the holding line allocates nothing and is not named.
//!
//! Each known shape of leak is its own [`LeakRule`], so that what memscope claims about a
//! shape, and the fix it suggests, can be read and tested one rule at a time. The rules are
//! registered once ([`rules::CODES`]) and judge both captures: a snapshot's log here, a
//! profiler trace's survivors in [`trace`].

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;

use crate::analysis::loops;
use crate::analysis::replay::{round_size, Timeline};
use crate::analysis::sites::Site;
use crate::analysis::steps::{self, Step};
use crate::model::model_code::ModelCode;
use crate::model::{Action, Device, EventIdx, FrameKind, Snapshot, StackId, Stacks, Sym};

pub mod benign;
mod extent;
mod find;
mod fit;
pub mod irregular;
pub mod kept_by;
pub mod rules;
pub mod series;
mod sharded;
mod signal;
mod survivors;
pub mod trace;

pub use benign::{BenignReading, ExcludedGrowth, RuledOut};
pub use extent::{Extent, Release};
pub use find::*;
pub use fit::*;
pub use kept_by::{KeptBy, Mechanism};
pub use rules::*;
use sharded::walk_on;
pub use sharded::SPLIT_MIN_VAR;
pub use signal::*;
use survivors::*;

/// Fewest rising boundaries for a site to be a suspect. Warm-up (optimizer state in the first
/// step, cuBLAS workspaces) rises once or twice; a leak rises every step.
pub const MIN_RISING_STEPS: usize = 5;
/// Share of a growth window's boundaries at which the survivors must rise.
pub const MIN_RISING_SHARE: f64 = 0.75;
/// Least-squares fit of the survivors over the window: a leak grows along a line.
pub const MIN_R2: f64 = 0.9;

/// An allocation site: the frame that names a stack (see [`Stacks::site_frame`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SiteId(pub u32);

/// Interns sites, so the walk over the log works with integers.
pub(crate) struct SiteTable<'a> {
    stacks: &'a Stacks,
    by_stack: HashMap<StackId, SiteId>,
    ids: HashMap<Option<(Sym, u32, Sym)>, SiteId>,
    /// Per site: the site frame's key.
    keys: Vec<Option<(Sym, u32, Sym)>>,
}

impl<'a> SiteTable<'a> {
    pub(crate) fn new(stacks: &'a Stacks) -> Self {
        SiteTable {
            stacks,
            by_stack: HashMap::default(),
            ids: HashMap::default(),
            keys: Vec::new(),
        }
    }

    pub(crate) fn of(&mut self, s: StackId) -> SiteId {
        if let Some(&id) = self.by_stack.get(&s) {
            return id;
        }
        let key = self.stacks.site_frame(s).map(|f| (f.file, f.line, f.name));
        let next = SiteId(self.keys.len() as u32);
        let id = *self.ids.entry(key).or_insert(next);
        if id == next {
            self.keys.push(key);
        }
        self.by_stack.insert(s, id);
        id
    }

    fn len(&self) -> usize {
        self.keys.len()
    }

    fn site(&self, id: SiteId) -> Option<Site> {
        let (file, line, name) = (*self.keys.get(id.0 as usize)?)?;
        Some(Site {
            file: self.stacks.str(file).to_owned(),
            line,
            function: self.stacks.str(name).to_owned(),
        })
    }

    /// `(file, function)` of the site frame: sites in one function are grouped into one finding.
    fn function(&self, id: SiteId) -> Option<(Sym, Sym)> {
        self.keys
            .get(id.0 as usize)
            .copied()
            .flatten()
            .map(|(f, _, n)| (f, n))
    }
}

/// How sure memscope is of a finding's kind and of the line it blames. Computed once, from the
/// evidence, after every rule and inference has run: the label and the prose cannot disagree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    Low,
    Medium,
    High,
}

impl Confidence {
    pub fn name(self) -> &'static str {
        match self {
            Confidence::Low => "low",
            Confidence::Medium => "medium",
            Confidence::High => "high",
        }
    }
}

impl std::fmt::Display for Confidence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What the finding's `site` is, and so how far to trust it as the line to change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Blame {
    /// The loop-body line whose call allocated the memory that is kept; the line that stores
    /// it allocates nothing, so a snapshot cannot show it.
    LoopLine,
    /// The line that makes the small tensor rooting the retained graph (the loss that is kept
    /// or accumulated): it survives every step with the graph.
    GraphRoot,
    /// The line running `backward(retain_graph=True)` in the steps where the graph survived.
    RetainedBackward,
    /// The allocating line itself (no loop frame was found above it).
    AllocatingLine,
}

/// A surviving block, as shown in a finding.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Sample {
    pub address: u64,
    /// Rounded size (what the allocator counts).
    pub size: u64,
    pub requested_size: u64,
    pub alloc_event: EventIdx,
    pub time_us: Option<i64>,
}

/// A site that grew along with a finding's main site, in the same function and steps.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RelatedSite {
    pub site: Option<Site>,
    pub live_bytes: u64,
    pub count: u64,
    pub growth_bytes_per_step: f64,
    pub growth_tensors_per_step: f64,
}

/// One leak finding.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Leak {
    /// The rule that matched (`retained_graph`, `accumulated_loss`, ...).
    pub kind: LeakKind,
    /// Whether the memory is still alive at the end (or the OOM), or was released only after
    /// the loop that grew it ended (an accumulation all the same: its peak grows with the steps).
    pub extent: Extent,
    /// Where and when a released accumulation was freed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub release: Option<Release>,
    /// The line to change: where the loop's body kept or made the memory (see `blame`).
    /// `None`: blocks with no recorded stack.
    pub site: Option<Site>,
    /// What `site` is: the loop line, the graph's root, the retaining backward, or the
    /// allocating line.
    pub blame: Blame,
    /// Whether the sites' lines are the lines of the statements. A profiler trace records a
    /// frame's line as of when the frame was entered (or when profiling began), so for traces
    /// this is `false` and only the files and functions are reliable.
    pub line_known: bool,
    /// The innermost user frame that allocated the memory (the evidence behind `site`).
    pub allocation_site: Option<Site>,
    /// What keeps it alive, where that is a different line and the log shows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause_site: Option<Site>,
    /// The mechanism that keeps the memory, where the stack shows one (a hook, a callback, a
    /// closure), with the line to change when it is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept_by: Option<KeptBy>,
    /// How sure memscope is of the kind and the blamed line.
    pub confidence: Confidence,
    /// Survivors of the site at the end of the growth window.
    pub live_bytes: u64,
    /// What fixing the finding frees, at least: the bytes of the blocks its sites allocated
    /// inside the growth window that were still alive at its end. `live_bytes` is the most: it
    /// also counts blocks the sites held before the window (a cuBLAS workspace made by the same
    /// line's first matmul, the container's first entries), which a fix may not free. `None`
    /// where the log cannot tell (retained attempts, traces).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub freed_by_fix_at_least: Option<u64>,
    pub count: u64,
    pub growth_bytes_per_step: f64,
    pub growth_tensors_per_step: f64,
    /// Boundaries crossed by the growth window (steps over which it grew).
    pub steps: usize,
    /// The first and last step of the window (serialized as their labels).
    pub first_step: StepLabel,
    pub last_step: StepLabel,
    pub window_start_event: EventIdx,
    pub window_end_event: EventIdx,
    /// Goodness of the straight-line fit of survivors over the window.
    pub r2: f64,
    /// What the finding rests on besides its figures; its explanation and fix (the JSON's
    /// `explanation` and `fix`) are [`crate::wording::leak_explanation`]'s and `leak_fix`'s.
    #[serde(skip)]
    pub evidence: LeakEvidence,
    /// The benign readings this finding's figures rule out (replacement, a bounded container,
    /// immaterial growth), with those figures; `None` for retained attempts and traces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ruled_out: Option<RuledOut>,
    pub samples: Vec<Sample>,
    pub related_sites: Vec<RelatedSite>,
    /// The heaviest full stack of the site, innermost first (`file:line function`).
    pub stack: Vec<String>,
}

/// Where a finding's window starts or ends: a step of the workload, or (for retained failed
/// attempts, which have no steps) the OOM an attempt followed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepLabel {
    /// A step, by its name (`ProfilerStep#3`, `step 6`); empty where there is none.
    Step(String),
    /// The `oom` entry an attempt followed.
    OomAt(EventIdx),
}

impl Leak {
    /// Bytes the finding's sites gained over the window.
    pub fn grown_bytes(&self) -> f64 {
        let related: f64 = self
            .related_sites
            .iter()
            .map(|r| r.growth_bytes_per_step)
            .sum();
        (self.growth_bytes_per_step + related) * self.steps as f64
    }

    /// Bytes at stake: what the finding's sites held at the growth's end (alive at the end, or
    /// at their peak for a released accumulation). Findings are ranked by it.
    pub fn bytes_at_stake(&self) -> u64 {
        self.related_sites
            .iter()
            .fold(self.live_bytes, |t, r| t.saturating_add(r.live_bytes))
    }
}

/// Everything known about one growing site, what the rules judge.
#[derive(Clone, Debug, PartialEq)]
pub struct SiteEvidence {
    pub site: Option<Site>,
    pub growth_bytes_per_step: f64,
    pub growth_tensors_per_step: f64,
    pub steps: usize,
    pub r2: f64,
    /// Live bytes and blocks of the site at the window's end.
    pub live_bytes: u64,
    pub count: u64,
    /// Survivors allocated inside the window.
    pub survivors: usize,
    /// Largest requested size among those survivors.
    pub max_requested: u64,
    /// Share of survivors allocated under a `torch.nn` module call (a forward pass, a loss).
    pub in_module_share: f64,
    /// Survivors as a share of the site's allocations in the window: a retained graph keeps
    /// nearly everything a forward allocates; a cache keeps one result of many (a KV cache
    /// keeps the last of its per-token concatenations).
    pub survival_share: f64,
    /// Share of survivors followed by another allocation from the same site in the same call:
    /// intermediates of a forward pass, not its result.
    pub intermediate_share: f64,
    /// Share of survivors allocated by the user's line itself (no torch frame inside it).
    pub direct_share: f64,
    /// Share of survivors allocated by a module called from inside another module's forward
    /// (a layer of a model, not the model or loss the user's line called).
    pub nested_share: f64,
    /// Survivors per step that are scalars (at most 16 bytes requested).
    pub scalars_per_step: f64,
}

/// Everything a trace's memory events show of one group of survivors (kept by one loop, or
/// made at one site where no loop is known), what the rules that read a trace judge.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceSiteEvidence {
    /// Bytes of the group's survivors still alive when profiling stopped.
    pub total_bytes: u64,
    /// Those made by ops that recorded an autograd node (grad mode on) that no backward in the
    /// trace consumed: survivors that hold a graph.
    pub graph_bytes: u64,
    /// Survivors (blocks) in all, and the sites that made them.
    pub count: u64,
    pub sites: usize,
    /// Profiled steps with survivors of the group, of all profiled steps.
    pub steps_with_live: usize,
    pub profiled_steps: usize,
}

/// What a rule says about a site.
#[derive(Clone, Debug, PartialEq)]
pub struct Match {
    pub kind: LeakKind,
    pub confidence: Confidence,
}

/// The typed evidence of a finding, by where it was found.
#[derive(Clone, Debug, PartialEq)]
pub enum LeakEvidence {
    /// In a snapshot's log, by a rule ([`Leak::kind`] says which).
    Log(LogEvidence),
    /// In a profiler trace's memory events.
    Trace(TraceEvidence),
    /// Attempts that ended in an OOM, held while the next one ran ([`crate::analysis::retry`]).
    RetainedAttempts(RetryEvidence),
    /// A container that gained entries on some steps and never freed them
    /// ([`irregular`]).
    Irregular(IrregularEvidence),
}

/// An irregular growth finding's evidence: which steps added entries, and the entries.
#[derive(Clone, Debug, PartialEq)]
pub struct IrregularEvidence {
    /// The allocating line.
    pub site: Option<Site>,
    /// The steps that added entries (by name).
    pub gain_steps: Vec<String>,
    /// Boundaries from the one before the first gain to the last.
    pub steps: usize,
    /// Entries (blocks) and bytes gained, none of them freed.
    pub entries: u64,
    pub bytes: u64,
    /// The entries' distinct sizes, largest first (at most [`irregular::SHOWN_SIZES`]), and how
    /// many distinct sizes there were.
    pub sizes: Vec<u64>,
    pub distinct_sizes: usize,
    /// The loop body's line that called the allocating line, where it is another line.
    pub loop_line: Option<Site>,
}

/// A snapshot finding's evidence.
#[derive(Clone, Debug, PartialEq)]
pub struct LogEvidence {
    /// The main site's growth, as the rule read it.
    pub site: Option<Site>,
    pub growth_bytes_per_step: f64,
    pub growth_tensors_per_step: f64,
    pub steps: usize,
    pub live_bytes: u64,
    /// Largest requested size among the survivors (a scalar loss is at most 16 bytes).
    pub max_requested: u64,
    /// What the log shows holds a retained graph, where the rule is `retained_graph`.
    pub holder: Option<Holder>,
    /// The lines of the other sites that grew over the same steps, in the same finding.
    pub members: Vec<Site>,
    /// The loop body's line that called the allocating line, where it is another line.
    pub loop_line: Option<Site>,
}

/// What holds a retained graph, as far as the log shows it.
#[derive(Clone, Debug, PartialEq)]
pub enum Holder {
    /// A backward ran from `site` in `backward_steps` of the finding's steps, and the
    /// activations survived it: `backward(retain_graph=True)` with the losses kept.
    RetainedBackward { site: Site, backward_steps: usize },
    /// A small tensor made right after the activations in the same function survives every
    /// step too: the accumulated or kept loss.
    GraphRoot {
        site: Site,
        tensors_per_step: f64,
        bytes_per_step: f64,
    },
    /// The same line leaves scalars (a loss) alive per step, and no backward ran.
    LossOnSameLine { scalars_per_step: f64 },
    /// No backward ran from the function: a forward with autograd on whose result is kept; no
    /// line allocates the holder.
    ForwardWithGrad,
}

/// A trace finding's evidence.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceEvidence {
    /// What the rules judged: the group's bytes, those holding a graph, its sites and steps.
    pub group: TraceSiteEvidence,
    /// The main site, and its bytes.
    pub main_site: Option<Site>,
    pub main_bytes: u64,
    /// The ops that made them (at most 6).
    pub ops: Vec<String>,
    pub per_step_bytes: u64,
    /// The loop that keeps them, with the line the trace recorded for it.
    pub keeper: Option<Site>,
}

/// A retained-attempts finding's evidence.
#[derive(Clone, Debug, PartialEq)]
pub struct RetryEvidence {
    pub attempts: usize,
    /// The line that called the attempt.
    pub call: Option<Site>,
    /// The most any one attempt held, in how many blocks, after which OOM.
    pub most_bytes: u64,
    pub most_blocks: u64,
    pub most_after_oom: EventIdx,
    pub total_bytes: u64,
    /// Later attempts that ran out of memory with it still held.
    pub later_ooms: usize,
}

/// A known shape of leak, registered in [`rules::CODES`].
pub trait LeakRule: Sync {
    /// The `kind` of findings it makes (snake_case).
    fn id(&self) -> LeakKind;
    /// What it detects, in one sentence.
    fn describe(&self) -> &'static str;
    /// Its judgement of a snapshot's growing site.
    fn matches(&self, ev: &SiteEvidence) -> Option<Match>;
    /// Its judgement of a trace's group of survivors. Asked only of rules whose row says
    /// [`OnTrace::Judges`]; the others read evidence a trace lacks ([`OnTrace::Lacks`]).
    fn matches_trace(&self, _ev: &TraceSiteEvidence) -> Option<Match> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(
        growth_bytes: f64,
        tensors: f64,
        max_req: u64,
        in_module: f64,
        inter: f64,
    ) -> SiteEvidence {
        SiteEvidence {
            site: Some(Site {
                file: "train.py".into(),
                line: 10,
                function: "main".into(),
            }),
            growth_bytes_per_step: growth_bytes,
            growth_tensors_per_step: tensors,
            steps: 10,
            r2: 1.0,
            live_bytes: (growth_bytes * 10.0) as u64,
            count: (tensors * 10.0) as u64,
            survivors: 10,
            max_requested: max_req,
            in_module_share: in_module,
            survival_share: 1.0,
            intermediate_share: inter,
            direct_share: 1.0 - in_module,
            nested_share: in_module,
            scalars_per_step: 0.0,
        }
    }

    #[test]
    fn window_needs_steady_rise() {
        // Warm-up: two rises then flat.
        assert_eq!(growth_window(&[0, 10, 20, 20, 20, 20, 20, 20, 20]), None);
        // A leak from step 3 on.
        let w = growth_window(&[5, 5, 5, 6, 7, 8, 9, 10, 11, 12]).unwrap();
        assert_eq!((w.start, w.end, w.rising), (2, 9, 7));
        // A drop splits runs; the longer rising run wins.
        let w = growth_window(&[0, 1, 2, 3, 4, 5, 6, 0, 1, 2]).unwrap();
        assert_eq!((w.start, w.end), (0, 6));
        // Rising only every other step: share 0.5 is not steady enough.
        assert_eq!(
            growth_window(&[0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6]),
            None
        );
        // Flat memory (parameters, optimizer state): nothing.
        assert_eq!(growth_window(&[7; 20]), None);
    }

    #[test]
    fn fits() {
        let v: Vec<f64> = (0..50).map(|i| 3.0 * i as f64 + 2.0).collect();
        assert!((theil_sen(&v) - 3.0).abs() < 1e-9);
        assert!((r_squared(&v) - 1.0).abs() < 1e-9);
        let mut w = v.clone();
        w[10] = 1000.0; // one outlier does not move Theil-Sen
        assert!((theil_sen(&w) - 3.0).abs() < 1e-9);
        let long: Vec<f64> = (0..1000).map(|i| i as f64 * 0.5).collect();
        assert!((theil_sen(&long) - 0.5).abs() < 1e-9);
    }

    #[test]
    fn rule_accumulated_loss() {
        let m = classify(&ev(512.0, 1.0, 4, 1.0, 0.0));
        assert_eq!(m.kind, LeakKind::AccumulatedLoss);
        assert!(AccumulatedLoss
            .matches(&ev(512.0, 5.0, 4, 1.0, 0.0))
            .is_none());
        assert!(AccumulatedLoss
            .matches(&ev(4096.0, 1.0, 4096, 1.0, 0.0))
            .is_none());
    }

    #[test]
    fn rule_retained_graph() {
        assert_eq!(
            classify(&ev(25e6, 7.0, 4 << 20, 1.0, 0.8)).kind,
            LeakKind::RetainedGraph
        );
        assert!(RetainedGraph
            .matches(&ev(25e6, 7.0, 4 << 20, 0.0, 0.0))
            .is_none());
    }

    #[test]
    fn rule_hook_cache() {
        assert_eq!(
            classify(&ev(4e6, 1.0, 4 << 20, 1.0, 1.0)).kind,
            LeakKind::HookCache
        );
    }

    #[test]
    fn rule_kept_outputs() {
        assert_eq!(
            classify(&ev(2e6, 1.0, 2 << 20, 1.0, 0.0)).kind,
            LeakKind::KeptOutputs
        );
    }

    #[test]
    fn rule_tensor_cache() {
        assert_eq!(
            classify(&ev(2e6, 1.0, 2 << 20, 0.0, 0.0)).kind,
            LeakKind::TensorCache
        );
    }

    #[test]
    fn rule_fallback_and_ids() {
        assert!(SteadyGrowth.matches(&ev(1.0, 0.0, 0, 0.0, 0.0)).is_some());
        let ids: Vec<_> = rules().iter().map(|r| r.id()).collect();
        let mut dedup = ids.clone();
        dedup.dedup();
        assert_eq!(ids, dedup);
        assert!(rules().iter().all(|r| !r.describe().is_empty()));
    }

    /// A loop of 12 steps under a 1 GiB block allocated first (the peak), each step keeping one
    /// `kept` bytes tensor made by the loop's own line, its temporaries freed.
    fn kept_under_a_gib(kept: u64) -> Findings {
        use crate::model::{Device, EventData, Layout};
        let mut st = Stacks::new();
        let setup = st.intern_frame("train.py", 5, "main");
        let data = st.intern_frame("train.py", 10, "main");
        let keep = st.intern_frame("train.py", 12, "main");
        let lin = st.intern_frame(
            "/v/lib/python3.12/site-packages/torch/nn/modules/linear.py",
            134,
            "forward",
        );
        let fwd = st.intern_frame("train.py", 11, "main");
        let (s_setup, s_in) = (st.intern_stack(&[setup]), st.intern_stack(&[data]));
        let (s_out, s_keep) = (st.intern_stack(&[lin, fwd]), st.intern_stack(&[keep]));
        let mk = |action, addr, size, stack| EventData {
            action,
            addr,
            size,
            stream: 0,
            time_us: None,
            stack,
            device_free: None,
            meta: crate::model::MetaId::NONE,
        };
        let mut events = vec![
            mk(Action::SegmentAlloc, 0, 1 << 32, StackId::EMPTY),
            mk(Action::Alloc, 1 << 31, 1 << 30, s_setup),
        ];
        for k in 0..12u64 {
            let base = k << 24;
            events.push(mk(Action::Alloc, base, 4096, s_in));
            events.push(mk(Action::Alloc, base + (1 << 20), 1 << 20, s_out));
            events.push(mk(Action::Alloc, base + (4 << 20), kept, s_keep));
            for a in [base, base + (1 << 20)] {
                events.push(mk(Action::FreeRequested, a, 0, s_in));
                events.push(mk(Action::FreeCompleted, a, 0, s_in));
            }
        }
        let dev = Device::of_events(events);
        let snap = Snapshot::of_devices(Layout::Torch21, vec![dev.clone()], st);
        let tl = crate::analysis::replay::replay(&dev, &snap.settings);
        let steps = steps::split(&snap, &dev, &tl);
        find(&snap, &dev, &tl, &steps)
    }

    #[test]
    fn kib_per_step_against_a_gib_peak_is_a_note_not_a_finding() {
        // 512 B per step (a 64-element tensor) against a 1 GiB peak: 2 million steps to the peak.
        let f = kept_under_a_gib(256);
        assert!(f.leaks.is_empty(), "{:#?}", f.leaks);
        let notes: Vec<_> = f
            .excluded
            .iter()
            .filter_map(|g| match g.reading {
                BenignReading::Immaterial { steps_to_peak, .. } => Some(steps_to_peak),
                _ => None,
            })
            .collect();
        assert_eq!(notes.len(), 1, "{:#?}", f.excluded);
        assert!(notes[0] > benign::MATERIAL_STEPS);
        // The same line keeping 4 MiB per step is a finding, with its figures against the peak.
        let f = kept_under_a_gib(4 << 20);
        assert_eq!(f.leaks.len(), 1, "{:#?}", f.excluded);
        let r = f.leaks[0].ruled_out.as_ref().expect("ruled out");
        assert!(r.steps_to_peak.is_some_and(|n| n < 1000.0), "{r:?}");
        assert_eq!(r.blocks_at_end - r.blocks_at_start, f.leaks[0].steps as u64);
    }

    #[test]
    fn finds_a_list_append_in_a_synthetic_loop() {
        use crate::model::{Device, EventData, Layout};
        let mut st = Stacks::new();
        let data = st.intern_frame("train.py", 10, "main");
        let fwd = st.intern_frame("train.py", 11, "main");
        let lin = st.intern_frame(
            "/v/lib/python3.12/site-packages/torch/nn/modules/linear.py",
            134,
            "forward",
        );
        let s_in = st.intern_stack(&[data]);
        let s_out = st.intern_stack(&[lin, fwd]);
        let mk = |action, addr, size, stack| EventData {
            action,
            addr,
            size,
            stream: 0,
            time_us: None,
            stack,
            device_free: None,
            meta: crate::model::MetaId::NONE,
        };
        let mut events = vec![mk(Action::SegmentAlloc, 0, 1 << 30, StackId::EMPTY)];
        for k in 0..12u64 {
            let base = k << 24;
            events.push(mk(Action::Alloc, base, 4096, s_in));
            events.push(mk(Action::Alloc, base + (1 << 20), 1 << 20, s_out));
            events.push(mk(Action::Alloc, base + (2 << 20), 1 << 20, s_out));
            // The first output is an intermediate, freed; the last is kept (appended).
            for a in [base, base + (1 << 20)] {
                events.push(mk(Action::FreeRequested, a, 0, s_in));
                events.push(mk(Action::FreeCompleted, a, 0, s_in));
            }
        }
        let dev = Device::of_events(events);
        let snap = Snapshot::of_devices(Layout::Torch21, vec![dev.clone()], st);
        let tl = crate::analysis::replay::replay(&dev, &snap.settings);
        let steps = steps::split(&snap, &dev, &tl);
        let leaks = find(&snap, &dev, &tl, &steps).leaks;
        assert_eq!(leaks.len(), 1, "{leaks:#?}");
        let l = &leaks[0];
        assert_eq!(l.kind, LeakKind::KeptOutputs);
        assert_eq!(l.site.as_ref().map(|s| s.line), Some(11));
        assert!((l.growth_bytes_per_step - (1 << 20) as f64).abs() < 1.0);
        assert!((l.growth_tensors_per_step - 1.0).abs() < 1e-9);
        assert!(l.cause_site.is_none());
    }
}
