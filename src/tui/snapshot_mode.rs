//! A snapshot as its views see it ([`Snap`]): the loaded [`Data`], and the allocator state at
//! the cursor ([`Cursor`]), which the allocator map and the sites view share; and what the app
//! asks of a snapshot ([`Capture`]).
//!
//! Everything a view draws is either in [`Data`] (computed once) or in the cursor cache here
//! (the allocator state at the cursor, rebuilt from the nearest replay checkpoint only when the
//! cursor moves). Rendering therefore never replays, and a keypress costs at most one
//! checkpoint-to-cursor replay, whatever the size of the log. The views' own state (the map's
//! selection, the sites tree's) is theirs, in [`super::views`].

use std::path::Path;

use rustc_hash::FxHashMap as HashMap;

use super::action::Ctx;
use super::capture::Capture;
use super::data::{Data, Finding, Marker};
use super::help::{Page, SNAPSHOT_HELP};
use super::sites::{SiteNode, SortBy};
use crate::analysis::categories::Category;
use crate::analysis::replay::{LiveBlock, SegState, State};
use crate::model::StackId;

/// The allocator state at the cursor and what is derived from it.
pub struct Cursor {
    pub dev: usize,
    pub event: Option<usize>,
    pub state: State,
    /// Built on demand (sites view, searches): `None` until then.
    pub tree: Option<(SortBy, Vec<SiteNode>)>,
    /// Built on demand (the map coloured by category): each live block's category and the
    /// rule that put it there, by address.
    pub cats: Option<HashMap<u64, (Category, crate::analysis::categories::CategoryRule)>>,
}

/// One part of a segment in address order: a live block or a free range.
#[derive(Clone, Copy, Debug)]
pub struct Part<'a> {
    pub addr: u64,
    pub size: u64,
    pub block: Option<&'a LiveBlock>,
}

/// A segment's parts, blocks and holes interleaved in address order.
pub fn parts(seg: &SegState) -> Vec<Part<'_>> {
    let mut out: Vec<Part<'_>> = seg
        .blocks
        .values()
        .map(|b| Part {
            addr: b.address,
            size: b.size,
            block: Some(b),
        })
        .chain(seg.free_ranges().map(|(a, e)| Part {
            addr: a,
            size: e - a,
            block: None,
        }))
        .collect();
    out.sort_by_key(|p| p.addr);
    out
}

/// A snapshot, with what its views share.
pub struct Snap {
    pub data: Data,
    /// The allocator state at the cursor (`None` before the first sync).
    pub cache: Option<Cursor>,
    /// Library and native frames shown (`f`), in the sites tree and the map's block stack;
    /// folded into one line otherwise.
    pub unfold: bool,
    /// The query whose matches `matches` holds: per stack id, whether one of its frames
    /// matches it (the sites' and the timeline's searches).
    query: String,
    matches: Vec<bool>,
}

impl Snap {
    pub fn new(data: Data) -> Snap {
        Snap {
            data,
            cache: None,
            unfold: false,
            query: String::new(),
            matches: Vec::new(),
        }
    }

    /// The sites tree at the cursor (empty before the sites view built it).
    pub fn tree(&self) -> &[SiteNode] {
        self.cache
            .as_ref()
            .and_then(|c| c.tree.as_ref())
            .map(|t| t.1.as_slice())
            .unwrap_or(&[])
    }

    /// The segments at the cursor.
    pub fn nseg(&self) -> usize {
        self.cache
            .as_ref()
            .map(|c| c.state.segments.len())
            .unwrap_or(0)
    }

    /// Segment `i` at the cursor, in address order.
    pub fn segment(&self, i: usize) -> Option<&SegState> {
        self.cache.as_ref()?.state.segments.values().nth(i)
    }

    /// Rebuilds the cursor cache if the cursor or the device moved.
    fn refresh(&mut self, dev: usize, event: Option<usize>) {
        let data = &self.data;
        let stale = self
            .cache
            .as_ref()
            .is_none_or(|c| c.dev != dev || c.event != event);
        if !stale {
            return;
        }
        // A query of the product's timeline, from its nearest checkpoint.
        let Some(state) = data.product.state_after(dev, event) else {
            return;
        };
        self.cache = Some(Cursor {
            dev,
            event,
            state,
            tree: None,
            cats: None,
        });
    }

    /// Which stacks have a frame matching `query` (computed once a query).
    pub fn set_query(&mut self, query: &str) {
        if self.query == query && !self.matches.is_empty() {
            return;
        }
        let q = query.to_lowercase();
        let st = &self.data.snap.stacks;
        self.matches = (0..st.stack_count())
            .map(|i| {
                !q.is_empty()
                    && st.frames(StackId(i as u32)).iter().any(|&f| {
                        let f = st.frame(f);
                        st.frame_label(f).to_lowercase().contains(&q)
                    })
            })
            .collect();
        query.clone_into(&mut self.query);
    }

    /// Whether stack `s` has a frame matching the query of [`Self::set_query`].
    pub fn stack_matches(&self, s: StackId) -> bool {
        self.matches.get(s.0 as usize).copied().unwrap_or(false)
    }

    /// Whether the snapshot holds no allocation log at all (only the state at the dump).
    pub fn no_log(&self) -> bool {
        self.data.snap.devices.iter().all(|d| d.events.is_empty())
    }

    /// Where the state `cache` shows is taken: after an event, before the log's first one, or
    /// at the dump of a capture that has no log (which has no "before").
    pub fn at_label(&self, cache: &Cursor) -> String {
        match cache.event {
            Some(e) => format!("after event {e}"),
            None if self.no_log() => "at the dump (no allocation log)".to_owned(),
            None => "before the log".to_owned(),
        }
    }
}

impl Capture for Snap {
    fn path(&self) -> &Path {
        &self.data.path
    }

    fn devices(&self) -> usize {
        self.data.snap.devices.len()
    }

    fn events(&self, dev: usize) -> usize {
        self.data
            .snap
            .devices
            .get(dev)
            .map(|d| d.events.len())
            .unwrap_or(0)
    }

    fn markers(&self, dev: usize) -> &[Marker] {
        self.data
            .markers
            .get(dev)
            .map(|v| v.as_slice())
            .unwrap_or(&[])
    }

    fn times(&self, dev: usize) -> Option<&[f64]> {
        self.data.times.get(dev)?.as_deref()
    }

    fn findings(&self) -> &[Finding] {
        &self.data.findings
    }

    fn device_name(&self, dev: usize) -> Option<String> {
        let d = self.data.snap.devices.get(dev)?;
        Some(format!("cuda:{}", d.index))
    }

    /// The device that ran out of memory comes first: the last OOM's, as the verdict says.
    fn first_device(&self) -> usize {
        let data = &self.data;
        let oom_device = data.analysis.last_oom().map(|(d, _)| d);
        oom_device
            .and_then(|d| data.snap.devices.iter().position(|x| x.index == d))
            .unwrap_or(0)
    }

    fn status(&self, dev: usize, cursor: Option<usize>) -> String {
        let data = &self.data;
        let file = data
            .path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        let d = data.snap.devices.get(dev);
        let cur = match (cursor, d) {
            (Some(c), Some(d)) => {
                let t = data
                    .rel_time_us(dev, c)
                    .map(|t| format!(" +{:.3}s", t as f64 / 1e6))
                    .unwrap_or_default();
                format!("event {c}/{}{t}", d.events.len().saturating_sub(1))
            }
            _ => "no events".to_owned(),
        };
        let devname = self.device_name(dev).unwrap_or_default();
        format!(" {file} │ {devname} │ {cur}")
    }

    fn help(&self) -> &'static Page {
        &SNAPSHOT_HELP
    }

    fn sync(&mut self, c: &Ctx) {
        self.refresh(c.dev, c.cursor);
    }
}
