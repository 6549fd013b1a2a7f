//! The gate's rules, one type each: what it measures, when it SKIPs, the evidence it prints.
//!
//! Every rule reads an [`InputSummary`] (built from the analysis' typed fields by
//! [`super::typed`]) and returns one [`RuleResult`]. A rule with a limit the user set also
//! says, through [`Rule::measurable`], whether an input holds anything to measure: `check`
//! turns "nothing to measure" into an error (exit 2) rather than a PASS.

use super::summary::{self, InputSummary};
use super::{diff, trim_float, RuleResult, Unit, EVIDENCE};
use crate::analysis::sites::Site;
use crate::units;

/// Whether an input holds what a rule measures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Measurable {
    Yes,
    /// The rule does not apply to this kind of capture (graph growth of a snapshot): SKIP.
    NotThisKind(String),
    /// The rule applies, but this capture holds nothing to measure (why): SKIP, or an error
    /// when the user set the rule's limit.
    Nothing(String),
}

/// One rule of the gate.
pub trait Rule {
    /// The rule's name in every output (`oom`, `max-peak`, ...).
    fn id(&self) -> &'static str;
    /// Whether `s` holds what the rule measures.
    fn measurable(&self, s: &InputSummary) -> Measurable;
    /// The outcome on `s` (SKIP, with the reason, where [`Rule::measurable`] says no).
    fn apply(&self, s: &InputSummary) -> RuleResult;
}

fn skip_unless(rule: &dyn Rule, unit: Unit, s: &InputSummary) -> Option<RuleResult> {
    match rule.measurable(s) {
        Measurable::Yes => None,
        Measurable::NotThisKind(why) | Measurable::Nothing(why) => {
            Some(RuleResult::skip(rule.id(), unit, why))
        }
    }
}

/// Whether the capture could support a leak judgement: `Err(why)` where it could not.
fn leaks_judged(s: &InputSummary) -> Result<&[summary::LeakSummary], String> {
    let Some(leaks) = &s.leaks else {
        return Err("this analysis has no leak findings".into());
    };
    match s.leak_judgement.as_ref().and_then(|j| j.why_not()) {
        // A finding is a finding, whatever the judgement says.
        Some(why) if leaks.is_empty() => Err(format!("leaks not judged: {why}")),
        _ => Ok(leaks),
    }
}

/// A site in words; `line_known: false` (profiler traces, which record a frame's line as of
/// when the frame was entered) names the file and function only.
fn site_text(s: &Option<Site>, line_known: bool) -> String {
    match s {
        None => "(no Python stack)".into(),
        Some(s) => super::site_words(s, line_known),
    }
}

/// Whether the lines of `s`'s sites are the lines of the statements (not for traces).
pub fn lines_known(s: &InputSummary) -> bool {
    s.kind != "trace"
}

fn site_lines(sites: &[summary::SiteBytes], known: bool) -> Vec<String> {
    sites
        .iter()
        .take(EVIDENCE)
        .map(|s| {
            format!(
                "{} held by {}",
                units::bytes(s.bytes),
                site_text(&s.site, known)
            )
        })
        .collect()
}

/// The device with the largest value of `f`.
fn worst(
    s: &InputSummary,
    f: impl Fn(&summary::DeviceSummary) -> u64,
) -> Option<&summary::DeviceSummary> {
    s.devices.iter().max_by_key(|d| f(d))
}

/// Whether `s` could have recorded an OOM: `Nothing(why)` for a capture without OOMs that
/// could not have recorded one (a snapshot without allocation history, a trace without
/// memory events), where "no OOM recorded" is no evidence that none happened.
fn oom_measurable(s: &InputSummary) -> Measurable {
    let why = s
        .ooms
        .is_empty()
        .then(|| s.leak_judgement.as_ref()?.why_no_oom_record())
        .flatten();
    match why {
        Some(why) => Measurable::Nothing(format!("OOMs not judged: {why}")),
        None => Measurable::Yes,
    }
}

/// `oom` (`--fail-on oom`): FAILs when the capture recorded an OOM. Measures the OOM count;
/// evidence: the last OOM's summary and its line. SKIPs where the capture could not have
/// recorded one (no allocation history, a trace without memory events).
pub struct OomRule;

impl Rule for OomRule {
    fn id(&self) -> &'static str {
        "oom"
    }
    fn measurable(&self, s: &InputSummary) -> Measurable {
        oom_measurable(s)
    }
    fn apply(&self, s: &InputSummary) -> RuleResult {
        if let Some(r) = skip_unless(self, Unit::Count, s) {
            return r;
        }
        rule_oom(s)
    }
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

/// `fragmentation` (`--fail-on fragmentation`): FAILs on an OOM whose cause is fragmentation
/// (enough free cached memory, no block large enough). Evidence: that OOM's summary. SKIPs
/// where the capture could not have recorded an OOM, as `oom` does.
pub struct FragmentationRule;

impl Rule for FragmentationRule {
    fn id(&self) -> &'static str {
        "fragmentation"
    }
    fn measurable(&self, s: &InputSummary) -> Measurable {
        oom_measurable(s)
    }
    fn apply(&self, s: &InputSummary) -> RuleResult {
        if let Some(r) = skip_unless(self, Unit::Count, s) {
            return r;
        }
        rule_fragmentation(s)
    }
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

/// `leak` (`--fail-on leak`): FAILs on a leak finding or an OOM caused by a leak. Measures
/// the number of findings; evidence: the largest finding's line, what keeps it, the fix.
/// SKIPs, with the reason, where the capture cannot support a leak judgement (no history,
/// one pass, too few steps, no memory events, CPU-only): never a PASS it did not earn.
pub struct LeakRule;

impl Rule for LeakRule {
    fn id(&self) -> &'static str {
        "leak"
    }
    fn measurable(&self, s: &InputSummary) -> Measurable {
        match leaks_judged(s) {
            Ok(_) => Measurable::Yes,
            Err(why) => Measurable::Nothing(why),
        }
    }
    fn apply(&self, s: &InputSummary) -> RuleResult {
        rule_leak(s)
    }
}

fn rule_leak(s: &InputSummary) -> RuleResult {
    if let Some(o) = s.ooms.iter().rev().find(|o| o.cause == "leak") {
        if s.leaks.as_ref().is_none_or(Vec::is_empty) {
            let mut r = RuleResult::limit("leak", Unit::Count, 1.0, 0.0, "leaks:");
            r.message = format!("the OOM on {} was caused by a leak", o.device);
            r.site = o.site.clone();
            r.evidence.push(o.summary.clone());
            return r;
        }
    }
    let leaks = match leaks_judged(s) {
        Ok(l) => l,
        Err(why) => return RuleResult::skip("leak", Unit::Count, why),
    };
    let mut r = RuleResult::limit("leak", Unit::Count, leaks.len() as f64, 0.0, "leaks:");
    let worst = leaks
        .iter()
        .max_by(|a, b| a.growth_bytes_per_step.total_cmp(&b.growth_bytes_per_step));
    match worst {
        Some(l) => {
            // An accumulation freed only after its loop fails too: its peak grows with the
            // number of steps, so a longer run runs out of memory (docs/how-it-decides.md).
            let released = leaks.iter().filter(|l| l.extent.released()).count();
            let also = match released {
                0 => String::new(),
                n => format!(
                    " ({n} released only after its loop ended: the peak still grows with the steps)"
                ),
            };
            let live = if l.extent.released() {
                format!(
                    "{} at its peak, {}",
                    units::bytes(l.live_bytes),
                    l.extent.label()
                )
            } else {
                format!("{} live", units::bytes(l.live_bytes))
            };
            r.message = format!(
                "{} leak finding{}{also}; the largest ({}) grows {}/step over {} steps, {live}",
                leaks.len(),
                if leaks.len() == 1 { "" } else { "s" },
                l.kind,
                units::bytes(l.growth_bytes_per_step.round() as u64),
                l.steps,
            );
            r.site = l.site.clone();
            leak_evidence(l, lines_known(s), &mut r.evidence);
        }
        None => {
            r.message = match &s.leak_judgement {
                Some(j) => format!("no leak found over {} steps", j.steps),
                None => "no leak found".into(),
            }
        }
    }
    r
}

fn leak_evidence(l: &summary::LeakSummary, known: bool, ev: &mut Vec<String>) {
    if l.cause_site.is_some() {
        ev.push(format!("kept alive by {}", site_text(&l.cause_site, known)));
    }
    if !l.explanation.is_empty() {
        ev.push(l.explanation.clone());
    }
    if !l.fix.is_empty() {
        ev.push(format!("fix: {}", l.fix));
    }
}

fn graph_evidence(g: &summary::GraphGrowthSummary, known: bool) -> String {
    format!(
        "{} adds {} autograd nodes per step over {} steps at {}",
        g.op,
        trim_float(g.nodes_per_step),
        g.steps,
        site_text(&g.site, known)
    )
}

/// `graph-growth` (`--fail-on graph-growth`, limit 0) and `max-graph-growth` (`--max-graph-growth N`):
/// the most autograd nodes per step that no backward consumed (profiler traces). Evidence:
/// the growing ops and their functions. Does not apply to snapshots (no graph): SKIP. SKIPs
/// too where the trace cannot support a judgement (no grad-mode ops, no backward pass,
/// fewer than three profiled steps).
pub struct GraphGrowthRule {
    pub id: &'static str,
    pub limit: f64,
}

impl Rule for GraphGrowthRule {
    fn id(&self) -> &'static str {
        self.id
    }
    fn measurable(&self, s: &InputSummary) -> Measurable {
        match (&s.graph_growth, &s.graph_not_judged) {
            (Some(_), Some(why)) => Measurable::Nothing(format!("graph growth not judged: {why}")),
            (Some(_), None) => Measurable::Yes,
            (None, _) => Measurable::NotThisKind(format!(
                "no autograd graph in a {} (profiler traces have one)",
                s.kind
            )),
        }
    }
    fn apply(&self, s: &InputSummary) -> RuleResult {
        if let Some(r) = skip_unless(self, Unit::NodesPerStep, s) {
            return r;
        }
        rule_graph(s, self.id, self.limit)
    }
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
                r.evidence.push(graph_evidence(g, lines_known(s)));
            }
        }
    }
    r
}

/// `max-peak` / `max-reserved` (`--max-peak`, `--max-reserved`): the highest allocated
/// (reserved) bytes on any device, exact where the log starts from an empty allocator, else
/// the highest seen (a lower bound, said so). Evidence on FAIL: what was live at the peak.
/// Nothing to measure where the capture recorded no device memory.
pub struct PeakRule {
    pub limit: u64,
    pub reserved: bool,
}

impl Rule for PeakRule {
    fn id(&self) -> &'static str {
        if self.reserved {
            "max-reserved"
        } else {
            "max-peak"
        }
    }
    fn measurable(&self, s: &InputSummary) -> Measurable {
        if s.devices.is_empty() {
            Measurable::Nothing("no device memory recorded".into())
        } else {
            Measurable::Yes
        }
    }
    fn apply(&self, s: &InputSummary) -> RuleResult {
        if let Some(r) = skip_unless(self, Unit::Bytes, s) {
            return r;
        }
        rule_peak(s, self.id(), self.limit, self.reserved)
    }
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
        r.evidence = site_lines(&d.sites_at_peak, lines_known(s));
    }
    r
}

/// `max-growth-per-step` (`--max-growth-per-step`): the largest per-step growth of any leak
/// finding (0 where none was found). Evidence: the finding's line, steps, live bytes, fix.
/// Nothing to measure where the capture cannot support a leak judgement.
pub struct GrowthPerStepRule {
    pub limit: u64,
}

impl Rule for GrowthPerStepRule {
    fn id(&self) -> &'static str {
        "max-growth-per-step"
    }
    fn measurable(&self, s: &InputSummary) -> Measurable {
        LeakRule.measurable(s)
    }
    fn apply(&self, s: &InputSummary) -> RuleResult {
        if let Some(r) = skip_unless(self, Unit::BytesPerStep, s) {
            return r;
        }
        rule_growth(s, self.limit)
    }
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
                site_text(&l.site, lines_known(s)),
                l.steps,
                units::bytes(l.live_bytes),
                l.kind
            ));
            leak_evidence(l, lines_known(s), &mut r.evidence);
        }
    }
    r
}

/// Why `s` and its baseline entry `b` have no device to compare.
fn no_common_device(s: &InputSummary, b: &InputSummary) -> String {
    let names = |x: &InputSummary| {
        x.devices
            .iter()
            .map(|d| d.device.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match (s.devices.is_empty(), b.devices.is_empty()) {
        (true, true) => "no device memory recorded, here or in the baseline".into(),
        (true, false) => "no device memory recorded (the baseline has some)".into(),
        (false, true) => "the baseline recorded no device memory".into(),
        (false, false) => format!(
            "no device in common with the baseline ({} here, {} there)",
            names(s),
            names(b)
        ),
    }
}

/// Rules against the baseline entry `b`: `baseline-peak`, `baseline-reserved`, `baseline-live`
/// (per device in common, the one furthest over), `baseline-growth-per-step` and
/// `baseline-graph-growth`, each held to the baseline's figure plus the tolerance. Evidence:
/// the sites that grew since the baseline. SKIP where a side has nothing to compare.
pub fn baseline_rules(s: &InputSummary, b: &InputSummary, tol: f64, out: &mut Vec<RuleResult>) {
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
        out.push(
            best.unwrap_or_else(|| RuleResult::skip(rule, Unit::Bytes, no_common_device(s, b))),
        );
    }
    fn judged(x: &InputSummary) -> Result<Option<(f64, Option<&summary::LeakSummary>)>, String> {
        leaks_judged(x).map(|_| x.max_growth_per_step())
    }
    match (judged(s), judged(b)) {
        (Err(why), _) => out.push(RuleResult::skip(
            "baseline-growth-per-step",
            Unit::BytesPerStep,
            why,
        )),
        (_, Err(why)) => out.push(RuleResult::skip(
            "baseline-growth-per-step",
            Unit::BytesPerStep,
            format!("the baseline's {why}"),
        )),
        (Ok(Some((now, l))), Ok(Some((then, _)))) => {
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
                    leak_evidence(l, lines_known(s), &mut r.evidence);
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
    if let Some(why) = s.graph_not_judged.as_ref().or(b.graph_not_judged.as_ref()) {
        out.push(RuleResult::skip(
            "baseline-graph-growth",
            Unit::NodesPerStep,
            format!("graph growth not judged: {why}"),
        ));
        return;
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
                    r.evidence.push(graph_evidence(g, lines_known(s)));
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
