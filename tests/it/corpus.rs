//! The public compatibility corpus (`../shared/corpus`, captures written by other people): every
//! snapshot loads and analyses to a sane report, and every trace loads or is refused with the
//! clear words its README expects. Skips with a message when the folder is absent.
//!
//! One test per corpus file (the `per_file!` lists below), so the files are checked in parallel
//! and a failure names its file; `every_corpus_file_is_named_by_a_test` fails when a file in the
//! corpus is in no list, so a new file cannot go unchecked.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use memscope::report;

use crate::shared;

fn corpus() -> Option<PathBuf> {
    shared::path("corpus")
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
    out.sort();
}

/// One `#[test]` per corpus file, `NAME = "REL"` (REL under `../shared/corpus`), each running
/// `CHECK` on that file; and `LISTED`, the files named, for the census test.
macro_rules! per_file {
    ($check:path; $($name:ident = $rel:literal,)*) => {
        pub(super) const LISTED: &[&str] = &[$($rel),*];
        $(
            #[test]
            #[cfg_attr(
                memscope_no_shared,
                ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
            )]
            fn $name() {
                $check($rel)
            }
        )*
    };
}

/// Every file of the corpus (its README aside) is named by the lists, and every name is a file:
/// a capture added to the corpus without a test fails here.
#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn every_corpus_file_is_named_by_a_test() {
    let Some(root) = corpus() else { return };
    let mut all = Vec::new();
    files(&root, &mut all);
    let rel = |p: &PathBuf| {
        p.strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/")
    };
    let present: BTreeSet<String> = all.iter().map(rel).filter(|r| r != "README.md").collect();
    let snapshots: BTreeSet<String> = present
        .iter()
        .filter(|r| r.starts_with("snapshots/") && (r.ends_with(".pickle") || r.ends_with(".gz")))
        .cloned()
        .collect();
    let traces: BTreeSet<String> = present
        .iter()
        .filter(|r| {
            r.starts_with("traces/")
                && (r.ends_with(".json") || r.ends_with(".json.gz") || r.ends_with(".raw.gz"))
        })
        .cloned()
        .collect();
    let named = |l: &[&str]| {
        l.iter()
            .map(|s| s.to_string())
            .collect::<BTreeSet<String>>()
    };
    use every_corpus_capture_opens_in_the_tui_and_every_view_renders as tui;
    use every_corpus_snapshot_analyses_to_a_sane_report as analyses;
    use every_corpus_trace_loads_or_says_what_it_is as traces;
    assert_eq!(
        named(analyses::LISTED),
        snapshots,
        "corpus snapshots vs their tests"
    );
    assert_eq!(
        named(traces::LISTED),
        traces,
        "corpus traces vs their tests"
    );
    assert_eq!(
        named(tui::LISTED),
        present,
        "corpus files vs their TUI tests"
    );
    // The counts the serial sweeps asserted: 4 snapshots, 10 traces that load, and the
    // corpus README's few dozen Chrome traces opening in the TUI.
    let refused = traces.iter().filter(|r| refused(r)).count();
    assert!(
        snapshots.len() >= 4,
        "only {} corpus snapshots found",
        snapshots.len()
    );
    assert!(
        traces.len() - refused >= 10,
        "only {} corpus traces load",
        traces.len() - refused
    );
    assert!(
        traces.len() - refused >= 20,
        "only {} corpus traces open",
        traces.len() - refused
    );
}

/// Not Chrome traces (the corpus README): the loader refuses them.
fn refused(rel: &str) -> bool {
    rel.ends_with("_et.json.gz") || rel.contains("memory_timeline.raw")
}

mod every_corpus_snapshot_analyses_to_a_sane_report {
    per_file! { super::analyses_to_a_sane_report;
    attention_2dev_nohistory = "snapshots/attention_2dev_nohistory.pickle",
    cs336_kk_fwd_mixed = "snapshots/cs336_kk_fwd_mixed.pickle",
    cs336_silmont_mem = "snapshots/cs336_silmont_mem.pickle",
    ftcourse = "snapshots/ftcourse.pickle",
    llm_inference_oom = "snapshots/llm_inference_oom.pickle",
    octree_nca_b_segment_free = "snapshots/octree_nca_b_segment_free.pickle",
    select_n_t21_b = "snapshots/select_n_t21_b.pickle",
    sketchkv2_nohistory = "snapshots/sketchkv2_nohistory.pickle",
    verl_pending_free = "snapshots/verl_pending_free.pickle",
    }
}

mod every_corpus_trace_loads_or_says_what_it_is {
    per_file! { super::loads_or_says_what_it_is;
    amd_trace_mi250_minitoy_train_rocm6_2_kineto = "traces/hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    call_stack_backward_thread = "traces/hta/call_stack/backward_thread.json",
    cpu_only_rank_34_jul_15_10_52_41_1074 = "traces/hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    critical_path_alexnet_benchmark_result_2869224_1695835535_trace = "traces/hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
    critical_path_cuda_event_sync_event_sync_trace = "traces/hta/critical_path/cuda_event_sync/event_sync_trace.json.gz",
    critical_path_cuda_event_sync_multi_stream_event_sync_trace = "traces/hta/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz",
    critical_path_end_to_end_simple_add_input_trace = "traces/hta/critical_path/end_to_end/simple_add/input/trace.json.gz",
    critical_path_end_to_end_simple_add_output_overlaid_critical_path_trace = "traces/hta/critical_path/end_to_end/simple_add/output/overlaid_critical_path_trace.json.gz",
    critical_path_simple_add_benchmark_result_493459_1694039959_trace = "traces/hta/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz",
    cupti_profiler_benchmark_result_924719_1679055439_trace = "traces/hta/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz",
    df_index_resolver_df_index_resolver = "traces/hta/df_index_resolver/df_index_resolver.json.gz",
    distributed_info_unavailable_distributed_info_not_found = "traces/hta/distributed_info_unavailable/distributed_info_not_found.json.gz",
    execution_trace_benchmark_simple_add_et = "traces/hta/execution_trace/benchmark_simple_add_et.json.gz",
    execution_trace_benchmark_simple_add_trace = "traces/hta/execution_trace/benchmark_simple_add_trace.json.gz",
    memory_analysis_memory_timeline = "traces/hta/memory_analysis/memory_timeline.raw.gz",
    mixed_files_rank_non_gpu = "traces/hta/mixed_files/rank_non_gpu.json.gz",
    mtia_inference_trace_mtia_inference_rank_0 = "traces/hta/mtia_inference_trace/mtia_inference_rank_0.json.gz",
    mtia_trace_single_rank_mtia_rank_0 = "traces/hta/mtia_trace_single_rank/mtia_rank_0.json.gz",
    nccl_parser_config_nccl_data = "traces/hta/nccl_parser_config/nccl_data.json.gz",
    negative_queue_length_values_check_rank0 = "traces/hta/negative_queue_length_values_check/rank0.json.gz",
    ns_resolution_trace_rank_0_apr_03_18_51_38_1102 = "traces/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    rank_non_gpu_rank_non_gpu = "traces/hta/rank_non_gpu/rank_non_gpu.json.gz",
    rank_unavailable_rank_not_found = "traces/hta/rank_unavailable/rank_not_found.json.gz",
    timeline_analysis_sampled_rank_0 = "traces/hta/timeline_analysis/sampled_rank-0.json.gz",
    trace_compare_base_base = "traces/hta/trace_compare/base/base.json.gz",
    trace_compare_test_test = "traces/hta/trace_compare/test/test.json.gz",
    trace_diff_control_control = "traces/hta/trace_diff/control/control.json.gz",
    trace_diff_test_test = "traces/hta/trace_diff/test/test.json.gz",
    trace_file_list_inference_rank_1 = "traces/hta/trace_file_list/inference_rank_1.json.gz",
    trace_filter_sampled_rank_0 = "traces/hta/trace_filter/sampled_rank-0.json.gz",
    trace_filter_sampled_rank_1 = "traces/hta/trace_filter/sampled_rank-1.json.gz",
    triton_example_triton_example = "traces/hta/triton_example/triton_example.json.gz",
    other_kernelforge_transformer = "traces/other/kernelforge_transformer.pt.trace.json",
    other_kineto_resnet50_torch19_mem = "traces/other/kineto_resnet50_torch19_mem.pt.trace.json.gz",
    other_part_a100_bs512 = "traces/other/parT_a100_bs512.pt.trace.json",
    }
}

mod every_corpus_capture_opens_in_the_tui_and_every_view_renders {
    per_file! { super::opens_in_the_tui_and_every_view_renders;
    attention_2dev_nohistory = "snapshots/attention_2dev_nohistory.pickle",
    cs336_kk_fwd_mixed = "snapshots/cs336_kk_fwd_mixed.pickle",
    cs336_silmont_mem = "snapshots/cs336_silmont_mem.pickle",
    ftcourse = "snapshots/ftcourse.pickle",
    llm_inference_oom = "snapshots/llm_inference_oom.pickle",
    octree_nca_b_segment_free = "snapshots/octree_nca_b_segment_free.pickle",
    select_n_t21_b = "snapshots/select_n_t21_b.pickle",
    sketchkv2_nohistory = "snapshots/sketchkv2_nohistory.pickle",
    verl_pending_free = "snapshots/verl_pending_free.pickle",
    amd_trace_mi250_minitoy_train_rocm6_2_kineto = "traces/hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    call_stack_backward_thread = "traces/hta/call_stack/backward_thread.json",
    cpu_only_rank_34_jul_15_10_52_41_1074 = "traces/hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    critical_path_alexnet_benchmark_result_2869224_1695835535_trace = "traces/hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
    critical_path_cuda_event_sync_event_sync_trace = "traces/hta/critical_path/cuda_event_sync/event_sync_trace.json.gz",
    critical_path_cuda_event_sync_multi_stream_event_sync_trace = "traces/hta/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz",
    critical_path_end_to_end_simple_add_input_trace = "traces/hta/critical_path/end_to_end/simple_add/input/trace.json.gz",
    critical_path_end_to_end_simple_add_output_overlaid_critical_path_trace = "traces/hta/critical_path/end_to_end/simple_add/output/overlaid_critical_path_trace.json.gz",
    critical_path_simple_add_benchmark_result_493459_1694039959_trace = "traces/hta/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz",
    cupti_profiler_benchmark_result_924719_1679055439_trace = "traces/hta/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz",
    df_index_resolver_df_index_resolver = "traces/hta/df_index_resolver/df_index_resolver.json.gz",
    distributed_info_unavailable_distributed_info_not_found = "traces/hta/distributed_info_unavailable/distributed_info_not_found.json.gz",
    execution_trace_benchmark_simple_add_et = "traces/hta/execution_trace/benchmark_simple_add_et.json.gz",
    execution_trace_benchmark_simple_add_trace = "traces/hta/execution_trace/benchmark_simple_add_trace.json.gz",
    memory_analysis_memory_timeline = "traces/hta/memory_analysis/memory_timeline.raw.gz",
    mixed_files_rank_non_gpu = "traces/hta/mixed_files/rank_non_gpu.json.gz",
    mtia_inference_trace_mtia_inference_rank_0 = "traces/hta/mtia_inference_trace/mtia_inference_rank_0.json.gz",
    mtia_trace_single_rank_mtia_rank_0 = "traces/hta/mtia_trace_single_rank/mtia_rank_0.json.gz",
    nccl_parser_config_nccl_data = "traces/hta/nccl_parser_config/nccl_data.json.gz",
    negative_queue_length_values_check_rank0 = "traces/hta/negative_queue_length_values_check/rank0.json.gz",
    ns_resolution_trace_rank_0_apr_03_18_51_38_1102 = "traces/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    rank_non_gpu_rank_non_gpu = "traces/hta/rank_non_gpu/rank_non_gpu.json.gz",
    rank_unavailable_rank_not_found = "traces/hta/rank_unavailable/rank_not_found.json.gz",
    timeline_analysis_sampled_rank_0 = "traces/hta/timeline_analysis/sampled_rank-0.json.gz",
    trace_compare_base_base = "traces/hta/trace_compare/base/base.json.gz",
    trace_compare_test_test = "traces/hta/trace_compare/test/test.json.gz",
    trace_diff_control_control = "traces/hta/trace_diff/control/control.json.gz",
    trace_diff_test_test = "traces/hta/trace_diff/test/test.json.gz",
    trace_file_list_inference_rank_1 = "traces/hta/trace_file_list/inference_rank_1.json.gz",
    trace_filter_sampled_rank_0 = "traces/hta/trace_filter/sampled_rank-0.json.gz",
    trace_filter_sampled_rank_1 = "traces/hta/trace_filter/sampled_rank-1.json.gz",
    triton_example_triton_example = "traces/hta/triton_example/triton_example.json.gz",
    other_kernelforge_transformer = "traces/other/kernelforge_transformer.pt.trace.json",
    other_kineto_resnet50_torch19_mem = "traces/other/kineto_resnet50_torch19_mem.pt.trace.json.gz",
    other_part_a100_bs512 = "traces/other/parT_a100_bs512.pt.trace.json",
    }
}

/// A corpus snapshot analyses to a sane report.
fn analyses_to_a_sane_report(rel: &str) {
    let Some(path) = shared::corpus(rel) else {
        return;
    };
    let path = &path;
    let snap = memscope::load::load_snapshot(path).unwrap_or_else(|e| panic!("{e}"));
    let a = memscope::analysis::analyze_snapshot(&snap, path, 0);
    assert!(!a.devices.is_empty(), "{}: no device", path.display());
    for d in &a.devices {
        assert!(
            d.replay_consistent,
            "{} cuda:{}: replay inconsistent: {:?}",
            path.display(),
            d.device,
            d.consistency
        );
        assert!(
            !d.top_sites.is_empty(),
            "{} cuda:{}: no top sites",
            path.display(),
            d.device
        );
        assert!(d.allocated_bytes <= d.reserved_bytes, "{}", path.display());
    }
    let text = report::to_string(
        &report::text::Text,
        &a,
        &report::Options {
            color: false,
            stacks: true,
        },
    );
    assert!(text.contains("VERDICT"), "{}", path.display());
    let json = report::to_string(&report::json::Json, &a, &report::Options::default());
    serde_json::from_str::<serde_json::Value>(&json).unwrap();
}

/// A corpus trace loads, or is refused with the clear words its README expects.
fn loads_or_says_what_it_is(rel: &str) {
    let Some(path) = shared::corpus(rel) else {
        return;
    };
    let name = path.to_string_lossy();
    let res = memscope::load::load_trace(&path);
    if name.ends_with("_et.json.gz") || name.contains("memory_timeline.raw") {
        // Not Chrome traces (README): a clear refusal, not a crash or a fake report.
        let err = match res {
            Err(e) => e.to_string(),
            Ok(t) => panic!("{name}: loaded as a trace with {} events", t.counts.events),
        };
        assert!(
            err.contains("not a profiler Chrome trace") || err.contains("not JSON"),
            "{err}"
        );
        return;
    }
    let t = res.unwrap_or_else(|e| panic!("{e}"));
    assert!(t.counts.events > 0, "{name}: no events");
}

/// The TUI on other people's captures: every capture that loads opens (all but the two files
/// that are not Chrome traces), and every view (drilled in where it can be) renders at 80x24 on
/// each of its devices without a panic.
fn opens_in_the_tui_and_every_view_renders(rel: &str) {
    use memscope::tui::{map_key, Action, App, Loaded};
    use ratatui::backend::TestBackend;
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let Some(path) = shared::corpus(rel) else {
        return;
    };
    let Ok(loaded) = Loaded::load(&path) else {
        assert!(refused(rel), "{rel}: does not open in the TUI");
        return;
    };
    assert!(
        !refused(rel),
        "{rel}: opens, though it is not a Chrome trace"
    );
    let trace = matches!(loaded, Loaded::Trace(_));
    let mut app = App::with(loaded);
    let mut term = ratatui::Terminal::new(TestBackend::new(80, 24)).unwrap();
    app.apply(Action::Resize(80, 24));
    let press = |app: &mut App, c: KeyCode| {
        if let Some(a) = map_key(KeyEvent::new(c, KeyModifiers::NONE)) {
            app.apply(a);
        }
    };
    let devices = if trace {
        app.trace().unwrap().devs.len()
    } else {
        app.data().unwrap().snap.devices.len()
    };
    for _ in 0..devices.max(1) {
        for keys in [
            "1", "1E", "2", "2pE", "3", "3E", "3EE", "3EEE", "4", "4E", "5", "5E",
        ] {
            for c in keys.chars() {
                press(
                    &mut app,
                    match c {
                        'E' => KeyCode::Enter,
                        c => KeyCode::Char(c),
                    },
                );
            }
            term.draw(|f| f.render_widget(&app, f.area()))
                .unwrap_or_else(|e| panic!("{}: {keys}: {e}", path.display()));
            for _ in 0..4 {
                press(&mut app, KeyCode::Esc);
            }
        }
        press(&mut app, KeyCode::Char('d'));
    }
}
