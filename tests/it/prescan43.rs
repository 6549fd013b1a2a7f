//! The snapshot pre-scan (issue 43) against the decoder on real captures: it finds every trace
//! entry, its batches are real `MARK`..`APPENDS` ranges in file order, and a crafted or cut file
//! ends in `Ok` or an error, never a panic.

use std::path::{Path, PathBuf};

use memscope::load::prescan::{self, Plan};
use memscope::load::snapshot;

use crate::shared;

fn captures() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> =
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "pickle"))
            .collect();
    v.sort();
    for name in ["clean_training", "fragmentation_oom", "val_no_grad_oom"] {
        match shared::fixture_pickle(name) {
            Some(p) => v.push(p),
            None => shared::skip(Path::new(name)),
        }
    }
    v
}

fn check(path: &Path) -> Plan {
    let data = std::fs::read(path).unwrap();
    let plan = prescan::scan(&data).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let snap = snapshot::parse(&data, None).unwrap();
    let events: usize = snap.devices.iter().map(|d| d.events.len()).sum();
    assert_eq!(plan.entries, events as u64, "{}: entries", path.display());
    let mut end = 0;
    for c in &plan.chunks {
        assert!(
            c.start >= end && c.end > c.start,
            "{}: {c:?}",
            path.display()
        );
        assert_eq!(
            data[c.start],
            b'(',
            "{}: chunk starts at a MARK",
            path.display()
        );
        assert_eq!(
            data[c.end - 1],
            b'e',
            "{}: chunk ends at APPENDS",
            path.display()
        );
        end = c.end;
    }
    plan
}

#[test]
fn finds_every_entry_on_real_captures() {
    let mut with_cross = 0;
    let all = captures();
    for p in &all {
        let plan = check(p);
        eprintln!(
            "{}: {} entries, {} batches, {} dependent, {} cross-batch GETs ({} of containers), {} prefix GETs; {} shared entries ({} containers)",
            p.display(),
            plan.entries,
            plan.chunks.len(),
            plan.dependent_chunks,
            plan.cross_gets,
            plan.cross_container_gets,
            plan.prefix_gets,
            plan.shared_keys,
            plan.shared_container_keys
        );
        assert!(
            plan.shared_keys <= plan.cross_gets && plan.shared_container_keys <= plan.shared_keys
        );
        assert_eq!(plan.shared_keys > 0, plan.cross_gets > 0, "{}", p.display());
        if !plan.independent() {
            with_cross += 1;
        }
    }
    // Frames are memo-shared: captures with stacks refer to frames first written in an earlier
    // batch, which is what a batch-parallel decoder has to build first.
    assert!(
        with_cross > 0,
        "no capture with cross-batch references among {}",
        all.len()
    );
}

#[test]
fn large_capture_has_batches_of_1000() {
    let Some(p) = shared::fixture_pickle("clean_training") else {
        return shared::skip(Path::new("clean_training.pickle"));
    };
    let plan = check(&p);
    assert!(plan.chunks.len() >= 40, "{} batches", plan.chunks.len());
}

#[test]
fn cut_and_flipped_inputs_end_without_panic() {
    let data =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/two_streams.pickle"))
            .unwrap();
    let step = (data.len() / 2000).max(1);
    for n in (0..data.len()).step_by(step) {
        assert!(
            prescan::scan(&data[..n]).is_err(),
            "cut at {n} read as whole"
        );
    }
    let mut x = 0x9e37_79b9u32;
    for _ in 0..3000 {
        let mut d = data.clone();
        for _ in 0..4 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let i = x as usize % d.len();
            d[i] = (x >> 8) as u8;
        }
        let _ = prescan::scan(&d);
    }
    // A mark bomb and a memo key past the input are errors, not allocations.
    assert!(prescan::scan(&[b'('; 100_000]).is_err());
    assert!(prescan::scan(b"\x80\x04N\x94r\xff\xff\xff\x7f.").is_err());
    let mut dense = b"\x80\x04N".to_vec();
    dense.extend_from_slice(&[b'r', 0x00, 0x20, 0x00, 0x00]);
    dense.extend_from_slice(&[b'N'; 8192]);
    dense.push(b'.');
    assert!(
        prescan::scan(&dense).is_err(),
        "a memo key far past the input's density"
    );
}
