//! What `analyze` says beyond the verdict and the OOM, for the overview's text pane: each
//! device's steps, the sites holding the most at the peak, and memory by category. Without it a
//! clean capture's overview was a verdict and one table row over an empty pane.

use ratatui::style::Style;

use super::widgets::{bold, dim};
use crate::analysis::categories::Categories;
use crate::analysis::{Analysis, DeviceReport};
use crate::units::bytes;
use crate::wording::{site_label, step_figures};

/// Sites listed per device (the text report's table has more; the Sites view has all).
const TOP: usize = 5;

/// The lines for every device, a blank line before each block.
pub fn summary_lines(a: &Analysis) -> Vec<(String, Style)> {
    let mut out = Vec::new();
    for d in &a.devices {
        steps_line(a, d, &mut out);
        sites_lines(d, &mut out);
        let (cats, when) = match (&d.categories_at_peak, &d.categories_at_dump) {
            (Some(c), _) => (Some(c), "at the peak"),
            (None, Some(c)) => (Some(c), "at the dump"),
            _ => (None, ""),
        };
        if let Some(line) = cats.and_then(categories_line) {
            out.push((
                format!("by category {when} on cuda:{}: {line}", d.device),
                Style::default(),
            ));
        }
    }
    out
}

/// `STEPS cuda:N: 12 steps; allocated at step end 300 MiB (step 1) .. 331 MiB (step 12); ...`
fn steps_line(a: &Analysis, d: &DeviceReport, out: &mut Vec<(String, Style)>) {
    let ds: Vec<_> = a.steps.iter().filter(|s| s.device == d.device).collect();
    out.push((String::new(), Style::default()));
    let text = match step_figures(&ds) {
        Some((what, ends, peak)) => format!(
            "STEPS cuda:{}: {} steps; allocated at step end{what} {ends}; highest step peak {peak}",
            d.device,
            ds.len(),
        ),
        _ if d.structure.single_pass => format!(
            "STEPS cuda:{}: none, the log is one pass through the program",
            d.device
        ),
        _ if !d.has_history => format!(
            "STEPS cuda:{}: none, the capture has no allocation history",
            d.device
        ),
        _ => format!("STEPS cuda:{}: none found in the log", d.device),
    };
    out.push((text, bold()));
}

/// The sites holding the most, at the peak (else at the end).
fn sites_lines(d: &DeviceReport, out: &mut Vec<(String, Style)>) {
    let (sites, when) = if d.top_sites_at_peak.is_empty() {
        (&d.top_sites, "at the end")
    } else {
        (&d.top_sites_at_peak, "at the peak")
    };
    if sites.is_empty() {
        return;
    }
    out.push((
        format!(
            "top sites {when} on cuda:{} (4 Sites: all, at the cursor)",
            d.device
        ),
        dim(),
    ));
    for s in sites.iter().take(TOP) {
        // `(no stack recorded: why)` without the why, which the text report and Sites give.
        // A C++ name with its template arguments collapsed (issue 42).
        let mut s = s.clone();
        if let Some(site) = &mut s.site {
            site.function = crate::model::frames::short_cpp(&site.function);
        }
        let mut label = crate::tui::widgets::collapse_cpp(&site_label(&s));
        if let (true, Some(i)) = (label.starts_with('('), label.find(':')) {
            label = format!("{})", &label[..i]);
        }
        out.push((
            format!("  {:>10} {:>5} blocks  {label}", bytes(s.bytes), s.blocks),
            Style::default(),
        ));
    }
}

/// `parameters 64.0 MiB, gradients 96.0 MiB, ...`, the categories holding anything.
fn categories_line(c: &Categories) -> Option<String> {
    let parts: Vec<String> = c
        .named()
        .iter()
        .map(|(n, b)| format!("{n} {}", bytes(*b)))
        .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}
