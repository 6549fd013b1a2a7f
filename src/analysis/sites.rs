//! Live memory grouped by the line of user code that allocated it.
//!
//! "What held the memory" is only actionable as a line in the user's program: thousands of
//! blocks from `linear.py:134` are one finding, `train.py:60 out = model(x)`. Blocks are grouped
//! by their site frame (the first user frame of the stack), while the heaviest full stack of
//! each group is kept for `--stacks`. Blocks allocated before the log began are grouped apart
//! (`before_recording`): their site is their own stack where the snapshot kept one, and nothing
//! about them can be blamed on the recorded run.

use rustc_hash::FxHashMap as HashMap;

use crate::model::{Frame, StackId, Stacks};

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
    pub before_recording: bool,
    /// The stack holding the most bytes of this site, innermost frame first (`file:line function`).
    pub stack: Vec<String>,
    #[serde(skip)]
    pub stack_id: StackId,
}

/// Groups `(stack, bytes)` items by site, largest first.
pub fn group<I>(stacks: &Stacks, items: I) -> Vec<SiteTotal>
where
    I: IntoIterator<Item = (StackId, u64)>,
{
    group_marked(stacks, items.into_iter().map(|(s, b)| (s, b, false)))
}

/// Groups `(stack, bytes, allocated before the log began)` items by site, largest first; blocks
/// from before the log never share a row with blocks of the same site allocated in it.
pub fn group_marked<I>(stacks: &Stacks, items: I) -> Vec<SiteTotal>
where
    I: IntoIterator<Item = (StackId, u64, bool)>,
{
    // First by stack (cheap integer key), then stacks by site.
    let mut by_stack: HashMap<(StackId, bool), (u64, u64)> = HashMap::default();
    for (s, b, pre) in items {
        let e = by_stack.entry((s, pre)).or_default();
        e.0 = e.0.saturating_add(b);
        e.1 += 1;
    }
    // Per site frame: (bytes, blocks, heaviest stack, its bytes, user code).
    type SiteKey = (Option<(crate::model::Sym, u32, crate::model::Sym)>, bool);
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
            before_recording: pre,
            stack: stacks
                .frames(s)
                .iter()
                .map(|&f| stacks.frame_label(stacks.frame(f)))
                .collect(),
            stack_id: s,
        })
        .collect();
    out.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then_with(|| a.site.cmp(&b.site))
            .then(a.before_recording.cmp(&b.before_recording))
    });
    out
}

/// Addresses of the blocks whose allocation is in the log and that no later event freed.
pub(crate) fn live_allocated_in_log(dev: &crate::model::Device) -> rustc_hash::FxHashSet<u64> {
    let mut live = rustc_hash::FxHashSet::default();
    for e in &dev.events {
        match e.action {
            crate::model::Action::Alloc => {
                live.insert(e.addr);
            }
            crate::model::Action::FreeRequested | crate::model::Action::FreeCompleted => {
                live.remove(&e.addr);
            }
            _ => {}
        }
    }
    live
}
