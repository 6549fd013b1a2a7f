//! Each output format, snapshotted on real captures (`insta`): a change in wording or
//! figures shows up as a reviewed diff.

use std::path::Path;

use memscope::analysis::analyze_snapshot;
use memscope::report::{self, json::Json, text::Text, Options};

mod shared;

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
    insta::assert_snapshot!(report::to_string(&Text, &a, &Options::default()));
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
    insta::assert_snapshot!(report::to_string(&Text, &a, &opts));
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
    insta::assert_snapshot!(report::to_string(&Text, &a, &Options::default()));
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
    insta::assert_snapshot!(report::to_string(&Text, &a, &Options::default()));
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
    insta::assert_snapshot!(report::to_string(&Json, &a, &Options::default()));
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
