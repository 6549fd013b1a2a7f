//! What changed between two captures (or a capture and a baseline): peaks, sites, categories,
//! steps, leak findings and graph growth. Answers "which change added 2 GB of activations?"
//! with the lines whose live bytes changed the most, largest first.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::summary::{DeviceSummary, InputSummary, SiteBytes, Standing};
use crate::analysis::leaks::LeakKind;
use crate::analysis::sites::Site;
use crate::analysis::{CaptureKind, TOP_SITES};

pub const DIFF_SCHEMA: &str = "memscope.diff/1";

/// How a site (or a finding) changed from one capture to the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SiteStatus {
    /// Only after.
    New,
    /// Only before.
    Gone,
    Grown,
    Shrunk,
    /// The same code at another line.
    Moved,
    Same,
}

impl SiteStatus {
    pub fn word(self) -> &'static str {
        match self {
            SiteStatus::New => "new",
            SiteStatus::Gone => "gone",
            SiteStatus::Grown => "grown",
            SiteStatus::Shrunk => "shrunk",
            SiteStatus::Moved => "moved",
            SiteStatus::Same => "same",
        }
    }
}

/// Which captures hold a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Presence {
    Both,
    BeforeOnly,
    AfterOnly,
}

/// How one site's live bytes changed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SiteChange {
    /// The site (after; before for a `gone` one).
    pub site: Option<Site>,
    pub status: SiteStatus,
    /// For a `moved` site: where it was before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moved_from: Option<Site>,
    /// `None`: not among the side's top sites.
    pub before_bytes: Option<u64>,
    pub after_bytes: Option<u64>,
    pub delta_bytes: i64,
    /// Whether the side that lacks the site listed only its top sites, so the site may
    /// have been there below them (the delta is then an upper bound).
    pub below_top: bool,
}

impl SiteChange {
    pub fn describe(&self) -> String {
        crate::wording::diff::site_change(crate::wording::diff::SiteChangeWords {
            delta_bytes: self.delta_bytes,
            status: self.status.word(),
            site: &self.site,
            moved_from: &self.moved_from,
            before_bytes: self.before_bytes,
            after_bytes: self.after_bytes,
            below_top: self.below_top,
        })
    }
}

/// A path's last component: what identifies a source file across checkouts.
fn file_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// What identifies a site across code motion: its file's name, its function and the call its
/// line makes (the chain's two outermost functions; `None` sites, with no Python stack, form
/// one group). The frames below that call are the heaviest stack's, which differ between runs
/// of one line (a Linear's `forward` in one, a ReLU's `relu` in the other), so they do not count.
fn motion_key(s: &SiteBytes) -> Option<(String, Vec<String>)> {
    let site = s.site.as_ref()?;
    let file = file_name(&site.file);
    let chain = if s.chain.is_empty() {
        vec![site.function.clone()]
    } else {
        s.chain[s.chain.len().saturating_sub(2)..].to_vec()
    };
    Some((file.to_owned(), chain))
}

/// Where a site is, across checkouts: its file's name, line and function.
fn location(s: &SiteBytes) -> Option<(&str, u32, &str)> {
    s.site
        .as_ref()
        .map(|x| (file_name(&x.file), x.line, x.function.as_str()))
}

/// Whether two findings' sites are the same code across code motion: the same file name and
/// function (a finding is one per site and kind, so the line adds nothing but motion).
fn same_code(x: &Option<Site>, y: &Option<Site>) -> bool {
    match (x, y) {
        (Some(x), Some(y)) => file_name(&x.file) == file_name(&y.file) && x.function == y.function,
        (None, None) => true,
        _ => false,
    }
}

/// The findings of `before` and of `after` that pair with none on the other side, one to
/// one: the same site first, then the same code (`same`) at another line.
fn unmatched<'a, T>(
    before: &'a [T],
    after: &'a [T],
    same: impl Fn(&T, &T) -> bool,
    site: impl Fn(&T) -> &Option<Site>,
) -> (Vec<&'a T>, Vec<&'a T>) {
    let mut left: Vec<Option<&T>> = after.iter().map(Some).collect();
    let mut gone = Vec::new();
    let mut pending = Vec::new();
    for x in before {
        let exact = left
            .iter()
            .position(|y| y.is_some_and(|y| same(x, y) && site(x) == site(y)));
        match exact {
            Some(i) => left[i] = None,
            None => pending.push(x),
        }
    }
    for x in pending {
        match left.iter().position(|y| y.is_some_and(|y| same(x, y))) {
            Some(i) => left[i] = None,
            None => gone.push(x),
        }
    }
    (gone, left.into_iter().flatten().collect())
}

/// Pairs the sites of `before` with those of `after` (indices), robust to code motion.
///
/// Sites are grouped by [`motion_key`]; within a group, the line shift that pairs the most
/// sites (lines inserted above move a function's lines together; the smallest shift on a
/// tie) pairs them, and one site left on each side with the same bytes is paired too (a line
/// moved on its own). A site left on each side at the same file name, line and function is
/// paired last. Everything else is new or gone.
fn pair_sites(before: &[SiteBytes], after: &[SiteBytes]) -> Vec<(Option<usize>, Option<usize>)> {
    // (key, indices before, indices after)
    type Group = (Option<(String, Vec<String>)>, Vec<usize>, Vec<usize>);
    let mut groups: Vec<Group> = Vec::new();
    for (side, v) in [before, after].into_iter().enumerate() {
        for (i, s) in v.iter().enumerate() {
            let k = motion_key(s);
            let g = match groups.iter().position(|g| g.0 == k) {
                Some(g) => g,
                None => {
                    groups.push((k, Vec::new(), Vec::new()));
                    groups.len() - 1
                }
            };
            if side == 0 {
                groups[g].1.push(i);
            } else {
                groups[g].2.push(i);
            }
        }
    }
    let line = |s: &SiteBytes| s.site.as_ref().map_or(0, |s| s.line as i64);
    let mut out = Vec::new();
    let (mut left_before, mut left_after) = (Vec::new(), Vec::new());
    for (_, mut b, mut a) in groups {
        let mut shifts: BTreeMap<i64, usize> = BTreeMap::new();
        for &i in &b {
            for &j in &a {
                *shifts
                    .entry(line(&after[j]) - line(&before[i]))
                    .or_default() += 1;
            }
        }
        let best = shifts
            .iter()
            .max_by(|x, y| x.1.cmp(y.1).then(y.0.abs().cmp(&x.0.abs())))
            .map(|(d, _)| *d);
        if let Some(d) = best {
            b.retain(|&i| {
                match a
                    .iter()
                    .position(|&j| line(&after[j]) - line(&before[i]) == d)
                {
                    Some(p) => {
                        out.push((Some(i), Some(a.remove(p))));
                        false
                    }
                    None => true,
                }
            });
        }
        if let ([i], [j]) = (b.as_slice(), a.as_slice()) {
            if before[*i].bytes == after[*j].bytes {
                out.push((Some(*i), Some(*j)));
                b.clear();
                a.clear();
            }
        }
        left_before.extend(b);
        left_after.extend(a);
    }
    // A site left on each side at the same place is one site whose line called something else
    // on each side: the same line, not a new one and a gone one.
    for i in left_before {
        let at = location(&before[i]);
        match left_after
            .iter()
            .position(|&j| at.is_some() && location(&after[j]) == at)
        {
            Some(p) => out.push((Some(i), Some(left_after.remove(p)))),
            None => out.push((Some(i), None)),
        }
    }
    out.extend(left_after.into_iter().map(|j| (None, Some(j))));
    out
}

/// Site-by-site changes from `before` to `after`, largest absolute change first (growth first
/// on ties). Sites are matched by file and function chain, not by line (see [`pair_sites`]):
/// a site whose line moved is `moved` (listed even when its bytes did not change, with the
/// line it had before); unchanged sites are left out.
pub fn site_changes(before: &[SiteBytes], after: &[SiteBytes]) -> Vec<SiteChange> {
    let mut out: Vec<SiteChange> = pair_sites(before, after)
        .into_iter()
        .map(|(bi, ai)| {
            let (b, a) = (bi.map(|i| &before[i]), ai.map(|j| &after[j]));
            let (bb, ab) = (b.map(|s| s.bytes), a.map(|s| s.bytes));
            let delta = ab.unwrap_or(0) as i64 - bb.unwrap_or(0) as i64;
            let moved = matches!((b, a), (Some(b), Some(a)) if b.site != a.site);
            let status = match (bb, ab) {
                (None, Some(_)) => SiteStatus::New,
                (Some(_), None) => SiteStatus::Gone,
                _ if moved => SiteStatus::Moved,
                _ if delta > 0 => SiteStatus::Grown,
                _ if delta < 0 => SiteStatus::Shrunk,
                _ => SiteStatus::Same,
            };
            let below_top = match status {
                SiteStatus::New => before.len() >= TOP_SITES,
                SiteStatus::Gone => after.len() >= TOP_SITES,
                _ => false,
            };
            SiteChange {
                site: a.or(b).and_then(|s| s.site.clone()),
                moved_from: b.filter(|_| moved).and_then(|s| s.site.clone()),
                status,
                before_bytes: bb,
                after_bytes: ab,
                delta_bytes: delta,
                below_top,
            }
        })
        .filter(|c| c.delta_bytes != 0 || c.status == SiteStatus::Moved)
        .collect();
    out.sort_by(|x, y| {
        y.delta_bytes
            .unsigned_abs()
            .cmp(&x.delta_bytes.unsigned_abs())
            .then(y.delta_bytes.cmp(&x.delta_bytes))
            .then_with(|| x.site.cmp(&y.site))
    });
    out
}

/// Whether a side's peaks are lower bounds: a device present with a log that did not start
/// from an empty allocator (a missing device's zeros are exact).
fn present_inexact(d: &DeviceSummary) -> bool {
    !d.peak_exact && (d.peak_allocated_bytes > 0 || d.end_allocated_bytes > 0)
}

/// What a side's peak is: a lower bound where the log did not start from an empty allocator
/// or the figure counts from a trace's start, unknown where the capture does not record it.
fn peak_standing(s: &InputSummary, d: &DeviceSummary, reserved: bool) -> Standing {
    let own = if reserved {
        s.reserved_standing(&d.device)
    } else {
        s.allocated_standing(&d.device)
    };
    match own {
        Standing::Measured if present_inexact(d) => Standing::AtLeast,
        x => x,
    }
}

/// A figure on both sides.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Delta {
    pub before: u64,
    pub after: u64,
    pub delta: i64,
    /// `before` is a lower bound (a peak seen in a log that did not start from an empty
    /// allocator): the true figure may be higher.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub before_lower_bound: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub after_lower_bound: bool,
    /// The side records no such figure (a torch 1.9 trace's reserved bytes): its value is 0
    /// for want of one, and the change is unknown.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub before_unrecorded: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub after_unrecorded: bool,
}

impl Delta {
    pub fn new(before: u64, after: u64) -> Delta {
        Delta::bounded(before, after, false, false)
    }

    /// A delta whose sides may be lower bounds (`>=`).
    pub fn bounded(before: u64, after: u64, before_lower: bool, after_lower: bool) -> Delta {
        Delta {
            before,
            after,
            delta: after as i64 - before as i64,
            before_lower_bound: before_lower,
            after_lower_bound: after_lower,
            before_unrecorded: false,
            after_unrecorded: false,
        }
    }

    /// A delta from each side's [`Standing`]: a lower bound keeps its `>=`, a figure the side
    /// does not record makes the change unknown.
    pub fn of(before: (u64, Standing), after: (u64, Standing)) -> Delta {
        let mut d = Delta::bounded(
            before.0,
            after.0,
            before.1 == Standing::AtLeast,
            after.1 == Standing::AtLeast,
        );
        d.before_unrecorded = before.1 == Standing::Unrecorded;
        d.after_unrecorded = after.1 == Standing::Unrecorded;
        d
    }

    /// `1.0 GiB -> 1.5 GiB (+512.0 MiB, +50.0%)`; a lower bound keeps its `>=`, and the change
    /// says how far it can be trusted: at least (the after side is a bound), at most (the
    /// before side is), or unknown (both are).
    pub fn describe(&self) -> String {
        use crate::wording::diff::{delta_words, Side};
        delta_words(
            Side {
                bytes: self.before,
                lower_bound: self.before_lower_bound,
                unrecorded: self.before_unrecorded,
            },
            Side {
                bytes: self.after,
                lower_bound: self.after_lower_bound,
                unrecorded: self.after_unrecorded,
            },
            self.delta,
        )
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceDiff {
    pub device: String,
    pub presence: Presence,
    pub peak_allocated: Delta,
    pub peak_reserved: Delta,
    pub end_allocated: Delta,
    pub sites_at_peak: Vec<SiteChange>,
    pub sites_at_end: Vec<SiteChange>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NamedDelta {
    pub name: String,
    pub before: Option<u64>,
    pub after: Option<u64>,
    pub delta: i64,
}

/// What a [`FindingChange`] is: a leak of a kind, or the op whose autograd graph grows. In
/// JSON, the leak kind's id (`accumulated_loss`) or the op's name (`aten::add`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum FindingKind {
    Leak(LeakKind),
    /// The op's name, as the capture records it.
    GraphGrowth(String),
}

impl std::fmt::Display for FindingKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FindingKind::Leak(k) => f.write_str(k.id()),
            FindingKind::GraphGrowth(op) => f.write_str(op),
        }
    }
}

/// A finding (leak or graph growth) present on one side only.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FindingChange {
    /// `new` (only after) or `gone` (only before).
    pub status: SiteStatus,
    pub kind: FindingKind,
    pub site: Option<Site>,
    /// Bytes per step for leaks, nodes per step for graph growth.
    pub per_step: f64,
}

/// The `memscope.diff/1` document.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Diff {
    pub schema: &'static str,
    pub before: String,
    pub after: String,
    /// The line whose live bytes grew the most (at the peak or at the end), the first
    /// answer to "what added this memory".
    pub largest_growth: Option<SiteChange>,
    /// Whether either side records live bytes by site at all (profiler traces do not: their
    /// memory events carry no stack), so that no `largest_growth` means "none grew" only
    /// where sites were there to compare.
    pub sites_recorded: bool,
    pub devices: Vec<DeviceDiff>,
    pub ooms: Delta,
    /// Allocated bytes by category; empty when either side has no categories.
    pub categories: Vec<NamedDelta>,
    /// Steps aligned by index, largest change of the step's peak first; a step of one run
    /// only has `before` or `after` absent and a delta of 0.
    pub steps: Vec<NamedDelta>,
    pub leaks: Vec<FindingChange>,
    pub graph_growth: Vec<FindingChange>,
    /// What the diff could not compare, and which side lacks it: an empty section above
    /// then means "not recorded", never "no change".
    pub not_compared: Vec<NotCompared>,
}

/// A kind of fact a capture may or may not record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Record {
    /// Device memory at all (a profiler trace has it only with `profile_memory=True`).
    DeviceMemory,
    /// Live bytes by source line (a trace's memory events carry no stack).
    SiteMemory,
    /// Memory by category.
    Categories,
    /// Steps (a loop the analysis could cut the capture into).
    Steps,
    /// A leak judgement (enough steps, an event log).
    Leaks,
    /// The autograd graph's growth (traces with grad-mode ops and a backward).
    GraphGrowth,
}

/// Which side lacks a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Missing {
    Neither,
    Before,
    After,
}

/// One fact the diff could not compare.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NotCompared {
    pub record: Record,
    /// `neither`: no side records it; `before` / `after`: that side does not.
    pub missing_in: Missing,
}

/// Why two captures are not compared (unless forced).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Incomparable {
    /// A snapshot and a trace: exact allocator state against profiled steps without stacks.
    #[error(
        "the before side is a {before} and the after side a {after}: a snapshot holds the allocator's exact state and live bytes by line, a trace profiled steps without stacks, so their figures do not measure the same thing (--force compares them anyway)"
    )]
    Kinds {
        before: CaptureKind,
        after: CaptureKind,
    },
    /// Both sides name where their memory was allocated, and no source file is common: two
    /// different programs, whose every line would read as new or gone.
    #[error(
        "the two captures share no source file: before allocates from {}, after from {}; they look like different programs, whose every line would read as new or gone (--force compares them anyway)",
        .before.join(", "), .after.join(", ")
    )]
    UnrelatedPrograms {
        /// Up to [`FILES_NAMED`] file names of each side.
        before: Vec<String>,
        after: Vec<String>,
    },
}

/// How many file names an [`Incomparable::UnrelatedPrograms`] names per side.
pub const FILES_NAMED: usize = 4;

/// The source files (by name) a side's memory was allocated from, where the name identifies
/// the program: a notebook cell's file (`ipykernel_*`, `<ipython-input-*>`) is named after
/// its content and kernel, so it changes with any edit, and is left out.
fn program_files(s: &InputSummary) -> BTreeSet<String> {
    let sites = s
        .devices
        .iter()
        .flat_map(|d| d.sites_at_peak.iter().chain(&d.sites_at_end))
        .filter_map(|x| x.site.as_ref())
        .chain(s.leaks.iter().flatten().filter_map(|l| l.site.as_ref()))
        // A trace's memory events carry no stack, but its OOMs and graph growth may name a
        // line.
        .chain(s.ooms.iter().filter_map(|o| o.site.as_ref()))
        .chain(
            s.graph_growth
                .iter()
                .flatten()
                .filter_map(|g| g.site.as_ref()),
        );
    sites
        .map(|site| site.file.as_str())
        .filter(|f| f.ends_with(".py") && !f.starts_with('<') && !f.contains("ipykernel_"))
        .map(|f| file_name(f).to_owned())
        .collect()
}

/// Whether `before` and `after` can be compared: the same kind of capture and, where both
/// name the Python files their memory came from, at least one file in common.
pub fn comparable(before: &InputSummary, after: &InputSummary) -> Result<(), Incomparable> {
    if before.kind != after.kind {
        return Err(Incomparable::Kinds {
            before: before.kind,
            after: after.kind,
        });
    }
    let (b, a) = (program_files(before), program_files(after));
    if !b.is_empty() && !a.is_empty() && b.is_disjoint(&a) {
        let few = |s: BTreeSet<String>| s.into_iter().take(FILES_NAMED).collect();
        return Err(Incomparable::UnrelatedPrograms {
            before: few(b),
            after: few(a),
        });
    }
    Ok(())
}

/// Captures of two programs among inputs given as one job: `first` (the first input that
/// names its Python files) and `other` share no source file. Its sentence is
/// [`crate::wording::job::unrelated_programs`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, thiserror::Error)]
#[error(
    "{}",
    crate::wording::job::unrelated_programs(first, first_files, other, other_files)
)]
pub struct Unrelated {
    pub first: String,
    /// Up to [`FILES_NAMED`] file names of each.
    pub first_files: Vec<String>,
    pub other: String,
    pub other_files: Vec<String>,
}

/// Whether `inputs`, given as the ranks of one job, are captures of one program: by the rule
/// [`comparable`] holds two captures to, every input that names the Python files its memory
/// came from shares one with the first input that does. An input that names none (a trace
/// without stacks, a summary without sites) is no evidence either way. Linear in the sites.
pub fn one_program<'a>(
    inputs: impl IntoIterator<Item = &'a InputSummary>,
) -> Result<(), Unrelated> {
    let mut first: Option<(&InputSummary, BTreeSet<String>)> = None;
    for s in inputs {
        let files = program_files(s);
        if files.is_empty() {
            continue;
        }
        match &first {
            None => first = Some((s, files)),
            Some((f, ff)) if ff.is_disjoint(&files) => {
                let few = |s: &BTreeSet<String>| s.iter().take(FILES_NAMED).cloned().collect();
                return Err(Unrelated {
                    first: f.path.clone(),
                    first_files: few(ff),
                    other: s.path.clone(),
                    other_files: few(&files),
                });
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// What neither side, or only one, records.
fn not_compared(before: &InputSummary, after: &InputSummary) -> Vec<NotCompared> {
    let memory = |s: &InputSummary| !s.devices.is_empty();
    let sites = |s: &InputSummary| {
        s.devices
            .iter()
            .any(|d| !d.sites_at_peak.is_empty() || !d.sites_at_end.is_empty())
    };
    type Has<'a> = &'a dyn Fn(&InputSummary) -> bool;
    let checks: [(Record, Has); 6] = [
        (Record::DeviceMemory, &memory),
        (Record::SiteMemory, &|s| memory(s) && sites(s)),
        (Record::Categories, &|s| s.categories.is_some()),
        (Record::Steps, &|s| {
            s.steps.as_ref().is_some_and(|v| !v.is_empty())
        }),
        (Record::Leaks, &|s| {
            s.leaks.is_some() && s.leak_judgement.as_ref().is_none_or(|j| j.judged)
        }),
        (Record::GraphGrowth, &|s| {
            s.graph_growth.is_some() && s.graph_not_judged.is_none()
        }),
    ];
    let mut out = Vec::new();
    for (record, has) in checks {
        // Snapshots never hold an autograd graph: not a gap of either capture.
        if record == Record::GraphGrowth
            && before.kind == CaptureKind::Snapshot
            && after.kind == CaptureKind::Snapshot
        {
            continue;
        }
        let missing_in = match (has(before), has(after)) {
            (true, true) => continue,
            (false, false) => Missing::Neither,
            (false, true) => Missing::Before,
            (true, false) => Missing::After,
        };
        // Without device memory on either side, nothing below it is recorded either: one
        // line says it.
        let no_memory = NotCompared {
            record: Record::DeviceMemory,
            missing_in: Missing::Neither,
        };
        if matches!(record, Record::SiteMemory | Record::Categories) && out.contains(&no_memory) {
            continue;
        }
        out.push(NotCompared { record, missing_in });
    }
    out
}

fn empty_device(label: &str) -> DeviceSummary {
    DeviceSummary {
        device: label.into(),
        peak_allocated_bytes: 0,
        peak_reserved_bytes: 0,
        peak_exact: true,
        end_allocated_bytes: 0,
        end_reserved_bytes: 0,
        sites_at_peak: Vec::new(),
        sites_at_end: Vec::new(),
        pools: Vec::new(),
        pools_raised_peak_bytes: None,
    }
}

fn named(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
    order: &[String],
) -> Vec<NamedDelta> {
    let mut out: Vec<NamedDelta> = order
        .iter()
        .map(|n| {
            let (b, a) = (before.get(n).copied(), after.get(n).copied());
            NamedDelta {
                name: n.clone(),
                before: b,
                after: a,
                delta: a.unwrap_or(0) as i64 - b.unwrap_or(0) as i64,
            }
        })
        .filter(|d| d.delta != 0)
        .collect();
    out.sort_by(|x, y| {
        y.delta
            .unsigned_abs()
            .cmp(&x.delta.unsigned_abs())
            .then(y.delta.cmp(&x.delta))
    });
    out
}

/// Compares two summaries.
pub fn diff(before: &InputSummary, after: &InputSummary) -> Diff {
    let mut labels: Vec<&str> = before.devices.iter().map(|d| d.device.as_str()).collect();
    for d in &after.devices {
        if !labels.contains(&d.device.as_str()) {
            labels.push(&d.device);
        }
    }
    let devices: Vec<DeviceDiff> = labels
        .into_iter()
        .map(|l| {
            let (b, a) = (before.device(l), after.device(l));
            let presence = match (b, a) {
                (Some(_), Some(_)) => Presence::Both,
                (Some(_), None) => Presence::BeforeOnly,
                _ => Presence::AfterOnly,
            };
            let e = empty_device(l);
            let (b, a) = (b.unwrap_or(&e), a.unwrap_or(&e));
            DeviceDiff {
                device: l.to_owned(),
                presence,
                // A peak not exact is the highest seen in the log: a lower bound. A figure
                // rebuilt as changes from a trace's start bounds the bytes in use from below;
                // reserved bytes a trace does not record are unknown.
                peak_allocated: Delta::of(
                    (b.peak_allocated_bytes, peak_standing(before, b, false)),
                    (a.peak_allocated_bytes, peak_standing(after, a, false)),
                ),
                peak_reserved: Delta::of(
                    (b.peak_reserved_bytes, peak_standing(before, b, true)),
                    (a.peak_reserved_bytes, peak_standing(after, a, true)),
                ),
                end_allocated: Delta::of(
                    (b.end_allocated_bytes, before.allocated_standing(l)),
                    (a.end_allocated_bytes, after.allocated_standing(l)),
                ),
                sites_at_peak: site_changes(&b.sites_at_peak, &a.sites_at_peak),
                sites_at_end: site_changes(&b.sites_at_end, &a.sites_at_end),
            }
        })
        .collect();
    let sites_recorded = [before, after].iter().any(|x| {
        x.devices
            .iter()
            .any(|d| !d.sites_at_peak.is_empty() || !d.sites_at_end.is_empty())
    });
    let largest_growth = devices
        .iter()
        .flat_map(|d| d.sites_at_peak.iter().chain(&d.sites_at_end))
        .filter(|c| c.delta_bytes > 0)
        .max_by(|x, y| {
            x.delta_bytes
                .cmp(&y.delta_bytes)
                .then_with(|| y.site.cmp(&x.site))
        })
        .cloned();
    let categories = match (&before.categories, &after.categories) {
        (Some(b), Some(a)) => {
            let names: BTreeSet<String> = b.keys().chain(a.keys()).cloned().collect();
            named(b, a, &names.into_iter().collect::<Vec<_>>())
        }
        _ => Vec::new(),
    };
    // Steps are aligned by index (their names may differ between runs); a step present in
    // one run only is reported as such (delta 0), never as growth from nothing.
    let steps = match (&before.steps, &after.steps) {
        (Some(b), Some(a)) => {
            let mut v: Vec<NamedDelta> = (0..b.len().max(a.len()))
                .map(|i| {
                    let (x, y) = (b.get(i), a.get(i));
                    let name = match (x, y) {
                        (Some(x), Some(y)) if x.name != y.name => {
                            format!("{} / {}", x.name, y.name)
                        }
                        _ => x.or(y).map(|s| s.name.clone()).unwrap_or_default(),
                    };
                    let (pb, pa) = (
                        x.map(|s| s.peak_allocated_bytes),
                        y.map(|s| s.peak_allocated_bytes),
                    );
                    NamedDelta {
                        name,
                        before: pb,
                        after: pa,
                        delta: match (pb, pa) {
                            (Some(pb), Some(pa)) => pa as i64 - pb as i64,
                            _ => 0,
                        },
                    }
                })
                .filter(|d| d.delta != 0 || d.before.is_none() || d.after.is_none())
                .collect();
            v.sort_by(|x, y| {
                y.delta
                    .unsigned_abs()
                    .cmp(&x.delta.unsigned_abs())
                    .then(y.delta.cmp(&x.delta))
            });
            v
        }
        _ => Vec::new(),
    };
    let mut leaks = Vec::new();
    if let (Some(b), Some(a)) = (&before.leaks, &after.leaks) {
        let (gone, new) = unmatched(
            b,
            a,
            |x, y| x.kind == y.kind && same_code(&x.site, &y.site),
            |l| &l.site,
        );
        for (status, v) in [(SiteStatus::New, new), (SiteStatus::Gone, gone)] {
            for l in v {
                leaks.push(FindingChange {
                    status,
                    kind: FindingKind::Leak(l.kind),
                    site: l.site.clone(),
                    per_step: l.growth_bytes_per_step,
                });
            }
        }
    }
    let mut graph_growth = Vec::new();
    if let (Some(b), Some(a)) = (&before.graph_growth, &after.graph_growth) {
        let (gone, new) = unmatched(
            b,
            a,
            |x, y| x.op == y.op && same_code(&x.site, &y.site),
            |g| &g.site,
        );
        for (status, v) in [(SiteStatus::New, new), (SiteStatus::Gone, gone)] {
            for g in v {
                graph_growth.push(FindingChange {
                    status,
                    kind: FindingKind::GraphGrowth(g.op.clone()),
                    site: g.site.clone(),
                    per_step: g.nodes_per_step,
                });
            }
        }
    }
    Diff {
        schema: DIFF_SCHEMA,
        before: before.path.clone(),
        after: after.path.clone(),
        largest_growth,
        sites_recorded,
        devices,
        ooms: Delta::new(before.ooms.len() as u64, after.ooms.len() as u64),
        categories,
        steps,
        leaks,
        graph_growth,
        not_compared: not_compared(before, after),
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn lower_bounds_keep_their_sign_and_bound_the_change() {
        let m = 1u64 << 20;
        assert_eq!(
            Delta::new(100 * m, 150 * m).describe(),
            "100.0 MiB -> 150.0 MiB (+50.0 MiB, +50.0%)"
        );
        assert_eq!(
            Delta::bounded(100 * m, 150 * m, false, true).describe(),
            "100.0 MiB -> >= 150.0 MiB (at least +50.0 MiB, +50.0%)"
        );
        assert_eq!(
            Delta::bounded(100 * m, 150 * m, true, false).describe(),
            ">= 100.0 MiB -> 150.0 MiB (at most +50.0 MiB, +50.0%)"
        );
        assert_eq!(
            Delta::bounded(100 * m, 150 * m, true, true).describe(),
            ">= 100.0 MiB -> >= 150.0 MiB (change unknown: both sides are lower bounds)"
        );
    }

    use super::*;

    fn sb(line: u32, bytes: u64) -> SiteBytes {
        SiteBytes {
            site: Some(Site {
                file: "train.py".into(),
                line,
                function: "step".into(),
            }),
            bytes,
            blocks: 1,
            chain: Vec::new(),
        }
    }

    #[test]
    fn changes_are_largest_first_and_classified() {
        let before = [sb(1, 100), sb(2, 50), sb(3, 10)];
        let after = [sb(1, 100), sb(2, 20), sb(4, 500)];
        let c = site_changes(&before, &after);
        let got: Vec<(u32, SiteStatus, i64)> = c
            .iter()
            .map(|c| (c.site.as_ref().unwrap().line, c.status, c.delta_bytes))
            .collect();
        assert_eq!(
            got,
            vec![
                (4, SiteStatus::New, 500),
                (2, SiteStatus::Shrunk, -30),
                (3, SiteStatus::Gone, -10)
            ]
        );
        assert!(c[0].describe().starts_with("+500 B new train.py:4 in step"));
    }

    #[test]
    fn findings_pair_one_to_one_across_motion() {
        let at = |line: u32, function: &str| {
            Some(Site {
                file: "/box/a/train.py".into(),
                line,
                function: function.into(),
            })
        };
        // One finding moved (10 -> 14), one unchanged, one new in the same function.
        let before = [("hook", at(10, "step")), ("append", at(20, "loop"))];
        let after = [
            ("append", at(20, "loop")),
            ("hook", at(14, "step")),
            ("hook", at(30, "step")),
        ];
        let (gone, new) = unmatched(
            &before,
            &after,
            |x, y| x.0 == y.0 && same_code(&x.1, &y.1),
            |x| &x.1,
        );
        assert!(gone.is_empty(), "{gone:?}");
        assert_eq!(new.len(), 1);
        assert_eq!(new[0].1.as_ref().map(|s| s.line), Some(30));
    }
}
