//! What a frame does in PyTorch's machinery: one vocabulary of roles, decided once per interned
//! frame (and once per interned op name of a trace), which every pass tests instead of file
//! names.
//!
//! Memory is categorised by what made it, and "what made it" is a question about PyTorch's own
//! frames: a module's call, autograd's engine, the optimizer, a closure the optimizer calls.
//! Before this vocabulary, categories, leaks and two trace passes each decided "backward" by
//! their own substrings, and "optimizer" meant any frame under `torch/optim/`: Lightning's
//! `optimizer.step(closure)`, which runs `training_step` and the backward inside the optimizer's
//! frame, made every activation optimizer state. A role says what the frame is; where it sits in
//! its stack (inside or outside the optimizer's closure) is the per-stack [`StackRoles`].
//!
//! Paths are matched as path components (`torch/optim/` at the start or after a `/`), so the
//! rules read a snapshot's absolute paths and a profiler trace's `sys.path`-stripped ones alike.

use super::frames::FrameKind;

/// The roles of one frame: a set, since one frame can be several things (`Tensor.backward` is a
/// backward entry and autograd's Python). Empty for the user's own code that is none of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FrameRole(u32);

impl FrameRole {
    pub const NONE: FrameRole = FrameRole(0);
    /// PyTorch's own Python (a `torch/` package path).
    pub const TORCH: FrameRole = FrameRole(1);
    /// Code of a `torch.nn` module (`torch/nn/modules/…`, any function).
    pub const MODULE: FrameRole = FrameRole(1 << 1);
    /// A module's call: `Module.__call__` / `_call_impl` / `_wrapped_call_impl` or a
    /// `torch.nn` module's `forward`.
    pub const MODULE_CALL: FrameRole = FrameRole(1 << 2);
    /// Moving or making parameters: `Module._apply` (`.to()`, `.cuda()`), `nn.Parameter`.
    pub const MODULE_APPLY: FrameRole = FrameRole(1 << 3);
    /// The Python entry of a backward: `Tensor.backward`, `torch.autograd.backward` / `grad`, a
    /// compiled graph's `backward` (`torch/_functorch/`).
    pub const BACKWARD_ENTRY: FrameRole = FrameRole(1 << 4);
    /// Autograd's engine at work: `_engine_run_backward`, `Engine::evaluate_function`,
    /// `Engine::thread_main`, `Engine::execute`.
    pub const AUTOGRAD_ENGINE: FrameRole = FrameRole(1 << 5);
    /// A node of the generated backward graph evaluating (`BmmBackward0::apply`).
    pub const BACKWARD_NODE: FrameRole = FrameRole(1 << 6);
    /// `AccumulateGrad`: the engine writing a leaf's `.grad`.
    pub const ACCUMULATE_GRAD: FrameRole = FrameRole(1 << 7);
    /// A node releasing what it saved for backward (`…::release_variables`).
    pub const RELEASE_VARIABLES: FrameRole = FrameRole(1 << 8);
    /// `torch/autograd/function.py apply`: a custom Function's forward, or (with no Python
    /// caller) its backward.
    pub const FUNCTION_APPLY: FrameRole = FrameRole(1 << 9);
    /// Any of autograd's Python (`torch/autograd/…`): grad mode, Functions, backward.
    pub const AUTOGRAD: FrameRole = FrameRole(1 << 10);
    /// The optimizer's code (`torch/optim/…`).
    pub const OPTIMIZER: FrameRole = FrameRole(1 << 11);
    /// A closure an optimizer calls: Lightning's `Closure.__call__` / `closure` /
    /// `_wrap_closure`, or a function named `closure`.
    pub const CLOSURE: FrameRole = FrameRole(1 << 12);
    /// A training step that runs the model and its backward: `training_step` (Lightning's,
    /// Hugging Face Trainer's, a user's).
    pub const TRAINING_STEP: FrameRole = FrameRole(1 << 13);
    /// torch.compile's machinery or output: dynamo, inductor, AOT autograd, FX, generated code.
    pub const COMPILED: FrameRole = FrameRole(1 << 14);
    /// CUDA graphs: inductor's cudagraph trees, `torch.cuda.graphs`.
    pub const CUDA_GRAPH: FrameRole = FrameRole(1 << 15);
    /// Activation checkpointing (`torch/utils/checkpoint.py`).
    pub const CHECKPOINT: FrameRole = FrameRole(1 << 16);
    /// A cuBLAS / cuBLASLt workspace's allocation (`getNewWorkspace`, `setWorkspaceForHandle`,
    /// `getCUDABlasLtWorkspace`).
    pub const WORKSPACE: FrameRole = FrameRole(1 << 17);
    /// A function that loads or initialises weights ([`WEIGHT_FUNCTIONS`], `safetensors`).
    pub const WEIGHT_LOADER: FrameRole = FrameRole(1 << 18);
    /// A cache's update outside torch (its file or function names a cache: `cache_utils.py`,
    /// `update_kv_cache`).
    pub const CACHE: FrameRole = FrameRole(1 << 19);
    /// A module's forward-hook dispatch: `inner` in `torch/nn/modules/module.py`, the closure
    /// `Module._call_impl` runs (torch 2.1 and later) when the module or the process has hooks.
    /// What the module's forward allocates under it is handed to the hooks.
    pub const HOOK_DISPATCH: FrameRole = FrameRole(1 << 20);
    /// Backward-hook machinery: `torch/utils/hooks.py` (`BackwardHook`, what
    /// `register_full_backward_hook` installs).
    pub const BACKWARD_HOOK: FrameRole = FrameRole(1 << 21);
    /// A training framework's callback: Lightning's dispatch (`_call_callback_hooks`), Hugging
    /// Face's (`CallbackHandler.call_event`), or a callback method (`on_train_batch_end`, any
    /// `on_…_start` / `on_…_end`, `on_log`, `on_evaluate`, `on_save`).
    pub const CALLBACK: FrameRole = FrameRole(1 << 22);
    /// Code of a `torch.nn` module that owns a weight an op multiplies by
    /// (`torch/nn/modules/linear.py`, `conv.py`, any function): under autocast the op casts
    /// that weight to 16 bits before it makes its output.
    pub const WEIGHT_MODULE: FrameRole = FrameRole(1 << 23);
    /// A `torch.nn.functional` function that autocast runs in fp32 or does not cast
    /// ([`KEEPS_PRECISION`]: norms, embeddings, losses, softmax): an op under it makes no
    /// 16-bit copy of a weight.
    pub const KEEPS_PRECISION: FrameRole = FrameRole(1 << 24);
    /// Code of a recurrent `torch.nn` module (`torch/nn/modules/rnn.py`, any function: `LSTM`,
    /// `GRU`, `RNN`): its cuDNN call asks for a workspace sized by the algorithm for the shape.
    pub const RECURRENT: FrameRole = FrameRole(1 << 25);

    /// Frames that show a backward pass running.
    pub const BACKWARD: FrameRole = FrameRole(
        Self::BACKWARD_ENTRY.0
            | Self::AUTOGRAD_ENGINE.0
            | Self::BACKWARD_NODE.0
            | Self::ACCUMULATE_GRAD.0,
    );

    pub const fn union(self, o: FrameRole) -> FrameRole {
        FrameRole(self.0 | o.0)
    }
    /// Whether every role of `o` is in `self`.
    pub const fn contains(self, o: FrameRole) -> bool {
        self.0 & o.0 == o.0
    }
    /// Whether any role of `o` is in `self`.
    pub const fn intersects(self, o: FrameRole) -> bool {
        self.0 & o.0 != 0
    }
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl std::ops::BitOr for FrameRole {
    type Output = FrameRole;
    fn bitor(self, o: FrameRole) -> FrameRole {
        self.union(o)
    }
}

impl std::ops::BitOrAssign for FrameRole {
    fn bitor_assign(&mut self, o: FrameRole) {
        *self = self.union(o);
    }
}

/// Prefixes of function names (lower case) that load or initialise a model's weights, in
/// torch, transformers and hand-written loaders (FlexGen's `init_weight_list`).
const WEIGHT_FUNCTIONS: [&str; 7] = [
    "init_weight",
    "init_all_weights",
    "load_weight",
    "load_state_dict",
    "_load_state_dict",
    "from_pretrained",
    "load_pretrained",
];

/// `torch.nn.functional` functions that autocast runs in fp32 or does not cast (norms,
/// embeddings, losses, softmax, dropout): [`FrameRole::KEEPS_PRECISION`].
pub const KEEPS_PRECISION: [&str; 14] = [
    "layer_norm",
    "group_norm",
    "batch_norm",
    "instance_norm",
    "rms_norm",
    "embedding",
    "embedding_bag",
    "cross_entropy",
    "nll_loss",
    "mse_loss",
    "softmax",
    "log_softmax",
    "dropout",
    "normalize",
];

/// The part of a path after its `pkg/` component (`torch/optim/adamw.py` → `optim/adamw.py`),
/// found at the start or after a `/`; the last such component wins (a source checkout's
/// `pytorch/torch/…`).
fn under<'a>(norm: &'a str, pkg: &str) -> Option<&'a str> {
    let pat = format!("/{pkg}/");
    match norm.rfind(&pat) {
        Some(i) => Some(&norm[i + pat.len()..]),
        None => norm.strip_prefix(pkg).and_then(|r| r.strip_prefix('/')),
    }
}

/// The roles of a frame, from its file, function name and kind. Native frames are named by C++
/// functions; Python frames by their file's place in a package and their function.
pub fn frame_role(file: &str, name: &str, kind: FrameKind) -> FrameRole {
    match kind {
        FrameKind::Native => native_role(name),
        FrameKind::Generated => FrameRole::COMPILED,
        _ => python_role(file, name),
    }
}

fn native_role(name: &str) -> FrameRole {
    let mut r = FrameRole::NONE;
    if name.contains("Engine::evaluate_function")
        || name.contains("Engine::thread_main")
        || name.contains("Engine::execute")
    {
        r |= FrameRole::AUTOGRAD_ENGINE;
    }
    if is_backward_node(name) {
        r |= FrameRole::BACKWARD_NODE;
    }
    if name.starts_with("torch::autograd::AccumulateGrad::apply") {
        r |= FrameRole::ACCUMULATE_GRAD;
    }
    if name.contains("release_variables") {
        r |= FrameRole::RELEASE_VARIABLES;
    }
    if name.contains("getNewWorkspace")
        || name.contains("setWorkspaceForHandle")
        || name.contains("BlasLtWorkspace")
    {
        r |= FrameRole::WORKSPACE;
    }
    r
}

/// `...::XxxBackward0::apply(...)`: a node of the generated backward graph.
fn is_backward_node(name: &str) -> bool {
    let mut rest = name;
    while let Some(i) = rest.find("Backward") {
        let after = &rest[i + "Backward".len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if after[digits..].starts_with("::apply") {
            return true;
        }
        rest = after;
    }
    false
}

fn python_role(file: &str, name: &str) -> FrameRole {
    let norm = file.replace('\\', "/");
    let mut r = FrameRole::NONE;
    let lower = name.to_ascii_lowercase();
    if WEIGHT_FUNCTIONS.iter().any(|w| lower.starts_with(w))
        || under(&norm, "safetensors").is_some()
    {
        r |= FrameRole::WEIGHT_LOADER;
    }
    if name == "training_step" {
        r |= FrameRole::TRAINING_STEP;
    }
    if name == "closure" || is_lightning_closure(&norm, name) {
        r |= FrameRole::CLOSURE;
    }
    if is_callback(&norm, name) {
        r |= FrameRole::CALLBACK;
    }
    if let Some(t) = under(&norm, "torch") {
        r |= FrameRole::TORCH | torch_role(t, name);
    } else {
        let base = norm.rsplit('/').next().unwrap_or(&norm);
        if (base.to_ascii_lowercase().contains("cache") || lower.contains("cache"))
            && !name.contains("lru_cache")
        {
            r |= FrameRole::CACHE;
        }
    }
    r
}

/// Lightning's closure around `training_step` and the backward, which `optimizer.step(closure)`
/// runs: `Closure.__call__` and `closure` in `loops/optimization/automatic.py` (2.x; 1.x's
/// `optimizer_loop.py`), and the precision plugin's `_wrap_closure`.
/// A callback's frame: a framework's dispatch of its callbacks, or a method named as a callback
/// hook is (`on_` and a moment: `_start`, `_end`, or one of HF's events).
fn is_callback(norm: &str, name: &str) -> bool {
    let lightning =
        under(norm, "lightning").is_some() || under(norm, "pytorch_lightning").is_some();
    let dispatch =
        (lightning && norm.ends_with("trainer/call.py") && name == "_call_callback_hooks")
            || (under(norm, "transformers").is_some_and(|r| r == "trainer_callback.py")
                && name == "call_event");
    let hook = name.strip_prefix("on_").is_some_and(|rest| {
        !rest.is_empty()
            && (rest.ends_with("_start")
                || rest.ends_with("_end")
                || matches!(
                    rest,
                    "log" | "evaluate" | "save" | "predict" | "prediction_step"
                ))
    });
    dispatch || hook
}

fn is_lightning_closure(norm: &str, name: &str) -> bool {
    let lightning = under(norm, "lightning").is_some()
        || under(norm, "pytorch_lightning").is_some()
        || under(norm, "lightning_fabric").is_some();
    lightning
        && ((norm.contains("loops/optimization/") && matches!(name, "__call__" | "closure"))
            || name == "_wrap_closure")
}

/// Roles of a frame in torch's own Python, from its path under `torch/` (`t`).
fn torch_role(t: &str, name: &str) -> FrameRole {
    let mut r = FrameRole::NONE;
    if let Some(m) = t.strip_prefix("nn/modules/") {
        r |= FrameRole::MODULE;
        if matches!(
            name,
            "forward" | "_call_impl" | "_wrapped_call_impl" | "__call__"
        ) {
            r |= FrameRole::MODULE_CALL;
        }
        if m == "module.py" && matches!(name, "_apply" | "cuda" | "to" | "<lambda>" | "convert") {
            r |= FrameRole::MODULE_APPLY;
        }
        if matches!(m, "linear.py" | "conv.py") {
            r |= FrameRole::WEIGHT_MODULE;
        }
        if m == "rnn.py" {
            r |= FrameRole::RECURRENT;
        }
    }
    if t == "nn/functional.py" && KEEPS_PRECISION.contains(&name) {
        r |= FrameRole::KEEPS_PRECISION;
    }
    if t == "nn/parameter.py" {
        r |= FrameRole::MODULE_APPLY;
    }
    if t.starts_with("optim/") {
        r |= FrameRole::OPTIMIZER;
    }
    if t.starts_with("autograd/") {
        r |= FrameRole::AUTOGRAD;
    }
    if (t == "autograd/__init__.py" && matches!(name, "backward" | "grad"))
        || (t == "_tensor.py" && name == "backward")
        || (t.starts_with("_functorch/") && name == "backward")
    {
        r |= FrameRole::BACKWARD_ENTRY;
    }
    if t == "autograd/graph.py" && name == "_engine_run_backward" {
        r |= FrameRole::AUTOGRAD_ENGINE;
    }
    if t == "autograd/function.py" && name == "apply" {
        r |= FrameRole::FUNCTION_APPLY;
    }
    if ["_dynamo/", "_inductor/", "_functorch/", "fx/"]
        .iter()
        .any(|p| t.starts_with(p))
    {
        r |= FrameRole::COMPILED;
    }
    if t == "_inductor/cudagraph_trees.py" || t == "cuda/graphs.py" {
        r |= FrameRole::CUDA_GRAPH;
    }
    if t == "utils/checkpoint.py" {
        r |= FrameRole::CHECKPOINT;
    }
    if t == "nn/modules/module.py" && name == "inner" {
        r |= FrameRole::HOOK_DISPATCH;
    }
    if t == "utils/hooks.py" {
        r |= FrameRole::BACKWARD_HOOK;
    }
    r
}

/// Where a stack stands with the optimizer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OptimizerPart {
    /// No optimizer frame.
    #[default]
    Outside,
    /// The optimizer's own code: its innermost optimizer frame calls nothing but torch.
    Own,
    /// Inside a closure the optimizer called (`optimizer.step(closure)`): the model, its loss
    /// and its backward, run from within the optimizer's frame.
    Closure,
}

/// What a whole stack says, decided once per interned stack from its frames' roles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct StackRoles {
    /// Every role of every frame.
    pub any: FrameRole,
    /// Where the stack stands with the optimizer.
    pub optimizer: OptimizerPart,
    /// The stack shows a backward pass running: a frame of [`FrameRole::BACKWARD`], or Python
    /// frames whose outermost is `torch/autograd/function.py apply` (a custom Function's
    /// backward, called from the engine's thread with no Python caller; a forward call of the
    /// same `apply` always has the user's frames outside it).
    pub backward: bool,
    /// The stack has a Python frame (any owner).
    pub python: bool,
}

impl StackRoles {
    /// The summary of a stack, from its frames' `(role, kind)`, innermost first.
    pub fn of(frames: impl Iterator<Item = (FrameRole, FrameKind)> + Clone) -> StackRoles {
        let mut s = StackRoles::default();
        let mut outermost_python = FrameRole::NONE;
        // Frames inside the innermost optimizer frame that are not the optimizer's own work.
        let mut called = false;
        let mut in_optimizer = false;
        for (role, kind) in frames {
            s.any |= role;
            if kind != FrameKind::Native {
                s.python = true;
                outermost_python = role;
            }
            if role.intersects(FrameRole::OPTIMIZER) {
                if !in_optimizer {
                    in_optimizer = true;
                    s.optimizer = if called {
                        OptimizerPart::Closure
                    } else {
                        OptimizerPart::Own
                    };
                }
            } else if !in_optimizer && calls_out_of_optimizer(role, kind) {
                called = true;
            }
        }
        s.backward = s.any.intersects(FrameRole::BACKWARD)
            || outermost_python.contains(FrameRole::FUNCTION_APPLY);
        s
    }
}

/// Whether a frame found inside an optimizer's frame means the optimizer called out of its own
/// code: a closure or a training step, a module's call, a backward, or any Python that is
/// neither torch's nor generated (a user's closure, Lightning's `_wrap_closure`). The optimizer
/// itself calls nothing but torch.
fn calls_out_of_optimizer(role: FrameRole, kind: FrameKind) -> bool {
    role.intersects(
        FrameRole::CLOSURE
            | FrameRole::TRAINING_STEP
            | FrameRole::MODULE_CALL
            | FrameRole::BACKWARD,
    ) || (matches!(kind, FrameKind::User | FrameKind::Library)
        && !role.intersects(FrameRole::TORCH))
}

/// The roles of a profiler trace's op, from its name: the engine evaluating a node
/// (`autograd::engine::evaluate_function: …`), a backward node (`MmBackward0`),
/// `AccumulateGrad`.
pub fn op_role(name: &str) -> FrameRole {
    let mut r = FrameRole::NONE;
    if name.starts_with("autograd::engine::evaluate_function") {
        r |= FrameRole::AUTOGRAD_ENGINE;
    }
    if name.contains("AccumulateGrad") {
        r |= FrameRole::ACCUMULATE_GRAD;
    }
    let base = name.trim_end_matches(|c: char| c.is_ascii_digit());
    if base.ends_with("Backward") {
        r |= FrameRole::BACKWARD_NODE;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use FrameKind::*;

    const T: &str = "/x/site-packages/torch/";

    #[test]
    fn recurrent_modules_are_told_by_their_file() {
        let lstm = frame_role(&format!("{T}nn/modules/rnn.py"), "forward", Torch);
        assert!(lstm.contains(FrameRole::RECURRENT | FrameRole::MODULE_CALL));
        for (file, name) in [
            (format!("{T}nn/modules/linear.py"), "forward"),
            ("/home/u/rnn.py".to_string(), "forward"),
        ] {
            assert!(
                !frame_role(&file, name, Torch).intersects(FrameRole::RECURRENT),
                "{file}"
            );
        }
    }

    #[test]
    fn backward_roles() {
        let r = frame_role(
            "??",
            "torch::autograd::generated::BmmBackward0::apply(std::vector<at::Tensor>&&)",
            Native,
        );
        assert!(r.intersects(FrameRole::BACKWARD));
        let r = frame_role(
            "??",
            "torch::autograd::Engine::evaluate_function(std::shared_ptr<GraphTask>&)",
            Native,
        );
        assert!(r.contains(FrameRole::AUTOGRAD_ENGINE));
        let r = frame_role(
            "VariableType_3.cpp",
            "torch::autograd::VariableType::(anonymous namespace)::mm(c10::DispatchKeySet)",
            Native,
        );
        assert!(!r.intersects(FrameRole::BACKWARD));
        assert!(frame_role(&format!("{T}_tensor.py"), "backward", Torch)
            .contains(FrameRole::BACKWARD_ENTRY));
        // A trace's stripped path reads the same.
        assert!(
            frame_role("torch/_tensor.py", "backward", User).contains(FrameRole::BACKWARD_ENTRY)
        );
        assert!(frame_role(
            &format!("{T}autograd/graph.py"),
            "_engine_run_backward",
            Torch
        )
        .contains(FrameRole::AUTOGRAD_ENGINE));
        let apply = frame_role(&format!("{T}autograd/function.py"), "apply", Torch);
        assert!(!apply.intersects(FrameRole::BACKWARD));
        assert!(apply.contains(FrameRole::FUNCTION_APPLY));
        assert!(
            op_role("autograd::engine::evaluate_function: AddmmBackward0")
                .intersects(FrameRole::BACKWARD)
        );
        assert!(op_role("MseLossBackward0").intersects(FrameRole::BACKWARD));
        assert!(op_role("torch::autograd::AccumulateGrad").intersects(FrameRole::BACKWARD));
        assert!(!op_role("aten::add_").intersects(FrameRole::BACKWARD));
        assert!(!op_role("aten::mse_loss_backward").intersects(FrameRole::BACKWARD));
    }

    #[test]
    fn keeping_mechanism_roles() {
        let inner = frame_role(&format!("{T}nn/modules/module.py"), "inner", Torch);
        assert!(inner.contains(FrameRole::HOOK_DISPATCH));
        // A trace's stripped path reads the same; `_call_impl` is the call, not the dispatch.
        assert!(frame_role("torch/nn/modules/module.py", "inner", User)
            .contains(FrameRole::HOOK_DISPATCH));
        assert!(
            !frame_role(&format!("{T}nn/modules/module.py"), "_call_impl", Torch)
                .intersects(FrameRole::HOOK_DISPATCH)
        );
        // A user's function named `inner` is not the dispatch.
        assert!(!frame_role("/home/u/train.py", "inner", User).intersects(FrameRole::HOOK_DISPATCH));
        assert!(frame_role(&format!("{T}utils/hooks.py"), "hook", Torch)
            .contains(FrameRole::BACKWARD_HOOK));
        for (file, name) in [
            ("/home/u/train.py", "on_train_batch_end"),
            ("/home/u/train.py", "on_step_end"),
            ("/home/u/train.py", "on_log"),
            (
                "/x/site-packages/lightning/pytorch/trainer/call.py",
                "_call_callback_hooks",
            ),
            (
                "/x/site-packages/transformers/trainer_callback.py",
                "call_event",
            ),
        ] {
            assert!(
                frame_role(file, name, User).contains(FrameRole::CALLBACK),
                "{name}"
            );
        }
        for (file, name) in [
            ("/home/u/train.py", "on_"),
            ("/home/u/train.py", "one_step_end"),
            ("/home/u/train.py", "on_device"),
            (
                "/x/site-packages/lightning/pytorch/trainer/call.py",
                "_call_lightning_module_hook",
            ),
        ] {
            assert!(
                !frame_role(file, name, User).intersects(FrameRole::CALLBACK),
                "{name}"
            );
        }
    }

    fn stack(frames: &[(&str, &str)]) -> StackRoles {
        let v: Vec<(FrameRole, FrameKind)> = frames
            .iter()
            .map(|(f, n)| {
                let k = super::super::frames::classify(f, 1);
                (frame_role(f, n, k), k)
            })
            .collect();
        StackRoles::of(v.into_iter())
    }

    #[test]
    fn closures_are_not_the_optimizer() {
        let l = "/x/site-packages/lightning/pytorch/";
        // Lightning 2.x: the model's forward inside the optimizer's step, through the closure.
        let fwd = stack(&[
            (&format!("{T}nn/modules/linear.py"), "forward"),
            (&format!("{T}nn/modules/module.py"), "_call_impl"),
            ("/home/u/gpt.py", "training_step"),
            (&format!("{l}strategies/strategy.py"), "training_step"),
            (&format!("{l}loops/optimization/automatic.py"), "closure"),
            (&format!("{l}loops/optimization/automatic.py"), "__call__"),
            (
                &format!("{l}plugins/precision/precision.py"),
                "_wrap_closure",
            ),
            (&format!("{T}optim/adamw.py"), "step"),
            (&format!("{T}optim/optimizer.py"), "wrapper"),
            (&format!("{l}core/optimizer.py"), "step"),
            ("/home/u/train.py", "<module>"),
        ]);
        assert_eq!(fwd.optimizer, OptimizerPart::Closure);
        assert!(!fwd.backward);
        // AdamW's state: made by the optimizer's own code.
        let state = stack(&[
            (&format!("{T}optim/adamw.py"), "_init_group"),
            (&format!("{T}optim/adamw.py"), "step"),
            (&format!("{T}optim/optimizer.py"), "wrapper"),
            (&format!("{l}core/optimizer.py"), "step"),
            ("/home/u/train.py", "<module>"),
        ]);
        assert_eq!(state.optimizer, OptimizerPart::Own);
        // LBFGS calling a user's closure, which runs the backward.
        let lbfgs = stack(&[
            (&format!("{T}autograd/__init__.py"), "backward"),
            (&format!("{T}_tensor.py"), "backward"),
            ("/home/u/fit.py", "f"),
            (&format!("{T}optim/lbfgs.py"), "_directional_evaluate"),
            (&format!("{T}optim/lbfgs.py"), "step"),
            ("/home/u/fit.py", "main"),
        ]);
        assert_eq!(lbfgs.optimizer, OptimizerPart::Closure);
        assert!(lbfgs.backward);
        // The foreach helpers the optimizer calls are torch's: still its own code.
        let foreach = stack(&[
            (
                &format!("{T}utils/_foreach_utils.py"),
                "_group_tensors_by_device_and_dtype",
            ),
            (&format!("{T}optim/adamw.py"), "_multi_tensor_adamw"),
            ("/home/u/fit.py", "main"),
        ]);
        assert_eq!(foreach.optimizer, OptimizerPart::Own);
        assert_eq!(
            stack(&[("/home/u/fit.py", "main")]).optimizer,
            OptimizerPart::Outside
        );
    }

    #[test]
    fn paths_are_components() {
        assert_eq!(
            under("torch/optim/adamw.py", "torch"),
            Some("optim/adamw.py")
        );
        assert_eq!(
            under("/h/pytorch/torch/optim/adamw.py", "torch"),
            Some("optim/adamw.py")
        );
        assert_eq!(under("/h/mytorch/optim/adamw.py", "torch"), None);
        assert_eq!(under("torchvision/ops.py", "torch"), None);
        // Bounded on hostile paths: one search, no recursion.
        let deep = "torch/".repeat(200_000) + "optim/x.py";
        assert_eq!(under(&deep, "torch"), Some("optim/x.py"));
        assert!(frame_role(
            "/x/site-packages/safetensors/torch.py",
            "load_file",
            Library
        )
        .contains(FrameRole::WEIGHT_LOADER));
        assert!(
            frame_role(&format!("{T}nn/modules/module.py"), "_apply", Torch)
                .contains(FrameRole::MODULE_APPLY | FrameRole::MODULE)
        );
        assert!(frame_role(
            "/x/site-packages/transformers/cache_utils.py",
            "update",
            Library
        )
        .contains(FrameRole::CACHE));
        assert!(
            !frame_role(&format!("{T}_inductor/codecache.py"), "load", Torch)
                .contains(FrameRole::CACHE)
        );
    }
}
