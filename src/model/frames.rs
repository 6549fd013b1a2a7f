//! Interned strings, frames and stacks, and the one rule for "whose code is this frame".
//!
//! Blame has to land on the user's line, not on `torch/nn/modules/module.py`. Snapshots mix
//! Python frames, C++ frames (`??`, `.cpp`, line 0) and interpreter internals in any order,
//! so the user frame is found by what the file is, never by its position in the stack.

use rustc_hash::FxHashMap as HashMap;

use super::roles::{frame_role, FrameRole, StackRoles};

/// A source location: the unit of blame, and a public JSON shape (`{file, line, function}`).
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct Site {
    pub file: String,
    pub line: u32,
    pub function: String,
}

impl std::fmt::Display for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{} in {}", self.file, self.line, self.function)
    }
}

/// An interned string.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sym(pub u32);

/// An interned frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FrameId(pub u32);

/// An interned stack (innermost frame first). `StackId::EMPTY` is the stack with no frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default, serde::Serialize)]
pub struct StackId(pub u32);

impl StackId {
    pub const EMPTY: StackId = StackId(0);
}

/// Whose code a frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FrameKind {
    /// The program's own Python code: where blame lands.
    User,
    /// PyTorch itself (Python under a `torch/` package).
    Torch,
    /// Other installed packages (`site-packages`, `dist-packages`).
    Library,
    /// The Python standard library and interpreter internals (`<frozen ...>`, `runpy.py`).
    Python,
    /// Native frames (C++, CUDA, unknown `??`).
    Native,
    /// Python that torch.compile wrote: inductor's output code (`/tmp/torchinductor_<user>/…/<hash>.py`,
    /// `call`) and FX GraphModule files (`fx_generated__<hash>.py`). Not the user's line: blame
    /// goes to the FX node's original source where the capture has it (`augment_with_fx_traces`),
    /// else to the nearest user frame outside.
    Generated,
}

/// Whether a file is code torch.compile generated (see [`FrameKind::Generated`]).
pub fn is_generated_file(file: &str) -> bool {
    let norm = file.replace('\\', "/");
    let base = norm.rsplit('/').next().unwrap_or(&norm);
    (base.starts_with("fx_generated_") && base.ends_with(".py"))
        || (norm.contains("/torchinductor_") && base.ends_with(".py"))
}

/// What `augment_with_fx_traces=True` adds to a frame of an FX-generated file (torch's
/// `torch/_utils.py` `_augment_frames`): the FX node the line runs, and the node's
/// `stack_trace`, the user source it was traced from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FxNode {
    /// `fx_node_op` (`call_function`, `call_module`, `output`, …).
    pub op: Option<Sym>,
    /// `fx_node_name` (`addmm`, `relu_1`).
    pub name: Sym,
    /// `fx_node_target` (`aten.addmm.default`).
    pub target: Option<Sym>,
    /// The innermost user frame of `fx_original_trace`, interned as a frame.
    pub origin: Option<FrameId>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    pub file: Sym,
    pub line: u32,
    pub name: Sym,
    pub kind: FrameKind,
    /// What the frame does in PyTorch's machinery, decided once when it was interned.
    pub role: FrameRole,
}

/// The innermost user frame of an FX node's `stack_trace` (`fx_original_trace`), which FX
/// writes as Python's `traceback.format_list` does, outermost first:
/// `  File "/x/model.py", line 12, in forward\n    a = self.net1(x)\n`. Lines that do not
/// read so are skipped; a trace with no user frame gives `None`. Linear in the text.
pub fn fx_trace_origin(trace: &str) -> Option<(&str, u32, &str)> {
    let mut found = None;
    for line in trace.lines() {
        let Some(rest) = line.trim_start().strip_prefix("File \"") else {
            continue;
        };
        let Some(q) = rest.find("\", line ") else {
            continue;
        };
        let (file, after) = (&rest[..q], &rest[q + "\", line ".len()..]);
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let Ok(n) = after[..digits].parse::<u32>() else {
            continue;
        };
        let func = after[digits..]
            .strip_prefix(", in ")
            .unwrap_or("")
            .trim_end();
        if classify(file, n) == FrameKind::User {
            found = Some((file, n, func));
        }
    }
    found
}

/// Whether a file is a binary the C++ unwinder names when it has no source line (torch's
/// `TORCH_SYMBOLIZE_MODE=fast`, `context="all"`): a versioned shared object (`libc.so.6`,
/// `libstdc++.so.6`) or the interpreter itself (`/usr/bin/python3.12`), with the code's offset
/// as the line. Neither extension test above sees them, and read as Python they became the
/// "user" frame of every request (`/usr/bin/python3.12:5775726`).
fn is_binary_image(file: &str) -> bool {
    let norm = file.replace('\\', "/");
    let base = norm.rsplit('/').next().unwrap_or(&norm);
    let interpreter = base.strip_prefix("python").is_some_and(|rest| {
        rest.bytes().all(|b| b.is_ascii_digit() || b == b'.') && !rest.ends_with('.')
    });
    base.contains(".so.") || (interpreter && norm.contains('/'))
}

/// Classifies a frame by its file name.
pub fn classify(file: &str, line: u32) -> FrameKind {
    let f = file;
    if f == "??" || f.is_empty() {
        return FrameKind::Native;
    }
    if is_generated_file(f) {
        return FrameKind::Generated;
    }
    let lower_ext = f.rsplit('.').next().unwrap_or("").to_ascii_lowercase();
    if matches!(
        lower_ext.as_str(),
        "cpp" | "cc" | "cxx" | "c" | "h" | "hpp" | "cu" | "cuh" | "so" | "s" | "asm"
    ) || (line == 0 && !f.ends_with(".py"))
        || f.contains("sysdeps/")
        || f.contains("nptl/")
        || is_binary_image(f)
    {
        return FrameKind::Native;
    }
    if f.starts_with('<') {
        // <frozen runpy>, <string>, <stdin>, <ipython-input-...>: only notebooks and -c are user code.
        if f.starts_with("<ipython-input") || f.starts_with("<stdin>") || f.starts_with("<string>")
        {
            return FrameKind::User;
        }
        return FrameKind::Python;
    }
    let norm = f.replace('\\', "/");
    let in_packages = norm.contains("/site-packages/") || norm.contains("/dist-packages/");
    if in_packages {
        if norm.contains("/site-packages/torch/") || norm.contains("/dist-packages/torch/") {
            return FrameKind::Torch;
        }
        return FrameKind::Library;
    }
    // A torch source checkout (`.../torch/nn/modules/module.py`) without site-packages.
    if norm.contains("/torch/nn/")
        || norm.contains("/torch/autograd/")
        || norm.contains("/torch/utils/")
        || norm.contains("/torch/_")
        || norm.contains("/torch/optim/")
        || norm.contains("/torch/cuda/")
        || norm.contains("/torch/distributed/")
        || norm.contains("/torch/amp/")
    {
        return FrameKind::Torch;
    }
    // The standard library: `/lib/python3.X/<module>.py` outside site-packages.
    if let Some(i) = norm.find("/lib/python") {
        let rest = &norm[i + "/lib/python".len()..];
        if rest.chars().next().is_some_and(|c| c.is_ascii_digit()) {
            return FrameKind::Python;
        }
    }
    FrameKind::User
}

/// Native frames that every recorded allocation passes through: they say nothing about who asked.
fn is_recording_machinery(name: &str) -> bool {
    name.starts_with("torch::unwind::")
        || name.starts_with("torch::CapturedTraceback::")
        || name.contains("gather_with_cpp")
        || name.contains("CUDACachingAllocator")
}

/// Native frames that turn a request into a tensor and route it to a kernel: the empty-tensor
/// factories (`at::detail::_empty_generic`, `empty_cuda`, `empty_strided_cuda`), the structured
/// kernels' output set-up, the dispatcher's wrappers and redispatches. Every tensor an operator
/// makes passes through them, so they name no operator; the operator's own entry
/// (`at::_ops::bmm::call`) or the autograd node that ran it does.
fn is_tensor_plumbing(file: &str, name: &str) -> bool {
    let file = file.rsplit(['/', '\\']).next().unwrap_or(file);
    file.starts_with("Register")
        || file.starts_with("VariableType")
        || file.starts_with("ADInplaceOrView")
        || file.starts_with("TraceType")
        || [
            "empty_generic",
            "empty_strided_generic",
            "at::detail::empty",
            "at::native::empty",
            "at::empty(",
            "at::_ops::empty",
            "at::_ops::new_empty",
            "at::native::new_empty",
            "create_out(",
            "set_output_raw_strided",
            "set_output_strided",
            "wrap_kernel_functor_unboxed_",
            "::redispatch(",
            "c10::Dispatcher::",
            "c10::impl::",
            "TensorIteratorBase::",
            "at::meta::",
            "torch::autograd::VariableType::",
            "wrapper_CUDA_",
            "torch::autograd::Node::operator()",
        ]
        .iter()
        .any(|p| name.contains(p))
}

/// Native frames of the C library, the C++ runtime and thread start-up (`__clone3` in glibc's
/// `sysdeps/.../clone3.S`, `start_thread`, `execute_native_thread_routine`): every thread starts
/// there, so they never say who asked for the memory.
fn is_runtime_start(file: &str, name: &str) -> bool {
    file.contains("sysdeps/")
        || file.contains("nptl/")
        || file.contains("libstdc++")
        || file.contains("/glibc")
        || file.contains("libc.so")
        || file.contains("libpthread")
        || [
            "__clone",
            "clone",
            "start_thread",
            "execute_native_thread_routine",
            "_start",
            "__libc_start",
            "std::thread::",
            "std::__invoke",
            "void std::__invoke",
        ]
        .iter()
        .any(|p| {
            name == *p || name.starts_with(&format!("{p}(")) || (p.len() > 6 && name.starts_with(p))
        })
}

/// Interned strings, frames and stacks for one snapshot or trace.
#[derive(Clone, Debug)]
pub struct Stacks {
    strings: Vec<String>,
    string_ids: HashMap<String, Sym>,
    frames: Vec<Frame>,
    frame_ids: HashMap<(Sym, u32, Sym), FrameId>,
    /// Stack `i` is `stack_frames[stack_start[i]..stack_start[i + 1]]`.
    stack_start: Vec<u32>,
    stack_frames: Vec<FrameId>,
    stack_ids: HashMap<Vec<FrameId>, StackId>,
    /// Per stack, what its frames' roles say together (decided when it was interned).
    stack_roles: Vec<StackRoles>,
    /// Roles of names interned as a trace's ops (see [`Stacks::intern_op`]).
    op_roles: HashMap<Sym, FrameRole>,
    /// FX node of frames in FX-generated files, where the capture has one (keyed by frame
    /// identity; the first one read wins).
    fx: HashMap<(Sym, u32, Sym), FxNode>,
}

impl Default for Stacks {
    fn default() -> Self {
        Self::new()
    }
}

impl Stacks {
    pub fn new() -> Stacks {
        let mut s = Stacks {
            strings: Vec::new(),
            string_ids: HashMap::default(),
            frames: Vec::new(),
            frame_ids: HashMap::default(),
            stack_start: vec![0, 0],
            stack_frames: Vec::new(),
            stack_ids: HashMap::default(),
            stack_roles: vec![StackRoles::default()],
            op_roles: HashMap::default(),
            fx: HashMap::default(),
        };
        s.stack_ids.insert(Vec::new(), StackId::EMPTY);
        s
    }

    pub fn intern_str(&mut self, s: &str) -> Sym {
        if let Some(&id) = self.string_ids.get(s) {
            return id;
        }
        let id = Sym(self.strings.len() as u32);
        // A name is one line in every output (see `crate::escape`).
        self.strings.push(crate::escape::one_line(s).into_owned());
        self.string_ids.insert(s.to_owned(), id);
        id
    }

    pub fn str(&self, s: Sym) -> &str {
        &self.strings[s.0 as usize]
    }

    pub fn intern_frame(&mut self, file: &str, line: u32, name: &str) -> FrameId {
        let f = self.intern_str(file);
        let n = self.intern_str(name);
        if let Some(&id) = self.frame_ids.get(&(f, line, n)) {
            return id;
        }
        let id = FrameId(self.frames.len() as u32);
        let kind = classify(file, line);
        self.frames.push(Frame {
            file: f,
            line,
            name: n,
            kind,
            role: frame_role(file, name, kind),
        });
        self.frame_ids.insert((f, line, n), id);
        id
    }

    pub fn frame(&self, id: FrameId) -> &Frame {
        &self.frames[id.0 as usize]
    }

    /// Records the FX node of frame `id` (the first one given wins).
    pub fn set_fx(&mut self, id: FrameId, node: FxNode) {
        let f = self.frames[id.0 as usize];
        self.fx.entry((f.file, f.line, f.name)).or_insert(node);
    }

    /// The FX node of a frame, where the capture has one.
    pub fn fx(&self, f: &Frame) -> Option<&FxNode> {
        if self.fx.is_empty() {
            return None;
        }
        self.fx.get(&(f.file, f.line, f.name))
    }

    /// Whether any frame carries an FX node.
    pub fn has_fx(&self) -> bool {
        !self.fx.is_empty()
    }

    pub fn intern_stack(&mut self, frames: &[FrameId]) -> StackId {
        if let Some(&id) = self.stack_ids.get(frames) {
            return id;
        }
        let id = StackId((self.stack_start.len() - 1) as u32);
        self.stack_frames.extend_from_slice(frames);
        self.stack_start.push(self.stack_frames.len() as u32);
        let roles = StackRoles::of(frames.iter().map(|&f| {
            let fr = &self.frames[f.0 as usize];
            (fr.role, fr.kind)
        }));
        self.stack_roles.push(roles);
        self.stack_ids.insert(frames.to_vec(), id);
        id
    }

    /// Frames of a stack, innermost first.
    pub fn frames(&self, id: StackId) -> &[FrameId] {
        let i = id.0 as usize;
        match (self.stack_start.get(i), self.stack_start.get(i + 1)) {
            (Some(&a), Some(&b)) => &self.stack_frames[a as usize..b as usize],
            _ => &[],
        }
    }

    pub fn stack_count(&self) -> usize {
        self.stack_start.len() - 1
    }

    /// The innermost frame of the user's own code, if the stack has one. A generated frame
    /// whose FX node names its original user source counts as that source's frame: the line
    /// of the model that the compiled code runs, more telling than the call of the model.
    pub fn user_frame(&self, id: StackId) -> Option<&Frame> {
        self.frames(id).iter().find_map(|&f| {
            let fr = self.frame(f);
            match fr.kind {
                FrameKind::User => Some(fr),
                FrameKind::Generated => self
                    .fx(fr)
                    .and_then(|n| n.origin)
                    .map(|o| self.frame(o))
                    .filter(|o| o.kind == FrameKind::User),
                _ => None,
            }
        })
    }

    /// The innermost Python frame (any owner), the best site when no user frame exists.
    pub fn first_python_frame(&self, id: StackId) -> Option<&Frame> {
        self.frames(id)
            .iter()
            .map(|&f| self.frame(f))
            .find(|f| f.kind != FrameKind::Native)
    }

    /// The frame that names a stack for grouping and blame: the user's frame, else the innermost
    /// Python frame, else the innermost native frame that is neither the allocator, the stack
    /// recording itself (with `stacks="all"`, every native stack starts `torch::unwind::unwind`,
    /// `CapturedTraceback::gather`, `CUDACachingAllocator::...malloc`), nor libc / thread start-up
    /// (`__clone3`, `start_thread`), which end every stack of a thread that is not Python's.
    ///
    /// Among native frames: the autograd node that allocated (`BmmBackward0::apply`), unless a
    /// cuBLAS workspace (`getNewWorkspace`) lies inside it; else the innermost frame past the
    /// allocator and the tensor plumbing of [`is_tensor_plumbing`] (an operator, a workspace); a
    /// stack cut short inside the plumbing is named by its outermost plumbing frame.
    pub fn site_frame(&self, id: StackId) -> Option<&Frame> {
        self.user_frame(id)
            .or_else(|| self.first_python_frame(id))
            .or_else(|| self.native_site_frame(id))
            .or_else(|| self.frames(id).first().map(|&f| self.frame(f)))
    }

    fn native_site_frame(&self, id: StackId) -> Option<&Frame> {
        let frames: Vec<&Frame> = self
            .frames(id)
            .iter()
            .map(|&f| self.frame(f))
            .filter(|f| {
                let name = self.str(f.name);
                !is_recording_machinery(name)
                    && !is_runtime_start(self.str(f.file), name)
                    && !name.is_empty()
            })
            .collect();
        let node = frames.iter().position(|f| {
            f.role
                .intersects(FrameRole::BACKWARD_NODE | FrameRole::ACCUMULATE_GRAD)
        });
        let first_meaningful = frames
            .iter()
            .position(|f| !is_tensor_plumbing(self.str(f.file), self.str(f.name)));
        let pick = match (first_meaningful, node) {
            // A named resource (a cuBLAS workspace) inside the node keeps its name.
            (Some(m), Some(n)) if m < n && self.str(frames[m].name).contains("Workspace") => {
                Some(m)
            }
            (_, Some(n)) => Some(n),
            (Some(m), None) => Some(m),
            (None, None) => frames.len().checked_sub(1),
        };
        pick.map(|i| frames[i])
    }

    /// What a stack's frames' roles say together: its place with the optimizer, whether it shows
    /// a backward (see [`StackRoles`]).
    pub fn roles(&self, id: StackId) -> StackRoles {
        self.stack_roles
            .get(id.0 as usize)
            .copied()
            .unwrap_or_default()
    }

    /// Whether a stack shows autograd's backward pass at work ([`StackRoles::backward`]).
    pub fn backward_evidence(&self, id: StackId) -> bool {
        self.roles(id).backward
    }

    /// Interns the name of a trace's op, with its role ([`super::roles::op_role`]) decided once
    /// per name.
    pub fn intern_op(&mut self, name: &str) -> (Sym, FrameRole) {
        let s = self.intern_str(name);
        let r = *self
            .op_roles
            .entry(s)
            .or_insert_with(|| super::roles::op_role(name));
        (s, r)
    }

    /// `file:line function` of a frame. Generated code says what it is instead of a
    /// temporary file's hash: the FX node and its original source where the capture has them
    /// (`FX addmm (aten.addmm.default) from model.py:12 forward`), else the kind of code.
    pub fn frame_label(&self, f: &Frame) -> String {
        if f.kind == FrameKind::Generated {
            return self.generated_label(f);
        }
        format!("{}:{} {}", self.str(f.file), f.line, self.str(f.name))
    }

    fn generated_label(&self, f: &Frame) -> String {
        let file = self.str(f.file);
        let base = file.rsplit(['/', '\\']).next().unwrap_or(file);
        // Hash names are long and say nothing: their first 20 characters find the file.
        let short: String = base.chars().take(20).collect();
        let short = if short.len() < base.len() {
            format!("{short}…")
        } else {
            short
        };
        match self.fx(f) {
            Some(n) => {
                let target = n
                    .target
                    .map(|t| format!(" ({})", self.str(t)))
                    .unwrap_or_default();
                let from = match n.origin.map(|o| self.frame(o)) {
                    Some(o) => format!("from {}:{} {}", self.str(o.file), o.line, self.str(o.name)),
                    None => format!("generated code {short}:{}", f.line),
                };
                format!("FX {}{target} {from}", self.str(n.name))
            }
            None if base.starts_with("fx_generated_") => {
                format!(
                    "FX graph (generated code {short}:{} {})",
                    f.line,
                    self.str(f.name)
                )
            }
            None => format!(
                "inductor kernel call (generated code {short}:{} {})",
                f.line,
                self.str(f.name)
            ),
        }
    }
}

/// A C++ function name for display: every template argument list collapsed to `<…>`, and a
/// parameter list too when the name is still long (`c10::impl::wrap_kernel_functor_unboxed_<…>::call(…)`).
/// Real stacks (`stacks="all"`) carry names of a thousand characters that say no more than that.
pub fn short_cpp(name: &str) -> String {
    let mut out = String::with_capacity(name.len().min(160));
    let mut depth = 0usize;
    for c in name.chars() {
        match c {
            // `operator<`, `operator<<`, `operator<=`: not a template.
            '<' if depth == 0 && out.ends_with("operator") => out.push(c),
            '<' if depth == 0 && out.ends_with("operator<") => out.push(c),
            '<' => {
                if depth == 0 {
                    out.push_str("<…>");
                }
                depth += 1;
            }
            '>' if depth > 0 => depth -= 1,
            _ if depth > 0 => {}
            _ => out.push(c),
        }
    }
    if depth > 0 {
        return name.to_owned(); // unbalanced: not a template list, shown as recorded
    }
    if out.chars().count() > 100 {
        if let Some(open) = out.find('(').filter(|&i| i > 0) {
            if out.ends_with(')') || out.ends_with(") const") {
                let tail = if out.ends_with(" const") {
                    " const"
                } else {
                    ""
                };
                out = format!("{}(…){tail}", &out[..open]);
            }
        }
    }
    out
}

/// A frame label (`file:line name`) for display: a C++ name (`::` in it) with its template
/// arguments collapsed ([`short_cpp`]); Python labels (`<module>`, `<genexpr>`) as they are.
pub fn short_label(label: &str) -> String {
    if label.contains("::") {
        short_cpp(label)
    } else {
        label.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_frames() {
        assert_eq!(classify("scenarios.py", 60), FrameKind::User);
        assert_eq!(classify("/home/u/proj/train.py", 10), FrameKind::User);
        assert_eq!(
            classify(
                "/opt/torch/.venv/lib/python3.12/site-packages/torch/nn/modules/linear.py",
                134
            ),
            FrameKind::Torch
        );
        assert_eq!(
            classify("/usr/lib/python3.10/site-packages/transformers/x.py", 3),
            FrameKind::Library
        );
        assert_eq!(
            classify("/home/u/.conda/envs/f/lib/python3.9/runpy.py", 87),
            FrameKind::Python
        );
        assert_eq!(classify("<frozen runpy>", 198), FrameKind::Python);
        assert_eq!(classify("??", 0), FrameKind::Native);
        assert_eq!(
            classify("/pytorch/c10/cuda/CUDACachingAllocator.cpp", 0),
            FrameKind::Native
        );
        assert_eq!(
            classify("./misc/../sysdeps/unix/sysv/linux/x86_64/clone3.S", 81),
            FrameKind::Native
        );
        assert_eq!(classify("./nptl/pthread_create.c", 442), FrameKind::Native);
        // `TORCH_SYMBOLIZE_MODE=fast`: binaries named with the code's offset as the line.
        assert_eq!(classify("/usr/bin/python3.12", 5775726), FrameKind::Native);
        assert_eq!(
            classify("/lib/x86_64-linux-gnu/libstdc++.so.6", 970163),
            FrameKind::Native
        );
        assert_eq!(
            classify("/lib/x86_64-linux-gnu/libc.so.6", 172489),
            FrameKind::Native
        );
        assert_eq!(classify("/home/u/python3.py", 4), FrameKind::User);
        assert_eq!(classify("/home/u/python_utils.py", 4), FrameKind::User);
    }

    #[test]
    fn function_apply_is_backward_only_without_a_python_caller() {
        let mut s = Stacks::new();
        let apply = "/x/site-packages/torch/autograd/function.py";
        let fwd = s.intern_frame("train.py", 7, "forward");
        let ap = s.intern_frame(apply, 596, "apply");
        let user = s.intern_frame("train.py", 20, "main");
        let forward = s.intern_stack(&[fwd, ap, user]);
        let bwd = s.intern_frame("train.py", 9, "backward");
        let ap2 = s.intern_frame(apply, 317, "apply");
        let backward = s.intern_stack(&[bwd, ap2]);
        assert!(!s.backward_evidence(forward));
        assert!(s.backward_evidence(backward));
    }

    #[test]
    fn native_sites_skip_libc_and_thread_start() {
        let mut s = Stacks::new();
        let fs = [
            s.intern_frame("??", 0, "torch::unwind::unwind()"),
            s.intern_frame(
                "CUDACachingAllocator.cpp",
                0,
                "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(int)",
            ),
            s.intern_frame("", 0, "at::cuda::getNewWorkspace()"),
            s.intern_frame("./nptl/pthread_create.c", 442, "start_thread"),
            s.intern_frame(
                "./misc/../sysdeps/unix/sysv/linux/x86_64/clone3.S",
                81,
                "__clone3",
            ),
        ];
        let id = s.intern_stack(&fs);
        assert_eq!(
            s.str(s.site_frame(id).unwrap().name),
            "at::cuda::getNewWorkspace()"
        );
        let only_start = s.intern_stack(&fs[3..]);
        // Nothing meaningful at all: the innermost frame, rather than nothing.
        assert_eq!(
            s.str(s.site_frame(only_start).unwrap().name),
            "start_thread"
        );
    }

    #[test]
    fn generated_code_is_not_the_users() {
        assert_eq!(
            classify("/tmp/torchinductor_root/6k/c6krnnrr.py", 195),
            FrameKind::Generated
        );
        assert_eq!(
            classify("fx_generated__fc5hljjztw5entvae7mhxawi.py", 17),
            FrameKind::Generated
        );
        let t = "  File \"/x/site-packages/torch/nn/modules/module.py\", line 1, in _call_impl\n    return f()\n  File \"/home/u/model.py\", line 12, in forward\n    a = self.net1(x)\n  File \"/x/site-packages/torch/nn/modules/linear.py\", line 134, in forward\n";
        assert_eq!(
            fx_trace_origin(t),
            Some(("/home/u/model.py", 12, "forward"))
        );
        assert_eq!(fx_trace_origin("garbage\nFile \"a.py\", line x"), None);
        let mut s = Stacks::new();
        let gen = s.intern_frame("fx_generated__abc.py", 17, "forward");
        let outer = s.intern_frame("train.py", 40, "main");
        let origin = s.intern_frame("/home/u/model.py", 12, "forward");
        let name = s.intern_str("addmm");
        let target = Some(s.intern_str("aten.addmm.default"));
        let id = s.intern_stack(&[gen, outer]);
        assert_eq!(s.str(s.user_frame(id).unwrap().file), "train.py");
        s.set_fx(
            gen,
            FxNode {
                op: None,
                name,
                target,
                origin: Some(origin),
            },
        );
        assert_eq!(s.str(s.user_frame(id).unwrap().file), "/home/u/model.py");
        assert_eq!(
            s.frame_label(s.frame(gen)),
            "FX addmm (aten.addmm.default) from /home/u/model.py:12 forward"
        );
    }

    #[test]
    fn stacks_intern_once() {
        let mut s = Stacks::new();
        let a = s.intern_frame("a.py", 1, "f");
        let b = s.intern_frame("/x/site-packages/torch/nn/modules/module.py", 2, "g");
        let s1 = s.intern_stack(&[b, a]);
        let s2 = s.intern_stack(&[b, a]);
        assert_eq!(s1, s2);
        assert_ne!(s1, StackId::EMPTY);
        assert_eq!(s.frames(s1), &[b, a]);
        assert_eq!(s.str(s.user_frame(s1).unwrap().file), "a.py");
        assert!(s.frames(StackId::EMPTY).is_empty());
    }
}
