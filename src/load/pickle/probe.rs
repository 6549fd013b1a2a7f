//! Two questions about a pickle that only the decoder can answer, asked by the frame-cut
//! planner of a parallel decode (`crate::load::framecut`, issue 43) and by its tests:
//!
//! * [`handoff`]: where the first trace-entry batch whose entries name their `action` key
//!   through the memo starts, with the memo's length there: the place a parallel decode of the
//!   trace list takes over from the serial decoder, and the memo index its cuts look for.
//! * [`memo_lengths_at`]: how many memo entries the decoder holds at given offsets: the truth
//!   the planner's per-range memo counts (prefix sums of `MEMOIZE`s) must equal.
//!
//! Both run the generic opcode loop (no finalizer, no fast path, so every opcode boundary is
//! visited) with a watch at each opcode; they cost a serial decode of what they read and are
//! bounded like it (the same [`Limits`]).

use super::*;

/// What [`handoff`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handoff {
    /// Offset of the batch's `MARK`.
    pub pos: usize,
    /// Memo entries stored before it (the index its first `MEMOIZE` gives).
    pub memo_len: u64,
    /// The memo index of the `str` `"action"` its first entry names as its first key.
    pub action: u32,
    /// Items already in the list the batch adds to.
    pub items: usize,
}

/// What the watch looks for.
pub(super) struct Probe {
    /// Sorted offsets whose memo length is wanted, and how many are done.
    at: Vec<usize>,
    done: usize,
    lens: Vec<Option<u64>>,
    /// Stop at the first trace-entry batch (see [`handoff`]).
    stop_at_batch: bool,
    found: Option<Handoff>,
}

/// Skips `FRAME` headers at `d[p]`: the offset of the next other opcode.
pub(crate) fn skip_frames(d: &[u8], mut p: usize) -> usize {
    while d.get(p) == Some(&0x95) && p + 9 <= d.len() {
        p += 9;
    }
    p
}

/// The memo index a trace entry starting at `d[p]` names as its first key:
/// `EMPTY_DICT MEMOIZE MARK (BINGET i | LONG_BINGET i)`, `FRAME` headers allowed between.
pub(crate) fn entry_key_at(d: &[u8], p: usize) -> Option<u32> {
    let mut p = skip_frames(d, p);
    for want in [b'}', 0x94, b'('] {
        if d.get(p) != Some(&want) {
            return None;
        }
        p = skip_frames(d, p + 1);
    }
    match *d.get(p)? {
        b'h' => d.get(p + 1).map(|&i| i as u32),
        b'j' => {
            let b = d.get(p + 1..p + 5)?;
            Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        }
        _ => None,
    }
}

impl Vm<'_, '_> {
    /// The watch, before the opcode at `self.pos`: records checkpoints; `true` to stop.
    pub(super) fn probe_stop(&mut self) -> bool {
        let pos = self.pos;
        let memo_len = (self.memo.len() + self.sparse_memo.len()) as u64;
        let pr = self.probe.as_mut().expect("called with a probe");
        while pr.done < pr.at.len() && pr.at[pr.done] <= pos {
            pr.lens[pr.done] = (pr.at[pr.done] == pos).then_some(memo_len);
            pr.done += 1;
        }
        if !pr.stop_at_batch || self.data[pos] != b'(' {
            return false;
        }
        let Some(action) = entry_key_at(self.data, pos + 1) else {
            return false;
        };
        let is_action = matches!(self.memo.get(action as usize), Some(Some(v @ Value::Str(_)))
            if self.arena.raw_bytes(*v) == Some(&b"action"[..]));
        let items = match self.stack.last() {
            Some(Value::List(id)) => match &self.arena.objects[id.0 as usize] {
                Container::Seq(items) => items.len(),
                _ => return false,
            },
            _ => return false,
        };
        if !is_action {
            return false;
        }
        let pr = self.probe.as_mut().expect("called with a probe");
        pr.found = Some(Handoff {
            pos,
            memo_len,
            action,
            items,
        });
        true
    }
}

fn watch(data: &[u8], probe: Probe) -> Result<Probe, PickleError> {
    let mut vm = Vm::new(data, Limits::for_input(data.len()), None);
    vm.probe = Some(Box::new(probe));
    vm.next_progress = 0;
    if data.len() > vm.limits.max_input {
        return Err(PickleError::Limit {
            offset: 0,
            what: "input size in bytes",
            limit: vm.limits.max_input as u64,
        });
    }
    let r = vm.run();
    let pr = *vm.probe.take().expect("set above");
    r.map(|_| pr)
}

/// Where a parallel decode of a snapshot's trace list may take over: the first `MARK` that opens
/// a batch of a list still being built whose first item is a trace entry naming its first key
/// through the memo, where that key is the `str` `"action"` (`None`: no such batch before the
/// pickle's `STOP`). In a pickle Python wrote, that is the trace list's second batch of 1000.
pub fn handoff(data: &[u8]) -> Result<Option<Handoff>, PickleError> {
    let probe = Probe {
        at: Vec::new(),
        done: 0,
        lens: Vec::new(),
        stop_at_batch: true,
        found: None,
    };
    Ok(watch(data, probe)?.found)
}

/// The decoder's memo length (entries stored) when it reaches each offset of `at` (sorted
/// ascending); `None` for an offset that is no opcode boundary of the decode.
pub fn memo_lengths_at(data: &[u8], at: &[usize]) -> Result<Vec<Option<u64>>, PickleError> {
    let probe = Probe {
        at: at.to_vec(),
        done: 0,
        lens: vec![None; at.len()],
        stop_at_batch: false,
        found: None,
    };
    Ok(watch(data, probe)?.lens)
}
