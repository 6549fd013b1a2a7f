//! What one stretch of the log does, as the step search needs to know it: whether it runs the
//! backward pass, whether it calls a module. The only frame tests the step and leak searches
//! make for this, kept in one place so that they can read the frame roles of `model/` (backward
//! entry, autograd engine, module call) once those exist, without touching the searches.

use rustc_hash::FxHashMap as HashMap;

use crate::model::{Action, Device, FrameKind, StackId, Stacks};

/// Per-stack memo of what a stack shows.
pub(crate) struct Work<'a> {
    stacks: &'a Stacks,
    memo: HashMap<StackId, (bool, bool)>,
}

impl<'a> Work<'a> {
    pub(crate) fn new(stacks: &'a Stacks) -> Self {
        Work {
            stacks,
            memo: HashMap::default(),
        }
    }

    /// `(backward, module call)` of one stack.
    fn of(&mut self, s: StackId) -> (bool, bool) {
        let stacks = self.stacks;
        *self.memo.entry(s).or_insert_with(|| {
            let module = stacks.frames(s).iter().any(|&f| {
                let fr = stacks.frame(f);
                fr.kind == FrameKind::Torch
                    && stacks.str(fr.file).contains("torch/nn/modules/")
                    && matches!(
                        stacks.str(fr.name),
                        "forward" | "_call_impl" | "_wrapped_call_impl"
                    )
            });
            (stacks.backward_evidence(s), module)
        })
    }

    /// `(backward, module call)` of the allocations of `dev.events[range]`.
    pub(crate) fn of_range(&mut self, dev: &Device, range: std::ops::Range<usize>) -> (bool, bool) {
        let mut out = (false, false);
        for e in &dev.events[range.start.min(dev.events.len())..range.end.min(dev.events.len())] {
            if e.action != Action::Alloc {
                continue;
            }
            let (b, m) = self.of(e.stack);
            out = (out.0 || b, out.1 || m);
            if out == (true, true) {
                break;
            }
        }
        out
    }
}
