//! Live memory grouped by the line of user code that allocated it.
//!
//! "What held the memory" is only actionable as a line in the user's program: thousands of
//! blocks from `linear.py:134` are one finding, `train.py:60 out = model(x)`. Blocks are grouped
//! by their site frame (the first user frame of the stack), while the heaviest full stack of
//! each group is kept for `--stacks`. Blocks allocated before the log began are grouped apart
//! (`before_recording`): their site is their own stack where the snapshot kept one, and nothing
//! about them can be blamed on the recorded run.
//!
//! A block with no stack at all is the hard case: it was allocated before stacks were recorded,
//! or by a thread whose stacks hold no Python frame (autograd's engine thread when only Python
//! stacks are recorded). [`FramelessEvidence`] decides which from the whole capture; the rule is
//! written down in docs/how-it-decides.md.

use rustc_hash::FxHashMap as HashMap;

use crate::model::{Action, BlockState, Device, Frame, FrameKind, StackId, Stacks};

pub use crate::model::Site;

impl Site {
    pub fn from_frame(stacks: &Stacks, f: &Frame) -> Site {
        Site {
            file: stacks.str(f.file).to_owned(),
            line: f.line,
            function: stacks.str(f.name).to_owned(),
        }
    }

    /// The site of a stack: its first user frame, else its innermost Python frame.
    pub fn of_stack(stacks: &Stacks, s: StackId) -> Option<Site> {
        stacks.site_frame(s).map(|f| Site::from_frame(stacks, f))
    }

    /// The file name without its directories, for narrow displays.
    pub fn short_file(&self) -> &str {
        self.file.rsplit(['/', '\\']).next().unwrap_or(&self.file)
    }
}

/// Where the blocks of a site row came from, as far as the capture can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// Allocated while recording: by the stack they carry, or in the log by a thread that
    /// records no Python frame.
    Recorded,
    /// Allocated before recording began (no stack), or before the log's first entry (their own
    /// stack kept).
    BeforeRecording,
    /// No stack, and the capture cannot tell whether they were allocated before recording began
    /// or by a thread that records no Python frame (autograd's engine, with Python-only stacks).
    BeforeRecordingOrOffThread,
    /// Freed by the program and waiting for another stream's work (`record_stream`): still
    /// reserved for the block, no longer the program's.
    PendingFree,
}

/// What the whole capture says about blocks that carry no stack at all.
///
/// A block with no frames was allocated either before stacks were recorded or by a thread
/// with no Python frame while only Python stacks were recorded (`stacks="python"`; autograd's
/// engine thread runs every backward there). Three facts separate the two:
/// - `native_frames`: some stack holds C++ frames (`stacks="all"`). Every thread's allocations
///   then carry C++ frames, the engine's included, so a block with none predates recording.
/// - `backward`: some stack shows a backward pass. With none anywhere, the engine never ran
///   while stacks were recorded, so it made none of the stackless blocks.
/// - `unlogged_stacks`: a block alive at the dump, allocated before the log's first entry,
///   keeps its own stack: stacks were being recorded before the log begins (the ring buffer
///   dropped its oldest entries), so the log's start is not where recording began. Without
///   one, the log starts where recording did. Snapshots with no log have no such start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct FramelessEvidence {
    pub native_frames: bool,
    pub backward: bool,
    /// The device's log records allocations (an alloc, a segment, an OOM).
    pub has_log: bool,
    pub unlogged_stacks: bool,
    /// A block alive at the dump, allocated before the log's first entry, has no stack.
    pub unlogged_stackless: bool,
}

impl FramelessEvidence {
    pub fn of(stacks: &Stacks, dev: &Device) -> FramelessEvidence {
        let mut native_frames = false;
        let mut backward = false;
        for i in 0..stacks.stack_count() {
            let s = StackId(i as u32);
            native_frames = native_frames
                || stacks
                    .frames(s)
                    .iter()
                    .any(|&f| stacks.frame(f).kind == FrameKind::Native);
            backward = backward || stacks.backward_evidence(s);
            if native_frames && backward {
                break;
            }
        }
        let has_log = dev.events.iter().any(|e| {
            matches!(
                e.action,
                Action::Alloc | Action::SegmentAlloc | Action::SegmentMap | Action::Oom
            )
        });
        let logged = live_allocated_in_log(dev);
        let (mut unlogged_stacks, mut unlogged_stackless) = (false, false);
        for b in dev
            .segments
            .iter()
            .flat_map(|s| s.blocks.iter())
            .filter(|b| b.state == BlockState::ActiveAllocated && !logged.contains(&b.address))
        {
            if stacks.frames(b.stack).is_empty() {
                unlogged_stackless = true;
            } else {
                unlogged_stacks = true;
            }
        }
        FramelessEvidence {
            native_frames,
            backward,
            has_log,
            unlogged_stacks,
            unlogged_stackless,
        }
    }

    /// The origin of a block with no stack that no event of the log allocated.
    pub fn stackless_unlogged(&self) -> Origin {
        if self.native_frames || !self.backward || (self.has_log && !self.unlogged_stacks) {
            Origin::BeforeRecording
        } else {
            Origin::BeforeRecordingOrOffThread
        }
    }

    /// Why [`Self::stackless_unlogged`] decided as it did, in words.
    pub fn reason(&self) -> &'static str {
        if self.native_frames {
            "other stacks of the capture carry C++ frames (stacks=\"all\"), which every thread records, autograd's engine included: a block with none was allocated before stacks were recorded"
        } else if !self.backward {
            "no stack of the capture shows a backward pass, so autograd's engine thread (the usual allocator with no Python frame) never ran while stacks were recorded"
        } else if self.has_log && !self.unlogged_stacks {
            "no block from before the log keeps a stack of its own, so the log starts where recording began"
        } else {
            "only Python stacks were recorded and a backward ran: autograd's engine thread records no Python frame, so a block with no stack may be its work or predate recording"
        }
    }
}

/// The origin of one block of the dump, from whether the log allocated it and its stack.
pub fn origin_at_dump(
    stacks: &Stacks,
    ev: &FramelessEvidence,
    state: BlockState,
    stack: StackId,
    logged: bool,
) -> Origin {
    if state == BlockState::ActivePendingFree {
        Origin::PendingFree
    } else if logged {
        Origin::Recorded
    } else if stacks.frames(stack).is_empty() {
        ev.stackless_unlogged()
    } else if ev.has_log {
        Origin::BeforeRecording
    } else {
        // No log: a block with a stack was allocated while stacks were recorded.
        Origin::Recorded
    }
}

/// The origin of an allocated block of a replayed state (the peak, an OOM): `logged` when the
/// log holds its allocation.
pub fn origin_replayed(
    stacks: &Stacks,
    ev: &FramelessEvidence,
    stack: StackId,
    logged: bool,
) -> Origin {
    if logged {
        Origin::Recorded
    } else if stacks.frames(stack).is_empty() {
        ev.stackless_unlogged()
    } else {
        Origin::BeforeRecording
    }
}

/// Live bytes of one site.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SiteTotal {
    /// `None` for blocks with no recorded stack.
    pub site: Option<Site>,
    pub bytes: u64,
    pub blocks: u64,
    /// Whether the site is the user's own code (else the innermost library frame).
    pub user_code: bool,
    /// The blocks were allocated before the log's first entry (before recording began, or
    /// dropped from the ring buffer): `site` is then their own recorded stack, if any.
    /// The same as `origin == before_recording`.
    pub before_recording: bool,
    /// Where the blocks came from (see [`Origin`]).
    pub origin: Origin,
    /// The stack holding the most bytes of this site, innermost frame first (`file:line function`;
    /// serialized as its lines).
    pub stack: StackLabels,
    #[serde(skip)]
    pub stack_id: StackId,
}

/// How many frames of a site's heaviest stack are spelled out in [`SiteTotal::stack`]: what a
/// person reads, and a bound on the strings made per site (a crafted capture's stacks may be
/// 100k frames deep; grouping works on interned ids, never on these strings).
pub const MAX_STACK_LABELS: usize = 512;

/// The first [`MAX_STACK_LABELS`] frames of a stack as `file:line function`, and how many more
/// it has (`crate::wording::stack_lines` says them: the frames, then a line for the rest).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StackLabels {
    pub frames: Vec<String>,
    /// Frames past the first [`MAX_STACK_LABELS`], not spelled out.
    pub more: usize,
}

impl StackLabels {
    /// The labels of `s`'s frames, at most [`MAX_STACK_LABELS`] of them.
    fn of(stacks: &Stacks, s: StackId) -> StackLabels {
        let frames = stacks.frames(s);
        StackLabels {
            frames: frames
                .iter()
                .take(MAX_STACK_LABELS)
                .map(|&f| stacks.frame_label(stacks.frame(f)))
                .collect(),
            more: frames.len().saturating_sub(MAX_STACK_LABELS),
        }
    }
}

/// Groups `(stack, bytes)` items by site, largest first.
pub fn group<I>(stacks: &Stacks, items: I) -> Vec<SiteTotal>
where
    I: IntoIterator<Item = (StackId, u64)>,
{
    group_marked(
        stacks,
        items.into_iter().map(|(s, b)| (s, b, Origin::Recorded)),
    )
}

/// Groups `(stack, bytes, origin)` items by site, largest first; blocks of different origins
/// (from before the log, freed and pending) never share a row with blocks of the same site
/// allocated in it.
pub fn group_marked<I>(stacks: &Stacks, items: I) -> Vec<SiteTotal>
where
    I: IntoIterator<Item = (StackId, u64, Origin)>,
{
    // First by stack (cheap integer key), then stacks by site.
    let mut by_stack: HashMap<(StackId, Origin), (u64, u64)> = HashMap::default();
    for (s, b, pre) in items {
        let e = by_stack.entry((s, pre)).or_default();
        e.0 = e.0.saturating_add(b);
        e.1 += 1;
    }
    // Per site frame: (bytes, blocks, heaviest stack, its bytes, user code).
    type SiteKey = (Option<(crate::model::Sym, u32, crate::model::Sym)>, Origin);
    let mut by_site: HashMap<SiteKey, (u64, u64, StackId, u64, bool)> = HashMap::default();
    for ((s, pre), (bytes, n)) in by_stack {
        let f = stacks.site_frame(s);
        let key = (f.map(|f| (f.file, f.line, f.name)), pre);
        let user = stacks.user_frame(s).is_some();
        let e = by_site.entry(key).or_insert((0, 0, s, 0, user));
        e.0 = e.0.saturating_add(bytes);
        e.1 += n;
        // Ties go to the lower stack id, so the output never depends on hash order.
        if bytes > e.3 || (bytes == e.3 && s < e.2) {
            e.2 = s;
            e.3 = bytes;
        }
    }
    let mut out: Vec<SiteTotal> = by_site
        .into_iter()
        .map(|((_, pre), (bytes, blocks, s, _, user))| SiteTotal {
            site: Site::of_stack(stacks, s),
            bytes,
            blocks,
            user_code: user,
            before_recording: pre == Origin::BeforeRecording,
            origin: pre,
            stack: StackLabels::of(stacks, s),
            stack_id: s,
        })
        .collect();
    out.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then_with(|| a.site.cmp(&b.site))
            .then(a.origin.cmp(&b.origin))
    });
    out
}

/// Of the dump's active blocks' addresses, those whose allocation is in the log and that no
/// later event freed (what the callers ask of each active block of the dump).
pub fn live_allocated_in_log(dev: &crate::model::Device) -> rustc_hash::FxHashSet<u64> {
    // Only the dump's active blocks are ever asked about, and an address is live at the end
    // exactly when its last alloc or free in the log is an alloc: so the log is read from the
    // end, deciding each of those addresses once, and stops when all are decided. The set
    // stays as small as the dump (the whole log's live set cost a pass of inserts and removes
    // on the 2-core path, issue #43).
    let mut undecided: rustc_hash::FxHashSet<u64> = dev
        .segments
        .iter()
        .flat_map(|s| s.blocks.iter())
        .filter(|b| b.state.is_active())
        .map(|b| b.address)
        .collect();
    let mut live = rustc_hash::FxHashSet::default();
    for e in dev.events.iter().rev() {
        if undecided.is_empty() {
            break;
        }
        match e.action {
            crate::model::Action::Alloc if undecided.remove(&e.addr) => {
                live.insert(e.addr);
            }
            crate::model::Action::FreeRequested | crate::model::Action::FreeCompleted => {
                undecided.remove(&e.addr);
            }
            _ => {}
        }
    }
    live
}
