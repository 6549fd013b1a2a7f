//! The views, one file each: a component ([`super::component::Component`]) that owns the view's
//! state, handles its keys, clicks and searches, and draws it; and here, each kind of capture's
//! views in tab order. A new view is its file and a line in the list of the captures that have
//! it (with its `mod` line); the app, the modes and the screen need nothing else.
//!
//! A view names itself (`impl View { pub const Map: View = ... }`) in its file. The views of
//! both kinds (overview, timeline, leaks) are one component each, with an implementation per
//! kind of capture where they differ.

pub mod graph;
pub mod leaks;
pub mod map;
pub mod overview;
pub mod plan;
pub mod sites;
pub mod steps;
pub mod timeline;

use super::component::Component;
use super::data::Planned;
use super::snapshot_mode::Snap;
use super::trace::TraceData;

/// A snapshot's views, in tab order; with a capacity plan (`--batch`), its Plan view last.
pub fn snapshot(plan: Option<Planned>) -> Vec<Box<dyn Component<Snap>>> {
    let mut v: Vec<Box<dyn Component<Snap>>> = vec![
        Box::new(overview::Overview::default()),
        Box::new(timeline::Timeline),
        Box::new(map::Map::default()),
        Box::new(sites::Sites::default()),
        Box::new(leaks::Leaks::default()),
    ];
    if let Some(p) = plan {
        v.push(Box::new(plan::PlanView::new(p)));
    }
    v
}

/// A trace's views, in tab order.
pub fn trace() -> Vec<Box<dyn Component<TraceData>>> {
    vec![
        Box::new(overview::Overview::default()),
        Box::new(timeline::Timeline),
        Box::new(steps::Steps::default()),
        Box::new(graph::Graph::default()),
        Box::new(leaks::Leaks::default()),
    ]
}

/// A search query, lowercased once: what `n`/`N` matches names and user frames against, the
/// same way in every view.
pub(crate) struct Query(String);

impl Query {
    pub(crate) fn new(query: &str) -> Query {
        Query(query.to_lowercase())
    }

    /// Whether `s` contains the query, ignoring case.
    pub(crate) fn matches(&self, s: &str) -> bool {
        s.to_lowercase().contains(&self.0)
    }

    /// Whether a user frame's function or file contains the query.
    pub(crate) fn site(&self, s: &Option<crate::model::Site>) -> bool {
        s.as_ref()
            .is_some_and(|s| self.matches(&s.function) || self.matches(&s.file))
    }
}
