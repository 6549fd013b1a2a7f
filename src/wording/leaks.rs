//! A leak finding's explanation and fix, said from its typed evidence.
//!
//! Each rule's sentences sit beside the others here, in the order of the rules' table
//! (`analysis::leaks::rules::CODES`): the rule decides the kind, this says what that kind means
//! and what to change, in a snapshot ([`rule_fix`] and the rule's explanation) and in a trace
//! ([`trace_fix`] and the trace's explanation). Every match on the kind is exhaustive: a new
//! rule does not compile until it has its sentences.

use crate::analysis::leaks::benign::MATERIAL_STEPS;
use crate::analysis::leaks::{
    BenignReading, ExcludedGrowth, Extent, Holder, IrregularEvidence, Leak, LeakEvidence, LeakKind,
    LogEvidence, Release, RetryEvidence, RuledOut, TraceEvidence,
};
use crate::analysis::sites::Site;
use crate::units::bytes;

/// Why memscope calls this a leak, and how it reads the log.
pub fn leak_explanation(l: &Leak) -> String {
    match &l.evidence {
        LeakEvidence::Log(e) => {
            let mut s = rule_explanation(l.kind, e);
            s.push_str(&holder(e));
            if !e.members.is_empty() {
                let names: Vec<String> = e
                    .members
                    .iter()
                    .map(|s| format!("{}:{}", s.file, s.line))
                    .collect();
                s.push_str(&format!(
                    " Memory made at these lines grows over the same steps and is part of the same finding: {}.",
                    names.join(", ")
                ));
            }
            if let (Some(l), Some(a)) = (&e.loop_line, &e.site) {
                s.push_str(&format!(
                    " The memory is allocated at {}:{} (in {}), called from the loop's line {}:{}.",
                    a.file, a.line, a.function, l.file, l.line
                ));
            }
            if let Some(r) = &l.release {
                s.push(' ');
                s.push_str(&released(l.extent, r, e));
            }
            if let Some(r) = &l.ruled_out {
                s.push(' ');
                s.push_str(&ruled_out(r));
            }
            s
        }
        LeakEvidence::Irregular(e) => {
            let mut s = irregular_explanation(e);
            if let Some(r) = &l.ruled_out {
                s.push(' ');
                s.push_str(&ruled_out(r));
            }
            s
        }
        LeakEvidence::Trace(t) => trace_explanation(l.kind, t),
        LeakEvidence::RetainedAttempts(r) => retry_explanation(r),
    }
}

/// The benign readings a finding's figures rule out, with those figures (one short sentence:
/// the explanation before it says what the finding is).
fn ruled_out(r: &RuledOut) -> String {
    let bound = if r.steps_after == 0 {
        "it grew to the last step (no bound)".to_string()
    } else {
        format!(
            "{} of its blocks left in the {} steps after (no bound)",
            r.evicted_after, r.steps_after
        )
    };
    let material = match r.steps_to_peak {
        Some(n) => format!(
            "it adds the {} peak again in {} steps (material)",
            bytes(r.peak_allocated_bytes),
            steps_count(n)
        ),
        None => "its survivors are scalars holding their graphs (no size test)".to_string(),
    };
    format!(
        "Not a benign reading: its blocks went from {} to {} (no replacement), {bound}, and {material}.",
        r.blocks_at_start, r.blocks_at_end
    )
}

/// A step count in prose: `1.1 million`, `42,000`.
fn steps_count(n: f64) -> String {
    if !n.is_finite() {
        return "no number of".into();
    }
    if n >= 1e6 {
        return format!("{:.1} million", n / 1e6);
    }
    let v = n.round() as u64;
    let s = v.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// Why an irregular growth finding is a leak: the steps that added entries and their sizes.
fn irregular_explanation(e: &IrregularEvidence) -> String {
    let shown = 12;
    let mut steps: Vec<&str> = e
        .gain_steps
        .iter()
        .take(shown)
        .map(String::as_str)
        .collect();
    let more = e.gain_steps.len().saturating_sub(shown);
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    if steps.is_empty() {
        steps.push("none");
    }
    let sizes: Vec<String> = e.sizes.iter().map(|&b| bytes(b)).collect();
    let sizes_more = if e.distinct_sizes > e.sizes.len() {
        format!(", ... ({} distinct sizes)", e.distinct_sizes)
    } else {
        format!(
            " ({} distinct size{})",
            e.distinct_sizes,
            if e.distinct_sizes == 1 { "" } else { "s" }
        )
    };
    let call = match (&e.loop_line, &e.site) {
        (Some(l), Some(a)) => format!(
            " The memory is allocated at {}:{} (in {}), called from the loop's line {}:{}.",
            a.file, a.line, a.function, l.file, l.line
        ),
        _ => String::new(),
    };
    format!(
        "{} gained entries on {} of {} steps ({}{more}) and freed none of them: {} entries, {} in all, of sizes {}{sizes_more}. A container keyed by something that varies per batch (a sequence length, a shape, an id) that is never evicted: a cache of masks or buffers per length grows whenever a step brings a new key, not linearly in steps, and without a bound.{call}",
        super::site_in(&e.site),
        e.gain_steps.len(),
        e.steps,
        steps.join(", "),
        e.entries,
        bytes(e.bytes),
        sizes.join(", "),
    )
}

/// The heading of growth a benign reading explains, in the text report.
pub fn excluded_heading(r: &BenignReading) -> &'static str {
    match r {
        BenignReading::Replacement { .. } => "NOT A LEAK (replacement)",
        BenignReading::BoundedContainer { .. } => "BOUNDED GROWTH",
        BenignReading::Immaterial { .. } => "NOTE (immaterial growth)",
    }
}

/// Why growth a benign reading explains is not a leak, with its figures.
pub fn excluded_explanation(g: &ExcludedGrowth) -> String {
    let at = super::site_in(&g.site);
    let per_step = bytes(g.growth_bytes_per_step.max(0.0) as u64);
    match &g.reading {
        BenignReading::Replacement {
            blocks,
            first_bytes,
            last_bytes,
            replaced_blocks,
        } => format!(
            "{at} grew {per_step} per step over {} steps, from {} to {}, but its live blocks stayed at {blocks} and {replaced_blocks} were freed on the way: the same tensor replaced each step by a larger one (growing input shapes, a sequence-length curriculum), not tensors kept. Not a leak. (A buffer grown by `torch.cat` into one tensor looks the same in a snapshot.)",
            g.steps,
            bytes(*first_bytes),
            bytes(*last_bytes),
        ),
        BenignReading::BoundedContainer {
            bound_blocks,
            site_blocks,
            bound_bytes,
            plateau_steps,
            evicted_blocks,
        } => {
            let own = site_blocks.saturating_sub(*bound_blocks);
            let made = if own > 0 {
                format!(" (the other {own} of its {site_blocks} blocks at a step's end were the step's own, or made once before the growth)")
            } else {
                String::new()
            };
            format!(
                "{at} grew {per_step} per step over {} steps, then stayed at {site_blocks} blocks ({}) for {plateau_steps} complete steps while {evicted_blocks} old blocks left, one out for one in; right after an old one left, {bound_blocks} were alive{made}: a bounded container (`deque(maxlen={bound_blocks})`, a list trimmed to its last entries, an LRU cache). Bounded growth with bound {bound_blocks}, not a leak.",
                g.steps,
                bytes(*bound_bytes),
            )
        }
        BenignReading::Immaterial {
            kind,
            peak_allocated_bytes,
            steps_to_peak,
        } => format!(
            "{at} grew {per_step} per step over {} steps (it would read as a {}): at that rate the allocated peak of {} is added again only after {} steps, beyond the {} steps under which growth matters. A note, not a leak.",
            g.steps,
            kind.label(),
            bytes(*peak_allocated_bytes),
            steps_count(*steps_to_peak),
            steps_count(MATERIAL_STEPS),
        ),
    }
}

/// What fixing a finding frees: at least the blocks it made inside its window and kept, at most
/// all its sites hold (blocks from before the window, such as a workspace made by the same
/// line's first matmul, may stay). `None` where the log cannot bound it.
pub fn freed_by_fix(l: &Leak) -> Option<String> {
    let low = l.freed_by_fix_at_least?.min(l.bytes_at_stake());
    let high = l.bytes_at_stake();
    Some(if low == high {
        format!("fixing it frees {}", bytes(high))
    } else {
        format!(
            "fixing it frees {} to {}: {} it made during these steps and kept, and at most the {} its lines hold in all",
            bytes(low),
            bytes(high),
            bytes(low),
            bytes(high)
        )
    })
}

/// What to change.
pub fn leak_fix(l: &Leak) -> &'static str {
    match &l.evidence {
        LeakEvidence::Trace(_) => trace_fix(l.kind),
        LeakEvidence::RetainedAttempts(_) => {
            "leave the `except` block before retrying (set a flag in it, retry after it) and do not store the exception: keep `str(e)` if you need the message; call `del e` if it must stay in scope"
        }
        LeakEvidence::Log(_) => rule_fix(l.kind),
        LeakEvidence::Irregular(_) => {
            "bound the cache: key it by a small fixed set (pad or bucket lengths to a few sizes), evict old entries (an LRU of N), or build the tensor each step"
        }
    }
}

fn per_step(e: &LogEvidence) -> String {
    format!(
        "{} more survive at {} after every step ({:.1} tensors per step, {} steps, {} live at the end of the growth)",
        bytes(e.growth_bytes_per_step.max(0.0) as u64),
        super::site_in(&e.site),
        e.growth_tensors_per_step,
        e.steps,
        bytes(e.live_bytes)
    )
}

/// The rule's own sentence about a snapshot's finding (see each rule's documentation in
/// `analysis::leaks::rules`).
pub fn rule_explanation(kind: LeakKind, e: &LogEvidence) -> String {
    let p = per_step(e);
    match kind {
        LeakKind::AccumulatedLoss => format!(
            "{p}. They are scalars (at most {} bytes each): a loss or metric kept as a tensor every step, by `total += loss` or `history.append(loss)`. Each one also keeps its autograd graph alive (on the CPU, and on the GPU whatever the graph saved if backward never ran on it), which is why this matters beyond its size.",
            e.max_requested
        ),
        LeakKind::RetainedGraph => format!(
            "{p}. They are allocated inside module calls, several per step: the activations autograd saves for backward. A whole forward pass surviving every step means each step's graph is kept and never freed: typically evaluation without `torch.no_grad()` whose loss is accumulated as a tensor, or `backward(retain_graph=True)` with the losses kept."
        ),
        LeakKind::HookCache => format!(
            "{p}. Each is an intermediate of the forward pass (the same call allocates more after it), not its result, so the user's loop never sees it: a forward hook or a module attribute that stores layer outputs is the usual holder. The holding line is not in the allocation stack; look for `register_forward_hook` / `register_forward_pre_hook` callbacks or `self.x = ...` in forward methods."
        ),
        LeakKind::KeptOutputs => format!(
            "{p}. Each is the result of the model call on that line, kept after the step: usually `outputs.append(out)` (or a dict of outputs) for later metrics. The line that stores it allocates nothing, so it cannot be named from a snapshot; look for where the result of this line is stored."
        ),
        LeakKind::TensorCache => format!(
            "{p}. They are made by that line itself, outside any model call, and never released: a list or dict that gains an entry per step (`cache[k] = t.clone()`, `saved.append(t)`)."
        ),
        LeakKind::SteadyGrowth | LeakKind::RetainedAttempt => format!("{p}."),
    }
}

/// What to change, for a snapshot's finding of this kind.
pub fn rule_fix(kind: LeakKind) -> &'static str {
    match kind {
        LeakKind::AccumulatedLoss => {
            "accumulate Python numbers: `total += loss.item()` (or store `loss.detach()`)"
        }
        LeakKind::RetainedGraph => {
            "run evaluation under `with torch.no_grad():` (or `torch.inference_mode()`), accumulate `loss.item()` rather than the loss tensor, and drop `retain_graph=True` unless a second backward needs it"
        }
        LeakKind::HookCache => {
            "in the hook, keep `output.detach().cpu()` or a statistic, not the tensor; clear the cache every step; remove the hook handle when done"
        }
        LeakKind::KeptOutputs => {
            "keep `out.detach().cpu()` (or the metric itself) instead of the CUDA tensor, and clear the list each epoch"
        }
        LeakKind::TensorCache => {
            "bound the container (evict old entries, keep the last N) or store CPU copies; delete entries once used"
        }
        LeakKind::SteadyGrowth | LeakKind::RetainedAttempt => {
            "find what references tensors made on this line across steps (lists, dicts, closures, module attributes) and release or detach them"
        }
    }
}

/// What to change, for a trace's finding of this kind. Only the rules that read a trace
/// (`OnTrace::Judges`) make trace findings; the others share the general advice.
pub fn trace_fix(kind: LeakKind) -> &'static str {
    match kind {
        LeakKind::RetainedGraph => {
            "run evaluation under `torch.no_grad()` (or `torch.inference_mode()`), and keep \
             `loss.item()` or `loss.detach()` rather than the loss tensor"
        }
        LeakKind::AccumulatedLoss
        | LeakKind::HookCache
        | LeakKind::KeptOutputs
        | LeakKind::TensorCache
        | LeakKind::SteadyGrowth
        | LeakKind::RetainedAttempt => {
            "keep only what the next step needs: `.item()` or `.detach().cpu()` before \
             storing results, and bound or clear caches"
        }
    }
}

/// What the log shows holds a retained graph.
fn holder(e: &LogEvidence) -> String {
    match &e.holder {
        None => String::new(),
        Some(Holder::RetainedBackward {
            site,
            backward_steps,
        }) => format!(
            " Backward ran from {}:{} in {} of these {} steps, yet the activations it should have released survive it: that is `backward(retain_graph=True)` (or a graph kept for a second backward), and something also keeps each step's loss or output (a list, an accumulator), which holds the retained graph. Both are inferred from the log (backward allocations and survivors), not from references.",
            site.file, site.line, backward_steps, e.steps
        ),
        Some(Holder::GraphRoot {
            site,
            tensors_per_step,
            bytes_per_step,
        }) => format!(
            " The graph is most likely held by the tensor made at {}:{}: it too survives every step ({:.1} tensors, {} per step), it is small, and it is allocated right after these activations in the same function, which is what an accumulated loss (`total += loss`) or a kept loss looks like. No backward ran in these steps. This is inferred from allocation order, not from references (a snapshot records none).",
            site.file,
            site.line,
            tensors_per_step,
            bytes(bytes_per_step.max(0.0) as u64),
        ),
        Some(Holder::LossOnSameLine { scalars_per_step }) => format!(
            " The same line also leaves {scalars_per_step:.1} scalar tensors (a loss) alive per step and no backward runs in these steps: the loss accumulated as a tensor on this very line (`total += crit(model(x), y)`) holds each step's graph. Inferred from the survivors, not from references."
        ),
        Some(Holder::ForwardWithGrad) => " No backward ran from this function during these steps, so this is a forward pass run with autograd enabled (no `torch.no_grad()`) whose result is kept from step to step; what keeps it (an accumulator such as `val_loss += crit(model(x), y)`, possibly on this very line, or a list) allocates nothing the log could show, so no cause line is named.".into(),
    }
}

/// The sentence a finding's explanation gains for a released accumulation.
fn released(extent: Extent, r: &Release, e: &LogEvidence) -> String {
    let per_step = bytes(e.growth_bytes_per_step.max(0.0) as u64);
    let at = r
        .site
        .as_ref()
        .map(|s| format!(" at {}:{} in {}", s.file, s.line, s.function))
        .unwrap_or_default();
    let func = r.loop_function.as_deref().unwrap_or("the loop's function");
    match extent {
        Extent::Alive => String::new(),
        Extent::ReleasedAfterLoop => {
            let place = match r.loop_function_active {
                Some(false) => format!("{at}, after `{func}` returned (what it kept was local to it)"),
                Some(true) => format!("{at}, in `{func}` after its loop"),
                None => format!("{at} (the free recorded no stack)"),
            };
            format!(
                "This memory grew at every step up to the last one and was freed only after the loop ended{place}: {:.0}% of it by the end of the capture. That is still an accumulation: the peak grows by {per_step} with every step, so a longer run (more steps, a longer epoch) runs out of memory. A capture taken while the loop ran would show it alive.",
                100.0 * r.freed_share
            )
        }
        Extent::ReleasedEachEpoch => format!(
            "This memory grew at every step and was freed all at once every {} steps{at} ({} such releases in the log), then grew again: what outputs kept for an epoch-end metric and cleared at the epoch's end look like. Its peak grows by {per_step} with every step between two releases, so a longer epoch runs out of memory (a cache flushed only when full looks the same in a capture).",
            r.period_steps.unwrap_or(0),
            r.releases
        ),
    }
}

fn trace_explanation(kind: LeakKind, t: &TraceEvidence) -> String {
    let place = |s: &Option<Site>| {
        s.as_ref()
            .map(|s| format!("`{}` ({})", s.function, s.file))
            .unwrap_or_else(|| "code with no user frame recorded".into())
    };
    let ops: Vec<String> = t.ops.iter().map(|o| format!("`{o}`")).collect();
    let made = if t.group.sites == 1 {
        format!("made in {}", place(&t.main_site))
    } else {
        format!(
            "made at {} sites (most in {}, {})",
            t.group.sites,
            place(&t.main_site),
            bytes(t.main_bytes)
        )
    };
    let (with_live, n_steps) = (t.group.steps_with_live, t.group.profiled_steps);
    let what = match kind {
        LeakKind::RetainedGraph => format!(
            "Allocations {made} by {} under grad mode, whose autograd nodes no backward in \
             the trace consumed, survive {with_live} of {n_steps} profiled steps: about {} \
             per step ({} in all). They are the activations each step's graph saved for a \
             backward that never ran, and something the loop keeps from step to step \
             holds each graph: typically a loss stored or summed as a tensor in an \
             evaluation without `torch.no_grad()` (`losses.append(loss)`, `total += loss`).",
            ops.join(", "),
            bytes(t.per_step_bytes),
            bytes(t.group.total_bytes)
        ),
        LeakKind::AccumulatedLoss
        | LeakKind::HookCache
        | LeakKind::KeptOutputs
        | LeakKind::TensorCache
        | LeakKind::SteadyGrowth
        | LeakKind::RetainedAttempt => format!(
            "Allocations {made} by {} survive {with_live} of {n_steps} profiled steps: \
             about {} per step ({} in all); memory kept across iterations grows with \
             every step.",
            ops.join(", "),
            bytes(t.per_step_bytes),
            bytes(t.group.total_bytes)
        ),
    };
    let line_note = match &t.keeper {
        Some(k) => format!(
            " What keeps them is in the loop of `{}` ({}). The trace cannot give that \
             line: `{}` was already running when profiling began, so its recorded line \
             {} is the line it was at then, and a profiler trace gives other frames at \
             the line where they were entered; the functions are reliable.",
            k.function, k.file, k.function, k.line
        ),
        None => " A profiler trace gives a frame's line as recorded when the frame was \
                  entered or when profiling began, so the lines may be off; the \
                  functions are reliable."
            .into(),
    };
    format!("{what}{line_note}")
}

fn retry_explanation(r: &RetryEvidence) -> String {
    let call = r
        .call
        .as_ref()
        .map(|s| format!(" called at {}:{} in {}", s.file, s.line, s.function))
        .unwrap_or_default();
    format!(
        "{} attempt(s){call} ended in an OOM, and their memory was still allocated while the next attempt ran: {} in {} blocks at most (after the OOM at event {}), {} in all. {} of the later attempts ran out of memory with it still held. Something keeps the failed attempts' frames alive: the caught exception's traceback holds every frame of the attempt and their tensors, as long as the exception is stored (`errors.append(e)`), kept by `sys.exc_info()`, or the retry runs inside the `except` block. Inferred from the shape of the log (allocations under the same call, alive across the next attempt); a snapshot records no references.",
        r.attempts,
        bytes(r.most_bytes),
        r.most_blocks,
        r.most_after_oom.0,
        bytes(r.total_bytes),
        r.later_ooms,
    )
}

/// Why a trace's autograd graph growth is a finding, and how the trace gives its place.
pub fn graph_explanation(g: &crate::analysis::graph::GraphGrowth) -> String {
    let place = match &g.site {
        Some(s) => format!("in `{}` ({})", s.function, s.file),
        None => "outside any recorded user frame".into(),
    };
    let line_note = match &g.site {
        Some(s) if g.started_before_profiling => format!(
            " The trace cannot give the line: `{f}` was already running when profiling \
             began, so its recorded line {l} is the line it was at then (typically the \
             `prof.step()` call), not the line of this op; look for the `{op}` in the body \
             of `{f}`.",
            f = s.function,
            l = s.line,
            op = g.op,
        ),
        Some(s) => format!(
            " The trace cannot give the line: the profiler records a call at its first \
             line, so {}:{} is where `{}` starts, not the line of this op.",
            s.file, s.line, s.function
        ),
        None => String::new(),
    };
    let n = g.nodes_per_step;
    let per = if (n - n.round()).abs() < 1e-9 {
        format!("{}", n.round() as u64)
    } else {
        format!("{n:.2}")
    };
    format!(
        "The autograd graph grows by {per} `{op}` node(s) per step {place}: in {with} of \
         {n_steps} profiled steps, this op creates a node that no backward pass ever \
         consumes before the trace ends. A node that outlives its step keeps the graph \
         behind it alive, so each step's graph is chained to the next: the sign of a tensor \
         that requires grad being carried across iterations (e.g. `total += loss` instead \
         of `total += loss.item()`). Memory allocated by these ops and still alive at the \
         end: {} bytes; the graph's saved tensors add to it, and the growth shows in the \
         graph before it shows in memory.{line_note}",
        g.bytes_attributed,
        op = g.op,
        with = g.steps_with_nodes,
        n_steps = g.steps,
    )
}

/// What to change for a graph growth finding: an accumulation (`add`, `sum`, `mean`) keeps a
/// Python number; anything else is detached.
pub fn graph_fix(g: &crate::analysis::graph::GraphGrowth) -> &'static str {
    let base = g.op.rsplit("::").next().unwrap_or(&g.op);
    if base.starts_with("add") || base.starts_with("sum") || base.starts_with("mean") {
        "accumulate a Python number, not the tensor: `total += loss.item()` (or \
         `loss.detach()`); keep only detached values across iterations, and compute metrics \
         and validation under `torch.no_grad()`"
    } else {
        "do not carry tensors that require grad across iterations: store `.detach()`ed \
         tensors or `.item()` values, and compute anything not meant for backward under \
         `torch.no_grad()`"
    }
}

/// The holder of a leak in words, its line first where the evidence names it: `the forward
/// hook `keep_activation` (fixtures/generate.py, starting at line 551) on the module whose
/// `forward` runs at linear.py:130`, `the callback `on_train_batch_end` at
/// train.py:77`, or where the stack shows the mechanism but not its line, `a forward hook on
/// the module whose `forward` runs at linear.py:134: its line is not in the allocation stack; look
/// for `register_forward_hook``.
pub fn holder_named(k: &crate::analysis::leaks::KeptBy) -> String {
    use crate::analysis::leaks::Mechanism;
    let what = match k.mechanism {
        Mechanism::ForwardHook => "forward hook",
        Mechanism::BackwardHook => "backward hook",
        Mechanism::Callback => "callback",
        Mechanism::Closure => "closure",
    };
    let module = k
        .module
        .as_ref()
        .map(|m| {
            format!(
                " on the module whose `{}` runs at {}:{}",
                m.function,
                m.short_file(),
                m.line
            )
        })
        .unwrap_or_default();
    match &k.site {
        Some(s) if k.line_is_statement => {
            format!(
                "the {what} `{}` at {}:{}{module}",
                s.function, s.file, s.line
            )
        }
        Some(s) => format!(
            "the {what} `{}` ({}, starting at line {}){module}",
            s.function, s.file, s.line
        ),
        None => {
            let look = match k.mechanism {
                Mechanism::ForwardHook => "`register_forward_hook` / `register_forward_pre_hook`",
                Mechanism::BackwardHook => "`register_full_backward_hook` / `Tensor.register_hook`",
                Mechanism::Callback => "the callbacks passed to the trainer",
                Mechanism::Closure => "the closure passed to `optimizer.step`",
            };
            format!("a {what}{module}: its line is not in the allocation stack; look for {look}")
        }
    }
}
