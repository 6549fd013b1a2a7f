//! The analysis report's "Capacity plan" section (`memscope report --batch`): per device the
//! plan, the largest batch (or why none), the chart of peak against batch with the cap, the
//! predictions and the notes; or why there is no plan. A fragment of HTML the report's page
//! embeds ([`crate::report::html::Html::extra`]); everything from the capture is escaped.

use std::fmt::Write as _;
use std::io::{self, Write};

use crate::analysis::plan::{Plan, PlanError, Shape};
use crate::escape::html as esc;
use crate::report::{Options, Render};
use crate::units::bytes;
use crate::wording;

/// The section, from the plans or the reason there are none.
pub struct Section;

impl Render<Result<Vec<Plan>, PlanError>> for Section {
    fn render(
        &self,
        plans: &Result<Vec<Plan>, PlanError>,
        _opts: &Options,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        out.write_all(section(plans).as_bytes())
    }
}

/// The report's "Capacity plan" section (`report --batch`): per device plan, the largest batch
/// (or why none), the chart of peak against batch with the cap, the predictions and the notes;
/// or why there is no plan. Everything from the capture is escaped.
fn section(plans: &Result<Vec<Plan>, PlanError>) -> String {
    let mut o = String::from(r#"<section id="capacity-plan" class="plan"><h2>Capacity plan</h2>"#);
    let plans = match plans {
        Ok(p) => p,
        Err(e) => {
            let _ = write!(
                o,
                "<p>No capacity plan: {}</p></section>",
                esc(&e.to_string())
            );
            return o;
        }
    };
    for p in plans {
        let _ = write!(
            o,
            r#"<h3 id="capacity-plan-{0}">cuda:{0}</h3><p class=sub>recorded at {1}: peak allocated {2}, peak reserved {3}; the allocator model's replay of it: {4}, {5} · cap: {6}</p>"#,
            p.device,
            esc(&p.recorded.to_string()),
            bytes(p.recorded_peak_allocated_bytes),
            bytes(p.recorded_peak_reserved_bytes),
            bytes(p.model_peak_allocated_bytes),
            bytes(p.model_peak_reserved_bytes),
            match p.cap.bytes {
                Some(c) => format!("{} ({})", bytes(c), esc(wording::cap_source(p.cap.source))),
                None => "none".to_owned(),
            }
        );
        match &p.max_batch {
            Ok(m) => {
                let _ = write!(
                    o,
                    r#"<p class="max-batch"><b>Largest batch:</b> {}{}"#,
                    m.batch,
                    p.recorded
                        .seq
                        .map(|s| format!(" at sequence {s}"))
                        .unwrap_or_default()
                );
                if m.at_search_limit {
                    o.push_str(&esc(&wording::plan_search_limit()));
                }
                if m.rounded_down_by > 0 || m.margin_bytes > 0 {
                    let _ = write!(
                        o,
                        " <span class=sub>{}</span>",
                        esc(&wording::plan_max_batch_kept(
                            m.rounded_down_by,
                            m.central_batch,
                            &bytes(m.margin_bytes)
                        ))
                    );
                }
                o.push_str("</p>");
            }
            Err(r) => {
                let _ = write!(
                    o,
                    r#"<p class="max-batch"><b>Largest batch:</b> unknown{}: {}</p>"#,
                    p.max_batch_at_most
                        .map(|m| format!(" (at most {m})"))
                        .unwrap_or_default(),
                    esc(wording::no_max_batch(*r))
                );
            }
        }
        let chart = super::html::chart_svg(p);
        if !chart.is_empty() {
            let _ = write!(o, r#"<div class="card">{chart}</div>"#);
        }
        // A capture that ends at an OOM never made the rest of its step: lower bounds.
        let ge = if p.ends_in_oom { "≥ " } else { "" };
        o.push_str("<table><tr><th>at</th><th class=n>peak allocated</th><th class=n>upper</th><th class=n>peak reserved</th><th class=n>upper</th><th>under the cap</th></tr>");
        for r in &p.predictions {
            let _ = write!(
                o,
                "<tr><td>{}</td><td class=n>{ge}{}</td><td class=n>{ge}{}</td><td class=n>{ge}{}</td><td class=n>{ge}{}</td><td>{}</td></tr>",
                esc(&Shape {
                    batch: r.batch,
                    seq: r.seq
                }.to_string()),
                bytes(r.peak_allocated_bytes),
                bytes(r.peak_allocated_upper_bytes),
                bytes(r.peak_reserved_bytes),
                bytes(r.peak_reserved_upper_bytes),
                match r.oom {
                    Some(true) => "OOM",
                    Some(false) if p.ends_in_oom => "fits up to the OOM's request",
                    Some(false) => "fits",
                    None => "-",
                }
            );
        }
        let _ = write!(
            o,
            r#"</table><p class=sub>{}</p><ul class="notes">"#,
            esc(&wording::plan_fit(&p.fit, p.recorded))
        );
        for n in wording::plan_notes(p) {
            let _ = write!(o, "<li>{}</li>", esc(&n));
        }
        o.push_str("</ul>");
    }
    o.push_str("</section>");
    o
}
