//! Which requests grow with the batch (and how with the sequence), from one capture.
//!
//! A snapshot records no tensor shapes, so the batch dimension is not written anywhere. What
//! it does record decides most requests:
//!
//! - the category of the block the request made ([`crate::analysis::categories`]): weights,
//!   optimizer state and parameter gradients do not grow with the batch; activations, forward
//!   and backward temporaries, inference outputs and KV caches do;
//! - its size: per-sample memory at batch `N` is `N` times a per-sample size, so a request
//!   whose size is no multiple of `N` is fixed; a backward temporary of exactly a parameter's
//!   size is a weight's gradient;
//! - its lifetime: a block allocated once, never freed, by a stack that allocates nothing later
//!   (in a log of several steps) is a lazily made buffer (a workspace), not per-step memory.
//!
//! What stays unsure (a forward block of a parameter's size, memory user code keeps, native
//! work) gets two readings ([`super::Request::central`], [`super::Request::upper`]). On the
//! sequence axis, growing requests are linear, except that a per-sample size divisible by the
//! square of the sequence length may be attention scores: quadratic in the central reading
//! where a softmax or attention frame made it (or its size is one such a frame made), in the
//! upper reading always, unless the capture shows flash or memory-efficient attention.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use super::casts;
use super::{Basis, Growth, Request, Shape, Term};
use crate::analysis::analyzed::DeviceProduct;
use crate::analysis::categories::{free_events, Category, CategoryRule};
use crate::analysis::replay::LiveBlock;
use crate::model::{Action, BlockState, Device, EventIdx, Snapshot, StackId, Stacks};

/// Frame names (lower case) of attention kernels whose memory is linear in the sequence.
const FLASH: [&str; 6] = [
    "flash_attention",
    "flash_attn",
    "efficient_attention",
    "cudnn_attention",
    "memory_efficient_attention",
    "sdpa_attention",
];

/// Frame names (lower case) that make attention scores (quadratic in the sequence).
const SCORES: [&str; 3] = ["softmax", "attention", "attn"];

/// Frame names (lower case) of convolutions: cuDNN picks an algorithm, and with it a workspace,
/// per shape, so these requests at another batch size need not be these scaled.
const CONVOLUTION: [&str; 5] = ["_conv_forward", "conv1d", "conv2d", "conv3d", "convolution"];

/// How many of the device's requests a convolution makes (by their stacks). Backward's run off
/// the Python thread and carry no Python stack, so this counts the forward ones: evidence that
/// the capture runs convolutions, not the size of their workspaces.
pub fn convolution_requests(stacks: &Stacks, dev: &Device) -> usize {
    let conv: Vec<bool> = (0..stacks.stack_count())
        .map(|s| frame_named(stacks, StackId(s as u32), &CONVOLUTION))
        .collect();
    dev.events
        .iter()
        .filter(|e| e.action == Action::Alloc && conv.get(e.stack.0 as usize) == Some(&true))
        .count()
}

/// The requests that are convolution workspaces: the ones a convolution's call frees before
/// the next request of another call (forward, by the convolution's frames), and, where the
/// forward shows such workspaces, the backward's requests freed before the next request (the
/// engine thread records no frame to tell the convolution apart).
///
/// PyTorch's cuDNN convolutions allocate the workspace of the algorithm the heuristics rank
/// first and, when that allocation fails, try the next algorithm (`Conv_v7.cpp` catches the
/// out-of-memory error), down to ones with no workspace: a real run under a cap passes where a
/// replay that insists on every workspace fails (fixtures/plan: the cnn fits batch 53 under its
/// cap with 7 caught OOMs). An empty set where the capture runs no convolution.
pub fn conv_workspaces(stacks: &Stacks, dev: &Device) -> HashSet<usize> {
    let mut conv_of: HashMap<StackId, bool> = HashMap::default();
    let mut is_conv = |s: StackId| {
        *conv_of
            .entry(s)
            .or_insert_with(|| frame_named(stacks, s, &CONVOLUTION))
    };
    let allocs: Vec<usize> = (0..dev.events.len())
        .filter(|&i| dev.events[i].action == Action::Alloc)
        .collect();
    let freed_at = free_events(dev);
    let mut forward = HashSet::default();
    let mut backward = HashSet::default();
    for (k, &i) in allocs.iter().enumerate() {
        let e = &dev.events[i];
        let Some(&f) = freed_at.get(&(i as u32)) else {
            continue;
        };
        let f = f as usize;
        if stacks.frames(e.stack).is_empty() || stacks.backward_evidence(e.stack) {
            // Freed before the next request at all: used and dropped inside one kernel call.
            if allocs.get(k + 1).is_none_or(|&n| f < n) {
                backward.insert(i);
            }
        } else if is_conv(e.stack) {
            let next_other = allocs[k + 1..]
                .iter()
                .find(|&&n| dev.events[n].stack != e.stack)
                .copied()
                .unwrap_or(dev.events.len());
            if f < next_other {
                forward.insert(i);
            }
        }
    }
    if forward.is_empty() {
        return forward;
    }
    forward.extend(backward);
    forward
}

/// Whether any stack of the capture runs flash or memory-efficient attention.
pub fn flash_attention(stacks: &Stacks) -> bool {
    (0..stacks.stack_count()).any(|s| frame_named(stacks, StackId(s as u32), &FLASH))
}

pub(super) fn frame_named(stacks: &Stacks, s: StackId, names: &[&str]) -> bool {
    stacks.frames(s).iter().any(|&f| {
        let name = stacks.str(stacks.frame(f).name).to_ascii_lowercase();
        names.iter().any(|n| name.contains(n))
    })
}

/// Per log event, the request it makes (an `alloc`, or the `oom` entry's failed request).
pub fn classify(
    snap: &Snapshot,
    dev: &Device,
    prod: &DeviceProduct,
    rec: Shape,
) -> Vec<Option<Request>> {
    let ctx = Context::new(snap, dev, prod);
    let batch: Vec<Option<(Basis, bool, bool)>> = dev
        .events
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let (cat, rule) = ctx.cats[i]?;
            Some(ctx.batch_basis(i, e.size, e.stack, cat, rule, rec.batch))
        })
        .collect();
    let seq = rec
        .seq
        .map(|s| SeqEvidence::new(snap, dev, &batch, rec.batch, s));
    let elastic = conv_workspaces(&snap.stacks, dev);
    let recurrent = super::recurrent::rnn_workspaces(&snap.stacks, dev);
    batch
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let (basis, central, upper) = (*b)?;
            let size = dev.events[i].size;
            let term = |g: bool| if g { Term::Linear } else { Term::Fixed };
            let (cs, us) = match &seq {
                Some(q) => q.terms(i, size, central, upper),
                None => (Term::Fixed, Term::Fixed),
            };
            Some(Request {
                size,
                basis,
                central: Growth {
                    batch: term(central),
                    seq: cs,
                },
                upper: Growth {
                    batch: term(upper),
                    seq: us,
                },
                elastic: elastic.contains(&i),
                varies: false,
                recurrent: recurrent.contains(&i),
            })
        })
        .collect()
}

/// What classifying a request needs from the whole log.
struct Context {
    /// Per log event that makes a request: its block's category and the rule that gave it.
    cats: Vec<Option<(Category, CategoryRule)>>,
    /// Per alloc event whose block the log frees: whether a backward pass freed it (a stack
    /// of autograd's engine, or none: the engine thread records no Python frame).
    freed_in_backward: HashMap<u32, bool>,
    /// Per stack, how many of its blocks the log never frees.
    kept_of_stack: HashMap<StackId, u32>,
    /// The first event of the log's last iteration.
    last_iteration: usize,
    /// The first event of its second iteration, where it has at least three.
    second_iteration: Option<usize>,
    /// Stacks that keep a block (never freed) made in an iteration after the first and before
    /// the last: what a leak does every step.
    kept_in_middle: HashSet<StackId>,
    /// Sizes of blocks that do not grow: parameters, parameter gradients, optimizer state,
    /// blocks from before recording.
    param_sizes: HashSet<u64>,
    /// Per event: under autocast, one of a step's first `k` forward blocks (or backward
    /// temporaries) of half a parameter's size, `k` the number of parameters of that size: the
    /// weights' 16-bit casts (gradients). Empty without autocast.
    cast_slot: Vec<bool>,
    /// Of the casts, those inside an `nn.Linear` or `nn.Conv*` call ([`casts::ForwardCasts`]).
    module_cast: HashSet<usize>,
}

impl Context {
    fn new(snap: &Snapshot, dev: &Device, prod: &DeviceProduct) -> Context {
        let mut freed_in_backward = HashMap::default();
        let mut live: HashMap<u64, u32> = HashMap::default();
        let mut classifier = prod.classifier.clone();
        let mut param_sizes: HashSet<u64> = prod
            .timeline
            .initial
            .live_blocks()
            .map(|b| b.requested)
            .collect();
        let mut cats = vec![None; dev.events.len()];
        for (i, e) in dev.events.iter().enumerate() {
            match e.action {
                Action::Alloc | Action::Oom => {
                    if e.action == Action::Alloc {
                        live.insert(e.addr, i as u32);
                    }
                    let block = LiveBlock {
                        address: e.addr,
                        size: e.size,
                        requested: e.size,
                        state: BlockState::ActiveAllocated,
                        stream: dev.events.stream(i),
                        stack: e.stack,
                        alloc_event: Some(EventIdx(i as u32)),
                    };
                    let (cat, rule) = classifier.classify(snap, dev, &block);
                    if matches!(cat, Category::Parameter | Category::OptimizerState)
                        || rule == CategoryRule::Grad
                    {
                        param_sizes.insert(e.size);
                    }
                    cats[i] = Some((cat, rule));
                }
                Action::FreeRequested => {
                    if let Some(a) = live.remove(&e.addr) {
                        let st = &snap.stacks;
                        let bwd = st.frames(e.stack).is_empty() || st.backward_evidence(e.stack);
                        freed_in_backward.insert(a, bwd);
                    }
                }
                _ => {}
            }
        }
        let mut kept_of_stack: HashMap<StackId, u32> = HashMap::default();
        for &a in live.values() {
            *kept_of_stack
                .entry(dev.events[a as usize].stack)
                .or_default() += 1;
        }
        let forward = casts::forward_casts(&snap.stacks, dev, &cats, &param_sizes);
        let autocast = forward
            .module_runs_say()
            .unwrap_or_else(|| casts::casts_weights(dev, &cats, &param_sizes));
        let (cast_slot, module_cast) = if autocast {
            let casts::ForwardCasts {
                casts,
                sure,
                module_run,
                ..
            } = forward;
            let slots = casts::cast_slots(
                dev,
                prod,
                &cats,
                &freed_in_backward,
                &param_sizes,
                casts,
                &module_run,
            );
            (slots, sure)
        } else {
            (Vec::new(), HashSet::default())
        };
        let its: Vec<_> = prod.steps.iter().filter(|s| s.is_iteration()).collect();
        let second_iteration = (its.len() >= 3).then(|| its[1].start_event.0 as usize);
        let last = its.last().map_or(0, |s| s.start_event.0 as usize);
        let kept_in_middle = live
            .values()
            .filter(|&&a| {
                second_iteration.is_some_and(|s| (a as usize) >= s && (a as usize) < last)
            })
            .map(|&a| dev.events[a as usize].stack)
            .collect();
        Context {
            second_iteration,
            kept_in_middle,
            cats,
            freed_in_backward,
            kept_of_stack,
            last_iteration: if its.len() >= 2 {
                its.last().map_or(0, |s| s.start_event.0 as usize)
            } else {
                0
            },
            param_sizes,
            cast_slot,
            module_cast,
        }
    }

    /// `(basis, grows in the central reading, grows in the upper reading)` on the batch axis.
    fn batch_basis(
        &self,
        i: usize,
        size: u64,
        stack: StackId,
        cat: Category,
        rule: CategoryRule,
        n: u64,
    ) -> (Basis, bool, bool) {
        use Basis as B;
        let fixed = |b| (b, false, false);
        let grows = |b| (b, true, true);
        let unsure = |b, central| (b, central, true);
        // Never freed, made in the first iteration by a stack that keeps nothing in the later
        // ones: a buffer made on first use (cuBLAS workspaces under the first matmul's frames),
        // not per-step memory, which every iteration frees or (a leak) keeps again.
        let kept = !self.freed_in_backward.contains_key(&(i as u32));
        let once = kept
            && match self.second_iteration {
                // Made in the first iteration (or before), and no later iteration but the last
                // keeps a block of its stack.
                Some(second) => i < second && !self.kept_in_middle.contains(&stack),
                None => i < self.last_iteration && self.kept_of_stack.get(&stack) == Some(&1),
            };
        // A gradient made by the backward and freed after it (by zero_grad): a parameter's
        // `.grad`. Activations' gradients die inside the backward.
        let outlives_backward = self.freed_in_backward.get(&(i as u32)) == Some(&false);
        // A size that is also a parameter's: a weight's copy or gradient, or an activation
        // whose batch x features match a weight's shape (dimensions are powers of two).
        // In fp32 no op copies a weight, and modern loops (`zero_grad(set_to_none=True)`)
        // make no gradient temporaries of a weight's size: the coincidence is the likelier.
        let param_sized = self.param_sizes.contains(&size);
        // Half a parameter's size under autocast: the weight's 16-bit cast in the forward, its
        // 16-bit gradient in the backward. Fixed in the central reading (most are), growing in
        // the upper one (16-bit activations can have the same size).
        let half = size > 512 && self.param_sizes.contains(&(size * 2));
        let cast = half && self.cast_slot.get(i) == Some(&true);
        match (cat, rule) {
            (_, CategoryRule::Workspace) => fixed(B::Workspace),
            (Category::Parameter, _) => fixed(B::Parameter),
            (Category::OptimizerState, _) => fixed(B::OptimizerState),
            (Category::BeforeRecording, _) => fixed(B::BeforeRecording),
            (_, CategoryRule::OptimTmp) => fixed(B::OptimizerTemporary),
            (_, CategoryRule::Grad) => fixed(B::ParameterGradient),
            (Category::KvCache, _) if size.is_multiple_of(n) => grows(B::KvCache),
            _ if n > 1 && !size.is_multiple_of(n) => fixed(B::NotPerSample),
            _ if once => fixed(B::MadeOnce),
            (_, CategoryRule::GradTmp) if outlives_backward => fixed(B::ParameterGradient),
            (_, CategoryRule::GradTmp) if cast => unsure(B::ParameterSizedGradient, false),
            (_, CategoryRule::GradTmp) if param_sized || half => {
                unsure(B::ParameterSizedGradient, true)
            }
            (_, CategoryRule::GradTmp) => grows(B::GradientTemporary),
            (Category::Activation | Category::Temporary | Category::Output, _)
                if cast && self.module_cast.contains(&i) =>
            {
                fixed(B::WeightCast)
            }
            (Category::Activation | Category::Temporary | Category::Output, _) if cast => {
                unsure(B::ParameterSizedForward, false)
            }
            (Category::Activation | Category::Temporary | Category::Output, _)
                if param_sized || half =>
            {
                unsure(B::ParameterSizedForward, true)
            }
            (Category::Activation, _) => grows(B::Activation),
            (Category::Output, _) => grows(B::Output),
            (_, CategoryRule::UserTmp) => grows(B::UserTemporary),
            (_, CategoryRule::User | CategoryRule::DumpUser) => unsure(B::UserKept, true),
            (Category::Temporary, _) => grows(B::ForwardTemporary),
            _ => unsure(B::Native, false),
        }
    }
}

/// What the sequence axis needs: the sequence length, whether attention is flash, and which
/// sizes a score-making frame allocated.
struct SeqEvidence {
    n: u64,
    s: u64,
    flash: bool,
    /// Request sizes made under a softmax or attention frame (scores), for the backward's
    /// requests of the same size (which record no Python frame).
    score_sizes: HashSet<u64>,
    score_events: HashSet<usize>,
}

impl SeqEvidence {
    fn new(
        snap: &Snapshot,
        dev: &Device,
        batch: &[Option<(Basis, bool, bool)>],
        n: u64,
        s: u64,
    ) -> SeqEvidence {
        let mut memo: HashMap<StackId, bool> = HashMap::default();
        let mut score_sizes = HashSet::default();
        let mut score_events = HashSet::default();
        for (i, e) in dev.events.iter().enumerate() {
            if batch[i].is_none_or(|b| !b.2) {
                continue;
            }
            let scores = *memo
                .entry(e.stack)
                .or_insert_with(|| frame_named(&snap.stacks, e.stack, &SCORES));
            if scores && quadratic_shaped(e.size, n, s) {
                score_sizes.insert(e.size);
                score_events.insert(i);
            }
        }
        SeqEvidence {
            n,
            s,
            flash: flash_attention(&snap.stacks),
            score_sizes,
            score_events,
        }
    }

    /// `(central, upper)` sequence terms of request `i`.
    fn terms(&self, i: usize, size: u64, central: bool, upper: bool) -> (Term, Term) {
        let lin = |g: bool| if g { Term::Linear } else { Term::Fixed };
        if self.flash || !upper || !quadratic_shaped(size, self.n, self.s) {
            return (lin(central), lin(upper));
        }
        let evidence = self.score_events.contains(&i) || self.score_sizes.contains(&size);
        let c = if central && evidence {
            Term::Quadratic
        } else {
            lin(central)
        };
        (c, Term::Quadratic)
    }
}

/// Whether a request of `size` bytes at batch `n` could be `n × k × s²` bytes.
fn quadratic_shaped(size: u64, n: u64, s: u64) -> bool {
    s >= 16 && size.is_multiple_of(n) && (size / n).is_multiple_of(s * s)
}
