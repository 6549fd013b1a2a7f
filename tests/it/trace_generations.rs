//! Profiler traces of every Kineto generation in the shared corpus give their steps and memory.
//!
//! The truth was read from the files independently (a Python pass over `traceEvents`): the count
//! of distinct `ProfilerStep#N` names whatever their `cat` (torch 1.9 wrote `Operator`, later
//! versions `user_annotation`), whether `[memory]` events exist, and for the torch 1.9 trace,
//! whose events carry only `Bytes`, the running sum of `Bytes` on cuda:0: its maximum is
//! 2,791,636,480 bytes and it ends at 0.

use crate::shared;

/// (file under corpus/traces, distinct ProfilerStep spans, has [memory] events)
const TRACES: &[(&str, usize, bool)] = &[
    (
        "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
        2,
        false,
    ),
    ("hta/call_stack/backward_thread.json", 1, false),
    (
        "hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
        1,
        false,
    ),
    (
        "hta/critical_path/cuda_event_sync/event_sync_trace.json.gz",
        1,
        false,
    ),
    ("hta/df_index_resolver/df_index_resolver.json.gz", 5, true),
    ("hta/mtia_trace_single_rank/mtia_rank_0.json.gz", 1, false),
    (
        "hta/negative_queue_length_values_check/rank0.json.gz",
        5,
        false,
    ),
    (
        "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
        5,
        false,
    ),
    ("hta/trace_diff/control/control.json.gz", 6, false),
    ("other/kernelforge_transformer.pt.trace.json", 3, true),
    (
        "other/kineto_resnet50_torch19_mem.pt.trace.json.gz",
        6,
        true,
    ),
    ("other/parT_a100_bs512.pt.trace.json", 0, true),
];

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn every_generation_gives_its_steps_and_memory() {
    for &(rel, steps, memory) in TRACES {
        let Some(p) = shared::corpus(&format!("traces/{rel}")) else {
            continue;
        };
        let t = memscope::load::load_trace(&p).unwrap();
        let a = memscope::analysis::analyze_trace(&t, &p, 0);
        eprintln!(
            "{rel}: {} steps; {}",
            t.steps.len(),
            memscope::wording::verdict(&a.verdict)
        );
        assert_eq!(t.steps.len(), steps, "{rel}: steps");
        // The peak in bytes in use, or where a trace gives only changes from its start
        // (torch 1.9), the highest change.
        let peak = a
            .devices
            .iter()
            .filter_map(|d| {
                d.peak_allocated_bytes
                    .or(d.from_start.map(|f| f.peak_allocated_bytes.max(0) as u64))
            })
            .max();
        if memory {
            assert!(peak.is_some_and(|p| p > 0), "{rel}: no memory peak");
            assert!(
                memscope::wording::verdict(&a.verdict).contains("allocated peak"),
                "{rel}"
            );
        } else {
            assert!(
                memscope::wording::verdict(&a.verdict).contains("no memory recorded"),
                "{rel}: {}",
                memscope::wording::verdict(&a.verdict)
            );
        }
    }
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn torch19_trace_with_bytes_only() {
    let Some(p) = shared::corpus("traces/other/kineto_resnet50_torch19_mem.pt.trace.json.gz")
    else {
        return;
    };
    let t = memscope::load::load_trace(&p).unwrap();
    let names: Vec<&str> = t.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "ProfilerStep#5",
            "ProfilerStep#6",
            "ProfilerStep#7",
            "ProfilerStep#8",
            "ProfilerStep#9",
            "ProfilerStep#10"
        ]
    );
    assert_eq!(t.memory.len(), 12_838);
    let a = memscope::analysis::analyze_trace(&t, &p, 0);
    let cuda0 = a.devices.iter().find(|d| d.device == 0).expect("cuda:0");
    // Running sums from the trace's start: changes, never bytes in use.
    let f = cuda0.from_start.expect("changes from the trace's start");
    assert_eq!(f.peak_allocated_bytes, 2_791_636_480);
    assert_eq!(f.allocated_bytes, 0);
    assert_eq!(cuda0.allocated_bytes, None);
    assert_eq!(cuda0.peak_allocated_bytes, None);
    assert_eq!(cuda0.observed_peak_allocated_bytes, 2_791_636_480);
    assert!(
        a.notes.iter().any(|n| matches!(
            n,
            memscope::analysis::notes::Note::Trace(
                memscope::analysis::notes::TraceNote::ReconstructedTotals { .. }
            )
        )),
        "{:?}",
        a.notes
    );
}
