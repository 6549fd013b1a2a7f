//! The leak rules' table (`analysis::leaks::rules::CODES`): every kind registered once, with a
//! stable id and its sentences, and the rules firing on real captures of both kinds: a
//! snapshot's sites and a profiler trace's survivors are judged by the same rows.

use std::path::{Path, PathBuf};

use memscope::analysis::leaks::{
    self, classify_trace, registered, FoundBy, LeakEvidence, LeakKind, LogEvidence, OnTrace, CODES,
};
use memscope::analysis::{replay, steps};
use memscope::model::Site;
use memscope::wording;

use crate::shared;

fn local(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(rel)
}

/// The leak findings of a snapshot's first device.
fn snapshot_leaks(path: &Path) -> Vec<leaks::Leak> {
    let snap = memscope::load::load_snapshot(path).expect("loads");
    let dev = snap.devices.first().cloned().unwrap_or_default();
    let tl = replay::replay(&dev, &snap.settings);
    let steps = steps::split(&snap, &dev, &tl);
    leaks::find(&snap, &dev, &tl, &steps).leaks
}

fn trace_leaks(path: &Path) -> Vec<leaks::Leak> {
    let t = memscope::load::load_trace(path).expect("loads");
    let a = memscope::analysis::analyze_trace(&t, path, 0);
    a.leaks.into_iter().map(|l| l.leak).collect()
}

#[test]
fn every_kind_has_one_row_with_a_stable_unique_id() {
    let mut ids: Vec<&str> = CODES.iter().map(|c| c.id).collect();
    let mut labels: Vec<&str> = CODES.iter().map(|c| c.label).collect();
    for c in CODES {
        assert!(
            !c.id.is_empty() && c.id.chars().all(|ch| ch.is_ascii_lowercase() || ch == '_'),
            "{:?}: id {:?} is not snake_case",
            c.kind,
            c.id
        );
        // The id is what JSON, baselines and `--fail-on` read and write, both ways.
        let j = serde_json::to_value(c.kind).unwrap();
        assert_eq!(j, c.id);
        assert_eq!(serde_json::from_value::<LeakKind>(j).unwrap(), c.kind);
        assert_eq!((c.kind.id(), c.kind.label()), (c.id, c.label));
        assert_eq!(c.kind.to_string(), c.id);
    }
    ids.sort_unstable();
    ids.dedup();
    labels.sort_unstable();
    labels.dedup();
    assert_eq!((ids.len(), labels.len()), (CODES.len(), CODES.len()));
    // The query tables document every id of their `leaks.kind` column.
    let doc = memscope::query::schema::TABLES
        .iter()
        .find(|t| t.name == "leaks")
        .and_then(|t| t.columns.iter().find(|c| c.name == "kind"))
        .expect("leaks.kind")
        .doc;
    for c in CODES {
        assert!(doc.contains(&format!("`{}`", c.id)), "{}: {doc}", c.id);
    }
}

/// A snapshot finding's evidence, as the log gives it for a site growing 1 MiB a step.
fn log_evidence() -> LogEvidence {
    LogEvidence {
        site: Some(Site {
            file: "train.py".into(),
            line: 12,
            function: "main".into(),
        }),
        growth_bytes_per_step: (1u64 << 20) as f64,
        growth_tensors_per_step: 1.0,
        steps: 10,
        live_bytes: 10 << 20,
        max_requested: 1 << 20,
        holder: None,
        members: Vec::new(),
        loop_line: None,
    }
}

#[test]
fn every_rule_has_its_own_sentences_for_each_capture_it_judges() {
    let e = log_evidence();
    // What every snapshot finding says first: the site's growth. The fallback rule says only it.
    let fallback = wording::rule_explanation(LeakKind::SteadyGrowth, &e);
    let (mut fixes, mut trace_fixes, mut explanations) = (Vec::new(), Vec::new(), Vec::new());
    for (rule, on) in registered() {
        let kind = rule.id();
        assert!(!rule.describe().is_empty(), "{kind}");
        let fix = wording::rule_fix(kind);
        assert!(!fix.is_empty(), "{kind}");
        fixes.push(fix);
        let why = wording::rule_explanation(kind, &e);
        assert!(
            why.starts_with(fallback.trim_end_matches('.')),
            "{kind}: {why}"
        );
        if kind != LeakKind::SteadyGrowth {
            assert!(
                why.len() > fallback.len(),
                "{kind} has no sentence of its own"
            );
            explanations.push(why);
        }
        if on == OnTrace::Judges {
            trace_fixes.push(wording::trace_fix(kind));
        }
    }
    for v in [&mut fixes, &mut trace_fixes] {
        let n = v.len();
        v.sort_unstable();
        v.dedup();
        assert_eq!(v.len(), n, "two rules share a fix: {v:#?}");
    }
    let n = explanations.len();
    explanations.sort_unstable();
    explanations.dedup();
    assert_eq!(explanations.len(), n, "two rules share an explanation");
    // Kinds found by a pass of their own are in the table too, with their own label.
    assert!(CODES.iter().any(|c| matches!(c.found_by, FoundBy::Pass(_))));
}

/// Each rule that judges snapshots fires on the real captures of its shape (fixtures/ and
/// fixtures/claims36, with `../shared`'s evaluation OOM), one finding each.
#[test]
fn rules_fire_on_real_snapshots_of_their_shape() {
    let mut cases: Vec<(PathBuf, LeakKind)> = [
        ("leak_cache_dict.pickle", LeakKind::TensorCache),
        ("leak_history.pickle", LeakKind::KeptOutputs),
        ("leak_preds.pickle", LeakKind::KeptOutputs),
        ("leak_hook.pickle", LeakKind::HookCache),
        ("leak_val_no_grad.pickle", LeakKind::RetainedGraph),
        ("leak_oom.pickle", LeakKind::RetainedGraph),
        (
            "claims36/opt_grad_history_leak.pickle.gz",
            LeakKind::TensorCache,
        ),
        ("realistic/eval_leak.pickle.gz", LeakKind::RetainedGraph),
    ]
    .into_iter()
    .map(|(p, k)| (local(p), k))
    .collect();
    if let Some(p) = shared::fixture("val_no_grad_oom.pickle") {
        cases.push((p, LeakKind::RetainedGraph));
    }
    let mut fired = Vec::new();
    for (path, kind) in cases {
        let found = snapshot_leaks(&path);
        assert_eq!(found.len(), 1, "{}: {found:#?}", path.display());
        assert_eq!(found[0].kind, kind, "{}", path.display());
        assert!(matches!(found[0].evidence, LeakEvidence::Log(_)));
        fired.push(kind);
    }
    // The clean twins: no rule fires.
    for p in ["clean.pickle", "claims36/ema_clean.pickle.gz"] {
        let found = snapshot_leaks(&local(p));
        assert!(found.is_empty(), "{p}: {found:#?}");
    }
    for (rule, _) in registered() {
        let k = rule.id();
        // No real capture shows these two: a kept scalar loss whose backward ran holds no GPU
        // memory (fixtures/leak_total_loss.meta.json), and the fallback fires only where no
        // other shape fits. Their unit tests cover them.
        if ![LeakKind::AccumulatedLoss, LeakKind::SteadyGrowth].contains(&k) {
            assert!(fired.contains(&k), "{k} fires on no real snapshot here");
        }
    }
}

/// The profiler traces in fixtures/ with the kind of their finding: a trace's survivors go
/// through the same rules, and only the rules that read a trace fire on one.
#[test]
fn rules_that_read_a_trace_fire_on_real_traces_and_the_others_never_do() {
    let cases: [(&str, Option<LeakKind>); 8] = [
        (
            "trace_val_no_grad.trace.json",
            Some(LeakKind::RetainedGraph),
        ),
        (
            "realistic/trace_eval_leak.trace.json.gz",
            Some(LeakKind::RetainedGraph),
        ),
        // A forward hook's cache: the trace lacks the module calls the hook_cache rule reads,
        // so it is steady growth here, and hook_cache in its snapshot twin (leak_hook.pickle).
        (
            "trace_hook_cache.trace.json.gz",
            Some(LeakKind::SteadyGrowth),
        ),
        (
            "loops/story/exit_logits_mlp_leak/memscope-trace.json.gz",
            Some(LeakKind::SteadyGrowth),
        ),
        ("trace_clean.trace.json.gz", None),
        ("realistic/trace_eval_clean.trace.json.gz", None),
        // `total += loss` with backward run: the graph grows on the CPU, no GPU memory.
        ("trace_total_loss.trace.json.gz", None),
        ("claims36/prof_trace.trace.json.gz", None),
    ];
    let mut fired = Vec::new();
    for (rel, want) in cases {
        let found = trace_leaks(&local(rel));
        assert_eq!(found.first().map(|l| l.kind), want, "{rel}: {found:#?}");
        for l in &found {
            let LeakEvidence::Trace(t) = &l.evidence else {
                panic!("{rel}: a trace finding without trace evidence");
            };
            // The finding's kind and confidence are the table's judgement of its evidence.
            let m = classify_trace(&t.group);
            assert_eq!((m.kind, m.confidence), (l.kind, l.confidence), "{rel}");
            for (rule, on) in registered() {
                if let OnTrace::Lacks(gaps) = on {
                    assert!(!gaps.is_empty());
                    assert_eq!(rule.matches_trace(&t.group), None, "{rel}: {}", rule.id());
                }
            }
            fired.push(l.kind);
        }
    }
    for (rule, on) in registered() {
        match on {
            OnTrace::Judges => assert!(fired.contains(&rule.id()), "{} never fires", rule.id()),
            OnTrace::Lacks(_) => assert!(!fired.contains(&rule.id()), "{}", rule.id()),
        }
    }
    let hook = snapshot_leaks(&local("leak_hook.pickle"));
    assert_eq!(hook.first().map(|l| l.kind), Some(LeakKind::HookCache));
}
