//! Scales a real snapshot up for benchmarks: `cargo run --release --example scale_snapshot -- IN.pickle OUT.pickle K`.
//!
//! Large captures cannot be committed, and a GPU run that records a gigabyte of history takes
//! long. This writes a pickle laid out the way `torch.cuda.memory._dump_snapshot` writes one
//! (protocol 4, strings and frame dicts shared through the memo, one frames list per trace entry,
//! entries appended in batches of 1000) holding the input's segments and events `K` times over:
//! copy `r` has every address shifted by `r` times the input's address span, and its times shifted
//! past the previous copy, so the result replays consistently (each copy in its own address range).
//!
//! Framed like Python's pickler frames protocol 4 (issue 43): after `PROTO`, one chain of
//! `FRAME` opcodes (0x95 and an 8-byte little-endian length), each frame ended at the start of
//! the first object written once it holds 64 KiB or more, so every frame starts at an opcode
//! boundary, as in a real `_dump_snapshot` file (a decoder may cut the input there).
//! `--unframed` (before the arguments) writes the same opcodes without frames.
//!
//! Each entry carries the metadata keys torch 2.11 writes (`compile_context`, a fresh `"N/A"`
//! per entry outside a compiled region, memoized each time; `user_metadata`, the shared `""`),
//! since session 18: without them a scaled file was lighter per entry than a real one (one
//! memo entry and about 12 bytes less per entry), which flattered the decode's figures.

use std::collections::HashMap;
use std::io::Write;

use memscope::model::{BlockState, EventData, FrameId, Snapshot, StackId};

/// Python's `_FRAME_SIZE_TARGET`: a frame is ended once it holds this many bytes.
pub const FRAME_TARGET: usize = 64 << 10;
/// Python's `_FRAME_SIZE_MIN`: a last frame shorter than this is written without a header.
const FRAME_MIN: usize = 4;

struct W<'o> {
    /// The frame being filled (the whole output when unframed, flushed every 64 MiB).
    out: Vec<u8>,
    sink: &'o mut dyn Write,
    framed: bool,
    memo: u32,
    strs: HashMap<String, u32>,
    frames: HashMap<FrameId, u32>,
}

impl W<'_> {
    /// Where Python's pickler may end a frame: before the next object is saved.
    fn save(&mut self) {
        if self.framed {
            if self.out.len() >= FRAME_TARGET {
                self.commit();
            }
        } else if self.out.len() > 64 << 20 {
            self.sink.write_all(&self.out).expect("write");
            self.out.clear();
        }
    }
    /// Writes the frame (with its header when framed and not a tiny last one).
    fn commit(&mut self) {
        if self.framed && self.out.len() >= FRAME_MIN {
            self.sink.write_all(&[0x95]).expect("write");
            self.sink
                .write_all(&(self.out.len() as u64).to_le_bytes())
                .expect("write");
        }
        self.sink.write_all(&self.out).expect("write");
        self.out.clear();
    }
    fn memoize(&mut self) -> u32 {
        self.out.push(0x94);
        self.memo += 1;
        self.memo - 1
    }
    fn get(&mut self, i: u32) {
        if i < 256 {
            self.out.extend([b'h', i as u8]);
        } else {
            self.out.push(b'j');
            self.out.extend(i.to_le_bytes());
        }
    }
    fn str(&mut self, s: &str) {
        if let Some(&i) = self.strs.get(s) {
            self.save();
            return self.get(i);
        }
        let i = self.fresh_str(s);
        self.strs.insert(s.to_owned(), i);
    }
    /// A string written and memoized as a new object, never shared: what the pickler does with
    /// a string torch makes afresh for every entry (`compile_context`'s `"N/A"`); [`Self::str`]
    /// writes a shared string so the first time and refers to its memo entry after. Its index.
    fn fresh_str(&mut self, s: &str) -> u32 {
        self.save();
        if s.len() < 256 {
            self.out.extend([0x8c, s.len() as u8]);
        } else {
            self.out.push(b'X');
            self.out.extend((s.len() as u32).to_le_bytes());
        }
        self.out.extend(s.as_bytes());
        self.memoize()
    }
    fn int(&mut self, v: i64) {
        self.save();
        if (0..256).contains(&v) {
            self.out.extend([b'K', v as u8]);
        } else if (i32::MIN as i64..=i32::MAX as i64).contains(&v) {
            self.out.push(b'J');
            self.out.extend((v as i32).to_le_bytes());
        } else {
            self.out.extend(long1(v));
        }
    }
    fn uint(&mut self, v: u64) {
        if v <= i64::MAX as u64 {
            self.int(v as i64)
        } else {
            self.save();
            self.out.extend([0x8a, 9]);
            self.out.extend(v.to_le_bytes());
            self.out.push(0);
        }
    }
    fn key(&mut self, k: &str) {
        self.str(k);
    }
    fn frames(&mut self, snap: &Snapshot, s: StackId) {
        self.save();
        self.out.push(b']');
        self.memoize();
        let fs = snap.stacks.frames(s);
        if fs.is_empty() {
            return;
        }
        self.out.push(b'(');
        for &f in fs {
            self.save();
            if let Some(&i) = self.frames.get(&f) {
                self.get(i);
                continue;
            }
            let fr = *snap.stacks.frame(f);
            self.out.push(b'}');
            let i = self.memoize();
            self.out.push(b'(');
            self.key("filename");
            self.str(snap.stacks.str(fr.file));
            self.key("line");
            self.int(fr.line as i64);
            self.key("name");
            self.str(snap.stacks.str(fr.name));
            self.out.push(b'u');
            self.frames.insert(f, i);
        }
        self.out.push(b'e');
    }
    fn event(&mut self, snap: &Snapshot, e: &EventData, shift: u64, tshift: i64) {
        self.save();
        self.out.push(b'}');
        self.memoize();
        self.out.push(b'(');
        self.key("action");
        self.str(e.action.name());
        if let Some(df) = e.device_free {
            self.key("device_free");
            self.uint(df);
        } else {
            self.key("addr");
            self.uint(e.addr + shift);
        }
        self.key("size");
        self.uint(e.size);
        self.key("stream");
        self.uint(e.stream);
        if let Some(t) = e.time_us {
            self.key("time_us");
            self.int(t + tshift);
        }
        // Every entry's metadata, as torch 2.11 writes it: `compile_context` a new string each
        // time (so the pickler memoizes one per entry: 39,224 memoized strings for 39,218 entries
        // in clean_training), `user_metadata` the one shared empty string.
        let m = snap.meta(e.meta);
        self.key("compile_context");
        self.fresh_str(m.region.map_or("N/A", |r| snap.stacks.str(r)));
        self.key("user_metadata");
        self.str(m.user.map_or("", |u| snap.stacks.str(u)));
        self.key("frames");
        self.frames(snap, e.stack);
        self.out.push(b'u');
    }
}

fn main() {
    let mut args: Vec<String> = std::env::args().collect();
    let framed = match args.iter().position(|a| a == "--unframed") {
        Some(i) => {
            args.remove(i);
            false
        }
        None => true,
    };
    if args.len() != 4 {
        eprintln!("usage: scale_snapshot [--unframed] IN.pickle OUT.pickle K");
        std::process::exit(2);
    }
    let snap = memscope::load::load_snapshot(std::path::Path::new(&args[1])).expect("input loads");
    let k: u64 = args[3].parse().expect("K is a number");
    let mut file =
        std::io::BufWriter::new(std::fs::File::create(&args[2]).expect("output is writable"));
    let n = scale(&snap, k, &mut file, framed);
    file.flush().expect("write");
    eprintln!("wrote {} events ({} copies) to {}", n, k, args[2]);
}

/// Writes `snap`'s first device `k` times over to `sink` (framed or not); returns the number
/// of trace entries written.
/// `v` as Python's pickler writes an int past 32 bits: `LONG1` and the fewest bytes of two's
/// complement `encode_long` gives ((bit length / 8) + 1, less a redundant trailing 0xff).
fn long1(v: i64) -> Vec<u8> {
    let bits = 64 - v.unsigned_abs().leading_zeros() as usize;
    let mut n = (bits >> 3) + 1;
    let b = i128::from(v).to_le_bytes();
    if v < 0 && n > 1 && b[n - 1] == 0xff && b[n - 2] & 0x80 != 0 {
        n -= 1;
    }
    let mut out = vec![0x8a, n as u8];
    out.extend(&b[..n]);
    out
}

pub fn scale(snap: &Snapshot, k: u64, sink: &mut dyn Write, framed: bool) -> usize {
    let dev = &snap.devices[0];
    let lo = dev
        .segments
        .iter()
        .map(|s| s.address)
        .chain(dev.events.iter().filter(|e| e.addr > 0).map(|e| e.addr))
        .min()
        .unwrap_or(0);
    let hi = dev
        .segments
        .iter()
        .map(|s| s.end())
        .chain(dev.events.iter().map(|e| e.addr + e.size))
        .max()
        .unwrap_or(0);
    let span = (hi - lo).next_multiple_of(1 << 30) + (1 << 30);
    let t0 = dev
        .events
        .iter()
        .filter_map(|e| e.time_us())
        .min()
        .unwrap_or(0);
    let t1 = dev
        .events
        .iter()
        .filter_map(|e| e.time_us())
        .max()
        .unwrap_or(0);
    let tspan = t1 - t0 + 1;
    // PROTO comes before the first frame.
    sink.write_all(&[0x80, 4]).expect("write");
    let mut w = W {
        out: Vec::with_capacity(1 << 20),
        sink,
        framed,
        memo: 0,
        strs: HashMap::new(),
        frames: HashMap::new(),
    };
    w.save();
    w.out.push(b'}');
    w.memoize();
    w.out.push(b'(');
    w.key("segments");
    w.save();
    w.out.push(b']');
    w.memoize();
    w.out.push(b'(');
    for r in 0..k {
        for s in &dev.segments {
            w.save();
            w.out.push(b'}');
            w.memoize();
            w.out.push(b'(');
            w.key("device");
            w.int(0);
            w.key("address");
            w.uint(s.address + r * span);
            w.key("total_size");
            w.uint(s.total_size);
            w.key("stream");
            w.uint(s.stream);
            w.key("segment_type");
            w.str(s.pool.name());
            w.key("is_expandable");
            w.save();
            w.out.push(if s.is_expandable { 0x88 } else { 0x89 });
            w.key("frames");
            w.frames(snap, s.stack);
            w.key("blocks");
            w.save();
            w.out.push(b']');
            w.memoize();
            w.out.push(b'(');
            for b in &s.blocks {
                w.save();
                w.out.push(b'}');
                w.memoize();
                w.out.push(b'(');
                w.key("address");
                w.uint(b.address + r * span);
                w.key("size");
                w.uint(b.size);
                w.key("requested_size");
                w.uint(b.requested_size);
                w.key("state");
                w.str(match b.state {
                    BlockState::ActiveAllocated => "active_allocated",
                    BlockState::ActivePendingFree => "active_pending_free",
                    BlockState::Inactive => "inactive",
                });
                w.key("frames");
                w.frames(snap, b.stack);
                w.out.push(b'u');
            }
            w.out.push(b'e');
            w.out.push(b'u');
        }
    }
    w.out.push(b'e');
    w.key("device_traces");
    w.save();
    w.out.push(b']');
    w.memoize();
    w.save();
    w.out.push(b']');
    w.memoize();
    let mut n = 0usize;
    let entries: Vec<EventData> = dev.events.iter_data().collect();
    for r in 0..k {
        for chunk in entries.chunks(1000) {
            w.out.push(b'(');
            for e in chunk {
                w.event(snap, e, r * span, r as i64 * tspan);
                n += 1;
            }
            w.out.push(b'e');
        }
    }
    w.out.push(b'a');
    w.out.push(b'u');
    w.out.push(b'.');
    w.commit();
    n
}

#[cfg(test)]
mod long1_tests {
    /// Python 3.12's `pickle.dumps(v, 4)` for each value (frame header and STOP cut off).
    #[test]
    fn ints_are_written_as_pythons_pickler_writes_them() {
        for (v, hex) in [
            (2_147_483_648, "8a050000008000"),
            (-2_147_483_649, "8a05ffffff7fff"),
            (139_866_715_197_440, "8a060010e041357f"),
            (1_795_310_713_238_477, "8a07cdf35259d36006"),
            (-1_099_511_627_776, "8a060000000000ff"),
            (-277_025_390_592, "8a0500000080bf"),
            (i64::MAX, "8a08ffffffffffffff7f"),
            (i64::MIN, "8a080000000000000080"),
            (-72_057_594_037_927_936, "8a0800000000000000ff"),
        ] {
            let got: String = super::long1(v).iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(got, hex, "{v}");
        }
    }
}
