//! Issue #43's compact model: a trace entry is 32 bytes and the replay keeps its checkpoints
//! flat; neither may change what any reader sees. The packed entries are checked against what
//! the pickle holds (hostile values included, in `hostile_snapshots`), and random access into
//! a replay (`state_after`, from the nearest flat checkpoint) against a replay from the start,
//! on real captures.

use std::path::Path;

use memscope::analysis::replay::{replay, Replayer, Rules};
use memscope::model::{Event, Snapshot};

use crate::shared;

#[test]
fn a_trace_entry_is_32_bytes() {
    assert!(std::mem::size_of::<Event>() <= 32);
}

/// `state_after(i)` (from a checkpoint) against the same state replayed from the first event.
fn random_access_matches_a_full_replay(name: &str, snap: &Snapshot) {
    for dev in &snap.devices {
        let n = dev.events.len();
        let tl = replay(dev, &snap.settings);
        let mut r = Replayer::new(
            Rules::from_settings(&snap.settings),
            &dev.events,
            tl.initial.clone(),
        )
        .with_pools(&tl.segment_pools);
        // Just before and after each place a checkpoint may sit, and a few in between.
        let mut at: Vec<usize> = (1..=n / 4096)
            .flat_map(|k| [k * 4096 - 1, k * 4096, k * 4096 + 1])
            .chain([0, n / 3, n.saturating_sub(1)])
            .filter(|&i| i < n)
            .collect();
        at.sort_unstable();
        at.dedup();
        let mut next = 0;
        let mut checked = 0;
        for i in at {
            while next <= i {
                r.step(next);
                next += 1;
            }
            let got = tl.state_after(dev, &snap.settings, Some(i));
            assert!(
                *r.state() == got,
                "{name}: the state after event {i} differs"
            );
            checked += 1;
        }
        assert!(n == 0 || checked > 0);
    }
}

#[test]
fn random_access_into_a_replay_is_exact_on_committed_captures() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    for name in ["wi_mixed_default", "leak_oom", "fragmentation_oom", "clean"] {
        let p = dir.join(format!("{name}.pickle"));
        let snap = memscope::load::load_snapshot(&p).unwrap();
        random_access_matches_a_full_replay(name, &snap);
    }
}

#[test]
fn random_access_into_a_replay_is_exact_on_a_long_real_log() {
    // 40,218 entries: about ten checkpoints.
    let Some(p) = shared::fixture_pickle("clean_training") else {
        return;
    };
    let snap = memscope::load::load_snapshot(&p).unwrap();
    random_access_matches_a_full_replay("clean_training", &snap);
}
