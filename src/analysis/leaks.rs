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
//! shape, and the fix it suggests, can be read and tested one rule at a time.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;

use crate::analysis::loops;
use crate::analysis::replay::{round_size, Timeline};
use crate::analysis::sites::Site;
use crate::analysis::steps::{self, Step};
use crate::model::model_code::ModelCode;
use crate::model::{Action, Device, EventIdx, FrameKind, Snapshot, StackId, Stacks, Sym};
use crate::units::bytes;

mod extent;
pub use extent::{Extent, Release};

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

/// The shape of a leak: which [`LeakRule`] recognised it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeakKind {
    AccumulatedLoss,
    RetainedGraph,
    HookCache,
    KeptOutputs,
    TensorCache,
    SteadyGrowth,
    /// Memory of an attempt that ended in an OOM, alive while a later attempt ran
    /// ([`crate::analysis::retry`]).
    RetainedAttempt,
}

impl LeakKind {
    /// The snake_case name used in JSON, baselines and `--fail-on`.
    pub fn id(self) -> &'static str {
        match self {
            LeakKind::AccumulatedLoss => "accumulated_loss",
            LeakKind::RetainedGraph => "retained_graph",
            LeakKind::HookCache => "hook_cache",
            LeakKind::KeptOutputs => "kept_outputs",
            LeakKind::TensorCache => "tensor_cache",
            LeakKind::SteadyGrowth => "steady_growth",
            LeakKind::RetainedAttempt => "retained_attempt",
        }
    }
    /// The name in prose: `retained graph`.
    pub fn label(self) -> &'static str {
        match self {
            LeakKind::AccumulatedLoss => "accumulated loss",
            LeakKind::RetainedGraph => "retained graph",
            LeakKind::HookCache => "hook cache",
            LeakKind::KeptOutputs => "kept outputs",
            LeakKind::TensorCache => "tensor cache",
            LeakKind::SteadyGrowth => "steady growth",
            LeakKind::RetainedAttempt => "retained failed attempt",
        }
    }
}

impl PartialEq<&str> for LeakKind {
    fn eq(&self, other: &&str) -> bool {
        self.id() == *other
    }
}

impl std::fmt::Display for LeakKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
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
    /// How sure memscope is of the kind and the blamed line.
    pub confidence: Confidence,
    /// Survivors of the site at the end of the growth window.
    pub live_bytes: u64,
    pub count: u64,
    pub growth_bytes_per_step: f64,
    pub growth_tensors_per_step: f64,
    /// Boundaries crossed by the growth window (steps over which it grew).
    pub steps: usize,
    /// Name of the first and last step of the window.
    pub first_step: String,
    pub last_step: String,
    pub window_start_event: EventIdx,
    pub window_end_event: EventIdx,
    /// Goodness of the straight-line fit of survivors over the window.
    pub r2: f64,
    pub explanation: String,
    pub fix: String,
    pub samples: Vec<Sample>,
    pub related_sites: Vec<RelatedSite>,
    /// The heaviest full stack of the site, innermost first (`file:line function`).
    pub stack: Vec<String>,
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

/// What a rule says about a site.
#[derive(Clone, Debug, PartialEq)]
pub struct Match {
    pub kind: LeakKind,
    pub confidence: Confidence,
    pub explanation: String,
    pub fix: String,
}

/// A known shape of leak.
pub trait LeakRule {
    /// The `kind` of findings it makes (snake_case).
    fn id(&self) -> LeakKind;
    /// What it detects, in one sentence.
    fn describe(&self) -> &'static str;
    fn matches(&self, ev: &SiteEvidence) -> Option<Match>;
}

fn at(site: &Option<Site>) -> String {
    site.as_ref()
        .map(|s| format!("{}:{} (in {})", s.file, s.line, s.function))
        .unwrap_or_else(|| "allocations with no recorded stack".into())
}

fn per_step(ev: &SiteEvidence) -> String {
    format!(
        "{} more survive at {} after every step ({:.1} tensors per step, {} steps, {} live at the end of the growth)",
        bytes(ev.growth_bytes_per_step.max(0.0) as u64),
        at(&ev.site),
        ev.growth_tensors_per_step,
        ev.steps,
        bytes(ev.live_bytes)
    )
}

/// Accumulated loss tensor: a 0-dim tensor kept every step.
///
/// Detects: survivors that are all tiny (at most 16 bytes requested: one scalar), about one
/// per step. Bad because each scalar carries its autograd graph: `total += loss` (out of
/// place) or `losses.append(loss)` keeps one per step, and with it every graph node and, if
/// backward was not run on it, every activation it saved.
/// Example: `total_loss = total_loss + loss` in the training loop.
/// Fix: `total_loss += loss.item()` (or `loss.detach()`).
pub struct AccumulatedLoss;

impl LeakRule for AccumulatedLoss {
    fn id(&self) -> LeakKind {
        LeakKind::AccumulatedLoss
    }
    fn describe(&self) -> &'static str {
        "one 0-dim tensor (a loss) kept per step, with its autograd graph"
    }
    fn matches(&self, ev: &SiteEvidence) -> Option<Match> {
        let one_per_step = (0.5..=2.5).contains(&ev.growth_tensors_per_step);
        (ev.survivors > 0 && ev.max_requested <= 16 && one_per_step).then(|| Match {
            kind: self.id(),
            confidence: Confidence::Medium,
            explanation: format!(
                "{}. They are scalars (at most {} bytes each): a loss or metric kept as a tensor every step, by `total += loss` or `history.append(loss)`. Each one also keeps its autograd graph alive (on the CPU, and on the GPU whatever the graph saved if backward never ran on it), which is why this matters beyond its size.",
                per_step(ev),
                ev.max_requested
            ),
            fix: "accumulate Python numbers: `total += loss.item()` (or store `loss.detach()`)".into(),
        })
    }
}

/// Retained autograd graph: a forward pass's saved activations survive every step.
///
/// Detects: several tensors per step allocated under `torch.nn` module calls survive. Bad
/// because a graph that is neither backpropagated nor released keeps every tensor it saved
/// for backward, so memory grows by a whole forward pass per step until the OOM.
/// Example: validation without `torch.no_grad()` doing `val_loss += crit(model(x), y)`;
/// `loss.backward(retain_graph=True)` with the losses kept in a list.
/// Fix: `with torch.no_grad():` (or `torch.inference_mode()`) for evaluation, accumulate
/// `.item()`, and drop `retain_graph=True` unless a second backward needs it.
pub struct RetainedGraph;

impl LeakRule for RetainedGraph {
    fn id(&self) -> LeakKind {
        LeakKind::RetainedGraph
    }
    fn describe(&self) -> &'static str {
        "every step's forward activations kept alive by an autograd graph that is never released"
    }
    fn matches(&self, ev: &SiteEvidence) -> Option<Match> {
        (ev.in_module_share >= 0.5 && ev.growth_tensors_per_step >= 3.0 && ev.survival_share >= MIN_GRAPH_SURVIVAL)
            .then(|| Match {
            kind: self.id(),
            confidence: Confidence::High,
            explanation: format!(
                "{}. They are allocated inside module calls, several per step: the activations autograd saves for backward. A whole forward pass surviving every step means each step's graph is kept and never freed: typically evaluation without `torch.no_grad()` whose loss is accumulated as a tensor, or `backward(retain_graph=True)` with the losses kept.",
                per_step(ev)
            ),
            fix: "run evaluation under `with torch.no_grad():` (or `torch.inference_mode()`), accumulate `loss.item()` rather than the loss tensor, and drop `retain_graph=True` unless a second backward needs it".into(),
        })
    }
}

/// A forward hook or module cache keeping an intermediate activation every step.
///
/// Detects: about one tensor per step that is an intermediate of a forward pass (the same
/// call allocates more after it) survives. Bad because nothing in the user's own loop holds
/// it: a hook (`register_forward_hook` appending `output`) or a module attribute does, and
/// such references outlive the step silently.
/// Example: `def hook(m, i, out): cache.append(out)`.
/// Fix: store `output.detach().cpu()` (or a reduced statistic), and clear the cache each step.
pub struct HookCache;

impl LeakRule for HookCache {
    fn id(&self) -> LeakKind {
        LeakKind::HookCache
    }
    fn describe(&self) -> &'static str {
        "an intermediate activation kept every step by a forward hook or a module-level cache"
    }
    fn matches(&self, ev: &SiteEvidence) -> Option<Match> {
        let inner = ev.intermediate_share >= 0.5 && ev.nested_share >= 0.5;
        (ev.in_module_share >= 0.5 && inner).then(|| Match {
            kind: self.id(),
            confidence: Confidence::Medium,
            explanation: format!(
                "{}. Each is an intermediate of the forward pass (the same call allocates more after it), not its result, so the user's loop never sees it: a forward hook or a module attribute that stores layer outputs is the usual holder. The holding line is not in the allocation stack; look for `register_forward_hook` / `register_forward_pre_hook` callbacks or `self.x = ...` in forward methods.",
                per_step(ev)
            ),
            fix: "in the hook, keep `output.detach().cpu()` or a statistic, not the tensor; clear the cache every step; remove the hook handle when done".into(),
        })
    }
}

/// The forward pass's result kept every step (appended to a list, stored in a dict).
///
/// Detects: about one or two tensors per step that are the last allocation of a model call
/// survive. Bad because the list keeps each output and, unless detached, its graph.
/// Example: `preds.append(out)` for metrics at the end of the epoch.
/// Fix: `preds.append(out.detach().cpu())`, or accumulate the metric as you go.
pub struct KeptOutputs;

impl LeakRule for KeptOutputs {
    fn id(&self) -> LeakKind {
        LeakKind::KeptOutputs
    }
    fn describe(&self) -> &'static str {
        "a model's output appended to a list (or stored) every step"
    }
    fn matches(&self, ev: &SiteEvidence) -> Option<Match> {
        (ev.in_module_share >= 0.5).then(|| Match {
            kind: self.id(),
            confidence: Confidence::Medium,
            explanation: format!(
                "{}. Each is the result of the model call on that line, kept after the step: usually `outputs.append(out)` (or a dict of outputs) for later metrics. The line that stores it allocates nothing, so it cannot be named from a snapshot; look for where the result of this line is stored.",
                per_step(ev)
            ),
            fix: "keep `out.detach().cpu()` (or the metric itself) instead of the CUDA tensor, and clear the list each epoch".into(),
        })
    }
}

/// A tensor made on a user line and cached every step (a list or a dict that only grows).
///
/// Detects: about one tensor per step created by the user's own line (not inside a model
/// call) survives. Bad because the container grows without bound.
/// Example: `cache[step] = out.detach().clone()`.
/// Fix: bound the cache (evict, or keep only the last N), or move entries to the CPU.
pub struct TensorCache;

impl LeakRule for TensorCache {
    fn id(&self) -> LeakKind {
        LeakKind::TensorCache
    }
    fn describe(&self) -> &'static str {
        "tensors created by a user line and stored every step in a list or dict that only grows"
    }
    fn matches(&self, ev: &SiteEvidence) -> Option<Match> {
        (ev.in_module_share < 0.5).then(|| Match {
            kind: self.id(),
            confidence: Confidence::Medium,
            explanation: format!(
                "{}. They are made by that line itself, outside any model call, and never released: a list or dict that gains an entry per step (`cache[k] = t.clone()`, `saved.append(t)`).",
                per_step(ev)
            ),
            fix: "bound the container (evict old entries, keep the last N) or store CPU copies; delete entries once used".into(),
        })
    }
}

/// Steady growth of a shape memscope does not recognise.
pub struct SteadyGrowth;

impl LeakRule for SteadyGrowth {
    fn id(&self) -> LeakKind {
        LeakKind::SteadyGrowth
    }
    fn describe(&self) -> &'static str {
        "survivors of one site that grow every step, of no recognised shape"
    }
    fn matches(&self, ev: &SiteEvidence) -> Option<Match> {
        Some(Match {
            kind: self.id(),
            confidence: Confidence::Low,
            explanation: format!("{}.", per_step(ev)),
            fix: "find what references tensors made on this line across steps (lists, dicts, closures, module attributes) and release or detach them".into(),
        })
    }
}

/// The rules, most specific first; the last always matches.
pub fn rules() -> Vec<Box<dyn LeakRule>> {
    vec![
        Box::new(AccumulatedLoss),
        Box::new(RetainedGraph),
        Box::new(HookCache),
        Box::new(KeptOutputs),
        Box::new(TensorCache),
        Box::new(SteadyGrowth),
    ]
}

/// Judges a site with the rules.
pub fn classify(ev: &SiteEvidence) -> Match {
    rules()
        .iter()
        .find_map(|r| r.matches(ev))
        .unwrap_or_else(|| Match {
            kind: LeakKind::SteadyGrowth,
            confidence: Confidence::Low,
            explanation: per_step(ev),
            fix: String::new(),
        })
}

// ---------------------------------------------------------------------------------------------
// Series and fits

/// A window of boundaries `[start, end]` over which a series grows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    pub start: usize,
    pub end: usize,
    pub rising: usize,
}

/// The window of steady growth with the largest rise: runs without a decrease, trimmed to
/// their first and last rise, that rise at [`MIN_RISING_STEPS`] boundaries or more, and at
/// [`MIN_RISING_SHARE`] of them.
pub fn growth_window(v: &[u64]) -> Option<Window> {
    growth_window_min(v, MIN_RISING_STEPS)
}

/// [`growth_window`] with another least number of rising boundaries.
pub fn growth_window_min(v: &[u64], min_rising: usize) -> Option<Window> {
    let mut best: Option<(u64, Window)> = None;
    let mut a = 0;
    while a + 1 < v.len() {
        // The run [a, b]: no decrease.
        let mut b = a;
        while b + 1 < v.len() && v[b + 1] >= v[b] {
            b += 1;
        }
        let first_rise = (a..b).find(|&i| v[i + 1] > v[i]);
        let last_rise = (a..b).rev().find(|&i| v[i + 1] > v[i]);
        if let (Some(mut s), Some(l)) = (first_rise, last_rise) {
            let e = l + 1;
            // Warm-up: up to two first rises far above the typical one (workspaces, the
            // optimizer's first state) are not the leak's.
            let mut rises: Vec<u64> = (s..e).map(|i| v[i + 1] - v[i]).filter(|&d| d > 0).collect();
            rises.sort_unstable();
            let typical = rises.get(rises.len() / 2).copied().unwrap_or(0);
            let mut trimmed = 0;
            while trimmed < 2 && s + 1 < e && v[s + 1] - v[s] > 3 * typical {
                s += 1;
                trimmed += 1;
            }
            let rising = (s..e).filter(|&i| v[i + 1] > v[i]).count();
            let share = rising as f64 / (e - s) as f64;
            if rising >= min_rising && share >= MIN_RISING_SHARE {
                let rise = v[e] - v[s];
                if best.is_none_or(|(r, _)| rise >= r) {
                    best = Some((
                        rise,
                        Window {
                            start: s,
                            end: e,
                            rising,
                        },
                    ));
                }
            }
        }
        a = b.max(a + 1);
    }
    best.map(|(_, w)| w)
}

/// Theil-Sen slope of `v` against its index: the median of pairwise slopes, robust to a
/// few odd steps. Long series use the pairs `(i, i + n/2)` only, which keeps it linear.
pub fn theil_sen(v: &[f64]) -> f64 {
    let n = v.len();
    if n < 2 {
        return 0.0;
    }
    let mut slopes: Vec<f64> = Vec::new();
    if n <= 200 {
        for i in 0..n {
            for j in i + 1..n {
                slopes.push((v[j] - v[i]) / (j - i) as f64);
            }
        }
    } else {
        let h = n / 2;
        for i in 0..n - h {
            slopes.push((v[i + h] - v[i]) / h as f64);
        }
    }
    slopes.sort_by(|a, b| a.total_cmp(b));
    let m = slopes.len();
    if m % 2 == 1 {
        slopes[m / 2]
    } else {
        (slopes[m / 2 - 1] + slopes[m / 2]) / 2.0
    }
}

/// R² of the least-squares line through `v` against its index (1 for a constant series).
pub fn r_squared(v: &[f64]) -> f64 {
    let n = v.len() as f64;
    if v.len() < 3 {
        return 1.0;
    }
    let mx = (n - 1.0) / 2.0;
    let my = v.iter().sum::<f64>() / n;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (i, &y) in v.iter().enumerate() {
        let dx = i as f64 - mx;
        let dy = y - my;
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    if syy == 0.0 {
        return 1.0;
    }
    (sxy * sxy) / (sxx * syy)
}

// ---------------------------------------------------------------------------------------------
// The walk

/// A block allocated in the log and not yet freed.
#[derive(Clone, Copy, Debug)]
struct Rec {
    site: SiteId,
    size: u64,
    requested: u64,
    alloc: u32,
}

/// Per-site survivors at every boundary, stored as changes (most sites never change).
struct Survivors {
    /// `changes[site]`: `(boundary, bytes, count)` whenever the site's figures changed.
    changes: Vec<Vec<(u32, u64, u64)>>,
}

impl Survivors {
    /// Dense series of one site over all boundaries.
    fn series(&self, site: SiteId, n: usize) -> (Vec<u64>, Vec<u64>) {
        let mut b = vec![0u64; n];
        let mut c = vec![0u64; n];
        let ch = &self.changes[site.0 as usize];
        for (k, &(at, by, co)) in ch.iter().enumerate() {
            let until = ch.get(k + 1).map(|x| x.0 as usize).unwrap_or(n);
            for i in at as usize..until.min(n) {
                b[i] = by;
                c[i] = co;
            }
        }
        (b, c)
    }
}

/// A change of one site's sums: `(site, bytes delta, count delta)`.
type Delta = (SiteId, i64, i64);

/// Applies event `i` to the live map; returns the changes to per-site sums (at most two:
/// an alloc over a block believed live means that block was freed unseen).
fn apply(
    dev: &Device,
    snap: &Snapshot,
    sites: &mut SiteTable,
    live: &mut HashMap<u64, Rec>,
    i: usize,
) -> [Option<Delta>; 2] {
    let e = &dev.events[i];
    match e.action {
        Action::Alloc => {
            let r = Rec {
                site: sites.of(e.stack),
                size: round_size(e.size, &snap.settings),
                requested: e.size,
                alloc: i as u32,
            };
            let old = live
                .insert(e.addr, r)
                .map(|o| (o.site, -(o.size as i64), -1));
            [Some((r.site, r.size as i64, 1)), old]
        }
        Action::FreeRequested | Action::FreeCompleted => [
            live.remove(&e.addr).map(|r| (r.site, -(r.size as i64), -1)),
            None,
        ],
        _ => [None, None],
    }
}

fn walk(
    dev: &Device,
    snap: &Snapshot,
    sites: &mut SiteTable,
    bounds: &[(usize, usize)],
) -> Survivors {
    let mut live: HashMap<u64, Rec> = HashMap::default();
    let mut sums: Vec<(u64, u64)> = Vec::new();
    let mut dirty: Vec<SiteId> = Vec::new();
    let mut is_dirty: Vec<bool> = Vec::new();
    let mut changes: Vec<Vec<(u32, u64, u64)>> = Vec::new();
    let mut next = 0usize;
    for i in 0..dev.events.len() {
        for (s, db, dc) in apply(dev, snap, sites, &mut live, i).into_iter().flatten() {
            let k = s.0 as usize;
            if sums.len() <= k {
                sums.resize(k + 1, (0, 0));
                is_dirty.resize(k + 1, false);
                changes.resize(k + 1, Vec::new());
            }
            sums[k].0 = sums[k].0.saturating_add_signed(db);
            sums[k].1 = sums[k].1.saturating_add_signed(dc);
            if !is_dirty[k] {
                is_dirty[k] = true;
                dirty.push(s);
            }
        }
        while next < bounds.len() && bounds[next].0 == i {
            for s in dirty.drain(..) {
                let k = s.0 as usize;
                is_dirty[k] = false;
                changes[k].push((next as u32, sums[k].0, sums[k].1));
            }
            next += 1;
        }
    }
    changes.resize(sites.len(), Vec::new());
    Survivors { changes }
}

/// A site whose survivors grew, before grouping.
#[derive(Clone, Debug)]
struct Candidate {
    site: SiteId,
    window: Window,
    slope_bytes: f64,
    slope_count: f64,
    r2: f64,
    live_bytes: u64,
    count: u64,
}

/// Survivor details of one candidate, from the second pass.
#[derive(Clone, Debug, Default)]
struct Details {
    survivors: Vec<(u64, Rec)>,
    stack_bytes: HashMap<StackId, u64>,
    /// Allocations the site made inside the window, survivors or not.
    allocations: usize,
    /// Bytes of those survivors still alive at the judgement point (the end, or the last OOM).
    persisting_bytes: u64,
}

impl Details {
    fn grown_bytes(&self) -> u64 {
        self.survivors
            .iter()
            .fold(0u64, |t, (_, r)| t.saturating_add(r.size))
    }
    fn persisting_share(&self) -> f64 {
        let g = self.grown_bytes();
        if g == 0 {
            return 0.0;
        }
        self.persisting_bytes as f64 / g as f64
    }
}

/// Finds the leaks of one device. `steps` comes from [`steps::split`].
pub fn find(snap: &Snapshot, dev: &Device, tl: &Timeline, steps: &[Step]) -> Findings {
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
    let surv = walk(dev, snap, &mut sites, &bounds);
    let nb = bounds.len();
    let mut cands: Vec<Candidate> = Vec::new();
    for (k, ch) in surv.changes.iter().enumerate() {
        if ch.len() < min_bounds - 1 {
            continue;
        }
        let site = SiteId(k as u32);
        let (b, c) = surv.series(site, nb);
        // Growth that ran up to the OOM and holds most of what was allocated there is the
        // OOM's leak even over a few steps (an inference server keeping every request's cache).
        let up_to_oom = || {
            growth_window_min(&b, OOM_MIN_RISING_STEPS).filter(|w| {
                // Up to the OOM, or to the last step's end before it (the step the OOM
                // interrupted may not have added to it yet).
                oom_sample.is_some()
                    && w.end + 2 >= nb
                    && b[nb - 1] >= b[w.end]
                    && b[nb - 1] as f64 >= OOM_SITE_SHARE * allocated_at_oom as f64
            })
        };
        let Some(w) = growth_window(&b).or_else(up_to_oom) else {
            continue;
        };
        let vb: Vec<f64> = b[w.start..=w.end].iter().map(|&x| x as f64).collect();
        let vc: Vec<f64> = c[w.start..=w.end].iter().map(|&x| x as f64).collect();
        let r2 = r_squared(&vb);
        let slope_bytes = theil_sen(&vb);
        if r2 < MIN_R2 || slope_bytes <= 0.0 {
            continue;
        }
        cands.push(Candidate {
            site,
            window: w,
            slope_bytes,
            slope_count: theil_sen(&vc),
            r2,
            live_bytes: b[w.end],
            count: c[w.end],
        });
    }
    if cands.is_empty() {
        return Findings::default();
    }
    // Growth persists when what grew is still alive where the capture ends, or at its last
    // OOM (what the program freed while unwinding from the OOM does not count).
    let judge_at = tl
        .ooms
        .last()
        .map(|o| o.event.0 as usize)
        .unwrap_or(dev.events.len().saturating_sub(1));
    let details = second_pass(dev, snap, &mut sites, &bounds, &cands, judge_at);
    let model = ModelCode::new(&snap.stacks);
    let loop_frame = loop_frame(snap, dev, steps);
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
    Findings {
        leaks,
        bounded_growth,
    }
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
    pub leaks: Vec<Leak>,
    pub bounded_growth: Vec<BoundedGrowth>,
}

/// The user's frame that runs the steps' loop: across the allocations of the steps, the first
/// depth of their user chains ([`loops::user_chain`]) where the lines differ, the function
/// being the same. Blame for memory kept across steps lands on that frame's line: the line of
/// the loop body the memory came from.
fn loop_frame(snap: &Snapshot, dev: &Device, steps: &[Step]) -> Option<(Sym, Sym)> {
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
fn line_in(stacks: &Stacks, s: StackId, func: (Sym, Sym)) -> Option<Site> {
    stacks.frames(s).iter().rev().find_map(|&f| {
        let fr = stacks.frame(f);
        ((fr.file, fr.name) == func).then(|| Site {
            file: stacks.str(fr.file).to_owned(),
            line: fr.line,
            function: stacks.str(fr.name).to_owned(),
        })
    })
}

fn second_pass(
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
fn forward_depth(stacks: &Stacks, s: StackId) -> usize {
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

fn in_module(stacks: &Stacks, s: StackId) -> bool {
    stacks.frames(s).iter().any(|&f| {
        let fr = stacks.frame(f);
        fr.kind == FrameKind::Torch && stacks.str(fr.file).contains("torch/nn/modules/")
    })
}

/// Whether the innermost frame that is not native is the user's own.
fn direct_user(stacks: &Stacks, s: StackId) -> bool {
    stacks
        .first_python_frame(s)
        .is_some_and(|f| f.kind == FrameKind::User)
}

fn evidence_of(
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
fn user_functions(stacks: &Stacks, s: StackId) -> impl Iterator<Item = (Sym, Sym)> + '_ {
    stacks.frames(s).iter().filter_map(move |&f| {
        let fr = stacks.frame(f);
        (fr.kind == FrameKind::User && stacks.str(fr.name) != "<module>")
            .then_some((fr.file, fr.name))
    })
}

/// The user line (in `func`) that ran backward during the candidate's window, and in how many
/// of the window's steps it did.
fn backward_site(
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
                    fr.kind == FrameKind::Torch && stacks_backward(st.str(fr.file), st.str(fr.name))
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

fn stacks_backward(file: &str, name: &str) -> bool {
    name == "backward" && (file.ends_with("torch/_tensor.py") || file.contains("torch/autograd/"))
}

fn samples(dev: &Device, d: &Details) -> Vec<Sample> {
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
                time_us: dev.events[r.alloc as usize].time_us,
            }
        })
        .collect()
}

/// Groups candidates of one function whose windows overlap into one finding: the site that
/// grew most is the finding's site, the others are related. For a retained graph, a small
/// one-per-step survivor after it in the same function is taken as the cause (module docs).
#[allow(clippy::too_many_arguments)]
fn group(
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
        let mut explanation = mat.explanation.clone();
        let mut confidence = mat.confidence;
        let mut cause_site = None;
        let backward_found = backward.is_some();
        if let Some((bsite, bsteps)) = backward {
            explanation.push_str(&format!(
                " Backward ran from {}:{} in {} of these {} steps, yet the activations it should have released survive it: that is `backward(retain_graph=True)` (or a graph kept for a second backward), and something also keeps each step's loss or output (a list, an accumulator), which holds the retained graph. Both are inferred from the log (backward allocations and survivors), not from references.",
                bsite.file, bsite.line, bsteps, ev.steps
            ));
            confidence = confidence.min(Confidence::Medium);
            cause_site = Some(bsite);
        } else if let Some(o) = cause {
            let cs = loop_line[o].clone().or_else(|| evidence[o].site.clone());
            if let Some(cs) = &cs {
                explanation.push_str(&format!(
                    " The graph is most likely held by the tensor made at {}:{}: it too survives every step ({:.1} tensors, {} per step), it is small, and it is allocated right after these activations in the same function, which is what an accumulated loss (`total += loss`) or a kept loss looks like. No backward ran in these steps. This is inferred from allocation order, not from references (a snapshot records none).",
                    cs.file,
                    cs.line,
                    evidence[o].growth_tensors_per_step,
                    bytes(evidence[o].growth_bytes_per_step.max(0.0) as u64),
                ));
            }
            cause_site = cs;
        } else if retained && ev.scalars_per_step >= 0.5 {
            explanation.push_str(&format!(
                " The same line also leaves {:.1} scalar tensors (a loss) alive per step and no backward runs in these steps: the loss accumulated as a tensor on this very line (`total += crit(model(x), y)`) holds each step's graph. Inferred from the survivors, not from references.",
                ev.scalars_per_step
            ));
        } else if retained {
            confidence = confidence.min(Confidence::Medium);
            explanation.push_str(" No backward ran from this function during these steps, so this is a forward pass run with autograd enabled (no `torch.no_grad()`) whose result is kept from step to step; what keeps it (an accumulator such as `val_loss += crit(model(x), y)`, possibly on this very line, or a list) allocates nothing the log could show, so no cause line is named.");
        }
        if !members.is_empty() {
            let names: Vec<String> = members
                .iter()
                .filter_map(|&o| {
                    evidence[o]
                        .site
                        .as_ref()
                        .map(|s| format!("{}:{}", s.file, s.line))
                })
                .collect();
            explanation.push_str(&format!(
                " Memory made at these lines grows over the same steps and is part of the same finding: {}.",
                names.join(", ")
            ));
        }
        if let (Some(l), Some(a)) = (&main_loop, &ev.site) {
            if l != a {
                explanation.push_str(&format!(
                    " The memory is allocated at {}:{} (in {}), called from the loop's line {}:{}.",
                    a.file, a.line, a.function, l.file, l.line
                ));
            }
        }
        let blame = if backward_found {
            Blame::RetainedBackward
        } else if cause_site.is_some() {
            Blame::GraphRoot
        } else if main_loop.is_some() {
            Blame::LoopLine
        } else {
            Blame::AllocatingLine
        };
        let first_step = steps
            .get(bounds[main.window.start].1 + 1)
            .map(|s| s.name.clone())
            .unwrap_or_default();
        let last_step = steps
            .get(bounds[main.window.end].1)
            .map(|s| s.name.clone())
            .unwrap_or_default();
        let heaviest = heaviest[m];
        let (extent, release) = extents[m].clone();
        if let Some(r) = &release {
            explanation.push(' ');
            explanation.push_str(&extent::explain(extent, r, ev));
        }
        out.push(Leak {
            kind: mat.kind,
            extent,
            release,
            site: main_loop.clone().or_else(|| ev.site.clone()),
            blame,
            line_known: true,
            allocation_site: ev.site.clone(),
            cause_site,
            confidence,
            live_bytes: main.live_bytes,
            count: main.count,
            growth_bytes_per_step: main.slope_bytes,
            growth_tensors_per_step: main.slope_count,
            steps: ev.steps,
            first_step,
            last_step,
            window_start_event: EventIdx(bounds[main.window.start].0 as u32),
            window_end_event: EventIdx(bounds[main.window.end].0 as u32),
            r2: main.r2,
            explanation,
            fix: mat.fix,
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
    out.sort_by(|a, b| b.grown_bytes().total_cmp(&a.grown_bytes()));
    out
}

// ---------------------------------------------------------------------------------------------
// The OOM's view

/// Whether memory grew steadily, through a leak, right up to an OOM.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LeakSignal {
    /// Index of the finding in the `leaks` list it was judged from.
    pub leak: usize,
    pub kind: LeakKind,
    pub site: Option<Site>,
    pub growth_bytes_per_step: f64,
    pub steps: usize,
    /// Bytes the finding's sites gained over its window.
    pub grown_bytes: u64,
    /// That growth as a share of allocated memory at the OOM.
    pub share_of_allocated: f64,
    pub summary: String,
}

/// Share of allocated memory at the OOM that the leak's growth must account for.
pub const MIN_OOM_SHARE: f64 = 0.2;

/// Says whether memory grew steadily before the OOM at `oom` (an `oom` event's index): a leak
/// finding whose growth lasted until at most two steps before the OOM and accounts for at
/// least [`MIN_OOM_SHARE`] of allocated memory there. Steady growth that is no leak of a
/// model loop (tensors kept on purpose outside one) does not count.
pub fn leak_signal_before(
    snap: &Snapshot,
    dev: &Device,
    tl: &Timeline,
    oom: EventIdx,
) -> Option<LeakSignal> {
    let steps = steps::split(snap, dev, tl);
    let leaks = find(snap, dev, tl, &steps);
    leak_signal_from(&steps, &leaks.leaks, tl, oom)
}

/// [`leak_signal_before`] with steps and findings already computed.
pub fn leak_signal_from(
    steps: &[Step],
    leaks: &[Leak],
    tl: &Timeline,
    oom: EventIdx,
) -> Option<LeakSignal> {
    let o = oom.0 as usize;
    let allocated = tl.series.allocated.get(o).copied().unwrap_or(0).max(1);
    let bounds: Vec<usize> = steps::boundaries(steps)
        .iter()
        .map(|b| b.0)
        .filter(|&b| b < o)
        .collect();
    let recent = bounds.len().saturating_sub(3);
    let recent_from = bounds.get(recent).copied().unwrap_or(0);
    leaks
        .iter()
        .enumerate()
        // Growth that began before the OOM and was still going in its last steps (the step
        // the OOM interrupted may be the window's last).
        .filter(|(_, l)| (l.window_start_event.0 as usize) < o && l.window_end_event.0 as usize >= recent_from)
        // Retained failed attempts are not growth over steps: they make their own cause.
        .filter(|(_, l)| l.kind != LeakKind::RetainedAttempt)
        // What was released before this OOM did not fill the memory it ran out of.
        .filter(|(_, l)| !l.extent.released())
        .map(|(i, l)| (i, l, l.grown_bytes().max(0.0)))
        .filter(|(_, _, g)| *g >= MIN_OOM_SHARE * allocated as f64)
        .max_by(|a, b| a.2.total_cmp(&b.2))
        .map(|(i, l, g)| LeakSignal {
            leak: i,
            kind: l.kind,
            site: l.site.clone(),
            growth_bytes_per_step: l.growth_bytes_per_step,
            steps: l.steps,
            grown_bytes: g as u64,
            share_of_allocated: g / allocated as f64,
            summary: format!(
                "survivors grew by {} per step for {} steps up to the OOM ({} in all, {:.0}% of the {} allocated then), at {}",
                bytes(l.growth_bytes_per_step.max(0.0) as u64),
                l.steps,
                bytes(g as u64),
                100.0 * g / allocated as f64,
                bytes(allocated),
                at(&l.site)
            ),
        })
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
        assert_eq!(m.kind, "accumulated_loss");
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
            "retained_graph"
        );
        assert!(RetainedGraph
            .matches(&ev(25e6, 7.0, 4 << 20, 0.0, 0.0))
            .is_none());
    }

    #[test]
    fn rule_hook_cache() {
        assert_eq!(
            classify(&ev(4e6, 1.0, 4 << 20, 1.0, 1.0)).kind,
            "hook_cache"
        );
    }

    #[test]
    fn rule_kept_outputs() {
        assert_eq!(
            classify(&ev(2e6, 1.0, 2 << 20, 1.0, 0.0)).kind,
            "kept_outputs"
        );
    }

    #[test]
    fn rule_tensor_cache() {
        assert_eq!(
            classify(&ev(2e6, 1.0, 2 << 20, 0.0, 0.0)).kind,
            "tensor_cache"
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

    #[test]
    fn finds_a_list_append_in_a_synthetic_loop() {
        use crate::model::{AllocatorSettings, Device, Event, Layout};
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
        let mk = |action, addr, size, stack| Event {
            action,
            addr,
            size,
            stream: 0,
            time_us: None,
            stack,
            device_free: None,
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
        let dev = Device {
            index: 0,
            segments: Vec::new(),
            events,
        };
        let snap = Snapshot {
            layout: Layout::Torch21,
            devices: vec![dev.clone()],
            stacks: st,
            annotations: Vec::new(),
            settings: AllocatorSettings::default(),
            load_notes: Vec::new(),
        };
        let tl = crate::analysis::replay::replay(&dev, &snap.settings);
        let steps = steps::split(&snap, &dev, &tl);
        let leaks = find(&snap, &dev, &tl, &steps).leaks;
        assert_eq!(leaks.len(), 1, "{leaks:#?}");
        let l = &leaks[0];
        assert_eq!(l.kind, "kept_outputs");
        assert_eq!(l.site.as_ref().map(|s| s.line), Some(11));
        assert!((l.growth_bytes_per_step - (1 << 20) as f64).abs() < 1.0);
        assert!((l.growth_tensors_per_step - 1.0).abs() < 1e-9);
        assert!(l.cause_site.is_none());
    }
}
