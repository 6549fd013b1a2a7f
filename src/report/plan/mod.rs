//! `memscope plan`'s outputs: text for the terminal, JSON for scripts, and an HTML page with
//! the chart of peak against batch. Each is one [`PlanFormat`]; the analysis
//! ([`crate::analysis::plan`]) computes the plan, the words come from [`crate::wording`].

pub mod html;
pub mod json;
pub mod text;

use std::io::{self, Write};

use crate::analysis::plan::Plan;

/// What every plan output shows besides the plans: the file they come from.
pub struct PlanDoc<'a> {
    pub file: &'a str,
    pub other: Option<&'a str>,
    pub plans: &'a [Plan],
}

/// One output format of a plan.
pub trait PlanFormat {
    fn render(&self, doc: &PlanDoc, color: bool, out: &mut dyn Write) -> io::Result<()>;
}

/// Renders into a `String` (tests and callers that need the text).
pub fn to_string(f: &dyn PlanFormat, doc: &PlanDoc) -> String {
    let mut v = Vec::new();
    f.render(doc, false, &mut v)
        .expect("writing to a Vec cannot fail");
    String::from_utf8(v).expect("formats write UTF-8")
}
