//! Issue 43, cutting a snapshot pickle at its `FRAME` opcodes for a parallel decode.
//!
//! * `examples/scale_snapshot` frames its output like Python's pickler (a real
//!   `_dump_snapshot` file is one chain of frames of 64 KiB or more, each starting at an opcode
//!   boundary), and framing changes nothing the analysis sees.
//! * The frame-cut planner (`memscope::load::framecut`) on every snapshot at hand, at several
//!   piece counts (down to a piece per frame): its pieces chain, and each piece's memo base (a
//!   prefix sum of per-piece `MEMOIZE` counts, counted in parallel) is the memo length the
//!   serial decoder has at that byte.
//! * Hostile variants (cut, flipped bytes, frame headers lying about their length) end in a
//!   plan that still satisfies that, or in an error; never a panic.

use std::path::{Path, PathBuf};
use std::time::Duration;

use memscope::load::framecut::{self, Cut};
use memscope::load::pickle::{self, Handoff};
use memscope::load::snapshot;

use crate::bounded_inputs::{analyze, run, tmpdir};
use crate::shared;

#[allow(dead_code)]
#[path = "../../examples/scale_snapshot.rs"]
mod scale_snapshot;

/// `snap`'s first device `k` times over, framed or not.
fn scaled(path: &Path, k: u64, framed: bool) -> Vec<u8> {
    let snap = memscope::load::load_snapshot(path).unwrap();
    let mut out = Vec::new();
    scale_snapshot::scale(&snap, k, &mut out, framed);
    out
}

/// The captures the scaling is checked on: real framed ones.
fn real_framed() -> Vec<PathBuf> {
    let mut v = Vec::new();
    for name in ["clean_training", "val_no_grad_oom"] {
        match shared::fixture_pickle(name) {
            Some(p) => v.push(p),
            None => shared::skip(Path::new(name)),
        }
    }
    v
}

/// The frames of `data` (payload offset, length), asserting they chain from byte 2 to the end.
fn frames_of(data: &[u8]) -> Vec<(usize, usize)> {
    let payloads = framecut::chain(data);
    let mut out = Vec::new();
    let mut p = 2;
    for &f in &payloads {
        assert_eq!(f, p + 9, "a frame header at byte {p}");
        let len = u64::from_le_bytes(data[p + 1..p + 9].try_into().unwrap()) as usize;
        out.push((f, len));
        p = f + len;
    }
    assert_eq!(p, data.len(), "the chain ends at the end of the file");
    out
}

#[test]
fn scale_snapshot_frames_like_pythons_pickler() {
    let files = real_framed();
    for path in &files {
        // The real capture is what the writer imitates.
        let real = std::fs::read(path).unwrap();
        assert!(frames_of(&real).len() > 1, "{}", path.display());
        let framed = scaled(path, 3, true);
        let plain = scaled(path, 3, false);
        assert_eq!(&framed[..3], &[0x80, 4, 0x95], "{}", path.display());
        assert_eq!(&plain[..3], &[0x80, 4, b'}'], "{}", path.display());
        let frames = frames_of(&framed);
        let (_, last) = frames[frames.len() - 1];
        for &(at, len) in &frames[..frames.len() - 1] {
            assert!(
                (scale_snapshot::FRAME_TARGET..scale_snapshot::FRAME_TARGET + 4096).contains(&len),
                "{}: frame at {at} holds {len} bytes",
                path.display()
            );
        }
        assert!(last <= scale_snapshot::FRAME_TARGET + 4096);
        // Without its headers it is the unframed writing, byte for byte.
        let mut stripped = framed[..2].to_vec();
        for &(at, len) in &frames {
            stripped.extend_from_slice(&framed[at..at + len]);
        }
        assert!(
            stripped == plain,
            "{}: stripped != unframed",
            path.display()
        );
        // Every frame starts at an opcode boundary of the decode.
        let at: Vec<usize> = frames.iter().map(|f| f.0).collect();
        let lens = pickle::memo_lengths_at(&framed, &at).unwrap();
        assert!(lens.iter().all(Option::is_some), "{}", path.display());
        // And the analysis does not see the frames.
        let dir = tmpdir("framecut43");
        let (f, u) = (dir.join("framed.pickle"), dir.join("plain.pickle"));
        std::fs::write(&f, &framed).unwrap();
        std::fs::write(&u, &plain).unwrap();
        let json = |p: &Path| {
            let mut c = analyze(p);
            c.args(["--format", "json"]);
            let o = run(c, None, Duration::from_secs(300));
            assert_eq!(o.code, Some(0), "{}", o.stderr);
            let len = std::fs::metadata(p).unwrap().len();
            String::from_utf8(o.stdout)
                .unwrap()
                .replace(&*p.to_string_lossy(), "FILE")
                .replace(&format!("\"bytes\": {len}"), "\"bytes\": SIZE")
        };
        let (jf, ju) = (json(&f), json(&u));
        assert!(jf.contains("\"events\": "), "{}", path.display());
        assert!(jf == ju, "{}: the analyses differ", path.display());
    }
}

/// The events of the first trace list, where the model has exactly one device with events.
fn first_list_entries(data: &[u8]) -> Option<usize> {
    let snap = snapshot::parse(data, None).ok()?;
    let with: Vec<_> = snap
        .devices
        .iter()
        .filter(|d| !d.events.is_empty())
        .collect();
    (with.len() == 1).then(|| with[0].events.len())
}

/// The plan's invariants against the decoder: pieces chain from the hand-off, and each memo
/// base is the decoder's memo length at the piece's start.
fn check_plan(data: &[u8], h: &Handoff, cut: &Cut, what: &str) {
    assert_eq!(cut.pieces[0].start, h.pos, "{what}");
    assert_eq!(cut.bases[0], h.memo_len, "{what}");
    for w in cut.pieces.windows(2) {
        assert_eq!(w[0].end, w[1].start, "{what}");
        assert!(!w[0].last, "{what}");
    }
    let at: Vec<usize> = cut.pieces.iter().map(|p| p.start).collect();
    if let Ok(lens) = pickle::memo_lengths_at(data, &at) {
        let want: Vec<Option<u64>> = cut.bases.iter().map(|&b| Some(b)).collect();
        assert_eq!(lens, want, "{what}: memo bases");
    }
}

fn snapshots() -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> =
        shared::files_under(&shared::capture_dirs(&["snapshots"]), |n| {
            n.ends_with(".pickle")
        })
        .into_iter()
        .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
        .collect();
    for p in real_framed() {
        v.push((format!("{} x4", p.display()), scaled(&p, 4, true)));
    }
    v
}

#[test]
fn the_plan_matches_the_decoder_on_every_snapshot() {
    let mut planned = 0;
    for (name, data) in snapshots() {
        let Ok(Some(h)) = pickle::handoff(&data) else {
            continue;
        };
        let framed = framecut::chain(&data).len() > 4;
        let entries = first_list_entries(&data);
        for want in [1, 2, 3, 8, 64, 100_000] {
            for threads in [1, 3] {
                let what = format!("{name}: {want} pieces on {threads} threads");
                let cut = framecut::plan(&data, &h, want, threads);
                let cut = match cut {
                    Ok(c) => c,
                    Err(e) => panic!("{what}: {e}"),
                };
                check_plan(&data, &h, &cut, &what);
                let last = cut.pieces.last().unwrap();
                assert!(last.last, "{what}: the list ends in the last piece");
                let n: u64 = cut.pieces.iter().map(|p| p.entries).sum();
                if let Some(e) = entries {
                    assert_eq!(h.items as u64 + n, e as u64, "{what}: entries");
                }
                if framed && want >= 3 {
                    assert!(cut.pieces.len() >= 3, "{what}: {}", cut.pieces.len());
                }
            }
        }
        planned += 1;
    }
    eprintln!("planned {planned} snapshots");
    assert!(planned >= 1, "no snapshot with a trace batch to cut");
}

/// Hostile variants of a framed capture: the plan never panics, and a plan it gives holds.
#[test]
fn hostile_pickles_end_in_a_sound_plan_or_an_error() {
    let Some(path) = real_framed()
        .into_iter()
        .find(|p| p.ends_with("val_no_grad_oom.pickle"))
    else {
        return;
    };
    let base = std::fs::read(&path).unwrap();
    let h0 = pickle::handoff(&base).unwrap().unwrap();
    let frames = frames_of(&base);
    let mut variants: Vec<(String, Vec<u8>)> = Vec::new();
    for i in 0..60 {
        let cut = h0.pos + (base.len() - h0.pos) * i / 60;
        variants.push((format!("cut at {cut}"), base[..cut].to_vec()));
    }
    for i in 0..300usize {
        let at = h0.pos + (i * 7919) % (base.len() - h0.pos);
        let mut d = base.clone();
        d[at] ^= 1 << (i % 8);
        variants.push((format!("bit {} of byte {at}", i % 8), d));
    }
    for (fi, &(at, len)) in frames.iter().enumerate() {
        for lie in [0u64, 1, len as u64 - 1, len as u64 + 1, u64::MAX, 1 << 40] {
            let mut d = base.clone();
            d[at - 8..at].copy_from_slice(&lie.to_le_bytes());
            variants.push((format!("frame {fi} says {lie}"), d));
        }
    }
    let mut refused = 0;
    for (what, d) in &variants {
        let Ok(Some(h)) = pickle::handoff(d) else {
            continue;
        };
        for want in [4, 64] {
            match framecut::plan(d, &h, want, 2) {
                Ok(cut) => check_plan(d, &h, &cut, what),
                Err(_) => refused += 1,
            }
        }
    }
    eprintln!("{} variants, {refused} plans refused", variants.len());
    assert!(refused > 0, "some variant must be refused");
}
