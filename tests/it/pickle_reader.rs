//! The pickle reader against Python's own pickles: same values as serde-pickle where that
//! crate can read them, refusal (never execution) of code-running opcodes, bounded work.

use std::path::{Path, PathBuf};

use memscope::load::pickle::{self, Limits, Pickle, PickleError, Value};

fn unit(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/unit")
        .join(name)
}

/// Converts our value tree into serde-pickle's, for comparison (no cycles in these inputs).
fn to_oracle(p: &Pickle<'_>, v: Value) -> serde_pickle::Value {
    use serde_pickle::{HashableValue as H, Value as O};
    fn hashable(p: &Pickle<'_>, v: Value) -> H {
        match to_oracle(p, v) {
            O::None => H::None,
            O::Bool(b) => H::Bool(b),
            O::I64(i) => H::I64(i),
            O::Int(i) => H::Int(i),
            O::F64(f) => H::F64(f),
            O::Bytes(b) => H::Bytes(b),
            O::String(s) => H::String(s),
            O::Tuple(t) => H::Tuple(t.into_iter().map(|x| x.into_hashable().unwrap()).collect()),
            other => panic!("unhashable key {other:?}"),
        }
    }
    match v {
        Value::None => O::None,
        Value::Bool(b) => O::Bool(b),
        Value::Int(i) => O::I64(i),
        Value::BigInt(_) | Value::OwnedBigInt(_) => O::Int(num_from_le(p.bigint_bytes(v).unwrap())),
        Value::Float(f) => O::F64(f),
        Value::Str(_) | Value::OwnedStr(_) => O::String(p.str(v).unwrap().into_owned()),
        Value::Bytes(_) => O::Bytes(p.raw_bytes(v).unwrap().to_vec()),
        Value::List(_) => O::List(p.seq(v).unwrap().iter().map(|&x| to_oracle(p, x)).collect()),
        Value::Tuple(_) => O::Tuple(p.seq(v).unwrap().iter().map(|&x| to_oracle(p, x)).collect()),
        Value::Set(_) => O::Set(p.seq(v).unwrap().iter().map(|&x| hashable(p, x)).collect()),
        Value::Dict(_) => O::Dict(
            p.dict(v)
                .unwrap()
                .iter()
                .map(|&(k, x)| (hashable(p, k), to_oracle(p, x)))
                .collect(),
        ),
        Value::FinalSeq(_)
        | Value::FinalDict(_)
        | Value::EmptyList
        | Value::EmptyTuple
        | Value::EmptyDict => unreachable!("parsed without a finalizer"),
    }
}

fn num_from_le(b: &[u8]) -> num_bigint::BigInt {
    num_bigint::BigInt::from_signed_bytes_le(b)
}

#[test]
fn matches_serde_pickle_on_every_protocol() {
    for proto in 0..=5 {
        let path = unit(&format!("plain_p{proto}.pickle"));
        let data = std::fs::read(&path).unwrap();
        let ours = pickle::parse(&data).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let oracle: serde_pickle::Value =
            serde_pickle::value_from_slice(&data, serde_pickle::DeOptions::new()).unwrap();
        let mine = to_oracle(&ours, ours.root());
        assert_eq!(mine, oracle, "protocol {proto}");
    }
}

#[test]
fn snapshot_pickles_match_oracle_where_it_can_read_them() {
    // serde-pickle refuses any memo reference to a container (`Syntax(Recursive)`), as on real
    // snapshots; the `noshare` variant has every frame list as its own object.
    let shared = std::fs::read(unit("tiny_p4.pickle")).unwrap();
    assert!(serde_pickle::value_from_slice(&shared, serde_pickle::DeOptions::new()).is_err());
    for proto in [2, 3, 4, 5] {
        let data = std::fs::read(unit(&format!("tiny_noshare_p{proto}.pickle"))).unwrap();
        let ours = pickle::parse(&data).unwrap();
        let oracle: serde_pickle::Value =
            serde_pickle::value_from_slice(&data, serde_pickle::DeOptions::new()).unwrap();
        assert_eq!(to_oracle(&ours, ours.root()), oracle, "protocol {proto}");
    }
}

#[test]
fn shared_frame_lists_stay_shared() {
    let data = std::fs::read(unit("tiny_p4.pickle")).unwrap();
    let p = pickle::parse(&data).unwrap();
    let root = p.root();
    let trace = p.seq(p.get(root, "device_traces").unwrap()).unwrap()[0];
    let events = p.seq(trace).unwrap();
    // Events 0 and 2 were pickled with the same frames list object: one arena id.
    let f0 = p.get(events[0], "frames").unwrap();
    let f2 = p.get(events[2], "frames").unwrap();
    assert!(matches!(f0, Value::List(_)));
    assert_eq!(f0, f2);
}

#[test]
fn memo_bomb_is_linear() {
    let data = std::fs::read(unit("memo_bomb.pickle")).unwrap();
    let p = pickle::parse(&data).unwrap();
    // 64 levels plus the leaf list: 65 containers, although a copy would have 2^64 leaves.
    assert_eq!(p.container_count(), 65);
    let err =
        memscope::load::snapshot_from_bytes(Path::new("memo_bomb.pickle"), &data).unwrap_err();
    assert!(err.to_string().contains("not a memory snapshot"), "{err}");
}

#[test]
fn code_running_opcodes_are_refused_with_name_and_offset() {
    let cases = [
        ("reduce_p0.pickle", "GLOBAL", 0),
        ("reduce_p1.pickle", "GLOBAL", 0),
        ("reduce_p2.pickle", "GLOBAL", 2),
        ("reduce_p4.pickle", "STACK_GLOBAL", 28),
        ("build_newobj_p2.pickle", "GLOBAL", 2),
        ("inst_p0.pickle", "INST", 35),
        ("obj_p1.pickle", "GLOBAL", 1),
        ("persid_p0.pickle", "PERSID", 0),
        ("ext1_p2.pickle", "EXT1", 2),
    ];
    for (file, name, offset) in cases {
        let data = std::fs::read(unit(&format!("hostile/{file}"))).unwrap();
        match pickle::parse(&data) {
            Err(PickleError::Forbidden {
                name: n, offset: o, ..
            }) => {
                assert_eq!((n, o), (name, offset), "{file}");
            }
            other => panic!("{file}: expected a refusal, got {other:?}"),
        }
    }
    // The payload hidden inside a real-looking snapshot is refused too, through the full loader.
    let data = std::fs::read(unit("hostile/snapshot_with_payload.pickle")).unwrap();
    let err = memscope::load::snapshot_from_bytes(Path::new("x.pickle"), &data)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("STACK_GLOBAL") && err.contains("never executes"),
        "{err}"
    );
    for f in [
        "reduce-0", "reduce-1", "reduce-2", "reduce-4", "inst", "obj",
    ] {
        assert!(!Path::new(&format!("/tmp/memscope-pwned-{f}")).exists());
    }
}

#[test]
fn truncation_is_reported_with_offset_at_every_cut() {
    let data = std::fs::read(unit("tiny_p4.pickle")).unwrap();
    for cut in 0..data.len() {
        match pickle::parse(&data[..cut]) {
            Ok(_) => panic!("cut at {cut} parsed"),
            Err(PickleError::Truncated { offset, .. }) => assert!(offset < cut),
            Err(PickleError::NoStop { offset }) => assert_eq!(offset, cut),
            Err(e) => panic!("cut at {cut}: unexpected {e}"),
        }
    }
}

#[test]
fn adversarial_lengths_and_depth_are_bounded() {
    // BINUNICODE8 declaring 2^63 bytes.
    let mut d = vec![0x80, 4, 0x8d];
    d.extend_from_slice(&(1u64 << 63).to_le_bytes());
    assert!(matches!(
        pickle::parse(&d),
        Err(PickleError::Truncated { .. })
    ));
    // A million nested lists: no recursion, no stack overflow.
    let depth = 1_000_000;
    let mut d = vec![0x80, 4];
    d.extend(std::iter::repeat_n(b']', depth));
    d.extend(std::iter::repeat_n(b'a', depth - 1));
    d.push(b'.');
    let p = pickle::parse(&d).unwrap();
    assert_eq!(p.container_count(), depth);
    let err = memscope::load::snapshot_from_bytes(Path::new("deep.pickle"), &d).unwrap_err();
    assert!(err.to_string().contains("not a memory snapshot"), "{err}");
    // Limits: memo index and container count.
    let lim = Limits {
        max_containers: 10,
        ..Limits::default()
    };
    let mut d = vec![0x80, 4];
    d.extend(std::iter::repeat_n(b']', 11));
    d.push(b'.');
    assert!(matches!(
        pickle::parse_with_limits(&d, lim),
        Err(PickleError::Limit {
            what: "number of containers",
            ..
        })
    ));
    let d = [0x80, 4, b'N', b'r', 0xff, 0xff, 0xff, 0xff, b'.'];
    let lim = Limits {
        max_memo_index: 1000,
        ..Limits::default()
    };
    assert!(matches!(
        pickle::parse_with_limits(&d, lim),
        Err(PickleError::Limit {
            what: "memo index",
            ..
        })
    ));
    // A GET of a memo slot never stored.
    let d = [0x80, 4, b'h', 7, b'.'];
    assert!(matches!(
        pickle::parse(&d),
        Err(PickleError::MissingMemo { index: 7, .. })
    ));
}

#[test]
fn not_a_pickle_and_wrong_pickles() {
    let err =
        memscope::load::snapshot_from_bytes(Path::new("a.txt"), b"hello world\n").unwrap_err();
    assert!(err.to_string().contains("not a pickle"), "{err}");
    let err = memscope::load::snapshot_from_bytes(Path::new("t.json"), b"{\"traceEvents\": []}")
        .unwrap_err();
    assert!(err.to_string().contains("JSON"), "{err}");
    let data = std::fs::read(unit("not_snapshot.pickle")).unwrap();
    let err = memscope::load::snapshot_from_bytes(Path::new("n.pickle"), &data).unwrap_err();
    assert!(
        err.to_string().contains("dict with keys [model, epoch]"),
        "{err}"
    );
}

#[test]
fn gzip_input_loads() {
    let s = memscope::load::load_snapshot(&unit("tiny_p4.pickle.gz")).unwrap();
    assert_eq!(s.devices.len(), 1);
    assert_eq!(s.devices[0].events.len(), 5);
}

/// A tiny pickle assembler for hand-made edge cases.
struct Asm(Vec<u8>);
impl Asm {
    fn str(&mut self, s: &str) -> &mut Self {
        self.0.extend([0x8c, s.len() as u8]);
        self.0.extend(s.as_bytes());
        self
    }
    fn op(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend(b);
        self
    }
    fn frame(&mut self, file: &str, line: u8) -> &mut Self {
        self.op(b"}(")
            .str("filename")
            .str(file)
            .str("line")
            .op(&[b'K', line])
            .str("name")
            .str("f")
            .op(b"u")
    }
}

#[test]
fn reused_memo_slot_is_not_served_from_the_frame_list_cache() {
    // Entries 1 and 3 define a frame inline and store it at memo slot 0 (the second time over
    // the first); entries 2 and 4 use the same bytes, a frames list `[GET 0]`. Entry 4 must see
    // the frame stored last, although the run of references is identical to entry 2's.
    let mut a = Asm(vec![0x80, 4]);
    a.op(b"}(")
        .str("segments")
        .op(b"]")
        .str("device_traces")
        .op(b"](]");
    a.op(b"(");
    let entry = |a: &mut Asm, addr: u8, inline: Option<&str>| {
        a.op(b"}(")
            .str("action")
            .str("alloc")
            .str("addr")
            .op(&[b'K', addr])
            .str("size")
            .op(&[b'K', 8]);
        a.str("frames").op(b"](");
        match inline {
            Some(file) => {
                a.frame(file, addr).op(&[b'q', 0]);
            }
            None => {
                a.op(&[b'h', 0]);
            }
        }
        a.op(b"eu");
    };
    entry(&mut a, 1, Some("a.py"));
    entry(&mut a, 2, None);
    entry(&mut a, 3, Some("b.py"));
    entry(&mut a, 4, None);
    a.op(b"e"); // APPENDS the entries into the device list
    a.op(b"e"); // APPENDS the device list into device_traces
    a.op(b"u."); // SETITEMS of the root, STOP
    let snap = memscope::load::snapshot::parse(&a.0, None).unwrap();
    let ev = &snap.devices[0].events;
    assert_eq!(ev.len(), 4);
    let file = |i: usize| {
        let s = &snap.stacks;
        s.str(s.frame(s.frames(ev[i].stack)[0]).file).to_owned()
    };
    assert_eq!(
        [file(0), file(1), file(2), file(3)],
        ["a.py", "a.py", "b.py", "b.py"]
    );
}
