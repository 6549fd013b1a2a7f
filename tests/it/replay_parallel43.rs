//! Issue #43, session 16: one device's replay split by segment across threads
//! (`analysis/replay/split.rs`) must give the serial replay's timeline, to the byte: the
//! series, the peaks and the entries they were first reached at, the end state, the pools'
//! peaks, the checkpoints (where they are and what `state_after` rebuilds from them), the
//! anomalies and OOMs. Checked on every snapshot at hand (the committed fixtures, `../shared`'s
//! fixtures and corpus), through `analyze --format json` on 1 and on several threads, and on
//! random logs, consistent and hostile (entries outside segments, double frees, segments freed
//! with blocks, maps, OOMs, sizes near 2^64), where the split must either agree or decline.

use std::path::{Path, PathBuf};
use std::process::Command;

use memscope::analysis::replay::{
    replay_on, replay_split, round_size, Replayer, Rules, State, Timeline, SPLIT_MIN_VAR,
};
use memscope::model::{
    Action, AllocatorSettings, Block, BlockState, Device, EventData, Events, MetaId, Segment,
    StackId,
};

use crate::shared;

/// Every snapshot pickle of the fixtures, `../shared/fixtures` and `../shared/corpus/snapshots`.
fn snapshots() -> Vec<PathBuf> {
    shared::files_under(&shared::capture_dirs(&["snapshots"]), |name| {
        Path::new(name).extension().is_some_and(|x| x == "pickle")
    })
}

/// The first difference between two timelines of `dev`, if any: every field, and the state
/// `state_after` rebuilds around each checkpoint and at a spread of entries.
fn difference(a: &Timeline, b: &Timeline, dev: &Device, s: &AllocatorSettings) -> Option<String> {
    let checks: [(&str, bool); 14] = [
        ("allocated series", a.series.allocated == b.series.allocated),
        ("active series", a.series.active == b.series.active),
        ("reserved series", a.series.reserved == b.series.reserved),
        (
            "peaks",
            format!("{:?}", a.peaks) == format!("{:?}", b.peaks),
        ),
        ("end state", a.end == b.end),
        ("initial state", a.initial == b.initial),
        ("anomalies", a.anomalies == b.anomalies),
        ("ooms", a.ooms == b.ooms),
        ("pool peaks", a.pool_peaks == b.pool_peaks),
        ("consistency", a.consistency == b.consistency),
        ("segment pools", a.segment_pools == b.segment_pools),
        (
            "checkpoint places",
            a.checkpoint_events() == b.checkpoint_events(),
        ),
        (
            "checkpoint weight",
            a.checkpoint_weight() == b.checkpoint_weight(),
        ),
        (
            "start flags",
            (a.starts_mid_run, a.approximate_initial_blocks)
                == (b.starts_mid_run, b.approximate_initial_blocks),
        ),
    ];
    if let Some((what, _)) = checks.iter().find(|(_, same)| !same) {
        return Some(what.to_string());
    }
    let n = dev.events.len();
    let mut at: Vec<usize> = (0..8).map(|k| k * n / 8).collect();
    for c in a.checkpoint_events() {
        at.extend([c.saturating_sub(1), c, c + 1]);
    }
    at.push(n.saturating_sub(1));
    for i in at.into_iter().filter(|&i| i < n) {
        if a.state_after(dev, s, Some(i)) != b.state_after(dev, s, Some(i)) {
            return Some(format!("state after entry {i}"));
        }
    }
    None
}

/// The serial replay against the split one on 2, 3, 8 and 16 threads: `Some(true)` where the
/// split ran and agreed, `Some(false)` where it declined; the difference where it disagreed.
fn compare(dev: &Device, s: &AllocatorSettings, what: &str) -> bool {
    let one = replay_on(dev, s, 1);
    let mut split = false;
    for t in [2, 3, 8, 16] {
        if let Some(many) = replay_split(dev, s, t) {
            split = true;
            if let Some(d) = difference(&one, &many, dev, s) {
                panic!("{what}: on {t} threads the split replay differs from the serial one: {d}");
            }
        }
    }
    split
}

#[test]
fn the_split_replay_is_the_serial_one_on_every_snapshot() {
    let files = snapshots();
    let (mut split, mut declined) = (0, 0);
    for p in &files {
        let Ok(snap) = memscope::load::load_snapshot(p) else {
            continue;
        };
        for d in snap.devices.iter().filter(|d| !d.events.is_empty()) {
            let what = format!("{} device {}", p.display(), d.index);
            if compare(d, &snap.settings, &what) {
                split += 1;
            } else {
                declined += 1;
            }
        }
    }
    eprintln!(
        "{} snapshots: {split} device logs replayed split and equal, {declined} declined",
        files.len()
    );
    // The split must run on real logs, not decline them all (else this test could not fail).
    assert!(
        split >= 5,
        "only {split} logs took the split ({declined} declined)"
    );
}

/// `analyze --format json` of `file` with these environment variables set.
fn analyze(file: &Path, env: &[(&str, &str)]) -> (Option<i32>, Vec<u8>) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memscope"));
    c.args(["analyze", "--format", "json"]).arg(file);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("memscope runs");
    (out.status.code(), out.stdout)
}

#[test]
fn analyze_json_is_the_same_on_one_thread_and_split_on_many() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<PathBuf> = snapshots()
        .into_iter()
        .filter(|p| !p.starts_with(root.join("fixtures/formats")))
        .collect();
    files.truncate(60);
    assert!(!files.is_empty());
    for p in &files {
        let one = analyze(p, &[("MEMSCOPE_THREADS", "1")]);
        for t in ["2", "16"] {
            let many = analyze(p, &[("MEMSCOPE_THREADS", t), (SPLIT_MIN_VAR, "0")]);
            assert!(
                one == many,
                "{}: analyze --format json on {t} threads (split) differs from 1 thread",
                p.display()
            );
        }
    }
}

/// A small random number source (a 64-bit LCG), so each seed gives the same log.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n.max(1)
    }
}

fn entry(action: Action, addr: u64, size: u64, stream: u64, time: i64) -> EventData {
    EventData {
        action,
        addr,
        size,
        stream,
        time_us: Some(time),
        stack: StackId(0),
        device_free: (action == Action::Oom).then_some(1 << 20),
        meta: MetaId::NONE,
    }
}

/// `state` after `e`, and whether the replay found `e` unexplainable.
fn apply(rules: &Rules, state: State, e: EventData) -> (State, bool) {
    let ev: Events = vec![e].into();
    let mut r = Replayer::new(rules.clone(), &ev, state);
    r.step(0);
    let (st, anomalies, _) = r.finish();
    (st, !anomalies.is_empty())
}

/// A random device log over segments in their own address ranges: allocations at free places,
/// frees requested and completed (in and out of order, on two streams), segments made and freed
/// when empty, snapshots and annotations; a log prefix is left out (the initial state must be
/// inferred), and the end state is the snapshot's segments. With `hostile`, about one entry in
/// fifty (to one in four thousand) is anything at all: outside segments, over blocks, maps, OOMs, sizes near 2^64.
fn random_device(seed: u64, hostile: bool) -> Device {
    let mut rng = Rng(seed);
    let rules = Rules::from_settings(&AllocatorSettings::default());
    let settings = AllocatorSettings::default();
    let mut state = State::default();
    let mut log = Vec::new();
    let skip = rng.below(200) as usize;
    let n = 1500 + rng.below(3000) as usize;
    let mut next_base = 1u64 << 32;
    // How rare the hostile entries are: some logs have none that the layout cannot explain.
    let rate = [50, 400, 4000][(seed % 3) as usize];
    for k in 0..n {
        let live: Vec<u64> = state.segments.keys().copied().collect();
        let pick = rng.below(100);
        let e = if hostile && rng.below(rate) == 0 {
            let actions = [
                Action::Alloc,
                Action::FreeRequested,
                Action::FreeCompleted,
                Action::SegmentAlloc,
                Action::SegmentFree,
                Action::SegmentMap,
                Action::SegmentUnmap,
                Action::Oom,
            ];
            let base = live.get(rng.below(live.len() as u64 + 1) as usize).copied();
            let addr = base.unwrap_or(1 << 32) + rng.below(4 << 20) / 512 * 512;
            let size = match rng.below(4) {
                0 => u64::MAX - rng.below(4096),
                1 => 0,
                _ => 1 + rng.below(4 << 20),
            };
            entry(actions[rng.below(8) as usize], addr, size, 0, k as i64)
        } else if live.is_empty() || pick < 4 {
            let size = [2u64 << 20, 20 << 20, 64 << 20][rng.below(3) as usize];
            let e = entry(
                Action::SegmentAlloc,
                next_base,
                size,
                rng.below(2),
                k as i64,
            );
            next_base += 1 << 28;
            e
        } else if pick < 7 {
            // Free an empty segment, if one is.
            match state.segments.values().find(|s| s.blocks.is_empty()) {
                Some(s) => entry(Action::SegmentFree, s.address, s.size, s.stream, k as i64),
                None => continue,
            }
        } else if pick < 10 {
            let action = [Action::Snapshot, Action::Annotate][rng.below(2) as usize];
            entry(action, 0, 0, 0, k as i64)
        } else if pick < 55 {
            // Allocate at the start of a free range big enough.
            let seg = &state.segments[&live[rng.below(live.len() as u64) as usize]];
            let want = if seg.size <= 2 << 20 {
                1 + rng.below(256 << 10)
            } else {
                (1 << 20) + rng.below(8 << 20)
            };
            let rounded = round_size(want, &settings);
            match seg.free_ranges().find(|(a, b)| b - a >= rounded) {
                Some((a, _)) => entry(Action::Alloc, a, want, seg.stream, k as i64),
                None => continue,
            }
        } else {
            let blocks: Vec<(u64, BlockState)> =
                state.live_blocks().map(|b| (b.address, b.state)).collect();
            if blocks.is_empty() {
                continue;
            }
            let (a, st) = blocks[rng.below(blocks.len() as u64) as usize];
            let action = match (st, rng.below(4)) {
                (BlockState::ActiveAllocated, 0) => Action::FreeCompleted,
                (BlockState::ActiveAllocated, _) => Action::FreeRequested,
                _ => Action::FreeCompleted,
            };
            entry(action, a, 0, 0, k as i64)
        };
        let before = state.clone();
        let (after, odd) = apply(&rules, state, e);
        if odd && !hostile {
            state = before;
            continue;
        }
        state = after;
        log.push(e);
    }
    let segments = state
        .segments
        .values()
        .map(|s| Segment {
            device: 0,
            address: s.address,
            total_size: s.size,
            stream: s.stream,
            pool: s.pool,
            segment_pool_id: Some((0, 0)),
            is_expandable: s.expandable,
            stack: StackId(0),
            blocks: s
                .blocks
                .values()
                .map(|b| Block {
                    address: b.address,
                    size: b.size,
                    requested_size: b.requested,
                    state: b.state,
                    stack: StackId(0),
                })
                .collect(),
        })
        .collect();
    let events: Events = log.split_off(skip.min(log.len())).into();
    Device {
        index: 0,
        segments,
        events,
    }
}

#[test]
fn the_split_replay_is_the_serial_one_on_random_logs() {
    let s = AllocatorSettings::default();
    let mut split = 0;
    for seed in 0..40u64 {
        let dev = random_device(seed, false);
        if compare(&dev, &s, &format!("random log {seed}")) {
            split += 1;
        }
    }
    // Consistent logs are what the split is for: nearly all must take it.
    assert!(
        split >= 30,
        "only {split} of 40 consistent logs took the split"
    );
}

#[test]
fn the_split_replay_agrees_or_declines_on_hostile_logs() {
    let s = AllocatorSettings::default();
    let (mut split, mut declined) = (0, 0);
    for seed in 0..60u64 {
        let dev = random_device(1000 + seed, true);
        if compare(&dev, &s, &format!("hostile log {seed}")) {
            split += 1;
        } else {
            declined += 1;
        }
    }
    eprintln!("hostile logs: {split} split and equal, {declined} declined");
    assert!(declined > 0, "hostile logs must reach the fallback");
    assert!(
        split > 0,
        "some hostile logs are still within what the split covers"
    );
}

/// Sizes whose sum leaves `u64` (the serial replay saturates; a segment's end saturates too, so
/// two segments can hold more than the address space): the split declines.
#[test]
fn counters_that_would_overflow_are_left_to_the_serial_replay() {
    let s = AllocatorSettings::default();
    let log = vec![
        entry(Action::SegmentAlloc, 0, 1 << 63, 0, 0),
        entry(Action::Alloc, 0, 1 << 62, 0, 1),
        entry(Action::SegmentAlloc, 1 << 63, u64::MAX, 0, 2),
        entry(Action::Snapshot, 0, 0, 0, 3),
    ];
    let dev = Device {
        index: 0,
        segments: Vec::new(),
        events: log.into(),
    };
    let one = replay_on(&dev, &s, 1);
    assert!(one.anomalies.is_empty());
    assert_eq!(
        one.peaks.reserved.bytes,
        u64::MAX,
        "the serial replay saturates"
    );
    assert!(
        replay_split(&dev, &s, 4).is_none(),
        "the split must decline"
    );
}
