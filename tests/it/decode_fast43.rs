//! The decoder's trace-entry fast path (issue 43) against the generic path: the same snapshot
//! (events with their stacks and metadata resolved to text, segments, notes, settings) or the
//! same error, on every capture with a trace the repository and `../shared` hold, and on
//! hand-written pickles that give the fast path every shape it must refuse or give up on: a
//! dict modified after it was read, duplicate and unknown keys, values of other types, an entry
//! stored twice, `DUP`/`POP`/`STOP` on a read entry, a record finalized out of order, a reused
//! memo index, `BINPUT`/`LONG_BINPUT` for `MEMOIZE`, protocol-0 opcodes and cut files. Each
//! case also checks which way the decode went (read fast, refused, or decoded again), so a test
//! cannot pass with the fast path switched off.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use memscope::load::snapshot::{self, Decode, DecodeReport};
use memscope::model::Snapshot;

use crate::shared;

/// The snapshot as text that does not depend on the order strings were interned in.
fn canon(s: &Snapshot) -> String {
    let st = &s.stacks;
    let stack = |id| {
        st.frames(id)
            .iter()
            .map(|&f| {
                let fr = st.frame(f);
                format!("{}:{}:{}", st.str(fr.file), fr.line, st.str(fr.name))
            })
            .collect::<Vec<_>>()
            .join(" | ")
    };
    let sym = |x: Option<memscope::model::Sym>| x.map(|x| st.str(x).to_owned());
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:?} {:?} {:?} {:?} {:?} {:?} {:?} stacks={}",
        s.layout,
        s.annotations,
        s.settings,
        s.load_notes,
        s.device_memory,
        s.device_record,
        s.internal_metadata,
        st.stack_count()
    );
    for m in &s.metas {
        let _ = writeln!(
            out,
            "meta {:?} {:?} {:?}",
            sym(m.user),
            sym(m.region),
            sym(m.internal)
        );
    }
    for d in &s.devices {
        let _ = writeln!(out, "device {} segments {:?}", d.index, d.segments);
        for i in 0..d.events.len() {
            let e = d.events.data(i).unwrap();
            let m = s.meta(e.meta);
            let _ = writeln!(
                out,
                "{:?} {} {} {} {:?} {:?} [{}] {:?} {:?} {:?}",
                e.action,
                e.addr,
                e.size,
                e.stream,
                e.time_us,
                e.device_free,
                stack(e.stack),
                sym(m.user),
                sym(m.region),
                sym(m.internal)
            );
        }
    }
    out
}

/// Decodes `data` both ways, checks they agree, and says how the fast decode went.
fn agree(name: &str, data: &[u8]) -> DecodeReport {
    let fast = Decode {
        entry_fast_path: true,
    };
    let generic = Decode {
        entry_fast_path: false,
    };
    let (a, report) = snapshot::parse_with(data, None, fast);
    let (b, plain) = snapshot::parse_with(data, None, generic);
    assert_eq!(plain, DecodeReport::default(), "{name}: the generic path");
    match (a, b) {
        (Ok(a), Ok(b)) => {
            let (a, b) = (canon(&a), canon(&b));
            if a != b {
                let line = a.lines().zip(b.lines()).position(|(x, y)| x != y);
                panic!(
                    "{name}: the fast path's snapshot differs from the generic one at line \
                     {line:?}:\n fast:    {:?}\n generic: {:?}",
                    line.and_then(|l| a.lines().nth(l)),
                    line.and_then(|l| b.lines().nth(l))
                );
            }
        }
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{name}: the errors"),
        (a, b) => panic!(
            "{name}: fast {:?} vs generic {:?}",
            a.map(|_| "a snapshot"),
            b.map(|_| "a snapshot")
        ),
    }
    report
}

fn events(data: &[u8]) -> usize {
    match snapshot::parse(data, None) {
        Ok(s) => s.devices.iter().map(|d| d.events.len()).sum(),
        Err(_) => 0,
    }
}

#[test]
fn agrees_with_the_generic_path_on_real_captures() {
    let is_pickle = |n: &str| n.ends_with(".pickle");
    let repo = [Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")];
    let shared_dirs: Vec<PathBuf> = ["fixtures", "corpus"]
        .iter()
        .filter_map(|d| shared::path(d))
        .collect();
    let mut files = shared::files_under(&repo, is_pickle);
    let shared_files = shared::files_under(&shared_dirs, is_pickle);
    let shared_n = shared_files.len();
    files.extend(shared_files);
    files.sort();
    let (mut with_trace, mut total, mut fast) = (0, 0u64, 0u64);
    for f in &files {
        let data = std::fs::read(f).unwrap();
        if data.len() > 64 << 20 {
            continue;
        }
        let name = f.display().to_string();
        let report = agree(&name, &data);
        assert!(
            !report.decoded_again,
            "{name}: a real capture decoded twice"
        );
        let n = events(&data) as u64;
        if n > 0 {
            with_trace += 1;
        }
        total += n;
        fast += report.fast_entries;
    }
    assert!(with_trace >= 5, "only {with_trace} captures with a trace");
    // The fast path reads nearly every entry of a capture torch wrote (the first entries of a
    // trace, and those that bring a new frame or a new key, go the generic way).
    assert!(
        fast * 10 >= total * 9,
        "the fast path read {fast} of {total} entries"
    );
    if shared_n > 0 {
        eprintln!(
            "decode_fast43: {} files ({shared_n} shared), {fast} of {total} entries read fast",
            files.len()
        );
    }
}

/// A pickle writer in the shape torch's `_dump_snapshot` gives `pickle.dump` (protocol 4),
/// with switches for the memo store opcode and hooks for hostile bytes.
struct W {
    b: Vec<u8>,
    memo: u32,
    keys: HashMap<&'static str, u32>,
    strs: HashMap<String, u32>,
    /// 0: `MEMOIZE`, 1: `BINPUT` (`LONG_BINPUT` past 255), 2: `LONG_BINPUT`.
    put: u8,
    /// Memo slots of the frame dicts, and of each entry dict written.
    frames: Vec<u32>,
    entries: Vec<u32>,
    /// Memo slot of the last fresh frames list.
    last_list: u32,
}

impl W {
    fn new(put: u8) -> W {
        let mut w = W {
            b: vec![0x80, 4],
            memo: 0,
            keys: HashMap::new(),
            strs: HashMap::new(),
            put,
            frames: Vec::new(),
            entries: Vec::new(),
            last_list: 0,
        };
        // {'segments': [], 'device_traces': [[ ... ]]}
        w.raw(b"}");
        w.memoize();
        w.raw(b"(");
        w.key("segments");
        w.raw(b"]");
        w.memoize();
        w.key("device_traces");
        w.raw(b"]");
        w.memoize();
        w.raw(b"]");
        w.memoize();
        w
    }

    fn raw(&mut self, b: &[u8]) -> &mut Self {
        self.b.extend_from_slice(b);
        self
    }

    fn memoize(&mut self) -> u32 {
        let i = self.memo;
        match self.put {
            0 => self.b.push(0x94),
            1 if i < 256 => self.b.extend_from_slice(&[b'q', i as u8]),
            _ => {
                self.b.push(b'r');
                self.b.extend_from_slice(&i.to_le_bytes());
            }
        }
        self.memo += 1;
        i
    }

    fn text(&mut self, s: &str) {
        self.b.push(0x8c);
        self.b.push(s.len() as u8);
        self.b.extend_from_slice(s.as_bytes());
    }

    fn get(&mut self, i: u32) {
        if i < 256 {
            self.raw(&[b'h', i as u8]);
        } else {
            self.b.push(b'j');
            self.b.extend_from_slice(&i.to_le_bytes());
        }
    }

    /// A key: written and memoized the first time, a memo reference after.
    fn key(&mut self, k: &'static str) {
        match self.keys.get(k) {
            Some(&i) => self.get(i),
            None => {
                self.text(k);
                let i = self.memoize();
                self.keys.insert(k, i);
            }
        }
    }

    /// A string shared through the memo (an action, `""`).
    fn shared(&mut self, s: &str) {
        match self.strs.get(s) {
            Some(&i) => self.get(i),
            None => {
                self.text(s);
                let i = self.memoize();
                self.strs.insert(s.to_owned(), i);
            }
        }
    }

    fn int(&mut self, v: u64) {
        if v < 256 {
            self.raw(&[b'K', v as u8]);
        } else if v < 1 << 31 {
            self.b.push(b'J');
            self.b.extend_from_slice(&(v as u32).to_le_bytes());
        } else {
            let mut le = v.to_le_bytes().to_vec();
            while le.len() > 1 && le[le.len() - 1] == 0 && le[le.len() - 2] & 0x80 == 0 {
                le.pop();
            }
            self.raw(&[0x8a, le.len() as u8]);
            self.b.extend_from_slice(&le);
        }
    }

    /// A frames list of fresh frame dicts (the first entry's): `] MEMO ( {..} {..} APPENDS`.
    fn fresh_frames(&mut self, n: usize) {
        self.raw(b"]");
        self.last_list = self.memoize();
        self.raw(b"(");
        for i in 0..n {
            self.raw(b"}");
            let f = self.memoize();
            self.raw(b"(");
            self.key("filename");
            self.shared(&format!("/src/model_{}.py", i % 3));
            self.key("line");
            self.int(10 + i as u64);
            self.key("name");
            self.shared(&format!("fn_{i}"));
            self.raw(b"u");
            self.frames.push(f);
        }
        self.raw(b"e");
    }

    /// A frames list of memo references to known frames.
    fn frames_run(&mut self, pick: &[usize]) {
        self.raw(b"]");
        self.last_list = self.memoize();
        self.raw(b"(");
        for &i in pick {
            self.get(self.frames[i % self.frames.len()]);
        }
        self.raw(b"e");
    }

    /// `EMPTY_DICT MEMO MARK`: an entry's start (its memo slot is recorded).
    fn open_entry(&mut self) {
        self.raw(b"}");
        let i = self.memoize();
        self.entries.push(i);
        self.raw(b"(");
    }

    /// The fields torch writes, in its order, up to (not including) `frames`.
    fn fields(&mut self, i: usize) {
        let actions = ["alloc", "free_requested", "free_completed", "segment_alloc"];
        self.key("action");
        self.shared(actions[i % actions.len()]);
        self.key("addr");
        self.int(0x7f00_0000_0000 + (i as u64 % 7) * 512);
        self.key("size");
        self.int(512 << (i % 12));
        self.key("stream");
        self.int(0);
        self.key("time_us");
        self.int(1_795_874_643_434_911 + i as u64);
        self.key("compile_context");
        self.text("N/A");
        self.memoize();
        self.key("user_metadata");
        self.shared(if i % 5 == 4 { "step" } else { "" });
    }

    /// One ordinary entry; its frames vary with `i` (fresh run, shared list, empty list).
    fn entry(&mut self, i: usize) {
        self.open_entry();
        self.fields(i);
        self.key("frames");
        if self.frames.is_empty() {
            self.fresh_frames(4);
        } else {
            match i % 4 {
                0 => self.get(self.last_list),
                1 => {
                    self.raw(b"]");
                    self.memoize();
                }
                _ => self.frames_run(&[i, i + 1, i + 3]),
            }
        }
        self.raw(b"u");
    }

    /// Closes the batch, the device list, the top dict and the pickle.
    fn finish(mut self) -> Vec<u8> {
        self.raw(b"e").raw(b"a").raw(b"u").raw(b".");
        self.b
    }
}

/// `n` ordinary entries in one batch, with `hook(w, i)` run after entry `i`.
fn capture(put: u8, n: usize, hook: impl Fn(&mut W, usize)) -> Vec<u8> {
    let mut w = W::new(put);
    w.raw(b"(");
    for i in 0..n {
        w.entry(i);
        hook(&mut w, i);
    }
    w.finish()
}

#[test]
fn reads_the_shape_torch_writes_with_every_memo_store() {
    for put in 0..3 {
        let data = capture(put, 200, |_, _| {});
        let r = agree(&format!("put {put}"), &data);
        assert_eq!(events(&data), 200);
        assert!(!r.decoded_again);
        // All but the first entry (whose keys are new).
        assert_eq!(r.fast_entries, 199, "put {put}");
    }
    // Two batches (a trace longer than 1000 entries) and a second device.
    let mut w = W::new(0);
    w.raw(b"(");
    for i in 0..1000 {
        w.entry(i);
    }
    w.raw(b"e(");
    for i in 0..300 {
        w.entry(i);
    }
    // The first device's list into the outer one, then the second device's.
    w.raw(b"e").raw(b"a").raw(b"]");
    w.memoize();
    w.raw(b"(");
    for i in 0..3 {
        w.entry(i);
    }
    let data = w.finish();
    let r = agree("two batches, two devices", &data);
    assert!(r.fast_entries >= 1000, "{r:?}");
}

#[test]
fn refuses_shapes_it_does_not_know_before_changing_anything() {
    type Case = (&'static str, fn(&mut W, usize));
    let cases: [Case; 8] = [
        ("duplicate key", |w, i| {
            w.open_entry();
            w.fields(i);
            w.key("addr");
            w.int(12345);
            w.raw(b"u");
        }),
        ("unknown key", |w, i| {
            w.open_entry();
            w.fields(i);
            w.key("filename");
            w.int(1);
            w.raw(b"u");
        }),
        ("size as a float", |w, i| {
            w.open_entry();
            w.key("action");
            w.shared("alloc");
            w.key("size");
            w.raw(b"G");
            w.raw(&1024.5f64.to_be_bytes());
            w.key("addr");
            w.int(i as u64);
            w.raw(b"u");
        }),
        ("action as an int", |w, _| {
            w.open_entry();
            w.key("action");
            w.int(3);
            w.key("size");
            w.int(512);
            w.raw(b"u");
        }),
        ("an address past i64", |w, _| {
            w.open_entry();
            w.key("action");
            w.shared("alloc");
            w.key("addr");
            w.raw(&[0x8a, 9, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0]);
            w.raw(b"u");
        }),
        ("frames as a frame dict, metadata as an int", |w, i| {
            w.open_entry();
            w.fields(i);
            w.key("frames");
            w.get(w.frames[0]);
            w.key("internal_metadata");
            w.int(7);
            w.raw(b"u");
        }),
        ("protocol-0 memo reference and text", |w, i| {
            w.open_entry();
            w.raw(format!("g{}\n", w.keys["action"]).as_bytes());
            w.raw(b"Valloc\n");
            w.key("size");
            w.raw(format!("I{}\n", 4096 + i).as_bytes());
            w.raw(b"u");
        }),
        ("a key set after the entry's SETITEMS", |w, i| {
            w.entry(i);
            w.key("device_free");
            w.int(77);
            w.raw(b"s");
        }),
    ];
    for (name, write) in cases {
        // The odd entry sits at 50 of 100 and after it, ordinary ones again.
        let data = capture(0, 100, |w, i| {
            if i == 49 {
                write(w, i);
            }
        });
        let r = agree(name, &data);
        assert!(events(&data) >= 100, "{name}");
        assert!(!r.decoded_again, "{name}: {r:?}");
        // The odd entry goes the generic way; the entries after it are read fast again (the
        // odd one is finalized first, in its place), except after a dict that is no entry
        // (an `action` that is no `str`): that one would be finalized at the `APPENDS` only.
        let want = if name == "action as an int" { 49 } else { 99 };
        assert_eq!(r.fast_entries, want, "{name}: {r:?}");
    }
}

#[test]
fn gives_up_where_a_read_entry_is_touched_again() {
    type Case = (&'static str, fn(&mut W, usize));
    let cases: [Case; 9] = [
        ("entry modified later by memo GET and SETITEM", |w, _| {
            let e = w.entries[10];
            w.get(e);
            w.key("device_free");
            w.int(99);
            w.raw(b"s0");
        }),
        ("entry stored twice in the list", |w, _| {
            let e = w.entries[10];
            w.get(e);
        }),
        // The entry just before a hostile opcode is not read fast (the fast path wants the
        // next entry or the `APPENDS` after one), so these first `POP` that one (entry 20):
        // the opcode after it meets entry 19, which was read fast.
        ("POP of a read entry", |w, _| {
            w.raw(b"00");
        }),
        ("DUP of a read entry", |w, _| {
            w.raw(b"02");
        }),
        ("a second memo slot for a read entry", |w, _| {
            w.raw(b"0");
            w.memoize();
        }),
        ("STOP on a read entry", |w, _| {
            w.raw(b"0.");
        }),
        ("a record finalized before the read ones", |w, i| {
            // A generic entry whose metadata is itself an entry dict: the inner one is
            // finalized first, at its parent's SETITEMS, long before the batch's APPENDS.
            w.open_entry();
            w.fields(i);
            w.key("internal_metadata");
            w.raw(b"}");
            w.memoize();
            w.raw(b"(");
            w.key("action");
            w.shared("oom");
            w.key("size");
            w.int(1);
            w.raw(b"u");
            w.raw(b"u");
        }),
        ("APPEND onto a read entry", |w, _| {
            w.raw(b"0");
            w.int(5);
            w.raw(b"a");
        }),
        ("SETITEM into a read entry", |w, _| {
            w.raw(b"0");
            w.key("device_free");
            w.int(5);
            w.raw(b"s");
        }),
    ];
    for (name, write) in cases {
        let data = capture(0, 30, |w, i| {
            if i == 20 {
                write(w, i);
            }
        });
        let r = agree(name, &data);
        assert!(r.decoded_again, "{name}: {r:?}");
    }
    // After the batch is stored, the read entries are final in both paths: the same error.
    let mut w = W::new(0);
    w.raw(b"(");
    for i in 0..30 {
        w.entry(i);
    }
    w.raw(b"e");
    let e = w.entries[5];
    w.get(e);
    w.key("size");
    w.raw(b"K\x01s0");
    let data = w.finish();
    let r = agree("modified after its batch", &data);
    assert!(r.decoded_again, "an error after the fast path: {r:?}");
}

#[test]
fn a_reused_memo_index_or_a_cut_file_reads_as_the_generic_path_does() {
    // An entry dict stored at a memo index already used: the fast path stops for good.
    let data = capture(1, 60, |w, i| {
        if i == 30 {
            w.raw(b"}q\x03(");
            w.fields(i);
            w.raw(b"u");
        }
    });
    let r = agree("BINPUT of a used index", &data);
    assert_eq!(r.fast_entries, 30, "{r:?}");
    // A file cut inside a batch, at every length over its last 400 bytes.
    let full = capture(0, 40, |_, _| {});
    let mut again = 0;
    for cut in (full.len() - 400..full.len()).step_by(7) {
        let r = agree(&format!("cut at {cut}"), &full[..cut]);
        again += r.decoded_again as usize;
    }
    assert!(again > 0);
    // Ends with STOP while entries read fast wait in an open batch.
    let mut w = W::new(0);
    w.raw(b"(");
    for i in 0..20 {
        w.entry(i);
    }
    w.raw(b".");
    let r = agree("STOP inside the batch", &w.b);
    assert!(r.decoded_again, "{r:?}");
}
