//! A pickle reader that never runs the pickle.
//!
//! `pickle.load` is a small virtual machine whose opcodes can import modules and call
//! arbitrary callables; a snapshot from a colleague or a CI artifact must never get that
//! power. Real snapshots also share frame lists and dicts through the memo, thousands of
//! times over; a reader that copies memo entries (as serde-pickle does) explodes in time and
//! memory, or silently drops the shared objects. So this reader:
//!
//! * implements only the data opcodes of protocols 0 to 5 (scalars, strings, bytes, lists,
//!   tuples, dicts, sets, memo), and stops with [`PickleError::Forbidden`] naming the opcode and
//!   its byte offset at anything that would import, call or build an object;
//! * keeps containers in an arena and hands out [`ObjId`]s: a memo `GET` of a shared frame list
//!   costs one 16-byte [`Value`], and the consumer can cache its decoding of that object by id
//!   (that is how a frame list becomes one interned stack);
//! * keeps strings and bytes as spans of the input (borrowed, never copied) and decodes UTF-8
//!   only when a consumer asks;
//! * bounds its work: every length is checked against the bytes left, the memo and the number
//!   of containers are capped (see [`Limits`]), and nothing in it recurses.

use std::collections::HashMap;

mod fast;
mod probe;
pub(crate) use probe::{entry_key_at, skip_frames};
pub use probe::{handoff, memo_lengths_at, Handoff};

/// Index of a container in the arena of a [`Pickle`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjId(pub u32);

/// A byte range of the input: a 48-bit offset (inputs of any size a machine maps) and a 32-bit
/// length (one string or bytes object of up to 4 GiB), in 12 bytes with 4-byte alignment, so a
/// [`Value`] holding one stays 16 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Span {
    lo: u32,
    hi: u16,
    len: u32,
}

impl Span {
    /// Largest length of one span: longer strings or bytes are refused as a limit.
    pub const MAX_LEN: usize = u32::MAX as usize;

    /// The span's byte range in the input.
    #[inline]
    pub fn range(&self) -> std::ops::Range<usize> {
        let start = ((self.hi as usize) << 32) | self.lo as usize;
        start..start + self.len as usize
    }

    /// Its length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether it is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

const _: () = assert!(std::mem::size_of::<Value>() == 16);

/// One pickled value. Scalars are inline; containers live in the arena.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    /// An integer that does not fit in `i64`: little-endian two's complement bytes of the input.
    BigInt(Span),
    /// The same, decoded from protocol-0 decimal text; index into the owned big integers.
    OwnedBigInt(u32),
    Float(f64),
    /// A `str` whose UTF-8 bytes are a span of the input.
    Str(Span),
    /// A `str` that had to be decoded (protocol 0 `UNICODE` with escapes); index into the owned strings.
    OwnedStr(u32),
    Bytes(Span),
    List(ObjId),
    Tuple(ObjId),
    Dict(ObjId),
    Set(ObjId),
    /// A list or tuple a [`Finalizer`] took, by its tag (memo references to it become this).
    FinalSeq(u32),
    /// A dict a [`Finalizer`] took, by its tag.
    FinalDict(u32),
    /// An empty list that was complete when it was stored into its parent (see
    /// `Vm::finalize_from`): it takes no arena slot.
    EmptyList,
    /// The same for an empty tuple.
    EmptyTuple,
    /// The same for an empty dict.
    EmptyDict,
}

impl Value {
    pub fn kind(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "bool",
            Value::Int(_) | Value::BigInt(_) | Value::OwnedBigInt(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) | Value::OwnedStr(_) => "str",
            Value::Bytes(_) => "bytes",
            Value::List(_) | Value::FinalSeq(_) | Value::EmptyList => "list",
            Value::Tuple(_) | Value::EmptyTuple => "tuple",
            Value::Dict(_) | Value::FinalDict(_) | Value::EmptyDict => "dict",
            Value::Set(_) => "set",
        }
    }
}

#[derive(Debug)]
enum Container {
    /// Lists, tuples and sets.
    Seq(Vec<Value>),
    Dict(Vec<(Value, Value)>),
    /// A sequence a [`Finalizer`] turned into its own record (the tag is the finalizer's).
    FinalSeq(u32),
    /// A dict a [`Finalizer`] turned into its own record.
    FinalDict(u32),
    /// An empty container that became `Value::EmptyList` (or tuple, or dict) when it was stored
    /// into its parent: nothing names this slot any more.
    Moved,
}

/// Consumes containers as soon as they are complete, so a reader of a large pickle does not
/// have to hold its whole object tree.
///
/// A pickle writer emits a container's items before the container is stored into its parent,
/// so when a container is moved into another one (`APPENDS`, `SETITEMS`, `TUPLE`...), it is
/// complete. At that moment the finalizer may turn it into a record of its own and return a
/// tag; the reader then drops the items and keeps the tag (`Arena::final_tag`). The memo
/// still refers to the container, so a shared frame list is finalized once and every later
/// reference sees the same tag. A finalized container that the pickle then tries to modify is
/// an error (no pickle written by `pickle.dump` does that for a dict or a non-empty list).
pub trait Finalizer<'a> {
    fn seq(&mut self, arena: &Arena<'a>, items: &[Value]) -> Option<u32>;
    fn dict(&mut self, arena: &Arena<'a>, pairs: &[(Value, Value)]) -> Option<u32>;
    /// Called every few MB of input with the offset reached.
    fn progress(&mut self, _offset: usize) {}
    /// Publishes the finalizer's own large buffers (slots 3 and up) for pre-faulting.
    fn publish(&self, _regions: &super::prefault::Regions) {}
    /// The keys of a record dict the reader may decode straight from the bytes (see
    /// `Vm::fast_entry`); the first is required, and its value must be a `str`. Empty: none.
    fn entry_keys(&self) -> &'static [&'static [u8]] {
        &[]
    }
    /// A record dict read by the fast path: `fields[i]` is the value of `entry_keys()[i]`
    /// (lists already finalized). Must give what [`Finalizer::dict`] gives for the same pairs.
    fn entry(&mut self, _arena: &Arena<'a>, _fields: &[Option<Value>]) -> Option<u32> {
        None
    }
    /// Whether a tag [`Finalizer::dict`] gave is a record of [`Finalizer::entry_keys`]'s kind.
    fn is_entry_tag(&self, _tag: u32) -> bool {
        false
    }
}

/// How often (in bytes of input) [`Finalizer::progress`] is called.
pub const PROGRESS_EVERY: usize = 8 << 20;

/// Hard bounds on what one pickle may make the reader do. Exceeding one is an error, not a crash.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest memo index accepted (Python writers number memo entries densely from 0).
    pub max_memo_index: u32,
    /// Most containers (lists, tuples, dicts, sets) a pickle may create.
    pub max_containers: u32,
    /// Most values that may sit on the VM stack at once (also bounds the open MARKs). Python's
    /// pickler batches list and dict items by 1000, so a real snapshot keeps the stack shallow;
    /// 2^24 values (512 MiB at 32 bytes a value) leaves room for a hand-made tuple of millions.
    pub max_stack: usize,
    /// Largest input accepted (spans hold 48-bit offsets).
    pub max_input: usize,
}

impl Limits {
    /// The limits for an input of `len` bytes: the memo and the containers may grow with the
    /// input (each needs at least one opcode byte, so a file cannot claim more of them than it
    /// has bytes), from 2^30 up to `u32::MAX - 1` (their ids are 32-bit), so no snapshot a
    /// writer can produce in practice is refused for its size while a small hostile file still
    /// stops at 2^30.
    pub fn for_input(len: usize) -> Limits {
        let grown = len.clamp(1 << 30, u32::MAX as usize - 1) as u32;
        Limits {
            max_memo_index: grown,
            max_containers: grown,
            ..Limits::default()
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_memo_index: 1 << 30,
            max_containers: 1 << 30,
            max_stack: 1 << 24,
            max_input: 1 << 48,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PickleError {
    #[error("byte {offset}: opcode {name} (0x{opcode:02x}) would import or call code; memscope never executes it, and a memory snapshot does not need it")]
    Forbidden {
        opcode: u8,
        name: &'static str,
        offset: usize,
    },
    #[error("byte {offset}: unknown pickle opcode 0x{opcode:02x}: not a pickle, or damaged")]
    UnknownOpcode { opcode: u8, offset: usize },
    #[error("byte {offset}: input ends inside opcode {name} (wanted {wanted} more bytes, {left} left): the file is truncated")]
    Truncated {
        name: &'static str,
        offset: usize,
        wanted: u64,
        left: usize,
    },
    #[error("input ends at byte {offset} before the pickle's STOP opcode: the file is truncated")]
    NoStop { offset: usize },
    #[error("byte {offset}: opcode {name} found {found} where it needs {expected}")]
    Malformed {
        name: &'static str,
        offset: usize,
        expected: &'static str,
        found: String,
    },
    #[error("byte {offset}: memo index {index} was never stored")]
    MissingMemo { offset: usize, index: u64 },
    #[error("byte {offset}: limit exceeded: {what} (limit {limit})")]
    Limit {
        offset: usize,
        what: &'static str,
        limit: u64,
    },
    #[error("byte 0: not a pickle (starts with {found})")]
    NotPickle { found: String },
    #[error("byte {offset}: out of memory: {what} would need {bytes} bytes")]
    OutOfMemory {
        offset: usize,
        what: &'static str,
        bytes: u64,
    },
}

/// Makes room for one more element, growing by doubling but never past `limit` elements, and
/// failing with an error (not an abort) when the allocator refuses: the pickle decides how far
/// these vectors grow, so their growth is checked before it happens.
#[inline]
fn room<T>(v: &mut Vec<T>, limit: usize, at: usize, what: &'static str) -> Result<(), PickleError> {
    if v.len() < v.capacity() {
        return Ok(());
    }
    grow(v, limit, at, what)
}

#[cold]
#[inline(never)]
fn grow<T>(v: &mut Vec<T>, limit: usize, at: usize, what: &'static str) -> Result<(), PickleError> {
    let len = v.len();
    if len >= limit {
        return Err(PickleError::Limit {
            offset: at,
            what,
            limit: limit as u64,
        });
    }
    let want = len.max(64).min(limit - len);
    v.try_reserve_exact(want)
        .map_err(|_| PickleError::OutOfMemory {
            offset: at,
            what,
            bytes: ((len + want) * std::mem::size_of::<T>()) as u64,
        })
}

/// Reserves `n` more elements if the allocator agrees; an up-front reservation sized from the
/// input length is only a speed-up, so a refusal (a huge sparse file, a tight `ulimit -v`) just
/// means growing as the data comes.
pub(crate) fn reserve_hint<T>(v: &mut Vec<T>, n: usize) {
    let _ = v.try_reserve(n);
}

/// The longest `str` (in bytes) taken whole into a model: file and function names, settings
/// and annotation names are far shorter (PATH_MAX is 4 KiB); a longer one is cut.
pub const MAX_TEXT: usize = 64 << 10;

/// The containers and decoded strings of a pickle; borrows the input for everything else.
#[derive(Debug)]
pub struct Arena<'a> {
    data: &'a [u8],
    objects: Vec<Container>,
    owned: Vec<String>,
    owned_ints: Vec<Vec<u8>>,
}

/// A decoded pickle: the root value plus the arena its containers live in. Borrows the input.
#[derive(Debug)]
pub struct Pickle<'a> {
    arena: Arena<'a>,
    root: Value,
    /// Protocol announced by `PROTO`, 0 when absent.
    pub protocol: u8,
}

impl<'a> std::ops::Deref for Pickle<'a> {
    type Target = Arena<'a>;
    fn deref(&self) -> &Arena<'a> {
        &self.arena
    }
}

fn opname(op: u8) -> &'static str {
    match op {
        b'(' => "MARK",
        b'.' => "STOP",
        b'0' => "POP",
        b'1' => "POP_MARK",
        b'2' => "DUP",
        b'F' => "FLOAT",
        b'I' => "INT",
        b'J' => "BININT",
        b'K' => "BININT1",
        b'L' => "LONG",
        b'M' => "BININT2",
        b'N' => "NONE",
        b'P' => "PERSID",
        b'Q' => "BINPERSID",
        b'R' => "REDUCE",
        b'S' => "STRING",
        b'T' => "BINSTRING",
        b'U' => "SHORT_BINSTRING",
        b'V' => "UNICODE",
        b'X' => "BINUNICODE",
        b'a' => "APPEND",
        b'b' => "BUILD",
        b'c' => "GLOBAL",
        b'd' => "DICT",
        b'}' => "EMPTY_DICT",
        b'e' => "APPENDS",
        b'g' => "GET",
        b'h' => "BINGET",
        b'i' => "INST",
        b'j' => "LONG_BINGET",
        b'l' => "LIST",
        b']' => "EMPTY_LIST",
        b'o' => "OBJ",
        b'p' => "PUT",
        b'q' => "BINPUT",
        b'r' => "LONG_BINPUT",
        b's' => "SETITEM",
        b't' => "TUPLE",
        b')' => "EMPTY_TUPLE",
        b'u' => "SETITEMS",
        b'G' => "BINFLOAT",
        0x80 => "PROTO",
        0x81 => "NEWOBJ",
        0x82 => "EXT1",
        0x83 => "EXT2",
        0x84 => "EXT4",
        0x85 => "TUPLE1",
        0x86 => "TUPLE2",
        0x87 => "TUPLE3",
        0x88 => "NEWTRUE",
        0x89 => "NEWFALSE",
        0x8a => "LONG1",
        0x8b => "LONG4",
        b'B' => "BINBYTES",
        b'C' => "SHORT_BINBYTES",
        0x8c => "SHORT_BINUNICODE",
        0x8d => "BINUNICODE8",
        0x8e => "BINBYTES8",
        0x8f => "EMPTY_SET",
        0x90 => "ADDITEMS",
        0x91 => "FROZENSET",
        0x92 => "NEWOBJ_EX",
        0x93 => "STACK_GLOBAL",
        0x94 => "MEMOIZE",
        0x95 => "FRAME",
        0x96 => "BYTEARRAY8",
        0x97 => "NEXT_BUFFER",
        0x98 => "READONLY_BUFFER",
        _ => "?",
    }
}

/// Opcodes that import, call or construct objects, or reach outside the pickle.
fn is_forbidden(op: u8) -> bool {
    matches!(
        op,
        b'c' | 0x93
            | b'R'
            | b'i'
            | b'o'
            | 0x81
            | 0x92
            | b'b'
            | 0x82
            | 0x83
            | 0x84
            | b'P'
            | b'Q'
            | 0x97
            | 0x98
    )
}

struct Vm<'a, 'f> {
    data: &'a [u8],
    /// Reused buffer of the frames fast path.
    scratch: Vec<Value>,
    /// Tags of frame lists by the bytes of their run of memo references.
    run_tags: rustc_hash::FxHashMap<&'a [u8], u32>,
    /// A memo slot was stored twice: runs of references no longer name fixed objects.
    memo_overwritten: bool,
    /// Emptied storage of finalized dicts, reused by the next `EMPTY_DICT`.
    dict_pool: Vec<Vec<(Value, Value)>>,
    /// For each container, the memo slot that first stored it (`u32::MAX`: none), so that a
    /// finalized container's memo entry can become its compact tag.
    memo_slot: Vec<u32>,
    /// Containers with a second reference (a `DUP`, a memo `GET` before they were finalized, a
    /// second memo slot): their arena slot is never reclaimed, since that reference still names
    /// it. Empty for a pickle Python wrote.
    pinned: rustc_hash::FxHashSet<u32>,
    arena: Arena<'a>,
    finalizer: Option<&'f mut dyn Finalizer<'a>>,
    next_progress: usize,
    /// Stops and checkpoints watched at every opcode (see `probe`); `None` when decoding.
    probe: Option<Box<probe::Probe>>,
    /// Where large buffers are published for pre-faulting (large inputs only).
    regions: Option<std::sync::Arc<super::prefault::Regions>>,
    pos: usize,
    /// Offset of the opcode being executed, for errors.
    at: usize,
    op: u8,
    stack: Vec<Value>,
    marks: Vec<usize>,
    memo: Vec<Option<Value>>,
    sparse_memo: HashMap<u64, Value>,
    limits: Limits,
    protocol: u8,
    /// The trace-entry fast path (see `Vm::fast_entry`); off without a finalizer.
    fast: FastState,
}

/// The state of the trace-entry fast path.
#[derive(Default)]
struct FastState {
    on: bool,
    /// The finalizer's [`Finalizer::entry_keys`].
    keys: &'static [&'static [u8]],
    /// Memo index -> field of `keys` (`u8::MAX`: a `str` that is no key), direct-mapped; an
    /// index is learnt from the memo once (memo slots holding strings never change while
    /// `memo_overwritten` is false).
    key_cache: Vec<(u32, u8)>,
    /// Entries read by the fast path.
    entries: u64,
    /// Set when the fast path cannot show the generic path would give the same: the whole
    /// decode is then done again without it.
    bail: bool,
    /// The entries read by the fast path that sit on the stack above `mark`, not yet stored
    /// into their list (`count` of them, their tags from `lo` to `hi`): the generic path would
    /// finalize them only at the list's `APPENDS`, so nothing may touch them before it.
    mark: usize,
    count: usize,
    lo: u32,
    hi: u32,
}

/// Most keys a [`Finalizer::entry_keys`] may name (and most memo values one entry may store).
const MAX_ENTRY_KEYS: usize = 16;

/// A memo value an entry decoded by the fast path stores, in memo order.
#[derive(Clone, Copy)]
enum Put {
    Dict,
    List,
    Value(Value),
}

/// Decode `data` as a pickle with the default [`Limits`].
pub fn parse(data: &[u8]) -> Result<Pickle<'_>, PickleError> {
    parse_with_limits(data, Limits::default())
}

/// Decode `data` as a pickle, failing when a bound in `limits` is exceeded.
pub fn parse_with_limits(data: &[u8], limits: Limits) -> Result<Pickle<'_>, PickleError> {
    parse_streaming(data, limits, None)
}

/// Decode `data`, handing each completed container to `finalizer` (see [`Finalizer`]).
pub fn parse_streaming<'a>(
    data: &'a [u8],
    limits: Limits,
    finalizer: Option<&mut dyn Finalizer<'a>>,
) -> Result<Pickle<'a>, PickleError> {
    stream(data, limits, finalizer, false).0
}

/// What [`parse_streaming_fast`] gave.
pub struct FastDecode<'a> {
    /// The decode, or `None` where the trace-entry fast path could not show that it reads what
    /// the generic path reads (a shape it does not know touched an entry it had read, or the
    /// decode failed after it was used): decode again with [`parse_streaming`] and a fresh
    /// finalizer. A pickle `pickle.dump` wrote never needs that.
    pub result: Option<Result<Pickle<'a>, PickleError>>,
    /// How many dicts the fast path read.
    pub entries: u64,
}

/// [`parse_streaming`] with the trace-entry fast path: a record dict whose keys are the
/// finalizer's [`Finalizer::entry_keys`] is read straight from its bytes into
/// [`Finalizer::entry`] (see `Vm::fast_entry`).
pub fn parse_streaming_fast<'a>(
    data: &'a [u8],
    limits: Limits,
    finalizer: &mut dyn Finalizer<'a>,
) -> FastDecode<'a> {
    let (r, fast) = stream(data, limits, Some(finalizer), true);
    let result = if fast.bail || (r.is_err() && fast.entries > 0) {
        None
    } else {
        Some(r)
    };
    FastDecode {
        result,
        entries: fast.entries,
    }
}

impl<'a, 'f> Vm<'a, 'f> {
    fn new(data: &'a [u8], limits: Limits, finalizer: Option<&'f mut dyn Finalizer<'a>>) -> Self {
        Vm {
            data,
            scratch: Vec::new(),
            run_tags: Default::default(),
            memo_overwritten: false,
            dict_pool: Vec::new(),
            memo_slot: Vec::new(),
            pinned: Default::default(),
            arena: Arena {
                data,
                objects: Vec::new(),
                owned: Vec::new(),
                owned_ints: Vec::new(),
            },
            finalizer,
            next_progress: PROGRESS_EVERY,
            probe: None,
            regions: None,
            pos: 0,
            at: 0,
            op: 0,
            stack: Vec::with_capacity(64),
            marks: Vec::with_capacity(64),
            memo: Vec::new(),
            sparse_memo: HashMap::new(),
            limits,
            protocol: 0,
            fast: FastState::default(),
        }
    }
}

fn stream<'a>(
    data: &'a [u8],
    limits: Limits,
    finalizer: Option<&mut dyn Finalizer<'a>>,
    fast: bool,
) -> (Result<Pickle<'a>, PickleError>, FastState) {
    if data.len() > limits.max_input {
        let e = PickleError::Limit {
            offset: 0,
            what: "input size in bytes",
            limit: limits.max_input as u64,
        };
        return (Err(e), FastState::default());
    }
    let mut vm = Vm::new(data, limits, finalizer);
    if vm.finalizer.is_some() {
        // A snapshot holds about one container per 100 bytes and one memo entry per 70:
        // reserving up front avoids copying a growing arena (the pages are touched only as used).
        // Finalized containers' slots are reclaimed (see `Vm::reclaim`), so the arena holds the
        // open containers and the generic ones only: no reservation in proportion to the input.
        reserve_hint(&mut vm.memo, data.len() / 70);
        if fast {
            let keys = vm.finalizer.as_ref().map_or(&[][..], |f| f.entry_keys());
            vm.fast.on = !keys.is_empty() && keys.len() <= MAX_ENTRY_KEYS;
            vm.fast.keys = keys;
            vm.fast.key_cache = vec![(u32::MAX, 0); 64];
        }
    }
    // Large inputs: the second core faults in the buffers' next pages ahead of the decoder.
    let root = if vm.finalizer.is_some() && data.len() >= 64 << 20 {
        let regions = std::sync::Arc::new(super::prefault::Regions::default());
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            vm.regions = Some(std::sync::Arc::clone(&regions));
            vm.publish();
            // Only a help: where its thread cannot start, the decoder faults pages itself.
            let _ = std::thread::Builder::new()
                .spawn_scoped(scope, || super::prefault::run(&regions, &done));
            let r = vm.run();
            done.store(true, std::sync::atomic::Ordering::Relaxed);
            vm.regions = None;
            r
        })
    } else {
        vm.run()
    };
    let fast = std::mem::take(&mut vm.fast);
    let r = root.map(|root| Pickle {
        arena: vm.arena,
        root,
        protocol: vm.protocol,
    });
    (r, fast)
}

impl<'a> Vm<'a, '_> {
    /// Publishes the large buffers' places for the pre-faulting thread, if there is one.
    fn publish(&self) {
        if let Some(r) = &self.regions {
            r.publish(0, &self.arena.objects);
            r.publish(1, &self.memo);
            r.publish(2, &self.memo_slot);
            if let Some(f) = self.finalizer.as_ref() {
                f.publish(r);
            }
        }
    }

    fn truncated(&self, wanted: u64) -> PickleError {
        PickleError::Truncated {
            name: opname(self.op),
            offset: self.at,
            wanted,
            left: self.data.len() - self.pos,
        }
    }

    fn malformed(&self, expected: &'static str, found: impl Into<String>) -> PickleError {
        PickleError::Malformed {
            name: opname(self.op),
            offset: self.at,
            expected,
            found: found.into(),
        }
    }

    #[inline]
    fn take(&mut self, n: u64) -> Result<&'a [u8], PickleError> {
        let left = self.data.len() - self.pos;
        if n > left as u64 {
            return Err(self.truncated(n));
        }
        let n = n as usize;
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    #[inline]
    fn u8(&mut self) -> Result<u8, PickleError> {
        Ok(self.take(1)?[0])
    }
    #[inline]
    fn u16(&mut self) -> Result<u16, PickleError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    #[inline]
    fn u32(&mut self) -> Result<u32, PickleError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    #[inline]
    fn u64(&mut self) -> Result<u64, PickleError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// A protocol-0 argument: bytes up to (not including) the next newline.
    fn line(&mut self) -> Result<&'a [u8], PickleError> {
        let rest = &self.data[self.pos..];
        match rest.iter().position(|&b| b == b'\n') {
            Some(i) => {
                self.pos += i + 1;
                Ok(&rest[..i])
            }
            None => Err(self.truncated(1)),
        }
    }

    /// The span of `s`, a sub-slice of the input; a string or bytes object over
    /// [`Span::MAX_LEN`] is refused as a limit (the input itself may be of any size up to
    /// 2^48 bytes, which [`parse_streaming`] checks).
    fn span(&self, s: &[u8]) -> Result<Span, PickleError> {
        let off = s.as_ptr() as usize - self.data.as_ptr() as usize;
        if s.len() > Span::MAX_LEN {
            return Err(PickleError::Limit {
                offset: off,
                what: "length of one string or bytes object",
                limit: Span::MAX_LEN as u64,
            });
        }
        Ok(Span {
            lo: off as u32,
            hi: (off >> 32) as u16,
            len: s.len() as u32,
        })
    }

    #[inline]
    fn push(&mut self, v: Value) -> Result<(), PickleError> {
        room(
            &mut self.stack,
            self.limits.max_stack,
            self.at,
            "values on the pickle stack",
        )?;
        self.stack.push(v);
        Ok(())
    }

    #[inline]
    fn pop(&mut self) -> Result<Value, PickleError> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(self.malformed("a value on the stack", "an empty stack"));
        }
        Ok(self.stack.pop().expect("checked non-empty"))
    }

    fn top(&self) -> Result<Value, PickleError> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(self.malformed("a value on the stack", "an empty stack"));
        }
        Ok(*self.stack.last().expect("checked non-empty"))
    }

    /// Pops everything above the topmost mark, and the mark; the popped containers are complete.
    fn pop_mark(&mut self) -> Result<Vec<Value>, PickleError> {
        let m = self.take_mark()?;
        Ok(self.stack.split_off(m))
    }

    /// Pops the topmost mark, finalizing the containers above it; returns its stack position.
    fn take_mark(&mut self) -> Result<usize, PickleError> {
        let m = self
            .marks
            .pop()
            .ok_or_else(|| self.malformed("a MARK before it", "no MARK"))?;
        if self.fast.count > 0 && m == self.fast.mark {
            // The entries the fast path read are stored now, in stack order, as the generic
            // path would finalize them here.
            self.fast.count = 0;
        }
        self.finalize_from(m)?;
        Ok(m)
    }

    /// The value under position `m` (the container an `APPENDS`/`SETITEMS` adds to).
    fn below(&self, m: usize) -> Result<Value, PickleError> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if m == 0 || m <= floor {
            return Err(self.malformed("a container under the MARK", "nothing"));
        }
        Ok(self.stack[m - 1])
    }

    /// Offers the containers at `stack[start..]`, which are about to be stored into a parent, to the finalizer.
    fn finalize_from(&mut self, start: usize) -> Result<(), PickleError> {
        let Vm {
            finalizer: Some(f),
            arena,
            stack,
            memo,
            memo_slot,
            dict_pool,
            pinned,
            fast,
            ..
        } = self
        else {
            return Ok(());
        };
        // A record finalized while entries the fast path read wait for their list's `APPENDS`
        // would come before them in the generic path's order.
        let mut out_of_order = false;
        // An empty container that nothing else names (no `DUP`, no memo `GET` yet) is complete
        // once it is stored into its parent (a writer fills a container before storing it), so
        // it becomes a value of its own and its slot can go: a snapshot's empty frames lists,
        // one per trace entry of a capture without stacks, would otherwise pin the arena.
        let unshared = |id: ObjId| pinned.is_empty() || !pinned.contains(&id.0);
        for v in &mut stack[start..] {
            let (id, compact) = match *v {
                Value::Dict(id) => match &arena.objects[id.0 as usize] {
                    Container::Dict(pairs) => match f.dict(arena, pairs) {
                        Some(t) => {
                            out_of_order |= fast.count > 0 && f.is_entry_tag(t);
                            (id, (Container::FinalDict(t), Value::FinalDict(t)))
                        }
                        None if pairs.is_empty() && unshared(id) => {
                            (id, (Container::Moved, Value::EmptyDict))
                        }
                        None => continue,
                    },
                    _ => continue,
                },
                Value::List(id) | Value::Tuple(id) => match &arena.objects[id.0 as usize] {
                    Container::Seq(items) => match f.seq(arena, items) {
                        Some(t) => (id, (Container::FinalSeq(t), Value::FinalSeq(t))),
                        None if items.is_empty() && unshared(id) => {
                            let empty = match *v {
                                Value::List(_) => Value::EmptyList,
                                _ => Value::EmptyTuple,
                            };
                            (id, (Container::Moved, empty))
                        }
                        None => continue,
                    },
                    _ => continue,
                },
                _ => continue,
            };
            // A finalized dict's storage serves the next dict (one per trace entry otherwise).
            if let Container::Dict(mut pairs) =
                std::mem::replace(&mut arena.objects[id.0 as usize], compact.0)
            {
                if dict_pool.len() < 64 {
                    pairs.clear();
                    dict_pool.push(pairs);
                }
            }
            // Later memo references and the parent get the tag itself: no arena lookups.
            if let Some(&slot) = memo_slot.get(id.0 as usize) {
                if let Some(m) = memo.get_mut(slot as usize) {
                    *m = Some(compact.1);
                }
            }
            *v = compact.1;
        }
        self.reclaim();
        if out_of_order {
            return Err(self.bail());
        }
        Ok(())
    }

    /// Gives up the fast path's decode (see `FastState::bail`).
    #[cold]
    #[inline(never)]
    fn bail(&mut self) -> PickleError {
        self.fast.bail = true;
        self.malformed("a shape the trace-entry fast path reads", "another")
    }

    /// An operation on the top `depth` values: where one of them is an entry the fast path read
    /// that is not yet in its list, the generic path would see a dict still being built.
    #[inline]
    fn guard(&mut self, depth: usize) -> Result<(), PickleError> {
        if self.fast.count > 0
            && self.stack.len().saturating_sub(depth) < self.fast.mark + self.fast.count
        {
            return Err(self.bail());
        }
        Ok(())
    }

    /// Marks the container `v` names (if any) as referenced twice: see `pinned`.
    #[inline]
    fn pin(&mut self, v: Value) {
        if self.finalizer.is_some() {
            if let Value::List(id) | Value::Tuple(id) | Value::Dict(id) | Value::Set(id) = v {
                self.pinned.insert(id.0);
            }
        }
    }

    /// Drops the finalized containers at the end of the arena. Each was named by one value,
    /// which finalization turned into its tag (on the stack, and in its first memo slot);
    /// a container named twice is pinned and stays, and so does every slot below it. A trace
    /// entry and its frames list are the last containers made when they are finalized, so the
    /// arena holds the open containers and the generic ones, not one slot per entry.
    fn reclaim(&mut self) {
        while let Some(Container::FinalSeq(_) | Container::FinalDict(_) | Container::Moved) =
            self.arena.objects.last()
        {
            let id = (self.arena.objects.len() - 1) as u32;
            if !self.pinned.is_empty() && self.pinned.contains(&id) {
                break;
            }
            self.arena.objects.pop();
            self.memo_slot.pop();
        }
    }

    fn new_obj(&mut self, c: Container) -> Result<ObjId, PickleError> {
        if self.arena.objects.len() as u64 >= self.limits.max_containers as u64 {
            return Err(PickleError::Limit {
                offset: self.at,
                what: "number of containers",
                limit: self.limits.max_containers as u64,
            });
        }
        let limit = self.limits.max_containers as usize;
        room(&mut self.arena.objects, limit, self.at, "containers")?;
        self.arena.objects.push(c);
        if self.finalizer.is_some() {
            room(&mut self.memo_slot, limit, self.at, "containers")?;
            self.memo_slot.push(u32::MAX);
        }
        Ok(ObjId((self.arena.objects.len() - 1) as u32))
    }

    fn memo_put(&mut self, index: u64, v: Value) -> Result<(), PickleError> {
        if index > self.limits.max_memo_index as u64 {
            return Err(PickleError::Limit {
                offset: self.at,
                what: "memo index",
                limit: self.limits.max_memo_index as u64,
            });
        }
        let i = index as usize;
        if self.finalizer.is_some() {
            if let Value::List(id) | Value::Tuple(id) | Value::Dict(id) = v {
                let slot = &mut self.memo_slot[id.0 as usize];
                // Only a dense memo entry is rewritten to the tag at finalization; any other
                // reference keeps naming the slot, which then stays.
                if *slot == u32::MAX && index < u32::MAX as u64 && i <= self.memo.len() {
                    *slot = index as u32;
                } else {
                    self.pinned.insert(id.0);
                }
            }
        }
        if i < self.memo.len() {
            if self.memo[i].is_some() {
                self.memo_overwritten = true;
            }
            self.memo[i] = Some(v);
        } else if i == self.memo.len() {
            let limit = self.limits.max_memo_index as usize + 1;
            room(&mut self.memo, limit, self.at, "memo entries")?;
            self.memo.push(Some(v));
        } else {
            // Out-of-order indices (never written by Python's pickler) still cost memory per
            // entry: the table's growth is fallible too.
            if self.sparse_memo.len() == self.sparse_memo.capacity() {
                let n = self.sparse_memo.len().max(64);
                self.sparse_memo
                    .try_reserve(n)
                    .map_err(|_| PickleError::OutOfMemory {
                        offset: self.at,
                        what: "memo entries",
                        bytes: (2 * n * std::mem::size_of::<(u64, Value)>()) as u64,
                    })?;
            }
            self.sparse_memo.insert(index, v);
        }
        Ok(())
    }

    #[inline]
    fn memo_get(&mut self, index: u64) -> Result<(), PickleError> {
        // Fast path: dense memo (how Python writes it).
        if let Some(Some(v)) = self.memo.get(index as usize) {
            let v = *v;
            if self.fast.count > 0 {
                if let Value::FinalDict(t) = v {
                    if (self.fast.lo..=self.fast.hi).contains(&t) {
                        return Err(self.bail());
                    }
                }
            }
            self.pin(v);
            return self.push(v);
        }
        match self.sparse_memo.get(&index).copied() {
            Some(v) => {
                self.pin(v);
                self.push(v)
            }
            None => Err(PickleError::MissingMemo {
                offset: self.at,
                index,
            }),
        }
    }

    fn seq_mut(&mut self, v: Value) -> Result<&mut Vec<Value>, PickleError> {
        let id = match v {
            Value::List(id) | Value::Set(id) => id,
            other => return Err(self.malformed("a list or set to add to", other.kind())),
        };
        match &mut self.arena.objects[id.0 as usize] {
            Container::Seq(items) => Ok(items),
            _ => Err(PickleError::Malformed {
                name: opname(self.op),
                offset: self.at,
                expected: "a list still being built",
                found: "a list that was already complete".into(),
            }),
        }
    }

    fn dict_mut(&mut self, v: Value) -> Result<&mut Vec<(Value, Value)>, PickleError> {
        let id = match v {
            Value::Dict(id) => id,
            other => return Err(self.malformed("a dict to set items in", other.kind())),
        };
        match &mut self.arena.objects[id.0 as usize] {
            Container::Dict(items) => Ok(items),
            _ => Err(PickleError::Malformed {
                name: opname(self.op),
                offset: self.at,
                expected: "a dict still being built",
                found: "a dict that was already complete".into(),
            }),
        }
    }

    fn int_from_le(&self, b: &'a [u8]) -> Result<Value, PickleError> {
        if b.is_empty() {
            return Ok(Value::Int(0));
        }
        if b.len() <= 8 {
            Ok(Value::Int(le_i64(b)))
        } else {
            Ok(Value::BigInt(self.span(b)?))
        }
    }

    fn parse_text_int(&mut self, s: &[u8]) -> Result<Value, PickleError> {
        let t = std::str::from_utf8(s)
            .map_err(|_| self.malformed("a decimal integer", "non-UTF-8 bytes"))?;
        let t = t.trim().trim_end_matches('L');
        match t {
            "00" => return Ok(Value::Bool(false)),
            "01" => return Ok(Value::Bool(true)),
            _ => {}
        }
        if let Ok(i) = t.parse::<i64>() {
            return Ok(Value::Int(i));
        }
        let le = decimal_to_le(t).ok_or_else(|| {
            self.malformed("a decimal integer", t.chars().take(40).collect::<String>())
        })?;
        self.arena.owned_ints.push(le);
        Ok(Value::OwnedBigInt((self.arena.owned_ints.len() - 1) as u32))
    }

    fn run(&mut self) -> Result<Value, PickleError> {
        if let Some(&first) = self.data.first() {
            if first != 0x80 && opname(first) == "?" {
                let shown: String = self
                    .data
                    .iter()
                    .take(8)
                    .map(|b| format!("{b:02x}"))
                    .collect::<Vec<_>>()
                    .join(" ");
                return Err(PickleError::NotPickle {
                    found: format!("bytes {shown}"),
                });
            }
        }
        loop {
            if self.pos >= self.data.len() {
                return Err(PickleError::NoStop { offset: self.pos });
            }
            if self.pos >= self.next_progress {
                if self.probe.is_some() {
                    // Watched at every opcode: `next_progress` stays 0.
                    if self.probe_stop() {
                        return Ok(Value::None);
                    }
                } else {
                    self.next_progress = self.pos + PROGRESS_EVERY;
                    if let Some(f) = self.finalizer.as_mut() {
                        f.progress(self.pos);
                    }
                    self.publish();
                }
            }
            self.at = self.pos;
            let op = self.data[self.pos];
            self.op = op;
            self.pos += 1;
            if is_forbidden(op) {
                return Err(PickleError::Forbidden {
                    opcode: op,
                    name: opname(op),
                    offset: self.at,
                });
            }
            match op {
                0x80 => {
                    self.protocol = self.u8()?;
                    if self.protocol > 5 {
                        return Err(self
                            .malformed("protocol 0 to 5", format!("protocol {}", self.protocol)));
                    }
                }
                0x95 => {
                    // FRAME: an 8-byte length; framing has no meaning for a reader that holds the whole input.
                    self.u64()?;
                }
                b'.' => {
                    if self.fast.count > 0 {
                        return Err(self.bail());
                    }
                    let v = self.pop()?;
                    return Ok(v);
                }
                b'(' => {
                    if self.finalizer.is_some() && self.fast_frames_list() {
                        continue;
                    }
                    room(
                        &mut self.marks,
                        self.limits.max_stack,
                        self.at,
                        "open MARKs",
                    )?;
                    self.marks.push(self.stack.len())
                }
                b'0' => {
                    self.guard(1)?;
                    self.pop()?;
                }
                b'1' => {
                    self.pop_mark()?;
                }
                b'2' => {
                    self.guard(1)?;
                    let v = self.top()?;
                    self.pin(v);
                    self.push(v)?;
                }
                b'N' => self.push(Value::None)?,
                0x88 => self.push(Value::Bool(true))?,
                0x89 => self.push(Value::Bool(false))?,
                b'J' => {
                    let v = self.u32()? as i32;
                    self.push(Value::Int(v as i64))?
                }
                b'K' => {
                    let v = self.u8()?;
                    self.push(Value::Int(v as i64))?
                }
                b'M' => {
                    let v = self.u16()?;
                    self.push(Value::Int(v as i64))?
                }
                0x8a => {
                    let n = self.u8()? as u64;
                    let b = self.take(n)?;
                    let v = self.int_from_le(b)?;
                    self.push(v)?
                }
                0x8b => {
                    let n = self.u32()? as i32;
                    if n < 0 {
                        return Err(self.malformed("a non-negative length", n.to_string()));
                    }
                    let b = self.take(n as u64)?;
                    let v = self.int_from_le(b)?;
                    self.push(v)?
                }
                b'I' | b'L' => {
                    let s = self.line()?;
                    let v = self.parse_text_int(s)?;
                    self.push(v)?
                }
                b'F' => {
                    let s = self.line()?;
                    let f = std::str::from_utf8(s)
                        .ok()
                        .and_then(|t| t.trim().parse::<f64>().ok())
                        .ok_or_else(|| {
                            self.malformed(
                                "a decimal float",
                                String::from_utf8_lossy(s)
                                    .chars()
                                    .take(40)
                                    .collect::<String>(),
                            )
                        })?;
                    self.push(Value::Float(f))?
                }
                b'G' => {
                    let b = self.take(8)?;
                    let mut a = [0u8; 8];
                    a.copy_from_slice(b);
                    self.push(Value::Float(f64::from_be_bytes(a)))?
                }
                b'X' => {
                    let n = self.u32()? as u64;
                    let s = self.take(n)?;
                    let sp = self.span(s)?;
                    self.push(Value::Str(sp))?
                }
                0x8c => {
                    let n = self.u8()? as u64;
                    let s = self.take(n)?;
                    let sp = self.span(s)?;
                    self.push(Value::Str(sp))?
                }
                0x8d => {
                    let n = self.u64()?;
                    let s = self.take(n)?;
                    let sp = self.span(s)?;
                    self.push(Value::Str(sp))?
                }
                b'V' => {
                    let s = self.line()?;
                    if s.contains(&b'\\') || !s.is_ascii() {
                        // Latin-1 bytes and \\u escapes: decode; plain ASCII is borrowed as is.
                        let decoded = decode_raw_unicode_escape(s).ok_or_else(|| {
                            self.malformed("raw-unicode-escape text", "a bad escape")
                        })?;
                        self.arena.owned.push(decoded);
                        self.push(Value::OwnedStr((self.arena.owned.len() - 1) as u32))?
                    } else {
                        let sp = self.span(s)?;
                        self.push(Value::Str(sp))?
                    }
                }
                b'S' => {
                    // Protocol 0 quoted string (a Python 2 `str`); kept as bytes without the quotes.
                    let s = self.line()?;
                    let inner = if s.len() >= 2
                        && (s[0] == b'\'' || s[0] == b'"')
                        && s[s.len() - 1] == s[0]
                    {
                        &s[1..s.len() - 1]
                    } else {
                        return Err(self.malformed(
                            "a quoted string",
                            String::from_utf8_lossy(s)
                                .chars()
                                .take(40)
                                .collect::<String>(),
                        ));
                    };
                    let sp = self.span(inner)?;
                    self.push(Value::Bytes(sp))?
                }
                b'T' => {
                    let n = self.u32()? as i32;
                    if n < 0 {
                        return Err(self.malformed("a non-negative length", n.to_string()));
                    }
                    let s = self.take(n as u64)?;
                    let sp = self.span(s)?;
                    self.push(Value::Bytes(sp))?
                }
                b'U' => {
                    let n = self.u8()? as u64;
                    let s = self.take(n)?;
                    let sp = self.span(s)?;
                    self.push(Value::Bytes(sp))?
                }
                b'B' => {
                    let n = self.u32()? as u64;
                    let s = self.take(n)?;
                    let sp = self.span(s)?;
                    self.push(Value::Bytes(sp))?
                }
                b'C' => {
                    let n = self.u8()? as u64;
                    let s = self.take(n)?;
                    let sp = self.span(s)?;
                    self.push(Value::Bytes(sp))?
                }
                0x8e | 0x96 => {
                    let n = self.u64()?;
                    let s = self.take(n)?;
                    let sp = self.span(s)?;
                    self.push(Value::Bytes(sp))?
                }
                b']' => {
                    let id = self.new_obj(Container::Seq(Vec::new()))?;
                    self.push(Value::List(id))?
                }
                b'l' => {
                    let items = self.pop_mark()?;
                    let id = self.new_obj(Container::Seq(items))?;
                    self.push(Value::List(id))?
                }
                b'a' => {
                    self.guard(2)?;
                    self.finalize_from(
                        self.stack
                            .len()
                            .saturating_sub(1)
                            .max(self.marks.last().copied().unwrap_or(0)),
                    )?;
                    let v = self.pop()?;
                    let list = self.top()?;
                    self.seq_mut(list)?.push(v);
                }
                b'e' | 0x90 => {
                    let m = self.take_mark()?;
                    let list = self.below(m)?;
                    let id = match list {
                        Value::List(id) | Value::Set(id) => id,
                        other => {
                            return Err(self.malformed("a list or set to add to", other.kind()))
                        }
                    };
                    match &mut self.arena.objects[id.0 as usize] {
                        Container::Seq(v) => v.extend_from_slice(&self.stack[m..]),
                        _ => {
                            return Err(self.malformed(
                                "a list still being built",
                                "a list that was already complete",
                            ));
                        }
                    }
                    self.stack.truncate(m);
                }
                b')' => {
                    let id = self.new_obj(Container::Seq(Vec::new()))?;
                    self.push(Value::Tuple(id))?
                }
                b't' => {
                    let items = self.pop_mark()?;
                    let id = self.new_obj(Container::Seq(items))?;
                    self.push(Value::Tuple(id))?
                }
                0x85..=0x87 => {
                    let n = (op - 0x84) as usize;
                    let floor = self.marks.last().copied().unwrap_or(0);
                    if self.stack.len() < floor + n {
                        return Err(self.malformed(
                            "enough values on the stack",
                            format!("{}", self.stack.len() - floor),
                        ));
                    }
                    self.guard(n)?;
                    self.finalize_from(self.stack.len() - n)?;
                    let items = self.stack.split_off(self.stack.len() - n);
                    let id = self.new_obj(Container::Seq(items))?;
                    self.push(Value::Tuple(id))?
                }
                b'}' => {
                    if self.fast.on && self.fast_entry()? {
                        continue;
                    }
                    let pairs = self.dict_pool.pop().unwrap_or_default();
                    let id = self.new_obj(Container::Dict(pairs))?;
                    self.push(Value::Dict(id))?
                }
                b'd' => {
                    let items = self.pop_mark()?;
                    if items.len() % 2 != 0 {
                        return Err(self.malformed("key/value pairs", "an odd number of items"));
                    }
                    let pairs = items.chunks_exact(2).map(|c| (c[0], c[1])).collect();
                    let id = self.new_obj(Container::Dict(pairs))?;
                    self.push(Value::Dict(id))?
                }
                b's' => {
                    self.guard(3)?;
                    self.finalize_from(
                        self.stack
                            .len()
                            .saturating_sub(2)
                            .max(self.marks.last().copied().unwrap_or(0)),
                    )?;
                    let v = self.pop()?;
                    let k = self.pop()?;
                    let d = self.top()?;
                    self.dict_mut(d)?.push((k, v));
                }
                b'u' => {
                    let m = self.take_mark()?;
                    if !(self.stack.len() - m).is_multiple_of(2) {
                        return Err(self.malformed("key/value pairs", "an odd number of items"));
                    }
                    let d = self.below(m)?;
                    let id = match d {
                        Value::Dict(id) => id,
                        other => return Err(self.malformed("a dict to set items in", other.kind())),
                    };
                    match &mut self.arena.objects[id.0 as usize] {
                        Container::Dict(v) => {
                            v.extend(self.stack[m..].chunks_exact(2).map(|c| (c[0], c[1])))
                        }
                        _ => {
                            return Err(self.malformed(
                                "a dict still being built",
                                "a dict that was already complete",
                            ))
                        }
                    }
                    self.stack.truncate(m);
                }
                0x8f => {
                    let id = self.new_obj(Container::Seq(Vec::new()))?;
                    self.push(Value::Set(id))?
                }
                0x91 => {
                    let items = self.pop_mark()?;
                    let id = self.new_obj(Container::Seq(items))?;
                    self.push(Value::Set(id))?
                }
                b'p' => {
                    let s = self.line()?;
                    let idx = std::str::from_utf8(s)
                        .ok()
                        .and_then(|t| t.trim().parse::<u64>().ok())
                        .ok_or_else(|| {
                            self.malformed(
                                "a memo index",
                                String::from_utf8_lossy(s)
                                    .chars()
                                    .take(40)
                                    .collect::<String>(),
                            )
                        })?;
                    self.guard(1)?;
                    let v = self.top()?;
                    self.memo_put(idx, v)?;
                }
                b'q' => {
                    let idx = self.u8()? as u64;
                    self.guard(1)?;
                    let v = self.top()?;
                    self.memo_put(idx, v)?;
                }
                b'r' => {
                    let idx = self.u32()? as u64;
                    self.guard(1)?;
                    let v = self.top()?;
                    self.memo_put(idx, v)?;
                }
                0x94 => {
                    self.guard(1)?;
                    let v = self.top()?;
                    let idx = (self.memo.len() + self.sparse_memo.len()) as u64;
                    self.memo_put(idx, v)?;
                }
                b'g' => {
                    let s = self.line()?;
                    let idx = std::str::from_utf8(s)
                        .ok()
                        .and_then(|t| t.trim().parse::<u64>().ok())
                        .ok_or_else(|| {
                            self.malformed(
                                "a memo index",
                                String::from_utf8_lossy(s)
                                    .chars()
                                    .take(40)
                                    .collect::<String>(),
                            )
                        })?;
                    self.memo_get(idx)?;
                }
                b'h' => {
                    let idx = self.u8()? as u64;
                    self.memo_get(idx)?;
                }
                b'j' => {
                    let idx = self.u32()? as u64;
                    self.memo_get(idx)?;
                }
                other => {
                    return Err(PickleError::UnknownOpcode {
                        opcode: other,
                        offset: self.at,
                    })
                }
            }
        }
    }
}

/// Most decimal digits accepted in a protocol-0 integer: CPython's own default limit
/// (`sys.int_info.default_max_str_digits`), which bounds the quadratic conversion below.
pub const MAX_INT_DIGITS: usize = 4300;

/// Decimal text (optionally signed) to little-endian two's complement bytes.
fn decimal_to_le(t: &str) -> Option<Vec<u8>> {
    let (neg, digits) = match t.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    if digits.is_empty()
        || digits.len() > MAX_INT_DIGITS
        || !digits.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    // Magnitude, little-endian base 256, fed nine digits at a time (9x fewer passes).
    let mut mag: Vec<u8> = vec![0];
    for chunk in digits.as_bytes().chunks(9) {
        let mul = 10u64.pow(chunk.len() as u32);
        let mut carry = chunk.iter().fold(0u64, |a, &d| a * 10 + (d - b'0') as u64);
        for byte in mag.iter_mut() {
            let v = *byte as u64 * mul + carry;
            *byte = (v & 0xff) as u8;
            carry = v >> 8;
        }
        while carry > 0 {
            mag.push((carry & 0xff) as u8);
            carry >>= 8;
        }
    }
    // Room for the sign bit.
    mag.push(0);
    if neg {
        // Two's complement: invert and add one.
        let mut carry = 1u16;
        for byte in mag.iter_mut() {
            let v = (!*byte) as u16 + carry;
            *byte = (v & 0xff) as u8;
            carry = v >> 8;
        }
    }
    // Trim redundant sign bytes.
    while mag.len() > 1 {
        let last = mag[mag.len() - 1];
        let prev_sign = mag[mag.len() - 2] & 0x80;
        if (last == 0 && prev_sign == 0) || (last == 0xff && prev_sign != 0) {
            mag.pop();
        } else {
            break;
        }
    }
    Some(mag)
}

fn decode_raw_unicode_escape(s: &[u8]) -> Option<String> {
    // Python's raw-unicode-escape: bytes are Latin-1, except \uXXXX and \UXXXXXXXX.
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'\\' && i + 1 < s.len() && (s[i + 1] == b'u' || s[i + 1] == b'U') {
            let n = if s[i + 1] == b'u' { 4 } else { 8 };
            let hex = s.get(i + 2..i + 2 + n)?;
            let cp = u32::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
            out.push(char::from_u32(cp)?);
            i += 2 + n;
        } else {
            out.push(s[i] as char);
            i += 1;
        }
    }
    Some(out)
}

impl<'a> Pickle<'a> {
    pub fn root(&self) -> Value {
        self.root
    }
}

impl<'a> Arena<'a> {
    /// Number of containers decoded (lists, tuples, dicts, sets).
    pub fn container_count(&self) -> usize {
        self.objects.len()
    }

    /// The tag a [`Finalizer`] gave this container, if it took it.
    pub fn final_tag(&self, v: Value) -> Option<u32> {
        match v {
            Value::FinalSeq(t) | Value::FinalDict(t) => Some(t),
            Value::List(id) | Value::Tuple(id) | Value::Set(id) | Value::Dict(id) => {
                match self.objects[id.0 as usize] {
                    Container::FinalSeq(t) | Container::FinalDict(t) => Some(t),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// The items of a list, tuple or set; `None` for anything else.
    pub fn seq(&self, v: Value) -> Option<&[Value]> {
        match v {
            Value::EmptyList | Value::EmptyTuple => Some(&[]),
            Value::List(id) | Value::Tuple(id) | Value::Set(id) => {
                match &self.objects[id.0 as usize] {
                    Container::Seq(items) => Some(items),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// The pairs of a dict, in insertion order; `None` for anything else.
    pub fn dict(&self, v: Value) -> Option<&[(Value, Value)]> {
        match v {
            Value::EmptyDict => Some(&[]),
            Value::Dict(id) => match &self.objects[id.0 as usize] {
                Container::Dict(items) => Some(items),
                _ => None,
            },
            _ => None,
        }
    }

    /// The raw bytes of a `str` (UTF-8 as the pickle stored it) or `bytes` value.
    pub fn raw_bytes(&self, v: Value) -> Option<&'a [u8]> {
        match v {
            Value::Str(sp) | Value::Bytes(sp) => Some(&self.data[sp.range()]),
            _ => None,
        }
    }

    /// Little-endian two's complement bytes of an integer too big for `i64`.
    pub fn bigint_bytes(&self, v: Value) -> Option<&[u8]> {
        match v {
            Value::BigInt(sp) => Some(&self.data[sp.range()]),
            Value::OwnedBigInt(i) => Some(&self.owned_ints[i as usize]),
            _ => None,
        }
    }

    /// A `str` value as text, borrowed from the input where possible. Invalid UTF-8
    /// (Python's `surrogatepass` output) is replaced rather than rejected.
    pub fn str(&self, v: Value) -> Option<std::borrow::Cow<'_, str>> {
        match v {
            Value::Str(_) => Some(String::from_utf8_lossy(self.raw_bytes(v)?)),
            Value::OwnedStr(i) => Some(std::borrow::Cow::Borrowed(self.owned[i as usize].as_str())),
            _ => None,
        }
    }

    /// [`Arena::str`], cut to [`MAX_TEXT`] bytes (and marked with `…`): what the snapshot
    /// builder takes into the model, so a hostile gigabyte string (a frame's file name, say)
    /// costs no gigabyte copy and no allocation that could abort.
    pub fn str_bounded(&self, v: Value) -> Option<std::borrow::Cow<'_, str>> {
        match v {
            Value::Str(_) => {
                let b = self.raw_bytes(v)?;
                if b.len() <= MAX_TEXT {
                    return Some(String::from_utf8_lossy(b));
                }
                let mut s = String::from_utf8_lossy(&b[..MAX_TEXT]).into_owned();
                s.push('…');
                Some(std::borrow::Cow::Owned(s))
            }
            _ => self.str(v),
        }
    }

    /// Whether `v` is the `str` `key`, compared as bytes (no decoding).
    #[inline]
    pub fn str_eq(&self, v: Value, key: &str) -> bool {
        match v {
            Value::Str(sp) => {
                // Lengths first, and a short key byte by byte: the builder asks this of every
                // trace entry's metadata (`""`, `"N/A"`), where a `memcmp` call costs more
                // than the comparison.
                let key = key.as_bytes();
                if sp.len() != key.len() {
                    return false;
                }
                let b = &self.data[sp.range()];
                if key.len() <= 16 {
                    return b.iter().zip(key).all(|(x, y)| x == y);
                }
                b == key
            }
            Value::OwnedStr(i) => self.owned[i as usize] == key,
            _ => false,
        }
    }

    /// Looks `key` up in a dict whose keys are strings.
    #[inline]
    pub fn get(&self, dict: Value, key: &str) -> Option<Value> {
        self.dict(dict)?
            .iter()
            .find(|(k, _)| self.str_eq(*k, key))
            .map(|(_, v)| *v)
    }

    /// An integer value (bools count as 0/1, like Python). Big integers give `None`.
    pub fn int(&self, v: Value) -> Option<i64> {
        match v {
            Value::Int(i) => Some(i),
            Value::Bool(b) => Some(b as i64),
            _ => None,
        }
    }

    /// A number as f64 (ints and floats).
    pub fn float(&self, v: Value) -> Option<f64> {
        match v {
            Value::Int(i) => Some(i as f64),
            Value::Float(f) => Some(f),
            Value::Bool(b) => Some(b as i64 as f64),
            _ => None,
        }
    }

    /// The first `n` characters of a `str` value, reading no more of it than they need (a
    /// string may be gigabytes of a hostile file: decoding or copying it all is not bounded).
    fn str_prefix(&self, v: Value, n: usize) -> Option<String> {
        let s = match v {
            Value::Str(_) => {
                let b = self.raw_bytes(v)?;
                // A character is at most 4 bytes; a cut one at the end becomes U+FFFD.
                String::from_utf8_lossy(&b[..b.len().min(4 * n)]).into_owned()
            }
            _ => self.str(v)?.into_owned(),
        };
        Some(s.chars().take(n).collect())
    }

    /// A short, bounded description of a value for error messages (never recurses deeply).
    pub fn describe(&self, v: Value) -> String {
        match v {
            Value::Str(_) | Value::OwnedStr(_) => {
                let short = self.str_prefix(v, 40).unwrap_or_default();
                format!("str {short:?}")
            }
            Value::Int(i) => format!("int {i}"),
            Value::Dict(_) | Value::EmptyDict => {
                let keys: Vec<String> = self
                    .dict(v)
                    .unwrap_or(&[])
                    .iter()
                    .take(6)
                    .map(|(k, _)| {
                        self.str_prefix(*k, 40)
                            .map(|s| crate::escape::one_line(&s).into_owned())
                            .unwrap_or_else(|| k.kind().to_string())
                    })
                    .collect();
                format!("dict with keys [{}]", keys.join(", "))
            }
            Value::List(_)
            | Value::Tuple(_)
            | Value::Set(_)
            | Value::EmptyList
            | Value::EmptyTuple => {
                format!(
                    "{} of {} items",
                    v.kind(),
                    self.seq(v).map_or(0, |s| s.len())
                )
            }
            other => other.kind().to_string(),
        }
    }
}

/// The two's-complement integer of up to 8 little-endian bytes (`LONG1`'s payload), sign
/// extended; 0 for none. Built in a register: copying a short slice into an 8-byte array and
/// reading it back stalled the decoder on a store-to-load forward once per address (issue #43).
#[inline]
fn le_i64(b: &[u8]) -> i64 {
    let mut v = 0u64;
    for (i, &x) in b.iter().enumerate().take(8) {
        v |= u64::from(x) << (8 * i);
    }
    let bits = 8 * b.len().min(8) as u32;
    if bits == 0 || bits == 64 {
        return v as i64;
    }
    // The sign bit shifted to the top and back: the arithmetic shift extends it.
    ((v << (64 - bits)) as i64) >> (64 - bits)
}

#[cfg(test)]
mod le_tests {
    #[test]
    fn le_i64_matches_the_padded_array_reading() {
        let cases: [&[u8]; 9] = [
            &[],
            &[0x7f],
            &[0x80],
            &[0xff, 0x7f],
            &[0x00, 0x80],
            &[1, 2, 3, 4, 5, 0x7f],
            &[0x00, 0x00, 0x20, 0x03, 0x7f, 0xf0],
            &[0xff; 8],
            &[0, 0, 0, 0, 0, 0, 0, 0x80],
        ];
        for b in cases {
            let want = if b.is_empty() {
                0
            } else {
                let neg = b[b.len() - 1] & 0x80 != 0;
                let mut a = if neg { [0xffu8; 8] } else { [0u8; 8] };
                a[..b.len()].copy_from_slice(b);
                i64::from_le_bytes(a)
            };
            assert_eq!(super::le_i64(b), want, "{b:?}");
        }
    }
}
