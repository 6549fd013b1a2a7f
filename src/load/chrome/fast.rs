//! A hand-written reader for the common shape of a trace event, several times faster than
//! serde_json on it: keys are matched as bytes, strings are scanned a word at a time and
//! borrowed, and the values memscope does not use are skipped without building anything.
//!
//! It answers only where it is sure to agree with serde_json (the reader of record): on
//! anything else (an escape in a kept string or in a key, `\u` anywhere, a raw control byte,
//! a number serde_json would round differently or reject, a duplicate key, a container where
//! a scalar is expected, invalid UTF-8, deep nesting) it returns `None` and the element is
//! read by serde_json as before. So the result never depends on which reader ran.

use std::borrow::Cow;

use super::{RawArgs, RawEvent, Scalar};

/// Nesting beyond this goes to serde_json (which has its own limit of 128).
const MAX_DEPTH: u32 = 100;

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Bytes of `w` (in their high bits) that may be `"`, `\`, a control byte or non-ASCII. The
/// lowest flagged byte is exact; flags above it can be false (the usual zero-byte trick).
#[inline]
fn special_bytes(w: u64) -> u64 {
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v;
    (has_zero(w ^ (ONES * b'"' as u64))
        | has_zero(w ^ (ONES * b'\\' as u64))
        | w.wrapping_sub(ONES * 0x20)
        | w)
        & HIGHS
}

/// From `i` (inside a string), the offset of the first byte that is `"`, `\`, a control byte
/// or non-ASCII, or `b.len()`.
#[inline]
fn find_special(b: &[u8], mut i: usize) -> usize {
    while i + 8 <= b.len() {
        let w = u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        let m = special_bytes(w);
        if m != 0 {
            let k = i + (m.trailing_zeros() / 8) as usize;
            // The lowest flag is exact, but bytes before it are plain.
            return k;
        }
        i += 8;
    }
    while i < b.len() {
        let c = b[i];
        if c == b'"' || c == b'\\' || !(0x20..0x80).contains(&c) {
            return i;
        }
        i += 1;
    }
    i
}

/// A string without escapes at `i` (the opening quote): its text and the offset after it.
#[inline]
fn plain_str(b: &[u8], i: usize) -> Option<(&str, usize)> {
    let start = i + 1;
    let mut j = start;
    let mut ascii = true;
    loop {
        j = find_special(b, j);
        match *b.get(j)? {
            b'"' => break,
            c if c >= 0x80 => {
                ascii = false;
                j += 1;
            }
            _ => return None,
        }
    }
    let raw = &b[start..j];
    let s = if ascii {
        // SAFETY: every byte is below 0x80 (`find_special` stops at any other), so ASCII,
        // which is UTF-8.
        unsafe { std::str::from_utf8_unchecked(raw) }
    } else {
        std::str::from_utf8(raw).ok()?
    };
    Some((s, j + 1))
}

/// Skips a string at `i` (the opening quote) as serde_json's `ignore_str` would accept it.
fn skip_str(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    loop {
        j = find_special(b, j);
        match *b.get(j)? {
            b'"' => return Some(j + 1),
            b'\\' => match *b.get(j + 1)? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => j += 2,
                _ => return None,
            },
            c if c >= 0x80 => j += 1,
            _ => return None,
        }
    }
}

#[inline]
fn ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// `10^k` as serde_json's table writes it (exact literals), for the digits after a point.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// A number at `i`, valued exactly as serde_json (without `float_roundtrip`) values it, for
/// the forms where that is simple: no exponent, at most 19 digits, at most 22 after the point.
#[inline]
fn number_into(b: &[u8], i: usize, out: &mut Scalar<'_>) -> Option<usize> {
    let mut j = i;
    let positive = if b.get(j) == Some(&b'-') {
        j += 1;
        false
    } else {
        true
    };
    let first = *b.get(j)?;
    if !first.is_ascii_digit() {
        return None;
    }
    let mut sig: u64 = 0;
    let mut digits = 0;
    while let Some(&c) = b.get(j) {
        if !c.is_ascii_digit() {
            break;
        }
        sig = sig.wrapping_mul(10).wrapping_add((c - b'0') as u64);
        digits += 1;
        j += 1;
    }
    if first == b'0' && digits > 1 {
        return None;
    }
    let mut frac = 0usize;
    if b.get(j) == Some(&b'.') {
        j += 1;
        while let Some(&c) = b.get(j) {
            if !c.is_ascii_digit() {
                break;
            }
            sig = sig.wrapping_mul(10).wrapping_add((c - b'0') as u64);
            digits += 1;
            frac += 1;
            j += 1;
        }
        if frac == 0 {
            return None;
        }
    }
    // 19 digits always fit a u64 (serde_json keeps the u64 until it would overflow).
    if digits > 19 || matches!(b.get(j), Some(b'e' | b'E') | None) {
        return None;
    }
    *out = if frac == 0 {
        if positive {
            Scalar::Int(sig.into())
        } else {
            let neg = (sig as i64).wrapping_neg();
            if neg >= 0 {
                Scalar::Float(-(sig as f64))
            } else {
                Scalar::Int(neg.into())
            }
        }
    } else {
        // serde_json's own formula (`f64_from_parts` without `float_roundtrip`, which nothing
        // in the build enables). Should that feature come in, 17-digit decimals could round
        // differently: the unit test `fast_reader_agrees_with_serde` has such numbers.
        let f = sig as f64 / *POW10.get(frac)?;
        Scalar::Float(if positive { f } else { -f })
    };
    Some(j)
}

/// Reads a scalar value at `i` into `out` (strings borrowed), returning the offset after it;
/// containers are left to serde_json.
#[inline]
fn scalar_into<'a>(b: &'a [u8], i: usize, out: &mut Scalar<'a>) -> Option<usize> {
    match *b.get(i)? {
        b'"' => {
            let (s, j) = plain_str(b, i)?;
            *out = Scalar::Str(Cow::Borrowed(s));
            Some(j)
        }
        b'-' | b'0'..=b'9' => number_into(b, i, out),
        _ => {
            *out = Scalar::None;
            literal(b, i)
        }
    }
}

/// `true`, `false` or `null` at `i`: the offset after it.
#[inline]
fn literal(b: &[u8], i: usize) -> Option<usize> {
    let rest = &b[i..];
    if rest.starts_with(b"true") || rest.starts_with(b"null") {
        Some(i + 4)
    } else if rest.starts_with(b"false") {
        Some(i + 5)
    } else {
        None
    }
}

/// Skips any value at `i` as serde_json's `IgnoredAny` would accept it.
fn skip(b: &[u8], i: usize, depth: u32) -> Option<usize> {
    match *b.get(i)? {
        b'"' => skip_str(b, i),
        b'{' => {
            if depth >= MAX_DEPTH {
                return None;
            }
            let mut j = ws(b, i + 1);
            if b.get(j) == Some(&b'}') {
                return Some(j + 1);
            }
            loop {
                if b.get(j) != Some(&b'"') {
                    return None;
                }
                j = ws(b, skip_str(b, j)?);
                if b.get(j) != Some(&b':') {
                    return None;
                }
                j = ws(b, skip(b, ws(b, j + 1), depth + 1)?);
                match *b.get(j)? {
                    b',' => j = ws(b, j + 1),
                    b'}' => return Some(j + 1),
                    _ => return None,
                }
            }
        }
        b'[' => {
            if depth >= MAX_DEPTH {
                return None;
            }
            let mut j = ws(b, i + 1);
            if b.get(j) == Some(&b']') {
                return Some(j + 1);
            }
            loop {
                j = ws(b, skip(b, j, depth + 1)?);
                match *b.get(j)? {
                    b',' => j = ws(b, j + 1),
                    b']' => return Some(j + 1),
                    _ => return None,
                }
            }
        }
        b'-' | b'0'..=b'9' => skip_number(b, i),
        _ => literal(b, i),
    }
}

/// Skips a number at `i` as serde_json's `ignore_value` accepts it (any length, exponents).
fn skip_number(b: &[u8], i: usize) -> Option<usize> {
    let digits = |mut j: usize| {
        while b.get(j).is_some_and(u8::is_ascii_digit) {
            j += 1;
        }
        j
    };
    let mut j = i + usize::from(b[i] == b'-');
    match *b.get(j)? {
        b'0' => {
            j += 1;
            if b.get(j).is_some_and(u8::is_ascii_digit) {
                return None;
            }
        }
        b'1'..=b'9' => j = digits(j + 1),
        _ => return None,
    }
    if b.get(j) == Some(&b'.') {
        let k = digits(j + 1);
        if k == j + 1 {
            return None;
        }
        j = k;
    }
    if matches!(b.get(j), Some(b'e' | b'E')) {
        j += 1;
        if matches!(b.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        let k = digits(j);
        if k == j {
            return None;
        }
        j = k;
    }
    Some(j)
}

/// Reads a list at `i` element by element with `each`; `None` where it is not a list.
#[inline]
fn list<'a>(
    b: &'a [u8],
    i: usize,
    mut each: impl FnMut(&'a [u8], usize) -> Option<usize>,
) -> Option<usize> {
    if b.get(i) != Some(&b'[') {
        return None;
    }
    let mut j = ws(b, i + 1);
    if b.get(j) == Some(&b']') {
        return Some(j + 1);
    }
    loop {
        j = ws(b, each(b, j)?);
        match *b.get(j)? {
            b',' => j = ws(b, j + 1),
            b']' => return Some(j + 1),
            _ => return None,
        }
    }
}

/// Reads an object at `i`, calling `field` with each key and the offset of its value; `field`
/// returns the offset after the value.
#[inline]
fn object<'a>(
    b: &'a [u8],
    i: usize,
    mut field: impl FnMut(&'a [u8], usize) -> Option<usize>,
) -> Option<usize> {
    if b.get(i) != Some(&b'{') {
        return None;
    }
    let mut j = ws(b, i + 1);
    if b.get(j) == Some(&b'}') {
        return Some(j + 1);
    }
    loop {
        if b.get(j) != Some(&b'"') {
            return None;
        }
        // Keys are compared as bytes: one with an escape or a non-ASCII byte goes to serde_json.
        let kstart = j + 1;
        let kend = find_special(b, kstart);
        if b.get(kend) != Some(&b'"') {
            return None;
        }
        j = ws(b, kend + 1);
        if b.get(j) != Some(&b':') {
            return None;
        }
        j = ws(b, field(&b[kstart..kend], ws(b, j + 1))?);
        match *b.get(j)? {
            b',' => j = ws(b, j + 1),
            b'}' => return Some(j + 1),
            _ => return None,
        }
    }
}

/// Sets a field once; a second occurrence is serde's "duplicate field" error, left to it.
#[inline]
fn set<'a>(
    seen: &mut u32,
    bit: u32,
    slot: &mut Scalar<'a>,
    b: &'a [u8],
    v: usize,
) -> Option<usize> {
    if *seen & (1 << bit) != 0 {
        return None;
    }
    *seen |= 1 << bit;
    scalar_into(b, v, slot)
}

/// Empties `a` in place, keeping its lists' room.
fn reset_args(a: &mut RawArgs<'_>) {
    for s in [
        &mut a.addr,
        &mut a.bytes,
        &mut a.total_allocated,
        &mut a.total_reserved,
        &mut a.device_type,
        &mut a.device_id,
        &mut a.sequence_number,
        &mut a.fwd_thread_id,
        &mut a.external_id,
        &mut a.python_id,
        &mut a.python_parent_id,
    ] {
        *s = Scalar::None;
    }
    a.input_type.0.clear();
    a.input_dims.0.clear();
}

/// Reads `args` at `i` into `a` (already empty).
fn args<'a>(b: &'a [u8], i: usize, a: &mut RawArgs<'a>) -> Option<usize> {
    let mut seen = 0u32;
    object(b, i, |key, v| {
        let (bit, slot) = match key {
            b"Addr" => (0, &mut a.addr),
            b"Bytes" => (1, &mut a.bytes),
            b"Total Allocated" => (2, &mut a.total_allocated),
            b"Total Reserved" => (3, &mut a.total_reserved),
            b"Device Type" => (4, &mut a.device_type),
            b"Device Id" => (5, &mut a.device_id),
            b"Sequence number" => (6, &mut a.sequence_number),
            b"Fwd thread id" => (7, &mut a.fwd_thread_id),
            b"External id" => (8, &mut a.external_id),
            b"Python id" => (9, &mut a.python_id),
            b"Python parent id" => (10, &mut a.python_parent_id),
            b"Input type" => {
                if seen & (1 << 11) != 0 {
                    return None;
                }
                seen |= 1 << 11;
                let items = &mut a.input_type.0;
                return list(b, v, |b, j| {
                    let mut s = Scalar::None;
                    let e = scalar_into(b, j, &mut s)?;
                    items.push(s);
                    Some(e)
                });
            }
            b"Input Dims" => {
                if seen & (1 << 12) != 0 {
                    return None;
                }
                seen |= 1 << 12;
                let ranks = &mut a.input_dims.0;
                return list(b, v, |b, j| {
                    let mut n = 0;
                    let e = list(b, j, |b, k| {
                        n += 1;
                        skip(b, k, 3)
                    })?;
                    ranks.push(Some(n));
                    Some(e)
                });
            }
            _ => return skip(b, v, 2),
        };
        set(&mut seen, bit, slot, b, v)
    })
}

/// Reads the element of `traceEvents` at `i` into `e` if it has the common shape (see the
/// module notes), returning the offset after it. `e.args` is always `Some` afterwards, empty
/// where the event has none (the same to [`super::classify`] as no `args`). On `None`, `e`
/// holds partial values and must not be used.
pub(super) fn event_into<'a>(b: &'a [u8], i: usize, e: &mut RawEvent<'a>) -> Option<usize> {
    for s in [
        &mut e.name,
        &mut e.ph,
        &mut e.cat,
        &mut e.ts,
        &mut e.dur,
        &mut e.tid,
        &mut e.id,
    ] {
        *s = Scalar::None;
    }
    let a = e.args.get_or_insert_with(Default::default);
    reset_args(a);
    let mut seen = 0u32;
    let RawEvent {
        name,
        ph,
        cat,
        ts,
        dur,
        tid,
        id,
        args: raw_args,
    } = e;
    let a = raw_args.as_deref_mut()?;
    object(b, i, |key, v| {
        let (bit, slot) = match key {
            b"name" => (0, &mut *name),
            b"ph" => (1, &mut *ph),
            b"cat" => (2, &mut *cat),
            b"ts" => (3, &mut *ts),
            b"dur" => (4, &mut *dur),
            b"tid" => (5, &mut *tid),
            b"id" => (6, &mut *id),
            b"args" => {
                if seen & (1 << 7) != 0 {
                    return None;
                }
                seen |= 1 << 7;
                if b[v..].starts_with(b"null") {
                    return Some(v + 4);
                }
                return args(b, v, a);
            }
            _ => return skip(b, v, 1),
        };
        set(&mut seen, bit, slot, b, v)
    })
}

/// [`event_into`] into a fresh event.
#[cfg(test)]
pub(super) fn event(b: &[u8], i: usize) -> Option<(RawEvent<'_>, usize)> {
    let mut e = RawEvent::default();
    let end = event_into(b, i, &mut e)?;
    Some((e, end))
}
