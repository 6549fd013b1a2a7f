//! Issue 43: no fixed size ceiling. A snapshot whose records lie past 4 GiB in the file is read
//! like the original (the pickle reader's spans hold 48-bit offsets), and a hostile file that
//! claims more than a span can hold still ends in a one-line error, under an address-space
//! limit of twice the file plus 2 GB (what the issue asks of crafted inputs).
//!
//! The files are sparse (a hole of 4 GiB costs no disk), so the tests are cheap to run.

use crate::bounded_inputs::{analyze, assert_refused, run, tmpdir, unit};

use std::io::Write;
use std::path::Path;
use std::time::Duration;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// The address-space limit the issue sets for a file of `len` bytes.
fn as_limit(len: u64) -> u64 {
    2 * len + 2_000_000_000
}

/// Writes each piece at its offset, leaving holes between them: a sparse file.
fn sparse(p: &Path, pieces: &[(u64, &[u8])]) {
    use std::io::{Seek, SeekFrom};
    let mut f = std::fs::File::create(p).unwrap();
    for (at, bytes) in pieces {
        f.seek(SeekFrom::Start(*at)).unwrap();
        f.write_all(bytes).unwrap();
    }
}

/// `BINBYTES8` of `n` bytes: the opcode and its length (the bytes follow).
fn binbytes8(n: u64) -> Vec<u8> {
    let mut v = vec![0x8e];
    v.extend(n.to_le_bytes());
    v
}

/// `analyze --format json` of `p`, with the file's path and size (the only things that differ
/// between a capture and its padded copy) replaced by placeholders.
fn json_of(p: &Path) -> String {
    let o = run(
        {
            let mut c = analyze(p);
            c.args(["--format", "json"]);
            c
        },
        Some(as_limit(std::fs::metadata(p).unwrap().len())),
        Duration::from_secs(300),
    );
    assert_eq!(o.code, Some(0), "{}: {}", p.display(), o.stderr);
    let len = std::fs::metadata(p).unwrap().len();
    String::from_utf8(o.stdout)
        .unwrap()
        .replace(&*p.to_string_lossy(), "FILE")
        .replace(&format!("\"bytes\": {len}"), "\"bytes\": SIZE")
}

#[test]
fn a_snapshot_whose_records_lie_past_4_gib_reads_like_the_original() {
    let dir = tmpdir("big43-past4g");
    let src = unit("fixtures/clean.pickle");
    let raw = std::fs::read(&src).unwrap();
    assert_eq!(&raw[..2], b"\x80\x04", "a protocol-4 pickle");
    // PROTO 4, then two BINBYTES8 of 2 GiB + 1 MiB of zeros, each popped: the capture's own
    // opcodes (after its PROTO) then start past 4 GiB, so every span has a 33-bit offset.
    let n = 2 * GIB + MIB;
    let mut head = b"\x80\x04".to_vec();
    head.extend(binbytes8(n));
    let first_end = head.len() as u64 + n;
    let mut mid = vec![b'0'];
    mid.extend(binbytes8(n));
    let second_end = first_end + mid.len() as u64 + n;
    let mut tail = vec![b'0'];
    tail.extend(&raw[2..]);
    let big = dir.join("padded.pickle");
    sparse(&big, &[(0, &head), (first_end, &mid), (second_end, &tail)]);
    assert!(second_end > 4 * GIB);
    let want = json_of(&src);
    let got = json_of(&big);
    assert!(want.contains("\"kind\": \"snapshot\""), "{want:.300}");
    assert_eq!(got, want, "the padded copy reads like the original");
    let _ = std::fs::remove_file(&big);
}

#[test]
fn a_string_longer_than_a_span_is_a_one_line_error_under_the_address_space_limit() {
    let dir = tmpdir("big43-longstr");
    let p = dir.join("longstr.pickle");
    // BINUNICODE8 claiming 4.5 GiB, the bytes there (a hole), then STOP: the input holds the
    // claim, but one string past 4 GiB is refused as a limit, not read or copied.
    let n = 4 * GIB + GIB / 2;
    let mut head = b"\x80\x04\x8d".to_vec();
    head.extend(n.to_le_bytes());
    sparse(&p, &[(0, &head), (head.len() as u64 + n, b".")]);
    let len = std::fs::metadata(&p).unwrap().len();
    let o = run(analyze(&p), Some(as_limit(len)), Duration::from_secs(120));
    assert_refused(&o, &p, "length of one string or bytes object");
    assert!(o.max_rss < 128 * MIB, "peak RSS {}", o.max_rss);
    let _ = std::fs::remove_file(&p);
}
