//! What keeps a leak's memory, where the allocation's stack shows the mechanism: a forward
//! hook, a backward hook, a training framework's callback, a closure of the user's.
//!
//! A snapshot records no references, so the holder is named only from frames the stack does
//! carry, by their roles ([`FrameRole`], decided once per interned frame in `model/roles.rs`):
//! - the module's hook dispatch (`inner` in `module.py`) between the loop line and the
//!   allocation: the kept tensors were made by a module whose output is handed to hooks; the
//!   hook's own line is never in an allocation stack (it runs after the forward returns). A
//!   profiler trace, which records every Python call, names the hook function the dispatch
//!   called right after the allocating forward; a snapshot claims no holder from the dispatch
//!   frame alone (it shows that the module has hooks, which FSDP2 registers too; see
//!   `leaks::find`);
//! - `torch/utils/hooks.py`: a backward hook's machinery;
//! - a callback's frame (`on_train_batch_end`, Lightning's or HF's dispatch): the user's
//!   callback line made what is kept, and that line is the one to change;
//! - a user's closure (a function named `closure`): its line is the one to change.
//!
//! The innermost such frame inside the loop line wins: it is the nearest to the allocation.

use crate::analysis::sites::Site;
use crate::model::{FrameKind, FrameRole};

/// The kind of holder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mechanism {
    ForwardHook,
    BackwardHook,
    Callback,
    Closure,
}

/// What keeps a leak's memory, and the line to change where the evidence names it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct KeptBy {
    pub mechanism: Mechanism,
    /// The line to change: the callback's or closure's frame in the allocation stack; for a
    /// trace's forward hook, the hook function the dispatch ran after the allocating forward.
    /// `None` where the stack shows the mechanism but not its line (a snapshot's hook).
    pub site: Option<Site>,
    /// Whether `site`'s line is the statement's (a snapshot's frame), or where its function
    /// starts (a profiler trace records a call's line as of its entry).
    pub line_is_statement: bool,
    /// For a hook: the module call whose output the hooks received (the frame just inside the
    /// dispatch: the module's `forward`).
    pub module: Option<Site>,
}

/// One frame as the search reads it.
#[derive(Clone, Debug)]
pub struct Framed {
    pub role: FrameRole,
    pub kind: FrameKind,
    pub site: Site,
}

/// The holder shown by a stack (innermost frame first), searched from the allocation out to
/// the loop line (`loop_line`, excluded) or the whole stack without one. Also the index of the
/// frame that showed it (for a trace, to find the hook the dispatch called).
pub fn from_stack(frames: &[Framed], loop_line: Option<&Site>) -> Option<(KeptBy, usize)> {
    let inside = frames
        .iter()
        .position(|f| loop_line == Some(&f.site))
        .unwrap_or(frames.len());
    let python = |f: &Framed| f.kind != FrameKind::Native;
    for (i, f) in frames[..inside].iter().enumerate() {
        if f.role.contains(FrameRole::HOOK_DISPATCH) {
            let module = frames[..i]
                .iter()
                .rev()
                .find(|g| python(g))
                .map(|g| g.site.clone());
            let k = KeptBy {
                mechanism: Mechanism::ForwardHook,
                site: None,
                line_is_statement: false,
                module,
            };
            return Some((k, i));
        }
        if f.role.contains(FrameRole::BACKWARD_HOOK) {
            let k = KeptBy {
                mechanism: Mechanism::BackwardHook,
                site: None,
                line_is_statement: false,
                module: None,
            };
            return Some((k, i));
        }
        let users = matches!(f.kind, FrameKind::User);
        if f.role.contains(FrameRole::CALLBACK) {
            // A framework's dispatch: the user's callback is the user frame just inside it.
            let site = if users {
                Some(f.site.clone())
            } else {
                frames[..i]
                    .iter()
                    .rev()
                    .find(|g| g.kind == FrameKind::User)
                    .map(|g| g.site.clone())
            };
            let k = KeptBy {
                mechanism: Mechanism::Callback,
                site,
                line_is_statement: true,
                module: None,
            };
            return Some((k, i));
        }
        if users && f.role.contains(FrameRole::CLOSURE) {
            let k = KeptBy {
                mechanism: Mechanism::Closure,
                site: Some(f.site.clone()),
                line_is_statement: true,
                module: None,
            };
            return Some((k, i));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::roles::frame_role;

    fn frame(file: &str, line: u32, name: &str, kind: FrameKind) -> Framed {
        Framed {
            role: frame_role(file, name, kind),
            kind,
            site: Site {
                file: file.into(),
                line,
                function: name.into(),
            },
        }
    }

    const M: &str = "/x/torch/nn/modules/module.py";

    #[test]
    fn the_innermost_mechanism_inside_the_loop_line_wins() {
        use FrameKind::*;
        let lp = frame("/u/train.py", 40, "main", User);
        let hooked = vec![
            frame("/x/torch/nn/modules/linear.py", 134, "forward", Torch),
            frame(M, 1833, "inner", Torch),
            frame(M, 1885, "_call_impl", Torch),
            lp.clone(),
        ];
        let (k, i) = from_stack(&hooked, Some(&lp.site)).unwrap();
        assert_eq!((k.mechanism, i), (Mechanism::ForwardHook, 1));
        assert_eq!(k.module.unwrap().line, 134);
        assert_eq!(k.site, None);
        // Outside the loop line it is not this leak's holder.
        let outside = vec![
            frame("/x/torch/nn/modules/linear.py", 134, "forward", Torch),
            lp.clone(),
            frame(M, 1833, "inner", Torch),
        ];
        assert_eq!(from_stack(&outside, Some(&lp.site)), None);
        // A callback's line is the one to change.
        let cb = vec![
            frame("/x/torch/_tensor.py", 10, "clone", Torch),
            frame("/u/train.py", 77, "on_train_batch_end", User),
            frame(
                "/x/lightning/pytorch/trainer/call.py",
                220,
                "_call_callback_hooks",
                Library,
            ),
            lp.clone(),
        ];
        let (k, _) = from_stack(&cb, Some(&lp.site)).unwrap();
        assert_eq!(k.mechanism, Mechanism::Callback);
        assert_eq!(k.site.unwrap().line, 77);
        // Lightning's own closure is not the user's.
        let lit = vec![
            frame("/u/train.py", 43, "training_step", User),
            frame(
                "/x/lightning/pytorch/loops/optimization/automatic.py",
                131,
                "closure",
                Library,
            ),
            lp.clone(),
        ];
        assert_eq!(from_stack(&lit, None), None);
        let user_closure = vec![
            frame("/u/train.py", 12, "closure", User),
            frame("/x/torch/optim/lbfgs.py", 300, "step", Torch),
            lp,
        ];
        assert_eq!(
            from_stack(&user_closure, None).unwrap().0.mechanism,
            Mechanism::Closure
        );
    }
}
