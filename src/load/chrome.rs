//! Reading `prof.export_chrome_trace` output (Kineto's Chrome trace JSON) into a [`Trace`].
//!
//! Traces run to hundreds of megabytes, so nothing builds a generic JSON tree: a small scanner
//! finds the `traceEvents` array, and each element is read into a borrowed struct that names
//! only the fields memscope uses, by a hand-written reader for the common shape (`fast`) or,
//! for anything it declines, by serde. Large files are read on every core in stretches that
//! start at guessed element boundaries, checked, and applied in file order
//! (`parse_parallel`), so the result is the one-thread result exactly.
//!
//! Element-by-element reading is also what makes damaged files usable. A run killed while the
//! trace was written leaves a file without its closing brackets, often with a half-written last
//! event: everything before it is still good, so it is loaded with a note. Some profiler versions
//! write raw tabs and newlines inside names, which strict JSON forbids: the scanner sees them,
//! and such an element is read from a copy with those bytes blanked.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use super::pickle::MAX_TEXT;
use crate::model::trace::phases::{self, Phase};
use crate::model::trace::{DeviceKey, Tid, Trace, TraceBuilder};
use crate::model::LoadNote;

mod batch;
mod fast;

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("not a profiler Chrome trace: {what}")]
    NotATrace { what: String },
    #[error("malformed JSON at byte {offset}: expected {expected}, found {found}")]
    Syntax {
        offset: u64,
        expected: &'static str,
        found: String,
    },
    #[error("the file ends at byte {offset}, before any traceEvents array (cut off while being written?)")]
    TruncatedHeader { offset: u64 },
    #[error("none of the {count} entries of traceEvents is a readable event; the first, at byte {offset}: {source}")]
    NoEvents {
        count: u64,
        offset: u64,
        #[source]
        source: serde_json::Error,
    },
}

/// Why the scanner stopped before the end of a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// The input ended inside the value.
    Eof,
    /// An unexpected byte at this offset.
    Bad(usize),
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// `i` is at `"`; returns the offset after the closing quote. Raw control bytes inside the
/// string are not looked for here (they are rare: the parser's error sends the element to
/// [`has_raw_controls`]), so the scan is a `memchr` for the next quote or backslash.
fn scan_string(b: &[u8], mut i: usize) -> Result<(usize, bool), Stop> {
    i += 1;
    loop {
        match b
            .get(i..)
            .and_then(|rest| memchr::memchr2(b'"', b'\\', rest))
        {
            Some(k) => {
                let j = i + k;
                if b[j] == b'"' {
                    return Ok((j + 1, false));
                }
                i = j + 2;
            }
            None => return Err(Stop::Eof),
        }
    }
}

/// Whether a string inside `elem` holds a raw control byte (which JSON forbids).
fn has_raw_controls(elem: &[u8]) -> bool {
    let mut in_str = false;
    let mut i = 0;
    while i < elem.len() {
        let c = elem[i];
        if in_str {
            match c {
                b'\\' => i += 1,
                b'"' => in_str = false,
                c if c < 0x20 => return true,
                _ => {}
            }
        } else if c == b'"' {
            in_str = true;
        }
        i += 1;
    }
    false
}

/// Finds the end of the JSON value starting at `i` (not validating it: serde does that). Nesting
/// is tracked with a counter, so deep input cannot overflow the stack.
fn scan_value(b: &[u8], i: usize) -> Result<(usize, bool), Stop> {
    let Some(&c) = b.get(i) else {
        return Err(Stop::Eof);
    };
    match c {
        b'"' => scan_string(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut ctrl = false;
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'"' => {
                        let (e, c) = scan_string(b, j)?;
                        ctrl |= c;
                        j = e;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Ok((j + 1, ctrl));
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            Err(Stop::Eof)
        }
        b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => {
            let mut j = i;
            while j < b.len() && !matches!(b[j], b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r')
            {
                j += 1;
            }
            if j == b.len() {
                // A scalar running into the end of the file may itself be cut short.
                return Err(Stop::Eof);
            }
            Ok((j, false))
        }
        _ => Err(Stop::Bad(i)),
    }
}

fn shown(b: &[u8], i: usize) -> String {
    match b.get(i) {
        None => "the end of the file".into(),
        Some(_) => {
            let end = (i + 24).min(b.len());
            format!("{:?}", String::from_utf8_lossy(&b[i..end]))
        }
    }
}

fn syntax(b: &[u8], i: usize, expected: &'static str) -> TraceError {
    TraceError::Syntax {
        offset: i as u64,
        expected,
        found: shown(b, i),
    }
}

/// Where the events are: the offset of the `[` that opens them.
fn locate_events(b: &[u8]) -> Result<usize, TraceError> {
    let i = skip_ws(b, 0);
    match b.get(i) {
        Some(b'[') => {
            // Chrome's "JSON array format": the events themselves. Refuse a list of lists
            // (the profiler's memory timeline) or of numbers.
            let j = skip_ws(b, i + 1);
            match b.get(j) {
                Some(b'{') | Some(b']') | None => Ok(i),
                Some(b'[') => Err(TraceError::NotATrace {
                    what: "a JSON list of lists, the shape of a memory-timeline export \
                           (prof.export_memory_timeline); a Chrome trace is an object with \
                           traceEvents (prof.export_chrome_trace)"
                        .into(),
                }),
                Some(_) => Err(TraceError::NotATrace {
                    what: format!(
                        "a JSON list whose first entry, at byte {j}, is not an object ({})",
                        shown(b, j)
                    ),
                }),
            }
        }
        Some(b'{') => locate_in_object(b, i),
        _ => Err(TraceError::NotATrace {
            what: format!("the file does not start with JSON: {}", shown(b, i)),
        }),
    }
}

fn locate_in_object(b: &[u8], open: usize) -> Result<usize, TraceError> {
    let mut keys: Vec<String> = Vec::new();
    let mut i = skip_ws(b, open + 1);
    if b.get(i) == Some(&b'}') {
        return Err(not_a_trace(&keys));
    }
    loop {
        match b.get(i) {
            Some(b'"') => {}
            None => return Err(TraceError::TruncatedHeader { offset: i as u64 }),
            Some(_) => return Err(syntax(b, i, "a key string")),
        }
        let (kend, _) = scan_string(b, i).map_err(|s| stop_in_header(b, s))?;
        let key = &b[i + 1..kend - 1];
        i = skip_ws(b, kend);
        match b.get(i) {
            Some(b':') => {}
            None => return Err(TraceError::TruncatedHeader { offset: i as u64 }),
            Some(_) => return Err(syntax(b, i, "':' after a key")),
        }
        i = skip_ws(b, i + 1);
        if key == b"traceEvents" {
            return match b.get(i) {
                Some(b'[') => Ok(i),
                None => Err(TraceError::TruncatedHeader { offset: i as u64 }),
                Some(_) => Err(syntax(b, i, "an array for traceEvents")),
            };
        }
        if keys.len() < 12 {
            keys.push(String::from_utf8_lossy(key).into_owned());
        }
        let (vend, _) = scan_value(b, i).map_err(|s| stop_in_header(b, s))?;
        i = skip_ws(b, vend);
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            Some(b'}') => return Err(not_a_trace(&keys)),
            None => return Err(TraceError::TruncatedHeader { offset: i as u64 }),
            Some(_) => return Err(syntax(b, i, "',' or '}' after a value")),
        }
    }
}

fn stop_in_header(b: &[u8], s: Stop) -> TraceError {
    match s {
        Stop::Eof => TraceError::TruncatedHeader {
            offset: b.len() as u64,
        },
        Stop::Bad(i) => syntax(b, i, "a JSON value"),
    }
}

fn not_a_trace(keys: &[String]) -> TraceError {
    let has = |k: &str| keys.iter().any(|x| x == k);
    let what = if has("nodes") && (has("schema") || has("pid")) {
        "this is a PyTorch execution trace (ExecutionTraceObserver output: top-level `schema` and \
         `nodes`), a different format; memscope reads the Chrome trace written by \
         prof.export_chrome_trace() or tensorboard_trace_handler"
            .to_owned()
    } else if has("segments") || has("device_traces") {
        "this looks like a memory snapshot converted to JSON; memscope reads snapshots as the \
         pickle from torch.cuda.memory._dump_snapshot"
            .to_owned()
    } else {
        format!(
            "a JSON object without a traceEvents array (its keys: {})",
            if keys.is_empty() {
                "none".to_owned()
            } else {
                keys.join(", ")
            }
        )
    };
    TraceError::NotATrace { what }
}

/// A JSON scalar as the trace happens to write it: `tid` is a number or a string, `id` a number
/// or a string, `ts` an integer or a float depending on the Kineto version. Containers and
/// booleans read as `None` instead of failing the whole event.
#[derive(Debug, Clone, Default, PartialEq)]
enum Scalar<'a> {
    #[default]
    None,
    Int(i128),
    Float(f64),
    Str(Cow<'a, str>),
}

impl Scalar<'_> {
    fn as_f64(&self) -> Option<f64> {
        match self {
            Scalar::Int(i) => Some(*i as f64),
            Scalar::Float(f) if f.is_finite() => Some(*f),
            Scalar::Str(s) => s.trim().parse::<f64>().ok().filter(|f| f.is_finite()),
            _ => None,
        }
    }
    fn as_i128(&self) -> Option<i128> {
        match self {
            Scalar::Int(i) => Some(*i),
            Scalar::Float(f) if f.is_finite() && f.fract() == 0.0 => Some(*f as i128),
            Scalar::Str(s) => {
                let s = s.trim();
                match s.strip_prefix("0x") {
                    Some(h) => i128::from_str_radix(h, 16).ok(),
                    None => s.parse::<i128>().ok(),
                }
            }
            _ => None,
        }
    }
    fn as_i64(&self) -> Option<i64> {
        self.as_i128().and_then(|i| i64::try_from(i).ok())
    }
    fn as_u64(&self) -> Option<u64> {
        self.as_i128().and_then(|i| u64::try_from(i).ok())
    }
    fn as_str(&self) -> Option<&str> {
        match self {
            Scalar::Str(s) => Some(s),
            _ => None,
        }
    }
    fn into_owned(self) -> Scalar<'static> {
        match self {
            Scalar::None => Scalar::None,
            Scalar::Int(i) => Scalar::Int(i),
            Scalar::Float(f) => Scalar::Float(f),
            Scalar::Str(s) => Scalar::Str(Cow::Owned(s.into_owned())),
        }
    }
}

struct ScalarVisitor<'a>(std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for ScalarVisitor<'a> {
    type Value = Scalar<'a>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON scalar")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Scalar::None)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Scalar::Int(v.into()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Scalar::Int(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Scalar::Float(v))
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Owned(v)))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Scalar::None)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Scalar::None)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(ScalarVisitor(std::marker::PhantomData))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Scalar::None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Scalar::None)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Scalar<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ScalarVisitor(std::marker::PhantomData))
    }
}

/// A JSON list read leniently: anything but a list reads as empty, elements as [`Scalar`]s.
#[derive(Debug, Default)]
struct List<'a>(Vec<Scalar<'a>>);

/// `Input Dims`, kept as the rank of each input (`None` where an entry is not a list).
#[derive(Debug, Default)]
struct Ranks(Vec<Option<usize>>);

struct ListVisitor<'a>(std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for ListVisitor<'a> {
    type Value = List<'a>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON list")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut v = Vec::new();
        while let Some(x) = seq.next_element::<Scalar<'a>>()? {
            v.push(x);
        }
        Ok(List(v))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(List(Vec::new()))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(List(Vec::new()))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(List(Vec::new()))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(List(Vec::new()))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(List(Vec::new()))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(List(Vec::new()))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(List(Vec::new()))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for List<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ListVisitor(std::marker::PhantomData))
    }
}

/// One entry of `Input Dims`: its length if it is a list.
struct Rank(Option<usize>);

impl<'de> Deserialize<'de> for Rank {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Rank;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of sizes")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Rank, A::Error> {
                let mut n = 0;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(Rank(Some(n)))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Rank, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Rank(None))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Rank, E> {
                Ok(Rank(None))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Rank, E> {
                Ok(Rank(None))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Rank, E> {
                Ok(Rank(None))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Rank, E> {
                Ok(Rank(None))
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Rank, E> {
                Ok(Rank(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Rank, E> {
                Ok(Rank(None))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Ranks {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Ranks;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of shapes")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Ranks, A::Error> {
                let mut v = Vec::new();
                while let Some(Rank(r)) = seq.next_element::<Rank>()? {
                    v.push(r);
                }
                Ok(Ranks(v))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ranks, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Ranks(Vec::new()))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Ranks, E> {
                Ok(Ranks(Vec::new()))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Ranks, E> {
                Ok(Ranks(Vec::new()))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Ranks, E> {
                Ok(Ranks(Vec::new()))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Ranks, E> {
                Ok(Ranks(Vec::new()))
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Ranks, E> {
                Ok(Ranks(Vec::new()))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Ranks, E> {
                Ok(Ranks(Vec::new()))
            }
        }
        d.deserialize_any(V)
    }
}

/// Whether every tensor input of an op is 0-dim (`Some(true)`), some is not or is a tensor
/// list (`Some(false)`), or the trace has no shapes (`None`, `record_shapes=False`).
fn scalar_inputs(types: &List<'_>, ranks: &Ranks) -> Option<bool> {
    if types.0.is_empty() || types.0.len() != ranks.0.len() {
        return None;
    }
    let mut tensors = 0;
    for (ty, rank) in types.0.iter().zip(&ranks.0) {
        let ty = ty.as_str().unwrap_or("");
        match ty {
            "" | "Scalar" | "ScalarList" | "GenericList" | "None" => continue,
            "TensorList" => return Some(false),
            _ => {}
        }
        tensors += 1;
        match rank {
            Some(0) => {}
            Some(_) => return Some(false),
            None => return None,
        }
    }
    (tensors > 0).then_some(true)
}

/// The `args` keys memscope uses; everything else (input shapes, kernel launch figures) is skipped.
#[derive(Debug, Default, Deserialize)]
struct RawArgs<'a> {
    #[serde(borrow, default, rename = "Addr")]
    addr: Scalar<'a>,
    #[serde(borrow, default, rename = "Bytes")]
    bytes: Scalar<'a>,
    #[serde(borrow, default, rename = "Total Allocated")]
    total_allocated: Scalar<'a>,
    #[serde(borrow, default, rename = "Total Reserved")]
    total_reserved: Scalar<'a>,
    #[serde(borrow, default, rename = "Device Type")]
    device_type: Scalar<'a>,
    #[serde(borrow, default, rename = "Device Id")]
    device_id: Scalar<'a>,
    #[serde(borrow, default, rename = "Sequence number")]
    sequence_number: Scalar<'a>,
    #[serde(borrow, default, rename = "Fwd thread id")]
    fwd_thread_id: Scalar<'a>,
    #[serde(borrow, default, rename = "External id")]
    external_id: Scalar<'a>,
    #[serde(borrow, default, rename = "Python id")]
    python_id: Scalar<'a>,
    #[serde(borrow, default, rename = "Python parent id")]
    python_parent_id: Scalar<'a>,
    #[serde(borrow, default, rename = "Input type")]
    input_type: List<'a>,
    #[serde(default, rename = "Input Dims")]
    input_dims: Ranks,
}

/// One element of `traceEvents`, borrowed from the input where it has no escapes.
#[derive(Debug, Default, Deserialize)]
struct RawEvent<'a> {
    #[serde(borrow, default)]
    name: Scalar<'a>,
    #[serde(borrow, default)]
    ph: Scalar<'a>,
    #[serde(borrow, default)]
    cat: Scalar<'a>,
    #[serde(borrow, default)]
    ts: Scalar<'a>,
    #[serde(borrow, default)]
    dur: Scalar<'a>,
    #[serde(borrow, default)]
    tid: Scalar<'a>,
    #[serde(borrow, default)]
    id: Scalar<'a>,
    #[serde(borrow, default)]
    args: Option<Box<RawArgs<'a>>>,
}

/// What one event contributes to the trace, decided without the builder so that events can be
/// read on several threads and applied in file order on one (thread names are interned when
/// applied, so ids come out the same as reading in order).
#[derive(Debug)]
enum Rec<'a> {
    Op {
        name: Cow<'a, str>,
        ts: f64,
        dur: f64,
        tid: Scalar<'a>,
        seq: Option<i64>,
        fwd_tid: Option<i64>,
        external_id: Option<i64>,
        scalar_inputs: Option<bool>,
    },
    /// A `user_annotation`: a step or another range.
    User {
        name: Cow<'a, str>,
        ts: f64,
        dur: f64,
        tid: Scalar<'a>,
    },
    GpuStepDuplicate,
    Python {
        name: Cow<'a, str>,
        ts: f64,
        dur: f64,
        tid: Scalar<'a>,
        python_id: Option<i64>,
        parent_id: Option<i64>,
    },
    Memory {
        ts: f64,
        tid: Scalar<'a>,
        addr: u64,
        bytes: i64,
        total_allocated: Option<i64>,
        total_reserved: Option<i64>,
        device: DeviceKey,
    },
    Flow {
        id: i64,
        start: bool,
        tid: Scalar<'a>,
        ts: f64,
    },
}

impl Rec<'_> {
    /// The record with its own copies of its strings (for an event read from a repaired copy
    /// of its bytes, which does not outlive the read).
    fn into_owned(self) -> Rec<'static> {
        let own = |c: Cow<'_, str>| Cow::Owned(c.into_owned());
        match self {
            Rec::Op {
                name,
                ts,
                dur,
                tid,
                seq,
                fwd_tid,
                external_id,
                scalar_inputs,
            } => Rec::Op {
                name: own(name),
                ts,
                dur,
                tid: tid.into_owned(),
                seq,
                fwd_tid,
                external_id,
                scalar_inputs,
            },
            Rec::User { name, ts, dur, tid } => Rec::User {
                name: own(name),
                ts,
                dur,
                tid: tid.into_owned(),
            },
            Rec::GpuStepDuplicate => Rec::GpuStepDuplicate,
            Rec::Python {
                name,
                ts,
                dur,
                tid,
                python_id,
                parent_id,
            } => Rec::Python {
                name: own(name),
                ts,
                dur,
                tid: tid.into_owned(),
                python_id,
                parent_id,
            },
            Rec::Memory {
                ts,
                tid,
                addr,
                bytes,
                total_allocated,
                total_reserved,
                device,
            } => Rec::Memory {
                ts,
                tid: tid.into_owned(),
                addr,
                bytes,
                total_allocated,
                total_reserved,
                device,
            },
            Rec::Flow { id, start, tid, ts } => Rec::Flow {
                id,
                start,
                tid: tid.into_owned(),
                ts,
            },
        }
    }
}

/// A string field as the model keeps it: cut to [`MAX_TEXT`] bytes (marked with `…`), so a
/// hostile gigabyte name costs no gigabyte copy into the model (an allocation that would abort
/// under a tight address-space limit). Real op, function and thread names are far shorter.
fn scalar_str<'a>(s: &Scalar<'a>) -> Cow<'a, str> {
    match s {
        Scalar::Str(s) => bounded(s),
        _ => Cow::Borrowed(""),
    }
}

fn bounded<'a>(s: &Cow<'a, str>) -> Cow<'a, str> {
    if s.len() <= MAX_TEXT {
        return s.clone();
    }
    let mut end = MAX_TEXT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let mut cut = String::with_capacity(end + 3);
    cut.push_str(&s[..end]);
    cut.push('…');
    Cow::Owned(cut)
}

/// Keeps what the analyses use from one event.
fn classify<'a>(e: &RawEvent<'a>) -> Option<Rec<'a>> {
    let ts = e.ts.as_f64()?;
    let dur = e.dur.as_f64().unwrap_or(0.0);
    let ph = e.ph.as_str().unwrap_or("");
    let cat = e.cat.as_str().unwrap_or("");
    let name = e.name.as_str().unwrap_or("");
    let empty = RawArgs::default();
    let args = e.args.as_deref().unwrap_or(&empty);
    match ph {
        "X" => {
            // A step span is a step whatever its category: torch 1.9 wrote `ProfilerStep#N` as
            // an `Operator`, later versions as a `user_annotation`.
            if name.starts_with("ProfilerStep#") && cat != "gpu_user_annotation" {
                Some(Rec::User {
                    name: scalar_str(&e.name),
                    ts,
                    dur,
                    tid: e.tid.clone(),
                })
            } else if cat.eq_ignore_ascii_case("cpu_op") || cat.eq_ignore_ascii_case("operator") {
                Some(Rec::Op {
                    seq: args.sequence_number.as_i64(),
                    fwd_tid: args.fwd_thread_id.as_i64(),
                    external_id: args.external_id.as_i64(),
                    scalar_inputs: scalar_inputs(&args.input_type, &args.input_dims),
                    name: scalar_str(&e.name),
                    ts,
                    dur,
                    tid: e.tid.clone(),
                })
            } else if cat == "user_annotation" {
                Some(Rec::User {
                    name: scalar_str(&e.name),
                    ts,
                    dur,
                    tid: e.tid.clone(),
                })
            } else if cat == "gpu_user_annotation" {
                name.starts_with("ProfilerStep#")
                    .then_some(Rec::GpuStepDuplicate)
            } else if cat == "python_function" {
                Some(Rec::Python {
                    python_id: args.python_id.as_i64(),
                    parent_id: args.python_parent_id.as_i64(),
                    name: scalar_str(&e.name),
                    ts,
                    dur,
                    tid: e.tid.clone(),
                })
            } else {
                None
            }
        }
        "i" | "I" if name == "[memory]" => {
            let bytes = args.bytes.as_i64()?;
            // torch 1.9 recorded no `Addr`: the event still counts toward the totals.
            let addr = args.addr.as_u64().unwrap_or(crate::model::trace::NO_ADDR);
            Some(Rec::Memory {
                ts,
                addr,
                bytes,
                total_allocated: args.total_allocated.as_i64(),
                total_reserved: args.total_reserved.as_i64(),
                device: DeviceKey {
                    device_type: args.device_type.as_i64().unwrap_or(-1),
                    device_id: args.device_id.as_i64().unwrap_or(0),
                },
                tid: e.tid.clone(),
            })
        }
        "s" | "f" if cat == "fwdbwd" => e.id.as_i64().map(|id| Rec::Flow {
            id,
            start: ph == "s",
            tid: e.tid.clone(),
            ts,
        }),
        _ => None,
    }
}

/// Adds a `user_annotation`: a step where it is named `ProfilerStep#N`, else an annotation.
fn apply_user(b: &mut TraceBuilder, name: &str, ts: f64, dur: f64, tid: Tid) {
    match name
        .strip_prefix("ProfilerStep#")
        .map(|n| n.trim().parse::<u64>())
    {
        Some(Ok(n)) => b.add_step(n, name, ts, dur, tid),
        _ => b.add_annotation(name, ts, dur, tid),
    }
}

/// Blanks raw control bytes inside strings, the one defect some profiler versions write.
fn blank_controls(elem: &[u8]) -> Vec<u8> {
    let mut out = elem.to_vec();
    let mut in_str = false;
    let mut i = 0;
    while i < out.len() {
        let c = out[i];
        if in_str {
            match c {
                b'\\' => i += 1,
                b'"' => in_str = false,
                c if c < 0x20 => out[i] = b' ',
                _ => {}
            }
        } else if c == b'"' {
            in_str = true;
        }
        i += 1;
    }
    out
}

/// `elem` with every lone UTF-16 surrogate escape (`\ud800` not followed by a low half, or a
/// low half alone) written as `\ufffd`; `None` when it holds none. JSON allows such escapes,
/// UTF-8 text cannot hold them, so the parser refuses the event: repaired, the event (an op a
/// rule counts) is kept.
fn replace_lone_surrogates(elem: &[u8]) -> Option<Vec<u8>> {
    let hex = |i: usize| -> Option<u32> {
        let h = elem.get(i..i + 4)?;
        u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()
    };
    let esc_at = |i: usize| elem.get(i) == Some(&b'\\') && elem.get(i + 1) == Some(&b'u');
    let mut out: Option<Vec<u8>> = None;
    let (mut i, mut copied) = (0, 0);
    while i < elem.len() {
        if elem[i] != b'\\' {
            i += 1;
            continue;
        }
        if !esc_at(i) {
            i += 2;
            continue;
        }
        let Some(v) = hex(i + 2) else {
            i += 2;
            continue;
        };
        let paired = (0xd800..0xdc00).contains(&v)
            && esc_at(i + 6)
            && hex(i + 8).is_some_and(|w| (0xdc00..0xe000).contains(&w));
        if paired {
            i += 12;
        } else if (0xd800..0xe000).contains(&v) {
            let o = out.get_or_insert_with(Vec::new);
            o.extend_from_slice(&elem[copied..i]);
            o.extend_from_slice(b"\\ufffd");
            i += 6;
            copied = i;
        } else {
            i += 6;
        }
    }
    let mut o = out?;
    o.extend_from_slice(&elem[copied..]);
    Some(o)
}

/// Reads one element of `traceEvents` that starts at `start` with the parser alone, returning
/// the event and the offset after it; `None` for anything the careful path must handle.
fn parse_elem(bytes: &[u8], start: usize) -> Option<(RawEvent<'_>, usize)> {
    let mut stream = serde_json::Deserializer::from_slice(&bytes[start..]).into_iter::<RawEvent>();
    match stream.next() {
        Some(Ok(e)) => Some((e, start + stream.byte_offset())),
        _ => None,
    }
}

/// Events read by one worker from one stretch of `traceEvents`.
struct Run<'a> {
    batch: Box<batch::Batch<'a>>,
    /// Elements consumed (kept or not).
    events: u64,
    /// Offset of the first element not consumed.
    end: usize,
    /// Whether it stopped because it reached its stopping point (not at something unusual).
    reached: bool,
}

/// Reads the elements from `start` (which must be the start of an element) while they start
/// before `stop`, taking only the plain case: an element the parser reads, followed by a comma
/// and another element. Anything else (a cut-off or damaged element, the closing bracket) ends
/// the run there, and the careful sequential loop in [`parse`] takes over from `end`.
fn read_run<'a>(
    bytes: &'a [u8],
    start: usize,
    stop: usize,
    batch: Box<batch::Batch<'a>>,
) -> Run<'a> {
    let mut run = Run {
        batch,
        events: 0,
        end: start,
        reached: false,
    };
    let mut slot = RawEvent::default();
    let mut i = start;
    while i < stop {
        let Some((rec, end)) = read_elem(bytes, i, &mut slot) else {
            return run;
        };
        let j = skip_ws(bytes, end);
        if bytes.get(j) != Some(&b',') {
            return run;
        }
        let next = skip_ws(bytes, j + 1);
        if next >= bytes.len() || bytes[next] == b']' {
            return run;
        }
        run.events += 1;
        if let Some(r) = rec {
            run.batch.push(r);
        }
        i = next;
        run.end = i;
    }
    run.reached = true;
    run
}

/// Reads the element at `start` with the fast reader (into `slot`, reused from one event to
/// the next), else with serde_json; returns what it contributes and the offset after it.
/// `None` where neither can read it: the careful path's business.
#[inline]
fn read_elem<'a>(
    bytes: &'a [u8],
    start: usize,
    slot: &mut RawEvent<'a>,
) -> Option<(Option<Rec<'a>>, usize)> {
    if let Some(end) = fast::event_into(bytes, start, slot) {
        return Some((classify(slot), end));
    }
    let (e, end) = parse_elem(bytes, start)?;
    Some((classify(&e), end))
}

/// Where to split `traceEvents` for the workers: about every `chunk` bytes, at a guessed
/// element start, a `{` after a comma. A guess can be wrong (inside a string or inside an
/// event's `args`); [`parse_parallel`] checks each one.
fn split_points(bytes: &[u8], first: usize, chunk: usize) -> Vec<usize> {
    let mut points = vec![first];
    let mut p = first.saturating_add(chunk);
    while p < bytes.len() {
        let Some(k) = memchr::memchr(b',', &bytes[p..]) else {
            break;
        };
        let q = skip_ws(bytes, p + k + 1);
        if bytes.get(q) == Some(&b'{') {
            points.push(q);
            p = q.saturating_add(chunk);
        } else {
            p = q.max(p + k + 1);
        }
    }
    points
}

/// Files smaller than this are read on one thread.
const PARALLEL_MIN_BYTES: usize = 16 << 20;
/// Bytes of `traceEvents` per work item.
const CHUNK_BYTES: usize = 4 << 20;

thread_local! {
    static SINGLE_THREADED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with trace parsing kept on the calling thread (for callers that already load
/// several files at once, one per core).
pub fn single_threaded<R>(f: impl FnOnce() -> R) -> R {
    let was = SINGLE_THREADED.with(|c| c.replace(true));
    let r = f();
    SINGLE_THREADED.with(|c| c.set(was));
    r
}

/// The readers of a file of `len` bytes: one under [`PARALLEL_MIN_BYTES`] or inside
/// [`single_threaded`], else what `MEMSCOPE_THREADS` asks ([`crate::threads::wanted`]: by
/// default every core, at most 16).
fn parse_threads(len: usize) -> usize {
    if len < PARALLEL_MIN_BYTES || SINGLE_THREADED.with(|c| c.get()) {
        return 1;
    }
    crate::threads::wanted()
}

/// Reads the plain run of `traceEvents` from `first` on `threads` threads, applying the events
/// to `b` in file order; returns the offset of the first element not read, from where the
/// sequential loop goes on (at the closing bracket, or at anything unusual).
///
/// Each worker reads a stretch from a guessed element start. The stretches are applied in
/// order, and a stretch is used only if the one before it ended exactly at its start: parsing
/// from a true element start is deterministic, so that makes its start a true one too. A
/// stretch after a wrong guess is re-read on this thread from where the previous one ended.
fn parse_parallel(
    bytes: &[u8],
    first: usize,
    threads: usize,
    chunk: usize,
    b: &mut TraceBuilder,
) -> usize {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let points = split_points(bytes, first, chunk);
    let n = points.len();
    let stop_of = |k: usize| points.get(k + 1).copied().unwrap_or(bytes.len());
    let next = AtomicUsize::new(0);
    let cancel = AtomicBool::new(false);
    // Applied batches go back to the workers, so that their memory is not given back to
    // the system and faulted in again for every stretch.
    let spare: std::sync::Mutex<Vec<Box<batch::Batch<'_>>>> = std::sync::Mutex::new(Vec::new());
    let spares = batch::Spares::default();
    let take_spare = || {
        let mut b: Box<batch::Batch<'_>> = spare
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_default();
        b.refill(&spares);
        b
    };
    // Workers stay within `window` stretches of the one being applied, so that read but not
    // yet applied records never pile up (this thread applies more slowly than many workers read).
    let window = 2 * threads + 2;
    let applied = std::sync::Mutex::new(0usize);
    let turn = std::sync::Condvar::new();
    let lock = || applied.lock().unwrap_or_else(|e| e.into_inner());
    let set_applied = |k: usize, stop: bool| {
        let mut a = lock();
        *a = k;
        if stop {
            cancel.store(true, Ordering::Relaxed);
        }
        turn.notify_all();
    };
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::channel::<(usize, Run<'_>)>();
        for _ in 0..threads {
            let tx = tx.clone();
            let (next, cancel, points, take_spare) = (&next, &cancel, &points, &take_spare);
            let (lock, turn) = (&lock, &turn);
            // A worker that cannot start is no loss: the others, or this thread below, read
            // its stretches.
            let _ = std::thread::Builder::new().spawn_scoped(scope, move || loop {
                if cancel.load(Ordering::Relaxed) {
                    break;
                }
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= n {
                    break;
                }
                let mut a = lock();
                while k >= *a + window && !cancel.load(Ordering::Relaxed) {
                    a = turn.wait(a).unwrap_or_else(|e| e.into_inner());
                }
                drop(a);
                if cancel.load(Ordering::Relaxed) {
                    break;
                }
                let run = read_run(bytes, points[k], stop_of(k), take_spare());
                if tx.send((k, run)).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        // The records go to the trace's three lists, each filled on a thread of its own.
        let mut sinks = batch::Sinks::new(scope, &spares, threads + 2, true);
        let mut pending: Vec<Option<Run<'_>>> = (0..n).map(|_| None).collect();
        let mut pos = first;
        // Where this thread's time goes (`MEMSCOPE_PHASES=1`): waiting for the readers, or
        // applying their records.
        let timed = phases::on();
        let (mut waited, mut applying) = (0f64, 0f64);
        for k in 0..n {
            let run = loop {
                if let Some(r) = pending[k].take() {
                    break r;
                }
                let t0 = timed.then(std::time::Instant::now);
                let got = rx.recv();
                if let Some(t0) = t0 {
                    waited += t0.elapsed().as_secs_f64();
                }
                match got {
                    Ok((j, r)) => pending[j] = Some(r),
                    // Every worker has stopped and none read stretch k (none could start, or
                    // the last ones were cancelled): read it here.
                    Err(_) => break read_run(bytes, points[k], stop_of(k), take_spare()),
                }
            };
            let run = if points[k] == pos {
                run
            } else if pos < stop_of(k) {
                // The guess was wrong: the previous stretch ran past it.
                drop(run);
                read_run(bytes, pos, stop_of(k), take_spare())
            } else {
                // The previous stretch ran over this whole one too.
                set_applied(k + 1, false);
                continue;
            };
            b.counts_mut().events += run.events;
            let mut batch = run.batch;
            let t0 = timed.then(std::time::Instant::now);
            batch.apply(b, &mut sinks);
            if let Some(t0) = t0 {
                applying += t0.elapsed().as_secs_f64();
            }
            spare.lock().unwrap_or_else(|e| e.into_inner()).push(batch);
            pos = run.end;
            if !run.reached {
                break;
            }
            set_applied(k + 1, false);
        }
        set_applied(n, true);
        phases::record("read.wait", waited);
        phases::record("read.apply", applying);
        let p = Phase::start("read.sinks");
        sinks.finish(b);
        p.end();
        // Dropping the receiver lets workers still sending finish.
        drop(rx);
        pos
    })
}

/// Parses a Chrome trace held in memory, on several threads when it is large.
pub fn parse(bytes: &[u8]) -> Result<Trace, TraceError> {
    let build = if SINGLE_THREADED.with(|c| c.get()) {
        1
    } else {
        crate::threads::wanted()
    };
    parse_inner(bytes, parse_threads(bytes.len()), CHUNK_BYTES, build)
}

/// Parses a Chrome trace held in memory with `threads` workers, and builds it on as many
/// (1: on the calling thread only). The result does not depend on `threads`.
pub fn parse_with_threads(bytes: &[u8], threads: usize) -> Result<Trace, TraceError> {
    parse_inner(bytes, threads, CHUNK_BYTES, threads)
}

/// [`parse_with_threads`] with a chosen work-item size (small ones test the splitting).
#[doc(hidden)]
pub fn parse_with_chunks(bytes: &[u8], threads: usize, chunk: usize) -> Result<Trace, TraceError> {
    parse_inner(bytes, threads, chunk, threads)
}

/// Reads `traceEvents` on `threads` workers (in `chunk`-byte stretches), then builds the trace
/// on `build_threads`.
fn parse_inner(
    bytes: &[u8],
    threads: usize,
    chunk: usize,
    build_threads: usize,
) -> Result<Trace, TraceError> {
    let open = locate_events(bytes)?;
    let mut b = TraceBuilder::new();
    let mut first_failure: Option<(u64, serde_json::Error)> = None;
    let mut i = skip_ws(bytes, open + 1);
    let mut closed = false;
    if bytes.get(i) == Some(&b']') {
        closed = true;
    }
    if !closed && threads > 1 {
        let _p = Phase::start("read");
        i = parse_parallel(bytes, i, threads, chunk, &mut b);
    }
    let serial = Phase::start("read.serial");
    let mut slot = RawEvent::default();
    // The records read here go through the same conversion as the parallel readers' (one
    // batch, applied once after the loop: records of each kind keep their file order and
    // names are interned in the order of first use, as record by record).
    let mut batch = Box::<batch::Batch<'_>>::default();
    while !closed {
        if i >= bytes.len() {
            b.set_truncated(bytes.len());
            let n = b.counts_mut().events;
            b.note(LoadNote::TraceUnclosed {
                at_byte: i,
                events: n,
            });
            break;
        }
        let start = i;
        // Fast path: parse the event in place and take its end from the parser. Anything it
        // cannot read (a cut-off event, raw control characters, an invalid element) goes
        // through the scanner below, which finds the element's end without the parser.
        let end = if let Some((rec, end)) = read_elem(bytes, start, &mut slot) {
            b.counts_mut().events += 1;
            if let Some(r) = rec {
                batch.push(r);
            }
            end
        } else {
            let (end, ctrl) = match scan_value(bytes, start) {
                Ok(r) => r,
                Err(Stop::Eof) => {
                    b.set_truncated(bytes.len());
                    let n = b.counts_mut().events;
                    b.note(LoadNote::CutInsideEvent {
                        at_byte: start,
                        events: n,
                    });
                    break;
                }
                Err(Stop::Bad(at)) => return Err(syntax(bytes, at, "an event object")),
            };
            b.counts_mut().events += 1;
            let elem = &bytes[start..end];
            let parsed = match serde_json::from_slice::<RawEvent>(elem) {
                Ok(e) => {
                    if let Some(r) = classify(&e) {
                        batch.push(r);
                    }
                    Ok(())
                }
                Err(first) => {
                    // Repairs that keep the event (and so every rule's input): raw control
                    // characters blanked, lone surrogate escapes read as U+FFFD.
                    let mut fixed = None;
                    if ctrl || has_raw_controls(elem) {
                        b.counts_mut().repaired += 1;
                        fixed = Some(blank_controls(elem));
                    }
                    if let Some(f) = replace_lone_surrogates(fixed.as_deref().unwrap_or(elem)) {
                        b.counts_mut().lone_surrogates += 1;
                        fixed = Some(f);
                    }
                    match fixed {
                        Some(f) => serde_json::from_slice::<RawEvent>(&f).map(|e| {
                            if let Some(r) = classify(&e) {
                                batch.push(r.into_owned());
                            }
                        }),
                        None => Err(first),
                    }
                }
            };
            if let Err(err) = parsed {
                b.counts_mut().skipped += 1;
                if first_failure.is_none() {
                    first_failure = Some((start as u64, err));
                }
            }
            end
        };
        i = skip_ws(bytes, end);
        match bytes.get(i) {
            Some(b',') => {
                i = skip_ws(bytes, i + 1);
                // Tolerate a trailing comma before the closing bracket.
                if bytes.get(i) == Some(&b']') {
                    closed = true;
                }
            }
            Some(b']') => closed = true,
            None => {}
            Some(_) => return Err(syntax(bytes, i, "',' or ']' after an event")),
        }
    }
    batch.apply_alone(&mut b);
    let counts = b.counts_mut();
    let (events, skipped, repaired) = (counts.events, counts.skipped, counts.repaired);
    if let Some((offset, source)) = first_failure {
        if skipped == events {
            return Err(TraceError::NoEvents {
                count: events,
                offset,
                source,
            });
        }
        b.note(LoadNote::InvalidEvents {
            skipped,
            events,
            first_at_byte: offset,
            error: source.to_string(),
        });
    }
    if repaired > 0 {
        b.note(LoadNote::RawControlCharacters { events: repaired });
    }
    let lone = b.counts_mut().lone_surrogates;
    if lone > 0 {
        b.note(LoadNote::LoneSurrogates { events: lone });
    }
    serial.end();
    Ok(b.build_on(build_threads))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        let fix =
            |s: &str| replace_lone_surrogates(s.as_bytes()).map(|v| String::from_utf8(v).unwrap());
        assert_eq!(fix(r#"{"name": "a\ud83d\ude00b"}"#), None, "a pair is text");
        assert_eq!(fix(r#"{"name": "\\ud800"}"#), None, "an escaped backslash");
        assert_eq!(
            fix(r#"{"name": "x\ud800y"}"#).as_deref(),
            Some(r#"{"name": "x\ufffdy"}"#)
        );
        assert_eq!(
            fix(r#"{"name": "\udc00\ud800"}"#).as_deref(),
            Some(r#"{"name": "\ufffd\ufffd"}"#)
        );
        assert_eq!(
            fix(r#"{"name": "\ud800\u0041"}"#).as_deref(),
            Some(r#"{"name": "\ufffd\u0041"}"#)
        );
    }

    const SMALL: &str = r#"{"schemaVersion": 1, "deviceProperties": [{"id": 0}],
      "traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "aten::add_", "pid": 1, "tid": 1, "ts": 10.5, "dur": 2,
       "args": {"Sequence number": 4, "Fwd thread id": 0, "External id": 7, "Input Dims": [[1,2]]}},
      {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1,
       "ts": 11, "args": {"Addr": 140187865859072, "Bytes": 512, "Total Allocated": 512,
       "Total Reserved": 2097152, "Device Type": 1, "Device Id": 0}},
      {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 1, "dur": 100},
      {"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": 1, "pid": 1, "tid": 1, "ts": 10.5}
      ],
      "traceName": "x"}"#;

    #[test]
    fn reads_small_trace() {
        let t = parse(SMALL.as_bytes()).unwrap();
        assert_eq!(t.counts.events, 4);
        assert_eq!(t.ops.len(), 1);
        assert_eq!(t.ops[0].seq, Some(4));
        assert_eq!(t.ops[0].scalar_inputs, None);
        assert_eq!(t.memory.len(), 1);
        assert_eq!(t.memory[0].addr, 140187865859072);
        assert!(t.memory[0].device.is_cuda());
        assert_eq!(t.memory[0].op, Some(crate::model::trace::OpIdx(0)));
        assert!(!t.truncated);
        assert!(t.load_notes.is_empty(), "{:?}", t.load_notes);
    }

    #[test]
    fn truncated_anywhere() {
        let closed = SMALL.rfind(']').unwrap();
        for cut in 0..SMALL.len() {
            let r = parse(&SMALL.as_bytes()[..cut]);
            if let Ok(t) = &r {
                assert!(t.truncated || cut > closed, "cut {cut}");
                assert!(t.counts.events <= 4);
            }
        }
        let cut = SMALL.find("{\"ph\": \"X\", \"cat\": \"Trace\"").unwrap() + 20;
        let t = parse(&SMALL.as_bytes()[..cut]).unwrap();
        assert!(t.truncated);
        assert_eq!(t.counts.events, 2);
        assert!(
            matches!(t.load_notes[0], LoadNote::CutInsideEvent { events: 2, .. }),
            "{:?}",
            t.load_notes
        );
    }

    #[test]
    fn control_characters_in_names() {
        let s = SMALL.replace("aten::add_", "aten::add_\twith\ttabs\n");
        assert!(serde_json::from_str::<serde_json::Value>(&s).is_err());
        let t = parse(s.as_bytes()).unwrap();
        assert_eq!(t.counts.repaired, 1);
        assert_eq!(
            t.op_name(crate::model::trace::OpIdx(0)),
            "aten::add_ with tabs "
        );
    }

    #[test]
    fn bare_array_and_wrong_kinds() {
        let t =
            parse(br#"[{"ph":"X","cat":"cpu_op","name":"a","tid":"7","ts":"3","dur":1}]"#).unwrap();
        assert_eq!(t.ops[0].tid, Tid(7));
        let e = parse(b"[[1, 2, 3], [4]]").unwrap_err().to_string();
        assert!(e.contains("memory-timeline"), "{e}");
        let e = parse(br#"{"schema": "1.0.1", "pid": 5, "nodes": []}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("execution trace"), "{e}");
        let e = parse(br#"{"a": 1}"#).unwrap_err().to_string();
        assert!(e.contains("without a traceEvents"), "{e}");
        let e = parse(br#"{"traceEvents": [1, 2]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("at byte 17"), "{e}");
        let e = parse(br#"{"traceEvents": [{"ph": "X"} x]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("byte 29"), "{e}");
        assert!(matches!(
            parse(br#"{"deviceProperties": [1, 2"#),
            Err(TraceError::TruncatedHeader { .. })
        ));
        let t = parse(br#"{"traceEvents": []}"#).unwrap();
        assert_eq!(t.counts.events, 0);
    }

    /// Every element of `text`'s `traceEvents`, as byte ranges (via the scanner).
    fn elements(bytes: &[u8]) -> Vec<(usize, usize)> {
        let open = locate_events(bytes).unwrap();
        let mut out = Vec::new();
        let mut i = skip_ws(bytes, open + 1);
        while let Ok((end, _)) = scan_value(bytes, i) {
            out.push((i, end));
            i = skip_ws(bytes, end);
            if bytes.get(i) != Some(&b',') {
                break;
            }
            i = skip_ws(bytes, i + 1);
        }
        out
    }

    /// The fast reader must either decline or agree with serde_json exactly: same event, same end.
    fn check_fast(elem: &[u8]) -> bool {
        let Some((fast, fend)) = fast::event(elem, 0) else {
            return false;
        };
        let slow = parse_elem(elem, 0);
        let (slow, send) = slow.unwrap_or_else(|| {
            panic!(
                "fast reader accepted what serde_json rejects: {:?}",
                String::from_utf8_lossy(elem)
            )
        });
        let shown = |e: &RawEvent| {
            let mut e = format!("{e:?}");
            // No args and empty args mean the same to `classify`.
            e = e.replace(&format!("{:?}", Some(Box::new(RawArgs::default()))), "None");
            e
        };
        assert_eq!(
            (shown(&fast), fend),
            (shown(&slow), send),
            "{:?}",
            String::from_utf8_lossy(elem)
        );
        assert_eq!(
            format!("{:?}", classify(&fast)),
            format!("{:?}", classify(&slow))
        );
        true
    }

    #[test]
    fn fast_reader_agrees_with_serde() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/trace_val_no_grad.trace.json"
        );
        let bytes = std::fs::read(path).unwrap();
        let elems = elements(&bytes);
        let mut taken = 0;
        for &(s, e) in &elems {
            taken += check_fast(&bytes[s..e]) as usize;
        }
        // Kineto's own output is nearly all the plain shape.
        assert!(
            taken * 100 >= elems.len() * 99,
            "{taken} of {}",
            elems.len()
        );
        // Edge cases, each either declined or read as serde_json reads it.
        for e in [
            r#"{"ph": "X", "ph": "X"}"#,
            r#"{"ts": 01}"#,
            r#"{"ts": -0}"#,
            r#"{"ts": -0.0, "dur": 1.5e3}"#,
            r#"{"ts": 18446744073709551615, "id": -9223372036854775808}"#,
            r#"{"ts": 99999999999999999999, "id": 1.}"#,
            r#"{"ts": 0.1234567890123456789012, "tid": "a\"b"}"#,
            r#"{"ts": 4453732382007.822, "name": "café", "cat": "é"}"#,
            r#"{"ts": 1, "name": "x", "args": null}"#,
            r#"{"ts": 1, "args": {"Addr": [1], "Input Dims": [[1, [2, {}]], 3]}}"#,
            r#"{"ts": 1, "args": {"Input type": ["a", 1, null, true], "Input Dims": [[], [1,2]]}}"#,
            r#"{"ts": 1, "args": {"Input type": "a"}}"#,
            r#"{"ts": 1, "args": [], "x": [1, {"a": "\n\u0041"}]}"#,
            r#"{"ts": 4453735382007.8223, "dur": 1700000000000000.123, "id": 9007199254740993.5}"#,
            r#"{"ts": 9999999999999999.999, "dur": 0.0000000000000000001}"#,
            r#"{"ts": 1, "x": tru}"#,
            r#"{"ts": 1, "x": [1e5, -0.5E-3, 2E+7, 123456789012345678901234567890]}"#,
            r#"{"ts": 1, "x": [01]}"#,
            r#"{"ts": 1, "x": [-]}"#,
            r#"{"ts": 1, "x": [1.e3]}"#,
            r#"{"ts": 1, "x": [1e]}"#,
            r#"{"ts": 1, "x": [1,]}"#,
            r#"{"ts": 1,}"#,
            "{\"ts\": 1, \"name\": \"a\tb\"}",
            "{\"ts\": 1, \"name\": \"\u{7f}\u{80}\"}",
        ] {
            check_fast(e.as_bytes());
        }
        // Mutations of real events: any byte changed, dropped or repeated.
        let mut rng = 0x9e3779b97f4a7c15u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let alphabet = b"{}[]\",:0123456789.-eE+ \t\nabtrufnl\\u\x01\xc3\xa9";
        for _ in 0..20_000 {
            let (s, e) = elems[(next() % elems.len() as u64) as usize];
            let mut m = bytes[s..e].to_vec();
            for _ in 0..1 + next() % 3 {
                let at = (next() % m.len() as u64) as usize;
                match next() % 3 {
                    0 => m[at] = alphabet[(next() % alphabet.len() as u64) as usize],
                    1 => {
                        m.remove(at);
                    }
                    _ => m.insert(at, m[at]),
                }
                if m.is_empty() {
                    break;
                }
            }
            if !m.is_empty() {
                check_fast(&m);
            }
        }
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        let mut s = String::from("{\"traceEvents\": [");
        s.push_str(&"[".repeat(100_000));
        let _ = parse(s.as_bytes());
    }
}
