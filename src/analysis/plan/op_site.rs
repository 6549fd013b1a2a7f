//! Which op call a request was made in, as far as its stack can say: the Python frames.
//!
//! An op call shows in a log as a run of consecutive requests, and a capture taken with
//! Python frames only gives every request of the call one stack. One taken with
//! `context="all"` adds the C++ frames, which differ inside a call: autocast's cast of a weight
//! runs under `at::_to_copy`, the output under `at::addmm`. Runs, and what the call is
//! (an `nn.Linear`'s forward, a norm that keeps fp32), are read from the Python frames alone,
//! so both kinds of capture split a log into the same calls; a stack with no Python frame (the
//! backward's engine thread) stays its own site, as before.

use rustc_hash::FxHashMap as HashMap;

use crate::model::{FrameId, FrameKind, FrameRole, StackId, Stacks};

/// Per stack (memoised), its op site and the roles of its innermost Python frame.
pub(super) struct OpSites<'a> {
    stacks: &'a Stacks,
    site: HashMap<StackId, (u32, FrameRole)>,
    ids: HashMap<Vec<FrameId>, u32>,
}

impl<'a> OpSites<'a> {
    pub(super) fn new(stacks: &'a Stacks) -> OpSites<'a> {
        OpSites {
            stacks,
            site: HashMap::default(),
            ids: HashMap::default(),
        }
    }

    /// The site of a stack: equal for two stacks exactly where their Python frames are equal
    /// (stacks with no Python frame: where the stacks are equal).
    pub(super) fn site(&mut self, s: StackId) -> u32 {
        self.get(s).0
    }

    /// The roles of the stack's innermost Python frame (none where it has no Python frame).
    pub(super) fn innermost_python(&mut self, s: StackId) -> FrameRole {
        self.get(s).1
    }

    fn get(&mut self, s: StackId) -> (u32, FrameRole) {
        if let Some(&v) = self.site.get(&s) {
            return v;
        }
        let stacks = self.stacks;
        let python: Vec<FrameId> = stacks
            .frames(s)
            .iter()
            .copied()
            .filter(|&f| stacks.frame(f).kind != FrameKind::Native)
            .collect();
        let role = python
            .first()
            .map_or(FrameRole::NONE, |&f| stacks.frame(f).role);
        // A stack without Python frames is keyed by its own frames, marked apart from any
        // Python key by a leading sentinel.
        let key = if python.is_empty() {
            let mut k = vec![FrameId(u32::MAX)];
            k.extend_from_slice(stacks.frames(s));
            k
        } else {
            python
        };
        let next = self.ids.len() as u32;
        let id = *self.ids.entry(key).or_insert(next);
        self.site.insert(s, (id, role));
        (id, role)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_frames_do_not_split_a_call() {
        let mut st = Stacks::new();
        let linear = st.intern_frame(
            "/x/site-packages/torch/nn/modules/linear.py",
            125,
            "forward",
        );
        let user = st.intern_frame("/w/train.py", 40, "forward");
        let to_copy = st.intern_frame("??", 0, "at::native::_to_copy(...)");
        let addmm = st.intern_frame("??", 0, "at::native::addmm_out(...)");
        let engine = st.intern_frame("??", 0, "torch::autograd::Engine::thread_main()");
        let cast = st.intern_stack(&[to_copy, linear, user]);
        let out = st.intern_stack(&[addmm, linear, user]);
        let other = st.intern_stack(&[addmm, user]);
        let bwd1 = st.intern_stack(&[to_copy, engine]);
        let bwd2 = st.intern_stack(&[addmm, engine]);
        let mut sites = OpSites::new(&st);
        assert_eq!(sites.site(cast), sites.site(out));
        assert_ne!(sites.site(cast), sites.site(other));
        assert_ne!(sites.site(bwd1), sites.site(bwd2));
        assert!(sites
            .innermost_python(cast)
            .contains(FrameRole::WEIGHT_MODULE));
        assert!(!sites
            .innermost_python(other)
            .contains(FrameRole::WEIGHT_MODULE));
        assert!(sites.innermost_python(bwd1).is_empty());
    }
}
