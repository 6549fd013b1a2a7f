//! Interned strings, frames and stacks, and the one rule for "whose code is this frame".
//!
//! Blame has to land on the user's line, not on `torch/nn/modules/module.py`. Snapshots mix
//! Python frames, C++ frames (`??`, `.cpp`, line 0) and interpreter internals in any order,
//! so the user frame is found by what the file is, never by its position in the stack.

use rustc_hash::FxHashMap as HashMap;

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
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    pub file: Sym,
    pub line: u32,
    pub name: Sym,
    pub kind: FrameKind,
}

/// Classifies a frame by its file name.
pub fn classify(file: &str, line: u32) -> FrameKind {
    let f = file;
    if f == "??" || f.is_empty() {
        return FrameKind::Native;
    }
    let lower_ext = f.rsplit('.').next().unwrap_or("");
    if matches!(
        lower_ext,
        "cpp" | "cc" | "cxx" | "c" | "h" | "hpp" | "cu" | "cuh" | "so"
    ) || (line == 0 && !f.ends_with(".py"))
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
        };
        s.stack_ids.insert(Vec::new(), StackId::EMPTY);
        s
    }

    pub fn intern_str(&mut self, s: &str) -> Sym {
        if let Some(&id) = self.string_ids.get(s) {
            return id;
        }
        let id = Sym(self.strings.len() as u32);
        self.strings.push(s.to_owned());
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
        self.frames.push(Frame {
            file: f,
            line,
            name: n,
            kind: classify(file, line),
        });
        self.frame_ids.insert((f, line, n), id);
        id
    }

    pub fn frame(&self, id: FrameId) -> &Frame {
        &self.frames[id.0 as usize]
    }

    pub fn intern_stack(&mut self, frames: &[FrameId]) -> StackId {
        if let Some(&id) = self.stack_ids.get(frames) {
            return id;
        }
        let id = StackId((self.stack_start.len() - 1) as u32);
        self.stack_frames.extend_from_slice(frames);
        self.stack_start.push(self.stack_frames.len() as u32);
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

    /// The innermost frame of the user's own code, if the stack has one.
    pub fn user_frame(&self, id: StackId) -> Option<&Frame> {
        self.frames(id)
            .iter()
            .map(|&f| self.frame(f))
            .find(|f| f.kind == FrameKind::User)
    }

    /// The innermost Python frame (any owner), the best site when no user frame exists.
    pub fn first_python_frame(&self, id: StackId) -> Option<&Frame> {
        self.frames(id)
            .iter()
            .map(|&f| self.frame(f))
            .find(|f| f.kind != FrameKind::Native)
    }

    /// The frame that names a stack for grouping and blame: the user's frame, else the innermost
    /// Python frame, else the innermost native frame that is not the allocator or the stack
    /// recording itself (with `stacks="all"`, every native stack starts `torch::unwind::unwind`,
    /// `CapturedTraceback::gather`, `CUDACachingAllocator::...malloc`).
    pub fn site_frame(&self, id: StackId) -> Option<&Frame> {
        self.user_frame(id)
            .or_else(|| self.first_python_frame(id))
            .or_else(|| {
                self.frames(id)
                    .iter()
                    .map(|&f| self.frame(f))
                    .find(|f| !is_recording_machinery(self.str(f.name)))
            })
            .or_else(|| self.frames(id).first().map(|&f| self.frame(f)))
    }

    /// `file:line function` of a frame.
    pub fn frame_label(&self, f: &Frame) -> String {
        format!("{}:{} {}", self.str(f.file), f.line, self.str(f.name))
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
