//! Under autocast, which requests are weights' 16-bit casts (fixed whatever the batch) and
//! which are 16-bit activations of the same size (growing with it).
//!
//! A weight of `out x in` fp32 elements has a 16-bit cast of half its bytes, and an activation
//! of `rows x in` 16-bit elements has the same size whenever `rows == out`: batch x sequence
//! equal to the model's width, common with power-of-two shapes. Sizes cannot tell them apart;
//! the order of the requests in each op call can ([`forward_casts`]), and in the backward, where
//! no Python frame says which op runs, a count per parameter size ([`cast_slots`]).

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use super::op_site::OpSites;
use crate::analysis::analyzed::DeviceProduct;
use crate::analysis::categories::{free_events, Category, CategoryRule};
use crate::model::{Action, Device, FrameRole, Stacks};

/// Whether the forward casts weights to 16 bits, where no `nn.Linear` or `nn.Conv*` call shows
/// it ([`ForwardCasts::module_runs_say`]): for at least half of the distinct parameter
/// sizes over 1 KiB, a forward block (made under a module call) of half that size exists. In
/// fp32 a few activations match half a weight by coincidence; under autocast every weight's
/// cast does.
pub(super) fn casts_weights(
    dev: &Device,
    cats: &[Option<(Category, CategoryRule)>],
    param_sizes: &HashSet<u64>,
) -> bool {
    let forward: HashSet<u64> = dev
        .events
        .iter()
        .zip(cats)
        .filter(|(_, c)| {
            matches!(
                c,
                Some((
                    Category::Activation | Category::Temporary | Category::Output,
                    _
                ))
            )
        })
        .map(|(e, _)| e.size)
        .collect();
    let sizes: Vec<u64> = param_sizes.iter().copied().filter(|&s| s > 1024).collect();
    let cast = sizes
        .iter()
        .filter(|&&s| forward.contains(&(s / 2)))
        .count();
    !sizes.is_empty() && 2 * cast >= sizes.len()
}

/// Per event, whether it is a weight's 16-bit cast (forward) or a weight's 16-bit gradient
/// (backward), for requests of half a parameter's size `2z`.
///
/// Forward ([`forward_casts`]): autocast casts an op's arguments just before the op makes its
/// output, under the op's own stack. Backward requests carry no stack: there a step's first `k`
/// backward temporaries of size `z` are the gradients, `k` the number of parameters of size
/// `2z` (the most parameter gradients of that size one step made, or, where no step made any,
/// the blocks of that size alive before recording). `forward` and `module_run` are
/// [`ForwardCasts::casts`] and [`ForwardCasts::module_run`].
pub(super) fn cast_slots(
    dev: &Device,
    prod: &DeviceProduct,
    cats: &[Option<(Category, CategoryRule)>],
    freed_in_backward: &HashMap<u32, bool>,
    param_sizes: &HashSet<u64>,
    forward: Vec<bool>,
    module_run: &HashSet<usize>,
) -> Vec<bool> {
    let ranges = prod.step_ranges();
    let step_of = |i: usize| ranges.partition_point(|r| r.0 <= i).saturating_sub(1);
    let is_grad = |i: usize, rule: CategoryRule| {
        rule == CategoryRule::Grad
            || (rule == CategoryRule::GradTmp && freed_in_backward.get(&(i as u32)) == Some(&false))
    };
    let mut grads: HashMap<(usize, u64), u32> = HashMap::default();
    for (i, c) in cats.iter().enumerate() {
        if let Some((_, rule)) = c {
            if is_grad(i, *rule) {
                *grads.entry((step_of(i), dev.events[i].size)).or_default() += 1;
            }
        }
    }
    let mut count: HashMap<u64, u32> = HashMap::default();
    for ((_, size), n) in grads {
        let c = count.entry(size).or_default();
        *c = (*c).max(n);
    }
    if count.is_empty() {
        for b in prod.timeline.initial.live_blocks() {
            *count.entry(b.requested).or_default() += 1;
        }
    }
    let mut out = forward;
    let mut used: HashMap<(usize, u64, bool), u32> = HashMap::default();
    for (i, c) in cats.iter().enumerate() {
        let Some((cat, rule)) = c else { continue };
        let size = dev.events[i].size;
        if size <= 512 || !param_sizes.contains(&(size * 2)) {
            continue;
        }
        let backward = match (cat, rule) {
            (_, CategoryRule::GradTmp) if !is_grad(i, *rule) => true,
            (Category::Activation | Category::Temporary | Category::Output, _) => false,
            _ => continue,
        };
        let n = used.entry((step_of(i), size, backward)).or_default();
        let free_slot = *n < count.get(&(size * 2)).copied().unwrap_or(0);
        if !backward && module_run.contains(&i) {
            // A module call's order decided it; a cast there takes one of the size's slots.
            *n += u32::from(out[i]);
            continue;
        }
        // Outside a module call: a cast by the call's order that also has a free slot.
        out[i] = free_slot && (backward || out[i]);
        *n += u32::from(backward || out[i]);
    }
    out
}

/// Per event, whether a forward request of half a parameter's size is a weight's 16-bit cast.
///
/// An op call shows as a run of consecutive requests under one op site (its Python frames,
/// [`OpSites`]). Under autocast it first
/// casts its arguments, then makes its output (and may take a workspace it frees at once). So,
/// of the run's requests that outlive it, the last is the output and the ones before it are
/// casts: of the weights, or of the input, whose cast is half the size of a request of the op
/// before (the activation it reads). Sizes alone cannot tell these apart when an activation
/// has a weight's shape (batch x sequence = model width); the order can.
pub(super) fn forward_casts(
    stacks: &Stacks,
    dev: &Device,
    cats: &[Option<(Category, CategoryRule)>],
    param_sizes: &HashSet<u64>,
) -> ForwardCasts {
    let mut sites = OpSites::new(stacks);
    let mut sure: HashSet<usize> = HashSet::default();
    let mut module_run: HashSet<usize> = HashSet::default();
    let mut casting_sites: HashSet<u32> = HashSet::default();
    let (mut module_runs, mut module_runs_cast) = (0usize, 0usize);
    let allocs: Vec<usize> = (0..dev.events.len())
        .filter(|&i| dev.events[i].action == Action::Alloc)
        .collect();
    let freed_at = free_events(dev);
    let forward = |i: usize| {
        matches!(
            cats[i],
            Some((
                Category::Activation | Category::Temporary | Category::Output,
                _
            ))
        )
    };
    let mut out = vec![false; dev.events.len()];
    let mut prev_sizes: HashSet<u64> = HashSet::default();
    let mut k = 0;
    while k < allocs.len() {
        let site = sites.site(dev.events[allocs[k]].stack);
        let end = (k..allocs.len())
            .find(|&j| sites.site(dev.events[allocs[j]].stack) != site)
            .unwrap_or(allocs.len());
        // The run's innermost Python frame (equal over the run, its Python frames being so).
        let role = sites.innermost_python(dev.events[allocs[k]].stack);
        let run = &allocs[k..end];
        let next = allocs.get(end).copied().unwrap_or(dev.events.len());
        let outlives = |i: &&usize| {
            freed_at
                .get(&(**i as u32))
                .is_none_or(|&f| f as usize >= next)
        };
        let output = run.iter().rfind(outlives).copied();
        // An op under a norm, an embedding or a loss of `torch.nn.functional` keeps fp32.
        let casting = !role.contains(FrameRole::KEEPS_PRECISION);
        // The casts are the run's first requests, before the output: each half a parameter
        // (a weight's cast) or half a request of the op before (its input's cast).
        let prefix: Vec<usize> = run
            .iter()
            .filter(outlives)
            .take_while(|&&i| {
                let size = dev.events[i].size;
                casting
                    && Some(i) != output
                    && (param_sizes.contains(&(size * 2)) || prev_sizes.contains(&(size * 2)))
            })
            .copied()
            .collect();
        let mut weight_cast = false;
        // Made inside an `nn.Linear` or `nn.Conv*` call.
        let in_module = role.contains(FrameRole::WEIGHT_MODULE);
        let sizes: Vec<u64> = prefix.iter().map(|&i| dev.events[i].size).collect();
        let input = output.and_then(|o| input_cast_size(&sizes, dev.events[o].size));
        for (j, &i) in prefix.iter().enumerate() {
            let size = dev.events[i].size;
            let is_input = match input {
                Some(x) => j >= 2 && size == x,
                None => prev_sizes.contains(&(size * 2)),
            };
            if size > 512 && forward(i) && !is_input {
                out[i] = true;
                weight_cast = true;
                if in_module {
                    sure.insert(i);
                }
            }
        }
        if in_module {
            module_run.extend(run.iter().copied());
            module_runs += 1;
            module_runs_cast += usize::from(weight_cast);
            if weight_cast {
                casting_sites.insert(site);
            }
        }
        prev_sizes = run.iter().map(|&i| dev.events[i].size).collect();
        k = end;
    }
    ForwardCasts {
        casts: out,
        sure,
        module_run,
        casting_sites: casting_sites.len(),
        module_runs,
        module_runs_cast,
    }
}

/// The size of the input's 16-bit cast in a linear or convolution call whose casts (in the
/// order made) are `casts` and whose output has `output` bytes, where the call's first two casts
/// are a bias and a weight.
///
/// Autocast casts `F.linear(input, weight, bias)`'s arguments last to first (the compiler's
/// order of evaluation), so a call with a bias makes `[bias, weight, input?]`, then the
/// output. The bias has `out` elements and the weight `out x in`, so their sizes give `in`
/// and `out`, and the input's cast is the output's size times `in / out`: a request of that
/// size after them is the input, not a weight, even where an activation has a weight's size.
/// `None` where the first two casts are no bias and weight (then the op before tells).
fn input_cast_size(casts: &[u64], output: u64) -> Option<u64> {
    let (&bias, &weight) = (casts.first()?, casts.get(1)?);
    if bias == 0 || weight <= bias || !weight.is_multiple_of(bias) {
        return None;
    }
    let (inputs, outputs) = (weight / bias, bias / 2);
    // A weight then an input's cast can also divide (a weight of 128 KiB, an input of 512
    // KiB): a layer of fewer than 16 inputs is taken for that, not for a bias and a weight.
    if inputs < 16 || outputs == 0 || !output.is_multiple_of(outputs) {
        return None;
    }
    Some(output / outputs * inputs)
}

/// What [`forward_casts`] found.
pub(super) struct ForwardCasts {
    /// Per event: a weight's 16-bit cast, if the forward casts weights at all.
    pub(super) casts: Vec<bool>,
    /// Of those, the casts made inside an `nn.Linear` or `nn.Conv*` call: the module's own
    /// weight, cast before its output (no activation is made there before the output).
    pub(super) sure: HashSet<usize>,
    /// Every request made inside an `nn.Linear` or `nn.Conv*` call. Elsewhere (user code
    /// calling `F.linear` or `@`), contiguous copies and casts look alike: a request there is a
    /// cast only where the call's order says so and its step has not yet made as many casts of
    /// that size as there are parameters of twice the size ([`cast_slots`]).
    pub(super) module_run: HashSet<usize>,
    /// Distinct call sites (Python stacks) of those modules where a call cast a weight first.
    casting_sites: usize,
    /// Calls of `nn.Linear` and `nn.Conv*` (runs under their `forward`), and those of them
    /// that cast a weight first.
    module_runs: usize,
    module_runs_cast: usize,
}

impl ForwardCasts {
    /// Whether the forward runs under autocast, as the module calls say: in fp32 an
    /// `nn.Linear` makes its output alone; under autocast most calls first cast the weight
    /// (a tied or reused weight's cast is cached). `None` where the capture has no such call.
    pub(super) fn module_runs_say(&self) -> Option<bool> {
        // One call site is no evidence: an fp32 `nn.Linear` fed a non-contiguous input copies
        // it first, and the copy can be half a parameter's size (holdout 3's lstm_fp32).
        (self.module_runs > 0)
            .then(|| 2 * self.module_runs_cast >= self.module_runs && self.casting_sites >= 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bias_and_a_weight_give_the_input_cast_size() {
        // Linear(512 -> 1536) at 512 rows, bf16: bias 3 KiB, weight 1.5 MiB, input 512 KiB,
        // output 1.5 MiB.
        assert_eq!(
            input_cast_size(&[3072, 1536 << 10, 512 << 10], 1536 << 10),
            Some(512 << 10)
        );
        // Linear(256 -> 256) at 1024 rows: the input's cast and the weight's are told apart by
        // the bias, although an activation has the weight's size.
        assert_eq!(
            input_cast_size(&[512, 128 << 10, 512 << 10], 512 << 10),
            Some(512 << 10)
        );
        // No bias first (a weight, then the input): a ratio under 16 is no bias and weight.
        assert_eq!(input_cast_size(&[128 << 10, 512 << 10], 512 << 10), None);
        assert_eq!(input_cast_size(&[3 << 20, 768 << 10], 768 << 10), None);
        assert_eq!(input_cast_size(&[1000], 4000), None);
        assert_eq!(input_cast_size(&[0, 4096], 4000), None);
    }
}
