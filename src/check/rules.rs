//! The gate's rules, one type each: what it measures, when it SKIPs, the evidence it prints.
//!
//! Every rule reads an [`InputSummary`] (built from the analysis' typed fields by
//! [`super::typed`]) and returns one [`RuleResult`]. A rule with a limit the user set also
//! says, through [`Rule::measurable`], whether an input holds anything to measure: `check`
//! turns "nothing to measure" into an error (exit 2) rather than a PASS.

use super::summary::{self, InputSummary, Standing};
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
/// Nothing to measure where the capture recorded no device memory, or no reserved bytes.
///
/// A trace that gives allocated bytes only as changes from its start (torch 1.9) bounds the
/// peak from below: that bound over the limit FAILs (the peak was at least that), under it
/// SKIPs with the reason, since it cannot show the peak within the limit (docs/how-it-decides.md).
pub struct PeakRule {
    pub limit: u64,
    pub reserved: bool,
}

impl PeakRule {
    fn what(&self) -> &'static str {
        if self.reserved {
            "peak reserved"
        } else {
            "peak allocated"
        }
    }
    fn standing(&self, s: &InputSummary, d: &summary::DeviceSummary) -> Standing {
        if self.reserved {
            s.reserved_standing(&d.device)
        } else {
            s.allocated_standing(&d.device)
        }
    }
    fn get(&self, d: &summary::DeviceSummary) -> u64 {
        if self.reserved {
            d.peak_reserved_bytes
        } else {
            d.peak_allocated_bytes
        }
    }
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
            return Measurable::Nothing("no device memory recorded".into());
        }
        match s
            .devices
            .iter()
            .find(|d| self.standing(s, d) != Standing::Unrecorded)
        {
            Some(_) => Measurable::Yes,
            None => Measurable::Nothing(unrecorded_reserved(&s.devices[0].device)),
        }
    }
    fn apply(&self, s: &InputSummary) -> RuleResult {
        if let Some(r) = skip_unless(self, Unit::Bytes, s) {
            return r;
        }
        rule_peak(self, s)
    }
}

/// Why a device's reserved bytes cannot be held to anything.
fn unrecorded_reserved(device: &str) -> String {
    format!(
        "the trace records no reserved bytes on {device} (its [memory] events carry no `Total Reserved`)"
    )
}

/// Why a lower bound of `what` within a limit shows nothing.
fn bound_within(what: &str, device: &str, bound: u64) -> String {
    format!(
        "{what} on {device} is known only as a change from the trace's start (its [memory] \
         events carry no `Total Allocated`): at least {}, which cannot show it within the limit",
        units::bytes(bound)
    )
}

fn rule_peak(rule: &PeakRule, s: &InputSummary) -> RuleResult {
    let (id, what) = (rule.id(), rule.what());
    let Some(d) = s
        .devices
        .iter()
        .filter(|d| rule.standing(s, d) != Standing::Unrecorded)
        .max_by_key(|d| rule.get(d))
    else {
        return RuleResult::skip(id, Unit::Bytes, "no device memory recorded");
    };
    let mut r = RuleResult::limit(
        id,
        Unit::Bytes,
        rule.get(d) as f64,
        rule.limit as f64,
        &format!("{what} on {}", d.device),
    );
    if !d.peak_exact && s.kind == "snapshot" {
        r.message
            .push_str(" (a lower bound: history before the log is missing)");
    }
    if r.failed() {
        if rule.standing(s, d) == Standing::AtLeast {
            r.message.push_str(
                " (a lower bound: the trace records allocated bytes only as changes from its start)",
            );
        }
        r.site = d.sites_at_peak.first().and_then(|x| x.site.clone());
        r.evidence = site_lines(&d.sites_at_peak, lines_known(s));
        return r;
    }
    // A PASS holds for every device: one known only from below, or not at all, cannot give it.
    for u in &s.devices {
        match rule.standing(s, u) {
            Standing::Measured => {}
            Standing::AtLeast => {
                return RuleResult::skip(
                    id,
                    Unit::Bytes,
                    bound_within(what, &u.device, rule.get(u)),
                )
            }
            Standing::Unrecorded => {
                return RuleResult::skip(id, Unit::Bytes, unrecorded_reserved(&u.device))
            }
        }
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

type Get = fn(&summary::DeviceSummary) -> u64;

/// One figure the baseline rules compare per device: rule, words, getter, whether it is taken
/// at the peak (else at the end), and whether it is a reserved figure (else allocated).
struct DeviceSpec {
    rule: &'static str,
    what: &'static str,
    get: Get,
    at_peak: bool,
    reserved: bool,
}

const DEVICE_SPECS: [DeviceSpec; 3] = [
    DeviceSpec {
        rule: "baseline-peak",
        what: "peak allocated",
        get: |d| d.peak_allocated_bytes,
        at_peak: true,
        reserved: false,
    },
    DeviceSpec {
        rule: "baseline-reserved",
        what: "peak reserved",
        get: |d| d.peak_reserved_bytes,
        at_peak: true,
        reserved: true,
    },
    DeviceSpec {
        rule: "baseline-live",
        what: "live at the end",
        get: |d| d.end_allocated_bytes,
        at_peak: false,
        reserved: false,
    },
];

/// What a summary's figure of `spec` on `device` is.
fn standing(x: &InputSummary, device: &str, spec: &DeviceSpec) -> Standing {
    if spec.reserved {
        x.reserved_standing(device)
    } else {
        x.allocated_standing(device)
    }
}

/// `spec` on one device in common with the baseline: a PASS or FAIL, or why neither can be
/// said. A baseline figure that is not a measurement gives no limit; a figure known only from
/// below FAILs over the limit and says nothing under it; one not recorded says nothing.
fn baseline_device(
    s: &InputSummary,
    b: &InputSummary,
    d: &summary::DeviceSummary,
    bd: &summary::DeviceSummary,
    spec: &DeviceSpec,
    tol: f64,
) -> Result<RuleResult, String> {
    let (now, then) = (standing(s, &d.device, spec), standing(b, &bd.device, spec));
    let what = spec.what;
    if now == Standing::Unrecorded || then == Standing::Unrecorded {
        let side = if now == Standing::Unrecorded {
            ""
        } else {
            "the baseline's "
        };
        return Err(format!("{side}{}", unrecorded_reserved(&d.device)));
    }
    if then == Standing::AtLeast {
        return Err(format!(
            "the baseline's {what} on {} is known only as a change from its trace's start: no \
             limit to hold it to",
            d.device
        ));
    }
    let limit = (spec.get)(bd) as f64 * (1.0 + tol);
    let mut r = RuleResult::limit(
        spec.rule,
        Unit::Bytes,
        (spec.get)(d) as f64,
        limit,
        &format!("{what} on {}", d.device),
    );
    if now == Standing::AtLeast && !r.failed() {
        return Err(bound_within(what, &d.device, (spec.get)(d)));
    }
    r.message.push_str(&format!(
        " (baseline {} + {:.1}%)",
        units::bytes((spec.get)(bd)),
        tol * 100.0
    ));
    if r.failed() {
        let (now, then) = if spec.at_peak {
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
    Ok(r)
}

/// `spec` over the devices in common: the device furthest over its baseline where one FAILs;
/// else a SKIP where a device cannot be judged (a PASS must hold on every device); else the
/// PASS closest to its limit.
fn baseline_devices(s: &InputSummary, b: &InputSummary, spec: &DeviceSpec, tol: f64) -> RuleResult {
    let mut best: Option<RuleResult> = None;
    let mut unjudged: Option<String> = None;
    for d in &s.devices {
        let Some(bd) = b.device(&d.device) else {
            continue;
        };
        let r = match baseline_device(s, b, d, bd, spec, tol) {
            Ok(r) => r,
            Err(why) => {
                unjudged.get_or_insert(why);
                continue;
            }
        };
        let excess = |r: &RuleResult| r.measured.unwrap_or(0.0) - r.limit.unwrap_or(0.0);
        if best.as_ref().is_none_or(|b| excess(&r) > excess(b)) {
            best = Some(r);
        }
    }
    match (best, unjudged) {
        (Some(r), _) if r.failed() => r,
        (_, Some(why)) => RuleResult::skip(spec.rule, Unit::Bytes, why),
        (Some(r), None) => r,
        (None, None) => RuleResult::skip(spec.rule, Unit::Bytes, no_common_device(s, b)),
    }
}

/// Rules against the baseline entry `b`: `baseline-peak`, `baseline-reserved`, `baseline-live`
/// (per device in common, the one furthest over), `baseline-growth-per-step` and
/// `baseline-graph-growth`, each held to the baseline's figure plus the tolerance. Evidence:
/// the sites that grew since the baseline. SKIP where a side has nothing to compare.
pub fn baseline_rules(s: &InputSummary, b: &InputSummary, tol: f64, out: &mut Vec<RuleResult>) {
    for spec in &DEVICE_SPECS {
        out.push(baseline_devices(s, b, spec, tol));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Status;

    /// A trace's summary: cuda:0 measured at 1 GiB, cuda:1 known only as a change from the
    /// trace's start (`peak` its lower bound), with no reserved total.
    fn summary(peak: u64) -> InputSummary {
        let dev = |name: &str, peak: u64| {
            serde_json::json!({
                "device": name, "peak_allocated_bytes": peak, "peak_reserved_bytes": 0,
                "end_allocated_bytes": 0, "end_reserved_bytes": 0
            })
        };
        serde_json::from_value(serde_json::json!({
            "path": "t.json", "kind": "trace", "verdict": "ok",
            "devices": [dev("cuda:0", 1 << 30), dev("cuda:1", peak)],
            "allocated_from_trace_start": ["cuda:1"],
            "reserved_unrecorded": ["cuda:1"],
        }))
        .unwrap()
    }

    #[test]
    fn a_lower_bound_fails_over_the_limit_and_never_passes_under_it() {
        let rule = |limit| PeakRule {
            limit,
            reserved: false,
        };
        // cuda:1 was at least 3 GiB: over 2 GiB whatever it started from.
        let r = rule(2 << 30).apply(&summary(3 << 30));
        assert_eq!(r.status, Status::Fail, "{}", r.message);
        assert!(r.message.contains("cuda:1") && r.message.contains("lower bound"));
        // Both under 2 GiB, but cuda:1's bound cannot show its peak was.
        let r = rule(2 << 30).apply(&summary(512 << 20));
        assert_eq!(r.status, Status::Skip, "{}", r.message);
        assert!(r.message.contains("cuda:1"), "{}", r.message);
        // cuda:0 over the limit fails, whatever cuda:1 is.
        let r = rule(256 << 20).apply(&summary(1 << 20));
        assert_eq!(r.status, Status::Fail, "{}", r.message);
        assert!(r.message.contains("cuda:0"), "{}", r.message);
        // Reserved: cuda:0's PASS does not cover cuda:1, which records none.
        let r = PeakRule {
            limit: 1 << 40,
            reserved: true,
        }
        .apply(&summary(0));
        assert_eq!(r.status, Status::Skip, "{}", r.message);
        assert!(r.message.contains("no reserved bytes on cuda:1"));
    }

    #[test]
    fn baseline_figures_that_are_bounds_give_no_limit() {
        let run = |b: &InputSummary| {
            let mut out = Vec::new();
            baseline_rules(&summary(1 << 30), b, 0.05, &mut out);
            out
        };
        let by = |out: &[RuleResult], id: &str| out.iter().find(|r| r.rule == id).unwrap().clone();
        let out = run(&summary(1 << 30));
        for id in ["baseline-peak", "baseline-live", "baseline-reserved"] {
            let r = by(&out, id);
            assert_eq!(r.status, Status::Skip, "{id}: {}", r.message);
            assert!(r.message.contains("cuda:1"), "{}", r.message);
        }
        // Against a measured baseline, a bound over it FAILs.
        let mut measured = summary(1 << 20);
        measured.allocated_from_trace_start.clear();
        assert_eq!(by(&run(&measured), "baseline-peak").status, Status::Fail);
    }
}
