//! The words: every sentence a view shows about a conclusion, made from the analysis' typed
//! evidence in one place.
//!
//! The analysis decides (enums and figures); this module says. The text report, the HTML
//! report, the JSON's `summary` fields, the TUI and the gate's annotations all call these
//! functions, so a label and its explanation cannot disagree between views, and rewording a
//! sentence never touches the analysis. It sits above `analysis` and below every view.

mod leaks;
mod verdict;

pub use leaks::{leak_explanation, leak_fix};
pub use verdict::{not_judged, verdict};
