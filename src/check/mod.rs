//! The CI regression gate: rules over one or more captures, a baseline to compare against,
//! and diffs between captures.
//!
//! Everything works on [`InputSummary`]s (see [`summary`]), so a check is a pure function of
//! summaries and settings: [`check`] takes the inputs' summaries, a [`CheckConfig`] and an
//! optional [`Baseline`], and returns a [`CheckReport`] that the `report::check_*` formats
//! render. Each rule yields one [`RuleResult`] per input, `pass`, `fail` or `skip` (the
//! analysis had nothing to measure, e.g. graph growth of a snapshot); only `fail` fails.

pub mod config;
pub mod diff;
pub mod summary;

use std::path::Path;

use serde::Serialize;

use crate::analysis::sites::Site;
use crate::analysis::Analysis;
use crate::units;
pub use config::{CheckConfig, FailOn};
pub use summary::{summarize, Baseline, InputSummary, BASELINE_SCHEMA};

pub const CHECK_SCHEMA: &str = "memscope.check/1";

/// How many evidence lines a failure keeps.
const EVIDENCE: usize = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Fail,
    Skip,
}

impl Status {
    pub fn label(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Fail => "FAIL",
            Status::Skip => "SKIP",
        }
    }
}

/// What a rule measures, for formatting values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Bytes,
    BytesPerStep,
    NodesPerStep,
    Count,
    Fraction,
}

impl Unit {
    pub fn format(self, v: f64) -> String {
        match self {
            Unit::Bytes => units::bytes(v.max(0.0).round() as u64),
            Unit::BytesPerStep => format!("{}/step", units::bytes(v.max(0.0).round() as u64)),
            Unit::NodesPerStep => format!("{} nodes/step", trim_float(v)),
            Unit::Count => format!("{}", v.round() as i64),
            Unit::Fraction => format!("{:.1}%", v * 100.0),
        }
    }
}

fn trim_float(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round() as i64)
    } else {
        format!("{v:.2}")
    }
}

/// The outcome of one rule on one input.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RuleResult {
    /// `oom`, `leak`, `fragmentation`, `graph-growth`, `max-peak`, `max-reserved`,
    /// `max-growth-per-step`, `max-graph-growth`, `baseline-peak`, `baseline-reserved`,
    /// `baseline-live`, `baseline-growth-per-step`, `baseline-graph-growth`, `max-imbalance`.
    pub rule: &'static str,
    pub status: Status,
    /// The measured value and the limit it was held to (absent for a skipped rule).
    pub measured: Option<f64>,
    pub limit: Option<f64>,
    pub unit: Unit,
    /// One line: the measurement against the limit, or why the rule was skipped.
    pub message: String,
    /// The line responsible for a failure, where one is known.
    pub site: Option<Site>,
    pub evidence: Vec<String>,
}

impl RuleResult {
    fn skip(rule: &'static str, unit: Unit, why: impl Into<String>) -> RuleResult {
        RuleResult {
            rule,
            status: Status::Skip,
            measured: None,
            limit: None,
            unit,
            message: why.into(),
            site: None,
            evidence: Vec::new(),
        }
    }

    /// `measured <= limit` passes.
    fn limit(rule: &'static str, unit: Unit, measured: f64, limit: f64, what: &str) -> RuleResult {
        let ok = measured <= limit;
        let op = if ok { "<=" } else { ">" };
        RuleResult {
            rule,
            status: if ok { Status::Pass } else { Status::Fail },
            measured: Some(measured),
            limit: Some(limit),
            unit,
            message: format!(
                "{what} {} {op} limit {}",
                unit.format(measured),
                unit.format(limit)
            ),
            site: None,
            evidence: Vec::new(),
        }
    }

    fn failed(&self) -> bool {
        self.status == Status::Fail
    }

    /// The measured value, formatted (`-` when skipped).
    pub fn measured_text(&self) -> String {
        self.measured
            .map_or_else(|| "-".into(), |v| self.unit.format(v))
    }

    pub fn limit_text(&self) -> String {
        self.limit
            .map_or_else(|| "-".into(), |v| self.unit.format(v))
    }
}

/// The rules' outcomes for one input.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FileResult {
    pub path: String,
    pub kind: String,
    pub passed: bool,
    pub rules: Vec<RuleResult>,
}

/// One row of the per-rank table (several inputs are taken as ranks, in the order given).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RankRow {
    pub rank: usize,
    pub path: String,
    pub peak_allocated_bytes: u64,
    pub peak_reserved_bytes: u64,
    pub end_allocated_bytes: u64,
    pub ooms: usize,
    /// `None`: leaks not analysed.
    pub leaks: Option<usize>,
    pub passed: bool,
}

/// How far apart the ranks' peaks are.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Imbalance {
    /// `(max - min) / max` of the ranks' peak allocated bytes.
    pub fraction: f64,
    pub max_rank: usize,
    pub max_bytes: u64,
    pub min_rank: usize,
    pub min_bytes: u64,
}

/// Everything `memscope check` found: the `memscope.check/1` JSON document.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CheckReport {
    pub schema: &'static str,
    pub passed: bool,
    pub files: Vec<FileResult>,
    /// Rules over all inputs together (`max-imbalance`).
    pub ranks_rules: Vec<RuleResult>,
    /// Present with two inputs or more.
    pub ranks: Vec<RankRow>,
    pub imbalance: Option<Imbalance>,
    /// The settings the rules ran with.
    pub config: CheckConfig,
    /// Where the baseline came from, when one was used.
    pub baseline: Option<String>,
}

impl CheckReport {
    /// Every (file or `ranks`, rule) pair, in output order.
    pub fn all_rules(&self) -> impl Iterator<Item = (&str, &RuleResult)> {
        self.files
            .iter()
            .flat_map(|f| f.rules.iter().map(move |r| (f.path.as_str(), r)))
            .chain(self.ranks_rules.iter().map(|r| ("ranks", r)))
    }

    pub fn counts(&self) -> (usize, usize, usize) {
        let mut c = (0, 0, 0);
        for (_, r) in self.all_rules() {
            match r.status {
                Status::Pass => c.0 += 1,
                Status::Fail => c.1 += 1,
                Status::Skip => c.2 += 1,
            }
        }
        c
    }
}

fn site_text(s: &Option<Site>) -> String {
    s.as_ref()
        .map_or_else(|| "(no Python stack)".into(), |s| s.to_string())
}

fn site_lines(sites: &[summary::SiteBytes]) -> Vec<String> {
    sites
        .iter()
        .take(EVIDENCE)
        .map(|s| format!("{} held by {}", units::bytes(s.bytes), site_text(&s.site)))
        .collect()
}

/// The device with the largest value of `f`.
fn worst(
    s: &InputSummary,
    f: impl Fn(&summary::DeviceSummary) -> u64,
) -> Option<&summary::DeviceSummary> {
    s.devices.iter().max_by_key(|d| f(d))
}

fn rule_oom(s: &InputSummary) -> RuleResult {
    let n = s.ooms.len();
    let mut r = RuleResult::limit("oom", Unit::Count, n as f64, 0.0, "OOMs:");
    if let Some(o) = s.ooms.last() {
        r.message = format!(
            "{n} OOM{} recorded; the last requested {} on {}, cause: {}",
            if n == 1 { "" } else { "s" },
            units::bytes(o.requested_bytes),
            o.device,
            o.cause
        );
        r.site = o.site.clone();
        r.evidence.push(o.summary.clone());
    } else {
        r.message = "no OOM recorded".into();
    }
    r
}

fn rule_fragmentation(s: &InputSummary) -> RuleResult {
    let frag: Vec<_> = s
        .ooms
        .iter()
        .filter(|o| o.cause == "fragmentation")
        .collect();
    let mut r = RuleResult::limit(
        "fragmentation",
        Unit::Count,
        frag.len() as f64,
        0.0,
        "fragmentation OOMs:",
    );
    match frag.last() {
        Some(o) => {
            r.message = format!(
                "OOM caused by fragmentation on {}: {} request did not fit",
                o.device,
                units::bytes(o.requested_bytes)
            );
            r.site = o.site.clone();
            r.evidence.push(o.summary.clone());
        }
        None => r.message = "no OOM caused by fragmentation".into(),
    }
    r
}

fn rule_leak(s: &InputSummary) -> RuleResult {
    let Some(leaks) = &s.leaks else {
        if let Some(o) = s.ooms.iter().rev().find(|o| o.cause == "leak") {
            let mut r = RuleResult::limit("leak", Unit::Count, 1.0, 0.0, "leaks:");
            r.message = format!("the OOM on {} was caused by a leak", o.device);
            r.site = o.site.clone();
            r.evidence.push(o.summary.clone());
            return r;
        }
        return RuleResult::skip("leak", Unit::Count, "this analysis has no leak findings");
    };
    let mut r = RuleResult::limit("leak", Unit::Count, leaks.len() as f64, 0.0, "leaks:");
    let worst = leaks
        .iter()
        .max_by(|a, b| a.growth_bytes_per_step.total_cmp(&b.growth_bytes_per_step));
    match worst {
        Some(l) => {
            r.message = format!(
                "{} leak finding{}; the largest ({}) grows {}/step over {} steps, {} live",
                leaks.len(),
                if leaks.len() == 1 { "" } else { "s" },
                l.kind,
                units::bytes(l.growth_bytes_per_step.round() as u64),
                l.steps,
                units::bytes(l.live_bytes)
            );
            r.site = l.site.clone();
            leak_evidence(l, &mut r.evidence);
        }
        None => r.message = "no leak found".into(),
    }
    r
}

fn leak_evidence(l: &summary::LeakSummary, ev: &mut Vec<String>) {
    if let Some(c) = &l.cause_site {
        ev.push(format!("kept alive by {c}"));
    }
    if !l.explanation.is_empty() {
        ev.push(l.explanation.clone());
    }
    if !l.fix.is_empty() {
        ev.push(format!("fix: {}", l.fix));
    }
}

fn graph_evidence(g: &summary::GraphGrowthSummary) -> String {
    format!(
        "{} adds {} autograd nodes per step over {} steps at {}",
        g.op,
        trim_float(g.nodes_per_step),
        g.steps,
        site_text(&g.site)
    )
}

fn rule_graph(s: &InputSummary, rule: &'static str, limit: f64) -> RuleResult {
    let Some((max, g)) = s.max_graph_growth() else {
        return RuleResult::skip(
            rule,
            Unit::NodesPerStep,
            format!(
                "no autograd graph in a {} (profiler traces have one)",
                s.kind
            ),
        );
    };
    let mut r = RuleResult::limit(rule, Unit::NodesPerStep, max, limit, "graph growth");
    if let Some(g) = g {
        r.message = format!("{}: {}", r.message, g.op);
        r.site = g.site.clone();
        if r.failed() {
            for g in s.graph_growth.iter().flatten().take(EVIDENCE) {
                r.evidence.push(graph_evidence(g));
            }
        }
    }
    r
}

fn rule_peak(s: &InputSummary, rule: &'static str, limit: u64, reserved: bool) -> RuleResult {
    let what = if reserved {
        "peak reserved"
    } else {
        "peak allocated"
    };
    let get = |d: &summary::DeviceSummary| {
        if reserved {
            d.peak_reserved_bytes
        } else {
            d.peak_allocated_bytes
        }
    };
    let Some(d) = worst(s, get) else {
        return RuleResult::skip(rule, Unit::Bytes, "no device memory recorded");
    };
    let mut r = RuleResult::limit(
        rule,
        Unit::Bytes,
        get(d) as f64,
        limit as f64,
        &format!("{what} on {}", d.device),
    );
    if !d.peak_exact && s.kind == "snapshot" {
        r.message
            .push_str(" (a lower bound: history before the log is missing)");
    }
    if r.failed() {
        r.site = d.sites_at_peak.first().and_then(|x| x.site.clone());
        r.evidence = site_lines(&d.sites_at_peak);
    }
    r
}

fn rule_growth(s: &InputSummary, limit: u64) -> RuleResult {
    let rule = "max-growth-per-step";
    let Some((max, l)) = s.max_growth_per_step() else {
        return RuleResult::skip(
            rule,
            Unit::BytesPerStep,
            "this analysis has no per-step growth findings",
        );
    };
    let mut r = RuleResult::limit(
        rule,
        Unit::BytesPerStep,
        max,
        limit as f64,
        "largest growth",
    );
    if let Some(l) = l {
        r.site = l.site.clone();
        if r.failed() {
            r.evidence.push(format!(
                "{} over {} steps, {} live ({})",
                site_text(&l.site),
                l.steps,
                units::bytes(l.live_bytes),
                l.kind
            ));
            leak_evidence(l, &mut r.evidence);
        }
    }
    r
}

/// Rules against the baseline entry `b`.
fn baseline_rules(s: &InputSummary, b: &InputSummary, tol: f64, out: &mut Vec<RuleResult>) {
    let grown = |x: u64| x as f64 * (1.0 + tol);
    type Get = fn(&summary::DeviceSummary) -> u64;
    let specs: [(&'static str, &str, Get, bool); 3] = [
        (
            "baseline-peak",
            "peak allocated",
            |d| d.peak_allocated_bytes,
            true,
        ),
        (
            "baseline-reserved",
            "peak reserved",
            |d| d.peak_reserved_bytes,
            true,
        ),
        (
            "baseline-live",
            "live at the end",
            |d| d.end_allocated_bytes,
            false,
        ),
    ];
    for (rule, what, get, at_peak) in specs {
        // The device that exceeds its baseline by the most.
        let mut best: Option<RuleResult> = None;
        for d in &s.devices {
            let Some(bd) = b.device(&d.device) else {
                continue;
            };
            let mut r = RuleResult::limit(
                rule,
                Unit::Bytes,
                get(d) as f64,
                grown(get(bd)),
                &format!("{what} on {}", d.device),
            );
            r.message.push_str(&format!(
                " (baseline {} + {:.1}%)",
                units::bytes(get(bd)),
                tol * 100.0
            ));
            if r.failed() {
                let (now, then) = if at_peak {
                    (&d.sites_at_peak, &bd.sites_at_peak)
                } else {
                    (&d.sites_at_end, &bd.sites_at_end)
                };
                let changes = diff::site_changes(then, now);
                r.site = changes
                    .iter()
                    .find(|c| c.delta_bytes > 0)
                    .and_then(|c| c.site.clone());
                r.evidence = changes
                    .iter()
                    .filter(|c| c.delta_bytes > 0)
                    .take(EVIDENCE)
                    .map(|c| c.describe())
                    .collect();
            }
            let excess = r.measured.unwrap_or(0.0) - r.limit.unwrap_or(0.0);
            if best
                .as_ref()
                .is_none_or(|b| excess > b.measured.unwrap_or(0.0) - b.limit.unwrap_or(0.0))
            {
                best = Some(r);
            }
        }
        out.push(best.unwrap_or_else(|| {
            RuleResult::skip(rule, Unit::Bytes, "no device in common with the baseline")
        }));
    }
    match (s.max_growth_per_step(), b.max_growth_per_step()) {
        (Some((now, l)), Some((then, _))) => {
            let mut r = RuleResult::limit(
                "baseline-growth-per-step",
                Unit::BytesPerStep,
                now,
                then * (1.0 + tol),
                "largest growth",
            );
            if r.failed() {
                if let Some(l) = l {
                    r.site = l.site.clone();
                    leak_evidence(l, &mut r.evidence);
                }
            }
            out.push(r);
        }
        _ => out.push(RuleResult::skip(
            "baseline-growth-per-step",
            Unit::BytesPerStep,
            "per-step growth not analysed in the input or the baseline",
        )),
    }
    match (s.max_graph_growth(), b.max_graph_growth()) {
        (Some((now, g)), Some((then, _))) => {
            let mut r = RuleResult::limit(
                "baseline-graph-growth",
                Unit::NodesPerStep,
                now,
                then * (1.0 + tol),
                "graph growth",
            );
            if r.failed() {
                if let Some(g) = g {
                    r.site = g.site.clone();
                    r.evidence.push(graph_evidence(g));
                }
            }
            out.push(r);
        }
        (None, None) => {}
        _ => out.push(RuleResult::skip(
            "baseline-graph-growth",
            Unit::NodesPerStep,
            "graph growth analysed on one side only",
        )),
    }
}

fn peak_of(s: &InputSummary) -> u64 {
    s.devices
        .iter()
        .map(|d| d.peak_allocated_bytes)
        .max()
        .unwrap_or(0)
}

/// Runs every configured rule over `inputs` (one per rank when several).
pub fn check(
    inputs: &[InputSummary],
    cfg: &CheckConfig,
    baseline: Option<(&str, &Baseline)>,
) -> CheckReport {
    let fail_on = cfg.fail_on();
    let mut files = Vec::new();
    for (i, s) in inputs.iter().enumerate() {
        let mut rules = Vec::new();
        for f in &fail_on {
            rules.push(match f {
                FailOn::Oom => rule_oom(s),
                FailOn::Fragmentation => rule_fragmentation(s),
                FailOn::Leak => rule_leak(s),
                FailOn::GraphGrowth => rule_graph(s, "graph-growth", 0.0),
            });
        }
        if let Some(l) = cfg.max_peak {
            rules.push(rule_peak(s, "max-peak", l, false));
        }
        if let Some(l) = cfg.max_reserved {
            rules.push(rule_peak(s, "max-reserved", l, true));
        }
        if let Some(l) = cfg.max_growth_per_step {
            rules.push(rule_growth(s, l));
        }
        if let Some(l) = cfg.max_graph_growth {
            rules.push(rule_graph(s, "max-graph-growth", l));
        }
        if let Some((_, b)) = baseline {
            match b.entry_for(i, inputs.len(), s.file_name()) {
                Some(e) => baseline_rules(s, e, cfg.tolerance(), &mut rules),
                None => rules.push(RuleResult {
                    rule: "baseline",
                    status: Status::Fail,
                    measured: None,
                    limit: None,
                    unit: Unit::Count,
                    message: format!(
                        "no entry for {} in the baseline ({} entries)",
                        s.file_name(),
                        b.inputs.len()
                    ),
                    site: None,
                    evidence: Vec::new(),
                }),
            }
        }
        files.push(FileResult {
            path: s.path.clone(),
            kind: s.kind.clone(),
            passed: !rules.iter().any(RuleResult::failed),
            rules,
        });
    }
    let mut ranks = Vec::new();
    let mut imbalance = None;
    let mut ranks_rules = Vec::new();
    if inputs.len() > 1 {
        for (i, (s, f)) in inputs.iter().zip(&files).enumerate() {
            ranks.push(RankRow {
                rank: i,
                path: s.path.clone(),
                peak_allocated_bytes: peak_of(s),
                peak_reserved_bytes: s
                    .devices
                    .iter()
                    .map(|d| d.peak_reserved_bytes)
                    .max()
                    .unwrap_or(0),
                end_allocated_bytes: s
                    .devices
                    .iter()
                    .map(|d| d.end_allocated_bytes)
                    .max()
                    .unwrap_or(0),
                ooms: s.ooms.len(),
                leaks: s.leaks.as_ref().map(Vec::len),
                passed: f.passed,
            });
        }
        let max = ranks
            .iter()
            .max_by_key(|r| (r.peak_allocated_bytes, std::cmp::Reverse(r.rank)))
            .unwrap();
        let min = ranks
            .iter()
            .min_by_key(|r| (r.peak_allocated_bytes, r.rank))
            .unwrap();
        let fraction = if max.peak_allocated_bytes == 0 {
            0.0
        } else {
            (max.peak_allocated_bytes - min.peak_allocated_bytes) as f64
                / max.peak_allocated_bytes as f64
        };
        let im = Imbalance {
            fraction,
            max_rank: max.rank,
            max_bytes: max.peak_allocated_bytes,
            min_rank: min.rank,
            min_bytes: min.peak_allocated_bytes,
        };
        if let Some(l) = cfg.max_imbalance {
            let mut r = RuleResult::limit(
                "max-imbalance",
                Unit::Fraction,
                fraction,
                l,
                "peak imbalance between ranks",
            );
            r.evidence.push(format!(
                "rank {} peaks at {}, rank {} at {}",
                im.max_rank,
                units::bytes(im.max_bytes),
                im.min_rank,
                units::bytes(im.min_bytes)
            ));
            ranks_rules.push(r);
        }
        imbalance = Some(im);
    }
    let passed = files.iter().all(|f| f.passed) && !ranks_rules.iter().any(RuleResult::failed);
    CheckReport {
        schema: CHECK_SCHEMA,
        passed,
        files,
        ranks_rules,
        ranks,
        imbalance,
        config: CheckConfig {
            fail_on: Some(fail_on),
            tolerance: Some(cfg.tolerance()),
            ..cfg.clone()
        },
        baseline: baseline.map(|(p, _)| p.to_owned()),
    }
}

/// What a file given to `check`, `baseline` or `diff` turned out to be.
pub enum Loaded {
    Analysis(Box<Analysis>),
    Baseline(Baseline),
    /// A profiler trace, summarized from its memory timeline and autograd graph.
    Trace(Box<InputSummary>),
}

/// An error loading an input, already phrased for the user (it names the file).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InputError(pub String);

/// Loads a capture (snapshot or profiler trace, by content) and analyses it, or reads a
/// `memscope.baseline/1` file when `allow_baseline`.
pub fn load(path: &Path, allow_baseline: bool) -> Result<Loaded, InputError> {
    let err = |e: crate::load::LoadError| InputError(e.to_string());
    let bytes = crate::load::read_input(path).map_err(err)?;
    let file_len = bytes.stored_len;
    if crate::load::sniff(&bytes) == crate::load::Sniffed::Json {
        let head = String::from_utf8_lossy(&bytes[..bytes.len().min(256)]);
        if head.contains(BASELINE_SCHEMA) || head.contains("\"memscope.") {
            if !allow_baseline {
                return Err(InputError(format!(
                    "{}: this is a memscope JSON document, not a capture",
                    path.display()
                )));
            }
            let text = std::str::from_utf8(&bytes)
                .map_err(|_| InputError(format!("{}: not UTF-8", path.display())))?;
            return Baseline::from_json(text)
                .map(Loaded::Baseline)
                .map_err(|e| InputError(format!("{}: {e}", path.display())));
        }
        let r = analyze_trace_bytes(path, &bytes, file_len);
        return match bytes.settle(path, Ok(())) {
            Ok(()) => r,
            Err(e) => Err(err(e)),
        };
    }
    let snap = crate::load::snapshot_from_read(path, &bytes).map_err(err)?;
    drop(bytes);
    Ok(Loaded::Analysis(Box::new(
        crate::analysis::analyze_snapshot(&snap, path, file_len),
    )))
}

fn analyze_trace_bytes(path: &Path, bytes: &[u8], file_len: u64) -> Result<Loaded, InputError> {
    let trace =
        crate::load::trace_from_bytes(path, bytes).map_err(|e| InputError(e.to_string()))?;
    Ok(Loaded::Analysis(Box::new(crate::analysis::analyze_trace(
        &trace, path, file_len,
    ))))
}

/// Loads inputs and summarizes them; a baseline file given as input contributes its entries.
pub fn load_summaries(
    paths: &[impl AsRef<Path> + Sync],
    allow_baseline: bool,
) -> Result<Vec<InputSummary>, InputError> {
    load_summaries_with_progress(paths, allow_baseline, &|_| {})
}

/// [`load_summaries`] on every core: one rank's trace per worker, results in the order given.
/// `progress` is called with the number of files done after each one (from the workers).
pub fn load_summaries_with_progress(
    paths: &[impl AsRef<Path> + Sync],
    allow_baseline: bool,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<Vec<InputSummary>, InputError> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let one = |p: &Path| -> Result<Vec<InputSummary>, InputError> {
        Ok(match load(p, allow_baseline)? {
            Loaded::Analysis(a) => {
                let mut s = summarize(&a);
                s.path = p.display().to_string();
                vec![s]
            }
            Loaded::Baseline(b) => b.inputs,
            Loaded::Trace(s) => vec![*s],
        })
    };
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(paths.len())
        .max(1);
    type Slot = Option<Result<Vec<InputSummary>, InputError>>;
    let results: Mutex<Vec<Slot>> = Mutex::new((0..paths.len()).map(|_| None).collect());
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(p) = paths.get(i) else { break };
                // One file per core already: keep each file's parsing on its own thread.
                let r = if workers > 1 {
                    crate::load::chrome::single_threaded(|| one(p.as_ref()))
                } else {
                    one(p.as_ref())
                };
                results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
                progress(done.fetch_add(1, Ordering::Relaxed) + 1);
            });
        }
    });
    let mut out = Vec::new();
    for r in results.into_inner().unwrap_or_else(|e| e.into_inner()) {
        out.extend(r.expect("every index was taken by a worker")?);
    }
    Ok(out)
}
