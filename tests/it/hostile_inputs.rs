//! Hostile and broken files through the library and the binary: code-running opcodes at any
//! position, a pickle that would `touch` a file under Python, files of the wrong kind, damaged
//! files, and inputs that must never be written to.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use memscope::load::pickle::{self, PickleError};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_memscope"))
}

fn unit(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/unit")
        .join(name)
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memscope-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A valid start of a snapshot: `{'segments': [], 'device_traces': [[{'action': 'alloc', 'addr': 1, 'size': 512}`,
/// left open so that whatever follows is decoded in the middle of real data.
fn snapshot_prefix() -> Vec<u8> {
    let mut d = vec![0x80, 4, b'}', b'('];
    let s = |d: &mut Vec<u8>, t: &str| {
        d.push(0x8c);
        d.push(t.len() as u8);
        d.extend_from_slice(t.as_bytes());
    };
    s(&mut d, "segments");
    d.push(b']');
    s(&mut d, "device_traces");
    d.extend_from_slice(b"](](}(");
    s(&mut d, "action");
    s(&mut d, "alloc");
    s(&mut d, "addr");
    d.extend_from_slice(&[b'K', 1]);
    s(&mut d, "size");
    d.extend_from_slice(&[b'M', 0, 2]);
    d
}

/// Every opcode that imports, calls or builds objects (or reaches outside the pickle), with
/// plausible arguments after it.
const FORBIDDEN: &[(u8, &str, &[u8])] = &[
    (b'c', "GLOBAL", b"os\nsystem\n"),
    (0x93, "STACK_GLOBAL", b""),
    (b'R', "REDUCE", b""),
    (b'i', "INST", b"os\nsystem\n"),
    (b'o', "OBJ", b""),
    (0x81, "NEWOBJ", b""),
    (0x92, "NEWOBJ_EX", b""),
    (b'b', "BUILD", b""),
    (0x82, "EXT1", b"\x01"),
    (0x83, "EXT2", b"\x01\x00"),
    (0x84, "EXT4", b"\x01\x00\x00\x00"),
    (b'P', "PERSID", b"x\n"),
    (b'Q', "BINPERSID", b""),
    (0x97, "NEXT_BUFFER", b""),
    (0x98, "READONLY_BUFFER", b""),
];

#[test]
fn every_forbidden_opcode_is_refused_at_any_position() {
    let prefix = snapshot_prefix();
    for &(op, name, args) in FORBIDDEN {
        // At the very start (after PROTO), and after valid data deep inside a snapshot.
        for (tag, mut data) in [("start", vec![0x80, 4]), ("inside", prefix.clone())] {
            let offset = data.len();
            data.push(op);
            data.extend_from_slice(args);
            data.extend_from_slice(b"u.");
            match pickle::parse(&data) {
                Err(PickleError::Forbidden {
                    name: n,
                    offset: o,
                    opcode,
                }) => {
                    assert_eq!((n, o, opcode), (name, offset, op), "{name} {tag}")
                }
                other => panic!("{name} {tag}: expected a refusal, got {other:?}"),
            }
            let err = memscope::load::snapshot_from_bytes(Path::new("x.pickle"), &data)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(name)
                    && err.contains(&format!("byte {offset}:"))
                    && err.contains("never executes"),
                "{err}"
            );
        }
    }
}

#[test]
fn every_forbidden_opcode_is_refused_by_the_binary() {
    let dir = temp_dir("forbidden-cli");
    let prefix = snapshot_prefix();
    for &(op, name, args) in FORBIDDEN {
        let mut data = prefix.clone();
        data.push(op);
        data.extend_from_slice(args);
        data.extend_from_slice(b"u.");
        let path = dir.join(format!("{name}.pickle"));
        std::fs::write(&path, &data).unwrap();
        for format in ["text", "json"] {
            let out = bin()
                .args(["analyze", "--format", format])
                .arg(&path)
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(2), "{name}");
            if format == "json" {
                // No report: the envelope of the failure, its error the one on stderr.
                let e = common::envelope::envelope(&out.stdout);
                assert!(e["data"].is_null(), "{name}: no report on a refused file");
                assert_eq!(e["errors"][0]["kind"], "not_a_capture", "{name}");
                assert!(
                    String::from_utf8_lossy(&out.stderr)
                        .contains(e["errors"][0]["message"].as_str().unwrap()),
                    "{name}"
                );
            } else {
                assert!(out.stdout.is_empty(), "{name}: no report on a refused file");
            }
            let err = String::from_utf8(out.stderr).unwrap();
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(
                err.contains(name) && err.contains(&format!("byte {}", prefix.len())),
                "{err}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `os.system("touch MARKER")` as protocol 2 (GLOBAL + REDUCE) and protocol 4 (STACK_GLOBAL +
/// REDUCE), the second hidden in a snapshot after valid data.
fn touch_pickles(marker: &Path) -> Vec<(&'static str, Vec<u8>)> {
    let cmd = format!("touch {}", marker.display());
    let mut p2 = b"\x80\x02cos\nsystem\nq\x00X".to_vec();
    p2.extend_from_slice(&(cmd.len() as u32).to_le_bytes());
    p2.extend_from_slice(cmd.as_bytes());
    p2.extend_from_slice(b"\x85R.");
    let mut p4 = snapshot_prefix();
    p4.extend_from_slice(b"\x8c\x06frames\x8c\x02os\x8c\x06system\x93X");
    p4.extend_from_slice(&(cmd.len() as u32).to_le_bytes());
    p4.extend_from_slice(cmd.as_bytes());
    p4.extend_from_slice(b"\x85Ru.");
    vec![("p2", p2), ("p4", p4)]
}

#[test]
fn a_pickle_that_would_touch_a_file_touches_nothing() {
    let dir = temp_dir("touch");
    for (tag, data) in touch_pickles(&dir.join("marker-memscope")) {
        let path = dir.join(format!("evil_{tag}.pickle"));
        std::fs::write(&path, &data).unwrap();
        let out = bin().arg("analyze").arg(&path).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{tag}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("GLOBAL") && err.contains("never executes"),
            "{tag}: {err}"
        );
        memscope::load::load_snapshot(&path).unwrap_err();
    }
    assert!(
        !dir.join("marker-memscope").exists(),
        "memscope ran the payload"
    );
    // The payload is live: Python's own pickle.load does run it (when Python is here).
    for (tag, data) in touch_pickles(&dir.join(format!("marker-python-{}", "x"))) {
        let path = dir.join(format!("proof_{tag}.pickle"));
        std::fs::write(&path, &data).unwrap();
        let ran = Command::new("python3")
            .args(["-c", "import pickle,sys\ntry:\n pickle.load(open(sys.argv[1],'rb'))\nexcept Exception:\n pass"])
            .arg(&path)
            .status();
        if ran.is_ok_and(|s| s.success()) {
            assert!(
                dir.join("marker-python-x").exists(),
                "{tag}: the payload should run under Python"
            );
            std::fs::remove_file(dir.join("marker-python-x")).unwrap();
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn files_of_the_wrong_kind_say_what_they_look_like() {
    let mut gz = Vec::new();
    {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(&mut gz, flate2::Compression::fast());
        e.write_all(b"just some text\n").unwrap();
        e.finish().unwrap();
    }
    let mut legacy_torch = vec![
        0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, b'.',
    ];
    legacy_torch.extend_from_slice(b"\x80\x02M\xe9\x03.");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "checkpoint.pt",
            b"PK\x03\x04\x14\x00\x00\x00\x08\x00archive/data.pkl".to_vec(),
            "zip archive",
        ),
        ("legacy.pt", legacy_torch, "legacy torch.save"),
        ("weights.h5", b"\x89HDF\r\n\x1a\n\x00\x00".to_vec(), "HDF5"),
        ("a.out", b"\x7fELF\x02\x01\x01\x00".to_vec(), "ELF"),
        (
            "plot.png",
            b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR".to_vec(),
            "PNG",
        ),
        ("notes.txt.gz", gz, "not a pickle"),
        ("empty.pickle", Vec::new(), "empty"),
        (
            "config.json",
            br#"{"lr": 0.1, "epochs": 3}"#.to_vec(),
            "JSON",
        ),
        ("arr.npy", b"\x93NUMPY\x01\x00".to_vec(), "NumPy"),
    ];
    let dir = temp_dir("wrong-kind");
    for (name, bytes, expect) in cases {
        let path = dir.join(name);
        std::fs::write(&path, &bytes).unwrap();
        let out = bin().arg("analyze").arg(&path).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{name}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(expect) && err.contains(name), "{name}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        // As a trace, too: the same clear words, never a panic.
        let err = memscope::load::load_trace(&path).unwrap_err().to_string();
        assert!(err.contains(name), "{err}");
        if !matches!(name, "notes.txt.gz" | "config.json") {
            assert!(err.contains(expect), "{name} as a trace: {err}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_truncated_snapshot_says_how_far_it_got() {
    let data = std::fs::read(unit("tiny_p4.pickle")).unwrap();
    let dir = temp_dir("trunc");
    for cut in [3, data.len() / 3, data.len() / 2, data.len() - 1] {
        let path = dir.join(format!("cut_{cut}.pickle"));
        std::fs::write(&path, &data[..cut]).unwrap();
        let err = memscope::load::load_snapshot(&path)
            .unwrap_err()
            .to_string();
        assert!(err.contains("truncated") && err.contains("byte "), "{err}");
    }
    // Cut within the trace entries: the byte offset where it stopped.
    let err = memscope::load::snapshot_from_bytes(Path::new("t.pickle"), &data[..data.len() - 40])
        .unwrap_err()
        .to_string();
    let at: usize = err
        .split("byte ")
        .nth(1)
        .and_then(|t| t.split(':').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    assert!(
        err.contains("truncated") && at + 16 > data.len() - 40 && at <= data.len() - 40,
        "{err}"
    );
    // A gzip stream cut short says so, with the offset it reached.
    let gz = std::fs::read(unit("tiny_p4.pickle.gz")).unwrap();
    let path = dir.join("cut.pickle.gz");
    std::fs::write(&path, &gz[..gz.len() / 2]).unwrap();
    let err = memscope::load::load_snapshot(&path)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("gzip") && err.contains("decompressed bytes"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Snapshot of a directory: names and bytes of every file.
fn listing(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap_or_default(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn analyze_writes_nothing_next_to_its_input_or_in_the_working_directory() {
    let dir = temp_dir("nowrite");
    for f in [
        "tiny_p4.pickle",
        "tiny_p4.pickle.gz",
        "memo_bomb.pickle",
        "hostile/reduce_p4.pickle",
    ] {
        std::fs::copy(unit(f), dir.join(Path::new(f).file_name().unwrap())).unwrap();
    }
    let before = listing(&dir);
    let mtimes: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().modified().unwrap())
        .collect();
    for (name, _) in &before {
        for args in [
            &["analyze"][..],
            &["analyze", "--format", "json", "--stacks"][..],
            &[][..],
        ] {
            let out = bin()
                .current_dir(&dir)
                .args(args)
                .arg(name)
                .output()
                .unwrap();
            assert!(matches!(out.status.code(), Some(0 | 2)), "{name}");
        }
        let _ = memscope::load::load_trace(&dir.join(name));
    }
    assert_eq!(listing(&dir), before, "the directory changed");
    let after: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().modified().unwrap())
        .collect();
    assert_eq!(after, mtimes);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn huge_text_integers_are_bounded() {
    // Protocol-0 INT with far more digits than Python itself accepts by default (4300).
    let mut d = b"I".to_vec();
    d.extend(std::iter::repeat_n(b'9', 5000));
    d.extend_from_slice(b"\n.");
    assert!(matches!(
        pickle::parse(&d),
        Err(PickleError::Malformed { .. })
    ));
    // Long-but-allowed integers stay fast (nine digits per pass; generous bound for debug builds).
    let mut d = b"(".to_vec();
    for _ in 0..50 {
        d.push(b'L');
        d.extend(std::iter::repeat_n(b'7', 4300));
        d.extend_from_slice(b"L\n");
    }
    d.extend_from_slice(b"l.");
    let t = std::time::Instant::now();
    let p = pickle::parse(&d).unwrap();
    assert_eq!(p.seq(p.root()).unwrap().len(), 50);
    assert!(t.elapsed().as_secs_f64() < 5.0, "{:?}", t.elapsed());
}

#[test]
fn millions_of_tiny_items_and_deep_nesting_stay_bounded() {
    // Ten million Nones in one list: linear, no recursion.
    let n = 10_000_000;
    let mut d = vec![0x80, 4, b']', b'('];
    d.extend(std::iter::repeat_n(b'N', n));
    d.extend_from_slice(b"e.");
    let p = pickle::parse(&d).unwrap();
    assert_eq!(p.seq(p.root()).unwrap().len(), n);
    // A snapshot whose frames list nests a million levels deep, and a self-referencing
    // frames list (a cycle through the memo): the converter never recurses into either.
    let mut d = snapshot_prefix();
    d.extend_from_slice(b"\x8c\x06frames");
    d.extend(std::iter::repeat_n(b']', 1_000_000));
    d.extend(std::iter::repeat_n(b'a', 999_999));
    d.extend_from_slice(b"ueeu.");
    let s = memscope::load::snapshot_from_bytes(Path::new("deep.pickle"), &d).unwrap();
    assert_eq!(s.devices[0].events.len(), 1);
    let _ = format!("{s:?}");
    let mut d2 = snapshot_prefix();
    // `x = []; x.append(x)`: MEMOIZE stores the list at index 0, BINGET 0 pushes it again.
    d2.extend_from_slice(b"\x8c\x06frames]\x94h\x00aueeu.");
    let s = memscope::load::snapshot_from_bytes(Path::new("cycle.pickle"), &d2).unwrap();
    let a = memscope::analysis::analyze_snapshot(&s, Path::new("cycle.pickle"), d2.len() as u64);
    let _ = format!("{a:?}");
    let p = pickle::parse(&d2).unwrap();
    let _ = format!("{p:?}");
}
