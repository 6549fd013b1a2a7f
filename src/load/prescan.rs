//! An opcode-only pre-scan of a snapshot pickle: where the `device_traces` entries' batches are,
//! and whether they could be decoded apart.
//!
//! Why: the snapshot decoder is one thread (issue 43). A pickle can be split only where later
//! opcodes do not refer to objects made in earlier pieces; the pickle's memo is exactly such a
//! reference. Python's pickler writes each device's trace list in batches of up to 1000 items
//! (`MARK` item... `APPENDS`), so a batch is the natural chunk. This scan walks the opcodes
//! without building any object (a stack of one-byte tags, one `u32` per memo key), records each
//! batch's byte range, and counts the memo `GET`s in a batch of keys that an *earlier batch*
//! defined (keys defined before the list, or between batches, are a shared prefix a parallel
//! decoder could build first). A file with such cross-batch references cannot be split by batch
//! without first building the referenced objects; the count says how often that happens.
//!
//! Untrusted input: every cost is linear in the input (each push consumes at least one byte),
//! the memo table holds at most one entry per 8 bytes of input, and any opcode outside the
//! subset Python's pickler writes for a snapshot ends the scan with [`ScanError::Unsupported`]
//! (a caller then decodes serially): the scan never decides a result, it only plans.

use thiserror::Error;

/// Where a snapshot pickle's trace batches are, and how they depend on each other.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Byte ranges of the trace lists' batches (`MARK` to `APPENDS` inclusive), in file order.
    pub chunks: Vec<std::ops::Range<usize>>,
    /// Trace entries seen: the items of the batches plus single `APPEND`s onto a trace list.
    pub entries: u64,
    /// Memo `GET`s inside a batch of a key defined inside an earlier batch.
    pub cross_gets: u64,
    /// Of those, `GET`s of containers (frames, frame lists): an object of many opcodes that a
    /// parallel decoder would have to build before the batch that reads it.
    pub cross_container_gets: u64,
    /// Batches with at least one such `GET`.
    pub dependent_chunks: u64,
    /// Distinct memo entries defined in a batch and read by a later one: the objects a
    /// batch-parallel decoder would build first, serially.
    pub shared_keys: u64,
    /// Of those, containers.
    pub shared_container_keys: u64,
    /// Memo `GET`s inside a batch of a key defined outside every batch (the shared prefix).
    pub prefix_gets: u64,
}

impl Plan {
    /// True when every batch reads only its own memo entries and the shared prefix.
    pub fn independent(&self) -> bool {
        self.cross_gets == 0
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ScanError {
    #[error("opcode 0x{opcode:02x} at byte {offset} is outside the pre-scan's subset")]
    Unsupported { opcode: u8, offset: usize },
    #[error("malformed pickle at byte {offset}")]
    Malformed { offset: usize },
}

/// What the scan knows of a stack slot.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tag {
    Mark,
    /// A value one opcode makes (a string, a number): a parallel decoder can make it again
    /// from its offset alone.
    Any,
    /// A container that no trace list is.
    Obj,
    /// The string `device_traces`.
    Key,
    /// The list of per-device trace lists.
    Outer,
    /// One device's trace list.
    Inner,
}

/// No batch: the memo entry was defined outside the trace lists' batches.
const OUTSIDE: u32 = u32::MAX;

struct Scan<'a> {
    data: &'a [u8],
    pos: usize,
    stack: Vec<Tag>,
    /// For each memo key, the batch that defined it and the tag it names.
    memo: Vec<(u32, Tag)>,
    /// Memo keys already counted in `Plan::shared_keys`.
    shared: Vec<bool>,
    /// The batch being read, and the stack depth of its mark.
    current: Option<(u32, usize)>,
    chunk_start: usize,
    chunk_has_cross: bool,
    plan: Plan,
}

/// Scans `data`; see the module's documentation.
pub fn scan(data: &[u8]) -> Result<Plan, ScanError> {
    let mut s = Scan {
        data,
        pos: 0,
        stack: Vec::new(),
        memo: Vec::new(),
        shared: Vec::new(),
        current: None,
        chunk_start: 0,
        chunk_has_cross: false,
        plan: Plan::default(),
    };
    s.run()?;
    Ok(s.plan)
}

impl Scan<'_> {
    fn bad(&self) -> ScanError {
        ScanError::Malformed { offset: self.pos }
    }

    fn take(&mut self, n: usize) -> Result<&[u8], ScanError> {
        let end = self.pos.checked_add(n).ok_or_else(|| self.bad())?;
        let s = self.data.get(self.pos..end).ok_or_else(|| self.bad())?;
        self.pos = end;
        Ok(s)
    }

    fn len_arg(&mut self, width: usize) -> Result<usize, ScanError> {
        let b = self.take(width)?;
        let mut v = 0u64;
        for (i, &x) in b.iter().enumerate() {
            v |= u64::from(x) << (8 * i);
        }
        usize::try_from(v).map_err(|_| self.bad())
    }

    fn skip_sized(&mut self, width: usize) -> Result<&[u8], ScanError> {
        let n = self.len_arg(width)?;
        self.take(n)
    }

    fn pop(&mut self) -> Result<Tag, ScanError> {
        match self.stack.pop() {
            Some(Tag::Mark) | None => Err(self.bad()),
            Some(t) => Ok(t),
        }
    }

    /// Pops to the last mark; returns the tag below it and how many items were above it.
    fn pop_mark(&mut self) -> Result<(Option<Tag>, u64), ScanError> {
        let m = self
            .stack
            .iter()
            .rposition(|&t| t == Tag::Mark)
            .ok_or_else(|| self.bad())?;
        let items = (self.stack.len() - m - 1) as u64;
        if let Some((_, depth)) = self.current {
            if depth == m {
                self.end_chunk(items);
            }
        }
        self.stack.truncate(m);
        Ok((self.stack.last().copied(), items))
    }

    fn end_chunk(&mut self, items: u64) {
        self.current = None;
        self.plan.entries += items;
        self.plan.chunks.push(self.chunk_start..self.pos);
        if self.chunk_has_cross {
            self.plan.dependent_chunks += 1;
        }
    }

    fn memo_put(&mut self, key: usize) -> Result<(), ScanError> {
        let tag = *self
            .stack
            .last()
            .filter(|&&t| t != Tag::Mark)
            .ok_or_else(|| self.bad())?;
        // At most one memo entry per 8 bytes of input (Python's pickles have one per 50 to 100):
        // the table (9 bytes an entry) stays near the input's size; a denser file is decoded
        // serially, which has its own bounds.
        if key > self.data.len() / 8 + 1024 {
            return Err(self.bad());
        }
        if key >= self.memo.len() {
            self.memo.resize(key + 1, (OUTSIDE, Tag::Mark));
            self.shared.resize(key + 1, false);
        }
        let chunk = self.current.map_or(OUTSIDE, |(c, _)| c);
        self.memo[key] = (chunk, tag);
        self.shared[key] = false;
        Ok(())
    }

    fn memo_get(&mut self, key: usize) -> Result<(), ScanError> {
        let &(chunk, tag) = self.memo.get(key).ok_or_else(|| self.bad())?;
        if tag == Tag::Mark {
            return Err(self.bad());
        }
        if let Some((c, _)) = self.current {
            if chunk == OUTSIDE {
                self.plan.prefix_gets += 1;
            } else if chunk != c {
                self.plan.cross_gets += 1;
                if !self.shared[key] {
                    self.shared[key] = true;
                    self.plan.shared_keys += 1;
                    self.plan.shared_container_keys += u64::from(tag != Tag::Any);
                }
                if tag != Tag::Any {
                    self.plan.cross_container_gets += 1;
                }
                self.chunk_has_cross = true;
            }
        }
        self.push(tag);
        Ok(())
    }

    fn push(&mut self, t: Tag) {
        self.stack.push(t);
    }

    /// The tag of a new empty list: the outer trace list follows its key, a device's list is
    /// an item of the outer one (directly or after a mark).
    fn new_list(&self) -> Tag {
        let n = self.stack.len();
        let below = |i: usize| n.checked_sub(i).map(|j| self.stack[j]);
        match (below(1), below(2)) {
            (Some(Tag::Key), _) => Tag::Outer,
            (Some(Tag::Outer), _) | (Some(Tag::Mark), Some(Tag::Outer)) => Tag::Inner,
            _ => Tag::Obj,
        }
    }

    fn run(&mut self) -> Result<(), ScanError> {
        loop {
            let at = self.pos;
            let op = *self.data.get(at).ok_or_else(|| self.bad())?;
            self.pos += 1;
            match op {
                0x80 => drop(self.take(1)?),
                0x95 => drop(self.take(8)?),
                b'.' => return Ok(()),
                b'(' => {
                    if self.current.is_none() && self.stack.last() == Some(&Tag::Inner) {
                        self.current = Some((self.plan.chunks.len() as u32, self.stack.len()));
                        self.chunk_start = at;
                        self.chunk_has_cross = false;
                    }
                    self.push(Tag::Mark);
                }
                b'0' => {
                    if self.stack.last() == Some(&Tag::Mark) {
                        self.pop_mark()?;
                    } else {
                        self.pop()?;
                    }
                }
                b'1' => drop(self.pop_mark()?),
                b'2' => {
                    let t = *self.stack.last().ok_or_else(|| self.bad())?;
                    self.push(t);
                }
                b'N' | 0x88 | 0x89 => self.push(Tag::Any),
                b'J' => self.scalar(4)?,
                b'K' => self.scalar(1)?,
                b'M' => self.scalar(2)?,
                b'G' => self.scalar(8)?,
                0x8a => self.sized(1)?,
                0x8b => self.sized(4)?,
                b'C' | b'U' => self.sized(1)?,
                b'B' | b'T' => self.sized(4)?,
                0x8e | 0x96 => self.sized(8)?,
                0x8c => {
                    let s = self.skip_sized(1)?;
                    let t = if s == b"device_traces" {
                        Tag::Key
                    } else {
                        Tag::Any
                    };
                    self.push(t);
                }
                b'X' => {
                    let s = self.skip_sized(4)?;
                    let t = if s == b"device_traces" {
                        Tag::Key
                    } else {
                        Tag::Any
                    };
                    self.push(t);
                }
                0x8d => self.sized(8)?,
                b']' => {
                    let t = self.new_list();
                    self.push(t);
                }
                b'}' | b')' | 0x8f => self.push(Tag::Obj),
                0x94 => {
                    // MEMOIZE stores at the memo's length, as the decoder's dense memo does.
                    let next = self.memo.len();
                    self.memo_put(next)?;
                }
                b'q' => {
                    let k = self.len_arg(1)?;
                    self.memo_put(k)?;
                }
                b'r' => {
                    let k = self.len_arg(4)?;
                    self.memo_put(k)?;
                }
                b'h' => {
                    let k = self.len_arg(1)?;
                    self.memo_get(k)?;
                }
                b'j' => {
                    let k = self.len_arg(4)?;
                    self.memo_get(k)?;
                }
                b'a' => {
                    self.pop()?;
                    if self.stack.last() == Some(&Tag::Inner) {
                        self.plan.entries += 1;
                    }
                }
                b'e' | b'u' | 0x90 => drop(self.pop_mark()?),
                b's' => {
                    self.pop()?;
                    self.pop()?;
                }
                b't' | b'l' | b'd' | 0x91 => {
                    self.pop_mark()?;
                    self.push(Tag::Obj);
                }
                0x85 => {
                    self.pop()?;
                    self.push(Tag::Obj);
                }
                0x86 => {
                    self.pop()?;
                    self.pop()?;
                    self.push(Tag::Obj);
                }
                0x87 => {
                    self.pop()?;
                    self.pop()?;
                    self.pop()?;
                    self.push(Tag::Obj);
                }
                _ => {
                    return Err(ScanError::Unsupported {
                        opcode: op,
                        offset: at,
                    })
                }
            }
        }
    }

    fn scalar(&mut self, width: usize) -> Result<(), ScanError> {
        self.take(width)?;
        self.push(Tag::Any);
        Ok(())
    }

    fn sized(&mut self, width: usize) -> Result<(), ScanError> {
        self.skip_sized(width)?;
        self.push(Tag::Any);
        Ok(())
    }
}
