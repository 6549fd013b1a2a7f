//! Issue 39, holdout 6's convnext_bf16 (session 18): why two captures answer 84 where the card
//! fits 104, on the real captures.
//!
//! The first stage's depthwise convolution backward asks a scratch of 32 MiB at b16 and 64 at
//! b32 (2 MiB a sample, exactly), holding only a few bytes of its own call while it lives
//! (32 MiB, then 8 B, the 8 B freed, then the 32 MiB). The card's segments show 96 MiB at b48
//! and 128 at b64, then 132 at b96 and b128 (truth.json), and the lead's twin runs 132 at b104
//! and b105: the kernel stops growing it past about b66, which two captures at b16 and b32
//! cannot show. On their line it asks 170 MiB at b85 and 208 at b104, and the replay under the
//! cap less the band fails there first (b85: with 844 MiB allocated, a new 170 MiB segment).
//!
//! Nor may the replay go on without it, as it does past a cuDNN workspace that does not fit
//! (`elastic`): the card failed b105 on a 106 MiB request, and the only request of that size
//! class is the second stage's scratch of the same kind (16 MiB at b16, 96 at b96, 1 MiB a
//! sample: 105 MiB, 106 once rounded). Taking these scratches for workspaces made the plan
//! answer 106 from one capture and say b105 fits.

use std::path::{Path, PathBuf};

use memscope::analysis::plan::{classify, fit, Shape, Term};
use memscope::model::{Action, Snapshot};

const MIB: u64 = 1 << 20;

fn load(b: u64) -> (Snapshot, PathBuf, u64) {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
        "fixtures/plan/holdout6/convnext_bf16_b{b}.pickle.gz"
    ));
    let (s, len) = memscope::load::load_snapshot_sized(&p).unwrap();
    (s, p, len)
}

/// The frame-less (backward) requests of `size` that hold only a request of at most 64 bytes,
/// freed before them, and are freed before the next request after that.
fn scoped(s: &Snapshot, size: u64) -> Vec<usize> {
    let ev = &s.devices[0].events;
    let freed = |i: usize| {
        (i + 1..ev.len())
            .find(|&j| ev[j].action == Action::FreeRequested && ev[j].addr == ev[i].addr)
            .unwrap_or(usize::MAX)
    };
    (0..ev.len())
        .filter(|&i| {
            let e = &ev[i];
            if e.action != Action::Alloc || e.size != size || !s.stacks.frames(e.stack).is_empty() {
                return false;
            }
            let Some(n) = (i + 1..ev.len()).find(|&j| ev[j].action == Action::Alloc) else {
                return false;
            };
            let f = freed(i);
            ev[n].size <= 64
                && freed(n) < f
                && (n + 1..f.min(ev.len())).all(|j| ev[j].action != Action::Alloc)
        })
        .collect()
}

#[test]
fn two_captures_cannot_show_the_first_stage_scratch_stop_and_it_is_no_workspace() {
    let (s16, p16, len) = load(16);
    let (s32, ..) = load(32);
    let (s96, ..) = load(96);
    let dev = &s16.devices[0];
    // Two per step (the stage's two blocks), four steps: at b16 32 MiB, at b32 64, at b96 132.
    let first = scoped(&s16, 32 * MIB);
    assert_eq!(first.len(), 8, "{first:?}");
    assert_eq!(scoped(&s32, 64 * MIB).len(), 8);
    assert_eq!(scoped(&s96, 132 * MIB).len(), 8);
    // The second stage's scratch: 16 MiB at b16, 96 at b96 (the card's fatal 106 MiB at b105).
    let second = scoped(&s16, 16 * MIB);
    assert_eq!(second.len(), 8, "{second:?}");
    assert_eq!(scoped(&s96, 96 * MIB).len(), 8);
    // Not workspaces the replay may skip under the cap.
    let elastic = classify::conv_workspaces(&s16.stacks, dev);
    assert!(!elastic.is_empty());
    for i in first.iter().chain(&second) {
        assert!(
            !elastic.contains(i),
            "event {i} taken for a cuDNN workspace"
        );
    }
    // From b16 and b32, the first stage's scratch is exactly proportional: 208 MiB at b104,
    // where the card asks 132.
    let an = memscope::analysis::analyze_snapshot(&s16, &p16, len);
    let rec = Shape {
        batch: 16,
        seq: None,
    };
    let mut reqs = classify::classify(&s16, dev, &an.per_device[0], rec);
    let other = [fit::Capture {
        snap: &s32,
        dev: &s32.devices[0],
        shape: Shape {
            batch: 32,
            seq: None,
        },
    }];
    fit::refine(&s16, dev, &other, rec, &mut reqs);
    let at = Shape {
        batch: 104,
        seq: None,
    };
    for &i in &first {
        let r = reqs[i].unwrap();
        assert_eq!(
            (r.central.batch, r.upper.batch),
            (Term::Linear, Term::Linear)
        );
        assert_eq!(r.upper.size(r.size, rec, at), 208 * MIB);
    }
}
