//! What one stretch of the log does, as the step search needs to know it: whether it runs the
//! backward pass, whether it calls a module. Both are the frame roles `model/` decided once per
//! interned stack ([`crate::model::StackRoles`]); this only folds them over a stretch.

use crate::model::roles::FrameRole;
use crate::model::{Action, Device, Stacks};

/// `(backward, module call)` of the allocations of `dev.events[range]`.
pub(crate) fn of_range(
    stacks: &Stacks,
    dev: &Device,
    range: std::ops::Range<usize>,
) -> (bool, bool) {
    let mut out = (false, false);
    for e in &dev.events[range.start.min(dev.events.len())..range.end.min(dev.events.len())] {
        if e.action != Action::Alloc {
            continue;
        }
        let r = stacks.roles(e.stack);
        out = (
            out.0 || r.backward,
            out.1 || r.any.contains(FrameRole::MODULE_CALL),
        );
        if out == (true, true) {
            break;
        }
    }
    out
}
