//! The requests that are a recurrent module's cuDNN workspaces (issue 39, lstm_fp32).
//!
//! cuDNN's RNN backward asks for a workspace sized by the algorithm it picks for the shape:
//! fixtures/plan/cudnn39's LSTM asks 39.1, 78.1, 129.4 and 129.4 MiB at b16, b32, b64 and b128.
//! Three such sizes fit no exact term, so the fit left the request unpaired across captures and
//! it kept the linear term of the first two (312.5 MiB at b128). Unlike a convolution's
//! workspace (`elastic`), cuDNN does not fall back to a smaller algorithm when the allocator
//! cannot give it: the replay must keep it under the cap.
//!
//! The backward runs on autograd's engine thread, which records no Python frame, so the
//! request is told by its lifetime in a capture whose forward runs a recurrent module (a frame
//! of [`FrameRole::RECURRENT`], decided once per interned frame): a backward request freed
//! before every request made after it is freed (a scoped temporary of one kernel call: the
//! workspace outlives only the 160-byte temporaries made while it is held).

use rustc_hash::FxHashSet as HashSet;

use crate::analysis::categories::free_events;
use crate::model::{Action, Device, FrameRole, Stacks};

/// Per log event index, whether it is a recurrent module's backward workspace. Empty where no
/// request of the capture comes from a recurrent module.
pub fn rnn_workspaces(stacks: &Stacks, dev: &Device) -> HashSet<usize> {
    let mut out = HashSet::default();
    let recurrent = dev.events.iter().any(|e| {
        e.action == Action::Alloc && stacks.roles(e.stack).any.contains(FrameRole::RECURRENT)
    });
    if !recurrent {
        return out;
    }
    // The alloc each free event frees.
    let mut freed_by: Vec<Option<u32>> = vec![None; dev.events.len()];
    for (a, f) in free_events(dev) {
        if let Some(slot) = freed_by.get_mut(f as usize) {
            *slot = Some(a);
        }
    }
    // Open allocations, oldest first; one freed while a later one is open stays as a dead
    // entry, dropped once nothing open is above it. Each entry is pushed and popped once.
    // Entries are only pushed and popped at the end, so an entry's position stays put.
    let mut open: Vec<(u32, bool)> = Vec::new();
    let mut pos: Vec<u32> = vec![u32::MAX; dev.events.len()];
    for (i, e) in dev.events.iter().enumerate() {
        if e.action == Action::Alloc {
            pos[i] = open.len() as u32;
            open.push((i as u32, true));
            continue;
        }
        let Some(a) = freed_by[i] else {
            continue;
        };
        if open.last().is_some_and(|&(t, _)| t == a) {
            open.pop();
            let s = dev.events[a as usize].stack;
            if stacks.frames(s).is_empty() || stacks.backward_evidence(s) {
                out.insert(a as usize);
            }
        } else if let Some(entry) = open.get_mut(pos[a as usize] as usize) {
            if entry.0 == a {
                entry.1 = false;
            }
        }
        while open.last().is_some_and(|&(_, live)| !live) {
            open.pop();
        }
    }
    out
}
