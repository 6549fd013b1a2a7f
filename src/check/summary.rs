//! The small, stable summary of one capture that checks, baselines and diffs compare.
//!
//! It is read from the [`Analysis`](crate::analysis::Analysis) through its public JSON form
//! (`memscope.report/1`) rather than its Rust fields: the JSON schema is the contract that
//! only ever grows, so findings that other analyses add to it (`leaks`, `graph.growth`,
//! `steps`, `categories`) are picked up where present, and a summary of a capture analysed
//! without them says "not analysed" (`None`) instead of "none found".
//!
//! A baseline file (`memscope.baseline/1`) is a list of these summaries, one per input (one
//! per rank), with sorted keys and no timings or absolute figures that vary between runs of
//! the same program, so it can be committed and reviewed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::analysis::sites::Site;
use crate::analysis::Analysis;

pub const BASELINE_SCHEMA: &str = "memscope.baseline/1";

/// Live bytes of one site, as kept in a summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SiteBytes {
    /// `None`: blocks with no recorded Python stack.
    pub site: Option<Site>,
    pub bytes: u64,
    #[serde(default)]
    pub blocks: u64,
}

/// One device (a CUDA device of a snapshot, or a memory device of a trace).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceSummary {
    /// `cuda:0`, ...
    pub device: String,
    /// Highest allocated bytes (exact, or the highest seen in the log when not exact).
    pub peak_allocated_bytes: u64,
    pub peak_reserved_bytes: u64,
    /// Whether the peaks are exact (the log starts from an empty allocator).
    #[serde(default)]
    pub peak_exact: bool,
    /// Allocated (live) bytes at the end of the capture.
    pub end_allocated_bytes: u64,
    pub end_reserved_bytes: u64,
    /// What was live at the allocated peak, by site (largest first; the analysis keeps the top 10).
    #[serde(default)]
    pub sites_at_peak: Vec<SiteBytes>,
    /// What was live at the end, by site.
    #[serde(default)]
    pub sites_at_end: Vec<SiteBytes>,
}

/// One OOM of the capture.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OomSummary {
    pub device: String,
    /// `fragmentation`, `capacity`, `leak`, `unknown`.
    pub cause: String,
    pub requested_bytes: u64,
    pub site: Option<Site>,
    pub summary: String,
}

/// One leak finding (from the analysis' `leaks[]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LeakSummary {
    pub kind: String,
    pub site: Option<Site>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause_site: Option<Site>,
    pub growth_bytes_per_step: f64,
    pub steps: u64,
    pub live_bytes: u64,
    #[serde(default)]
    pub explanation: String,
    #[serde(default)]
    pub fix: String,
}

/// One op whose autograd graph grows every step (from the analysis' `graph.growth[]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GraphGrowthSummary {
    pub op: String,
    pub site: Option<Site>,
    pub nodes_per_step: f64,
    pub steps: u64,
}

/// One step (iteration) of the capture.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepSummary {
    pub name: String,
    pub peak_allocated_bytes: u64,
    pub end_allocated_bytes: u64,
}

/// The summary of one input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InputSummary {
    /// The path as given on the command line.
    pub path: String,
    /// `snapshot` or `trace`.
    pub kind: String,
    /// The analysis' verdict kind (`ok`, `oom_leak`, ...).
    pub verdict: String,
    pub devices: Vec<DeviceSummary>,
    #[serde(default)]
    pub ooms: Vec<OomSummary>,
    /// `None` where the analysis did not look for leaks (not "no leaks").
    #[serde(default)]
    pub leaks: Option<Vec<LeakSummary>>,
    /// `None` where the analysis did not look at the autograd graph (snapshots).
    #[serde(default)]
    pub graph_growth: Option<Vec<GraphGrowthSummary>>,
    #[serde(default)]
    pub steps: Option<Vec<StepSummary>>,
    /// Allocated bytes by category (at the peak where the analysis gives it), sorted by name.
    #[serde(default)]
    pub categories: Option<BTreeMap<String, u64>>,
}

impl InputSummary {
    /// The largest per-step growth of any leak finding (`None`: leaks not analysed).
    pub fn max_growth_per_step(&self) -> Option<(f64, Option<&LeakSummary>)> {
        let leaks = self.leaks.as_ref()?;
        Some(
            leaks
                .iter()
                .max_by(|a, b| a.growth_bytes_per_step.total_cmp(&b.growth_bytes_per_step))
                .map_or((0.0, None), |l| (l.growth_bytes_per_step, Some(l))),
        )
    }

    /// The largest graph growth, in nodes per step (`None`: graph not analysed).
    pub fn max_graph_growth(&self) -> Option<(f64, Option<&GraphGrowthSummary>)> {
        let g = self.graph_growth.as_ref()?;
        Some(
            g.iter()
                .max_by(|a, b| a.nodes_per_step.total_cmp(&b.nodes_per_step))
                .map_or((0.0, None), |g| (g.nodes_per_step, Some(g))),
        )
    }

    pub fn device(&self, label: &str) -> Option<&DeviceSummary> {
        self.devices.iter().find(|d| d.device == label)
    }

    /// The file name without directories.
    pub fn file_name(&self) -> &str {
        self.path.rsplit(['/', '\\']).next().unwrap_or(&self.path)
    }
}

/// A baseline file: `memscope.baseline/1`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    pub schema: String,
    /// The memscope version that wrote it (informative; comparisons do not depend on it).
    pub generator: String,
    pub inputs: Vec<InputSummary>,
}

impl Baseline {
    pub fn new(inputs: Vec<InputSummary>) -> Baseline {
        Baseline {
            schema: BASELINE_SCHEMA.into(),
            generator: concat!("memscope ", env!("CARGO_PKG_VERSION")).into(),
            inputs,
        }
    }

    /// Parses a baseline document, refusing other schemas with a message that says which.
    pub fn from_json(text: &str) -> Result<Baseline, String> {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        match v.get("schema").and_then(Value::as_str) {
            Some(BASELINE_SCHEMA) => {}
            Some(other) => {
                return Err(format!("schema is {other:?}, expected {BASELINE_SCHEMA:?} (write one with `memscope baseline`)"))
            }
            None => return Err(format!("no \"schema\" field: not a memscope baseline ({BASELINE_SCHEMA})")),
        }
        serde_json::from_value(v).map_err(|e| format!("malformed {BASELINE_SCHEMA} document: {e}"))
    }

    /// The baseline entry to compare input `i` of `n` against: the same index when the
    /// baseline has one entry per input, else the entry with the same file name, else the
    /// only entry.
    pub fn entry_for(&self, i: usize, n: usize, file_name: &str) -> Option<&InputSummary> {
        if self.inputs.len() == n {
            return self.inputs.get(i);
        }
        self.inputs
            .iter()
            .find(|b| b.file_name() == file_name)
            .or_else(|| (self.inputs.len() == 1).then(|| &self.inputs[0]))
    }
}

fn u64_of(v: &Value, key: &str) -> Option<u64> {
    v.get(key)
        .and_then(|x| x.as_u64().or_else(|| x.as_f64().map(|f| f.max(0.0) as u64)))
}

fn f64_of(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

fn str_of(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn site_of(v: Option<&Value>) -> Option<Site> {
    let v = v?;
    if v.is_null() {
        return None;
    }
    serde_json::from_value(v.clone()).ok()
}

fn device_label(v: Option<&Value>) -> String {
    match v {
        Some(Value::Number(n)) => format!("cuda:{n}"),
        Some(Value::String(s)) => s.clone(),
        _ => "cuda:?".into(),
    }
}

fn sites(v: Option<&Value>) -> Vec<SiteBytes> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|s| SiteBytes {
                    site: site_of(s.get("site")),
                    bytes: u64_of(s, "bytes").unwrap_or(0),
                    blocks: u64_of(s, "blocks").unwrap_or(0),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `leaks`, `steps`, ...: at the top level of the report, else gathered from every device.
fn gathered<'a>(report: &'a Value, key: &str) -> Option<Vec<&'a Value>> {
    if let Some(a) = report.get(key).and_then(Value::as_array) {
        return Some(a.iter().collect());
    }
    let mut found = false;
    let mut out = Vec::new();
    for d in report
        .get("devices")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(a) = d.get(key).and_then(Value::as_array) {
            found = true;
            out.extend(a.iter());
        }
    }
    found.then_some(out)
}

const CATEGORY_NAMES: [&str; 7] = [
    "parameter",
    "optimizer_state",
    "gradient",
    "activation",
    "temporary",
    "before_recording",
    "other",
];

/// Bytes by category from a `categories` value: an object with the category names as numeric
/// fields, or one holding such objects (`at_peak` preferred), or a list of `{category, bytes}`.
fn categories_of(v: &Value) -> Option<BTreeMap<String, u64>> {
    match v {
        Value::Object(o) => {
            let direct: BTreeMap<String, u64> = CATEGORY_NAMES
                .iter()
                .filter_map(|&n| o.get(n).and_then(Value::as_u64).map(|b| (n.to_owned(), b)))
                .collect();
            if !direct.is_empty() {
                return Some(direct);
            }
            if o.values().all(|x| x.is_u64()) && !o.is_empty() {
                return Some(
                    o.iter()
                        .filter_map(|(k, x)| x.as_u64().map(|b| (k.clone(), b)))
                        .collect(),
                );
            }
            for key in ["at_peak", "peak", "at_end", "end"] {
                if let Some(c) = o.get(key).and_then(categories_of) {
                    return Some(c);
                }
            }
            o.values().find_map(categories_of)
        }
        Value::Array(a) => {
            let m: BTreeMap<String, u64> = a
                .iter()
                .filter_map(|e| {
                    let name = e.get("category").or_else(|| e.get("name"))?.as_str()?;
                    Some((name.to_owned(), u64_of(e, "bytes")?))
                })
                .collect();
            (!m.is_empty()).then_some(m)
        }
        _ => None,
    }
}

/// Summarizes an analysis report (the `memscope.report/1` JSON value).
pub fn summarize_value(report: &Value) -> InputSummary {
    let input = report.get("input").cloned().unwrap_or(Value::Null);
    let mut devices = Vec::new();
    let mut ooms = Vec::new();
    for d in report
        .get("devices")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let label = device_label(d.get("device"));
        let end_alloc = u64_of(d, "allocated_bytes").unwrap_or(0);
        let end_res = u64_of(d, "reserved_bytes").unwrap_or(0);
        let peak_alloc = u64_of(d, "peak_allocated_bytes")
            .or_else(|| u64_of(d, "observed_peak_allocated_bytes"))
            .unwrap_or(end_alloc)
            .max(end_alloc);
        let peak_res = u64_of(d, "peak_reserved_bytes")
            .or_else(|| u64_of(d, "observed_peak_reserved_bytes"))
            .unwrap_or(end_res)
            .max(end_res);
        let mut at_peak = sites(d.get("top_sites_at_peak"));
        let at_end = sites(d.get("top_sites"));
        if at_peak.is_empty() {
            at_peak = at_end.clone();
        }
        devices.push(DeviceSummary {
            device: label.clone(),
            peak_allocated_bytes: peak_alloc,
            peak_reserved_bytes: peak_res,
            peak_exact: d
                .get("peak_exact")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            end_allocated_bytes: end_alloc,
            end_reserved_bytes: end_res,
            sites_at_peak: at_peak,
            sites_at_end: at_end,
        });
        for o in d
            .get("ooms")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            ooms.push(OomSummary {
                device: label.clone(),
                cause: str_of(o, "cause"),
                requested_bytes: u64_of(o, "rounded_bytes")
                    .or_else(|| u64_of(o, "requested_bytes"))
                    .unwrap_or(0),
                site: site_of(o.get("site")),
                summary: str_of(o, "summary"),
            });
        }
    }
    let leaks = gathered(report, "leaks").map(|ls| {
        ls.into_iter()
            .map(|l| LeakSummary {
                kind: str_of(l, "kind"),
                site: site_of(l.get("site")),
                cause_site: site_of(l.get("cause_site")),
                growth_bytes_per_step: f64_of(l, "growth_bytes_per_step").unwrap_or(0.0),
                steps: u64_of(l, "steps").unwrap_or(0),
                live_bytes: u64_of(l, "live_bytes").unwrap_or(0),
                explanation: str_of(l, "explanation"),
                fix: str_of(l, "fix"),
            })
            .collect()
    });
    let graph_growth = report.get("graph").map(|g| {
        g.get("growth")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|e| GraphGrowthSummary {
                op: str_of(e, "op"),
                site: site_of(e.get("site")),
                nodes_per_step: f64_of(e, "nodes_per_step").unwrap_or(0.0),
                steps: u64_of(e, "steps").unwrap_or(0),
            })
            .collect()
    });
    let steps = gathered(report, "steps").map(|ss| {
        ss.into_iter()
            .map(|s| StepSummary {
                name: str_of(s, "name"),
                peak_allocated_bytes: u64_of(s, "peak_allocated_bytes").unwrap_or(0),
                end_allocated_bytes: u64_of(s, "end_allocated_bytes").unwrap_or(0),
            })
            .collect()
    });
    let categories = report
        .get("categories")
        .and_then(categories_of)
        .or_else(|| {
            // Per device: summed over devices.
            let mut sum: Option<BTreeMap<String, u64>> = None;
            for d in report
                .get("devices")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(c) = d.get("categories").and_then(categories_of) {
                    let s = sum.get_or_insert_with(BTreeMap::new);
                    for (k, v) in c {
                        *s.entry(k).or_default() += v;
                    }
                }
            }
            sum
        });
    InputSummary {
        path: str_of(&input, "path"),
        kind: input
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("snapshot")
            .to_owned(),
        verdict: report
            .get("verdict")
            .map(|v| str_of(v, "kind"))
            .unwrap_or_default(),
        devices,
        ooms,
        leaks,
        graph_growth,
        steps,
        categories,
    }
}

/// Summarizes an analysis.
pub fn summarize(analysis: &Analysis) -> InputSummary {
    let v = serde_json::to_value(analysis).expect("an Analysis always serializes");
    summarize_value(&v)
}
