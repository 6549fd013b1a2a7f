//! Live memory at the cursor as a tree: the user's line first, then the distinct stacks that
//! reach it, then their frames.
//!
//! A user asks "which of my lines holds this", then "through which call path"; library frames
//! (torch, site-packages, the interpreter) answer neither, so they are folded into one line
//! until asked for.

use std::collections::HashMap;

use crate::analysis::replay::State;
use crate::model::{BlockState, FrameKind, StackId, Stacks};

/// How the tree is ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortBy {
    Bytes,
    Count,
}

#[derive(Clone, Debug)]
pub struct StackNode {
    pub stack: StackId,
    pub bytes: u64,
    pub count: u64,
    /// The stack's user frames, innermost first, joined: the call path in the user's terms.
    pub label: String,
}

#[derive(Clone, Debug)]
pub struct SiteNode {
    /// `file:line function` of the site frame (or `(no stack)`).
    pub label: String,
    pub user: bool,
    pub bytes: u64,
    pub count: u64,
    pub stacks: Vec<StackNode>,
}

/// How the TUI names a site from its file, line and function: `file:line function`, except
/// where the capture knows no place (a C++ frame's `??` file, an empty one, line 0), which
/// would read `??:0 f` or `:0`: then the function alone (a C++ name with its template
/// arguments collapsed, [`short_cpp`]), or `unknown site` without one.
pub fn place_label(file: &str, line: u32, function: &str) -> String {
    let nowhere = (file.is_empty() || file == "??") && line == 0;
    match (nowhere, function.trim().is_empty()) {
        (false, _) => format!("{file}:{line} {function}"),
        (true, false) => short_cpp(function),
        (true, true) => "unknown site".to_owned(),
    }
}

/// A frame's label in the TUI: [`Stacks::frame_label`], or [`place_label`] where the frame has
/// no place.
pub fn frame_label(stacks: &Stacks, f: &crate::model::Frame) -> String {
    if f.kind == FrameKind::Generated {
        return stacks.frame_label(f);
    }
    place_label(stacks.str(f.file), f.line, stacks.str(f.name))
}

/// Groups the allocated blocks of a state by site, then by stack.
pub fn build(stacks: &Stacks, st: &State, sort: SortBy) -> Vec<SiteNode> {
    let mut by_stack: HashMap<StackId, (u64, u64)> = HashMap::new();
    for b in st
        .live_blocks()
        .filter(|b| b.state == BlockState::ActiveAllocated)
    {
        let e = by_stack.entry(b.stack).or_default();
        e.0 += b.size;
        e.1 += 1;
    }
    let mut sites: HashMap<String, SiteNode> = HashMap::new();
    for (s, (bytes, count)) in by_stack {
        let label = stacks
            .site_frame(s)
            .map(|f| frame_label(stacks, f))
            .unwrap_or_else(|| "(no stack)".to_owned());
        let user = stacks.user_frame(s).is_some();
        let path: Vec<String> = stacks
            .frames(s)
            .iter()
            .map(|&f| stacks.frame(f))
            .filter(|f| f.kind == FrameKind::User)
            .map(|f| format!("{}:{}", short(stacks.str(f.file)), f.line))
            .collect();
        let node = sites.entry(label.clone()).or_insert_with(|| SiteNode {
            label,
            user,
            bytes: 0,
            count: 0,
            stacks: Vec::new(),
        });
        node.bytes += bytes;
        node.count += count;
        node.stacks.push(StackNode {
            stack: s,
            bytes,
            count,
            label: if path.is_empty() {
                format!("stack #{} (no user frames)", s.0)
            } else {
                path.join(" < ")
            },
        });
    }
    let mut out: Vec<SiteNode> = sites.into_values().collect();
    for n in &mut out {
        disambiguate(stacks, &mut n.stacks);
    }
    let key = |bytes: u64, count: u64| match sort {
        SortBy::Bytes => (bytes, count),
        SortBy::Count => (count, bytes),
    };
    for n in &mut out {
        n.stacks.sort_by(|a, b| {
            key(b.bytes, b.count)
                .cmp(&key(a.bytes, a.count))
                .then(a.stack.cmp(&b.stack))
        });
    }
    out.sort_by(|a, b| {
        key(b.bytes, b.count)
            .cmp(&key(a.bytes, a.count))
            .then_with(|| a.label.cmp(&b.label))
    });
    out
}

/// Two stacks of a site can share their user frames and differ only in library frames: each
/// such label gets the first frame where its stack differs from the others, so no two children
/// of a site read the same.
fn disambiguate(stacks: &Stacks, nodes: &mut [StackNode]) {
    let mut by: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        by.entry(n.label.clone()).or_default().push(i);
    }
    for group in by.into_values().filter(|g| g.len() > 1) {
        let frames: Vec<&[crate::model::FrameId]> = group
            .iter()
            .map(|&i| stacks.frames(nodes[i].stack))
            .collect();
        for (k, &i) in group.iter().enumerate() {
            let fr = frames[k];
            let at = (0..fr.len().max(1)).find(|&j| {
                frames
                    .iter()
                    .enumerate()
                    .any(|(m, o)| m != k && o.get(j) != fr.get(j))
            });
            let extra = match at.and_then(|j| fr.get(j)) {
                Some(&f) => {
                    let f = stacks.frame(f);
                    format!(
                        "via {}:{} {}",
                        short(stacks.str(f.file)),
                        f.line,
                        stacks.str(f.name)
                    )
                }
                None => format!("stack #{}", nodes[i].stack.0),
            };
            // First, so that a narrow terminal cutting the label keeps what tells them apart.
            nodes[i].label = format!("{extra} · {}", nodes[i].label);
        }
    }
}

/// The file name without its directories.
pub fn short(file: &str) -> &str {
    file.rsplit(['/', '\\']).next().unwrap_or(file)
}

pub use crate::model::frames::short_cpp;

/// One visible line of the tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Row {
    Site(usize),
    Stack(usize, usize),
    /// A frame of a stack (site, stack, frame index in the stack).
    Frame(usize, usize, usize),
    /// `n` library frames folded (site, stack, first frame index, n).
    Folded(usize, usize, usize, usize),
}

/// Flattens the tree as expanded, folding runs of non-user frames unless `unfold`.
pub fn rows(
    tree: &[SiteNode],
    stacks: &Stacks,
    expanded_sites: &std::collections::HashSet<String>,
    expanded_stacks: &std::collections::HashSet<StackId>,
    unfold: bool,
) -> Vec<Row> {
    let mut out = Vec::new();
    for (si, s) in tree.iter().enumerate() {
        out.push(Row::Site(si));
        if !expanded_sites.contains(&s.label) {
            continue;
        }
        for (ki, k) in s.stacks.iter().enumerate() {
            out.push(Row::Stack(si, ki));
            if !expanded_stacks.contains(&k.stack) {
                continue;
            }
            let frames = stacks.frames(k.stack);
            let mut i = 0;
            while i < frames.len() {
                let user = stacks.frame(frames[i]).kind == FrameKind::User;
                if user || unfold {
                    out.push(Row::Frame(si, ki, i));
                    i += 1;
                    continue;
                }
                let start = i;
                while i < frames.len() && stacks.frame(frames[i]).kind != FrameKind::User {
                    i += 1;
                }
                out.push(Row::Folded(si, ki, start, i - start));
            }
        }
    }
    out
}

#[cfg(test)]
mod cpp_tests {
    use super::place_label;

    /// A site with no place says its function, or that it is unknown (issue 42: `??:0`, `:0`).
    #[test]
    fn a_site_without_a_place_says_its_function() {
        assert_eq!(place_label("train.py", 12, "step"), "train.py:12 step");
        assert_eq!(place_label("??", 0, "at::empty_cuda"), "at::empty_cuda");
        assert_eq!(place_label("", 0, ""), "unknown site");
        assert_eq!(place_label("??", 0, " "), "unknown site");
        assert_eq!(
            place_label(
                "??",
                0,
                "f(std::vector<at::Tensor, std::allocator<at::Tensor>>)"
            ),
            "f(std::vector<…>)"
        );
        // A line in an unnamed file is still a place.
        assert_eq!(place_label("", 3, "f"), ":3 f");
    }
    use super::short_cpp;

    #[test]
    fn templates_collapse_and_operators_stay() {
        assert_eq!(
            short_cpp("c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<A<B>, C>, D>::call(c10::OperatorKernel*)"),
            "c10::impl::wrap_kernel_functor_unboxed_<…>::call(c10::OperatorKernel*)"
        );
        assert_eq!(
            short_cpp("torch::unwind::unwind()"),
            "torch::unwind::unwind()"
        );
        assert_eq!(
            short_cpp("std::ostream& operator<<(std::ostream&, X const&)"),
            "std::ostream& operator<<(std::ostream&, X const&)"
        );
        assert_eq!(short_cpp("bool operator<(A, B)"), "bool operator<(A, B)");
        assert_eq!(short_cpp("a<b"), "a<b");
        let long = format!("ns::f<int>({})", vec!["int"; 40].join(", "));
        assert_eq!(short_cpp(&long), "ns::f<…>(…)");
    }
}
