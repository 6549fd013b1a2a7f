//! What each category rule rests on: the sentence the HTML report and the JSON give for a
//! [`CategoryRule`], so a reader can judge the heuristic that filled a category.

use crate::analysis::categories::CategoryRule;

/// The sentence of a category rule.
pub fn category_rule(r: CategoryRule) -> &'static str {
    match r {
        CategoryRule::Optim => "allocated by the optimizer's own code (torch/optim, outside any closure it calls) and alive past its step: optimizer state (exp_avg, exp_avg_sq, step counters)",
        CategoryRule::OptimTmp => "allocated by the optimizer's own code (torch/optim, outside any closure it calls) and freed within its step: optimizer temporaries",
        CategoryRule::Apply => "allocated by Module._apply (model.to() / .cuda()) or nn.Parameter: parameters and buffers",
        CategoryRule::Weights => "allocated under a function that loads or initialises weights (init_weight*, load_state_dict, from_pretrained, ...) and not freed: parameters (weights)",
        CategoryRule::EarlyNative => "allocated before the first forward pass with no Python frame and no backward in its stack: taken as parameters (weights loaded or created natively)",
        CategoryRule::Grad => "allocated in a backward pass (autograd engine or backward-node frames, a backward() entry point, or no stack at all after a backward() call in the log: autograd's engine thread records no Python frames) and alive past its step: gradients",
        CategoryRule::Native => "allocated with no Python frame outside any backward pass (no backward() call before it in the log, no autograd engine frame): native work such as workspaces or communication buffers",
        CategoryRule::PreGrad => "allocated before the log began by a backward pass (its own stack shows autograd's engine): gradients",
        CategoryRule::GradTmp => "allocated in the backward pass and freed within its step: gradient temporaries",
        CategoryRule::Act => "allocated inside a torch.nn module call and freed by the backward pass or alive past its step: activations (saved for backward, or kept)",
        CategoryRule::ActTeardown => "allocated inside a torch.nn module call and freed by autograd's graph teardown (`release_variables`) or as an OOM's exception unwound the forward: saved for backward, activations",
        CategoryRule::FwdTmp => "allocated inside a torch.nn module call and freed before the backward pass within its step: forward temporaries",
        CategoryRule::UserTmp => "allocated by other code and freed within its step: temporaries",
        CategoryRule::User => "allocated by user code outside model calls and alive past its step: inputs, targets, buffers, user tensors",
        CategoryRule::BeforeRec => "allocated before recording began (no stack recorded): typically the weights, and gradients and optimizer state of earlier steps",
        CategoryRule::BeforeLog => "allocated before the log's first entry (the ring buffer dropped its event; the block keeps its own stack, which does not say what it is)",
        CategoryRule::Workspace => "allocated by at::cuda::getNewWorkspace: a cuBLAS workspace, kept per thread and handle (with Python-only stacks, the backward thread's workspace has no frame and is counted with the gradients)",
        CategoryRule::Pending => "freed by the program, awaiting another stream (record_stream)",
        CategoryRule::DumpBeforeCpp => "no stack, in a snapshot with no log: allocated before recording began (other stacks carry C++ frames, which every thread records, autograd's engine included)",
        CategoryRule::DumpBeforeNoBwd => "no stack, in a snapshot with no log: allocated before recording began (no stack anywhere shows a backward, so autograd's engine thread, which records no Python frame, made none of it)",
        CategoryRule::DumpEither => "no stack, in a snapshot with no log and Python-only stacks where a backward ran: allocated before recording began, or by autograd's engine thread (gradients); the capture cannot tell which",
        CategoryRule::UnloggedEither => "allocated before the log's first entry with no stack: before recording began, or by autograd's engine thread before the ring buffer's oldest entry (Python-only stacks record no frame there)",
        CategoryRule::DumpGrad => "its own stack shows autograd's engine or a backward node (no log to say more): allocated by a backward pass, kept at the dump",
        CategoryRule::KvGrown => "made inside a module call by a stack that grows a tensor by replacing it with a larger one every step (`torch.cat([cache, new])` in attention), in a capture where no backward ran: a KV cache",
        CategoryRule::Kv => "made under a cache's update (a frame whose file or function names a cache, e.g. transformers' cache_utils `update`) in a capture where no backward ran: a KV cache",
        CategoryRule::InfOut => "allocated inside a torch.nn module call and alive past its step, in a capture where no backward ran (inference): outputs and states, not saved for any backward",
        CategoryRule::InfTmp => "allocated inside a torch.nn module call and freed within its step, in a capture where no backward ran (inference): forward temporaries",
        CategoryRule::DumpOut => "allocated inside a torch.nn module call and alive at the dump, in a capture where no stack shows a backward (inference): outputs and states",
        CategoryRule::DumpAct => "allocated inside a torch.nn module call and alive at the dump (no log to say when it would be freed): activations or module outputs",
        CategoryRule::DumpUser => "allocated by user code outside model calls and alive at the dump: inputs, buffers, user tensors, caches",
        CategoryRule::DumpNative => "allocated with no Python frame and no backward in its stack, alive at the dump: native work",
    }
}

/// Serializes a rule as its sentence (the JSON's `basis[].rule`, unchanged since it was one).
pub fn serialize_category_rule<S: serde::Serializer>(
    r: &CategoryRule,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.serialize_str(category_rule(*r))
}

/// The JSON's `basis[].rule` is the rule's sentence: the serialization is the words', so the
/// analysis names no view.
impl serde::Serialize for CategoryRule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_category_rule(self, s)
    }
}
