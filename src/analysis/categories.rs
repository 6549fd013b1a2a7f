//! What live memory is for: parameters, optimizer state, gradients, activations, temporaries.
//!
//! "3 GiB allocated at the OOM" is only actionable once it is split the way a user thinks
//! about a model: shrinking the batch helps activations, not optimizer state. A snapshot has
//! no tensor roles, so each block's role is inferred from two things the log does record: the
//! frames that allocated it and its lifetime relative to the step it was made in. Each category
//! comes with the rules that filled it, so a reader can judge them: they are heuristics, and
//! `other` is kept honest rather than guessed into. What each rule rests on:
//!
//! - optimizer state / temporaries: the optimizer's own code (a `torch/optim/` frame with nothing
//!   but torch inside it); alive past its step or not. What a closure the optimizer calls makes
//!   (`optimizer.step(closure)`: Lightning, LBFGS, a user's closure running the model and its
//!   backward) is the model's: activations, gradients, temporaries by the rules below.
//! - parameters: `Module._apply` (`.to()`, `.cuda()`) or `nn.Parameter` frames; a function that
//!   loads or initialises weights (`init_weight*`, `load_state_dict`, `from_pretrained`), where
//!   the block outlives it; or a native-only stack before the first forward pass that shows no
//!   backward.
//! - gradients: only where a backward ran. The evidence is a frame of autograd's engine or a
//!   generated backward node in a C++ stack (`Engine::evaluate_function`, `BmmBackward0::apply`),
//!   the Python entry of a backward (`Tensor.backward`, `torch.autograd.backward`/`grad`,
//!   `_engine_run_backward`, a compiled graph's `backward`), a custom Function's backward
//!   (`torch/autograd/function.py apply` with no Python caller), or a block with no stack at all
//!   allocated after a backward call was seen in the log (autograd's engine thread records no
//!   Python frames). `torch/autograd/function.py apply` under user code is a forward (a custom
//!   Function, DataParallel's `Broadcast.apply`, a compiled forward): never a gradient.
//! - activations / forward temporaries: a `torch.nn` module frame; kept past the step or freed by
//!   the backward, or freed before it.
//! - before recording: blocks alive at the log's first entry, allocated before recording began (no
//!   stack) or before the ring buffer's oldest entry (own stack kept). They are counted apart,
//!   unless their own stack names them (optimizer, `Module._apply`, a backward).
//! - a snapshot with no log (only the state at the dump): each block by its own stack, and a block
//!   with no stack by what the whole capture says ([`crate::analysis::sites::FramelessEvidence`]):
//!   before recording where it can only predate recording, else `other`, said to be either.

use rustc_hash::FxHashMap as HashMap;

use crate::analysis::replay::{LiveBlock, State};
use crate::analysis::sites::Origin;
use crate::analysis::steps::Step;
use crate::model::{
    Action, BlockState, Device, EventIdx, FrameRole, OptimizerPart, Snapshot, StackId, Stacks,
};

/// A role of live memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Parameter,
    OptimizerState,
    Gradient,
    Activation,
    Temporary,
    /// Allocated before the log's first entry, and not recognisable from its own stack.
    BeforeRecording,
    /// A capture with no backward (inference): memory made under a cache's update (a KV cache).
    KvCache,
    /// A capture with no backward (inference): what a forward made and kept past its step
    /// (outputs, states): not saved for any backward, so not activations.
    Output,
    Other,
}

impl Category {
    pub fn name(self) -> &'static str {
        match self {
            Category::Parameter => "parameter",
            Category::OptimizerState => "optimizer_state",
            Category::Gradient => "gradient",
            Category::Activation => "activation",
            Category::Temporary => "temporary",
            Category::BeforeRecording => "before_recording",
            Category::KvCache => "kv_cache",
            Category::Output => "output",
            Category::Other => "other",
        }
    }
}

/// One inference rule and what it put in its category.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Basis {
    pub category: Category,
    pub bytes: u64,
    pub blocks: u64,
    /// What the inference rests on (serialized as its sentence).
    pub rule: CategoryRule,
}

/// Allocated bytes by category at one state of the log.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Categories {
    /// The event after which the state was taken (`None`: the state before the log).
    pub at_event: Option<EventIdx>,
    pub parameter: u64,
    pub optimizer_state: u64,
    pub gradient: u64,
    pub activation: u64,
    pub temporary: u64,
    /// Blocks allocated before the log began that their stack does not identify.
    pub before_recording: u64,
    /// Inference only (no backward anywhere in the capture); absent from JSON when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub kv_cache: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub output: u64,
    pub other: u64,
    /// The rules used, largest first.
    pub basis: Vec<Basis>,
}

impl Categories {
    pub fn bytes(&self, c: Category) -> u64 {
        match c {
            Category::Parameter => self.parameter,
            Category::OptimizerState => self.optimizer_state,
            Category::Gradient => self.gradient,
            Category::Activation => self.activation,
            Category::Temporary => self.temporary,
            Category::BeforeRecording => self.before_recording,
            Category::KvCache => self.kv_cache,
            Category::Output => self.output,
            Category::Other => self.other,
        }
    }
    fn add(&mut self, c: Category, n: u64) {
        let slot = match c {
            Category::Parameter => &mut self.parameter,
            Category::OptimizerState => &mut self.optimizer_state,
            Category::Gradient => &mut self.gradient,
            Category::Activation => &mut self.activation,
            Category::Temporary => &mut self.temporary,
            Category::BeforeRecording => &mut self.before_recording,
            Category::KvCache => &mut self.kv_cache,
            Category::Output => &mut self.output,
            Category::Other => &mut self.other,
        };
        *slot = slot.saturating_add(n);
    }
    pub fn total(&self) -> u64 {
        [
            self.parameter,
            self.optimizer_state,
            self.gradient,
            self.activation,
            self.temporary,
            self.before_recording,
            self.kv_cache,
            self.output,
            self.other,
        ]
        .into_iter()
        .fold(0u64, u64::saturating_add)
    }
    /// Each category holding bytes, with its name in prose, in report order.
    pub fn named(&self) -> Vec<(&'static str, u64)> {
        [
            ("parameters", self.parameter),
            ("optimizer state", self.optimizer_state),
            ("gradients", self.gradient),
            ("activations", self.activation),
            ("KV cache", self.kv_cache),
            ("outputs", self.output),
            ("temporaries", self.temporary),
            ("allocated before recording", self.before_recording),
            ("other", self.other),
        ]
        .into_iter()
        .filter(|(_, b)| *b > 0)
        .collect()
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Which inference rule put a block in its category: the evidence a [`Basis`] rests on.
/// Its sentence (what the rule rests on) is [`crate::wording::category_rule`]'s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CategoryRule {
    Optim,
    OptimTmp,
    Apply,
    Weights,
    EarlyNative,
    Grad,
    Native,
    PreGrad,
    GradTmp,
    Act,
    ActTeardown,
    FwdTmp,
    UserTmp,
    User,
    BeforeRec,
    BeforeLog,
    Workspace,
    Pending,
    DumpBeforeCpp,
    DumpBeforeNoBwd,
    DumpEither,
    UnloggedEither,
    DumpGrad,
    KvGrown,
    Kv,
    InfOut,
    InfTmp,
    DumpOut,
    DumpAct,
    DumpUser,
    DumpNative,
}

/// Frame facts of one stack.
#[derive(Clone, Copy, Debug, Default)]
struct Facts {
    optim: bool,
    apply: bool,
    /// The stack shows a backward pass running (see [`Stacks::backward_evidence`]).
    backward: bool,
    module: bool,
    python: bool,
    /// The stack records no frame at all.
    empty: bool,
    /// A native frame of cuBLAS workspace allocation.
    workspace: bool,
    /// A Python frame of a cache (its file or function names one: `cache_utils.py`,
    /// `update_kv_cache`): a KV cache's update in inference.
    cache: bool,
    /// An autograd node releasing what it saved for backward (`…Backward0::release_variables`):
    /// the graph torn down (after its backward, or as an OOM's exception destroyed it).
    release: bool,
    /// A frame of a function that loads or initialises weights ([`WEIGHT_FUNCTIONS`]).
    weights: bool,
}

/// A stack's facts, from its frames' roles ([`crate::model::StackRoles`], decided once per
/// interned stack). The optimizer's own code is what the optimizer allocates outside any closure
/// it calls: memory that `optimizer.step(closure)` makes by running the model and its backward
/// (Lightning, LBFGS, a user's closure) is the model's, categorised as if no optimizer were
/// around it.
fn facts(stacks: &Stacks, s: StackId) -> Facts {
    let r = stacks.roles(s);
    let has = |role: FrameRole| r.any.intersects(role);
    Facts {
        optim: r.optimizer == OptimizerPart::Own,
        apply: has(FrameRole::MODULE_APPLY),
        backward: r.backward,
        module: has(FrameRole::MODULE),
        python: r.python,
        empty: stacks.frames(s).is_empty(),
        workspace: has(FrameRole::WORKSPACE),
        cache: has(FrameRole::CACHE),
        release: has(FrameRole::RELEASE_VARIABLES),
        weights: has(FrameRole::WEIGHT_LOADER),
    }
}

/// The share of a forward's module memory kept at an OOM from which it was a forward with
/// autograd enabled ([`module_bytes_kept`]).
const KEPT_BY_GRAD_FORWARD: f64 = 0.5;

/// Share of the bytes allocated under module calls before event `until` that are still alive
/// there: what the forwards kept. A forward with autograd enabled keeps what it saves for the
/// backward (most of what its layers make); one without (inference) frees each layer's
/// intermediates as the next layer consumes them, keeping only outputs and caches.
fn module_bytes_kept(dev: &Device, until: usize, module: &mut impl FnMut(StackId) -> bool) -> f64 {
    let mut live: HashMap<u64, u64> = HashMap::default();
    let (mut made, mut kept) = (0u64, 0u64);
    for e in &dev.events[..until.min(dev.events.len())] {
        match e.action {
            Action::Alloc if module(e.stack) => {
                made = made.saturating_add(e.size);
                kept = kept.saturating_add(e.size);
                live.insert(e.addr, e.size);
            }
            Action::FreeRequested => {
                if let Some(sz) = live.remove(&e.addr) {
                    kept = kept.saturating_sub(sz);
                }
            }
            _ => {}
        }
    }
    if made == 0 {
        0.0
    } else {
        kept as f64 / made as f64
    }
}

/// How many times a stack must replace a tensor by a larger one to be a growing cache.
const GROWTH_REPLACEMENTS: usize = 3;

/// Stacks that grow tensors by replacing them: an allocation followed, before the stack's next
/// one, by the free of a slightly smaller block the same stack made before its previous
/// allocation, while the stack held several such blocks. That is `k = torch.cat([past_k, k])`
/// in attention: each layer's keys (and values) appended to a new, larger tensor every token,
/// the old one freed; one line, one block per layer alive. Whatever the function is called, it
/// is a KV cache grown in attention. Each condition rules out a look-alike:
/// - the old block lived across other allocations of the stack (a token, the other layers),
///   and the new one is at most half as large again: an op's scratch buffers (a small one,
///   then a large one, freed at once) are not a cache;
/// - the stack held at least two blocks when it made the new one (one per layer): a forward
///   re-run over the whole sequence every token replaces its one output by a longer one too.
fn growing_by_replacement(dev: &Device) -> rustc_hash::FxHashSet<StackId> {
    // Live blocks: (stack, size, how many allocations the stack had made before it).
    let mut live: HashMap<u64, (StackId, u64, usize)> = HashMap::default();
    // Per stack: allocations so far, and blocks alive.
    let mut made: HashMap<StackId, usize> = HashMap::default();
    let mut alive: HashMap<StackId, usize> = HashMap::default();
    // Per stack: the latest allocation's size and how many other blocks of the stack were alive
    // then, while no free replaced it.
    let mut last: HashMap<StackId, (u64, usize)> = HashMap::default();
    let mut count: HashMap<StackId, usize> = HashMap::default();
    for e in &dev.events {
        match e.action {
            Action::Alloc => {
                let n = made.entry(e.stack).or_default();
                live.insert(e.addr, (e.stack, e.size, *n));
                *n += 1;
                let others = alive.entry(e.stack).or_default();
                last.insert(e.stack, (e.size, *others));
                *others += 1;
            }
            Action::FreeRequested => {
                let Some((s, size, nth)) = live.remove(&e.addr) else {
                    continue;
                };
                if let Some(a) = alive.get_mut(&s) {
                    *a = a.saturating_sub(1);
                }
                let (newer, others) = last.get(&s).copied().unwrap_or((0, 0));
                let lived_across = made.get(&s).is_some_and(|&n| n >= nth + 2);
                if newer > size
                    && newer <= size.saturating_add(size / 2)
                    && lived_across
                    && others >= 2
                {
                    *count.entry(s).or_default() += 1;
                    last.remove(&s);
                }
            }
            _ => {}
        }
    }
    count
        .into_iter()
        .filter(|&(s, n)| n >= GROWTH_REPLACEMENTS && s != StackId::EMPTY)
        .map(|(s, _)| s)
        .collect()
}

/// The addresses of blocks the log frees without having allocated them, where frees record
/// their own stack: some block allocated and freed in the log has a free whose stack differs
/// from its allocation's (with `context="alloc"` or `"state"`, a free repeats the allocation's
/// stack, which then still names the block's origin).
fn stacks_of_their_free(dev: &Device) -> rustc_hash::FxHashSet<u64> {
    let mut alloc_stack: HashMap<u64, StackId> = HashMap::default();
    let mut first_free: rustc_hash::FxHashSet<u64> = Default::default();
    let mut own = false;
    for e in &dev.events {
        match e.action {
            Action::Alloc => {
                alloc_stack.insert(e.addr, e.stack);
            }
            Action::FreeRequested => match alloc_stack.remove(&e.addr) {
                Some(s) => own |= s != e.stack,
                None => {
                    first_free.insert(e.addr);
                }
            },
            _ => {}
        }
    }
    if own {
        first_free
    } else {
        Default::default()
    }
}

/// Each allocation paired with the event that freed its block (`free_requested`, else
/// `free_completed`), in the order of the frees: what [`free_events`] and [`free_event_table`]
/// both hold.
fn each_free(dev: &Device, mut pair: impl FnMut(u32, u32)) {
    let mut live: HashMap<u64, u32> = HashMap::default();
    for (i, e) in dev.events.iter().enumerate() {
        match e.action {
            Action::Alloc => {
                live.insert(e.addr, i as u32);
            }
            Action::FreeRequested | Action::FreeCompleted => {
                if let Some(a) = live.remove(&e.addr) {
                    pair(a, i as u32);
                }
            }
            _ => {}
        }
    }
}

/// Per alloc event, the event that freed the block (`free_requested`, else `free_completed`).
pub(crate) fn free_events(dev: &Device) -> HashMap<u32, u32> {
    let mut out = HashMap::default();
    each_free(dev, |a, f| {
        out.insert(a, f);
    });
    out
}

/// [`free_events`] as a dense table: per event, the event that freed the block it allocated
/// (`u32::MAX`: none, or not an allocation). 4 bytes per event, looked up by index: the
/// classifier asks it once per live block of every state it classifies, where a hash map of
/// the same pairs took more memory and a hash per lookup.
pub(crate) fn free_event_table(dev: &Device) -> Vec<u32> {
    let mut out = vec![u32::MAX; dev.events.len()];
    each_free(dev, |a, f| out[a as usize] = f);
    out
}

/// Categorises the allocated blocks of `state` (the state after event `at`).
pub fn at_state(
    snap: &Snapshot,
    dev: &Device,
    steps: &[Step],
    state: &State,
    at: Option<EventIdx>,
) -> Categories {
    at_state_with(&mut Classifier::new(snap, dev, steps), snap, dev, state, at)
}

/// [`at_state`] with a classifier built beforehand (one per device, for several states).
pub fn at_state_with(
    c: &mut Classifier,
    snap: &Snapshot,
    dev: &Device,
    state: &State,
    at: Option<EventIdx>,
) -> Categories {
    let mut out = Categories {
        at_event: at,
        ..Categories::default()
    };
    let mut basis: HashMap<(Category, CategoryRule), (u64, u64)> = HashMap::default();
    for b in state.live_blocks() {
        let (cat, rule) = c.classify(snap, dev, b);
        if b.state == BlockState::ActiveAllocated {
            out.add(cat, b.size);
            let e = basis.entry((cat, rule)).or_default();
            e.0 = e.0.saturating_add(b.size);
            e.1 += 1;
        }
    }
    out.basis = basis
        .into_iter()
        .map(|((category, rule), (bytes, blocks))| Basis {
            category,
            bytes,
            blocks,
            rule,
        })
        .collect();
    out.basis
        .sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.category.cmp(&b.category)));
    out
}

/// What classifying a block needs from the whole log, computed once per device so a viewer can
/// classify the blocks of any state (the TUI's map at its cursor) without a pass over the log.
#[derive(Clone, Debug)]
pub struct Classifier {
    first_forward: usize,
    /// The first event whose stack shows a backward pass (usually `Tensor.backward`'s
    /// `_make_grads` on the Python thread): from there on, a block with no stack at all is taken as
    /// autograd's engine thread at work.
    first_backward: usize,
    /// Per event, the event that freed the block it allocated (`u32::MAX`: none).
    frees: Vec<u32>,
    /// No backward anywhere: no allocation after a backward call in the log, and no stack of the
    /// capture shows one (inference). Its forward memory is outputs and caches, not activations.
    inference: bool,
    /// After each OOM, the events up to the next allocation: what the program freed while the
    /// exception unwound (its frames and the graph they held), `(oom, next alloc)` exclusive.
    unwinds: Vec<(usize, usize)>,
    /// `(start, end)` events of each step.
    steps: Vec<(usize, usize)>,
    facts: HashMap<StackId, Facts>,
    /// What the capture says about blocks with no stack.
    frameless: crate::analysis::sites::FramelessEvidence,
    /// Blocks from before the log whose stack is the one of the free that released them in the
    /// log, not their allocation's: with `context="all"` a free records its own stack (the
    /// first recorded `zero_grad` freeing the `.grad` of the step before recording). Their
    /// stack says nothing about what they are.
    stack_of_their_free: rustc_hash::FxHashSet<u64>,
    /// Stacks that grow a tensor by replacing it (see [`growing_by_replacement`]).
    growing: rustc_hash::FxHashSet<StackId>,
}

/// The first allocation under a module call and the first under a backward pass (`usize::MAX`:
/// none), with the stack facts they read, memoized.
fn first_module_calls(stacks: &Stacks, dev: &Device) -> (HashMap<StackId, Facts>, usize, usize) {
    let mut facts_memo: HashMap<StackId, Facts> = HashMap::default();
    let mut first = |want: fn(&Facts) -> bool| {
        dev.events
            .iter()
            .position(|e| {
                e.action == Action::Alloc
                    && want(
                        facts_memo
                            .entry(e.stack)
                            .or_insert_with(|| facts(stacks, e.stack)),
                    )
            })
            .unwrap_or(usize::MAX)
    };
    let first_forward = first(|f| f.module);
    let first_backward = first(|f| f.backward);
    (facts_memo, first_forward, first_backward)
}

impl Classifier {
    pub fn new(snap: &Snapshot, dev: &Device, steps: &[Step]) -> Classifier {
        Classifier::from_ranges(
            snap,
            dev,
            steps
                .iter()
                .map(|s| (s.start_event.0 as usize, s.end_event.0 as usize))
                .collect(),
        )
    }

    /// A classifier from the steps' `(start, end)` events (inclusive), as
    /// [`crate::analysis::steps::Bounds::ranges`] gives them before any replay.
    pub fn from_ranges(snap: &Snapshot, dev: &Device, steps: Vec<(usize, usize)>) -> Classifier {
        Classifier::from_ranges_on(snap, dev, steps, 1)
    }

    /// [`Classifier::from_ranges`] with its whole-log passes (each a pure function of the log)
    /// side by side on up to `threads` threads, from 4 on (as the replay split): on the many
    /// cores' machine this classifier and the step search run beside the replay, and were the
    /// longer side. The classifier is the same for any count.
    pub fn from_ranges_on(
        snap: &Snapshot,
        dev: &Device,
        steps: Vec<(usize, usize)>,
        threads: usize,
    ) -> Classifier {
        let stacks = &snap.stacks;
        let inner = if threads >= 4 { threads } else { 1 };
        let (
            (mut facts_memo, first_forward, first_backward),
            (growing, (theirs, (frees, frameless))),
        ) = crate::threads::join(
            inner,
            || first_module_calls(stacks, dev),
            || {
                crate::threads::join(
                    inner,
                    || growing_by_replacement(dev),
                    || {
                        crate::threads::join(
                            inner,
                            || stacks_of_their_free(dev),
                            || {
                                crate::threads::join(
                                    inner,
                                    || free_event_table(dev),
                                    || crate::analysis::sites::FramelessEvidence::of(stacks, dev),
                                )
                            },
                        )
                    },
                )
            },
        );
        let unwinds = dev
            .events
            .iter()
            .enumerate()
            .filter(|(_, e)| e.action == Action::Oom)
            .map(|(o, _)| {
                let next = dev.events[o + 1..]
                    .iter()
                    .position(|e| e.action == Action::Alloc)
                    .map_or(dev.events.len(), |k| o + 1 + k);
                (o, next)
            })
            .collect();
        // No backward anywhere: inference, unless the log ends in an OOM in a forward that kept
        // most of what its layers made (autograd saving it for a backward that never came: the
        // first step of a training run that ran out of memory).
        let no_backward = first_backward == usize::MAX && !frameless.backward;
        let last_oom = dev.events.iter().rposition(|e| e.action == Action::Oom);
        let training_forward = no_backward
            && last_oom.is_some_and(|o| {
                let mut module = |s: StackId| {
                    facts_memo
                        .entry(s)
                        .or_insert_with(|| facts(stacks, s))
                        .module
                };
                module_bytes_kept(dev, o, &mut module) >= KEPT_BY_GRAD_FORWARD
            });
        Classifier {
            growing,
            stack_of_their_free: theirs,
            first_forward,
            first_backward,
            frees,
            inference: no_backward && !training_forward,
            unwinds,
            steps,
            facts: facts_memo,
            frameless,
        }
    }

    /// What the stacks and the log say of frameless blocks (made once, with the classifier).
    pub fn frameless(&self) -> crate::analysis::sites::FramelessEvidence {
        self.frameless
    }

    fn fact(&mut self, stacks: &Stacks, s: StackId) -> Facts {
        *self.facts.entry(s).or_insert_with(|| facts(stacks, s))
    }

    /// The end event of the step that contains event `i` (`usize::MAX`: none does).
    fn step_end(&self, i: usize) -> usize {
        let k = self.steps.partition_point(|s| s.0 <= i);
        k.checked_sub(1)
            .and_then(|k| self.steps.get(k))
            .filter(|s| i >= s.0 && i <= s.1)
            .map(|s| s.1)
            .unwrap_or(usize::MAX)
    }

    /// The category of a live block of this device, and the rule that put it there.
    pub fn classify(
        &mut self,
        snap: &Snapshot,
        dev: &Device,
        b: &LiveBlock,
    ) -> (Category, CategoryRule) {
        let stacks = &snap.stacks;
        if b.state == BlockState::ActivePendingFree {
            return (Category::Other, CategoryRule::Pending);
        }
        let f = self.fact(stacks, b.stack);
        match b.alloc_event {
            None if !self.frameless.has_log => {
                // No log at all: the block's own stack is everything there is.
                if f.workspace {
                    (Category::Other, CategoryRule::Workspace)
                } else if f.optim {
                    (Category::OptimizerState, CategoryRule::Optim)
                } else if f.apply {
                    (Category::Parameter, CategoryRule::Apply)
                } else if f.weights && !f.backward {
                    (Category::Parameter, CategoryRule::Weights)
                } else if f.backward {
                    (Category::Gradient, CategoryRule::DumpGrad)
                } else if f.empty {
                    match self.frameless.stackless_unlogged() {
                        Origin::BeforeRecording if self.frameless.native_frames => {
                            (Category::BeforeRecording, CategoryRule::DumpBeforeCpp)
                        }
                        Origin::BeforeRecording => {
                            (Category::BeforeRecording, CategoryRule::DumpBeforeNoBwd)
                        }
                        _ => (Category::Other, CategoryRule::DumpEither),
                    }
                } else if self.inference && f.cache {
                    (Category::KvCache, CategoryRule::Kv)
                } else if self.inference && f.module {
                    (Category::Output, CategoryRule::DumpOut)
                } else if f.module {
                    (Category::Activation, CategoryRule::DumpAct)
                } else if f.python {
                    (Category::Other, CategoryRule::DumpUser)
                } else {
                    (Category::Other, CategoryRule::DumpNative)
                }
            }
            None if self.stack_of_their_free.contains(&b.address) => {
                match self.frameless.stackless_unlogged() {
                    Origin::BeforeRecording => (Category::BeforeRecording, CategoryRule::BeforeRec),
                    _ => (Category::BeforeRecording, CategoryRule::UnloggedEither),
                }
            }
            None => {
                if f.optim {
                    (Category::OptimizerState, CategoryRule::Optim)
                } else if f.apply {
                    (Category::Parameter, CategoryRule::Apply)
                } else if f.weights && !f.backward {
                    (Category::Parameter, CategoryRule::Weights)
                } else if f.backward {
                    (Category::Gradient, CategoryRule::PreGrad)
                } else if f.empty {
                    match self.frameless.stackless_unlogged() {
                        Origin::BeforeRecording => {
                            (Category::BeforeRecording, CategoryRule::BeforeRec)
                        }
                        _ => (Category::BeforeRecording, CategoryRule::UnloggedEither),
                    }
                } else {
                    (Category::BeforeRecording, CategoryRule::BeforeLog)
                }
            }
            Some(a) => {
                let a = a.0 as usize;
                let free = self
                    .frees
                    .get(a)
                    .filter(|&&x| x != u32::MAX)
                    .map(|&x| x as usize);
                let end = self.step_end(a);
                let survives = free.is_none_or(|x| x > end);
                let backward = f.backward || (f.empty && a > self.first_backward);
                if f.workspace {
                    (Category::Other, CategoryRule::Workspace)
                } else if f.optim {
                    if survives {
                        (Category::OptimizerState, CategoryRule::Optim)
                    } else {
                        (Category::Temporary, CategoryRule::OptimTmp)
                    }
                } else if f.apply {
                    (Category::Parameter, CategoryRule::Apply)
                } else if f.weights && !backward && survives {
                    (Category::Parameter, CategoryRule::Weights)
                } else if !backward && !f.python && a < self.first_forward {
                    (Category::Parameter, CategoryRule::EarlyNative)
                } else if backward {
                    if survives {
                        (Category::Gradient, CategoryRule::Grad)
                    } else {
                        (Category::Temporary, CategoryRule::GradTmp)
                    }
                } else if self.inference && f.cache {
                    (Category::KvCache, CategoryRule::Kv)
                } else if self.inference && f.module && self.growing.contains(&b.stack) {
                    (Category::KvCache, CategoryRule::KvGrown)
                } else if self.inference && f.module {
                    if survives {
                        (Category::Output, CategoryRule::InfOut)
                    } else {
                        (Category::Temporary, CategoryRule::InfTmp)
                    }
                } else if f.module {
                    let freed_by_backward = free.is_some_and(|x| {
                        let fs = self.fact(stacks, dev.events[x].stack);
                        fs.backward || (fs.empty && x > self.first_backward)
                    });
                    // Freed by the graph's teardown, or while an OOM's exception unwound the
                    // forward that held it: saved for backward, not a temporary.
                    let torn_down = free.is_some_and(|x| {
                        self.fact(stacks, dev.events[x].stack).release || {
                            // The unwind that began last before the free (they are disjoint).
                            let k = self.unwinds.partition_point(|&(o, _)| o < x);
                            k > 0 && {
                                let (o, n) = self.unwinds[k - 1];
                                a < o && x < n
                            }
                        }
                    });
                    if torn_down {
                        (Category::Activation, CategoryRule::ActTeardown)
                    } else if survives || freed_by_backward {
                        (Category::Activation, CategoryRule::Act)
                    } else {
                        (Category::Temporary, CategoryRule::FwdTmp)
                    }
                } else if !f.python {
                    (Category::Other, CategoryRule::Native)
                } else if survives {
                    (Category::Other, CategoryRule::User)
                } else {
                    (Category::Temporary, CategoryRule::UserTmp)
                }
            }
        }
    }
}

/// Calls `f(block, category, rule)` for every live block of `state`, so views can split by
/// category at block level (a flamegraph under each category) with the same rules.
pub fn for_each_block<'s>(
    snap: &Snapshot,
    dev: &Device,
    steps: &[Step],
    state: &'s State,
    mut f: impl FnMut(&'s LiveBlock, Category, CategoryRule),
) {
    let mut c = Classifier::new(snap, dev, steps);
    for b in state.live_blocks() {
        let (cat, rule) = c.classify(snap, dev, b);
        f(b, cat, rule);
    }
}

/// Categories at an event of the log (the peak, an OOM), replaying from the nearest checkpoint.
pub fn at_event(
    snap: &Snapshot,
    dev: &Device,
    tl: &crate::analysis::replay::Timeline,
    steps: &[Step],
    at: EventIdx,
) -> Categories {
    let st = tl.state_after(dev, &snap.settings, Some(at.0 as usize));
    at_state(snap, dev, steps, &st, Some(at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{EventData, StackId};

    /// The dense table says what the hash map says, for every event: allocations at reused
    /// addresses, frees of unknown addresses, a free requested then completed, other actions.
    #[test]
    fn free_event_table_agrees_with_the_map() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let actions = [
            Action::Alloc,
            Action::Alloc,
            Action::FreeRequested,
            Action::FreeCompleted,
            Action::SegmentAlloc,
            Action::Oom,
        ];
        let events: Vec<EventData> = (0..5000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                EventData {
                    action: actions[(x % 6) as usize],
                    addr: 0x1000 * ((x >> 8) % 37),
                    size: 512,
                    stream: 0,
                    time_us: None,
                    stack: StackId(0),
                    device_free: None,
                    meta: crate::model::MetaId::NONE,
                }
            })
            .collect();
        let dev = Device {
            index: 0,
            segments: Vec::new(),
            events: events.into(),
        };
        let map = free_events(&dev);
        let table = free_event_table(&dev);
        assert_eq!(table.len(), dev.events.len());
        assert!(map.len() > 100, "the sequence frees blocks: {}", map.len());
        for (i, &f) in table.iter().enumerate() {
            assert_eq!(
                map.get(&(i as u32)).copied().unwrap_or(u32::MAX),
                f,
                "event {i}"
            );
        }
    }
}
