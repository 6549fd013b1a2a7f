//! Short labels of findings and sites in words: where a leak's window starts and ends
//! ([`StepLabel`]), and the line that stands for a stack's frames past the ones spelled out
//! ([`StackLabels`]).
//!
//! The JSON carries both as strings in the middle of the analysis' own fields (a leak's
//! `first_step`, a site's `stack`), where `report::json` cannot add a field beside them: their
//! `Serialize` is here, beside their words, so the analysis derives its own and stays wordless.

use std::borrow::Cow;

use serde::ser::SerializeSeq;
use serde::{Serialize, Serializer};

use crate::analysis::leaks::StepLabel;
use crate::analysis::sites::StackLabels;

/// A step's name, or `OOM at event N` for a retried attempt.
pub fn step_label(l: &StepLabel) -> Cow<'_, str> {
    match l {
        StepLabel::Step(name) => Cow::Borrowed(name),
        StepLabel::OomAt(event) => Cow::Owned(format!("OOM at event {}", event.0)),
    }
}

/// A stack's lines: its frames, then `... N more frames` where some were left out.
pub fn stack_lines(s: &StackLabels) -> impl Iterator<Item = Cow<'_, str>> {
    let more = (s.more > 0).then(|| Cow::Owned(format!("... {} more frames", s.more)));
    s.frames
        .iter()
        .map(|f| Cow::Borrowed(f.as_str()))
        .chain(more)
}

/// The JSON's `first_step` and `last_step`: the label.
impl Serialize for StepLabel {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&step_label(self))
    }
}

/// The JSON's `stack` of a site: its lines.
impl Serialize for StackLabels {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.frames.len() + usize::from(self.more > 0)))?;
        for line in stack_lines(self) {
            seq.serialize_element(&line)?;
        }
        seq.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::EventIdx;

    #[test]
    fn a_stack_past_its_spelled_out_frames_ends_with_how_many_more() {
        let s = StackLabels {
            frames: vec!["a.py:1 f".into(), "b.py:2 g".into()],
            more: 3,
        };
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            serde_json::json!(["a.py:1 f", "b.py:2 g", "... 3 more frames"])
        );
        let whole = StackLabels {
            more: 0,
            ..s.clone()
        };
        assert_eq!(stack_lines(&whole).count(), 2);
    }

    #[test]
    fn a_retried_attempt_is_named_by_its_oom() {
        let l = StepLabel::OomAt(EventIdx(15));
        assert_eq!(serde_json::to_value(&l).unwrap(), "OOM at event 15");
        assert_eq!(step_label(&StepLabel::Step("step 6".into())), "step 6");
    }
}
