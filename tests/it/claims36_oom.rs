//! Issue 36's OOM causes, remedies and counterfactual figures on fixtures/claims36 (GPU captures
//! whose workload wrote its own truth in `NAME.meta.json` before memscope read anything):
//!
//! * variable-length batches under a 1 GiB cap, one batch 6x longer than the rest: the OOM is
//!   capacity for that input, judged on the whole step (its allocated bytes at the failure and
//!   the earlier steps' highest peak, to the byte of the truth), and expandable segments, which
//!   failed on the same step in the twin run, are not offered;
//! * two genuine fragmentation OOMs whose expandable twins ran through: fragmentation, with the
//!   expandable remedy predicted to serve the request, its peak within its stated range of the
//!   twin's, and said to cover the recorded requests only;
//! * two curricula whose reserved peak is far above the allocated one: the finding with the
//!   truth's figures, its fix's figure within range of the expandable twin, ranked first;
//! * torch.compile reduce-overhead: the CUDA graphs' figure's range holds the twin's truth.
//!
//! Skipped, visibly, where the checkout lacks fixtures/claims36.

use std::path::{Path, PathBuf};

use memscope::analysis::oom::{Cause, RemedyKind};
use memscope::analysis::ranked::FindingRef;
use memscope::analysis::whatif::pools::PoolWhatIf;
use memscope::analysis::whatif::{self, ExpandableOutcome};
use memscope::analysis::Analysis;
use serde_json::Value;

fn dir() -> Option<PathBuf> {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/claims36");
    if d.join("varlen_spike_oom.pickle.gz").exists() {
        Some(d)
    } else {
        eprintln!("skipped: fixtures/claims36 is not in this checkout");
        None
    }
}

fn truth(d: &Path, name: &str) -> Value {
    let m: Value =
        serde_json::from_slice(&std::fs::read(d.join(format!("{name}.meta.json"))).unwrap())
            .unwrap();
    m["truth"].clone()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

fn analyze(d: &Path, name: &str) -> (memscope::model::Snapshot, Analysis) {
    let p = d.join(format!("{name}.pickle.gz"));
    let snap = memscope::load::load_snapshot(&p).unwrap();
    let a = memscope::analysis::analyze_snapshot(&snap, &p, 0);
    (snap, (*a).clone())
}

/// The spike and its expandable twin: capacity for that input, on the whole step's figures.
#[test]
fn a_batch_longer_than_any_before_is_capacity_not_fragmentation() {
    let Some(d) = dir() else { return };
    let t = truth(&d, "varlen_spike_oom");
    let o_t = &t["oom"];
    assert_eq!(o_t["cause"], "capacity");
    assert_eq!(o_t["expandable_avoided"], false);
    for name in ["varlen_spike_oom", "varlen_spike_oom_expandable"] {
        let (_, a) = analyze(&d, name);
        let ooms = &a.devices[0].ooms;
        assert_eq!(ooms.len(), 1, "{name}");
        let o = &ooms[0];
        assert_eq!(o.cause, Cause::Capacity, "{name}");
        let st = o.facts.step.as_ref().expect("the failing step is judged");
        assert!(o.facts.step_outgrew(), "{name}: {st:?}");
        assert!(
            st.log_ends_inside,
            "{name}: the dump came in the except block"
        );
        // The earlier steps' highest peak is the truth's, to the byte (both runs made the same
        // earlier steps; the truth is the default run's).
        assert_eq!(
            st.earlier_peak_bytes,
            u(&o_t["max_earlier_step_allocated_peak"]),
            "{name}"
        );
        if name == "varlen_spike_oom" {
            assert_eq!(
                st.allocated_at_failure_bytes,
                u(&o_t["failing_step_allocated_peak_before_failure"])
            );
        }
        // The inputs: 672 tokens against at most 160 before; attention scores grow with the
        // square of the length, so the line that grew most grew by more than the length did.
        let inputs = st.larger_inputs.as_ref().unwrap();
        let lens = t["seq_lens"].as_array().unwrap();
        let before = lens[..14].iter().map(u).max().unwrap() as f64;
        assert!(
            inputs.ratio() >= u(&lens[14]) as f64 / before,
            "{name}: {inputs:?}"
        );
        // Expandable segments failed on this very step in the twin: not offered.
        assert!(
            !o.remedies
                .iter()
                .any(|r| r.kind == RemedyKind::ExpandableSegments),
            "{name}: {:?}",
            o.remedies
        );
        assert_eq!(o.remedies[0].kind, RemedyKind::ReduceWorkload);
    }
    // `whatif --alloc-conf expandable_segments:True` replays the same requests: the same
    // request fails, as it did in the twin.
    let (snap, _) = analyze(&d, "varlen_spike_oom");
    let w = whatif::what_if(
        &snap,
        &whatif::parse_alloc_conf("expandable_segments:True").unwrap(),
        None,
        None,
    )
    .unwrap();
    assert_eq!(w[0].outcome(), whatif::Outcome::StillOoms);
    assert_eq!(
        w[0].predicted.ooms[0].event, w[0].recorded.ooms[0].event,
        "the same request fails"
    );
}

/// Fragmentation where the step was no larger than the earlier ones, and the remedy the twin
/// proved, said as far as the log goes.
#[test]
fn genuine_fragmentation_keeps_its_cause_and_a_bounded_remedy() {
    let Some(d) = dir() else { return };
    for name in ["varlen_frag_oom", "bank_frag_oom"] {
        let t = truth(&d, name);
        assert_eq!(t["oom"]["cause"], "fragmentation", "{name}");
        assert_eq!(t["oom"]["expandable_avoided"], true, "{name}");
        let (_, a) = analyze(&d, name);
        let o = &a.devices[0].ooms[0];
        assert_eq!(o.cause, Cause::Fragmentation, "{name}");
        assert!(!o.facts.step_outgrew(), "{name}: {:?}", o.facts.step);
        assert_eq!(
            o.largest_free_block_bytes,
            u(&t["oom"]["largest_free_block_in_except"]),
            "{name}"
        );
        let r = o
            .remedies
            .iter()
            .find(|r| r.kind == RemedyKind::ExpandableSegments)
            .expect("expandable segments offered");
        let Some(ExpandableOutcome::Avoided { peak_reserved, .. }) =
            r.predicted.as_ref().map(|p| &p.outcome)
        else {
            panic!("{name}: {:?}", r.predicted)
        };
        let twin = truth(&d, &format!("{name}_expandable"));
        let real = u(&twin["peaks"]["reserved_peak"]) as i64;
        assert!(
            peak_reserved.truth_low <= real && real <= peak_reserved.truth_high,
            "{name}: {peak_reserved:?} vs {real}"
        );
        // Said as a prediction for the recorded requests, not for the step.
        let words = memscope::wording::remedy_assessment(o, r);
        assert!(words.contains("recorded requests only"), "{words}");
    }
}

/// Reserved far above allocated in a curriculum: the finding, its figures, its fix's figure
/// against the expandable twin, first by bytes at stake; the twin itself has no such finding.
#[test]
fn a_curriculum_reserving_far_above_allocated_is_a_ranked_finding() {
    let Some(d) = dir() else { return };
    for name in ["cur_gpt", "cur_conv_size"] {
        let t = truth(&d, name);
        let (_, a) = analyze(&d, name);
        let r = a.devices[0]
            .reserved_excess
            .as_ref()
            .unwrap_or_else(|| panic!("{name}: no finding"));
        assert_eq!(
            r.peak_reserved_bytes,
            u(&t["peaks"]["reserved_peak"]),
            "{name}"
        );
        assert_eq!(
            r.peak_allocated_bytes,
            u(&t["peaks"]["allocated_peak"]),
            "{name}"
        );
        assert!(r.segments_for_larger_shapes > 0, "{name}: {r:?}");
        assert_eq!(r.segments_released, 0, "{name}");
        let fix = r.fix.as_ref().unwrap();
        let twin = truth(&d, &format!("{name}_expandable"));
        let real = u(&twin["peaks"]["reserved_peak"]) as i64;
        let p = &fix.predicted_peak_reserved;
        assert!(
            p.truth_low <= real && real <= p.truth_high,
            "{name}: {p:?} vs {real}"
        );
        let ranked = a.ranked_findings();
        assert_eq!(
            ranked[0].finding,
            FindingRef::ReservedExcess { device: 0 },
            "{name}: {ranked:?}"
        );
        assert_eq!(ranked[0].bytes_at_stake, r.bytes_at_stake());
        assert!(ranked
            .windows(2)
            .all(|w| w[0].bytes_at_stake >= w[1].bytes_at_stake));
        // The text report lists it first under the verdict, with the setting and the range.
        let text = memscope::report::to_string(
            &memscope::report::text::Text,
            &a,
            &memscope::report::Options::default(),
        );
        // With findings of one kind only (no false leak beside it since the benign readings),
        // there is no ranked list to print; where there is one, the gap heads it.
        match text.split("FINDINGS by bytes at stake\n").nth(1) {
            Some(findings) => assert!(
                findings.starts_with("  1. ")
                    && findings
                        .lines()
                        .next()
                        .unwrap()
                        .contains("reserved far above allocated"),
                "{name}: {findings}"
            ),
            None => assert_eq!(ranked.len(), 1, "{name}: {text}"),
        }
        assert!(
            text.contains("reserved far above allocated: "),
            "{name}: {text}"
        );
        assert!(text.contains("fix: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"));
        let (_, b) = analyze(&d, &format!("{name}_expandable"));
        assert!(b.devices[0].reserved_excess.is_none(), "{name}_expandable");
    }
    // Variable lengths within a fixed range, no growth: reserved stays near allocated.
    let (_, a) = analyze(&d, "varlen_clean");
    assert!(a.devices[0].reserved_excess.is_none());
}

/// "CUDA graphs raised the reserved peak by X": the range said holds the truth measured
/// against the default torch.compile mode on the same card, and is not the bare figure.
#[test]
fn the_cuda_graph_figure_carries_a_range_that_holds_the_twin() {
    let Some(d) = dir() else { return };
    let (_, a) = analyze(&d, "compile_reduce_overhead");
    let Some(PoolWhatIf::Computed {
        raised_by_bytes,
        range,
        ..
    }) = a.devices[0].pool_whatif
    else {
        panic!("{:?}", a.devices[0].pool_whatif)
    };
    let peak = |n: &str| u(&truth(&d, n)["peaks"]["reserved_peak"]) as i64;
    let real = peak("compile_reduce_overhead") - peak("compile_default");
    assert!(
        range.truth_low <= real && real <= range.truth_high,
        "{range:?} vs {real}"
    );
    assert!(range.truth_low < raised_by_bytes && raised_by_bytes <= range.truth_high);
    let words = memscope::wording::pool_whatif(&a.devices[0].pool_whatif.unwrap(), true);
    assert!(words.contains("twin runs"), "{words}");
}

/// spike_f (spikes.py): a step on a longer input than any before fails with the request's bytes
/// in the cache's holes. Its expandable twin, same cap, got past that step and OOMed three steps
/// later on a longer batch. Fragmentation of that step, then, and a remedy that is no promise:
/// the answer depends on the cap the log only bounds, the what-if names the least cap that
/// serves the recorded requests (the real cap is above it, as the twin showed), and it says the
/// log cannot tell whether the run would have finished. The five other spikes are capacity.
#[test]
fn a_spike_served_by_expandable_segments_is_no_promise_of_the_run() {
    let Some(d) = dir() else { return };
    if !d.join("spike_f.pickle.gz").exists() {
        eprintln!("skipped: spikes.py's captures are not in this checkout");
        return;
    }
    let t = truth(&d, "spike_f");
    assert_eq!(t["oom"]["cause"], "fragmentation");
    assert_eq!(t["oom"]["step"], 7);
    assert_eq!(t["oom"]["expandable_twin_oom_step"], 10);
    let (snap, a) = analyze(&d, "spike_f");
    let o = &a.devices[0].ooms[0];
    assert_eq!(o.cause, Cause::Fragmentation);
    // At the `oom` entry the request's bytes were free in the cache, in smaller holes (the
    // except block, read later, sees the failing backward's blocks already released).
    assert!(o.largest_free_block_bytes < u(&t["oom"]["request_bytes_from_message"]));
    let r = o
        .remedies
        .iter()
        .find(|r| r.kind == RemedyKind::ExpandableSegments)
        .expect("expandable segments offered");
    let words = memscope::wording::remedy_assessment(o, r);
    assert!(words.contains("depends on the cap"), "{words}");
    assert!(words.contains("cannot be told"), "{words}");
    assert!(!words.contains("avoid"), "{words}");
    let w = whatif::what_if(
        &snap,
        &whatif::parse_alloc_conf("expandable_segments:True").unwrap(),
        None,
        None,
    )
    .unwrap();
    let (low, high) = w[0].cap.range.expect("a derived cap range");
    let enough = w[0]
        .served_from_cap
        .expect("served from some cap in the range");
    let real = u(&t["cap_bytes"]);
    assert!(low <= real && real <= high, "{low} {real} {high}");
    assert!(low < enough && enough <= real, "{low} {enough} {real}");
    let v = memscope::wording::whatif_verdict(&w[0]);
    assert!(v.starts_with("depends on the cap"), "{v}");
    for name in ["spike_a", "spike_b", "spike_c", "spike_d", "spike_e"] {
        let t = truth(&d, name);
        assert_eq!(t["oom"]["cause"], "capacity", "{name}");
        let (_, a) = analyze(&d, name);
        assert_eq!(a.devices[0].ooms[0].cause, Cause::Capacity, "{name}");
    }
}
