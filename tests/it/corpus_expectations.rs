//! memscope's conclusions on the public corpus (`../shared/corpus`), asserted against what an
//! expert concludes by reading each file independently.
//!
//! `tests/it/corpus.rs` checks that every capture loads and renders; that alone lets a report say
//! "retained graph growing per step over 31 steps" about one forward pass of a 32-layer model.
//! Here the truth comes from `tests/it/corpus_expectations.toml`, written from the output of
//! `tools/read_capture.py` (a stdlib-only reader with a refusing unpickler, sharing nothing with
//! the crate; its output is `tests/it/corpus_facts.md`) before memscope was run on the files. One
//! test per concern (steps, leaks and verdicts, gradients, memory before recording, peaks, old
//! traces), so each can be un-ignored when the work it waits for lands. A corpus file without an
//! entry fails `every_corpus_file_has_expectations`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::OnceLock;

use memscope::analysis::notes::{Note, TraceNote};
use memscope::analysis::{Analysis, VerdictKind};

use crate::shared;

/// One entry of `corpus_expectations.toml` (field meanings are documented at its top).
#[derive(Debug, serde::Deserialize)]
struct Capture {
    files: Vec<String>,
    kind: String,
    history: Option<bool>,
    steps: Option<usize>,
    step_spans: Option<usize>,
    backward_ran: Option<bool>,
    leak: Option<bool>,
    judgeable: Option<bool>,
    oom: Option<bool>,
    pre_recording_bytes: Option<u64>,
    peak_allocated_bytes: Option<u64>,
    weight_bytes: Option<u64>,
    /// The `why_*` sentences; anything else here is a typo in a field name.
    #[serde(flatten)]
    rest: BTreeMap<String, toml::Value>,
}

#[derive(Debug, serde::Deserialize)]
struct Expectations {
    capture: Vec<Capture>,
}

/// What memscope made of one file.
enum Observed {
    Snapshot {
        analysis: Box<Analysis>,
        /// Per device (report order): bytes allocated before the log's first event, as replayed.
        initial_allocated: Vec<u64>,
    },
    Trace(Box<Analysis>),
    Refused(String),
}

struct Case {
    rel: String,
    expect: &'static Capture,
    seen: Observed,
}

fn expectations() -> &'static Expectations {
    static E: OnceLock<Expectations> = OnceLock::new();
    E.get_or_init(|| {
        let text = include_str!("corpus_expectations.toml");
        toml::from_str(text).unwrap_or_else(|e| panic!("corpus_expectations.toml: {e}"))
    })
}

fn observe(kind: &str, path: &Path) -> Observed {
    let bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    match kind {
        "snapshot" => {
            let snap = memscope::load::load_snapshot(path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let product = memscope::analysis::analyze_snapshot(&snap, path, bytes);
            let initial_allocated = product
                .timelines()
                .map(|t| t.initial.counters.allocated)
                .collect();
            Observed::Snapshot {
                analysis: Box::new(product.analysis),
                initial_allocated,
            }
        }
        _ => match memscope::load::load_trace(path) {
            Ok(t) => Observed::Trace(Box::new(memscope::analysis::analyze_trace(&t, path, bytes))),
            Err(e) => Observed::Refused(e.to_string()),
        },
    }
}

/// Every file of the corpus analysed once for all the tests of this binary; `None` when the
/// corpus is absent on a contributor's machine (CI requires it).
fn cases() -> Option<&'static [Case]> {
    static C: OnceLock<Option<Vec<Case>>> = OnceLock::new();
    C.get_or_init(|| {
        shared::path("corpus")?;
        let mut out = Vec::new();
        for expect in &expectations().capture {
            for rel in &expect.files {
                let path = shared::corpus(rel)?;
                out.push(Case {
                    rel: rel.clone(),
                    expect,
                    seen: observe(&expect.kind, &path),
                });
            }
        }
        Some(out)
    })
    .as_deref()
}

fn snapshots() -> impl Iterator<Item = (&'static Case, &'static Analysis, &'static [u64])> {
    cases().into_iter().flatten().filter_map(|c| match &c.seen {
        Observed::Snapshot {
            analysis,
            initial_allocated,
        } => Some((c, &**analysis, initial_allocated.as_slice())),
        _ => None,
    })
}

fn traces() -> impl Iterator<Item = (&'static Case, &'static Analysis)> {
    cases().into_iter().flatten().filter_map(|c| match &c.seen {
        Observed::Trace(a) => Some((c, &**a)),
        _ => None,
    })
}

fn analyses() -> impl Iterator<Item = (&'static Case, &'static Analysis)> {
    snapshots().map(|(c, a, _)| (c, a)).chain(traces())
}

/// Iteration steps memscope found, most on any one device.
fn steps_found(a: &Analysis) -> usize {
    let mut per_dev: BTreeMap<u32, usize> = BTreeMap::new();
    for s in &a.steps {
        *per_dev.entry(s.device).or_default() += 1;
    }
    per_dev.values().copied().max().unwrap_or(0)
}

/// Collects every failure before failing, so one run shows all the files that disagree.
struct Failures(Vec<String>);

impl Failures {
    fn new() -> Self {
        Failures(Vec::new())
    }
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.0.push(what());
        }
    }
    fn done(self, concern: &str) {
        assert!(
            self.0.is_empty(),
            "{concern}: {} disagreement(s) with the independent reading:\n  {}",
            self.0.len(),
            self.0.join("\n  ")
        );
    }
}

fn walk(dir: &Path, root: &Path, out: &mut BTreeSet<String>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, root, out);
        } else if p.file_name().is_some_and(|n| n != "README.md") {
            let rel = p
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            out.insert(rel);
        }
    }
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn every_corpus_file_has_expectations() {
    let e = expectations();
    let mut listed = BTreeSet::new();
    let mut f = Failures::new();
    for c in &e.capture {
        for rel in &c.files {
            f.check(listed.insert(rel.clone()), || {
                format!("{rel}: listed twice")
            });
        }
        for k in c.rest.keys() {
            f.check(k.starts_with("why"), || {
                format!("{:?}: unknown field `{k}`", c.files)
            });
        }
        f.check(
            matches!(c.kind.as_str(), "snapshot" | "trace" | "not_a_trace"),
            || format!("{:?}: kind `{}`", c.files, c.kind),
        );
        if c.kind != "not_a_trace" {
            let judged = [c.history, c.backward_ran, c.leak, c.judgeable, c.oom];
            f.check(judged.iter().all(Option::is_some), || {
                format!(
                    "{:?}: history, backward_ran, leak, judgeable and oom are all required",
                    c.files
                )
            });
            f.check(c.rest.keys().any(|k| k.starts_with("why")), || {
                format!("{:?}: no `why`", c.files)
            });
        }
    }
    let Some(root) = shared::path("corpus") else {
        return;
    };
    let mut present = BTreeSet::new();
    walk(&root, &root, &mut present);
    for rel in present.difference(&listed) {
        f.check(false, || {
            format!("{rel}: in the corpus but has no entry in tests/it/corpus_expectations.toml")
        });
    }
    // The reviewable reading must cover the same files (regenerate it with the command at its top).
    let facts = include_str!("corpus_facts.md");
    for rel in &present {
        f.check(facts.contains(&format!("## `{rel}`")), || {
            format!("{rel}: missing from tests/it/corpus_facts.md")
        });
    }
    for rel in listed.difference(&present) {
        f.check(false, || {
            format!("{rel}: has an entry but is not in the corpus")
        });
    }
    f.done("corpus coverage");
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn captures_load_as_what_they_are() {
    let Some(cases) = cases() else { return };
    let mut f = Failures::new();
    for c in cases {
        match (&c.seen, c.expect.kind.as_str()) {
            (Observed::Refused(e), "not_a_trace") => f.check(
                e.contains("not a profiler Chrome trace") || e.contains("not JSON"),
                || format!("{}: refused without saying what it is: {e}", c.rel),
            ),
            (Observed::Refused(e), _) => f.check(false, || format!("{}: refused: {e}", c.rel)),
            (_, "not_a_trace") => f.check(false, || format!("{}: loaded as a trace", c.rel)),
            _ => {}
        }
    }
    f.done("loading");
}

/// A log records allocations or it does not; a lone free is not a history.
#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn history_is_read_as_recorded() {
    let mut f = Failures::new();
    for (c, a, _) in snapshots() {
        let want = c.expect.history.unwrap();
        let got = a.devices.iter().any(|d| d.has_history);
        f.check(got == want, || {
            format!("{}: has_history {got}, the log says {want}", c.rel)
        });
    }
    for (c, a) in traces() {
        let want = c.expect.history.unwrap();
        let got = a.devices.iter().any(|d| d.events > 0);
        f.check(got == want, || {
            format!("{}: CUDA memory events {got}, the trace says {want}", c.rel)
        });
    }
    f.done("history");
}

/// A snapshot's iterations are loop iterations: never more than the program ran (the layers of
/// one forward pass are not steps).
#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn snapshot_steps_are_real_iterations() {
    let mut f = Failures::new();
    for (c, a, _) in snapshots() {
        let found = steps_found(a);
        match c.expect.steps {
            Some(n) => f.check(found <= n, || {
                format!("{}: {found} steps found, the program ran {n}", c.rel)
            }),
            None => f.check(found == 0, || {
                format!(
                    "{}: {found} steps found in a capture that cannot show any",
                    c.rel
                )
            }),
        }
    }
    f.done("snapshot steps");
}

/// A trace's steps are its `ProfilerStep#N` spans, whatever their `cat`.
#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn trace_steps_are_the_profiler_steps() {
    let mut f = Failures::new();
    for (c, a) in traces() {
        let spans = c.expect.step_spans.unwrap_or(0);
        let g = a.graph.as_ref().map(|g| g.steps).unwrap_or(0);
        f.check(g == spans, || {
            format!("{}: {g} profiler steps read, the file has {spans}", c.rel)
        });
        let found = steps_found(a);
        if c.expect.history == Some(true) && spans > 0 {
            f.check(found == spans, || {
                format!(
                    "{}: {found} steps with memory figures, the file has {spans}",
                    c.rel
                )
            });
        } else {
            f.check(found <= c.expect.steps.unwrap_or(0), || {
                format!("{}: {found} steps with memory figures", c.rel)
            });
        }
    }
    f.done("trace steps");
}

/// `leak = false`: no leak finding, no graph growth, and a verdict that says neither.
#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn no_leak_where_none_can_be_shown() {
    let mut f = Failures::new();
    for (c, a) in analyses() {
        if c.expect.leak != Some(false) {
            continue;
        }
        f.check(a.leaks.is_empty(), || {
            format!(
                "{}: {} leak finding(s), first: {}",
                c.rel,
                a.leaks.len(),
                a.leaks.first().map(|l| l.leak.kind.id()).unwrap_or("")
            )
        });
        let growth = a.graph.as_ref().map(|g| g.growth.len()).unwrap_or(0);
        f.check(growth == 0, || {
            format!("{}: {growth} graph growth finding(s)", c.rel)
        });
        f.check(
            a.verdict.kind != VerdictKind::Leak && a.verdict.kind != VerdictKind::GraphGrowth,
            || {
                format!(
                    "{}: verdict {}: {}",
                    c.rel,
                    a.verdict.kind,
                    memscope::wording::verdict(&a.verdict)
                )
            },
        );
    }
    f.done("leaks");
}

/// Where no judgement is possible (no history, one or two passes, no memory events, CPU-only),
/// "ok" would be a claim the capture cannot back.
#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn verdict_is_not_ok_where_nothing_can_be_judged() {
    let mut f = Failures::new();
    for (c, a) in analyses() {
        if c.expect.judgeable != Some(false) {
            continue;
        }
        f.check(a.verdict.kind != VerdictKind::Ok, || {
            format!(
                "{}: verdict ok ({})",
                c.rel,
                memscope::wording::verdict(&a.verdict)
            )
        });
    }
    f.done("unjudged verdicts");
}

/// Where a judgement is possible and the reading finds nothing wrong, the verdict is `ok`.
#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn verdict_is_ok_where_judged_clean() {
    let mut f = Failures::new();
    for (c, a) in analyses() {
        if c.expect.judgeable == Some(true) && c.expect.leak == Some(false) {
            f.check(a.verdict.kind == VerdictKind::Ok, || {
                format!(
                    "{}: verdict {}: {}",
                    c.rel,
                    a.verdict.kind,
                    memscope::wording::verdict(&a.verdict)
                )
            });
        }
    }
    f.done("clean verdicts");
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn oom_only_where_recorded() {
    let mut f = Failures::new();
    for (c, a) in analyses() {
        let want = c.expect.oom.unwrap();
        let got = a.devices.iter().any(|d| !d.ooms.is_empty());
        f.check(got == want, || {
            format!("{}: OOM reported {got}, recorded {want}", c.rel)
        });
        f.check(a.verdict.kind.is_oom() == want, || {
            format!("{}: verdict {}", c.rel, a.verdict.kind)
        });
    }
    f.done("OOMs");
}

/// No backward ran: no memory can be a gradient, at the peak, at an OOM or anywhere reported.
#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn no_gradient_or_activation_bytes_where_no_backward_ran() {
    let mut f = Failures::new();
    let mut checked = 0;
    for (c, a, _) in snapshots() {
        if c.expect.backward_ran != Some(false) {
            continue;
        }
        // (where, gradient bytes, activation bytes): with no backward, nothing was saved for
        // one (a forward's kept memory is outputs, a KV cache, or temporaries).
        let mut cats: Vec<(String, u64, u64)> = Vec::new();
        if let Some(r) = &a.categories {
            let k = &r.categories;
            cats.push((
                format!("report ({})", r.at.name()),
                k.gradient,
                k.activation,
            ));
        }
        for d in &a.devices {
            for (at, k) in [
                ("at peak", &d.categories_at_peak),
                ("at the dump", &d.categories_at_dump),
            ] {
                if let Some(k) = k {
                    cats.push((format!("cuda:{} {at}", d.device), k.gradient, k.activation));
                }
            }
            for o in &d.ooms {
                if let Some(k) = &o.categories {
                    let at = format!("cuda:{} at OOM {}", d.device, o.event);
                    cats.push((at, k.gradient, k.activation));
                }
            }
        }
        for (at, g, act) in cats {
            checked += 1;
            f.check(g == 0, || {
                format!("{}: {g} B of gradients {at}, but no backward ran", c.rel)
            });
            f.check(act == 0, || {
                format!(
                    "{}: {act} B of activations {at}, but no backward ran",
                    c.rel
                )
            });
        }
    }
    f.check(checked > 0 || cases().is_none(), || {
        "no forward-only snapshot has categories to check".into()
    });
    f.done("gradients in snapshots");
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn no_backward_nodes_in_traces_where_no_backward_ran() {
    let mut f = Failures::new();
    for (c, a) in traces() {
        if c.expect.backward_ran != Some(false) {
            continue;
        }
        // What autograd's engine evaluated: the graph's backward nodes and its AccumulateGrad
        // evaluations (counted apart since the latter are not nodes of the forward graph).
        let n = a
            .graph
            .as_ref()
            .map(|g| g.backward_nodes + g.leaf_accumulations)
            .unwrap_or(0);
        f.check(n == 0, || {
            format!("{}: {n} backward nodes, but no backward ran", c.rel)
        });
    }
    f.done("backward in traces");
}

/// A backward the file shows must be seen, including torch 1.9's unwrapped `*Backward` ops and
/// cut-down traces without the engine's wrapper.
#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn backward_nodes_in_traces_where_backward_ran() {
    let mut f = Failures::new();
    for (c, a) in traces() {
        if c.expect.backward_ran != Some(true) {
            continue;
        }
        // What autograd's engine evaluated: the graph's backward nodes and its AccumulateGrad
        // evaluations (counted apart since the latter are not nodes of the forward graph).
        let n = a
            .graph
            .as_ref()
            .map(|g| g.backward_nodes + g.leaf_accumulations)
            .unwrap_or(0);
        f.check(n > 0, || {
            format!("{}: no backward node, but a backward ran", c.rel)
        });
    }
    f.done("backward in traces");
}

/// Bytes alive before the log's first event: within 1% (+1 MiB) above the reading's lower bound,
/// which counts entry sizes where torch counts block sizes.
fn close_above(got: u64, lower: u64) -> bool {
    got >= lower && got <= lower + lower / 100 + (1 << 20)
}

/// Memory allocated before recording began is replayed as such, and flagged.
#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn memory_before_recording_is_attributed() {
    let mut f = Failures::new();
    for (c, a, initial) in snapshots() {
        let Some(pre) = c.expect.pre_recording_bytes else {
            continue;
        };
        if c.expect.history != Some(true) {
            // No log: nothing in it can place a peak.
            for d in &a.devices {
                f.check(!d.peak_exact && d.peak_allocated_bytes.is_none(), || {
                    format!("{} cuda:{}: an exact peak without a log", c.rel, d.device)
                });
            }
            // What predates recording is still counted apart, at the dump: in the categories
            // and as its own site row (never blamed on autograd's engine thread).
            let cat: u64 = a
                .devices
                .iter()
                .filter_map(|d| d.categories_at_dump.as_ref())
                .map(|k| k.before_recording)
                .sum();
            f.check(
                if pre == 0 {
                    cat == 0
                } else {
                    close_above(cat, pre)
                },
                || {
                    format!(
                        "{}: {cat} B counted before recording at the dump, the reading says {pre}",
                        c.rel
                    )
                },
            );
            let rows: u64 = a
                .devices
                .iter()
                .flat_map(|d| &d.top_sites)
                .filter(|s| s.before_recording)
                .map(|s| s.bytes)
                .sum();
            f.check(rows == cat, || {
                format!(
                    "{}: {rows} B in before-recording site rows, {cat} B in the category",
                    c.rel
                )
            });
            continue;
        }
        let got: u64 = initial.iter().sum();
        f.check(close_above(got, pre), || {
            format!(
                "{}: {got} B alive before the log, the reading says {pre}",
                c.rel
            )
        });
        let mid = a.devices.iter().any(|d| d.history_starts_mid_run);
        f.check(mid == (pre > 0), || {
            format!(
                "{}: history_starts_mid_run {mid} with {pre} B before the log",
                c.rel
            )
        });
    }
    for (c, a) in traces() {
        let Some(pre) = c.expect.pre_recording_bytes else {
            continue;
        };
        let mid = a.devices.iter().any(|d| d.history_starts_mid_run);
        f.check(mid == (pre > 0), || {
            format!(
                "{}: history_starts_mid_run {mid} with {pre} B before profiling",
                c.rel
            )
        });
        f.check(
            pre == 0
                || a.notes
                    .iter()
                    .any(|n| matches!(n, Note::Trace(TraceNote::AllocatedBeforeProfiling { .. }))),
            || {
                format!(
                    "{}: no note of the {pre} B allocated before profiling",
                    c.rel
                )
            },
        );
    }
    f.done("memory before recording");
}

/// Peaks: snapshots within 1% (+1 MiB) above the reading's curve (and never below what the dump
/// itself holds); traces with `Total Allocated` exactly the profiler's own peak.
#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn peaks_match_the_independent_reading() {
    let mut f = Failures::new();
    for (c, a, _) in snapshots() {
        let Some(peak) = c.expect.peak_allocated_bytes else {
            continue;
        };
        let got = a
            .devices
            .iter()
            .map(|d| d.observed_peak_allocated_bytes)
            .max()
            .unwrap_or(0);
        let dump = a
            .devices
            .iter()
            .filter_map(|d| d.allocated_bytes)
            .max()
            .unwrap_or(0);
        f.check(close_above(got, peak) && got >= dump, || {
            format!(
                "{}: observed peak {got} B, the reading says {peak} B",
                c.rel
            )
        });
        if c.expect.pre_recording_bytes == Some(0) {
            let exact = a
                .devices
                .iter()
                .filter_map(|d| d.peak_allocated_bytes)
                .max();
            f.check(exact == Some(got), || {
                format!(
                    "{}: exact peak {exact:?} for a log that starts empty",
                    c.rel
                )
            });
        }
    }
    for (c, a) in traces() {
        let (Some(peak), Some(_)) = (c.expect.peak_allocated_bytes, c.expect.pre_recording_bytes)
        else {
            continue;
        };
        let got = a
            .devices
            .iter()
            .filter_map(|d| d.peak_allocated_bytes)
            .max();
        f.check(got == Some(peak), || {
            format!("{}: peak {got:?}, Total Allocated peaks at {peak}", c.rel)
        });
    }
    f.done("peaks");
}

/// torch 1.9: `[memory]` events with only `Bytes` and `ProfilerStep#N` spans with
/// `cat: "Operator"` still give six steps and the 2.6 GiB the steps reach above the start.
#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn torch19_trace_gives_steps_and_memory() {
    let rel = "traces/other/kineto_resnet50_torch19_mem.pt.trace.json.gz";
    let Some((c, a)) = traces().find(|(c, _)| c.rel == rel) else {
        assert!(cases().is_none(), "{rel}: not loaded as a trace");
        return;
    };
    let want = c.expect.peak_allocated_bytes.unwrap();
    let steps = c.expect.steps.unwrap();
    assert!(!a.devices.is_empty(), "{rel}: no CUDA device reported");
    let got = a
        .devices
        .iter()
        .map(|d| {
            d.peak_allocated_bytes
                .unwrap_or(d.observed_peak_allocated_bytes)
        })
        .max()
        .unwrap();
    assert!(got > 0, "{rel}: zero peak");
    assert!(
        close_above(got, want),
        "{rel}: peak {got} B, the running sum of Bytes peaks {want} B above the start"
    );
    assert_eq!(steps_found(a), steps, "{rel}: steps with memory figures");
    assert_eq!(a.graph.as_ref().map(|g| g.steps), Some(steps), "{rel}");
}

/// Weights named from the function that loaded them (issue 23): a snapshot whose blocks were
/// all made under a weight loader (`init_weight`, `from_pretrained`, ...) shows them as
/// parameters, not `other`.
#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn weights_are_named_from_their_loader() {
    let mut f = Failures::new();
    let mut checked = 0;
    for (c, a, _) in snapshots() {
        let Some(want) = c.expect.weight_bytes else {
            continue;
        };
        checked += 1;
        let got: u64 = a
            .devices
            .iter()
            .filter_map(|d| {
                d.categories_at_dump
                    .as_ref()
                    .or(d.categories_at_peak.as_ref())
            })
            .map(|k| k.parameter)
            .sum();
        f.check(got == want, || {
            format!("{}: {got} B of parameters, the loader made {want} B", c.rel)
        });
    }
    f.check(checked > 0 || cases().is_none(), || {
        "no corpus capture states its weight bytes".into()
    });
    f.done("weights");
}
