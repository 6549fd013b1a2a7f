//! The CI regression gate: rules over one or more captures, a baseline to compare against,
//! and diffs between captures.
//!
//! Everything works on [`InputSummary`]s, built from the analysis' typed fields by
//! [`typed`] (or read back from a summary file), so a check is a pure function of summaries
//! and settings: [`check`] takes the inputs' summaries, their `--rank`s, a [`CheckConfig`] and
//! an optional [`Baseline`], and returns a [`CheckReport`] that the `report::check_*` formats
//! render. Each rule ([`rules`], one type each) yields one [`RuleResult`] per input: `pass`,
//! `fail` or `skip` (the rule does not apply to the capture's kind, or the capture cannot
//! support a judgement, with the reason); only `fail` fails. A limit the user set that has
//! nothing to measure is a [`CheckError`] (exit 2), never a PASS. Inputs that are ranks of one
//! run and kind are grouped by [`ranks`], and imbalance is computed within a group.

pub mod config;
pub mod diff;
pub mod paths;
pub mod ranks;
pub mod rules;
pub mod summary;
pub mod typed;

use std::path::Path;

use serde::Serialize;

use crate::analysis::sites::Site;
use crate::analysis::Analysis;
use crate::units;
pub use config::{CheckConfig, FailOn};
pub use ranks::{Imbalance, RankGroup, RankRow};
pub use rules::{Measurable, Rule};
pub use summary::{Baseline, InputSummary, BASELINE_SCHEMA};
pub use typed::summarize;

/// `/2`: per-run rank groups (`groups`) replace `/1`'s `ranks` and `imbalance`, and leak
/// rules SKIP where the capture cannot support a judgement.
pub const CHECK_SCHEMA: &str = "memscope.check/2";

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

/// Whether a site is a native frame (no Python frame in its stack, e.g. the autograd
/// engine's thread or a C++ allocation): no file, no line.
pub fn is_native(site: &Site) -> bool {
    site.line == 0 && !site.file.ends_with(".py")
}

/// A site in words: `file:line in function`; `file in function` where the line is not the
/// statement's (profiler traces); `function (native; no Python frame)` for a native frame.
pub fn site_words(site: &Site, line_known: bool) -> String {
    if is_native(site) {
        format!("{} (native; no Python frame)", site.function)
    } else if line_known {
        site.to_string()
    } else {
        format!("{} in {}", site.file, site.function)
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
    /// `site.line` is not the statement's line (profiler traces record a frame's line as of
    /// when the frame was entered): name the file and function, never that line.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub line_unknown: bool,
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
            line_unknown: false,
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
            line_unknown: false,
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
    /// Events of the capture that no rule saw (skipped as invalid, undecodable, repaired):
    /// a rule's verdict may hang on them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
}

/// Everything `memscope check` found: the `memscope.check/2` JSON document.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CheckReport {
    pub schema: &'static str,
    pub passed: bool,
    pub files: Vec<FileResult>,
    /// Rules over the ranks of one run (`max-imbalance`, one per group).
    pub ranks_rules: Vec<RuleResult>,
    /// Inputs that are ranks of one run and kind (two or more each), with their imbalance.
    /// Files of different kinds (a snapshot and a trace of one run) are never ranks.
    pub groups: Vec<RankGroup>,
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

/// A limit the user set that an input holds nothing to measure against.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CheckError(pub String);

/// The rules the settings ask for, and whether each holds a limit the user set.
fn rules_of(cfg: &CheckConfig) -> Vec<(Box<dyn Rule>, bool)> {
    let mut rules: Vec<(Box<dyn Rule>, bool)> = Vec::new();
    for f in cfg.fail_on() {
        rules.push(match f {
            FailOn::Oom => (Box::new(rules::OomRule), false),
            FailOn::Fragmentation => (Box::new(rules::FragmentationRule), false),
            FailOn::Leak => (Box::new(rules::LeakRule), false),
            FailOn::GraphGrowth => (
                Box::new(rules::GraphGrowthRule {
                    id: "graph-growth",
                    limit: 0.0,
                }),
                false,
            ),
        });
    }
    if let Some(limit) = cfg.max_peak {
        rules.push((
            Box::new(rules::PeakRule {
                limit,
                reserved: false,
            }),
            true,
        ));
    }
    if let Some(limit) = cfg.max_reserved {
        rules.push((
            Box::new(rules::PeakRule {
                limit,
                reserved: true,
            }),
            true,
        ));
    }
    if let Some(limit) = cfg.max_growth_per_step {
        rules.push((Box::new(rules::GrowthPerStepRule { limit }), true));
    }
    if let Some(limit) = cfg.max_graph_growth {
        rules.push((
            Box::new(rules::GraphGrowthRule {
                id: "max-graph-growth",
                limit,
            }),
            true,
        ));
    }
    rules
}

/// Runs every configured rule over `inputs`; `explicit_ranks[i]` is input `i`'s `--rank`.
///
/// A limit the user set (`--max-peak`, `--max-reserved`, `--max-growth-per-step`,
/// `--max-graph-growth`, `--max-imbalance`) is an error where an input of a kind it applies
/// to holds nothing to measure (a trace without memory events, a capture too short to judge
/// growth), or where no input is of such a kind: never a silent PASS.
pub fn check(
    inputs: &[InputSummary],
    explicit_ranks: &[Option<u32>],
    cfg: &CheckConfig,
    baseline: Option<(&str, &Baseline)>,
) -> Result<CheckReport, CheckError> {
    // Two files given one `--rank`: the user's numbering is contradictory, not absent.
    for (i, r) in explicit_ranks.iter().enumerate() {
        let Some(r) = r else { continue };
        if let Some(j) = explicit_ranks[..i].iter().position(|x| x == &Some(*r)) {
            if let (Some(a), Some(b)) = (inputs.get(j), inputs.get(i)) {
                return Err(CheckError(format!(
                    "--rank {r} is given to two files: {} and {}",
                    a.path, b.path
                )));
            }
        }
    }
    let rules = rules_of(cfg);
    for (rule, set) in &rules {
        if !*set {
            continue;
        }
        let mut applies = false;
        for s in inputs {
            match rule.measurable(s) {
                Measurable::Yes => applies = true,
                Measurable::NotThisKind(_) => {}
                Measurable::Nothing(why) => {
                    return Err(CheckError(format!(
                        "--{} is set, but {} has nothing to measure: {why}",
                        rule.id(),
                        s.path
                    )))
                }
            }
        }
        if !applies && !inputs.is_empty() {
            let why = match rule.measurable(&inputs[0]) {
                Measurable::NotThisKind(w) | Measurable::Nothing(w) => w,
                Measurable::Yes => String::new(),
            };
            return Err(CheckError(format!(
                "--{} is set, but no input has anything to measure: {why}",
                rule.id()
            )));
        }
    }
    let mut files = Vec::new();
    for (i, s) in inputs.iter().enumerate() {
        let mut results: Vec<RuleResult> = rules.iter().map(|(r, _)| r.apply(s)).collect();
        let line_unknown = !rules::lines_known(s);
        if let Some((_, b)) = baseline {
            match b.entry_for(i, inputs.len(), s.file_name()) {
                Some(e) => rules::baseline_rules(s, e, cfg.tolerance(), &mut results),
                None => results.push(RuleResult {
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
                    line_unknown: false,
                    evidence: Vec::new(),
                }),
            }
        }
        for r in &mut results {
            r.line_unknown = line_unknown && r.site.is_some();
        }
        files.push(FileResult {
            path: s.path.clone(),
            kind: s.kind.clone(),
            passed: !results.iter().any(RuleResult::failed),
            rules: results,
            skipped: s.load_notes.clone(),
        });
    }
    let passed: Vec<bool> = files.iter().map(|f| f.passed).collect();
    let groups = ranks::group(inputs, explicit_ranks, &passed);
    let mut ranks_rules = Vec::new();
    if let Some(l) = cfg.max_imbalance {
        if groups.is_empty() && inputs.len() > 1 {
            return Err(CheckError(
                "--max-imbalance is set, but no two inputs are ranks of one run and kind \
                 (a snapshot and a trace are two views of one rank; give ranks with --rank N=FILE)"
                    .into(),
            ));
        }
        if groups.is_empty() {
            return Err(CheckError(
                "--max-imbalance is set, but there is one input: imbalance needs two ranks".into(),
            ));
        }
        for g in &groups {
            let Some(im) = &g.imbalance else {
                let r = g.ranks.iter().find(|r| !r.has_memory);
                return Err(CheckError(format!(
                    "--max-imbalance is set, but rank {} of the {} ({}) recorded no device memory",
                    r.map_or(0, |r| r.rank),
                    g.label(),
                    r.map_or("", |r| r.path.as_str())
                )));
            };
            let mut r = RuleResult::limit(
                "max-imbalance",
                Unit::Fraction,
                im.fraction,
                l,
                &format!("peak imbalance between {}", g.label()),
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
    }
    let passed = files.iter().all(|f| f.passed) && !ranks_rules.iter().any(RuleResult::failed);
    Ok(CheckReport {
        schema: CHECK_SCHEMA,
        passed,
        files,
        ranks_rules,
        groups,
        config: CheckConfig {
            fail_on: Some(cfg.fail_on()),
            tolerance: Some(cfg.tolerance()),
            ..cfg.clone()
        },
        baseline: baseline.map(|(p, _)| p.to_owned()),
    })
}

/// What a file given to `check`, `baseline` or `diff` turned out to be.
pub enum Loaded {
    Analysis(Box<Analysis>),
    Baseline(Baseline),
    /// A profiler trace, summarized (with its `distributedInfo` rank, where it has one).
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
    let a = crate::analysis::analyze_trace(&trace, path, file_len);
    let mut s = summarize(&a);
    s.rank = distributed_info(bytes);
    Ok(Loaded::Trace(Box::new(s)))
}

/// The trace's `distributedInfo` (`{"backend": "nccl", "rank": 0, "world_size": 128}`, which
/// Kineto writes at the top level of a distributed run's trace), read from the raw text.
pub fn distributed_info(bytes: &[u8]) -> Option<summary::RankInfo> {
    const KEY: &[u8] = b"\"distributedInfo\"";
    let at = bytes.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let open = at + bytes[at..].iter().position(|&b| b == b'{')?;
    // The matching brace (`pg_config` nests objects), outside strings; bounded so that a
    // hostile file costs little.
    let (mut depth, mut in_str, mut esc) = (0usize, false, false);
    let mut end = None;
    for (i, &b) in bytes[open..].iter().enumerate().take(1 << 20) {
        match (in_str, esc, b) {
            (true, true, _) => esc = false,
            (true, false, b'\\') => esc = true,
            (true, false, b'"') => in_str = false,
            (true, false, _) => {}
            (false, _, b'"') => in_str = true,
            (false, _, b'{') => depth += 1,
            (false, _, b'}') => {
                depth -= 1;
                if depth == 0 {
                    end = Some(open + i);
                    break;
                }
            }
            _ => {}
        }
    }
    let v: serde_json::Value = serde_json::from_slice(&bytes[open..=end?]).ok()?;
    let num = |k: &str| v.get(k)?.as_u64().and_then(|n| u32::try_from(n).ok());
    Some(summary::RankInfo {
        rank: num("rank")?,
        world_size: num("world_size"),
        source: summary::RankSource::DistributedInfo,
    })
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
    Ok(load_summaries_per_file(paths, allow_baseline, progress)?
        .into_iter()
        .flatten()
        .collect())
}

/// [`load_summaries_with_progress`], one list per file (a summary file holds several).
pub fn load_summaries_per_file(
    paths: &[impl AsRef<Path> + Sync],
    allow_baseline: bool,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<Vec<Vec<InputSummary>>, InputError> {
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
            Loaded::Trace(mut s) => {
                s.path = p.display().to_string();
                vec![*s]
            }
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
        out.push(r.expect("every index was taken by a worker")?);
    }
    Ok(out)
}
