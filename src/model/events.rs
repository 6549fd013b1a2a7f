//! A device's trace, packed: 32 bytes per entry, whatever the capture holds.
//!
//! A large snapshot spends about 72 bytes of pickle per trace entry, and every pass reads
//! the whole trace, so the entries must cost well under the file (issue #43: peak memory
//! beyond the file at most half of it). An [`Event`] keeps inline what every entry has and
//! every pass reads (action, address, size, stack, time) and moves out of line what is
//! either repeated (the stream: a handful of distinct values in a million entries, kept as a
//! 16-bit index into the device's stream table) or rare (metadata, the free bytes of an
//! `oom` entry). Nothing is narrowed lossily: the time keeps all 64 bits beside a presence
//! flag, and a stream past the table's 65,535 slots (only a hostile capture has that many)
//! is kept whole in a side table. [`Events::data`] gives any entry back exactly as it was
//! pushed ([`EventData`]).

use super::{Action, MetaId, StackId};
use rustc_hash::FxHashMap as HashMap;

/// One entry of a device's trace (`device_traces[d][i]`), packed (see the module's docs).
/// The stream, the metadata and `device_free` are read through the device's [`Events`].
#[derive(Clone, Copy, Debug)]
pub struct Event {
    /// Address of the block or segment (0 for `oom` and `snapshot`).
    pub addr: u64,
    /// Requested size in bytes, before rounding.
    pub size: u64,
    /// Microseconds since the epoch, where `flags` has `HAS_TIME`.
    time: i64,
    pub stack: StackId,
    /// Index in [`Events::streams`] (unless `WIDE_STREAM`).
    stream: u16,
    pub action: Action,
    flags: u8,
}

const _: () = assert!(std::mem::size_of::<Event>() <= 32);

const HAS_TIME: u8 = 1;
const HAS_META: u8 = 2;
const HAS_FREE: u8 = 4;
const WIDE_STREAM: u8 = 8;

impl Event {
    /// Microseconds since the epoch; `None` in 2.1-era traces.
    pub fn time_us(&self) -> Option<i64> {
        (self.flags & HAS_TIME != 0).then_some(self.time)
    }
}

/// One trace entry, unpacked: what a loader pushes and what [`Events::data`] gives back.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EventData {
    pub action: Action,
    pub addr: u64,
    pub size: u64,
    pub stream: u64,
    /// Microseconds since the epoch; `None` in 2.1-era traces.
    pub time_us: Option<i64>,
    pub stack: StackId,
    /// Free device memory reported with an `oom` entry.
    pub device_free: Option<u64>,
    /// The entry's `user_metadata`, `compile_context` and `internal_metadata`, interned in
    /// [`super::Snapshot::metas`] (`MetaId::NONE` where it has none: most captures, every entry).
    pub meta: MetaId,
}

/// Most distinct streams kept in the table; index `u16::MAX` is never used.
const STREAM_SLOTS: usize = u16::MAX as usize;

/// A device's trace entries, packed, with their side tables. Reads as a slice of [`Event`]s;
/// the out-of-line fields are read by index ([`Events::stream`], [`Events::meta`],
/// [`Events::device_free`]). Side tables are sorted by entry index (entries are only pushed).
#[derive(Clone, Debug, Default)]
pub struct Events {
    recs: Vec<Event>,
    /// Distinct streams, in order of first use.
    streams: Vec<u64>,
    stream_ix: HashMap<u64, u16>,
    metas: Vec<(u32, MetaId)>,
    device_free: Vec<(u32, u64)>,
    wide_streams: Vec<(u32, u64)>,
}

impl std::ops::Deref for Events {
    type Target = [Event];
    fn deref(&self) -> &[Event] {
        &self.recs
    }
}

impl<'a> IntoIterator for &'a Events {
    type Item = &'a Event;
    type IntoIter = std::slice::Iter<'a, Event>;
    fn into_iter(self) -> Self::IntoIter {
        self.recs.iter()
    }
}

/// The packed entries, mutable: their public fields stand alone (the rest is read by index).
/// An `Event` copied from another device's `Events` would read that device's side tables
/// wrongly: push its [`EventData`] instead.
impl<'a> IntoIterator for &'a mut Events {
    type Item = &'a mut Event;
    type IntoIter = std::slice::IterMut<'a, Event>;
    fn into_iter(self) -> Self::IntoIter {
        self.recs.iter_mut()
    }
}

impl FromIterator<EventData> for Events {
    fn from_iter<I: IntoIterator<Item = EventData>>(iter: I) -> Events {
        let mut ev = Events::default();
        for e in iter {
            ev.push(e);
        }
        ev
    }
}

impl From<Vec<EventData>> for Events {
    fn from(v: Vec<EventData>) -> Events {
        v.into_iter().collect()
    }
}

fn lookup<T: Copy>(table: &[(u32, T)], i: usize) -> Option<T> {
    let i = u32::try_from(i).ok()?;
    table
        .binary_search_by_key(&i, |p| p.0)
        .ok()
        .map(|k| table[k].1)
}

impl Events {
    pub fn with_capacity(n: usize) -> Events {
        Events {
            recs: Vec::with_capacity(n),
            ..Events::default()
        }
    }

    /// Reserves room for `n` more entries where the memory is there (pages are touched only
    /// as entries are pushed).
    pub fn try_reserve(&mut self, n: usize) {
        let _ = self.recs.try_reserve(n);
    }

    /// Appends an entry. A device holds fewer than `u32::MAX` entries (an
    /// [`super::EventIdx`] is 32 bits; the loader stops at 2^31): past that it is not kept.
    pub fn push(&mut self, e: EventData) {
        let idx = match u32::try_from(self.recs.len()) {
            Ok(i) if i < u32::MAX => i,
            _ => return,
        };
        let mut flags = 0;
        if e.time_us.is_some() {
            flags |= HAS_TIME;
        }
        if e.meta != MetaId::NONE {
            flags |= HAS_META;
            self.metas.push((idx, e.meta));
        }
        if let Some(f) = e.device_free {
            flags |= HAS_FREE;
            self.device_free.push((idx, f));
        }
        let stream = match self.stream_slot(e.stream) {
            Some(s) => s,
            None => {
                flags |= WIDE_STREAM;
                self.wide_streams.push((idx, e.stream));
                0
            }
        };
        self.recs.push(Event {
            addr: e.addr,
            size: e.size,
            time: e.time_us.unwrap_or(0),
            stack: e.stack,
            stream,
            action: e.action,
            flags,
        });
    }

    /// The table slot of `stream`, made on first use; `None` once the table is full.
    fn stream_slot(&mut self, stream: u64) -> Option<u16> {
        // Most entries are on the stream of the one before.
        if let Some(last) = self.recs.last() {
            if last.flags & WIDE_STREAM == 0 && self.streams[last.stream as usize] == stream {
                return Some(last.stream);
            }
        }
        if let Some(&s) = self.stream_ix.get(&stream) {
            return Some(s);
        }
        if self.streams.len() >= STREAM_SLOTS {
            return None;
        }
        let s = self.streams.len() as u16;
        self.streams.push(stream);
        self.stream_ix.insert(stream, s);
        Some(s)
    }

    /// The packed entries, as one buffer (what the loader's page pre-faulting watches).
    pub fn records(&self) -> &Vec<Event> {
        &self.recs
    }

    /// Entry `i`'s stream (0 for an index out of range).
    pub fn stream(&self, i: usize) -> u64 {
        let Some(e) = self.recs.get(i) else {
            return 0;
        };
        if e.flags & WIDE_STREAM != 0 {
            lookup(&self.wide_streams, i).unwrap_or(0)
        } else {
            self.streams.get(e.stream as usize).copied().unwrap_or(0)
        }
    }

    /// Entry `i`'s metadata (`MetaId::NONE` where it has none).
    pub fn meta(&self, i: usize) -> MetaId {
        match self.recs.get(i) {
            Some(e) if e.flags & HAS_META != 0 => lookup(&self.metas, i).unwrap_or_default(),
            _ => MetaId::NONE,
        }
    }

    /// The free device memory an `oom` entry `i` reported.
    pub fn device_free(&self, i: usize) -> Option<u64> {
        match self.recs.get(i) {
            Some(e) if e.flags & HAS_FREE != 0 => lookup(&self.device_free, i),
            _ => None,
        }
    }

    /// Entry `i` unpacked, exactly as it was pushed.
    pub fn data(&self, i: usize) -> Option<EventData> {
        let e = self.recs.get(i)?;
        Some(EventData {
            action: e.action,
            addr: e.addr,
            size: e.size,
            stream: self.stream(i),
            time_us: e.time_us(),
            stack: e.stack,
            device_free: self.device_free(i),
            meta: self.meta(i),
        })
    }

    /// Every entry unpacked, in order.
    pub fn iter_data(&self) -> impl DoubleEndedIterator<Item = EventData> + '_ {
        (0..self.recs.len()).filter_map(move |i| self.data(i))
    }

    /// Keeps only the entries `keep` accepts (their side tables follow them).
    pub fn retain(&mut self, mut keep: impl FnMut(&Event) -> bool) {
        let kept: Events = (0..self.recs.len())
            .filter(|&i| keep(&self.recs[i]))
            .filter_map(|i| self.data(i))
            .collect();
        *self = kept;
    }

    /// Appends every entry of `other` (for a loader that decodes a trace in pieces).
    pub fn append(&mut self, other: &Events) {
        self.recs.reserve(other.len());
        for e in other.iter_data() {
            self.push(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_actions() -> [Action; 11] {
        [
            Action::Alloc,
            Action::FreeRequested,
            Action::FreeCompleted,
            Action::SegmentAlloc,
            Action::SegmentFree,
            Action::SegmentMap,
            Action::SegmentUnmap,
            Action::Snapshot,
            Action::Oom,
            Action::Annotate,
            Action::Other,
        ]
    }

    #[test]
    fn extreme_values_round_trip() {
        let times = [
            None,
            Some(0),
            Some(-1),
            Some(i64::MIN),
            Some(i64::MAX),
            Some(1_700_000_000_000_000),
        ];
        let u = [0, 1, u64::MAX, u64::MAX - 1, 1 << 63, 0x7f00_dead_beef];
        let mut want = Vec::new();
        for (k, &t) in times.iter().enumerate() {
            for (j, &x) in u.iter().enumerate() {
                let action = all_actions()[(k * u.len() + j) % 11];
                want.push(EventData {
                    action,
                    addr: x,
                    size: u[(j + 1) % u.len()],
                    stream: u[(j + k) % u.len()],
                    time_us: t,
                    stack: StackId(if j % 2 == 0 { u32::MAX } else { j as u32 }),
                    device_free: (j % 3 == 0).then_some(u[(j + 2) % u.len()]),
                    meta: MetaId(if j % 4 == 1 { u32::MAX } else { 0 }),
                });
            }
        }
        let ev: Events = want.clone().into();
        let got: Vec<EventData> = ev.iter_data().collect();
        assert_eq!(got, want);
        for (i, w) in want.iter().enumerate() {
            assert_eq!(ev[i].time_us(), w.time_us);
            assert_eq!((ev[i].addr, ev[i].size), (w.addr, w.size));
            assert_eq!(ev.stream(i), w.stream);
            assert_eq!(ev.meta(i), w.meta);
            assert_eq!(ev.device_free(i), w.device_free);
        }
        assert_eq!(ev.data(want.len()), None);
        assert_eq!(ev.stream(want.len()), 0);
    }

    #[test]
    fn streams_past_the_table_are_kept_whole() {
        // More distinct streams than the 16-bit table holds, interleaved with a repeated one.
        let n = STREAM_SLOTS + 1000;
        let want: Vec<EventData> = (0..2 * n)
            .map(|i| EventData {
                action: Action::Alloc,
                addr: i as u64,
                size: 512,
                stream: if i % 2 == 0 { 7 } else { u64::MAX - i as u64 },
                time_us: Some(i as i64 - 5),
                stack: StackId::EMPTY,
                device_free: None,
                meta: MetaId::NONE,
            })
            .collect();
        let ev: Events = want.iter().copied().collect();
        assert!(!ev.wide_streams.is_empty(), "the table overflowed");
        assert_eq!(ev.streams.len(), STREAM_SLOTS);
        for (i, w) in want.iter().enumerate() {
            assert_eq!(ev.stream(i), w.stream, "entry {i}");
        }
        // Appending in pieces gives the same entries.
        let (a, b) = want.split_at(n / 2);
        let mut joined: Events = a.iter().copied().collect();
        joined.append(&b.iter().copied().collect());
        assert!(joined.iter_data().eq(want.iter().copied()));
    }
}
