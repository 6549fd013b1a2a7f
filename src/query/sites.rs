//! Sites and their ids: each stack's site (its first user frame, else its innermost Python
//! frame: [`crate::model::Stacks::site_frame`], the rule `analyze` blames by), interned once
//! so that a row of a million-row table names its site by index.

use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use crate::model::{FrameKind, Site, StackId, Stacks, Sym};

/// One site's columns.
#[derive(Clone, Debug)]
pub struct SiteRow {
    pub file: Arc<str>,
    pub line: u32,
    pub function: Arc<str>,
    pub kind: FrameKind,
}

/// Every site of a capture's stacks, and each stack's.
pub struct SiteDict {
    pub sites: Vec<SiteRow>,
    /// Per stack, its site.
    pub of_stack: Vec<Option<u32>>,
    by_text: HashMap<(Arc<str>, u32, Arc<str>), u32>,
    /// Interned strings as shared text, so that rows clone a pointer.
    strings: HashMap<Sym, Arc<str>>,
}

impl SiteDict {
    pub fn new(stacks: &Stacks) -> SiteDict {
        let mut d = SiteDict {
            sites: Vec::new(),
            of_stack: Vec::with_capacity(stacks.stack_count()),
            by_text: HashMap::default(),
            strings: HashMap::default(),
        };
        let mut by_frame: HashMap<(Sym, u32, Sym), u32> = HashMap::default();
        for i in 0..stacks.stack_count() {
            let site = stacks.site_frame(StackId(i as u32)).map(|f| {
                *by_frame.entry((f.file, f.line, f.name)).or_insert_with(|| {
                    let file = d.text(stacks, f.file);
                    let function = d.text(stacks, f.name);
                    let id = d.sites.len() as u32;
                    d.by_text
                        .insert((file.clone(), f.line, function.clone()), id);
                    d.sites.push(SiteRow {
                        file,
                        line: f.line,
                        function,
                        kind: f.kind,
                    });
                    id
                })
            });
            d.of_stack.push(site);
        }
        d
    }

    /// A string of the stacks as shared text.
    pub fn text(&mut self, stacks: &Stacks, s: Sym) -> Arc<str> {
        self.strings
            .entry(s)
            .or_insert_with(|| Arc::from(stacks.str(s)))
            .clone()
    }

    pub fn site_of(&self, s: StackId) -> Option<&SiteRow> {
        self.of_stack
            .get(s.0 as usize)
            .copied()
            .flatten()
            .map(|i| &self.sites[i as usize])
    }

    /// The id of a site the analysis names (`None` for one no stack has, which the analysis
    /// does not make, and for no site).
    pub fn id_of(&self, s: Option<&Site>) -> Option<u32> {
        let s = s?;
        self.by_text
            .get(&(
                Arc::from(s.file.as_str()),
                s.line,
                Arc::from(s.function.as_str()),
            ))
            .copied()
    }
}

/// The five site columns of a stack (`stack_id`, `site_id`, `file`, `line`, `function`).
pub fn stack_cells(d: &SiteDict, s: StackId) -> [super::Cell; 5] {
    use super::Cell;
    let id = d.of_stack.get(s.0 as usize).copied().flatten();
    match id.map(|i| &d.sites[i as usize]) {
        Some(r) => [
            Cell::from(s.0),
            Cell::from(id),
            Cell::Text(r.file.clone()),
            Cell::from(r.line),
            Cell::Text(r.function.clone()),
        ],
        None => [
            Cell::from(s.0),
            Cell::Null,
            Cell::Null,
            Cell::Null,
            Cell::Null,
        ],
    }
}

/// One of [`stack_cells`] (`k` in 0..5), made alone: what a virtual table asks for per row.
pub fn stack_cell(d: &SiteDict, s: StackId, k: usize) -> super::Cell {
    use super::Cell;
    if k == 0 {
        return Cell::from(s.0);
    }
    let id = d.of_stack.get(s.0 as usize).copied().flatten();
    let Some(i) = id else { return Cell::Null };
    let r = &d.sites[i as usize];
    match k {
        1 => Cell::from(i),
        2 => Cell::Text(r.file.clone()),
        3 => Cell::from(r.line),
        _ => Cell::Text(r.function.clone()),
    }
}

/// The site columns of a site the analysis names (no stack: `stack_id` NULL).
pub fn site_cells(d: &SiteDict, s: Option<&Site>) -> [super::Cell; 5] {
    use super::Cell;
    match s {
        Some(s) => [
            Cell::Null,
            Cell::from(d.id_of(Some(s))),
            Cell::from(s.file.as_str()),
            Cell::from(s.line),
            Cell::from(s.function.as_str()),
        ],
        None => [Cell::Null, Cell::Null, Cell::Null, Cell::Null, Cell::Null],
    }
}

pub fn kind_name(k: FrameKind) -> &'static str {
    match k {
        FrameKind::User => "user",
        FrameKind::Torch => "torch",
        FrameKind::Library => "library",
        FrameKind::Python => "python",
        FrameKind::Native => "native",
        FrameKind::Generated => "generated",
    }
}
