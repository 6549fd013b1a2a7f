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
use crate::analysis::sites::{Origin, Site, SiteTotal, StackLabels};
use crate::analysis::StepReport;
use crate::units::{bytes, signed_bytes};

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

/// How a site row is named, in every format that lists sites.
pub fn site_label(s: &SiteTotal) -> String {
    // Code torch.compile wrote, blamed where no user frame is outside it (a compiled
    // backward on autograd's thread): said as such, not as a temporary file's hash.
    if let Some(site) = s
        .site
        .as_ref()
        .filter(|x| crate::model::frames::is_generated_file(&x.file))
    {
        let base = site.file.rsplit(['/', '\\']).next().unwrap_or(&site.file);
        let what = if base.starts_with("fx_generated_") {
            "FX graph"
        } else {
            "inductor kernel call"
        };
        let short: String = base.chars().take(20).collect();
        return format!(
            "{what} (generated code {short}…:{} {}; no user frame outside it)",
            site.line, site.function
        );
    }
    match s.origin {
        Origin::PendingFree => {
            let what = "freed by the program, awaiting another stream's work (record_stream)";
            return match &s.site {
                None => format!("({what}; no stack recorded)"),
                Some(site) if site.line == 0 && !site.file.ends_with(".py") => {
                    format!("{} (native; {what})", site.function)
                }
                Some(site) => format!("{}:{} in {} ({what})", site.file, site.line, site.function),
            };
        }
        Origin::BeforeRecordingOrOffThread if s.site.is_none() => {
            return "(no stack recorded: allocated before recording began, or by autograd's engine thread, which records no Python frame; the capture cannot tell which)".into();
        }
        _ => {}
    }
    if s.before_recording {
        return match &s.site {
            None => "(allocated before recording began; no stack recorded)".into(),
            Some(site) if site.line == 0 && !site.file.ends_with(".py") => format!(
                "{} (native; allocated before the log's first entry)",
                site.function
            ),
            Some(site) => format!(
                "{}:{} in {} (allocated before the log's first entry)",
                site.file, site.line, site.function
            ),
        };
    }
    match &s.site {
        Some(site) if site.line == 0 && !site.file.ends_with(".py") => {
            // A native frame: no Python frame in the stack (e.g. the autograd engine's thread).
            format!("{} (native; no Python frame)", site.function)
        }
        Some(site) => {
            let who = if s.user_code { "" } else { " (library)" };
            format!("{}:{} in {}{who}", site.file, site.line, site.function)
        }
        None => "(no stack recorded: allocated off the Python thread, e.g. by autograd's engine in a backward)".into(),
    }
}

/// The steps line's figures: what they are (`""`, or that they are changes from the trace's
/// start), the first and last step ends (`0 B (step 1) .. 2 MiB (step 9)`) and the highest step
/// peak: in bytes in use, or signed changes where that is all the capture gives. `None`
/// without steps. The text report and the TUI's overview both write them.
pub fn step_figures(ds: &[&StepReport]) -> Option<(&'static str, String, String)> {
    let (first, last) = (ds.first()?, ds.last()?);
    let figures = match (first.from_start, last.from_start) {
        (Some(a), Some(b)) => {
            let peak = ds
                .iter()
                .filter_map(|s| s.from_start.map(|f| f.peak_allocated_bytes))
                .max()
                .unwrap_or(0);
            (
                " (changes from the trace's start)",
                format!(
                    "{} ({}) .. {} ({})",
                    signed_bytes(a.end_allocated_bytes),
                    first.name,
                    signed_bytes(b.end_allocated_bytes),
                    last.name
                ),
                format!("{} above the trace's start", signed_bytes(peak)),
            )
        }
        _ => {
            let peak = ds.iter().map(|s| s.peak_allocated_bytes).max().unwrap_or(0);
            (
                "",
                format!(
                    "{} ({}) .. {} ({})",
                    bytes(first.end_allocated_bytes),
                    first.name,
                    bytes(last.end_allocated_bytes),
                    last.name
                ),
                bytes(peak),
            )
        }
    };
    Some(figures)
}

/// A site by its file's base name (`train.py:12 step`; empty without one): the TUI's short form.
pub fn short_site(s: &Option<Site>) -> String {
    s.as_ref()
        .map(|s| {
            let file = s.file.rsplit(['/', '\\']).next().unwrap_or(&s.file);
            format!("{file}:{} {}", s.line, s.function)
        })
        .unwrap_or_default()
}

/// [`short_site`], or `(no user frame)` for a finding without one (a trace's graph growth).
pub fn short_site_label(s: &Option<Site>) -> String {
    match s {
        Some(_) => short_site(s),
        None => "(no user frame)".into(),
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
