//! Issue #43, session 15: a large trace's events are read in stretches on many threads, each
//! reader numbering its stretch's names itself (`load/chrome/batch.rs`), and the build's passes
//! run side by side (`model/trace/passes.rs`). The trace must be the one a single thread
//! builds, every interned id in the same order: checked on every trace at hand (the committed
//! fixtures, `../shared`'s fixtures and corpus) with the reports made from both, and on hostile
//! traces made here whose names, threads and times are chosen to catch an ordering slip (op
//! names that are also Python function names, so the two kinds share the string table; thread
//! names; escaped and over-long names; ties; calls running before tracing began on several
//! threads; events in no time order).

use std::path::{Path, PathBuf};

use memscope::analysis::trace_report::analyze_trace_product_with;
use memscope::load::{self, chrome};
use memscope::model::trace::Trace;

use crate::shared;

/// Every trace file of the fixtures, `../shared/fixtures` and `../shared/corpus/traces`.
fn traces() -> Vec<PathBuf> {
    shared::files_under(&shared::capture_dirs(&["traces"]), |name| {
        name.ends_with(".trace.json")
            || name.ends_with(".pt.trace.json.gz")
            || name.ends_with(".pt.trace.json")
    })
}

/// The whole trace as text (floats print exactly; the interner's tables in their order).
fn shown(r: &Result<Trace, chrome::TraceError>) -> String {
    match r {
        Ok(t) => format!("{t:?}"),
        Err(e) => format!("error: {e}"),
    }
}

/// The JSON report of a trace analysed on one thread.
fn report(t: &Trace, bytes: usize) -> String {
    let a = analyze_trace_product_with(t, Path::new("t.json"), bytes as u64, 1);
    serde_json::to_string(&memscope::report::analyze::json::document(&a.analysis)).unwrap()
}

/// One thread against several, with stretches of `chunks` bytes: the same trace and report.
fn assert_same(bytes: &[u8], what: &str, runs: &[(usize, usize)]) {
    let one = chrome::parse_with_threads(bytes, 1);
    let one_text = shown(&one);
    let one_report = one.as_ref().ok().map(|t| report(t, bytes.len()));
    for &(threads, chunk) in runs {
        let many = chrome::parse_with_chunks(bytes, threads, chunk);
        assert!(
            one_text == shown(&many),
            "{what}: {threads} threads, {chunk}-byte stretches: the trace differs from one thread's"
        );
        let many_report = many.as_ref().ok().map(|t| report(t, bytes.len()));
        assert_eq!(one_report, many_report, "{what}: {threads} threads: report");
    }
}

#[test]
fn many_threads_give_the_one_thread_trace_on_every_real_trace() {
    let files = traces();
    let mut n = 0;
    for p in &files {
        let Ok(bytes) = load::read_input(p) else {
            continue;
        };
        assert_same(
            &bytes,
            &p.display().to_string(),
            &[(16, 1 << 16), (4, 4096)],
        );
        n += 1;
    }
    // The repo holds one trace; ../shared adds its fixtures' and the corpus' (skipped visibly
    // on a bare clone, required in CI).
    let least = if shared::path("fixtures").is_some() {
        3
    } else {
        1
    };
    assert!(n >= least, "only {n} traces found");
}

/// A small xorshift: the hostile traces are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[(self.next() % xs.len() as u64) as usize]
    }
}

/// A trace of `n` rounds in no time order, built to trip an ordering slip (see the module doc).
fn hostile(seed: u64, n: usize) -> String {
    let mut r = Rng(seed | 1);
    let long = "L".repeat(70_000);
    let long_op = format!("aten::{long}");
    let long_py = format!("deep.py(3): {long}");
    let ops = [
        "aten::mm",
        "f",
        "g",
        "train.py",
        "aten::add_",
        "autograd::engine::evaluate_function: MmBackward0",
        "MmBackward0",
        "torch::autograd::AccumulateGrad",
        "aten::\\u0041dd",
        &long_op,
    ];
    let py = [
        "train.py(10): f",
        "train.py(20): g",
        "model.py(5): f",
        "torch/nn/modules/module.py(1783): _call_impl",
        "<built-in method item of Tensor object at 0x7f80158b85a0>",
        "<built-in method item of Tensor object at 0x7f0000000000>",
        "nn.Module: Linear_0",
        "weird name",
        "aten::mm",
        "esc\\\"aped.py(1): h",
        &long_py,
    ];
    let tids = [
        "1",
        "2",
        "\"3\"",
        "\" 4 \"",
        "\"worker-a\"",
        "\"worker-b\"",
        "\"\"",
        "-5",
    ];
    let mut ev: Vec<String> = Vec::new();
    // Calls open when tracing began, on several threads, outermost first.
    for (k, tid) in ["1", "2", "\"worker-a\""].iter().enumerate() {
        for d in 0..3 {
            let ts = 1.0 + d as f64 * 0.5 + k as f64;
            ev.push(format!(
                r#"{{"ph": "X", "cat": "python_function", "name": "{}", "pid": 1, "tid": {tid}, "ts": {ts}, "dur": {}, "args": {{"Python id": {}, "Python parent id": {}}}}}"#,
                py[d % 3],
                1e6 - d as f64,
                d + 10 * k,
                d as i64 - 1
            ));
        }
    }
    for i in 0..n {
        let ts = (r.next() % 50_000) as f64 / 7.0 + 100.0;
        let dur = (r.next() % 300) as f64 / 3.0 - 5.0;
        let tid = tids[(r.next() % tids.len() as u64) as usize];
        match r.next() % 9 {
            0..=2 => ev.push(format!(
                r#"{{"ph": "X", "cat": "python_function", "name": "{}", "pid": 1, "tid": {tid}, "ts": {ts}, "dur": {dur}, "args": {{"Python id": {i}}}}}"#,
                r.pick(&py)
            )),
            3..=5 => ev.push(format!(
                r#"{{"ph": "X", "cat": "cpu_op", "name": "{}", "pid": 1, "tid": {tid}, "ts": {ts}, "dur": {dur}, "args": {{"Sequence number": {}, "Fwd thread id": 0, "External id": {i}}}}}"#,
                r.pick(&ops),
                r.next() % 40
            )),
            6 => ev.push(format!(
                r#"{{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": {tid}, "ts": {ts}, "args": {{"Addr": {}, "Bytes": {}, "Total Allocated": {}, "Total Reserved": 4194304, "Device Type": 1, "Device Id": {}}}}}"#,
                4096 * (r.next() % 64),
                (r.next() % 4096) as i64 - 2048,
                r.next() % 1_000_000,
                r.next() % 2
            )),
            7 => ev.push(format!(
                r#"{{"ph": "{}", "cat": "fwdbwd", "name": "fwdbwd", "id": {}, "pid": 1, "tid": {tid}, "ts": {ts}}}"#,
                if r.next().is_multiple_of(2) { "s" } else { "f" },
                r.next() % 30
            )),
            _ => {
                let step = r.next() % 6;
                let (cat, name) = match r.next() % 3 {
                    0 => ("user_annotation", format!("ProfilerStep#{step}")),
                    1 => ("gpu_user_annotation", format!("ProfilerStep#{step}")),
                    _ => ("user_annotation", "Optimizer.step#AdamW.step".to_owned()),
                };
                ev.push(format!(
                    r#"{{"ph": "X", "cat": "{cat}", "name": "{name}", "pid": 1, "tid": {tid}, "ts": {ts}, "dur": {}}}"#,
                    dur.abs() * 40.0
                ));
            }
        }
    }
    // Ties: the same instant on one thread, in both orders.
    for k in 0..20 {
        ev.push(format!(
            r#"{{"ph": "X", "cat": "cpu_op", "name": "{}", "pid": 1, "tid": 1, "ts": 4000.5, "dur": {k}}}"#,
            ops[k % 4]
        ));
    }
    format!(
        "{{\"schemaVersion\": 1, \"traceEvents\": [\n{}\n], \"traceName\": \"hostile\"}}",
        ev.join(",\n")
    )
}

#[test]
fn many_threads_give_the_one_thread_trace_on_hostile_traces() {
    for seed in [1u64, 7, 43] {
        let text = hostile(seed, 6_000);
        let bytes = text.as_bytes();
        let t = chrome::parse_with_threads(bytes, 1).unwrap();
        // What the trace must hold for the comparison to mean anything.
        assert!(t.ops.iter().any(|o| o.tid.0 < 0), "named threads");
        assert!(t.python.iter().any(|p| p.preexisting), "pre-existing calls");
        assert!(!t.flows.is_empty() && !t.steps.is_empty() && !t.annotations.is_empty());
        assert!(t.counts.gpu_step_duplicates > 0);
        assert!(
            t.stacks.stack_count() > 20,
            "{} stacks",
            t.stacks.stack_count()
        );
        // An op named like a Python function: the two kinds share the string table.
        assert!(t.ops.iter().any(|o| t.stacks.str(o.name) == "f"));
        assert!(t
            .python
            .iter()
            .any(|p| t.stacks.str(t.stacks.frame(p.frame).name) == "f"));
        assert_same(
            bytes,
            &format!("hostile seed {seed}"),
            &[(2, 64), (4, 1000), (16, 1 << 14), (3, 7)],
        );
    }
}

#[test]
fn the_build_runs_its_passes_on_other_threads_only_when_asked() {
    let text = hostile(5, 2_000);
    let before = memscope::threads::spawned_here();
    let one = chrome::parse_with_threads(text.as_bytes(), 1).unwrap();
    assert_eq!(
        memscope::threads::spawned_here(),
        before,
        "one thread spawned some"
    );
    let four = chrome::parse_with_threads(text.as_bytes(), 4).unwrap();
    // The groups' pair, then nesting beside stacks beside the first returns.
    assert!(
        memscope::threads::spawned_here() >= before + 3,
        "{} spawned",
        memscope::threads::spawned_here() - before
    );
    assert_eq!(format!("{one:?}"), format!("{four:?}"));
}
