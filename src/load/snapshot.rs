//! Turns a decoded snapshot pickle into the [`model`](crate::model).
//!
//! Every PyTorch version from 2.0 to 2.11 wrote a slightly different dict, so this walks the
//! pickle by key and tolerates what is missing: unknown keys are ignored, missing optional ones
//! become `None`, and only a shape that cannot be a snapshot at all is an error. Frame lists
//! are decoded once per pickle object (the memo shares them), then interned by content.

use rustc_hash::FxHashMap as HashMap;

use super::pickle::{Arena, Finalizer, Limits, ObjId, Pickle, PickleError, Span, Value};
use crate::model::{
    Action, AllocatorSettings, Annotation, Block, BlockState, Device, EventData, EventMeta, Events,
    FrameId, FxNode, Layout, LoadNote, MetaId, Pool, Segment, Snapshot, StackId, Stacks, Sym,
    UnknownState,
};

/// Why a decoded pickle is not a usable snapshot.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SnapshotError {
    #[error("the pickle holds {found}, not a memory snapshot (expected a dict with 'segments' and 'device_traces', or a list of segments)")]
    NotASnapshot { found: String },
    #[error("{path}: expected {expected}, found {found}")]
    Shape {
        path: String,
        expected: &'static str,
        found: String,
    },
}

/// What the loader has built so far: interned stacks and, when streaming, the trace entries
/// already converted while the pickle was being decoded.
#[derive(Default)]
struct Collected<'x> {
    stacks: Stacks,
    frame_cache: HashMap<ObjId, FrameId>,
    stack_cache: HashMap<ObjId, StackId>,
    scratch: Vec<FrameId>,
    notes: Vec<LoadNote>,
    /// Trace entries converted as soon as they were complete (tag `EVENT_TAG | index`).
    events: Events,
    on_progress: Option<&'x mut dyn FnMut(usize)>,
    /// Blocks whose state was not one torch writes, and the first of them.
    bad_states: usize,
    first_bad_state: UnknownState,
    /// Entry metadata, interned (`metas[0]` is the empty one once any is read).
    metas: Vec<EventMeta>,
    meta_ids: HashMap<EventMeta, MetaId>,
    /// The actions of the last few `str` values read as one (a trace names its few actions
    /// through the memo, so the same span comes back for every entry).
    actions: Vec<(Span, Action)>,
}

/// Marks a finalized dict as a trace entry (its index in `Collected::events`); other finalized
/// dicts are frames (their `FrameId`). Finalized lists are stacks (their `StackId`).
const EVENT_TAG: u32 = 1 << 31;

/// Reads snapshot structures out of a pickle arena into a [`Collected`].
struct Builder<'p, 'a, 's, 'x> {
    p: &'p Arena<'a>,
    st: &'s mut Collected<'x>,
}

fn get_in(p: &Arena<'_>, pairs: &[(Value, Value)], key: &str) -> Option<Value> {
    pairs
        .iter()
        .find(|(k, _)| p.str_eq(*k, key))
        .map(|(_, v)| *v)
}

/// An entry's `action`, read from the bytes where they are UTF-8 (no lossy copy per entry):
/// invalid UTF-8 or a text past `MAX_TEXT` names no action either way. `None` for a non-text.
fn action_of(p: &Arena<'_>, v: Value) -> Option<Action> {
    match v {
        Value::Str(_) => {
            Some(std::str::from_utf8(p.raw_bytes(v)?).map_or(Action::Other, Action::parse))
        }
        _ => Some(Action::parse(&p.str_bounded(v)?)),
    }
}

fn as_u64(p: &Arena<'_>, v: Value) -> Option<u64> {
    match v {
        Value::Int(i) => Some(i as u64),
        Value::Bool(b) => Some(b as u64),
        // A big int (e.g. SIZE_MAX written as an unsigned 64-bit value with a sign byte).
        Value::BigInt(_) | Value::OwnedBigInt(_) => p.bigint_as_u64(v),
        _ => None,
    }
}

/// The keys of a trace entry the builder reads, in the order of [`Slots`].
const ENTRY_KEYS: [&[u8]; 10] = [
    b"action",
    b"addr",
    b"size",
    b"stream",
    b"time_us",
    b"device_free",
    b"frames",
    b"user_metadata",
    b"compile_context",
    b"internal_metadata",
];

/// For each of [`ENTRY_KEYS`], the index of the pair that holds it (`u32::MAX`: none).
type Slots = [u32; ENTRY_KEYS.len()];

/// Where an entry's fields are: one pass over the pairs (once per trace entry); only `str`
/// keys count, and the first occurrence of a key wins, as with `get_in`.
fn entry_slots(p: &Arena<'_>, pairs: &[(Value, Value)]) -> Slots {
    let mut slots = [u32::MAX; ENTRY_KEYS.len()];
    for (i, &(k, _)) in pairs.iter().enumerate() {
        let Some(key) = p.raw_bytes(k).filter(|_| matches!(k, Value::Str(_))) else {
            continue;
        };
        if let Some(f) = ENTRY_KEYS.iter().position(|&e| e == key) {
            if slots[f] == u32::MAX {
                slots[f] = i as u32;
            }
        }
    }
    slots
}

impl<'a> Finalizer<'a> for Collected<'_> {
    fn seq(&mut self, arena: &Arena<'a>, items: &[Value]) -> Option<u32> {
        // A list whose items are all frames is a stack. Empty lists stay generic (they may
        // still be filled, e.g. by a recursive structure).
        if items.is_empty() {
            return None;
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        for &v in items {
            match (v, arena.final_tag(v)) {
                (Value::FinalDict(t), _) | (Value::Dict(_), Some(t)) if t < EVENT_TAG => {
                    scratch.push(FrameId(t))
                }
                _ => {
                    self.scratch = scratch;
                    return None;
                }
            }
        }
        let s = self.stacks.intern_stack(&scratch);
        self.scratch = scratch;
        Some(s.0)
    }

    fn dict(&mut self, arena: &Arena<'a>, pairs: &[(Value, Value)]) -> Option<u32> {
        // A trace entry has an `action`; a frame has `filename`, `line`, `name`, up to four FX
        // fields and no `action`. One pass finds an entry's fields (`entry_slots`); a dict
        // without a `str` key `action` is looked at again only where it may still be an entry
        // by a decoded (protocol 0) key, which the entry reading does not take either.
        let slots = entry_slots(arena, pairs);
        if slots[0] != u32::MAX {
            let at = |i: usize| pairs.get(slots[i] as usize).map(|&(_, v)| v);
            let fields: [Option<Value>; ENTRY_KEYS.len()] = std::array::from_fn(at);
            return self.entry(arena, &fields);
        }
        if get_in(arena, pairs, "action").is_some() {
            return None;
        }
        let mut b = Builder { p: arena, st: self };
        if pairs.len() <= 8 && get_in(arena, pairs, "filename").is_some() {
            let f = b.frame_from_pairs(pairs);
            return (f.0 < EVENT_TAG).then_some(f.0);
        }
        None
    }

    fn progress(&mut self, offset: usize) {
        if let Some(f) = self.on_progress.as_mut() {
            f(offset);
        }
    }
    fn publish(&self, regions: &super::prefault::Regions) {
        regions.publish(3, self.events.records());
    }

    fn entry_keys(&self) -> &'static [&'static [u8]] {
        &ENTRY_KEYS
    }

    fn entry(&mut self, arena: &Arena<'a>, fields: &[Option<Value>]) -> Option<u32> {
        let mut b = Builder { p: arena, st: self };
        let e = b.event_from_fields(fields)?;
        let idx = self.events.len() as u32;
        if idx >= EVENT_TAG {
            return None;
        }
        self.events.push(e);
        Some(EVENT_TAG | idx)
    }

    fn is_entry_tag(&self, tag: u32) -> bool {
        tag & EVENT_TAG != 0
    }
}

fn shape(path: impl Into<String>, expected: &'static str, found: String) -> SnapshotError {
    SnapshotError::Shape {
        path: path.into(),
        expected,
        found,
    }
}

impl<'p, 'a> Builder<'p, 'a, '_, '_> {
    fn int(&self, d: Value, key: &str) -> Option<i64> {
        self.p.get(d, key).and_then(|v| self.p.int(v))
    }
    fn u64_of(&self, d: Value, key: &str) -> Option<u64> {
        self.p.get(d, key).and_then(|v| as_u64(self.p, v))
    }

    fn frame_from_pairs(&mut self, pairs: &[(Value, Value)]) -> FrameId {
        let p = self.p;
        let file = get_in(p, pairs, "filename")
            .and_then(|x| p.str_bounded(x))
            .unwrap_or_default();
        let name = get_in(p, pairs, "name")
            .and_then(|x| p.str_bounded(x))
            .unwrap_or_default();
        let line = get_in(p, pairs, "line")
            .and_then(|x| p.int(x))
            .unwrap_or(0)
            .clamp(0, u32::MAX as i64) as u32;
        let id = self.st.stacks.intern_frame(&file, line, &name);
        if pairs.len() > 3 {
            self.fx_node(pairs, id);
        }
        id
    }

    /// The FX fields `augment_with_fx_traces=True` adds to a frame of an FX-generated file
    /// (torch/_utils.py `_augment_frames`): kept where `fx_node_name` is a string.
    fn fx_node(&mut self, pairs: &[(Value, Value)], id: FrameId) {
        let p = self.p;
        let text = |k: &str| get_in(p, pairs, k).and_then(|x| p.str_bounded(x));
        let Some(name) = text("fx_node_name") else {
            return;
        };
        let stacks = &mut self.st.stacks;
        let name = stacks.intern_str(&name);
        let op = text("fx_node_op").map(|s| stacks.intern_str(&s));
        let target = text("fx_node_target").map(|s| stacks.intern_str(&s));
        let origin = text("fx_original_trace").and_then(|t| {
            let (file, line, func) = crate::model::frames::fx_trace_origin(&t)?;
            Some(stacks.intern_frame(file, line, func))
        });
        stacks.set_fx(
            id,
            FxNode {
                op,
                name,
                target,
                origin,
            },
        );
    }

    /// A metadata value as one opaque line: a string as it is, a number or a bool written
    /// out, anything else described (its structure is not a documented one).
    fn opaque(&mut self, v: Value) -> Option<Sym> {
        let p = self.p;
        let s = match v {
            Value::Int(i) => i.to_string(),
            Value::Bool(b) => if b { "True" } else { "False" }.to_string(),
            Value::None => return None,
            _ => match p.str_bounded(v) {
                Some(s) => s.into_owned(),
                None => p.describe(v),
            },
        };
        Some(self.st.stacks.intern_str(&s))
    }

    /// Interns an entry's metadata: `""` and `"N/A"` (torch's "none") are no metadata.
    fn meta(
        &mut self,
        user: Option<Value>,
        region: Option<Value>,
        internal: Option<Value>,
    ) -> MetaId {
        if user.is_none() && region.is_none() && internal.is_none() {
            return MetaId::NONE;
        }
        let p = self.p;
        // Compared as bytes: a lossy or cut text equals `""` or `"N/A"` only when its bytes do.
        let none_if =
            |v: Option<Value>, empty: &[&str]| v.filter(|x| !empty.iter().any(|e| p.str_eq(*x, e)));
        let m = EventMeta {
            user: none_if(user, &[""]).and_then(|v| self.opaque(v)),
            region: none_if(region, &["", "N/A"]).and_then(|v| self.opaque(v)),
            internal: none_if(internal, &[""]).and_then(|v| self.opaque(v)),
        };
        if m == EventMeta::default() {
            return MetaId::NONE;
        }
        let st = &mut *self.st;
        if st.metas.is_empty() {
            st.metas.push(EventMeta::default());
        }
        if let Some(&id) = st.meta_ids.get(&m) {
            return id;
        }
        let id = MetaId(st.metas.len() as u32);
        st.metas.push(m);
        st.meta_ids.insert(m, id);
        id
    }

    fn frame(&mut self, v: Value) -> Option<FrameId> {
        if let Some(t) = self.p.final_tag(v) {
            return (t < EVENT_TAG).then_some(FrameId(t));
        }
        let id = match v {
            Value::Dict(id) => id,
            _ => return None,
        };
        if let Some(&f) = self.st.frame_cache.get(&id) {
            return Some(f);
        }
        let pairs = self.p.dict(v)?;
        let f = self.frame_from_pairs(pairs);
        self.st.frame_cache.insert(id, f);
        Some(f)
    }

    /// Interns the stack of a `frames` list, decoding each shared list object only once.
    fn stack(&mut self, frames: Option<Value>) -> StackId {
        let Some(v) = frames else {
            return StackId::EMPTY;
        };
        if let Some(t) = self.p.final_tag(v) {
            return StackId(t);
        }
        let id = match v {
            Value::List(id) | Value::Tuple(id) => id,
            _ => return StackId::EMPTY,
        };
        if let Some(&s) = self.st.stack_cache.get(&id) {
            return s;
        }
        let items = self.p.seq(v).unwrap_or(&[]);
        let mut scratch = std::mem::take(&mut self.st.scratch);
        scratch.clear();
        for &f in items {
            if let Some(fid) = self.frame(f) {
                scratch.push(fid);
            }
        }
        let s = self.st.stacks.intern_stack(&scratch);
        self.st.scratch = scratch;
        self.st.stack_cache.insert(id, s);
        s
    }

    fn segment(&mut self, v: Value, i: usize) -> Result<Segment, SnapshotError> {
        let p = self.p;
        if p.dict(v).is_none() {
            return Err(shape(format!("segments[{i}]"), "a dict", p.describe(v)));
        }
        let address = self.u64_of(v, "address").ok_or_else(|| {
            shape(
                format!("segments[{i}].address"),
                "an integer",
                self.p
                    .get(v, "address")
                    .map_or("nothing".into(), |x| p.describe(x)),
            )
        })?;
        let total_size = self.u64_of(v, "total_size").ok_or_else(|| {
            shape(
                format!("segments[{i}].total_size"),
                "an integer",
                "nothing".into(),
            )
        })?;
        let device = self.int(v, "device").unwrap_or(0).max(0) as u32;
        let stream = self.u64_of(v, "stream").unwrap_or(0);
        let pool = match p
            .get(v, "segment_type")
            .and_then(|x| p.str_bounded(x))
            .as_deref()
        {
            Some("small") => Pool::Small,
            Some("large") => Pool::Large,
            _ => {
                if total_size <= crate::model::SMALL_BUFFER {
                    Pool::Small
                } else {
                    Pool::Large
                }
            }
        };
        let segment_pool_id = p.get(v, "segment_pool_id").and_then(|x| {
            let s = p.seq(x)?;
            Some((p.int(*s.first()?)?, p.int(*s.get(1)?)?))
        });
        let is_expandable = matches!(p.get(v, "is_expandable"), Some(Value::Bool(true)));
        let stack = self.stack(p.get(v, "frames"));
        let blocks_v = p.get(v, "blocks");
        let items = blocks_v.and_then(|b| p.seq(b)).unwrap_or(&[]);
        let mut blocks = Vec::with_capacity(items.len());
        let mut next_addr = address;
        for (j, &b) in items.iter().enumerate() {
            if p.dict(b).is_none() {
                return Err(shape(
                    format!("segments[{i}].blocks[{j}]"),
                    "a dict",
                    p.describe(b),
                ));
            }
            let size = self.u64_of(b, "size").unwrap_or(0);
            let requested_size = self.u64_of(b, "requested_size").unwrap_or(0);
            let state_s = p.get(b, "state").and_then(|x| p.str_bounded(x));
            let state = match state_s.as_deref().and_then(BlockState::parse) {
                Some(s) => s,
                None => {
                    // One note for all of them, naming the first (a damaged file may have millions).
                    if self.st.bad_states == 0 {
                        self.st.first_bad_state = UnknownState {
                            segment: i,
                            block: j,
                            state: state_s.as_deref().map(str::to_owned),
                        };
                    }
                    self.st.bad_states += 1;
                    BlockState::Inactive
                }
            };
            // torch 2.0 blocks have no address: they tile the segment in order.
            let address = self.u64_of(b, "address").unwrap_or(next_addr);
            next_addr = address.saturating_add(size);
            let mut stack = self.stack(p.get(b, "frames"));
            if stack == StackId::EMPTY {
                // torch 2.0: `history` holds the allocations of this block; the last is the live one.
                if let Some(h) = p.get(b, "history").and_then(|h| p.seq(h)) {
                    if let Some(&last) = h.last() {
                        stack = self.stack(p.get(last, "frames"));
                    }
                }
            }
            blocks.push(Block {
                address,
                size,
                requested_size,
                state,
                stack,
            });
        }
        Ok(Segment {
            device,
            address,
            total_size,
            stream,
            pool,
            segment_pool_id,
            is_expandable,
            stack,
            blocks,
        })
    }

    fn event(&mut self, v: Value) -> Option<EventData> {
        if let Some(t) = self.p.final_tag(v) {
            return (t & EVENT_TAG != 0)
                .then(|| self.st.events.data((t & !EVENT_TAG) as usize))
                .flatten();
        }
        let pairs = self.p.dict(v)?;
        self.event_from_pairs(pairs)
    }

    fn event_from_pairs(&mut self, pairs: &[(Value, Value)]) -> Option<EventData> {
        let slots = entry_slots(self.p, pairs);
        let at = |i: usize| pairs.get(slots[i] as usize).map(|&(_, v)| v);
        let fields: [Option<Value>; ENTRY_KEYS.len()] = std::array::from_fn(at);
        self.event_from_fields(&fields)
    }

    /// An entry from the values of its [`ENTRY_KEYS`] (the first occurrence of each), as the
    /// generic path finds them (`entry_slots`) and as the decoder's trace-entry fast path
    /// reads them.
    /// [`action_of`], remembered for the last 16 `str` spans (a span is fixed bytes of the
    /// input, so it always reads as the same action).
    /// Read through a reference and compared by span, not copied as a `Value`: a `Value`
    /// copied to the stack and read back by its parts stalled the decoder on a store-to-load
    /// forward once per entry (issue #43).
    fn action(&mut self, v: &Value) -> Option<Action> {
        let &Value::Str(span) = v else {
            return action_of(self.p, *v);
        };
        let v = *v;
        let cache = &mut self.st.actions;
        if let Some(&(_, a)) = cache.iter().find(|(k, _)| *k == span) {
            return Some(a);
        }
        let a = action_of(self.p, v)?;
        if cache.len() == 16 {
            cache.remove(0);
        }
        cache.push((span, a));
        Some(a)
    }

    fn event_from_fields(&mut self, fields: &[Option<Value>]) -> Option<EventData> {
        let p = self.p;
        let at = |i: usize| fields.get(i).copied().flatten();
        let action = self.action(fields.first()?.as_ref()?)?;
        let num = |v: Option<Value>| v.and_then(|x| as_u64(p, x));
        Some(EventData {
            action,
            addr: num(at(1)).unwrap_or(0),
            size: num(at(2)).unwrap_or(0),
            stream: num(at(3)).unwrap_or(0),
            time_us: at(4).and_then(|x| p.int(x)),
            device_free: num(at(5)),
            stack: self.stack(at(6)),
            meta: self.meta(at(7), at(8), at(9)),
        })
    }

    /// `{"devices": [{"index": 0, "total_memory": 85017493504}, ...]}`, which `memscope run`
    /// adds under the snapshot's `memscope` key. Sizes past 4 PiB (no device has them) and
    /// repeated indices are dropped: the key is attacker data like the rest.
    fn device_memory(&self, v: Option<Value>) -> Vec<crate::model::DeviceMemory> {
        let p = self.p;
        let Some(items) = v
            .filter(|v| p.dict(*v).is_some())
            .and_then(|v| p.get(v, "devices"))
            .and_then(|d| p.seq(d))
        else {
            return Vec::new();
        };
        let mut out: Vec<crate::model::DeviceMemory> = Vec::new();
        for &d in items.iter().take(1024) {
            let (Some(index), Some(total)) = (self.int(d, "index"), self.int(d, "total_memory"))
            else {
                continue;
            };
            if !(0..=i64::from(u32::MAX)).contains(&index) || total <= 0 || total >= 1 << 52 {
                continue;
            }
            if out.iter().any(|m| m.index == index as u32) {
                continue;
            }
            let nvml = p
                .get(d, "nvml")
                .and_then(|n| super::device_record::nvml(p, n));
            out.push(crate::model::DeviceMemory {
                index: index as u32,
                total_bytes: total as u64,
                free_bytes: super::device_record::bytes(p, p.get(d, "free")),
                nvml,
                context_bytes: p
                    .get(d, "context")
                    .and_then(|c| super::device_record::bytes(p, p.get(c, "bytes"))),
                context_moment: p
                    .get(d, "context")
                    .and_then(|c| super::device_record::context_moment(p, c)),
            });
        }
        out
    }

    fn settings(&self, v: Option<Value>) -> AllocatorSettings {
        let p = self.p;
        let Some(v) = v.filter(|v| p.dict(*v).is_some()) else {
            return AllocatorSettings::default();
        };
        let max_split = self.int(v, "max_split_size");
        let divisions = p
            .get(v, "roundup_power2_divisions")
            .map(|d| match p.dict(d) {
                Some(pairs) => {
                    let mut kv: Vec<(u64, u64)> = pairs
                        .iter()
                        .filter_map(|(k, val)| {
                            let k: u64 = p
                                .str_bounded(*k)?
                                .parse()
                                .ok()
                                .or_else(|| p.int(*k).map(|i| i as u64))?;
                            Some((k, p.int(*val)?.max(0) as u64))
                        })
                        .collect();
                    kv.sort();
                    kv.into_iter().map(|(_, d)| d).collect()
                }
                None => p
                    .seq(d)
                    .unwrap_or(&[])
                    .iter()
                    .map(|x| p.int(*x).unwrap_or(0).max(0) as u64)
                    .collect(),
            })
            .unwrap_or_default();
        AllocatorSettings {
            conf: p
                .get(v, "PYTORCH_CUDA_ALLOC_CONF")
                .and_then(|x| p.str_bounded(x))
                .map(|s| s.into_owned()),
            max_split_size: match max_split {
                Some(m) if m > 0 && (m as u64) < u64::MAX / 2 => Some(m as u64),
                _ => None,
            },
            expandable_segments: match p.get(v, "expandable_segments") {
                Some(Value::Bool(b)) => Some(b),
                _ => None,
            },
            garbage_collection_threshold: p
                .get(v, "garbage_collection_threshold")
                .and_then(|x| p.float(x)),
            roundup_power2_divisions: divisions,
            trace_alloc_overflowed: match p.get(v, "trace_alloc_overflowed") {
                Some(Value::Bool(b)) => Some(b),
                Some(Value::Int(i)) => Some(i != 0),
                _ => None,
            },
            trace_alloc_max_entries: self
                .int(v, "trace_alloc_max_entries")
                .filter(|&n| n >= 0)
                .map(|n| n as u64),
            recorded: true,
        }
    }
}

impl<'a> Arena<'a> {
    /// A big integer that still fits in u64 (e.g. an unsigned address with a sign byte).
    pub fn bigint_as_u64(&self, v: Value) -> Option<u64> {
        let b = self.bigint_bytes(v)?;
        if b.len() > 9 || (b.len() == 9 && b[8] != 0) {
            return None;
        }
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[..8]);
        Some(u64::from_le_bytes(a))
    }
}

/// Why bytes could not be loaded as a snapshot: the pickle itself, or its content.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ParseError {
    #[error("{0}")]
    Pickle(#[from] PickleError),
    #[error("{err} ({events} trace entries and {frames} distinct stacks had been decoded before the end)")]
    Cut {
        err: PickleError,
        events: usize,
        frames: usize,
    },
    #[error("{0}")]
    Snapshot(#[from] SnapshotError),
}

/// Decodes a snapshot pickle in one pass: trace entries and frame lists are converted as soon
/// as they are complete, so memory stays proportional to the model, not to the object tree.
/// `on_progress` is called with the byte offset every few MB.
pub fn parse(
    data: &[u8],
    on_progress: Option<&mut dyn FnMut(usize)>,
) -> Result<Snapshot, ParseError> {
    parse_with(data, on_progress, Decode::default()).0
}

/// How [`parse_with`] decodes.
#[derive(Clone, Copy, Debug)]
pub struct Decode {
    /// Read trace entries straight from their bytes (the decoder's trace-entry fast path);
    /// `false` builds every dict generically. Both give the same snapshot.
    pub entry_fast_path: bool,
}

impl Default for Decode {
    fn default() -> Self {
        Decode {
            entry_fast_path: true,
        }
    }
}

/// What the decode did, for tests and measurements.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecodeReport {
    /// Trace entries the fast path read (in the run whose result is returned).
    pub fast_entries: u64,
    /// The fast path gave up and the pickle was decoded again without it.
    pub decoded_again: bool,
}

/// [`parse`] with a choice of decoder path.
pub fn parse_with(
    data: &[u8],
    on_progress: Option<&mut dyn FnMut(usize)>,
    how: Decode,
) -> (Result<Snapshot, ParseError>, DecodeReport) {
    let mut report = DecodeReport::default();
    let mut on_progress = on_progress;
    if how.entry_fast_path {
        let mut st = collector(data, on_progress.take());
        let limits = Limits::for_input(data.len());
        let fast = super::pickle::parse_streaming_fast(data, limits, &mut st);
        match fast.result {
            Some(r) => {
                report.fast_entries = fast.entries;
                return (finish(r, st), report);
            }
            None => {
                report.decoded_again = true;
                on_progress = st.on_progress.take();
            }
        }
    }
    let mut st = collector(data, on_progress);
    let r = super::pickle::parse_streaming(data, Limits::for_input(data.len()), Some(&mut st));
    (finish(r, st), report)
}

fn collector<'x>(data: &[u8], on_progress: Option<&'x mut dyn FnMut(usize)>) -> Collected<'x> {
    let mut st = Collected {
        stacks: Stacks::new(),
        on_progress,
        ..Collected::default()
    };
    // About one trace entry per 100 to 200 bytes: reserved once (pages are touched only as
    // used), so the events never move and can be faulted in ahead (see `prefault`).
    st.events.try_reserve(data.len() / 128);
    st
}

fn finish(
    r: Result<Pickle<'_>, PickleError>,
    mut st: Collected<'_>,
) -> Result<Snapshot, ParseError> {
    let p = match r {
        Ok(p) => p,
        // Say how far a cut-off file got: the entries decoded before the end are real.
        Err(e @ (PickleError::Truncated { .. } | PickleError::NoStop { .. })) => {
            return Err(ParseError::Cut {
                err: e,
                events: st.events.len(),
                frames: st.stacks.stack_count(),
            })
        }
        Err(e) => return Err(e.into()),
    };
    st.on_progress = None;
    Ok(build(&p, p.root(), st)?)
}

/// Builds a [`Snapshot`] from a pickle decoded without a finalizer.
pub fn from_pickle(p: &Pickle<'_>) -> Result<Snapshot, SnapshotError> {
    let st = Collected {
        stacks: Stacks::new(),
        ..Collected::default()
    };
    build(p, p.root(), st)
}

fn build(p: &Arena<'_>, root: Value, mut st: Collected<'_>) -> Result<Snapshot, SnapshotError> {
    let mut b = Builder { p, st: &mut st };
    // `_snapshot()` returns a dict; very old pickles are a bare list of segments.
    let (segments_v, traces_v) = if p.dict(root).is_some() {
        let segs = p.get(root, "segments");
        let traces = p.get(root, "device_traces");
        if segs.is_none() && traces.is_none() {
            return Err(SnapshotError::NotASnapshot {
                found: p.describe(root),
            });
        }
        (segs, traces)
    } else if let Some(items) = p.seq(root) {
        let looks_like_segments = items.is_empty()
            || items
                .iter()
                .take(3)
                .all(|&s| p.get(s, "total_size").is_some());
        if !looks_like_segments {
            return Err(SnapshotError::NotASnapshot {
                found: p.describe(root),
            });
        }
        (Some(root), None)
    } else {
        return Err(SnapshotError::NotASnapshot {
            found: p.describe(root),
        });
    };

    let seg_items = match segments_v {
        Some(v) => p
            .seq(v)
            .ok_or_else(|| shape("segments", "a list", p.describe(v)))?,
        None => &[],
    };
    let mut segments = Vec::with_capacity(seg_items.len());
    let mut has_history = false;
    let mut has_address = false;
    for (i, &s) in seg_items.iter().enumerate() {
        let seg = b.segment(s, i)?;
        if let Some(blk) = p
            .get(s, "blocks")
            .and_then(|bl| p.seq(bl))
            .and_then(|bl| bl.first().copied())
        {
            has_history |= p.get(blk, "history").is_some();
            has_address |= p.get(blk, "address").is_some();
        }
        segments.push(seg);
    }

    let mut devices: Vec<Device> = Vec::new();
    let mut any_time = false;
    let mut any_event_without_time = false;
    if let Some(tv) = traces_v {
        let per_dev = p.seq(tv).ok_or_else(|| {
            shape(
                "device_traces",
                "a list (one list per device)",
                p.describe(tv),
            )
        })?;
        for (d, &list) in per_dev.iter().enumerate() {
            let items = p.seq(list).ok_or_else(|| {
                shape(
                    format!("device_traces[{d}]"),
                    "a list of trace entries",
                    p.describe(list),
                )
            })?;
            // Streaming usually converted this device's entries in order: take them as they are.
            let streamed_in_order = !items.is_empty()
                && items
                    .iter()
                    .enumerate()
                    .all(|(i, &e)| p.final_tag(e) == Some(EVENT_TAG | (i as u32)))
                && b.st.events.len() == items.len();
            let mut skipped = 0usize;
            let events = if streamed_in_order {
                std::mem::take(&mut b.st.events)
            } else {
                let mut events = Events::with_capacity(items.len());
                for &e in items {
                    match b.event(e) {
                        Some(ev) => events.push(ev),
                        None => skipped += 1,
                    }
                }
                events
            };
            for ev in &events {
                if ev.time_us().is_some() {
                    any_time = true;
                } else if ev.action != Action::Snapshot {
                    any_event_without_time = true;
                }
            }
            if skipped > 0 {
                b.st.notes
                    .push(LoadNote::EntriesWithoutAction { device: d, skipped });
            }
            devices.push(Device {
                index: d as u32,
                segments: Vec::new(),
                events,
            });
        }
    }
    // By index, not by scanning `devices`: a hostile file can give every segment its own device.
    let mut by_index: HashMap<u32, usize> = devices
        .iter()
        .enumerate()
        .map(|(i, d)| (d.index, i))
        .collect();
    for seg in segments {
        let d = seg.device;
        let i = *by_index.entry(d).or_insert_with(|| {
            devices.push(Device {
                index: d,
                ..Device::default()
            });
            devices.len() - 1
        });
        devices[i].segments.push(seg);
    }
    devices.sort_by_key(|d| d.index);
    for d in &mut devices {
        d.segments.sort_by_key(|s| s.address);
        for s in &mut d.segments {
            s.blocks.sort_by_key(|b| b.address);
        }
    }
    // Keep devices that have anything; a process that touched only GPU 3 still lists 0..=3.
    devices.retain(|d| !d.segments.is_empty() || !d.events.is_empty());

    let mut annotations = Vec::new();
    if p.dict(root).is_some() {
        if let Some(items) = p.get(root, "external_annotations").and_then(|a| p.seq(a)) {
            for &a in items {
                let Some(name) = p.get(a, "name").and_then(|x| p.str_bounded(x)) else {
                    continue;
                };
                let stage = p
                    .get(a, "stage")
                    .and_then(|x| p.str_bounded(x))
                    .unwrap_or_default();
                annotations.push(Annotation {
                    device: b.int(a, "device").unwrap_or(0).max(0) as u32,
                    name: name.into_owned(),
                    start: stage == "START",
                    time_us: b.int(a, "time_us").unwrap_or(0),
                });
            }
        }
    }
    let settings = if p.dict(root).is_some() {
        b.settings(p.get(root, "allocator_settings"))
    } else {
        AllocatorSettings::default()
    };
    let device_memory = if p.dict(root).is_some() {
        b.device_memory(p.get(root, "memscope"))
    } else {
        Vec::new()
    };
    let device_record = p
        .dict(root)
        .and_then(|_| p.get(root, "memscope"))
        .and_then(|v| super::device_record::record(p, v));
    let internal_metadata = if p.dict(root).is_some() {
        p.get(root, "internal_metadata")
            .and_then(|v| b.opaque(v))
            .map(|s| b.st.stacks.str(s).to_owned())
    } else {
        None
    };
    let layout = if has_history && !has_address {
        Layout::Torch20
    } else if any_event_without_time && !any_time {
        Layout::Torch21
    } else {
        Layout::Modern
    };
    Ok(Snapshot {
        layout,
        devices,
        stacks: std::mem::take(&mut b.st.stacks),
        annotations,
        settings,
        device_memory,
        device_record,
        metas: std::mem::take(&mut b.st.metas),
        internal_metadata,
        load_notes: {
            if b.st.bad_states > 0 {
                b.st.notes.push(LoadNote::UnknownBlockStates {
                    blocks: b.st.bad_states,
                    first: std::mem::take(&mut b.st.first_bad_state),
                });
            }
            std::mem::take(&mut b.st.notes)
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::pickle::MAX_TEXT;

    /// A protocol-0/4 list of the given items, each already encoded as opcodes.
    fn list_of(items: &[Vec<u8>]) -> Vec<u8> {
        let mut out = vec![b'('];
        for i in items {
            out.extend_from_slice(i);
        }
        out.extend_from_slice(b"l.");
        out
    }

    fn short_str(b: &[u8]) -> Vec<u8> {
        let mut v = vec![0x8c, b.len() as u8];
        v.extend_from_slice(b);
        v
    }

    fn long_str(b: &[u8]) -> Vec<u8> {
        let mut v = vec![b'X'];
        v.extend_from_slice(&(b.len() as u32).to_le_bytes());
        v.extend_from_slice(b);
        v
    }

    /// The byte-level readings of an entry's `action` and of the "no metadata" texts agree with
    /// the lossy text the generic path reads, on valid, invalid, escaped, cut and non-text values.
    #[test]
    fn byte_readings_agree_with_the_lossy_text() {
        let mut huge = b"alloc".to_vec();
        huge.resize(MAX_TEXT + 10, b'a');
        let mut items: Vec<Vec<u8>> = [
            &b"alloc"[..],
            b"free_requested",
            b"segment_unmap",
            b"oom",
            b"N/A",
            b"",
            b"al\xffloc",
            b"N/\xff",
            b"\xed\xa0\x80",
            b"alloc ",
        ]
        .iter()
        .map(|b| short_str(b))
        .collect();
        items.push(long_str(&huge));
        items.push(long_str(b"N/A"));
        // Protocol 0 text: decoded into an owned string (escapes and Latin-1).
        items.push(b"V\\u0061lloc\n".to_vec());
        items.push(b"VN/A\n".to_vec());
        items.push(b"V\\u004e/A\n".to_vec());
        items.push(b"V\n".to_vec());
        // Not text: bytes, an int, None.
        items.push(b"C\x05alloc".to_vec());
        items.push(b"K\x07".to_vec());
        items.push(b"N".to_vec());
        let data = list_of(&items);
        let p = super::super::pickle::parse(&data).unwrap();
        let vals = p.seq(p.root()).unwrap();
        assert_eq!(vals.len(), items.len());
        for &v in vals {
            let lossy = p.str_bounded(v);
            assert_eq!(
                action_of(&p, v),
                lossy.as_deref().map(Action::parse),
                "{}",
                p.describe(v)
            );
            for e in ["", "N/A"] {
                assert_eq!(
                    p.str_eq(v, e),
                    lossy.as_deref() == Some(e),
                    "{} vs {e:?}",
                    p.describe(v)
                );
            }
        }
        // The cases above do reach every answer.
        let actions: Vec<_> = vals.iter().map(|&v| action_of(&p, v)).collect();
        assert!(actions.contains(&Some(Action::Alloc)));
        assert!(actions.contains(&Some(Action::Other)));
        assert!(actions.contains(&None));
        assert!(vals.iter().filter(|&&v| p.str_eq(v, "N/A")).count() >= 3);
    }
}
