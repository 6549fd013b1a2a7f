//! Issue #43, session 17: the step search's loop judgements and the leak search's survivors
//! walk on several threads. With both splits forced on every log (`MEMSCOPE_STEPS_SPLIT_MIN`
//! and `MEMSCOPE_LEAK_SPLIT_MIN` at 0), the steps, the structure and the leak findings of every
//! device of every snapshot on 16 threads are those on one.

use std::path::PathBuf;

use crate::shared;
use memscope::analysis::{leaks, loops, replay, steps};

/// Every snapshot pickle of the fixtures, `../shared/fixtures` and `../shared/corpus/snapshots`,
/// gzipped or not (most of fixtures/ is gzipped: the loops and the truth sets, where the
/// findings are).
fn snapshots() -> Vec<PathBuf> {
    shared::files_under(&shared::capture_dirs(&["snapshots"]), |name| {
        name.ends_with(".pickle") || name.ends_with(".pickle.gz")
    })
}

#[test]
fn steps_and_leaks_on_sixteen_threads_are_those_on_one() {
    std::env::set_var(loops::SPLIT_MIN_VAR, "0");
    std::env::set_var(leaks::SPLIT_MIN_VAR, "0");
    let files = snapshots();
    let (mut walked, mut found) = (0, 0);
    for p in &files {
        let Ok(snap) = memscope::load::load_snapshot(p) else {
            continue;
        };
        for d in snap.devices.iter().filter(|d| !d.events.is_empty()) {
            let what = format!("{} device {}", p.display(), d.index);
            let tl = replay::replay_on(d, &snap.settings, 1);
            let (one, many) = (
                steps::bounds_on(&snap, d, 1),
                steps::bounds_on(&snap, d, 16),
            );
            assert_eq!(one.structure, many.structure, "{what}: structure");
            let (s1, s16) = (
                steps::with_figures(one, &tl),
                steps::with_figures(many, &tl),
            );
            assert_eq!(s1, s16, "{what}: steps");
            let f1 = leaks::find_on(&snap, d, &tl, &s1, 1);
            let f16 = leaks::find_on(&snap, d, &tl, &s1, 16);
            assert_eq!(f1, f16, "{what}: leak findings");
            walked += usize::from(s1.len() >= 4);
            found += usize::from(!f1.leaks.is_empty() || !f1.bounded_growth.is_empty());
        }
    }
    eprintln!(
        "{} snapshots: {walked} device logs of 4 steps or more, {found} with findings",
        files.len()
    );
    // The findings compared must be there, else this test could not fail.
    assert!(
        walked >= 40 && found >= 20,
        "{walked} walked, {found} found"
    );
}
