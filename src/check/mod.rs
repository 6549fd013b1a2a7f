//! The CI regression gate: rules over one or more captures, a baseline to compare against,
//! and diffs between captures.
//!
//! Everything works on [`InputSummary`]s, built from the analysis' typed fields by
//! [`typed`] (or read back from a summary file), so a check is a pure function of summaries
//! and settings: [`check`] takes the inputs' summaries, their `--rank`s, a [`CheckConfig`] and
//! an optional [`Baseline`], and returns a [`CheckReport`] that the `report::check` formats
//! render. Each rule ([`rules`], one file each) yields one [`RuleResult`] per input: `pass`,
//! `fail` or `skip` (the rule does not apply to the capture's kind, or the capture cannot
//! support a judgement, with the reason); only `fail` fails. A limit the user set that has
//! nothing to measure is a [`CheckError`] (exit 2), never a PASS. Inputs that are ranks of one
//! run and kind are grouped by [`ranks`], and imbalance is computed within a group. Reading the
//! files (captures, traces, baselines) and summarising them is [`crate::inputs`]' job.

pub mod config;
pub mod diff;
pub mod imbalance;
pub mod paths;
pub mod ranks;
pub mod rules;
pub mod summary;
pub mod typed;

use serde::Serialize;

use crate::analysis::sites::Site;
use crate::analysis::CaptureKind;
pub use config::{CheckConfig, ConfigError, FailOn};
pub use ranks::{Imbalance, RankGroup, RankRow};
pub use rules::{Measurable, Rule, RuleId};
pub use summary::{Baseline, InputSummary, BASELINE_SCHEMA};
pub use typed::summarize;

/// `/2`: per-run rank groups (`groups`) replace `/1`'s `ranks` and `imbalance`, and leak
/// rules SKIP where the capture cannot support a judgement.
pub const CHECK_SCHEMA: &str = "memscope.check/3";

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

use crate::wording::gate as words;
pub use crate::wording::gate::{Held, Measure, RankPeakUnknown, Reason, Skip, Unit};

pub use crate::wording::gate::{is_native, site_words};

/// The outcome of one rule on one input.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RuleResult {
    /// Which rule (its kebab-case name in every output: `oom`, `max-peak`, ...).
    pub rule: RuleId,
    pub status: Status,
    /// The measured value and the limit it was held to (absent for a skipped rule).
    pub measured: Option<f64>,
    pub limit: Option<f64>,
    pub unit: Unit,
    /// One line: the measurement against the limit, or why the rule was skipped; the words
    /// of `reason` ([`crate::wording::gate`]).
    pub message: String,
    /// The outcome, typed: in JSON its stable snake_case code (`over_limit`, `leaks_not_judged`).
    pub reason: Reason,
    /// The line responsible for a failure, where one is known.
    pub site: Option<Site>,
    /// `site.line` is not the statement's line (profiler traces record a frame's line as of
    /// when the frame was entered): name the file and function, never that line.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub line_unknown: bool,
    pub evidence: Vec<String>,
}

impl RuleResult {
    fn skip(rule: RuleId, unit: Unit, why: Skip) -> RuleResult {
        let reason = Reason::Skip(why);
        RuleResult {
            rule,
            status: Status::Skip,
            measured: None,
            limit: None,
            unit,
            message: reason.to_string(),
            reason,
            site: None,
            line_unknown: false,
            evidence: Vec::new(),
        }
    }

    /// `measured <= limit` passes.
    fn limit(rule: RuleId, unit: Unit, measured: f64, limit: f64, what: Measure) -> RuleResult {
        let ok = measured <= limit;
        let held = Held {
            measure: what,
            unit,
            measured,
            limit,
            caveats: Vec::new(),
        };
        let reason = if ok {
            Reason::Within(held)
        } else {
            Reason::Over(held)
        };
        RuleResult {
            rule,
            status: if ok { Status::Pass } else { Status::Fail },
            measured: Some(measured),
            limit: Some(limit),
            unit,
            message: reason.to_string(),
            reason,
            site: None,
            line_unknown: false,
            evidence: Vec::new(),
        }
    }

    /// The outcome is `reason` (its message with it), the status as measured.
    fn say(&mut self, reason: Reason) {
        self.message = reason.to_string();
        self.reason = reason;
    }

    /// Adds what is said after a figure held to a limit (a lower bound, the baseline's).
    fn caveat(&mut self, c: crate::wording::gate::Caveat) {
        if let Reason::Within(h) | Reason::Over(h) = &mut self.reason {
            h.caveats.push(c);
        }
        self.message = self.reason.to_string();
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
    pub kind: CaptureKind,
    pub passed: bool,
    pub rules: Vec<RuleResult>,
    /// Events of the capture that no rule saw (skipped as invalid, undecodable, repaired):
    /// a rule's verdict may hang on them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
}

/// Everything `memscope check` found: the `memscope.check/3` JSON document.
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
    /// Inputs that would have been ranks of one run and kind, but are captures of different
    /// programs (no source file in common): no group, no imbalance.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_one_job: Vec<diff::Unrelated>,
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

/// Why a check cannot run: a limit the user set that an input holds nothing to measure
/// against (never a silent PASS), or contradictory `--rank`s. Typed; its sentences are
/// [`crate::wording::gate`]'s.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    /// Two files given one `--rank`: the user's numbering is contradictory, not absent.
    #[error("{}", words::rank_twice(*rank, first, second))]
    RankTwice {
        rank: u32,
        first: String,
        second: String,
    },
    /// A rule's limit was set, and an input of a kind it applies to holds nothing to measure.
    #[error("{}", words::nothing_to_measure(rule.name(), Some(path), why))]
    NothingToMeasure {
        rule: RuleId,
        path: String,
        why: Skip,
    },
    /// A rule's limit was set, and no input is of a kind it applies to.
    #[error("{}", words::nothing_to_measure(rule.name(), None, why))]
    NoInputToMeasure { rule: RuleId, why: Skip },
    /// `--max-imbalance` over inputs none of which are ranks of one run and kind.
    #[error("{}", words::NO_RANKS)]
    NoRanks,
    /// `--max-imbalance` over one input.
    #[error("{}", words::ONE_INPUT)]
    OneInput,
    /// `--max-imbalance` over inputs grouped as ranks that are captures of different programs.
    #[error("--max-imbalance is set, but {0}")]
    Unrelated(diff::Unrelated),
    /// `--max-imbalance` over a group with a rank whose peak is no measurement.
    #[error("{}", words::rank_unmeasurable(*rank, group, path, *why))]
    RankUnmeasurable {
        rank: u32,
        /// The group's label (`trace ranks (world size 128)`).
        group: String,
        path: String,
        why: RankPeakUnknown,
    },
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
                return Err(CheckError::RankTwice {
                    rank: *r,
                    first: a.path.clone(),
                    second: b.path.clone(),
                });
            }
        }
    }
    let rules = rules::codes::configured(cfg);
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
                    return Err(CheckError::NothingToMeasure {
                        rule: rule.id(),
                        path: s.path.clone(),
                        why,
                    })
                }
            }
        }
        if !applies && !inputs.is_empty() {
            if let Measurable::NotThisKind(why) | Measurable::Nothing(why) =
                rule.measurable(&inputs[0])
            {
                return Err(CheckError::NoInputToMeasure {
                    rule: rule.id(),
                    why,
                });
            }
        }
    }
    let mut files = Vec::new();
    for (i, s) in inputs.iter().enumerate() {
        let mut results: Vec<RuleResult> = rules.iter().map(|(r, _)| r.apply(s)).collect();
        let line_unknown = !rules::lines_known(s);
        if let Some((_, b)) = baseline {
            match b.entry_for(i, inputs.len(), s.file_name()) {
                Some(e) => rules::baseline_rules(s, e, cfg.tolerance(), &mut results),
                None => results.push(rules::baseline::missing_entry(s, b.inputs.len())),
            }
        }
        for r in &mut results {
            r.line_unknown = line_unknown && r.site.is_some();
        }
        files.push(FileResult {
            path: s.path.clone(),
            kind: s.kind,
            passed: !results.iter().any(RuleResult::failed),
            rules: results,
            skipped: s.load_notes.clone(),
        });
    }
    let passed: Vec<bool> = files.iter().map(|f| f.passed).collect();
    let (groups, not_one_job) = ranks::group(inputs, explicit_ranks, &passed);
    let ranks_rules = match cfg.max_imbalance {
        Some(limit) => {
            rules::imbalance::ImbalanceRule { limit }.apply(&groups, &not_one_job, inputs.len())?
        }
        None => Vec::new(),
    };
    let passed = files.iter().all(|f| f.passed) && !ranks_rules.iter().any(RuleResult::failed);
    Ok(CheckReport {
        schema: CHECK_SCHEMA,
        passed,
        files,
        ranks_rules,
        groups,
        not_one_job,
        config: CheckConfig {
            fail_on: Some(cfg.fail_on()),
            tolerance: Some(cfg.tolerance()),
            ..cfg.clone()
        },
        baseline: baseline.map(|(p, _)| p.to_owned()),
    })
}
