//! The decoder's fast paths for the two shapes a snapshot repeats most: a trace entry's frames
//! list (a run of memo references) and a trace entry itself (`EMPTY_DICT MEMOIZE MARK (key
//! value)* SETITEMS`), read straight from the bytes into the finalizer's records (issue #43).
//!
//! Why a module of their own: each path must fall back to the generic opcode loop in
//! `super::Vm::run` before any state changed whenever a shape is not exactly the expected one,
//! and the entries it reads stay guarded until their batch is stored; keeping that reasoning
//! apart from the generic loop keeps both readable. `tests/it/decode_fast43.rs` holds the two
//! paths to the same output on every capture and on hostile pickles.

use super::*;

impl<'a> Vm<'a, '_> {
    /// Fast path for the commonest shape in a snapshot: a fresh list filled by one run of memo
    /// references (`EMPTY_LIST MEMOIZE MARK GET... APPENDS`, a trace entry's frames). When the
    /// finalizer takes the referenced values as a whole, the list becomes its tag at once,
    /// without pushing each reference on the stack. Anything else (another opcode in the run, a
    /// missing memo entry, a batch of 1000 that may be continued, a finalizer that declines)
    /// returns `false` before any state changed, and the general path runs.
    pub(super) fn fast_frames_list(&mut self) -> bool {
        let Some(&Value::List(id)) = self.stack.last() else {
            return false;
        };
        if !matches!(&self.arena.objects[id.0 as usize], Container::Seq(v) if v.is_empty()) {
            return false;
        }
        let start = self.pos;
        let Some(end) = ref_run(self.data, start) else {
            return false;
        };
        let Some(t) = self.run_tag(start, end) else {
            return false;
        };
        self.arena.objects[id.0 as usize] = Container::FinalSeq(t);
        if let Some(&slot) = self.memo_slot.get(id.0 as usize) {
            if let Some(m) = self.memo.get_mut(slot as usize) {
                *m = Some(Value::FinalSeq(t));
            }
        }
        *self.stack.last_mut().expect("checked above") = Value::FinalSeq(t);
        self.reclaim();
        self.pos = end + 1;
        true
    }

    /// The finalizer's tag for the values of the memo references `data[start..end]` (a run
    /// [`ref_run`] found), or `None` where a reference is missing or the finalizer declines.
    fn run_tag(&mut self, start: usize, end: usize) -> Option<u32> {
        let d = self.data;
        let run: &'a [u8] = &d[start..end];
        // The same run of memo references always names the same objects (Python's pickler never
        // reuses a memo slot; a pickle that does disables this cache), so its tag is reused.
        if !self.memo_overwritten {
            if let Some(&t) = self.run_tags.get(run) {
                return Some(t);
            }
        }
        let mut vals = std::mem::take(&mut self.scratch);
        vals.clear();
        let mut q = start;
        let mut ok = true;
        while q < end {
            let idx = if d[q] == b'h' {
                q += 2;
                d[q - 1] as usize
            } else {
                q += 5;
                u32::from_le_bytes([d[q - 4], d[q - 3], d[q - 2], d[q - 1]]) as usize
            };
            match self.memo.get(idx) {
                Some(Some(v)) => vals.push(*v),
                _ => {
                    ok = false;
                    break;
                }
            }
        }
        let t = if ok {
            let Vm {
                finalizer: Some(f),
                arena,
                ..
            } = self
            else {
                unreachable!("checked by the caller")
            };
            f.seq(arena, &vals)
        } else {
            None
        };
        self.scratch = vals;
        if let Some(t) = t {
            self.run_tags.insert(run, t);
        }
        t
    }

    /// The field of [`FastState::keys`] the `str` in memo slot `idx` names, learnt once per
    /// slot; `None` for another string or a value that is not a `str`.
    #[inline]
    fn key_field(&mut self, idx: usize) -> Option<usize> {
        let c = self.fast.key_cache[idx & 63];
        if c.0 as usize == idx {
            return (c.1 != u8::MAX).then_some(c.1 as usize);
        }
        let v = match self.memo.get(idx) {
            Some(Some(v @ Value::Str(_))) => *v,
            _ => return None,
        };
        let b = self.arena.raw_bytes(v)?;
        let f = self.fast.keys.iter().position(|k| *k == b);
        self.fast.key_cache[idx & 63] = (idx as u32, f.map_or(u8::MAX, |f| f as u8));
        f
    }

    /// The trace-entry fast path, at an `EMPTY_DICT` (`self.pos` just past it): a dict pickled
    /// as `EMPTY_DICT MEMOIZE MARK (key value)* SETITEMS` straight into the list of a
    /// `MARK ... APPENDS` batch is read from its bytes into [`Finalizer::entry`], without
    /// building the dict. Keys are memo references to the finalizer's key strings (learnt once
    /// per memo slot), each at most once; values are small ints, `None`, bools, strings (fresh
    /// or memo references), memo references to finalized lists, or one fresh list of memo
    /// references (a trace entry's frames, through [`Vm::run_tag`]). The next opcode must be
    /// another `EMPTY_DICT` or the batch's `APPENDS`. The memo gets what the generic path
    /// leaves in it (the dict's tag, the strings, the list's tag), the stack the dict's tag.
    ///
    /// The generic path would finalize the dict only at the batch's `APPENDS`: until then the
    /// entry stays in a window (`FastState::mark`, `count`, `lo..=hi`), and anything that
    /// touches it there (a memo `GET`, `DUP`, `POP`, `PUT`, a `SETITEM` or `APPEND` reaching
    /// it, another record finalized first, `STOP`), or any error after the fast path was used,
    /// bails out (`FastState::bail`): the caller decodes again without the fast path. Any
    /// other shape returns `false` before any state changed, and the generic path runs.
    pub(super) fn fast_entry(&mut self) -> Result<bool, PickleError> {
        if self.memo_overwritten || !self.sparse_memo.is_empty() {
            return Ok(false);
        }
        let Some(&m) = self.marks.last() else {
            return Ok(false);
        };
        let from = if self.fast.count > 0 {
            if self.fast.mark != m {
                return Ok(false);
            }
            m + self.fast.count
        } else {
            m
        };
        if m == 0 || self.stack.len() < from {
            return Ok(false);
        }
        match self.stack[m - 1] {
            Value::List(id) if matches!(self.arena.objects[id.0 as usize], Container::Seq(_)) => {}
            _ => return Ok(false),
        }
        if !self.absorbable(from) {
            return Ok(false);
        }
        match self.read_entry(m, from)? {
            Some(p) => {
                self.pos = p;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Whether the values at `stack[from..]` (entries of the batch the generic path built) are
    /// dicts nothing else names whose first key `entry_keys()[0]` holds a `str`: the finalizer
    /// takes each as a record, so [`Vm::absorb`] may finalize them before the next entry.
    fn absorbable(&self, from: usize) -> bool {
        let key = self.fast.keys[0];
        self.stack[from..].iter().all(|v| match *v {
            Value::Dict(id) if self.pinned.is_empty() || !self.pinned.contains(&id.0) => {
                match &self.arena.objects[id.0 as usize] {
                    Container::Dict(pairs) => pairs
                        .iter()
                        .find(|(k, _)| {
                            matches!(k, Value::Str(_)) && self.arena.raw_bytes(*k) == Some(key)
                        })
                        .is_some_and(|(_, v)| matches!(v, Value::Str(_))),
                    _ => false,
                }
            }
            _ => false,
        })
    }

    /// Finalizes the entries the generic path built at `stack[from..]` now, in stack order, as
    /// it would at the batch's `APPENDS`, and takes them into the window (`FastState::count`):
    /// from here the guards protect them as they protect the entries the fast path read.
    fn absorb(&mut self, m: usize, from: usize) -> Result<(), PickleError> {
        let count = self.fast.count;
        // No record before them waits: this finalization is in the generic path's order.
        self.fast.count = 0;
        self.finalize_from(from)?;
        let f = self
            .finalizer
            .as_ref()
            .expect("the fast path has a finalizer");
        let tag = |v: &Value| match *v {
            Value::FinalDict(t) if f.is_entry_tag(t) => Some(t),
            _ => None,
        };
        let first = self.stack.get(from).and_then(tag);
        let last = self.stack.last().and_then(tag);
        let all = self.stack[from..].iter().all(|v| tag(v).is_some());
        let (Some(first), Some(last), true) = (first, last, all) else {
            return Err(self.bail());
        };
        if count == 0 {
            self.fast.mark = m;
            self.fast.lo = first;
        }
        self.fast.count = count + (self.stack.len() - from);
        self.fast.hi = last;
        Ok(())
    }

    /// [`Vm::fast_entry`]'s reading: the offset past the entry, or `None` (nothing changed).
    fn read_entry(&mut self, m: usize, from: usize) -> Result<Option<usize>, PickleError> {
        let d = self.data;
        let memo0 = self.memo.len();
        let mut puts = [Put::Dict; MAX_ENTRY_KEYS];
        let mut n_puts = 1;
        let mut p = self.pos;
        if memo_op(d, &mut p, memo0) != Some(true) || d.get(p) != Some(&b'(') {
            return Ok(None);
        }
        p += 1;
        let mut fields = [None; MAX_ENTRY_KEYS];
        let mut seen = 0u32;
        // The fresh list, if any: its field and its run of references (`start == end`: empty).
        let mut list: Option<(usize, usize, usize)> = None;
        loop {
            if d.get(p) == Some(&b'u') {
                p += 1;
                break;
            }
            let Some(idx) = memo_ref(d, &mut p).filter(|&i| i < memo0) else {
                return Ok(None);
            };
            let Some(field) = self.key_field(idx) else {
                return Ok(None);
            };
            if seen & (1 << field) != 0 || n_puts >= MAX_ENTRY_KEYS {
                return Ok(None);
            }
            seen |= 1 << field;
            let Some(v) = self.entry_value(&mut p, field, memo0, &mut puts, &mut n_puts, &mut list)
            else {
                return Ok(None);
            };
            fields[field] = Some(v);
        }
        if !matches!(d.get(p), Some(b'}' | b'e')) || !matches!(fields[0], Some(Value::Str(_))) {
            return Ok(None);
        }
        // The bounds the generic path checks: the memo index, the containers it would make
        // (the dict and the list, reclaimed once finalized), the stack.
        if (memo0 + n_puts - 1) as u64 > self.limits.max_memo_index as u64
            || self.arena.objects.len() as u64 + 2 > self.limits.max_containers as u64
            || self.memo.try_reserve(n_puts).is_err()
            || room(&mut self.stack, self.limits.max_stack, self.at, "values").is_err()
        {
            return Ok(None);
        }
        if self.stack.len() > from {
            self.absorb(m, from)?;
        }
        let mut list_value = Value::EmptyList;
        if let Some((field, start, end)) = list {
            if start < end {
                match self.run_tag(start, end) {
                    Some(t) => list_value = Value::FinalSeq(t),
                    None => return Ok(None),
                }
            }
            fields[field] = Some(list_value);
        }
        let n_keys = self.fast.keys.len();
        let tag = {
            let Vm {
                finalizer: Some(f),
                arena,
                ..
            } = self
            else {
                return Ok(None);
            };
            f.entry(arena, &fields[..n_keys])
        };
        let Some(tag) = tag else {
            return Ok(None);
        };
        for put in &puts[..n_puts] {
            self.memo.push(Some(match *put {
                Put::Dict => Value::FinalDict(tag),
                Put::List => list_value,
                Put::Value(v) => v,
            }));
        }
        self.stack.push(Value::FinalDict(tag));
        if self.fast.count == 0 {
            self.fast.mark = m;
            self.fast.lo = tag;
        }
        self.fast.count += 1;
        self.fast.hi = tag;
        self.fast.entries += 1;
        Ok(Some(p))
    }

    /// One value of an entry [`Vm::read_entry`] reads, at `data[*p]` (`*p` past it): the memo
    /// stores it makes go to `puts`, a fresh list of references to `list`. `None`: another shape.
    fn entry_value(
        &mut self,
        p: &mut usize,
        field: usize,
        memo0: usize,
        puts: &mut [Put; MAX_ENTRY_KEYS],
        n_puts: &mut usize,
        list: &mut Option<(usize, usize, usize)>,
    ) -> Option<Value> {
        let d = self.data;
        let op = *d.get(*p)?;
        let v = match op {
            b'K' | b'M' | b'J' | 0x8a => small_int(d, p)?,
            b'N' => {
                *p += 1;
                Value::None
            }
            0x88 | 0x89 => {
                *p += 1;
                Value::Bool(op == 0x88)
            }
            0x8c | b'X' => {
                let (len, at) = if op == 0x8c {
                    (*d.get(*p + 1)? as usize, *p + 2)
                } else {
                    let b = d.get(*p + 1..*p + 5)?;
                    (
                        u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize,
                        *p + 5,
                    )
                };
                let text = d.get(at..at.checked_add(len)?)?;
                let v = Value::Str(self.span(text).ok()?);
                *p = at + text.len();
                if memo_op(d, p, memo0 + *n_puts)? {
                    puts[*n_puts] = Put::Value(v);
                    *n_puts += 1;
                }
                v
            }
            b'h' | b'j' => {
                let idx = memo_ref(d, p).filter(|&i| i < memo0)?;
                match self.memo[idx] {
                    Some(v @ (Value::Str(_) | Value::FinalSeq(_) | Value::EmptyList)) => v,
                    _ => return None,
                }
            }
            b']' if list.is_none() => {
                *p += 1;
                if memo_op(d, p, memo0 + *n_puts) != Some(true) {
                    return None;
                }
                puts[*n_puts] = Put::List;
                *n_puts += 1;
                if d.get(*p) == Some(&b'(') {
                    let end = ref_run(d, *p + 1)?;
                    *list = Some((field, *p + 1, end));
                    *p = end + 1;
                } else {
                    *list = Some((field, *p, *p));
                }
                Value::EmptyList
            }
            _ => return None,
        };
        Some(v)
    }
}

/// A memo store at `data[*p]` for the next dense index `next`: `Some(true)` (and `*p` past
/// it) for `MEMOIZE`, or `BINPUT`/`LONG_BINPUT` of `next`; `Some(false)` for no store; `None`
/// for a store at another index.
#[inline]
fn memo_op(d: &[u8], p: &mut usize, next: usize) -> Option<bool> {
    match d.get(*p) {
        Some(0x94) => {
            *p += 1;
            Some(true)
        }
        Some(b'q') => {
            let i = *d.get(*p + 1)? as usize;
            *p += 2;
            (i == next).then_some(true)
        }
        Some(b'r') => {
            let b = d.get(*p + 1..*p + 5)?;
            *p += 5;
            (u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize == next).then_some(true)
        }
        _ => Some(false),
    }
}

/// A `BINGET`/`LONG_BINGET` at `data[*p]`: its index, `*p` past it.
#[inline]
fn memo_ref(d: &[u8], p: &mut usize) -> Option<usize> {
    match d.get(*p)? {
        b'h' => {
            let i = *d.get(*p + 1)? as usize;
            *p += 2;
            Some(i)
        }
        b'j' => {
            let b = d.get(*p + 1..*p + 5)?;
            *p += 5;
            Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        }
        _ => None,
    }
}

/// An int opcode at `data[*p]` (`BININT1`, `BININT2`, `BININT`, `LONG1` of up to 8 bytes)
/// as the generic path reads it; `*p` past it.
#[inline]
fn small_int(d: &[u8], p: &mut usize) -> Option<Value> {
    let (v, n) = match *d.get(*p)? {
        b'K' => (*d.get(*p + 1)? as i64, 2),
        b'M' => {
            let b = d.get(*p + 1..*p + 3)?;
            (u16::from_le_bytes([b[0], b[1]]) as i64, 3)
        }
        b'J' => {
            let b = d.get(*p + 1..*p + 5)?;
            (i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64, 5)
        }
        0x8a => {
            let len = *d.get(*p + 1)? as usize;
            let b = d.get(*p + 2..*p + 2 + len)?;
            if len > 8 {
                return None;
            }
            (le_i64(b), 2 + len)
        }
        _ => return None,
    };
    *p += n;
    Some(Value::Int(v))
}

/// A run of 1 to 999 memo references (`BINGET`/`LONG_BINGET`) from `start`, closed by
/// `APPENDS`: the offset of that `APPENDS`. A batch of 1000 may be continued, so it is not one.
fn ref_run(d: &[u8], start: usize) -> Option<usize> {
    let mut p = start;
    let mut n = 0usize;
    loop {
        match d.get(p) {
            Some(b'h') if p + 2 <= d.len() => p += 2,
            Some(b'j') if p + 5 <= d.len() => p += 5,
            Some(b'e') => return (n > 0 && n < 1000).then_some(p),
            _ => return None,
        }
        n += 1;
    }
}
