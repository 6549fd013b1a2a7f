//! Every rule's id, and which rules a configuration runs (ruff's `codes.rs`: one table from
//! the names users see to the rule types).
//!
//! A [`RuleId`] is what every output names a rule by (`oom`, `max-peak`, `baseline-live`, ...):
//! the text's rule column, the `memscope.check/3` JSON's `rule`, JUnit's test case, the
//! annotation's title. `--fail-on` names the findings that fail outright by the same ids
//! ([`super::super::FailOn::rule`]).

use serde::Serialize;

use super::{
    FragmentationRule, GraphGrowthRule, GrowthPerStepRule, LeakRule, OomRule, PeakRule, Rule,
};
use crate::check::{CheckConfig, FailOn};

/// A rule of the gate, by the name it has in every output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RuleId {
    /// `--fail-on oom` ([`super::oom`]).
    Oom,
    /// `--fail-on leak` ([`super::leak`]).
    Leak,
    /// `--fail-on fragmentation` ([`super::fragmentation`]).
    Fragmentation,
    /// `--fail-on graph-growth` ([`super::graph_growth`], limit 0).
    GraphGrowth,
    /// `--max-peak` ([`super::peak`]).
    MaxPeak,
    /// `--max-reserved` ([`super::peak`]).
    MaxReserved,
    /// `--max-growth-per-step` ([`super::growth_per_step`]).
    MaxGrowthPerStep,
    /// `--max-graph-growth` ([`super::graph_growth`]).
    MaxGraphGrowth,
    /// The baseline holds no entry for an input ([`super::baseline`]).
    Baseline,
    /// Peak allocated bytes against the baseline's ([`super::baseline`]).
    BaselinePeak,
    /// Peak reserved bytes against the baseline's ([`super::baseline`]).
    BaselineReserved,
    /// Bytes live at the end against the baseline's ([`super::baseline`]).
    BaselineLive,
    /// The largest per-step growth against the baseline's ([`super::baseline`]).
    BaselineGrowthPerStep,
    /// Autograd graph growth against the baseline's ([`super::baseline`]).
    BaselineGraphGrowth,
    /// `--max-imbalance`, over the ranks of one run ([`super::imbalance`]).
    MaxImbalance,
}

impl RuleId {
    /// The name in every output, and the flag's name for a rule with a limit (`--max-peak`).
    pub fn name(self) -> &'static str {
        match self {
            RuleId::Oom => "oom",
            RuleId::Leak => "leak",
            RuleId::Fragmentation => "fragmentation",
            RuleId::GraphGrowth => "graph-growth",
            RuleId::MaxPeak => "max-peak",
            RuleId::MaxReserved => "max-reserved",
            RuleId::MaxGrowthPerStep => "max-growth-per-step",
            RuleId::MaxGraphGrowth => "max-graph-growth",
            RuleId::Baseline => "baseline",
            RuleId::BaselinePeak => "baseline-peak",
            RuleId::BaselineReserved => "baseline-reserved",
            RuleId::BaselineLive => "baseline-live",
            RuleId::BaselineGrowthPerStep => "baseline-growth-per-step",
            RuleId::BaselineGraphGrowth => "baseline-graph-growth",
            RuleId::MaxImbalance => "max-imbalance",
        }
    }
}

impl std::fmt::Display for RuleId {
    /// The name, padded as asked (`{:<26}` in the text's rule column).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.name())
    }
}

/// The per-input rules the settings ask for, in output order, and whether each holds a limit
/// the user set (such a limit with nothing to measure is an error, never a PASS). The baseline
/// rules ([`super::baseline`]) and the ranks' rule ([`super::imbalance`]) run apart: they read
/// a baseline entry, or a group of inputs.
pub fn configured(cfg: &CheckConfig) -> Vec<(Box<dyn Rule>, bool)> {
    let mut rules: Vec<(Box<dyn Rule>, bool)> = Vec::new();
    for f in cfg.fail_on() {
        rules.push(match f {
            FailOn::Oom => (Box::new(OomRule), false),
            FailOn::Fragmentation => (Box::new(FragmentationRule), false),
            FailOn::Leak => (Box::new(LeakRule), false),
            FailOn::GraphGrowth => (
                Box::new(GraphGrowthRule {
                    id: RuleId::GraphGrowth,
                    limit: 0.0,
                }),
                false,
            ),
        });
    }
    if let Some(limit) = cfg.max_peak {
        rules.push((
            Box::new(PeakRule {
                limit,
                reserved: false,
            }),
            true,
        ));
    }
    if let Some(limit) = cfg.max_reserved {
        rules.push((
            Box::new(PeakRule {
                limit,
                reserved: true,
            }),
            true,
        ));
    }
    if let Some(limit) = cfg.max_growth_per_step {
        rules.push((Box::new(GrowthPerStepRule { limit }), true));
    }
    if let Some(limit) = cfg.max_graph_growth {
        rules.push((
            Box::new(GraphGrowthRule {
                id: RuleId::MaxGraphGrowth,
                limit,
            }),
            true,
        ));
    }
    rules
}

#[cfg(test)]
mod tests {
    use super::RuleId;

    #[test]
    fn names_are_the_json_names() {
        for id in [
            RuleId::Oom,
            RuleId::Leak,
            RuleId::Fragmentation,
            RuleId::GraphGrowth,
            RuleId::MaxPeak,
            RuleId::MaxReserved,
            RuleId::MaxGrowthPerStep,
            RuleId::MaxGraphGrowth,
            RuleId::Baseline,
            RuleId::BaselinePeak,
            RuleId::BaselineReserved,
            RuleId::BaselineLive,
            RuleId::BaselineGrowthPerStep,
            RuleId::BaselineGraphGrowth,
            RuleId::MaxImbalance,
        ] {
            assert_eq!(
                serde_json::to_value(id).unwrap(),
                serde_json::Value::from(id.name())
            );
        }
        assert_eq!(format!("[{:<6}]", RuleId::Oom), "[oom   ]");
    }
}
