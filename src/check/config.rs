//! Check settings: limits, the rules to fail on, tolerance, baseline, from flags and from
//! `memscope.toml`.
//!
//! The file is looked for in the current directory, then in the repository root (the nearest
//! ancestor holding `.git`). Flags win over the file, field by field. Its `[check]` table uses
//! the flags' names:
//!
//! ```toml
//! [check]
//! baseline = "ci/memscope-baseline.json"   # relative to this file
//! max-peak = "8GiB"
//! max-reserved = "10GiB"
//! max-growth-per-step = "1MiB"
//! max-graph-growth = 0
//! max-imbalance = "10%"
//! fail-on = ["oom", "leak", "graph-growth"]
//! tolerance = "5%"
//! ```

use std::path::{Path, PathBuf};

use super::RuleId;
use crate::units::parse_bytes;

/// The name of the configuration file.
pub const CONFIG_FILE: &str = "memscope.toml";

/// Finding kinds that fail a check outright (`--fail-on`): the rules of those names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailOn {
    Oom,
    Leak,
    Fragmentation,
    GraphGrowth,
}

impl FailOn {
    pub const ALL: [FailOn; 4] = [
        FailOn::Oom,
        FailOn::Leak,
        FailOn::Fragmentation,
        FailOn::GraphGrowth,
    ];

    /// The rule that fails on this finding (the same name).
    pub fn rule(self) -> RuleId {
        match self {
            FailOn::Oom => RuleId::Oom,
            FailOn::Leak => RuleId::Leak,
            FailOn::Fragmentation => RuleId::Fragmentation,
            FailOn::GraphGrowth => RuleId::GraphGrowth,
        }
    }

    /// The name, as `--fail-on` and every output spell it: its rule's.
    pub fn name(self) -> &'static str {
        self.rule().name()
    }

    pub fn parse(s: &str) -> Result<FailOn, UnknownFinding> {
        let t = s.trim().to_ascii_lowercase().replace('_', "-");
        FailOn::ALL
            .into_iter()
            .find(|f| f.name() == t)
            .ok_or_else(|| UnknownFinding {
                given: s.to_owned(),
            })
    }

    /// A comma-separated list (`leak,oom`); `none` or empty for no finding.
    pub fn parse_list(s: &str) -> Result<Vec<FailOn>, UnknownFinding> {
        if s.trim().is_empty() || s.trim().eq_ignore_ascii_case("none") {
            return Ok(Vec::new());
        }
        let mut v = s
            .split(',')
            .map(FailOn::parse)
            .collect::<Result<Vec<_>, _>>()?;
        v.sort();
        v.dedup();
        Ok(v)
    }
}

/// A `--fail-on` (or `fail-on =`) name that is no finding.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown finding {given:?} (expected one of: {})",
    FailOn::ALL.map(FailOn::name).join(", ")
)]
pub struct UnknownFinding {
    /// As given.
    pub given: String,
}

/// What is wrong with a `memscope.toml`'s text. The values a file holds are never quoted back
/// (a config named by `--config` may be any file); its keys are.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Not TOML: toml's message, on one line, where it is.
    #[error("{}{message}", .at.map_or_else(String::new, |(l, c)| format!("line {l}, column {c}: ")))]
    Syntax {
        /// Line and column (from 1).
        at: Option<(usize, usize)>,
        message: String,
    },
    #[error("unknown table or key {key:?} (memscope reads [check])")]
    UnknownTable { key: String },
    #[error("`check` must be a table ([check])")]
    NotATable,
    /// A known key whose value is not of its type.
    #[error("[check] {key}: expected {what}")]
    Expected { key: String, what: &'static str },
    #[error("[check] {key}: {err}")]
    FailOn { key: String, err: UnknownFinding },
    #[error(
        "[check]: unknown key {key:?} (known: baseline, max-peak, max-reserved, max-growth-per-step, max-graph-growth, max-imbalance, fail-on, tolerance)"
    )]
    UnknownKey { key: String },
    /// `fail-on = []` with no limit or baseline: the gate would pass anything.
    #[error(
        "[check] fail-on: the list is empty and no limit or baseline is set, so nothing would be checked \
         (remove fail-on for the default {:?}, or set a limit)",
        DEFAULT_FAIL_ON.map(FailOn::name)
    )]
    ChecksNothing,
    /// A `baseline` path out of the repository that holds the file.
    #[error(
        "[check] baseline: {rel:?} is outside the repository; give a path inside it, relative to {CONFIG_FILE}"
    )]
    BaselineOutside { rel: String },
}

/// Why a `memscope.toml` file cannot be used (each names the file).
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    // The inner errors are part of the message (not `#[source]`), so a chain printer shows
    // them once.
    #[error("{err}")]
    Read { err: crate::load::LoadError },
    #[error("{path}: not UTF-8 text")]
    NotUtf8 { path: PathBuf },
    #[error("{path}: {err}")]
    Config { path: PathBuf, err: ConfigError },
}

/// What fails when nothing is configured: findings that are bugs whatever the budget.
pub const DEFAULT_FAIL_ON: [FailOn; 3] = [FailOn::Oom, FailOn::Leak, FailOn::GraphGrowth];
/// Default relative tolerance for comparisons against a baseline.
pub const DEFAULT_TOLERANCE: f64 = 0.05;

/// Check settings; `None` is "not set" (so flags and file can be layered).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct CheckConfig {
    pub baseline: Option<PathBuf>,
    pub max_peak: Option<u64>,
    pub max_reserved: Option<u64>,
    pub max_growth_per_step: Option<u64>,
    pub max_graph_growth: Option<f64>,
    /// Largest allowed `(max - min) / max` of the ranks' peaks, as a fraction.
    pub max_imbalance: Option<f64>,
    pub fail_on: Option<Vec<FailOn>>,
    /// Relative tolerance for baseline comparisons, as a fraction (`0.05` for `5%`).
    pub tolerance: Option<f64>,
}

impl CheckConfig {
    /// Field by field, `self` where set, else `other` (flags `.or(file)`).
    pub fn or(self, other: CheckConfig) -> CheckConfig {
        CheckConfig {
            baseline: self.baseline.or(other.baseline),
            max_peak: self.max_peak.or(other.max_peak),
            max_reserved: self.max_reserved.or(other.max_reserved),
            max_growth_per_step: self.max_growth_per_step.or(other.max_growth_per_step),
            max_graph_growth: self.max_graph_growth.or(other.max_graph_growth),
            max_imbalance: self.max_imbalance.or(other.max_imbalance),
            fail_on: self.fail_on.or(other.fail_on),
            tolerance: self.tolerance.or(other.tolerance),
        }
    }

    pub fn fail_on(&self) -> Vec<FailOn> {
        self.fail_on
            .clone()
            .unwrap_or_else(|| DEFAULT_FAIL_ON.to_vec())
    }

    pub fn tolerance(&self) -> f64 {
        self.tolerance.unwrap_or(DEFAULT_TOLERANCE)
    }

    /// Parses the `[check]` table of a `memscope.toml`. Relative paths are taken from `dir`.
    pub fn from_toml(text: &str, dir: &Path) -> Result<CheckConfig, ConfigError> {
        let doc: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| one_line(text, &e))?;
        let mut cfg = CheckConfig::default();
        for key in doc.keys() {
            if key != "check" {
                return Err(ConfigError::UnknownTable { key: key.clone() });
            }
        }
        let Some(t) = doc.get("check") else {
            return Ok(cfg);
        };
        let t = t.as_table().ok_or(ConfigError::NotATable)?;
        for (k, v) in t {
            let key = k.replace('_', "-");
            // The value is not quoted back: a config named by --config may be any file, and an
            // error never shows a file's contents.
            let bad = |what: &'static str| ConfigError::Expected {
                key: k.clone(),
                what,
            };
            match key.as_str() {
                "baseline" => {
                    cfg.baseline = Some(inside_repository(
                        dir,
                        v.as_str().ok_or_else(|| bad("a path string"))?,
                    )?)
                }
                "max-peak" => {
                    cfg.max_peak = Some(size(v).ok_or_else(|| bad("a size like \"8GiB\""))?)
                }
                "max-reserved" => {
                    cfg.max_reserved = Some(size(v).ok_or_else(|| bad("a size like \"8GiB\""))?)
                }
                "max-growth-per-step" => {
                    cfg.max_growth_per_step =
                        Some(size(v).ok_or_else(|| bad("a size like \"1MiB\""))?)
                }
                "max-graph-growth" => {
                    cfg.max_graph_growth = Some(
                        v.as_integer()
                            .map(|i| i as f64)
                            .or_else(|| v.as_float())
                            .filter(|x| *x >= 0.0)
                            .ok_or_else(|| bad("a number of nodes per step"))?,
                    )
                }
                "max-imbalance" => {
                    cfg.max_imbalance =
                        Some(percent(v).ok_or_else(|| bad("a percentage like \"10%\""))?)
                }
                "tolerance" => {
                    cfg.tolerance = Some(percent(v).ok_or_else(|| bad("a percentage like \"5%\""))?)
                }
                "fail-on" => {
                    let list: Vec<String> = match v {
                        toml::Value::String(s) => vec![s.clone()],
                        toml::Value::Array(a) => a
                            .iter()
                            .map(|x| x.as_str().map(str::to_owned))
                            .collect::<Option<_>>()
                            .ok_or_else(|| bad("a list of strings"))?,
                        _ => return Err(bad("a list like [\"oom\", \"leak\"]")),
                    };
                    cfg.fail_on = Some(FailOn::parse_list(&list.join(",")).map_err(|err| {
                        ConfigError::FailOn {
                            key: k.clone(),
                            err,
                        }
                    })?);
                }
                _ => return Err(ConfigError::UnknownKey { key: k.clone() }),
            }
        }
        if cfg.fail_on.as_ref().is_some_and(Vec::is_empty) && cfg.checks_nothing() {
            return Err(ConfigError::ChecksNothing);
        }
        Ok(cfg)
    }

    /// True when no rule would run: no finding to fail on, no limit, no baseline.
    pub fn checks_nothing(&self) -> bool {
        self.fail_on().is_empty()
            && self.baseline.is_none()
            && self.max_peak.is_none()
            && self.max_reserved.is_none()
            && self.max_growth_per_step.is_none()
            && self.max_graph_growth.is_none()
            && self.max_imbalance.is_none()
    }

    /// Reads a `memscope.toml`.
    pub fn from_file(path: &Path) -> Result<CheckConfig, ConfigFileError> {
        // Through the bounded reader: a FIFO or a device named as the config does not hang.
        let input = crate::load::read_input(path).map_err(|err| ConfigFileError::Read { err })?;
        let text = std::str::from_utf8(&input).map_err(|_| ConfigFileError::NotUtf8 {
            path: path.to_owned(),
        })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        CheckConfig::from_toml(text, dir).map_err(|err| ConfigFileError::Config {
            path: path.to_owned(),
            err,
        })
    }
}

/// A TOML error on one line ("line 3, column 7: invalid string"), not toml's five-line
/// picture of the source.
fn one_line(text: &str, e: &toml::de::Error) -> ConfigError {
    let message = e.message().trim().replace('\n', "; ");
    let at = e.span().map(|span| {
        let before = &text[..span.start.min(text.len())];
        let line = before.matches('\n').count() + 1;
        let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
        (line, col)
    });
    ConfigError::Syntax { at, message }
}

fn size(v: &toml::Value) -> Option<u64> {
    match v {
        toml::Value::Integer(i) => u64::try_from(*i).ok(),
        toml::Value::String(s) => parse_bytes(s),
        _ => None,
    }
}

fn percent(v: &toml::Value) -> Option<f64> {
    match v {
        toml::Value::Integer(i) => (*i >= 0).then_some(*i as f64 / 100.0),
        toml::Value::Float(f) => (*f >= 0.0).then_some(*f / 100.0),
        toml::Value::String(s) => parse_percent(s),
        _ => None,
    }
}

/// Parses `5%` or `5` (both five percent) into a fraction (`0.05`).
pub fn parse_percent(s: &str) -> Option<f64> {
    let t = s.trim();
    let t = t.strip_suffix('%').unwrap_or(t).trim();
    let v: f64 = t.parse().ok()?;
    (v.is_finite() && v >= 0.0).then_some(v / 100.0)
}

/// The `memscope.toml` that applies in `cwd`: there, else at the repository root.
/// A `baseline` path of a config file, taken from the file's directory `dir`; it must stay
/// inside the repository that holds the file (the nearest ancestor with `.git`, else `dir`):
/// no absolute path, no `..` out of it, no symbolic link out of it. A config in a pull request
/// must not make CI read (and quote) a file elsewhere on the runner.
fn inside_repository(dir: &Path, rel: &str) -> Result<PathBuf, ConfigError> {
    use std::path::Component;
    let p = Path::new(rel);
    let outside = || ConfigError::BaselineOutside {
        rel: rel.to_owned(),
    };
    if p.is_absolute()
        || p.components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(outside());
    }
    let full = dir.join(p);
    let root = dir
        .ancestors()
        .find(|d| d.join(".git").exists())
        .unwrap_or(dir);
    if let (Ok(real), Ok(root)) = (std::fs::canonicalize(&full), std::fs::canonicalize(root)) {
        if !real.starts_with(&root) {
            return Err(outside());
        }
    }
    Ok(full)
}

pub fn find_config(cwd: &Path) -> Option<PathBuf> {
    let here = cwd.join(CONFIG_FILE);
    if here.is_file() {
        return Some(here);
    }
    let root = cwd.ancestors().find(|d| d.join(".git").exists())?;
    let p = root.join(CONFIG_FILE);
    p.is_file().then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_file() {
        let cfg = CheckConfig::from_toml(
            "[check]\nbaseline = \"ci/base.json\"\nmax-peak = \"8GiB\"\nmax_reserved = 1024\nmax-growth-per-step = \"1MiB\"\nmax-graph-growth = 0\nfail-on = [\"oom\", \"leak\"]\ntolerance = \"5%\"\nmax-imbalance = 10\n",
            Path::new("/repo"),
        )
        .unwrap();
        assert_eq!(
            cfg.baseline.as_deref(),
            Some(Path::new("/repo/ci/base.json"))
        );
        assert_eq!(cfg.max_peak, Some(8 << 30));
        assert_eq!(cfg.max_reserved, Some(1024));
        assert_eq!(cfg.max_growth_per_step, Some(1 << 20));
        assert_eq!(cfg.max_graph_growth, Some(0.0));
        assert_eq!(cfg.fail_on, Some(vec![FailOn::Oom, FailOn::Leak]));
        assert_eq!(cfg.tolerance, Some(0.05));
        assert_eq!(cfg.max_imbalance, Some(0.1));
    }

    #[test]
    fn refuses_typos_and_bad_values() {
        let dir = Path::new(".");
        assert!(
            CheckConfig::from_toml("[check]\nmax-peek = \"8GiB\"\n", dir)
                .unwrap_err()
                .to_string()
                .contains("max-peek")
        );
        assert!(
            CheckConfig::from_toml("[check]\nmax-peak = \"8 parsecs\"\n", dir)
                .unwrap_err()
                .to_string()
                .contains("max-peak")
        );
        assert!(
            CheckConfig::from_toml("[check]\nfail-on = [\"oops\"]\n", dir)
                .unwrap_err()
                .to_string()
                .contains("oops")
        );
        assert!(CheckConfig::from_toml("[check\n", dir).is_err());
    }

    #[test]
    fn flags_win_field_by_field() {
        let flags = CheckConfig {
            max_peak: Some(1),
            ..Default::default()
        };
        let file = CheckConfig {
            max_peak: Some(2),
            tolerance: Some(0.1),
            ..Default::default()
        };
        let c = flags.or(file);
        assert_eq!((c.max_peak, c.tolerance), (Some(1), Some(0.1)));
        assert_eq!(parse_percent("5%"), Some(0.05));
        assert_eq!(parse_percent("x"), None);
        assert_eq!(
            FailOn::parse_list("leak,oom,leak").unwrap(),
            vec![FailOn::Oom, FailOn::Leak]
        );
    }
}
