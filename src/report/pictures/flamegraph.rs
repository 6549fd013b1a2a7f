//! Live memory as a flamegraph: width is bytes held, not samples taken.
//!
//! A table of sites says which line holds memory; a flamegraph shows how the calls above it
//! share it out, which is what a reader needs to see that 2 GiB of "activations" all hang off
//! one `model(x)` in a validation loop. The picture is drawn by `inferno` (the maintained Rust
//! port of flamegraph.pl) from the folded-stack text that every other flamegraph tool reads as
//! well, so `--folded` output and the SVG always agree. Colours carry the frame's owner: the
//! user's frames are warm and saturated because that is where a fix lands, PyTorch and other
//! libraries are dimmed greys, native frames are left out (they repeat the same allocator
//! internals under every stack and would only add height).

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};

use inferno::flamegraph::{self as fg, color::Color, Palette};

use crate::analysis::analyzed::Resolved;
use crate::analysis::categories::Classifier;
use crate::analysis::replay::State;
use crate::analysis::trace_report::LiveAt;
use crate::analysis::TraceProduct;
use crate::model::{BlockState, Device, FrameKind, Snapshot, StackId, Stacks};
use crate::report::{Options as RenderOptions, Render};

pub use crate::analysis::analyzed::At;

/// How frames are grouped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum By {
    /// The full Python stack of each block, outermost first.
    Stack,
    /// One frame per site (the first user frame): a flat picture of the top-sites table.
    Site,
    /// The inferred role (parameter, optimizer state, activation, ...) above the full stack.
    Category,
}

/// A moment in words: `the OOM (event 3654)`, `the end of the capture`.
pub fn moment_label(m: Resolved) -> String {
    match (m.asked, m.event) {
        (At::Peak, Some(e)) => format!("the allocated peak (event {})", e.0),
        (At::Peak, None) => "the end of the capture (no peak in the log)".into(),
        (At::Oom, Some(e)) => format!("the OOM (event {})", e.0),
        (At::Event(i), _) => format!("event {i}"),
        (At::End, _) | (At::Oom, None) => "the end of the capture".into(),
    }
}

/// Folded stacks of the live memory of one state.
#[derive(Clone, Debug, Default)]
pub struct Folded {
    /// `(frames outermost first joined by ';', bytes)`, sorted by stack text.
    pub lines: Vec<(String, u64)>,
    /// The owner of every frame label that appears, for colouring.
    pub kinds: HashMap<String, FrameKind>,
    pub total_bytes: u64,
}

/// Label of a frame as it appears in the graph: `function file.py:line` (short file name; the
/// full path would be truncated away in all but the widest frames).
fn frame_label(stacks: &Stacks, f: &crate::model::Frame) -> String {
    let file = stacks.str(f.file);
    let short = file.rsplit(['/', '\\']).next().unwrap_or(file);
    clean(&format!("{} {}:{}", stacks.str(f.name), short, f.line))
}

/// Folded format reserves `;` and the line's last space-separated field; keep labels one line.
fn clean(s: &str) -> String {
    s.replace(';', ":").replace(['\n', '\r'], " ")
}

const NO_PYTHON: &str = "[no Python frames]";

/// How many frames of one stack a flamegraph draws: the outermost and innermost halves of
/// this, with one `[N frames]` box between them. A crafted capture's 100k-frame stacks would
/// otherwise become gigabytes of folded text from a few megabytes of input.
pub const MAX_FLAME_DEPTH: usize = 512;

fn push_stack(
    stacks: &Stacks,
    id: StackId,
    out: &mut String,
    kinds: &mut HashMap<String, FrameKind>,
) {
    let frames: Vec<&crate::model::Frame> = stacks
        .frames(id)
        .iter()
        .rev()
        .map(|&fid| stacks.frame(fid))
        .filter(|f| f.kind != FrameKind::Native)
        .collect();
    let mut push = |l: String, kind: FrameKind, out: &mut String| {
        if !out.is_empty() {
            out.push(';');
        }
        out.push_str(&l);
        kinds.entry(l).or_insert(kind);
    };
    if frames.is_empty() {
        push(NO_PYTHON.into(), FrameKind::Native, out);
        return;
    }
    let half = MAX_FLAME_DEPTH / 2;
    let cut = frames.len() > MAX_FLAME_DEPTH;
    for (i, f) in frames.iter().enumerate() {
        if cut && i == half {
            push(
                format!("[{} frames]", frames.len() - 2 * half),
                FrameKind::Python,
                out,
            );
        }
        if cut && i >= half && i < frames.len() - half {
            continue;
        }
        push(frame_label(stacks, f), f.kind, out);
    }
}

/// Folds the allocated blocks of `state`.
/// Folds the live memory of `state`. `classifier` is the device's (from the analysis
/// product), used to put each block under its category for [`By::Category`].
pub fn fold(
    snap: &Snapshot,
    dev: &Device,
    state: &State,
    by: By,
    classifier: &Classifier,
) -> Folded {
    let stacks = &snap.stacks;
    let mut by_stack: HashMap<StackId, u64> = HashMap::new();
    let mut total = 0;
    for b in state
        .live_blocks()
        .filter(|b| b.state == BlockState::ActiveAllocated)
    {
        *by_stack.entry(b.stack).or_default() += b.size;
        total += b.size;
    }
    let mut kinds = HashMap::new();
    let mut acc: BTreeMap<String, u64> = BTreeMap::new();
    match by {
        By::Stack => {
            for (s, bytes) in by_stack {
                let mut line = String::new();
                push_stack(stacks, s, &mut line, &mut kinds);
                *acc.entry(line).or_default() += bytes;
            }
        }
        By::Site => {
            for (s, bytes) in by_stack {
                let (label, kind) = match stacks.site_frame(s) {
                    Some(f) if f.kind != FrameKind::Native => (frame_label(stacks, f), f.kind),
                    _ => (NO_PYTHON.to_string(), FrameKind::Native),
                };
                kinds.entry(label.clone()).or_insert(kind);
                *acc.entry(label).or_default() += bytes;
            }
        }
        By::Category => {
            let mut c = classifier.clone();
            let mut per: HashMap<(&'static str, StackId), u64> = HashMap::new();
            for b in state
                .live_blocks()
                .filter(|b| b.state == BlockState::ActiveAllocated)
            {
                let (cat, _) = c.classify(snap, dev, b);
                *per.entry((cat.name(), b.stack)).or_default() += b.size;
            }
            for ((cat, s), bytes) in per {
                let mut line = String::from(cat);
                kinds.entry(cat.to_string()).or_insert(FrameKind::Python);
                push_stack(stacks, s, &mut line, &mut kinds);
                *acc.entry(line).or_default() += bytes;
            }
        }
    }
    Folded {
        lines: acc.into_iter().filter(|(_, b)| *b > 0).collect(),
        kinds,
        total_bytes: total,
    }
}

/// The folded-stack text (`frame;frame;frame bytes`, outermost first), `flamegraph --folded`.
/// It is text a person may print, so it goes through the terminal boundary
/// ([`crate::escape::TermWriter`]): a name cannot command the terminal it is printed on.
pub struct Lines;

impl Render<Folded> for Lines {
    fn render(&self, f: &Folded, _opts: &RenderOptions, out: &mut dyn Write) -> io::Result<()> {
        let mut t = crate::escape::TermWriter::new(out, false);
        for (stack, bytes) in &f.lines {
            writeln!(t, "{stack} {bytes}")?;
        }
        t.flush()
    }
}

/// Colour of a frame by its owner: the user's code stands out, everything else recedes.
pub fn color_for(kind: FrameKind, label: &str) -> Color {
    // A small per-label variation keeps neighbouring frames of one owner distinguishable.
    let h = label
        .bytes()
        .fold(0u32, |a, b| a.wrapping_mul(31).wrapping_add(b as u32));
    let v = (h % 24) as u8;
    match kind {
        FrameKind::User => Color {
            r: 230,
            g: 90 + v * 2,
            b: 30 + v,
        },
        FrameKind::Torch => Color {
            r: 190 + v,
            g: 195 + v,
            b: 205 + v,
        },
        FrameKind::Library => Color {
            r: 200 + v,
            g: 200 + v,
            b: 185 + v,
        },
        FrameKind::Python => Color {
            r: 215 + v,
            g: 215 + v,
            b: 215 + v,
        },
        FrameKind::Generated => Color {
            r: 150 + v,
            g: 190 + v,
            b: 150 + v,
        },
        FrameKind::Native => Color {
            r: 170 + v,
            g: 180 + v,
            b: 200 + v,
        },
    }
}

/// The SVG picture, drawn by inferno, with what it is drawn with.
#[derive(Clone, Debug)]
pub struct Svg {
    pub title: String,
    pub subtitle: Option<String>,
    /// Leave out inferno's script (for embedding in a page: tooltips still work).
    pub no_javascript: bool,
    pub width: Option<usize>,
}

/// Draws the folded stacks with inferno. Counts are shown in KiB (binary units).
impl Render<Folded> for Svg {
    fn render(&self, f: &Folded, _opts: &RenderOptions, out: &mut dyn Write) -> io::Result<()> {
        write_svg(f, self, out)
    }
}

fn write_svg(f: &Folded, o: &Svg, out: &mut dyn Write) -> io::Result<()> {
    let mut palette = fg::color::PaletteMap::default();
    for (label, &kind) in &f.kinds {
        palette.insert(label, color_for(kind, label));
    }
    let mut opt = fg::Options::default();
    opt.title = o.title.clone();
    opt.subtitle = o.subtitle.clone();
    opt.count_name = "KiB".into();
    opt.name_type = "Frame:".into();
    opt.factor = 1.0 / 1024.0;
    opt.colors = Palette::Basic(fg::color::BasicPalette::Aqua);
    opt.palette_map = Some(&mut palette);
    opt.no_javascript = o.no_javascript;
    opt.image_width = o.width;
    opt.min_width = 0.5;
    opt.deterministic = true;
    // Labels are `function file.py:line`: a frame too narrow for all of it keeps the function
    // name and loses the end, in the static text and in the script's redraw after a zoom
    // (inferno's default cuts from the left, which leaves `..sformer.py:22`).
    opt.text_truncate_direction = fg::TextTruncateDirection::Right;
    if f.lines.is_empty() {
        // inferno refuses an empty profile; draw a note instead of failing.
        return write_note_svg("no allocated memory at this moment", out);
    }
    let lines: Vec<String> = f.lines.iter().map(|(s, b)| format!("{s} {b}")).collect();
    fg::from_lines(&mut opt, lines.iter().map(|s| s.as_str()), out)
}

/// An SVG holding one line of text: the flamegraph of nothing (no live memory, no device), so
/// that `flamegraph` succeeds wherever `report` and `export` do. The note is the program's own
/// text, never the capture's.
pub struct NoteSvg;

impl Render<str> for NoteSvg {
    fn render(&self, note: &str, _opts: &RenderOptions, out: &mut dyn Write) -> io::Result<()> {
        write_note_svg(note, out)
    }
}

fn write_note_svg(note: &str, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="600" height="40"><text x="10" y="25" font-family="sans-serif" font-size="14">{note}</text></svg>"#
    )
}

/// The frames a trace's allocation is drawn under: its Python stack outermost first (for
/// backward work the forward's, as the leak search reads it), then its ops from the outermost
/// (`aten::linear`, `autograd::engine::evaluate_function: AddmmBackward0`) to the innermost.
fn trace_line(p: &TraceProduct, i: usize, kinds: &mut HashMap<String, FrameKind>) -> String {
    let t = &p.trace;
    let mut out = String::new();
    let mut push = |l: String, kind: FrameKind, out: &mut String| {
        if !out.is_empty() {
            out.push(';');
        }
        out.push_str(&l);
        kinds.entry(l).or_insert(kind);
    };
    let frames: Vec<&crate::model::Frame> = t
        .stacks
        .frames(p.stack_of_event(i))
        .iter()
        .rev()
        .map(|&f| t.stacks.frame(f))
        .filter(|f| t.frame_kind(f) != FrameKind::Native)
        .collect();
    let half = MAX_FLAME_DEPTH / 2;
    for (k, f) in frames.iter().enumerate() {
        if frames.len() > MAX_FLAME_DEPTH && k >= half && k < frames.len() - half {
            if k == half {
                let n = frames.len() - 2 * half;
                push(format!("[{n} frames]"), FrameKind::Python, &mut out);
            }
            continue;
        }
        push(frame_label(&t.stacks, f), t.frame_kind(f), &mut out);
    }
    let mut ops = Vec::new();
    let mut cur = t.memory[i].op;
    while let Some(o) = cur {
        if ops.len() >= MAX_FLAME_DEPTH {
            break;
        }
        ops.push(o);
        cur = t.op(o).parent;
    }
    if frames.is_empty() && ops.is_empty() {
        push(NO_PYTHON.into(), FrameKind::Native, &mut out);
    }
    for o in ops.iter().rev() {
        push(clean(t.op_name(*o)), FrameKind::Native, &mut out);
    }
    out
}

/// A box for what was in use at the moment but allocated before the profiler started: the
/// trace holds no stack for it.
pub const BEFORE_TRACE: &str = "[allocated before the trace began]";

/// Folds the live memory of a trace's device at a moment ([`TraceProduct::live_at`]).
pub fn fold_trace(p: &TraceProduct, live: &LiveAt, by: By) -> Folded {
    let t = &p.trace;
    let mut kinds = HashMap::new();
    let mut acc: BTreeMap<String, u64> = BTreeMap::new();
    for &i in &live.live {
        let bytes = t.memory[i].bytes.max(0) as u64;
        let line = match by {
            By::Site => {
                let stack = p.stack_of_event(i);
                match t.user_frame(stack) {
                    Some(f) => {
                        let l = frame_label(&t.stacks, f);
                        kinds.entry(l.clone()).or_insert(FrameKind::User);
                        l
                    }
                    None => {
                        kinds.insert(NO_PYTHON.into(), FrameKind::Native);
                        NO_PYTHON.into()
                    }
                }
            }
            // A trace has no categories: the op stack is the finest grouping it has.
            By::Stack | By::Category => trace_line(p, i, &mut kinds),
        };
        *acc.entry(line).or_default() += bytes;
    }
    let before = live.before_trace_bytes.unwrap_or(0);
    if before > 0 {
        kinds.insert(BEFORE_TRACE.into(), FrameKind::Python);
        acc.insert(BEFORE_TRACE.into(), before);
    }
    Folded {
        lines: acc.into_iter().filter(|(_, b)| *b > 0).collect(),
        kinds,
        total_bytes: live.live_bytes + before,
    }
}
