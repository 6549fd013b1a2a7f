//! Where a snapshot pickle's trace list can be cut for a parallel decode, and the memo base of
//! each piece, without a serial pre-scan (issue 43).
//!
//! Why frames: `torch.cuda.memory._dump_snapshot` writes protocol 4, one unbroken chain of
//! `FRAME` opcodes (0x95, an 8-byte length, about 64 KiB of opcodes), and Python's framer ends
//! a frame only between two objects, so every frame's payload starts at an opcode boundary.
//! Hopping the frame headers ([`chain`]) costs one read per 64 KiB; an earlier attempt that
//! walked every opcode serially to find its cuts spent 0.43-0.68 s of 1.1 s on that walk.
//!
//! Why memo bases: protocol 4 stores memo entries with `MEMOIZE`, whose index is implicit (the
//! count of entries before it), while `BINGET` names an absolute index. A piece decoded on its
//! own knows its entries only relative to an unknown base; the base is the count of `MEMOIZE`s
//! before it. Each piece counts its own (in parallel), and prefix sums give the bases
//! ([`Cut::bases`]). A piece also lists the strings it memoizes, by position: a later piece
//! that reads one of them (a key, a file name) can take it from the bytes.
//!
//! A piece starts at the first trace entry (`EMPTY_DICT MEMOIZE MARK` and the memo reference of
//! the `"action"` key, see [`crate::load::pickle::handoff`]) at or after its frame, and ends
//! where the next one starts; the first starts at the hand-off batch. The walk of piece `i`
//! runs past its frame to the next piece's first entry, so the plan holds only where every
//! piece's end is the next one's start ([`CutError::Chain`] otherwise): a frame header that
//! lies about its length, a cut inside a string, or an entry the scan took for another shape
//! all end in an error, and the caller decodes serially. Anything outside the opcodes Python's
//! pickler writes for a trace list ([`CutError::Unsupported`]), explicit memo stores included,
//! does too: the plan never decides a result.
//!
//! Hostile input: the chain is at most one header per 9 bytes; each piece's walk is bounded by
//! its own length plus as much again (at least 1 MiB) past its end, so the whole plan reads
//! each byte at most about twice; a piece keeps at most one memoized string (8 bytes) per 16 bytes it walks.

use super::pickle::{entry_key_at, skip_frames, Handoff};

/// The payload offsets of the `FRAME` chain that starts after `PROTO` (byte 2) of a protocol 4
/// or 5 pickle: each is an opcode boundary where the file is what Python's framer writes. The
/// hop stops at the first byte that is no frame header, or at a frame that runs past the end.
pub fn chain(data: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    if !matches!(data, [0x80, 4 | 5, ..]) {
        return out;
    }
    let mut p = 2usize;
    while data.get(p) == Some(&0x95) && p + 9 <= data.len() {
        let mut len = [0u8; 8];
        len.copy_from_slice(&data[p + 1..p + 9]);
        let payload = p + 9;
        let Some(next) = usize::try_from(u64::from_le_bytes(len))
            .ok()
            .and_then(|l| payload.checked_add(l))
            .filter(|&n| n <= data.len())
        else {
            break;
        };
        out.push(payload);
        p = next;
    }
    out
}

/// One piece of the trace list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Piece {
    /// Offset of its first entry's `EMPTY_DICT` (the hand-off batch's `MARK` for the first).
    pub start: usize,
    /// Where the next piece starts, or past the trace list's last `APPENDS` for the last one.
    pub end: usize,
    /// `MEMOIZE`s in `start..end`.
    pub memoizes: u64,
    /// Trace entries in `start..end`.
    pub entries: u64,
    /// The strings it memoizes: the ordinal of the `MEMOIZE` within the piece, and the offset
    /// of the string's opcode from `start` (8 bytes a string: a real trace memoizes a fresh
    /// `"N/A"` per entry, about one string per 70 bytes).
    pub strings: Vec<(u32, u32)>,
    /// The trace list ends in this piece.
    pub last: bool,
}

/// A plan: pieces in file order, each ending where the next starts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cut {
    pub pieces: Vec<Piece>,
    /// The memo length at each piece's start (the index its first `MEMOIZE` gives).
    pub bases: Vec<u64>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CutError {
    #[error("byte {offset}: opcode 0x{opcode:02x} is outside what a trace list holds")]
    Unsupported { opcode: u8, offset: usize },
    #[error("byte {offset}: the opcodes end or nest where a trace list cannot")]
    Malformed { offset: usize },
    #[error("byte {offset}: a piece ends where the next one does not start")]
    Chain { offset: usize },
    #[error("byte {offset}: a piece runs too far past its end")]
    Overrun { offset: usize },
    #[error("byte {offset}: more memoized strings than a trace list holds")]
    Strings { offset: usize },
}

/// Cuts the trace list the hand-off batch `h` opens into about `want` pieces at frame starts,
/// walking the pieces on up to `threads` threads. Fewer pieces where the file has fewer frames
/// after `h`; one piece without frames.
pub fn plan(data: &[u8], h: &Handoff, want: usize, threads: usize) -> Result<Cut, CutError> {
    let starts = cut_frames(data, h.pos, want);
    let jobs: Vec<(usize, Option<usize>)> = (0..starts.len())
        .map(|i| (starts[i], starts.get(i + 1).copied()))
        .collect();
    let first = h.pos;
    let walked = crate::threads::map(threads, &jobs, |&(from, limit)| {
        let start = if from == first {
            first
        } else {
            find_entry(data, from, limit, h.action)?
        };
        walk(data, start, from == first, limit, h.action)
    });
    let mut pieces: Vec<Piece> = Vec::with_capacity(walked.len());
    for w in walked {
        // Pieces past the list's end are no part of it (whatever their walk found).
        if pieces.last().is_some_and(|p: &Piece| p.last) {
            break;
        }
        let w = w?;
        if let Some(prev) = pieces.last() {
            if prev.end != w.start {
                return Err(CutError::Chain { offset: prev.end });
            }
        }
        pieces.push(w);
    }
    let mut bases = Vec::with_capacity(pieces.len());
    let mut base = h.memo_len;
    for p in &pieces {
        bases.push(base);
        base = base.saturating_add(p.memoizes);
    }
    Ok(Cut { pieces, bases })
}

/// `h_pos` and the frame payloads nearest to `want - 1` evenly spaced points after it.
fn cut_frames(data: &[u8], h_pos: usize, want: usize) -> Vec<usize> {
    let frames: Vec<usize> = chain(data).into_iter().filter(|&f| f > h_pos).collect();
    let mut out = vec![h_pos];
    let want = want.max(1);
    let step = (data.len() - h_pos) / want;
    if step == 0 {
        return out;
    }
    for i in 1..want {
        let target = h_pos + i * step;
        let j = frames.partition_point(|&f| f < target);
        if let Some(&f) = frames.get(j) {
            if f > *out.last().expect("starts with h_pos") {
                out.push(f);
            }
        }
    }
    out
}

/// The length of the opcode at `d[p]` (with its argument), for the opcodes a trace list holds.
fn op_len(d: &[u8], p: usize) -> Result<usize, CutError> {
    let op = *d.get(p).ok_or(CutError::Malformed { offset: p })?;
    let arg = |n: usize| -> Result<u64, CutError> {
        let b = d
            .get(p + 1..p + 1 + n)
            .ok_or(CutError::Malformed { offset: p })?;
        let mut a = [0u8; 8];
        a[..n].copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    };
    let len = match op {
        b'('
        | b')'
        | b']'
        | b'}'
        | b'e'
        | b'u'
        | b'a'
        | b's'
        | b't'
        | b'l'
        | b'd'
        | 0x94
        | b'N'
        | 0x88
        | 0x89
        | 0x85..=0x87
        | 0x8f
        | 0x90
        | 0x91 => 1,
        b'K' | b'h' => 2,
        b'M' => 3,
        b'J' | b'j' => 5,
        b'G' | 0x95 => 9,
        0x8a | 0x8c | b'C' => 2 + arg(1)?,
        0x8b | b'X' | b'B' => 5 + arg(4)?,
        0x8d | 0x8e => 9u64.saturating_add(arg(8)?),
        opcode => return Err(CutError::Unsupported { opcode, offset: p }),
    };
    let len = usize::try_from(len).map_err(|_| CutError::Malformed { offset: p })?;
    if p.checked_add(len).is_none_or(|e| e > d.len()) {
        return Err(CutError::Malformed { offset: p });
    }
    Ok(len)
}

/// How far past its end a piece may walk: its own length, at least 1 MiB.
fn overrun(from: usize, limit: usize) -> usize {
    limit + (limit - from).max(1 << 20)
}

/// The first trace entry at an opcode boundary from `from` on (walking opcodes from there).
fn find_entry(
    data: &[u8],
    from: usize,
    limit: Option<usize>,
    action: u32,
) -> Result<usize, CutError> {
    let stop = limit.map_or(data.len(), |l| overrun(from, l));
    let mut p = from;
    while p < stop {
        if data[p] == b'}' && entry_key_at(data, p) == Some(action) {
            return Ok(p);
        }
        p += op_len(data, p)?;
    }
    Err(CutError::Overrun { offset: p })
}

/// Walks a piece from `start` (an entry, or the hand-off batch's `MARK` when `at_batch`) to
/// the first entry at or past `limit`, or to the end of the trace list.
fn walk(
    data: &[u8],
    start: usize,
    at_batch: bool,
    limit: Option<usize>,
    action: u32,
) -> Result<Piece, CutError> {
    let stop = limit.map_or(data.len(), |l| overrun(start, l));
    let max_strings = (stop - start) / 16 + 16;
    let mut piece = Piece {
        start,
        ..Piece::default()
    };
    // -1: between batches of the list; 0: in a batch (entries only); 1 and up: in an entry.
    let mut depth: i64 = if at_batch { -1 } else { 0 };
    let mut p = start;
    loop {
        if p >= stop {
            return Err(CutError::Overrun { offset: p });
        }
        let op = data[p];
        if depth == -1 && op != 0x95 {
            // Another batch of entries, or the list is over.
            if op == b'(' && entry_key_at(data, p + 1) == Some(action) {
                depth = 0;
                p += 1;
                continue;
            }
            piece.end = p;
            piece.last = true;
            return Ok(piece);
        }
        if depth == 0 && op == b'}' {
            if limit.is_some_and(|l| p >= l) {
                piece.end = p;
                return Ok(piece);
            }
            piece.entries += 1;
        }
        // In a batch only entries (dicts, their `MARK`s and memo stores), frame headers and
        // the batch's `APPENDS`; the entries' own opcodes only close what they opened.
        let in_batch_ok = matches!(op, b'}' | 0x94 | 0x95 | b'(' | b'e');
        if (depth == -1 && op != 0x95) || (depth == 0 && !in_batch_ok) {
            return Err(CutError::Malformed { offset: p });
        }
        let len = op_len(data, p)?;
        match op {
            b'(' => depth += 1,
            b'e' | b'u' | b't' | b'l' | b'd' | 0x90 | 0x91 => depth -= 1,
            0x94 => piece.memoizes += 1,
            0x8c | b'X' | 0x8d if data.get(skip_frames(data, p + len)) == Some(&0x94) => {
                if piece.strings.len() >= max_strings {
                    return Err(CutError::Strings { offset: p });
                }
                let (Ok(ordinal), Ok(at)) =
                    (u32::try_from(piece.memoizes), u32::try_from(p - start))
                else {
                    return Err(CutError::Strings { offset: p });
                };
                piece.strings.push((ordinal, at));
            }
            _ => {}
        }
        p += len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_stops_at_a_lie() {
        let mut d = vec![0x80, 4, 0x95];
        d.extend(3u64.to_le_bytes());
        d.extend([b'N', b'N', b'0']);
        d.push(0x95);
        d.extend(u64::MAX.to_le_bytes());
        d.push(b'.');
        assert_eq!(chain(&d), vec![11]);
        assert_eq!(chain(&d[..5]), Vec::<usize>::new());
        assert_eq!(chain(&[0x80, 2, 0x95]), Vec::<usize>::new());
    }
}
