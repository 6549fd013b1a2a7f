//! Each output format, snapshotted on real captures (`insta`): a change in wording or
//! figures shows up as a reviewed diff.

use std::path::Path;

use memscope::analysis::analyze_snapshot;
use memscope::report::{self, json::Json, text::Text, Options};

use crate::shared;
use crate::truth;

fn analysis(dir: &str, name: &str) -> Option<memscope::analysis::Analysis> {
    let p = match dir.strip_prefix("../shared/") {
        Some(rel) => shared::path(&format!("{rel}/{name}"))?,
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join(dir).join(name),
    };
    let snap = memscope::load::load_snapshot(&p).unwrap();
    let len = std::fs::metadata(&p).unwrap().len();
    // A stable path in the output, whatever the checkout location.
    Some(analyze_snapshot(&snap, Path::new(name), len).analysis)
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn text_val_no_grad_oom() {
    let Some(a) = analysis("../shared/fixtures", "val_no_grad_oom.pickle") else {
        return;
    };
    let s = report::to_string(&Text, &a, &Options::default());
    // memory_stats() after the dump: one OOM, and the peak.
    assert_eq!(truth::shared_stat("val_no_grad_oom", "num_ooms"), 1);
    truth::says(&s, "VERDICT OOM");
    let peak = truth::shared_stat("val_no_grad_oom", "allocated_bytes.all.peak");
    truth::says(&s, &truth::human(peak));
    insta::assert_snapshot!(s);
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn text_fragmentation_oom_with_stacks() {
    let Some(a) = analysis("../shared/fixtures", "fragmentation_oom.pickle") else {
        return;
    };
    let opts = Options {
        color: false,
        stacks: true,
    };
    let s = report::to_string(&Text, &a, &opts);
    // memory_stats() after the dump: the bytes allocated at the end, and OOMs recorded.
    let cur = truth::shared_stat("fragmentation_oom", "allocated_bytes.all.current");
    truth::says(&s, &truth::human(cur));
    assert!(truth::shared_stat("fragmentation_oom", "num_ooms") > 0);
    truth::says(&s, "VERDICT OOM");
    insta::assert_snapshot!(s);
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn text_clean_training() {
    let Some(a) = analysis("../shared/fixtures", "clean_training.pickle") else {
        return;
    };
    let s = report::to_string(&Text, &a, &Options::default());
    // memory_stats() after the dump: no OOM, and the peak.
    assert_eq!(truth::shared_stat("clean_training", "num_ooms"), 0);
    assert!(!s.contains("VERDICT OOM"), "{s}");
    let peak = truth::shared_stat("clean_training", "allocated_bytes.all.peak");
    truth::says(&s, &truth::human(peak));
    insta::assert_snapshot!(s);
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn text_torch20_layout() {
    let Some(a) = analysis("../shared/corpus/snapshots", "llm_inference_oom.pickle") else {
        return;
    };
    let s = report::to_string(&Text, &a, &Options::default());
    // The independent reading in corpus_expectations.toml: a torch 2.0 snapshot records no OOM
    // entry, and shows 11.0 GiB allocated.
    assert!(a.devices.iter().all(|d| d.ooms.is_empty()));
    truth::says(&s, "11.0 GiB");
    insta::assert_snapshot!(s);
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn json_val_no_grad_oom() {
    let Some(a) = analysis("../shared/fixtures", "val_no_grad_oom.pickle") else {
        return;
    };
    let s = report::to_string(&Json, &a, &Options::default());
    // memory_stats() after the dump, to the byte: the bytes allocated at the end.
    let cur = truth::shared_stat("val_no_grad_oom", "allocated_bytes.all.current");
    truth::says(&s, &format!("\"allocated_bytes\": {cur}"));
    insta::assert_snapshot!(s);
}

#[test]
#[cfg_attr(
    memscope_no_shared,
    ignore = "needs ../shared (the real captures), absent when built: see README, Tests and contributing"
)]
fn color_only_when_asked() {
    let Some(a) = analysis("../shared/fixtures", "fragmentation_oom.pickle") else {
        return;
    };
    let plain = report::to_string(&Text, &a, &Options::default());
    let colored = report::to_string(
        &Text,
        &a,
        &Options {
            color: true,
            stacks: false,
        },
    );
    assert!(!plain.contains('\x1b'));
    assert!(colored.contains("\x1b[1;31m"));
}

/// Every JSON answer (`envelope::InEnvelope`, what `--format json` writes) holds as its `data`
/// the very document that the document's own JSON format writes alone, for the report, the
/// gate, the diff and the job view.
#[test]
fn json_answers_hold_the_documents_their_json_formats_write() {
    use memscope::report::check::{CheckJson, DiffJson};
    use memscope::report::envelope::{Header, InEnvelope};
    use memscope::report::Render;
    fn same<D: ?Sized>(alone: &dyn Render<D>, doc: &D)
    where
        for<'h> InEnvelope<'h>: Render<D>,
    {
        let header = Header::default();
        let answer = InEnvelope { header: &header };
        let parse = |r: &dyn Render<D>| -> serde_json::Value {
            serde_json::from_str(&report::to_string(r, doc, &Options::default())).unwrap()
        };
        let env = parse(&answer);
        assert_eq!(env["envelope"], "memscope/1");
        assert_eq!(env["data"], parse(alone));
    }
    let fixture = |n: &str| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures")
            .join(n)
    };
    let a = analysis("fixtures", "leak_oom.pickle").unwrap();
    same(&Json, &a);
    let paths = [fixture("clean.pickle"), fixture("leak_oom.pickle")];
    let summaries = memscope::inputs::load_summaries(&paths, false).unwrap();
    let cfg = memscope::check::CheckConfig::default();
    let r = memscope::check::check(&summaries, &[None, None], &cfg, None).unwrap();
    assert!(!r.passed, "leak_oom fails the gate");
    same(&CheckJson, &r);
    let d = memscope::check::diff::diff(&summaries[0], &summaries[1]);
    same(&DiffJson, &d);
    let ranks = [
        fixture("ranks/bridge/snapshot_0.pickle.gz"),
        fixture("ranks/bridge/snapshot_1.pickle.gz"),
    ];
    let ranks = memscope::inputs::load_summaries(&ranks, false).unwrap();
    let members = memscope::job::identify(ranks, None).unwrap();
    let job = memscope::job::Job::new(&members);
    assert_eq!(job.ranks.len(), 2);
    same(&memscope::report::job::Json, &job);
}
