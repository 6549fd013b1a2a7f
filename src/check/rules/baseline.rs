//! The baseline rules (`--baseline FILE`, or `baseline` in `memscope.toml`): a regression
//! against a committed `memscope.baseline/1`, each figure held to the baseline's plus the
//! tolerance (`--tolerance`, 5% by default).
//!
//! - **Detects**: `baseline-peak`, `baseline-reserved`, `baseline-live` (peak allocated, peak
//!   reserved, live at the end; per device in common, the one furthest over),
//!   `baseline-growth-per-step` (the largest leak growth) and `baseline-graph-growth`
//!   (autograd nodes per step) over the baseline's; `baseline` where the baseline holds no
//!   entry for an input (a FAIL: the input was never reviewed).
//! - **Cannot judge (SKIP)**: where a side has nothing to compare: no device in common, a
//!   figure not recorded, a baseline figure known only from below (no limit to hold it to),
//!   an input's lower bound within the limit, leaks or graph growth not judged on a side. A
//!   PASS must hold on every device.
//! - **Evidence**: the sites that grew since the baseline (largest first), or the leak finding
//!   or growing op responsible.
//! - **Fix**: undo the growth at those lines, or, where it is intended, commit a new baseline
//!   (`memscope baseline CAPTURE -o FILE`).

use super::{
    graph_evidence, leak_evidence, leaks_judged, lines_known, NoLeakJudgement, RuleId, Skip,
    Unmeasured,
};
use crate::check::summary::{DeviceSummary, InputSummary, LeakSummary, Standing};
use crate::check::{diff, Measure, Reason, RuleResult, Status, Unit, EVIDENCE};
use crate::wording::gate::{Caveat, Uncompared};

/// The `baseline` rule's FAIL where the baseline (of `entries` entries) holds none for `s`.
pub fn missing_entry(s: &InputSummary, entries: usize) -> RuleResult {
    let reason = Reason::NoBaselineEntry {
        file: s.file_name().to_owned(),
        entries,
    };
    RuleResult {
        rule: RuleId::Baseline,
        status: Status::Fail,
        measured: None,
        limit: None,
        unit: Unit::Count,
        message: reason.to_string(),
        reason,
        site: None,
        line_unknown: false,
        evidence: Vec::new(),
    }
}

/// Why `s` and its baseline entry `b` have no device to compare.
fn no_common_device(s: &InputSummary, b: &InputSummary) -> Skip {
    let names = |x: &InputSummary| x.devices.iter().map(|d| d.device.clone()).collect();
    Skip::NoCommonDevice {
        here: names(s),
        there: names(b),
    }
}

type Get = fn(&DeviceSummary) -> u64;

/// One figure the baseline rules compare per device: rule, words, getter, whether it is taken
/// at the peak (else at the end), and whether it is a reserved figure (else allocated).
struct DeviceSpec {
    rule: RuleId,
    measure: fn(String) -> Measure,
    get: Get,
    at_peak: bool,
    reserved: bool,
}

const DEVICE_SPECS: [DeviceSpec; 3] = [
    DeviceSpec {
        rule: RuleId::BaselinePeak,
        measure: |device| Measure::PeakAllocated { device },
        get: |d| d.peak_allocated_bytes,
        at_peak: true,
        reserved: false,
    },
    DeviceSpec {
        rule: RuleId::BaselineReserved,
        measure: |device| Measure::PeakReserved { device },
        get: |d| d.peak_reserved_bytes,
        at_peak: true,
        reserved: true,
    },
    DeviceSpec {
        rule: RuleId::BaselineLive,
        measure: |device| Measure::LiveAtEnd { device },
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
    d: &DeviceSummary,
    bd: &DeviceSummary,
    spec: &DeviceSpec,
    tol: f64,
) -> Result<RuleResult, Uncompared> {
    let (now, then) = (standing(s, &d.device, spec), standing(b, &bd.device, spec));
    let measure = || (spec.measure)(d.device.clone());
    if now == Standing::Unrecorded || then == Standing::Unrecorded {
        let why = Unmeasured::NoReserved {
            device: d.device.clone(),
        };
        return Err(if now == Standing::Unrecorded {
            Uncompared::Here(why)
        } else {
            Uncompared::Baseline(why)
        });
    }
    if then == Standing::AtLeast {
        return Err(Uncompared::BaselineBound { measure: measure() });
    }
    let limit = (spec.get)(bd) as f64 * (1.0 + tol);
    let mut r = RuleResult::limit(
        spec.rule,
        Unit::Bytes,
        (spec.get)(d) as f64,
        limit,
        measure(),
    );
    if now == Standing::AtLeast && !r.failed() {
        return Err(Uncompared::Here(Unmeasured::BoundWithin {
            measure: measure(),
            bound: (spec.get)(d),
        }));
    }
    r.caveat(Caveat::Baseline {
        bytes: (spec.get)(bd),
        tolerance: tol,
    });
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
    let mut unjudged: Option<Uncompared> = None;
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
        (_, Some(why)) => RuleResult::skip(spec.rule, Unit::Bytes, Skip::Uncompared(why)),
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
    type Growth<'a> = Option<(f64, Option<&'a LeakSummary>)>;
    fn judged(x: &InputSummary) -> Result<Growth<'_>, NoLeakJudgement> {
        leaks_judged(x).map(|_| x.max_growth_per_step())
    }
    let growth = RuleId::BaselineGrowthPerStep;
    match (judged(s), judged(b)) {
        (Err(why), _) => out.push(RuleResult::skip(
            growth,
            Unit::BytesPerStep,
            Skip::Leaks(why),
        )),
        (_, Err(why)) => out.push(RuleResult::skip(
            growth,
            Unit::BytesPerStep,
            Skip::BaselineLeaks(why),
        )),
        (Ok(Some((now, l))), Ok(Some((then, _)))) => {
            let mut r = RuleResult::limit(
                growth,
                Unit::BytesPerStep,
                now,
                then * (1.0 + tol),
                Measure::LargestGrowth,
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
            growth,
            Unit::BytesPerStep,
            Skip::GrowthNotAnalysed,
        )),
    }
    let graph = RuleId::BaselineGraphGrowth;
    if let Some(why) = s.graph_not_judged.as_ref().or(b.graph_not_judged.as_ref()) {
        out.push(RuleResult::skip(
            graph,
            Unit::NodesPerStep,
            Skip::GraphNotJudged(why.clone()),
        ));
        return;
    }
    match (s.max_graph_growth(), b.max_graph_growth()) {
        (Some((now, g)), Some((then, _))) => {
            let mut r = RuleResult::limit(
                graph,
                Unit::NodesPerStep,
                now,
                then * (1.0 + tol),
                Measure::GraphGrowth,
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
            graph,
            Unit::NodesPerStep,
            Skip::GraphOneSide,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::super::trace_summary as summary;
    use super::*;

    #[test]
    fn baseline_figures_that_are_bounds_give_no_limit() {
        let run = |b: &InputSummary| {
            let mut out = Vec::new();
            baseline_rules(&summary(1 << 30), b, 0.05, &mut out);
            out
        };
        let by =
            |out: &[RuleResult], id: RuleId| out.iter().find(|r| r.rule == id).unwrap().clone();
        let out = run(&summary(1 << 30));
        for id in [
            RuleId::BaselinePeak,
            RuleId::BaselineLive,
            RuleId::BaselineReserved,
        ] {
            let r = by(&out, id);
            assert_eq!(r.status, Status::Skip, "{id}: {}", r.message);
            assert!(r.message.contains("cuda:1"), "{}", r.message);
        }
        // Against a measured baseline, a bound over it FAILs.
        let mut measured = summary(1 << 20);
        measured.allocated_from_trace_start.clear();
        assert_eq!(
            by(&run(&measured), RuleId::BaselinePeak).status,
            Status::Fail
        );
    }
}
