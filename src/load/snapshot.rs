//! Turns a decoded snapshot pickle into the [`model`](crate::model).
//!
//! Every PyTorch version from 2.0 to 2.11 wrote a slightly different dict, so this walks the
//! pickle by key and tolerates what is missing: unknown keys are ignored, missing optional ones
//! become `None`, and only a shape that cannot be a snapshot at all is an error. Frame lists
//! are decoded once per pickle object (the memo shares them), then interned by content.

use std::collections::HashMap;

use super::pickle::{ObjId, Pickle, Value};
use crate::model::{
    Action, AllocatorSettings, Annotation, Block, BlockState, Device, Event, FrameId, Layout, Pool,
    Segment, Snapshot, StackId, Stacks,
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

struct Builder<'p, 'a> {
    p: &'p Pickle<'a>,
    stacks: Stacks,
    frame_cache: HashMap<ObjId, FrameId>,
    stack_cache: HashMap<ObjId, StackId>,
    scratch: Vec<FrameId>,
    notes: Vec<String>,
    /// Blocks whose `state` was missing or unknown.
    odd_states: u64,
}

fn shape(path: impl Into<String>, expected: &'static str, found: String) -> SnapshotError {
    SnapshotError::Shape {
        path: path.into(),
        expected,
        found,
    }
}

impl<'p, 'a> Builder<'p, 'a> {
    fn int(&self, d: Value, key: &str) -> Option<i64> {
        self.p.get(d, key).and_then(|v| self.p.int(v))
    }
    fn u64_of(&self, d: Value, key: &str) -> Option<u64> {
        self.p.get(d, key).and_then(|v| match v {
            Value::Int(i) => Some(i as u64),
            Value::Bool(b) => Some(b as u64),
            // A big int (e.g. SIZE_MAX written as an unsigned 64-bit value with a sign byte).
            Value::BigInt(_) | Value::OwnedBigInt(_) => self.p.bigint_as_u64(v),
            _ => None,
        })
    }

    fn frame(&mut self, v: Value) -> Option<FrameId> {
        let id = match v {
            Value::Dict(id) => id,
            _ => return None,
        };
        if let Some(&f) = self.frame_cache.get(&id) {
            return Some(f);
        }
        let p = self.p;
        let file = p
            .get(v, "filename")
            .and_then(|x| p.str(x))
            .unwrap_or_default();
        let name = p.get(v, "name").and_then(|x| p.str(x)).unwrap_or_default();
        let line = p
            .get(v, "line")
            .and_then(|x| p.int(x))
            .unwrap_or(0)
            .clamp(0, u32::MAX as i64) as u32;
        let f = self.stacks.intern_frame(&file, line, &name);
        self.frame_cache.insert(id, f);
        Some(f)
    }

    /// Interns the stack of a `frames` list, decoding each shared list object only once.
    fn stack(&mut self, frames: Option<Value>) -> StackId {
        let Some(v) = frames else {
            return StackId::EMPTY;
        };
        let id = match v {
            Value::List(id) | Value::Tuple(id) => id,
            _ => return StackId::EMPTY,
        };
        if let Some(&s) = self.stack_cache.get(&id) {
            return s;
        }
        let items = self.p.seq(v).unwrap_or(&[]);
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        for &f in items {
            if let Some(fid) = self.frame(f) {
                scratch.push(fid);
            }
        }
        let s = self.stacks.intern_stack(&scratch);
        self.scratch = scratch;
        self.stack_cache.insert(id, s);
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
        let pool = match p.get(v, "segment_type").and_then(|x| p.str(x)).as_deref() {
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
            let state_s = p.get(b, "state").and_then(|x| p.str(x));
            let state = match state_s.as_deref().and_then(BlockState::parse) {
                Some(s) => s,
                None => {
                    // One note per kind of oddity, not one per block (a file may have millions).
                    self.odd_states += 1;
                    if self.odd_states == 1 {
                        self.notes.push(format!(
                            "segments[{i}].blocks[{j}] has state {:?}; counted as inactive",
                            state_s.as_deref().unwrap_or("missing")
                        ));
                    }
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

    fn event(&mut self, v: Value) -> Option<Event> {
        let p = self.p;
        p.dict(v)?;
        let action = Action::parse(&p.get(v, "action").and_then(|x| p.str(x))?);
        Some(Event {
            action,
            addr: self.u64_of(v, "addr").unwrap_or(0),
            size: self.u64_of(v, "size").unwrap_or(0),
            stream: self.u64_of(v, "stream").unwrap_or(0),
            time_us: self.int(v, "time_us"),
            stack: self.stack(p.get(v, "frames")),
            device_free: self.u64_of(v, "device_free"),
        })
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
                                .str(*k)?
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
                .and_then(|x| p.str(x))
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
            recorded: true,
        }
    }
}

impl<'a> Pickle<'a> {
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

/// What a partly decoded snapshot pickle held when decoding stopped, e.g. "12 segments, 4021
/// trace entries": one pass over the dicts decoded, only on the error path.
pub fn progress(p: &Pickle<'_>) -> String {
    let (mut segments, mut blocks, mut entries) = (0u64, 0u64, 0u64);
    for d in p.dicts() {
        match p.dict(d).and_then(|kv| kv.first()) {
            Some((k, _)) if p.str_eq(*k, "action") => entries += 1,
            _ if p.get(d, "total_size").is_some() => segments += 1,
            _ if p.get(d, "state").is_some() => blocks += 1,
            _ => {}
        }
    }
    format!("{segments} segments, {blocks} blocks, {entries} trace entries")
}

/// Builds a [`Snapshot`] from a decoded pickle.
pub fn from_pickle(p: &Pickle<'_>) -> Result<Snapshot, SnapshotError> {
    let root = p.root();
    let mut b = Builder {
        p,
        stacks: Stacks::new(),
        frame_cache: HashMap::new(),
        stack_cache: HashMap::new(),
        scratch: Vec::new(),
        notes: Vec::new(),
        odd_states: 0,
    };
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
            let mut events = Vec::with_capacity(items.len());
            let mut skipped = 0usize;
            for &e in items {
                match b.event(e) {
                    Some(ev) => {
                        if ev.time_us.is_some() {
                            any_time = true;
                        } else if ev.action != Action::Snapshot {
                            any_event_without_time = true;
                        }
                        events.push(ev)
                    }
                    None => skipped += 1,
                }
            }
            if skipped > 0 {
                b.notes.push(format!(
                    "device {d}: {skipped} trace entries without an 'action' were skipped"
                ));
            }
            devices.push(Device {
                index: d as u32,
                segments: Vec::new(),
                events,
            });
        }
    }
    // By index, not by scanning `devices`: a hostile file can give every segment its own device.
    let mut by_index: HashMap<u32, usize> = devices.iter().enumerate().map(|(i, d)| (d.index, i)).collect();
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
    if b.odd_states > 1 {
        b.notes.push(format!(
            "{} blocks in all had a missing or unknown state and were counted as inactive",
            b.odd_states
        ));
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
                let Some(name) = p.get(a, "name").and_then(|x| p.str(x)) else {
                    continue;
                };
                let stage = p.get(a, "stage").and_then(|x| p.str(x)).unwrap_or_default();
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
        stacks: b.stacks,
        annotations,
        settings,
        load_notes: b.notes,
    })
}
