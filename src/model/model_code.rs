//! Which stacks run model code: a module call, autograd or the optimizer.
//!
//! A fact about a stack, read by the step finder (`analysis::steps`: a loop is a model loop)
//! and the loop finder (`analysis::loops`) alike; it lives here, below both, so neither
//! imports the other for it.

use rustc_hash::FxHashMap as HashMap;

use super::{FrameKind, FrameRole, StackId, Stacks};

/// Which stacks run model code (the test that a loop is a model loop).
pub struct ModelCode<'a> {
    stacks: &'a Stacks,
    memo: std::cell::RefCell<HashMap<StackId, bool>>,
}

impl<'a> ModelCode<'a> {
    pub fn new(stacks: &'a Stacks) -> Self {
        ModelCode {
            stacks,
            memo: Default::default(),
        }
    }
    pub fn is_model(&self, s: StackId) -> bool {
        if let Some(&v) = self.memo.borrow().get(&s) {
            return v;
        }
        // A module call (not `Module._apply`, which moves parameters once), autograd, or the
        // optimizer.
        let v = self.stacks.frames(s).iter().any(|&f| {
            let fr = self.stacks.frame(f);
            fr.kind == FrameKind::Torch
                && fr.role.intersects(
                    FrameRole::MODULE_CALL
                        | FrameRole::AUTOGRAD
                        | FrameRole::OPTIMIZER
                        | FrameRole::BACKWARD_ENTRY,
                )
        });
        self.memo.borrow_mut().insert(s, v);
        v
    }
}
