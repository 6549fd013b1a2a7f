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

use super::{Basis, Growth, Request, Shape, Term};
use crate::analysis::analyzed::DeviceProduct;
use crate::analysis::categories::{Category, CategoryRule};
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

/// Whether any stack of the capture runs flash or memory-efficient attention.
pub fn flash_attention(stacks: &Stacks) -> bool {
    (0..stacks.stack_count()).any(|s| frame_named(stacks, StackId(s as u32), &FLASH))
}

fn frame_named(stacks: &Stacks, s: StackId, names: &[&str]) -> bool {
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
            })
        })
        .collect()
}

/// What classifying a request needs from the whole log.
struct Context {
    /// Per log event that makes a request: its block's category and the rule that gave it.
    cats: Vec<Option<(Category, CategoryRule)>>,
    /// Alloc events whose block the log frees.
    freed: HashSet<u32>,
    /// Per stack, its last alloc event.
    last_of_stack: HashMap<StackId, u32>,
    /// Sizes of blocks that do not grow: parameters, parameter gradients, optimizer state,
    /// blocks from before recording.
    param_sizes: HashSet<u64>,
    /// The log holds several iterations: "allocated once" means something.
    iterations: bool,
}

impl Context {
    fn new(snap: &Snapshot, dev: &Device, prod: &DeviceProduct) -> Context {
        let mut freed = HashSet::default();
        let mut last_of_stack = HashMap::default();
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
                        last_of_stack.insert(e.stack, i as u32);
                    }
                    let block = LiveBlock {
                        address: e.addr,
                        size: e.size,
                        requested: e.size,
                        state: BlockState::ActiveAllocated,
                        stream: e.stream,
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
                        freed.insert(a);
                    }
                }
                _ => {}
            }
        }
        let iterations = prod.steps.iter().filter(|s| s.is_iteration()).count() >= 2;
        Context {
            cats,
            freed,
            last_of_stack,
            param_sizes,
            iterations,
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
        let once = self.iterations
            && !self.freed.contains(&(i as u32))
            && self.last_of_stack.get(&stack) == Some(&(i as u32));
        // Half a parameter's size: a weight cast to 16 bits (autocast). A forward block of a
        // parameter's exact size is no copy of it (fp32 ops do not copy weights): activations
        // whose batch × features happen to match a weight's shape.
        let half_param = size > 512 && self.param_sizes.contains(&(size * 2));
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
            (_, CategoryRule::GradTmp) if self.param_sizes.contains(&size) => {
                fixed(B::ParameterSizedGradient)
            }
            (_, CategoryRule::GradTmp) => grows(B::GradientTemporary),
            (Category::Activation | Category::Temporary | Category::Output, _) if half_param => {
                unsure(B::ParameterSizedForward, false)
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
