//! The bytes of the stdio transport: one message per line, read with a length cap, and the
//! raw text of a message's `id`.
//!
//! The client is untrusted (a model decides what it sends), so the reader never holds more
//! than [`MAX_LINE`] bytes of a line: the rest of an overlong line is read and dropped, and the
//! line is answered as a parse error, so the session goes on. Lines are bytes, not `String`s:
//! invalid UTF-8 is one bad message, not the end of the stream.
//!
//! An id is echoed exactly as the client wrote it: `serde_json` (without
//! `arbitrary_precision`) reads `18446744073709551617` as a float and would write it back as
//! `1.8446744073709552e19`, an id the client never sent. [`raw_id`] finds the id's own text in
//! the line instead.

use std::io::{self, BufRead};

/// The longest message read (16 MiB): a tool call is a few hundred bytes of paths and SQL.
pub const MAX_LINE: usize = 16 << 20;

/// One line of the stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// The line's bytes, without its `\n` (nor a `\r` before it).
    Bytes(Vec<u8>),
    /// A line longer than the cap: `len` bytes, all dropped.
    TooLong { len: u64 },
}

/// Reads the next line of `r` into memory up to `cap` bytes; `None` at the end of the stream.
pub fn read_line(r: &mut impl BufRead, cap: usize) -> io::Result<Option<Line>> {
    let mut buf = Vec::new();
    let mut len: u64 = 0;
    let mut seen = false;
    loop {
        let avail = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if avail.is_empty() {
            break;
        }
        seen = true;
        let (take, done) = match avail.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (avail.len(), false),
        };
        len += take as u64;
        if len <= cap as u64 {
            buf.extend_from_slice(&avail[..take]);
        } else if !buf.is_empty() {
            buf = Vec::new();
        }
        r.consume(take + usize::from(done));
        if done {
            break;
        }
    }
    if !seen {
        return Ok(None);
    }
    if len > cap as u64 {
        return Ok(Some(Line::TooLong { len }));
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    Ok(Some(Line::Bytes(buf)))
}

/// The text of the top-level `"id"` member of `text`, a JSON object that `serde_json` has
/// already read (so the scan may assume valid JSON). The last `id` wins, as in `serde_json`'s
/// map. `None` when there is none.
pub fn raw_id(text: &str) -> Option<&str> {
    let b = text.as_bytes();
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    let mut found = None;
    loop {
        i = skip_ws(b, i);
        match b.get(i)? {
            b'}' => return found,
            b',' => {
                i += 1;
                continue;
            }
            b'"' => {}
            _ => return found,
        }
        let key_end = skip_string(b, i)?;
        let key: Option<String> = serde_json::from_str(&text[i..key_end]).ok();
        i = skip_ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return found;
        }
        i = skip_ws(b, i + 1);
        let end = skip_value(b, i)?;
        if key.as_deref() == Some("id") {
            found = Some(&text[i..end]);
        }
        i = end;
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The index after the string starting at `i` (its opening quote).
fn skip_string(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    loop {
        match b.get(j)? {
            b'\\' => j += 2,
            b'"' => return Some(j + 1),
            _ => j += 1,
        }
    }
}

/// The index after the value starting at `i`: a string, a nested array or object (brackets
/// counted outside strings), or a scalar up to the next delimiter.
fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => skip_string(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                match b.get(j)? {
                    b'"' => {
                        j = skip_string(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            let mut j = i;
            while !matches!(
                b.get(j),
                None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
            ) {
                j += 1;
            }
            Some(j)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], cap: usize) -> Vec<Line> {
        let mut r = io::BufReader::with_capacity(4, input);
        std::iter::from_fn(|| read_line(&mut r, cap).unwrap()).collect()
    }

    #[test]
    fn an_overlong_line_is_dropped_and_the_next_one_read() {
        let got = lines(b"ab\r\n0123456789\nxyz", 5);
        assert_eq!(
            got,
            [
                Line::Bytes(b"ab".to_vec()),
                Line::TooLong { len: 10 },
                Line::Bytes(b"xyz".to_vec())
            ]
        );
        assert_eq!(lines(b"", 5), []);
        assert_eq!(
            lines(b"\n\xff\n", 5),
            [Line::Bytes(vec![]), Line::Bytes(vec![0xff])]
        );
    }

    #[test]
    fn the_id_is_its_own_text() {
        let t = r#"{"jsonrpc":"2.0","params":{"id":3,"s":"}\"id"},"id" : 18446744073709551617 ,"method":"ping"}"#;
        assert_eq!(raw_id(t), Some("18446744073709551617"));
        assert_eq!(
            raw_id(r#"{"id":"a\"b","id":[1,{"x":"]"}]}"#),
            Some(r#"[1,{"x":"]"}]"#)
        );
        assert_eq!(raw_id(r#"{"\u0069d":7}"#), Some("7"));
        assert_eq!(raw_id(r#"{"method":"x"}"#), None);
        assert_eq!(raw_id("[1]"), None);
    }
}
