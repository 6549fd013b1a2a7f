//! A profiler trace as memscope reasons about it: memory events, steps, ops, Python frames and
//! the forward/backward links, with each op and allocation already placed in its Python stack.
//!
//! A Chrome trace is a flat list of timed spans; who-called-whom is only implied by time nesting
//! on one thread. Analyses ask "which op, which user line made this allocation" constantly, so
//! the nesting is resolved once here, when the trace is built, and stored as an enclosing op and
//! an interned [`StackId`] on every op and memory event.
//!
//! Frame kinds need a trace-specific rule: the profiler strips `sys.path` prefixes, so torch's
//! own frames read `torch/nn/modules/module.py` and the standard library's `typing.py`, which the
//! snapshot rule in [`classify`] would take for user code. [`trace_frame_kind`] refines it.

use rustc_hash::FxHashMap as HashMap;

use crate::model::frames::{classify, Frame, FrameId, FrameKind, StackId, Stacks, Sym};
use crate::model::roles::FrameRole;

mod passes;
pub mod phases;
use phases::Phase;

/// `Device Type` of CPU memory events (c10::DeviceType::CPU).
pub const DEVICE_TYPE_CPU: i64 = 0;
/// `Device Type` of CUDA memory events (c10::DeviceType::CUDA; ROCm reports CUDA too).
pub const DEVICE_TYPE_CUDA: i64 = 1;

/// A thread as the trace names it. String thread names (rare, metadata rows) get negative ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default, serde::Serialize)]
pub struct Tid(pub i64);

/// Index of an op in [`Trace::ops`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct OpIdx(pub u32);

/// Index of a step in [`Trace::steps`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct StepIdx(pub u32);

/// Index of a Python call in [`Trace::python`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct PyIdx(pub u32);

/// Which memory a `[memory]` event counts: `(Device Type, Device Id)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct DeviceKey {
    pub device_type: i64,
    pub device_id: i64,
}

impl DeviceKey {
    pub fn is_cuda(self) -> bool {
        self.device_type == DEVICE_TYPE_CUDA
    }
    /// `cuda:0`, `cpu`, or `type7:0` for device types memscope does not name.
    pub fn label(self) -> String {
        match self.device_type {
            DEVICE_TYPE_CPU => "cpu".into(),
            DEVICE_TYPE_CUDA => format!("cuda:{}", self.device_id),
            t => format!("type{t}:{}", self.device_id),
        }
    }
}

/// What a device's allocated totals count from.
///
/// A torch 1.9-era trace records each allocation's `Bytes` and no running total, so the loader
/// rebuilds the total as a running sum from 0 at the trace's first memory event: a change from a
/// level the trace never gives (what was allocated before profiling began). Every figure built on
/// such totals is a change, not bytes in use, and every view must say so: this is the one place
/// that fact is recorded.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum CountedFrom {
    /// The allocator's own totals (`Total Allocated`): bytes in use.
    #[default]
    Zero,
    /// Running sums of `Bytes` from 0 at the trace's start: changes since then.
    TraceStart,
}

/// The address of a `[memory]` event that carries none (torch 1.9-era traces record only `Bytes`).
pub const NO_ADDR: u64 = u64::MAX;

/// One `[memory]` instant event: an allocation (`bytes > 0`) or a free (`bytes < 0`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemEvent {
    /// Microseconds, in the trace's clock.
    pub ts: f64,
    pub tid: Tid,
    pub addr: u64,
    pub bytes: i64,
    /// The allocator's total after this event (`None` where the event did not say).
    pub total_allocated: Option<i64>,
    pub total_reserved: Option<i64>,
    pub device: DeviceKey,
    /// Innermost op running on the same thread at `ts`.
    pub op: Option<OpIdx>,
    /// Python stack on the same thread at `ts` (empty off the Python thread).
    pub stack: StackId,
}

/// A `ProfilerStep#N` span (the CPU `user_annotation`; the GPU copy is dropped).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Step {
    pub number: u64,
    pub name: String,
    pub ts: f64,
    pub dur: f64,
    pub tid: Tid,
}

impl Step {
    pub fn end(&self) -> f64 {
        self.ts + self.dur
    }
    pub fn contains(&self, ts: f64) -> bool {
        ts >= self.ts && ts <= self.end()
    }
}

/// A CPU op (`cpu_op`): an ATen operator, an autograd function, or a backward node's evaluation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Op {
    pub name: Sym,
    /// What the op is in autograd's machinery (a backward node, the engine evaluating one,
    /// `AccumulateGrad`), decided once per interned name.
    pub role: FrameRole,
    pub ts: f64,
    pub dur: f64,
    pub tid: Tid,
    /// Autograd `Sequence number`: recorded on ops run with grad mode on, and on backward ops
    /// (the number of the forward node they evaluate).
    pub seq: Option<i64>,
    /// `Fwd thread id`: on backward ops, the (profiler-internal) id of the thread that ran the forward.
    pub fwd_tid: Option<i64>,
    pub external_id: Option<i64>,
    /// Whether all tensor inputs are 0-dim (from `Input type`/`Input Dims`; `None` without shapes).
    pub scalar_inputs: Option<bool>,
    /// Innermost op enclosing this one on the same thread.
    pub parent: Option<OpIdx>,
    /// Python stack on the same thread at the op's start.
    pub stack: StackId,
}

impl Op {
    pub fn end(&self) -> f64 {
        self.ts + self.dur
    }
    /// Backward-pass work: a backward node's evaluation or `AccumulateGrad`.
    pub fn is_backward(&self) -> bool {
        self.role.intersects(FrameRole::BACKWARD)
    }
}

/// A `python_function` span: one Python call as the profiler's Python tracer saw it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PyCall {
    pub frame: FrameId,
    pub ts: f64,
    pub dur: f64,
    pub tid: Tid,
    pub python_id: Option<i64>,
    pub parent_id: Option<i64>,
    /// The call was already on the stack when the tracer started: its line is the line current
    /// at that moment (typically the `prof.step()` call), not the function's start nor any op's line.
    pub preexisting: bool,
}

impl PyCall {
    pub fn end(&self) -> f64 {
        self.ts + self.dur
    }
}

/// A `fwdbwd` flow resolved to its two ops: forward op `from`, backward op `to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FlowLink {
    pub id: i64,
    pub from: OpIdx,
    pub to: OpIdx,
}

/// A `record_function` range that is not a step (`Optimizer.step#AdamW.step`, user ranges).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Annotation {
    pub name: String,
    pub ts: f64,
    pub dur: f64,
    pub tid: Tid,
}

pub use super::frames::Site;

/// Counts of what the loader read, for the report's notes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TraceCounts {
    /// Entries of `traceEvents` read (kept or not).
    pub events: u64,
    /// Entries that were not valid events and were skipped.
    pub skipped: u64,
    /// Entries whose raw control characters inside strings were replaced to read them.
    pub repaired: u64,
    /// GPU copies of `ProfilerStep#N` dropped as duplicates.
    pub gpu_step_duplicates: u64,
    /// `[memory]` events with no `Total Allocated` whose total was rebuilt as the running sum of
    /// `Bytes` on their device (torch 1.9-era traces).
    pub reconstructed_totals: u64,
    /// `[memory]` events with no `Addr` (paired with their frees by size, not address).
    pub without_address: u64,
    /// Entries holding a lone UTF-16 surrogate escape (`\ud800`), read as U+FFFD.
    #[serde(skip)]
    pub lone_surrogates: u64,
}

/// A profiler trace, as loaded. Ops, memory events, Python calls and steps are sorted by time.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    pub stacks: Stacks,
    pub memory: Vec<MemEvent>,
    pub steps: Vec<Step>,
    pub ops: Vec<Op>,
    pub python: Vec<PyCall>,
    pub flows: Vec<FlowLink>,
    pub annotations: Vec<Annotation>,
    pub counts: TraceCounts,
    /// The file ended before the trace did (a run killed while writing).
    pub truncated: bool,
    /// Where the file ended (its length, in bytes of JSON text), when it ended before the trace
    /// did.
    pub cut_at_byte: Option<u64>,
    /// Things the loader had to guess, repair or skip.
    pub load_notes: Vec<super::LoadNote>,
    /// Devices whose allocated totals are running sums from the trace's start (no event before
    /// them carried a `Total Allocated` to anchor them): see [`CountedFrom`].
    pub totals_from_trace_start: Vec<DeviceKey>,
}

impl Trace {
    pub fn op(&self, i: OpIdx) -> &Op {
        &self.ops[i.0 as usize]
    }
    pub fn op_name(&self, i: OpIdx) -> &str {
        self.stacks.str(self.op(i).name)
    }
    pub fn step(&self, i: StepIdx) -> &Step {
        &self.steps[i.0 as usize]
    }
    /// The step whose span contains `ts` (steps do not overlap).
    pub fn step_at(&self, ts: f64) -> Option<StepIdx> {
        let i = self.steps.partition_point(|s| s.ts <= ts);
        let i = i.checked_sub(1)?;
        self.steps[i].contains(ts).then_some(StepIdx(i as u32))
    }
    /// What the allocated totals of `device` count from.
    pub fn counted_from(&self, device: DeviceKey) -> CountedFrom {
        if self.totals_from_trace_start.contains(&device) {
            CountedFrom::TraceStart
        } else {
            CountedFrom::Zero
        }
    }
    /// The devices that have memory events, in order.
    pub fn memory_devices(&self) -> Vec<DeviceKey> {
        let mut v: Vec<DeviceKey> = self.memory.iter().map(|m| m.device).collect();
        v.sort_unstable();
        v.dedup();
        v
    }
    /// Kind of a frame of this trace ([`trace_frame_kind`], not the snapshot rule).
    pub fn frame_kind(&self, f: &Frame) -> FrameKind {
        trace_frame_kind(self.stacks.str(f.file), f.line)
    }
    /// The innermost user frame of a stack.
    pub fn user_frame(&self, stack: StackId) -> Option<&Frame> {
        self.stacks
            .frames(stack)
            .iter()
            .map(|&f| self.stacks.frame(f))
            .find(|f| self.frame_kind(f) == FrameKind::User)
    }
    /// The innermost user frame's id.
    pub fn user_frame_id(&self, stack: StackId) -> Option<FrameId> {
        self.stacks
            .frames(stack)
            .iter()
            .copied()
            .find(|&f| self.frame_kind(self.stacks.frame(f)) == FrameKind::User)
    }
    /// The innermost user frame as a [`Site`].
    pub fn user_site(&self, stack: StackId) -> Option<Site> {
        self.user_frame(stack).map(|f| self.site(f))
    }
    pub fn site(&self, f: &Frame) -> Site {
        Site {
            file: self.stacks.str(f.file).to_owned(),
            line: f.line,
            function: self.stacks.str(f.name).to_owned(),
        }
    }
    /// Whether a frame of this stack with this identity was already running when tracing began.
    pub fn frame_preexisting(&self, frame: FrameId) -> bool {
        self.python
            .iter()
            .any(|p| p.frame == frame && p.preexisting)
    }
    /// The outermost op enclosing `i` (itself if it has no parent).
    pub fn top_op(&self, mut i: OpIdx) -> OpIdx {
        // Parents start strictly earlier or are longer, so the chain is finite; bound it anyway.
        for _ in 0..self.ops.len() {
            match self.op(i).parent {
                Some(p) => i = p,
                None => break,
            }
        }
        i
    }
}

/// Top-level names of the Python standard library (`sys.stdlib_module_names`, public part).
const STDLIB: &[&str] = &[
    "abc",
    "aifc",
    "argparse",
    "array",
    "ast",
    "asynchat",
    "asyncio",
    "asyncore",
    "atexit",
    "audioop",
    "base64",
    "bdb",
    "binascii",
    "bisect",
    "builtins",
    "bz2",
    "cProfile",
    "calendar",
    "cgi",
    "cgitb",
    "chunk",
    "cmath",
    "cmd",
    "code",
    "codecs",
    "codeop",
    "collections",
    "colorsys",
    "compileall",
    "concurrent",
    "configparser",
    "contextlib",
    "contextvars",
    "copy",
    "copyreg",
    "crypt",
    "csv",
    "ctypes",
    "curses",
    "dataclasses",
    "datetime",
    "dbm",
    "decimal",
    "difflib",
    "dis",
    "distutils",
    "doctest",
    "email",
    "encodings",
    "ensurepip",
    "enum",
    "errno",
    "faulthandler",
    "fcntl",
    "filecmp",
    "fileinput",
    "fnmatch",
    "fractions",
    "ftplib",
    "functools",
    "gc",
    "genericpath",
    "getopt",
    "getpass",
    "gettext",
    "glob",
    "graphlib",
    "grp",
    "gzip",
    "hashlib",
    "heapq",
    "hmac",
    "html",
    "http",
    "imaplib",
    "imghdr",
    "imp",
    "importlib",
    "inspect",
    "io",
    "ipaddress",
    "itertools",
    "json",
    "keyword",
    "lib2to3",
    "linecache",
    "locale",
    "logging",
    "lzma",
    "mailbox",
    "mailcap",
    "marshal",
    "math",
    "mimetypes",
    "mmap",
    "modulefinder",
    "multiprocessing",
    "netrc",
    "nntplib",
    "ntpath",
    "numbers",
    "opcode",
    "operator",
    "optparse",
    "os",
    "pathlib",
    "pdb",
    "pickle",
    "pickletools",
    "pipes",
    "pkgutil",
    "platform",
    "plistlib",
    "poplib",
    "posixpath",
    "pprint",
    "profile",
    "pstats",
    "pty",
    "pwd",
    "py_compile",
    "pyclbr",
    "pydoc",
    "queue",
    "quopri",
    "random",
    "re",
    "reprlib",
    "rlcompleter",
    "runpy",
    "sched",
    "secrets",
    "selectors",
    "shelve",
    "shlex",
    "shutil",
    "signal",
    "site",
    "smtplib",
    "socket",
    "socketserver",
    "sqlite3",
    "sre_compile",
    "sre_constants",
    "sre_parse",
    "ssl",
    "stat",
    "statistics",
    "string",
    "stringprep",
    "struct",
    "subprocess",
    "symtable",
    "sysconfig",
    "tarfile",
    "tempfile",
    "textwrap",
    "threading",
    "timeit",
    "tkinter",
    "token",
    "tokenize",
    "tomllib",
    "trace",
    "traceback",
    "tracemalloc",
    "types",
    "typing",
    "unittest",
    "urllib",
    "uuid",
    "venv",
    "warnings",
    "wave",
    "weakref",
    "wsgiref",
    "xml",
    "xmlrpc",
    "zipapp",
    "zipfile",
    "zipimport",
    "zoneinfo",
];

/// Installed packages commonly seen in training stacks (relative paths in traces).
const LIBRARIES: &[&str] = &[
    "numpy",
    "transformers",
    "accelerate",
    "deepspeed",
    "lightning",
    "pytorch_lightning",
    "lightning_fabric",
    "apex",
    "triton",
    "fairscale",
    "torchvision",
    "torchaudio",
    "torchtext",
    "torchrec",
    "fbgemm_gpu",
    "functorch",
    "timm",
    "diffusers",
    "datasets",
    "tokenizers",
    "huggingface_hub",
    "safetensors",
    "peft",
    "trl",
    "xformers",
    "flash_attn",
    "bitsandbytes",
    "einops",
    "tqdm",
    "scipy",
    "sklearn",
    "pandas",
    "PIL",
    "tensorboard",
    "wandb",
    "mlflow",
    "hydra",
    "omegaconf",
    "vllm",
    "sentencepiece",
    "typing_extensions",
    "packaging",
    "setuptools",
    "pkg_resources",
    "_pytest",
    "pytest",
    "IPython",
    "ipykernel",
    "tornado",
    "zmq",
    "yaml",
    "requests",
    "urllib3",
    "filelock",
    "fsspec",
    "sympy",
    "networkx",
    "jinja2",
];

/// Classifies a frame as the profiler writes it (paths relative to `sys.path` entries).
pub fn trace_frame_kind(file: &str, line: u32) -> FrameKind {
    let kind = classify(file, line);
    if kind != FrameKind::User || file.starts_with('<') || file.starts_with('/') {
        return kind;
    }
    let norm = file.replace('\\', "/");
    let first = norm.split('/').next().unwrap_or("");
    let top = if norm.contains('/') {
        first
    } else {
        first.strip_suffix(".py").unwrap_or(first)
    };
    if top == "torch" {
        return FrameKind::Torch;
    }
    if LIBRARIES.contains(&top) {
        return FrameKind::Library;
    }
    if STDLIB.contains(&top) {
        return FrameKind::Python;
    }
    kind
}

/// Splits a `python_function` name into `(file, line, function)`.
///
/// `scenarios.py(227): profile_loop` is the usual shape; built-ins read
/// `<built-in method item of Tensor object at 0x7f...>` (the address is dropped so that they
/// intern to one frame) and modules `nn.Module: Linear_0`.
pub fn parse_python_name(name: &str) -> (String, u32, String) {
    let (file, line, func) = python_name_parts(name);
    (file.to_owned(), line, func.to_owned())
}

/// [`parse_python_name`] without copying: the parts borrowed from `name`.
fn python_name_parts(name: &str) -> (&str, u32, &str) {
    if let Some(close) = memchr::memmem::find(name.as_bytes(), b"): ") {
        if let Some(open) = name[..close].rfind('(') {
            if let Ok(line) = name[open + 1..close].parse::<u32>() {
                return (&name[..open], line, &name[close + 3..]);
            }
        }
    }
    if let Some(rest) = name.strip_prefix('<') {
        let rest = rest.strip_suffix('>').unwrap_or(rest);
        let rest = match memchr::memmem::find(rest.as_bytes(), b" at 0x") {
            Some(i) => &rest[..i],
            None => rest,
        };
        return ("<built-in>", 0, rest);
    }
    if name.starts_with("nn.Module: ") {
        return ("<nn.Module>", 0, name);
    }
    ("<python>", 0, name)
}

/// An op as read from the file, before nesting is resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct OpRecord<'a> {
    pub name: &'a str,
    pub ts: f64,
    pub dur: f64,
    pub tid: Tid,
    pub seq: Option<i64>,
    pub fwd_tid: Option<i64>,
    pub external_id: Option<i64>,
    pub scalar_inputs: Option<bool>,
}

/// One end of a `fwdbwd` flow as read from the file.
#[derive(Clone, Copy, Debug, PartialEq)]
struct FlowEnd {
    id: i64,
    start: bool,
    tid: Tid,
    ts: f64,
}

/// Collects events in file order and resolves nesting, stacks and flows in [`TraceBuilder::build`].
#[derive(Debug, Default)]
pub struct TraceBuilder {
    trace: Trace,
    flow_ends: Vec<FlowEnd>,
    named_tids: HashMap<String, Tid>,
    step_numbers: HashMap<u64, usize>,
    /// Frames by the `python_function` name they were read from: a training loop repeats the
    /// same few thousand names, so most are one lookup instead of a split and two interns.
    python_frames: HashMap<Box<str>, FrameId>,
}

/// A stable sort whose scratch is 4 bytes per element (8 where it runs on several threads),
/// not half the slice (`sort_by`'s merge buffer: 480 MB for 10M memory events): the order is
/// found on `u32` indices (ties broken by index, so it is stable), then applied in place cycle
/// by cycle. An already sorted slice (the usual trace) costs one pass. A large slice's indices
/// are sorted on [`crate::threads::wanted`] threads (issue #43: the ops of a 9 GB trace took
/// about a second on one): the order of indices is total, so it is the same on any count.
pub fn sort_stable_small_scratch<T: Sync>(
    v: &mut [T],
    cmp: impl Fn(&T, &T) -> std::cmp::Ordering + Sync,
) {
    sort_stable_small_scratch_on(v, crate::threads::wanted(), cmp)
}

/// [`sort_stable_small_scratch`] on `threads` threads.
fn sort_stable_small_scratch_on<T: Sync>(
    v: &mut [T],
    threads: usize,
    cmp: impl Fn(&T, &T) -> std::cmp::Ordering + Sync,
) {
    use std::cmp::Ordering::Greater;
    if v.windows(2).all(|w| cmp(&w[0], &w[1]) != Greater) {
        return;
    }
    if v.len() >= u32::MAX as usize {
        v.sort_by(cmp);
        return;
    }
    let mut idx: Vec<u32> = (0..v.len() as u32).collect();
    {
        let shared: &[T] = v;
        let key = |a: &u32, b: &u32| cmp(&shared[*a as usize], &shared[*b as usize]).then(a.cmp(b));
        if threads > 1 && idx.len() >= PARALLEL_SORT_MIN {
            idx = sort_indices_parallel(idx, threads, &key);
        } else {
            idx.sort_unstable_by(key);
        }
    }
    // v[j] must become the old v[idx[j]]: follow each cycle, carrying the cycle's first element.
    const DONE: u32 = u32::MAX;
    for i in 0..idx.len() {
        if idx[i] == DONE {
            continue;
        }
        let mut j = i;
        loop {
            let k = idx[j] as usize;
            idx[j] = DONE;
            if k == i {
                break;
            }
            v.swap(j, k);
            j = k;
        }
    }
}

/// Slices shorter than this sort their indices on one thread.
const PARALLEL_SORT_MIN: usize = 1 << 16;

/// `idx` sorted by `key` (a total order) on `threads` threads: runs sorted side by side, then
/// merged pairwise, the pairs of a round side by side.
fn sort_indices_parallel<F>(mut idx: Vec<u32>, threads: usize, key: &F) -> Vec<u32>
where
    F: Fn(&u32, &u32) -> std::cmp::Ordering + Sync,
{
    let n = idx.len();
    let per = n.div_ceil(threads.max(1));
    std::thread::scope(|s| {
        for c in idx.chunks_mut(per) {
            crate::threads::spawn_or_run(s, move || c.sort_unstable_by(key));
        }
    });
    let mut bounds: Vec<usize> = (0..n).step_by(per).chain([n]).collect();
    let (mut src, mut dst) = (idx, vec![0u32; n]);
    while bounds.len() > 2 {
        let mut next = vec![0];
        std::thread::scope(|s| {
            let mut rest: &mut [u32] = &mut dst;
            // An odd run out has no partner: copied as it is.
            let odd = bounds
                .len()
                .is_multiple_of(2)
                .then(|| &bounds[bounds.len() - 2..]);
            for pair in bounds.windows(3).step_by(2).chain(odd) {
                let (lo, mid) = (pair[0], pair[1]);
                let hi = *pair.get(2).unwrap_or(&mid);
                let (out, r) = std::mem::take(&mut rest).split_at_mut(hi - lo);
                rest = r;
                let (a, b) = (&src[lo..mid], &src[mid..hi]);
                crate::threads::spawn_or_run(s, move || merge_indices(a, b, out, key));
                next.push(hi);
            }
        });
        bounds = next;
        std::mem::swap(&mut src, &mut dst);
    }
    src
}

/// `a` and `b` (each sorted by `key`) merged into `out`.
fn merge_indices<F>(a: &[u32], b: &[u32], out: &mut [u32], key: &F)
where
    F: Fn(&u32, &u32) -> std::cmp::Ordering,
{
    let (mut i, mut j) = (0, 0);
    for o in out.iter_mut() {
        let take_a =
            j >= b.len() || (i < a.len() && key(&a[i], &b[j]) != std::cmp::Ordering::Greater);
        if take_a {
            *o = a[i];
            i += 1;
        } else {
            *o = b[j];
            j += 1;
        }
    }
}

impl TraceBuilder {
    pub fn new() -> TraceBuilder {
        TraceBuilder::default()
    }

    /// A stable id for a thread the trace names by a string.
    pub fn named_tid(&mut self, name: &str) -> Tid {
        if let Some(&t) = self.named_tids.get(name) {
            return t;
        }
        let t = Tid(-1 - self.named_tids.len() as i64);
        self.named_tids.insert(name.to_owned(), t);
        t
    }

    pub fn counts_mut(&mut self) -> &mut TraceCounts {
        &mut self.trace.counts
    }

    /// The file ends at byte `at_byte` (its length), before the trace does.
    pub fn set_truncated(&mut self, at_byte: usize) {
        self.trace.truncated = true;
        self.trace.cut_at_byte = Some(at_byte as u64);
    }

    pub fn note(&mut self, note: super::LoadNote) {
        self.trace.load_notes.push(note);
    }

    pub fn add_op(&mut self, r: OpRecord<'_>) {
        let (name, role) = self.trace.stacks.intern_op(r.name);
        self.trace.ops.push(Op {
            name,
            role,
            ts: r.ts,
            dur: r.dur.max(0.0),
            tid: r.tid,
            seq: r.seq,
            fwd_tid: r.fwd_tid,
            external_id: r.external_id,
            scalar_inputs: r.scalar_inputs,
            parent: None,
            stack: StackId::EMPTY,
        });
    }

    /// The interned name and role of an op named `name`, as [`TraceBuilder::add_op`] gives it.
    pub fn intern_op(&mut self, name: &str) -> (Sym, FrameRole) {
        self.trace.stacks.intern_op(name)
    }

    /// The frame of a `python_function` named `name`, as [`TraceBuilder::add_python`] gives it.
    pub fn python_frame(&mut self, name: &str) -> FrameId {
        match self.python_frames.get(name) {
            Some(&f) => f,
            None => {
                let (file, line, func) = python_name_parts(name);
                let f = self.trace.stacks.intern_frame(file, line, func);
                self.python_frames.insert(name.into(), f);
                f
            }
        }
    }

    /// Moves ops, Python calls and memory events made elsewhere to the end of the trace's
    /// lists, in their order (the vectors are left empty; a list the trace does not have yet
    /// is taken whole, without a copy). Their
    /// names and frames must be this builder's ([`TraceBuilder::intern_op`],
    /// [`TraceBuilder::python_frame`]), their parents, stacks and ops unset, and durations not
    /// negative: what [`TraceBuilder::add_op`], [`TraceBuilder::add_python`] and
    /// [`TraceBuilder::add_memory`] push.
    pub fn append(
        &mut self,
        ops: &mut Vec<Op>,
        python: &mut Vec<PyCall>,
        memory: &mut Vec<MemEvent>,
    ) {
        fn moved<T>(all: &mut Vec<T>, part: &mut Vec<T>) {
            if all.is_empty() {
                std::mem::swap(all, part);
                part.clear();
            } else {
                all.append(part);
            }
        }
        moved(&mut self.trace.ops, ops);
        moved(&mut self.trace.python, python);
        moved(&mut self.trace.memory, memory);
    }

    pub fn add_python(
        &mut self,
        name: &str,
        ts: f64,
        dur: f64,
        tid: Tid,
        python_id: Option<i64>,
        parent_id: Option<i64>,
    ) {
        let frame = self.python_frame(name);
        self.trace.python.push(PyCall {
            frame,
            ts,
            dur: dur.max(0.0),
            tid,
            python_id,
            parent_id,
            preexisting: false,
        });
    }

    // The arguments are the `[memory]` event's own fields, one for one.
    #[allow(clippy::too_many_arguments)]
    pub fn add_memory(
        &mut self,
        ts: f64,
        tid: Tid,
        addr: u64,
        bytes: i64,
        total_allocated: Option<i64>,
        total_reserved: Option<i64>,
        device: DeviceKey,
    ) {
        self.trace.memory.push(MemEvent {
            ts,
            tid,
            addr,
            bytes,
            total_allocated,
            total_reserved,
            device,
            op: None,
            stack: StackId::EMPTY,
        });
    }

    /// Adds a `ProfilerStep#N`; a second span with the same number (the GPU copy) is dropped.
    pub fn add_step(&mut self, number: u64, name: &str, ts: f64, dur: f64, tid: Tid) {
        if self.step_numbers.contains_key(&number) {
            self.trace.counts.gpu_step_duplicates += 1;
            return;
        }
        self.step_numbers.insert(number, self.trace.steps.len());
        self.trace.steps.push(Step {
            number,
            name: crate::escape::one_line(name).into_owned(),
            ts,
            dur: dur.max(0.0),
            tid,
        });
    }

    pub fn add_annotation(&mut self, name: &str, ts: f64, dur: f64, tid: Tid) {
        self.trace.annotations.push(Annotation {
            name: crate::escape::one_line(name).into_owned(),
            ts,
            dur: dur.max(0.0),
            tid,
        });
    }

    pub fn add_flow_end(&mut self, id: i64, start: bool, tid: Tid, ts: f64) {
        self.flow_ends.push(FlowEnd { id, start, tid, ts });
    }

    /// Sorts, nests ops, gives ops and memory events their Python stacks, resolves flows, on
    /// as many threads as [`crate::threads::wanted`] gives.
    pub fn build(self) -> Trace {
        self.build_on(crate::threads::wanted())
    }

    /// [`TraceBuilder::build`] on `threads` threads (1: every pass in order on this one). The
    /// trace is the same on any count.
    pub fn build_on(self, threads: usize) -> Trace {
        let mut t = self.trace;
        let by_time_outer_first =
            |a: (f64, f64), b: (f64, f64)| a.0.total_cmp(&b.0).then_with(|| b.1.total_cmp(&a.1));
        // The three large lists sort side by side (issue #43: a 9 GB trace's sorts took
        // seconds on one core); each sort is deterministic, so the order is the same.
        let _build = Phase::start("build");
        let sorts = Phase::start("build.sorts");
        let (ops, python, memory) = (&mut t.ops, &mut t.python, &mut t.memory);
        crate::threads::join(
            threads,
            || {
                sort_stable_small_scratch_on(ops, threads, |a, b| {
                    by_time_outer_first((a.ts, a.dur), (b.ts, b.dur))
                })
            },
            || {
                crate::threads::join(
                    threads,
                    || {
                        sort_stable_small_scratch_on(python, threads, |a, b| {
                            by_time_outer_first((a.ts, a.dur), (b.ts, b.dur))
                        })
                    },
                    || sort_stable_small_scratch_on(memory, threads, |a, b| a.ts.total_cmp(&b.ts)),
                )
            },
        );
        sorts.end();
        let p = Phase::start("build.totals");
        reconstruct_totals(&mut t);
        sort_stable_small_scratch_on(&mut t.steps, threads, |a, b| a.ts.total_cmp(&b.ts));
        sort_stable_small_scratch_on(&mut t.annotations, threads, |a, b| {
            by_time_outer_first((a.ts, a.dur), (b.ts, b.dur))
        });
        p.end();
        passes::link(&mut t, &self.flow_ends, threads);
        t
    }
}

/// Where `[memory]` events carry no `Total Allocated` (torch 1.9-era traces), the total after each
/// is the running sum of `Bytes` on its device, counted from the trace's start (memory allocated
/// before it is not included) and re-anchored on any event that does carry a total. A device
/// whose sums start before any anchor counts from the trace's start ([`CountedFrom::TraceStart`]):
/// its totals are changes, and the trace says so in [`Trace::totals_from_trace_start`].
fn reconstruct_totals(t: &mut Trace) {
    // Per device: the running total, whether an event has given the allocator's own, and
    // whether the device is listed as counting from the trace's start (a trace may name 100k
    // devices: no search of the list per event).
    let mut running: HashMap<DeviceKey, (i64, bool, bool)> = HashMap::default();
    let mut rebuilt = 0u64;
    let mut no_addr = 0u64;
    let mut from_start: Vec<DeviceKey> = Vec::new();
    for m in &mut t.memory {
        let (r, anchored, listed) = running.entry(m.device).or_insert((0, false, false));
        *r = r.saturating_add(m.bytes);
        match m.total_allocated {
            Some(a) => {
                *r = a;
                *anchored = true;
            }
            None => {
                m.total_allocated = Some(*r);
                rebuilt += 1;
                if !*anchored && !*listed {
                    *listed = true;
                    from_start.push(m.device);
                }
            }
        }
        if m.addr == NO_ADDR {
            no_addr += 1;
        }
    }
    from_start.sort_unstable();
    t.totals_from_trace_start = from_start;
    t.counts.reconstructed_totals += rebuilt;
    t.counts.without_address += no_addr;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_scratch_sort_is_stable_and_sorts() {
        let mut x: u64 = 7;
        let mut v: Vec<(u32, u32)> = (0..5000)
            .map(|i| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((x >> 60) as u32, i)
            })
            .collect();
        let mut want = v.clone();
        want.sort_by_key(|p| p.0);
        sort_stable_small_scratch(&mut v, |a, b| a.0.cmp(&b.0));
        assert_eq!(v, want);
    }

    #[test]
    fn the_indices_sort_the_same_on_any_thread_count() {
        let mut x: u64 = 11;
        let v: Vec<u32> = (0..100_003)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 52) as u32
            })
            .collect();
        let key = |a: &u32, b: &u32| v[*a as usize].cmp(&v[*b as usize]).then(a.cmp(b));
        let mut want: Vec<u32> = (0..v.len() as u32).collect();
        want.sort_unstable_by(key);
        for threads in [2, 3, 4, 7, 16] {
            let idx: Vec<u32> = (0..v.len() as u32).collect();
            assert!(
                sort_indices_parallel(idx, threads, &key) == want,
                "{threads}"
            );
        }
        // Longer than the parallel threshold, through the public sort: stable.
        let mut w: Vec<(u32, usize)> = v.iter().enumerate().map(|(i, &k)| (k % 7, i)).collect();
        let mut stable = w.clone();
        stable.sort_by_key(|p| p.0);
        sort_stable_small_scratch(&mut w, |a, b| a.0.cmp(&b.0));
        assert_eq!(w, stable);
    }

    #[test]
    fn python_names() {
        assert_eq!(
            parse_python_name("scenarios.py(227): profile_loop"),
            ("scenarios.py".into(), 227, "profile_loop".into())
        );
        assert_eq!(
            parse_python_name("<built-in method item of Tensor object at 0x7f80158b85a0>"),
            (
                "<built-in>".into(),
                0,
                "built-in method item of Tensor object".into()
            )
        );
        assert_eq!(parse_python_name("nn.Module: Linear_0").0, "<nn.Module>");
        assert_eq!(parse_python_name("weird").0, "<python>");
        assert_eq!(
            parse_python_name("a (b)(3): f(x): g").0,
            "a (b)".to_string()
        );
    }

    #[test]
    fn trace_kinds() {
        assert_eq!(trace_frame_kind("scenarios.py", 227), FrameKind::User);
        assert_eq!(
            trace_frame_kind("torch/nn/modules/module.py", 1783),
            FrameKind::Torch
        );
        assert_eq!(trace_frame_kind("typing.py", 2154), FrameKind::Python);
        assert_eq!(
            trace_frame_kind("transformers/models/llama.py", 3),
            FrameKind::Library
        );
        assert_eq!(trace_frame_kind("<built-in>", 0), FrameKind::Native);
        assert_eq!(trace_frame_kind("myproj/train.py", 10), FrameKind::User);
    }

    #[test]
    fn nesting_and_stacks() {
        let mut b = TraceBuilder::new();
        let main = Tid(1);
        b.add_python("train.py(10): loop", 0.0, 100.0, main, Some(1), None);
        b.add_python("train.py(20): inner", 10.0, 20.0, main, Some(2), Some(1));
        b.add_op(OpRecord {
            name: "aten::linear",
            ts: 12.0,
            dur: 10.0,
            tid: main,
            seq: Some(5),
            fwd_tid: Some(0),
            external_id: None,
            scalar_inputs: None,
        });
        b.add_op(OpRecord {
            name: "aten::t",
            ts: 13.0,
            dur: 2.0,
            tid: main,
            seq: Some(5),
            fwd_tid: Some(0),
            external_id: None,
            scalar_inputs: None,
        });
        b.add_memory(
            14.0,
            main,
            64,
            512,
            Some(512),
            Some(2048),
            DeviceKey {
                device_type: 1,
                device_id: 0,
            },
        );
        b.add_step(3, "ProfilerStep#3", 5.0, 50.0, main);
        b.add_step(3, "ProfilerStep#3", 6.0, 50.0, Tid(7));
        let t = b.build();
        assert_eq!(t.steps.len(), 1);
        assert_eq!(t.counts.gpu_step_duplicates, 1);
        assert_eq!(t.ops[1].parent, Some(OpIdx(0)));
        assert_eq!(t.memory[0].op, Some(OpIdx(1)));
        let site = t.user_site(t.memory[0].stack).unwrap();
        assert_eq!(site.function, "inner");
        assert_eq!(t.stacks.frames(t.ops[0].stack).len(), 2);
        assert_eq!(t.step_at(30.0), Some(StepIdx(0)));
        assert_eq!(t.step_at(60.0), None);
        assert!(t.python[0].preexisting);
        assert!(!t.python[1].preexisting);
    }

    /// Totals rebuilt before any event gives one count from the trace's start; a device whose
    /// first event carries `Total Allocated` stays anchored, rebuilt or not.
    #[test]
    fn rebuilt_totals_count_from_the_trace_start_unless_anchored() {
        let (cuda0, cuda1) = (
            DeviceKey {
                device_type: DEVICE_TYPE_CUDA,
                device_id: 0,
            },
            DeviceKey {
                device_type: DEVICE_TYPE_CUDA,
                device_id: 1,
            },
        );
        let mut b = TraceBuilder::new();
        let tid = Tid(1);
        b.add_memory(1.0, tid, NO_ADDR, 512, None, None, cuda0);
        b.add_memory(2.0, tid, NO_ADDR, -1024, None, None, cuda0);
        b.add_memory(1.0, tid, 0x10, 256, Some(4096), Some(8192), cuda1);
        b.add_memory(2.0, tid, 0x20, 256, None, None, cuda1);
        let t = b.build();
        assert_eq!(t.counted_from(cuda0), CountedFrom::TraceStart);
        assert_eq!(t.counted_from(cuda1), CountedFrom::Zero);
        assert_eq!(t.totals_from_trace_start, [cuda0]);
        let totals: Vec<_> = t.memory.iter().map(|m| m.total_allocated).collect();
        assert_eq!(totals, [Some(512), Some(4096), Some(-512), Some(4352)]);
    }
}
