//! Short labels of findings and sites in words: where a leak's window starts and ends
//! ([`StepLabel`]), and the line that stands for a stack's frames past the ones spelled out
//! ([`StackLabels`]).
//!
//! The JSON carries both as strings among the analysis' own fields (a leak's `first_step`, a
//! site's `stack`), where `report::json` cannot add a field beside them: the analysis' fields
//! serialize through the functions here (`serialize_with`), beside the words.

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

/// Serializes a step label as its words (a leak's `first_step` and `last_step`, unchanged
/// since they were strings).
pub fn serialize_step_label<S: Serializer>(l: &StepLabel, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&step_label(l))
}

/// Serializes a stack as its lines (a site's `stack`, unchanged since it was a list of them).
pub fn serialize_stack_lines<S: Serializer>(st: &StackLabels, s: S) -> Result<S::Ok, S::Error> {
    let mut seq = s.serialize_seq(Some(st.frames.len() + usize::from(st.more > 0)))?;
    for line in stack_lines(st) {
        seq.serialize_element(&line)?;
    }
    seq.end()
}

/// A leak's `first_step`/`last_step` in JSON: the label's words.
impl Serialize for StepLabel {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_step_label(self, s)
    }
}

/// A site's `stack` in JSON: its frames' labels, then the line for the rest.
impl Serialize for StackLabels {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_stack_lines(self, s)
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
        let json = serialize_stack_lines(&s, serde_json::value::Serializer).unwrap();
        assert_eq!(
            json,
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
        let json = serialize_step_label(&l, serde_json::value::Serializer).unwrap();
        assert_eq!(json, "OOM at event 15");
        assert_eq!(step_label(&StepLabel::Step("step 6".into())), "step 6");
    }
}
