//! The leak rules, one file each (like ruff's rules), registered once in [`CODES`] (like ruff's
//! `codes.rs`): every kind of leak finding, its stable id, its name in prose, and what finds it.
//!
//! A rule's file says what the shape is, what it detects, the evidence it reads and the fix:
//! [`SiteEvidence`] in a snapshot's log, [`TraceSiteEvidence`] in a profiler trace's memory
//! events. Its row says whether it judges traces, or which evidence a trace lacks for it
//! ([`OnTrace`]). Both captures are judged by walking the same rows, most specific first:
//! [`classify`] and [`classify_trace`]. Its sentences (explanation and fix) are
//! `wording::leaks`'s, whose matches on [`LeakKind`] are exhaustive.
//!
//! A new rule is its file here, a variant of [`LeakKind`] and a row of [`CODES`] (below), and
//! its sentences in `src/wording/leaks.rs`; the JSON, baselines, `--fail-on`, the verdict and
//! the query tables read the row.

#[allow(unused_imports)]
use super::*;

mod accumulated_loss;
mod hook_cache;
mod kept_outputs;
mod retained_graph;
mod steady_growth;
mod tensor_cache;

pub use accumulated_loss::*;
pub use hook_cache::*;
pub use kept_outputs::*;
pub use retained_graph::*;
pub use steady_growth::*;
pub use tensor_cache::*;

/// The shape of a leak: which rule (or pass) found it. One row of [`CODES`] each, in the same
/// order; serialized as the row's `id`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeakKind {
    AccumulatedLoss,
    RetainedGraph,
    HookCache,
    KeptOutputs,
    TensorCache,
    /// Summaries written by memscope before traces shared the snapshot rules called a trace's
    /// growth `live_growth`: old baselines still load.
    #[serde(alias = "live_growth")]
    SteadyGrowth,
    /// Memory of an attempt that ended in an OOM, alive while a later attempt ran
    /// ([`crate::analysis::retry`]).
    RetainedAttempt,
}

/// One registered kind of leak finding.
pub struct Code {
    pub kind: LeakKind,
    /// The snake_case name used in JSON, baselines, `--fail-on` and the query tables. Stable:
    /// it is [`LeakKind`]'s serde name (a test checks both).
    pub id: &'static str,
    /// The name in prose: `retained graph`.
    pub label: &'static str,
    pub found_by: FoundBy,
}

/// What finds a kind of leak.
pub enum FoundBy {
    /// A rule judging one growing site (or group of survivors) of either capture.
    Rule {
        rule: &'static dyn LeakRule,
        trace: OnTrace,
    },
    /// A pass of its own, over a snapshot's log.
    Pass(Pass),
}

/// The passes that find a kind of leak without a rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// Attempts that ended in an OOM and stayed alive while the next one ran
    /// ([`crate::analysis::retry`]): it reads the OOMs and blocks of a snapshot's log.
    RetainedAttempts,
}

/// What a rule judges in a profiler trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnTrace {
    /// It reads [`TraceSiteEvidence`] ([`LeakRule::matches_trace`]) and may fire on a trace.
    Judges,
    /// A trace's survivors do not give the evidence it reads: it never fires on a trace.
    Lacks(&'static [TraceGap]),
}

/// Evidence a snapshot rule reads that a trace's survivors do not give.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceGap {
    /// The size each tensor asked for: a trace's `[memory]` events give the allocator's block
    /// (rounded up, 512 bytes at least), so a scalar loss is not told from any small tensor.
    RequestedSize,
    /// Whether a survivor was made under a `torch.nn` module call, and how deep: a trace's
    /// survivors are attributed to their user line and to the loop that keeps them, with the
    /// line each frame was entered at, not to the module calls around the allocation.
    ModuleCalls,
    /// Whether a survivor was its call's last allocation or an intermediate followed by more
    /// from the same line: the trace's survivors are counted per line and step, not per call.
    CallOrder,
}

/// Every kind, in [`LeakKind`]'s order; its rules most specific first (the last rule always
/// matches).
pub static CODES: &[Code] = &[
    Code {
        kind: LeakKind::AccumulatedLoss,
        id: "accumulated_loss",
        label: "accumulated loss",
        found_by: FoundBy::Rule {
            rule: &AccumulatedLoss,
            trace: OnTrace::Lacks(&[TraceGap::RequestedSize]),
        },
    },
    Code {
        kind: LeakKind::RetainedGraph,
        id: "retained_graph",
        label: "retained graph",
        found_by: FoundBy::Rule {
            rule: &RetainedGraph,
            trace: OnTrace::Judges,
        },
    },
    Code {
        kind: LeakKind::HookCache,
        id: "hook_cache",
        label: "hook cache",
        found_by: FoundBy::Rule {
            rule: &HookCache,
            trace: OnTrace::Lacks(&[TraceGap::ModuleCalls, TraceGap::CallOrder]),
        },
    },
    Code {
        kind: LeakKind::KeptOutputs,
        id: "kept_outputs",
        label: "kept outputs",
        found_by: FoundBy::Rule {
            rule: &KeptOutputs,
            trace: OnTrace::Lacks(&[TraceGap::ModuleCalls]),
        },
    },
    Code {
        kind: LeakKind::TensorCache,
        id: "tensor_cache",
        label: "tensor cache",
        found_by: FoundBy::Rule {
            rule: &TensorCache,
            trace: OnTrace::Lacks(&[TraceGap::ModuleCalls]),
        },
    },
    Code {
        kind: LeakKind::SteadyGrowth,
        id: "steady_growth",
        label: "steady growth",
        found_by: FoundBy::Rule {
            rule: &SteadyGrowth,
            trace: OnTrace::Judges,
        },
    },
    Code {
        kind: LeakKind::RetainedAttempt,
        id: "retained_attempt",
        label: "retained failed attempt",
        found_by: FoundBy::Pass(Pass::RetainedAttempts),
    },
];

impl LeakKind {
    /// Its row in [`CODES`].
    pub fn code(self) -> &'static Code {
        &CODES[self as usize]
    }
    /// The snake_case name used in JSON, baselines and `--fail-on`.
    pub fn id(self) -> &'static str {
        self.code().id
    }
    /// The name in prose: `retained graph`.
    pub fn label(self) -> &'static str {
        self.code().label
    }
}

impl std::fmt::Display for LeakKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

/// The rules with what each judges in a trace, most specific first.
pub fn registered() -> impl Iterator<Item = (&'static dyn LeakRule, OnTrace)> {
    CODES.iter().filter_map(|c| match c.found_by {
        FoundBy::Rule { rule, trace } => Some((rule, trace)),
        FoundBy::Pass(_) => None,
    })
}

/// The rules, most specific first; the last always matches.
pub fn rules() -> Vec<&'static dyn LeakRule> {
    registered().map(|(r, _)| r).collect()
}

/// Judges a snapshot's growing site with the rules.
pub fn classify(ev: &SiteEvidence) -> Match {
    registered()
        .find_map(|(r, _)| r.matches(ev))
        .unwrap_or(Match {
            kind: LeakKind::SteadyGrowth,
            confidence: Confidence::Low,
        })
}

/// Judges a trace's group of survivors with the rules that read a trace.
pub fn classify_trace(ev: &TraceSiteEvidence) -> Match {
    registered()
        .filter(|(_, on)| *on == OnTrace::Judges)
        .find_map(|(r, _)| r.matches_trace(ev))
        .unwrap_or(Match {
            kind: LeakKind::SteadyGrowth,
            confidence: Confidence::Medium,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_row_is_its_kind_at_its_place_with_its_rule() {
        for (i, c) in CODES.iter().enumerate() {
            assert_eq!(c.kind as usize, i, "{} is out of LeakKind's order", c.id);
            assert_eq!(c.kind.code().id, c.id);
            if let FoundBy::Rule { rule, .. } = c.found_by {
                assert_eq!(rule.id(), c.kind, "{}'s rule makes another kind", c.id);
            }
        }
        // The last registered kind is the enum's last variant: no kind without a row.
        assert_eq!(
            CODES.last().map(|c| c.kind),
            Some(LeakKind::RetainedAttempt)
        );
    }

    #[test]
    fn the_last_rule_matches_any_site_of_either_capture() {
        let (last, on) = registered().last().expect("rules");
        assert_eq!(on, OnTrace::Judges);
        let t = TraceSiteEvidence {
            total_bytes: 1 << 20,
            graph_bytes: 0,
            count: 4,
            sites: 1,
            steps_with_live: 4,
            profiled_steps: 4,
        };
        assert_eq!(last.matches_trace(&t).map(|m| m.kind), Some(last.id()));
        assert_eq!(classify_trace(&t).kind, LeakKind::SteadyGrowth);
        // Half its bytes holding an unconsumed graph: a retained graph, as in a snapshot.
        let g = TraceSiteEvidence {
            graph_bytes: 1 << 19,
            ..t.clone()
        };
        assert_eq!(classify_trace(&g).kind, LeakKind::RetainedGraph);
        let under = TraceSiteEvidence {
            graph_bytes: (1 << 19) - 1,
            ..t
        };
        assert_eq!(classify_trace(&under).kind, LeakKind::SteadyGrowth);
    }

    #[test]
    fn rules_that_lack_a_traces_evidence_never_judge_one() {
        let t = TraceSiteEvidence {
            total_bytes: 512,
            graph_bytes: 512,
            count: 1,
            sites: 1,
            steps_with_live: 10,
            profiled_steps: 10,
        };
        for (r, on) in registered() {
            if let OnTrace::Lacks(gaps) = on {
                assert!(!gaps.is_empty(), "{}: a gap names what is lacking", r.id());
                assert_eq!(r.matches_trace(&t), None, "{}", r.id());
            }
        }
    }
}
