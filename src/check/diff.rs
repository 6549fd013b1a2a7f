//! What changed between two captures (or a capture and a baseline): peaks, sites, categories,
//! steps, leak findings and graph growth. Answers "which change added 2 GB of activations?"
//! with the lines whose live bytes changed the most, largest first.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::summary::{DeviceSummary, InputSummary, SiteBytes};
use crate::analysis::sites::Site;
use crate::analysis::TOP_SITES;
use crate::units;

pub const DIFF_SCHEMA: &str = "memscope.diff/1";

/// How one site's live bytes changed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SiteChange {
    pub site: Option<Site>,
    /// `new`, `gone`, `grown`, `shrunk`, `same`.
    pub status: &'static str,
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
        let site = self
            .site
            .as_ref()
            .map_or_else(|| "(no Python stack)".into(), |s| s.to_string());
        let b = |v: Option<u64>| v.map_or_else(|| "absent".into(), units::bytes);
        format!(
            "{} {} {} ({} -> {}){}",
            units::signed_bytes(self.delta_bytes),
            self.status,
            site,
            b(self.before_bytes),
            b(self.after_bytes),
            if self.below_top {
                ", absent side lists only its top sites"
            } else {
                ""
            }
        )
    }
}

/// Site-by-site changes from `before` to `after`, largest absolute change first (growth first
/// on ties); unchanged sites are left out.
pub fn site_changes(before: &[SiteBytes], after: &[SiteBytes]) -> Vec<SiteChange> {
    let mut keys: Vec<&Option<Site>> = Vec::new();
    for s in before.iter().chain(after) {
        if !keys.contains(&&s.site) {
            keys.push(&s.site);
        }
    }
    let find = |v: &[SiteBytes], k: &Option<Site>| {
        v.iter()
            .filter(|s| &s.site == k)
            .map(|s| s.bytes)
            .reduce(|a, b| a + b)
    };
    let mut out: Vec<SiteChange> = keys
        .into_iter()
        .map(|k| {
            let (b, a) = (find(before, k), find(after, k));
            let delta = a.unwrap_or(0) as i64 - b.unwrap_or(0) as i64;
            let status = match (b, a) {
                (None, Some(_)) => "new",
                (Some(_), None) => "gone",
                _ if delta > 0 => "grown",
                _ if delta < 0 => "shrunk",
                _ => "same",
            };
            let below_top = match status {
                "new" => before.len() >= TOP_SITES,
                "gone" => after.len() >= TOP_SITES,
                _ => false,
            };
            SiteChange {
                site: k.clone(),
                status,
                before_bytes: b,
                after_bytes: a,
                delta_bytes: delta,
                below_top,
            }
        })
        .filter(|c| c.delta_bytes != 0)
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

/// A figure on both sides.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Delta {
    pub before: u64,
    pub after: u64,
    pub delta: i64,
}

impl Delta {
    pub fn new(before: u64, after: u64) -> Delta {
        Delta {
            before,
            after,
            delta: after as i64 - before as i64,
        }
    }

    /// `1.0 GiB -> 1.5 GiB (+512.0 MiB, +50.0%)`.
    pub fn describe(&self) -> String {
        let pct = if self.before > 0 {
            format!(", {:+.1}%", self.delta as f64 * 100.0 / self.before as f64)
        } else {
            String::new()
        };
        format!(
            "{} -> {} ({}{pct})",
            units::bytes(self.before),
            units::bytes(self.after),
            units::signed_bytes(self.delta)
        )
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceDiff {
    pub device: String,
    /// `both`, `before_only`, `after_only`.
    pub presence: &'static str,
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

/// A finding (leak or graph growth) present on one side only.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FindingChange {
    /// `new` (only after) or `gone` (only before).
    pub status: &'static str,
    pub kind: String,
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
    pub devices: Vec<DeviceDiff>,
    pub ooms: Delta,
    /// Allocated bytes by category; empty when either side has no categories.
    pub categories: Vec<NamedDelta>,
    /// Steps matched by name, largest change of the step's peak first.
    pub steps: Vec<NamedDelta>,
    pub leaks: Vec<FindingChange>,
    pub graph_growth: Vec<FindingChange>,
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
                (Some(_), Some(_)) => "both",
                (Some(_), None) => "before_only",
                _ => "after_only",
            };
            let e = empty_device(l);
            let (b, a) = (b.unwrap_or(&e), a.unwrap_or(&e));
            DeviceDiff {
                device: l.to_owned(),
                presence,
                peak_allocated: Delta::new(b.peak_allocated_bytes, a.peak_allocated_bytes),
                peak_reserved: Delta::new(b.peak_reserved_bytes, a.peak_reserved_bytes),
                end_allocated: Delta::new(b.end_allocated_bytes, a.end_allocated_bytes),
                sites_at_peak: site_changes(&b.sites_at_peak, &a.sites_at_peak),
                sites_at_end: site_changes(&b.sites_at_end, &a.sites_at_end),
            }
        })
        .collect();
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
    let steps = match (&before.steps, &after.steps) {
        (Some(b), Some(a)) => {
            let mut order: Vec<String> = b.iter().map(|s| s.name.clone()).collect();
            for s in a {
                if !order.contains(&s.name) {
                    order.push(s.name.clone());
                }
            }
            let m = |v: &Vec<super::summary::StepSummary>| {
                v.iter()
                    .map(|s| (s.name.clone(), s.peak_allocated_bytes))
                    .collect()
            };
            named(&m(b), &m(a), &order)
        }
        _ => Vec::new(),
    };
    let mut leaks = Vec::new();
    if let (Some(b), Some(a)) = (&before.leaks, &after.leaks) {
        for l in a.iter().filter(|l| !b.iter().any(|x| x.site == l.site)) {
            leaks.push(FindingChange {
                status: "new",
                kind: l.kind.clone(),
                site: l.site.clone(),
                per_step: l.growth_bytes_per_step,
            });
        }
        for l in b.iter().filter(|l| !a.iter().any(|x| x.site == l.site)) {
            leaks.push(FindingChange {
                status: "gone",
                kind: l.kind.clone(),
                site: l.site.clone(),
                per_step: l.growth_bytes_per_step,
            });
        }
    }
    let mut graph_growth = Vec::new();
    if let (Some(b), Some(a)) = (&before.graph_growth, &after.graph_growth) {
        let same = |x: &super::summary::GraphGrowthSummary,
                    y: &super::summary::GraphGrowthSummary| {
            x.op == y.op && x.site == y.site
        };
        for g in a.iter().filter(|g| !b.iter().any(|x| same(x, g))) {
            graph_growth.push(FindingChange {
                status: "new",
                kind: g.op.clone(),
                site: g.site.clone(),
                per_step: g.nodes_per_step,
            });
        }
        for g in b.iter().filter(|g| !a.iter().any(|x| same(x, g))) {
            graph_growth.push(FindingChange {
                status: "gone",
                kind: g.op.clone(),
                site: g.site.clone(),
                per_step: g.nodes_per_step,
            });
        }
    }
    Diff {
        schema: DIFF_SCHEMA,
        before: before.path.clone(),
        after: after.path.clone(),
        largest_growth,
        devices,
        ooms: Delta::new(before.ooms.len() as u64, after.ooms.len() as u64),
        categories,
        steps,
        leaks,
        graph_growth,
    }
}

#[cfg(test)]
mod tests {
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
        }
    }

    #[test]
    fn changes_are_largest_first_and_classified() {
        let before = [sb(1, 100), sb(2, 50), sb(3, 10)];
        let after = [sb(1, 100), sb(2, 20), sb(4, 500)];
        let c = site_changes(&before, &after);
        let got: Vec<(u32, &str, i64)> = c
            .iter()
            .map(|c| (c.site.as_ref().unwrap().line, c.status, c.delta_bytes))
            .collect();
        assert_eq!(
            got,
            vec![(4, "new", 500), (2, "shrunk", -30), (3, "gone", -10)]
        );
        assert!(c[0].describe().starts_with("+500 B new train.py:4 in step"));
    }
}
