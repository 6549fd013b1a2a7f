//! Scales a real snapshot up for benchmarks: `cargo run --release --example scale_snapshot -- IN.pickle OUT.pickle K`.
//!
//! Large captures cannot be committed, and a GPU run that records a gigabyte of history takes
//! long. This writes a pickle laid out the way `torch.cuda.memory._dump_snapshot` writes one
//! (protocol 4, strings and frame dicts shared through the memo, one frames list per trace entry,
//! entries appended in batches of 1000) holding the input's segments and events `K` times over:
//! copy `r` has every address shifted by `r` times the input's address span, and its times shifted
//! past the previous copy, so the result replays consistently (each copy in its own address range).

use std::collections::HashMap;
use std::io::Write;

use memscope::model::{BlockState, EventData, FrameId, Snapshot, StackId};

struct W {
    out: Vec<u8>,
    memo: u32,
    strs: HashMap<String, u32>,
    frames: HashMap<FrameId, u32>,
}

impl W {
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
            return self.get(i);
        }
        if s.len() < 256 {
            self.out.extend([0x8c, s.len() as u8]);
        } else {
            self.out.push(b'X');
            self.out.extend((s.len() as u32).to_le_bytes());
        }
        self.out.extend(s.as_bytes());
        let i = self.memoize();
        self.strs.insert(s.to_owned(), i);
    }
    fn int(&mut self, v: i64) {
        if (0..256).contains(&v) {
            self.out.extend([b'K', v as u8]);
        } else if (i32::MIN as i64..=i32::MAX as i64).contains(&v) {
            self.out.push(b'J');
            self.out.extend((v as i32).to_le_bytes());
        } else {
            // LONG1 with 8 bytes (plus a sign byte when the top bit is set).
            let b = v.to_le_bytes();
            self.out.extend([0x8a, 8]);
            self.out.extend(b);
        }
    }
    fn uint(&mut self, v: u64) {
        if v <= i64::MAX as u64 {
            self.int(v as i64)
        } else {
            self.out.extend([0x8a, 9]);
            self.out.extend(v.to_le_bytes());
            self.out.push(0);
        }
    }
    fn key(&mut self, k: &str) {
        self.str(k);
    }
    fn frames(&mut self, snap: &Snapshot, s: StackId) {
        self.out.push(b']');
        self.memoize();
        let fs = snap.stacks.frames(s);
        if fs.is_empty() {
            return;
        }
        self.out.push(b'(');
        for &f in fs {
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
        self.key("frames");
        self.frames(snap, e.stack);
        self.out.push(b'u');
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: scale_snapshot IN.pickle OUT.pickle K");
        std::process::exit(2);
    }
    let snap = memscope::load::load_snapshot(std::path::Path::new(&args[1])).expect("input loads");
    let k: u64 = args[3].parse().expect("K is a number");
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
    let mut w = W {
        out: Vec::with_capacity(1 << 20),
        memo: 0,
        strs: HashMap::new(),
        frames: HashMap::new(),
    };
    w.out.extend([0x80, 4]);
    w.out.push(b'}');
    w.memoize();
    w.out.push(b'(');
    w.key("segments");
    w.out.push(b']');
    w.memoize();
    w.out.push(b'(');
    for r in 0..k {
        for s in &dev.segments {
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
            w.out.push(if s.is_expandable { 0x88 } else { 0x89 });
            w.key("frames");
            w.frames(&snap, s.stack);
            w.key("blocks");
            w.out.push(b']');
            w.memoize();
            w.out.push(b'(');
            for b in &s.blocks {
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
                w.frames(&snap, b.stack);
                w.out.push(b'u');
            }
            w.out.push(b'e');
            w.out.push(b'u');
        }
    }
    w.out.push(b'e');
    w.key("device_traces");
    w.out.push(b']');
    w.memoize();
    w.out.push(b']');
    w.memoize();
    let mut file =
        std::io::BufWriter::new(std::fs::File::create(&args[2]).expect("output is writable"));
    let mut n = 0usize;
    let entries: Vec<EventData> = dev.events.iter_data().collect();
    for r in 0..k {
        for chunk in entries.chunks(1000) {
            w.out.push(b'(');
            for e in chunk {
                w.event(&snap, e, r * span, r as i64 * tspan);
                n += 1;
            }
            w.out.push(b'e');
            if w.out.len() > 64 << 20 {
                file.write_all(&w.out).expect("write");
                w.out.clear();
            }
        }
    }
    w.out.push(b'a');
    w.out.push(b'u');
    w.out.push(b'.');
    file.write_all(&w.out).expect("write");
    file.flush().expect("write");
    eprintln!("wrote {} events ({} copies) to {}", n, k, args[2]);
}
