//! The job view's formats: several ranks of one job in one text report, one JSON document, or
//! one HTML page (`analyze`, `analyze --format json`, `report` given several files).
//!
//! Each is a [`Render`] of the [`Job`] ([`Text`], [`Json`] alone or [`InEnvelope`], [`Html`]);
//! all read the product and nothing else; the sentences come from
//! [`crate::wording::job`]. Paths are capture data: the text goes through the terminal boundary
//! (the caller's writer), the HTML through [`crate::escape::html`], the JSON through serde.

use std::io::{self, Write};

pub use crate::job::table::{rank_cells, table_lines, HEADINGS, SITE_ROWS};
use crate::job::Job;
use crate::report::envelope::InEnvelope;
use crate::report::style::Style;
use crate::report::{Options, Render};
use crate::units::bytes;
use crate::wording::job as words;

/// The human report of a job.
pub struct Text;

impl Render<Job> for Text {
    fn render(&self, job: &Job, opts: &Options, out: &mut dyn Write) -> io::Result<()> {
        text(job, opts, out)
    }
}

fn text(job: &Job, opts: &Options, out: &mut dyn Write) -> io::Result<()> {
    let st = Style { on: opts.color };
    let kinds: Vec<&str> = {
        let mut k: Vec<&str> = job.ranks.iter().map(|r| r.kind.name()).collect();
        k.sort_unstable();
        k.dedup();
        k
    };
    writeln!(
        out,
        "{} job of {} ranks ({})",
        st.bold("memscope"),
        job.ranks.len(),
        kinds.join(", ")
    )?;
    writeln!(out)?;
    let bad = !job.oom_ranks.is_empty() || !job.leak_ranks.is_empty();
    let verdict = words::job_verdict(&job.verdict());
    writeln!(
        out,
        "{} {}",
        st.bold("VERDICT"),
        if bad { st.red(&verdict) } else { verdict }
    )?;
    writeln!(out)?;
    writeln!(out, "{}", st.bold("RANKS"))?;
    for l in table_lines(job) {
        writeln!(out, "  {l}")?;
    }
    if job.ranks.iter().any(|r| !r.peak_exact) {
        writeln!(out, "  {}", st.dim(words::PEAKS_SEEN))?;
    }
    if !job.unjudged_ranks.is_empty() {
        writeln!(out, "  {}", st.dim(words::LEAKS_UNJUDGED))?;
    }
    if let Some(p) = job.peak_rank {
        writeln!(out, "  peak_rank: {p}")?;
    }
    writeln!(
        out,
        "  oom_ranks: {}",
        if job.oom_ranks.is_empty() {
            "none".into()
        } else {
            words::rank_list(&job.oom_ranks)
        }
    )?;
    if let Some(i) = &job.imbalance {
        writeln!(out)?;
        writeln!(
            out,
            "{} of peak allocated: {}",
            st.bold("IMBALANCE"),
            words::imbalance_figures(&i.spread())
        )?;
        writeln!(
            out,
            "  max   {:>10}  rank {}",
            bytes(i.max.bytes),
            i.max.rank
        )?;
        writeln!(
            out,
            "  min   {:>10}  rank {}",
            bytes(i.min.bytes),
            i.min.rank
        )?;
        writeln!(out, "  mean  {:>10}", bytes(i.mean_bytes))?;
        writeln!(out, "  {}", st.dim(words::IMBALANCE_HOW))?;
    }
    if let Some(s) = &job.sites {
        writeln!(out)?;
        writeln!(
            out,
            "{} live at the peak, rank {} (highest) against rank {} (lowest)",
            st.bold("SITES THAT DIFFER"),
            s.high_rank,
            s.low_rank
        )?;
        if s.changes.is_empty() {
            writeln!(out, "  none: the same sites held the same bytes")?;
        }
        for c in s.changes.iter().take(SITE_ROWS) {
            writeln!(out, "  {}", c.describe())?;
        }
        if s.changes.len() > SITE_ROWS {
            writeln!(out, "  ... {} more", s.changes.len() - SITE_ROWS)?;
        }
    }
    Ok(())
}

/// The job as one JSON document (`memscope.job/1`), pretty-printed.
pub struct Json;

impl Render<Job> for Json {
    fn render(&self, job: &Job, _opts: &Options, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, job)?;
        writeln!(out)
    }
}

/// `memscope analyze --format json` of a job: the document as the `data` of the envelope.
impl Render<Job> for InEnvelope<'_> {
    fn render(&self, job: &Job, _opts: &Options, out: &mut dyn Write) -> io::Result<()> {
        crate::report::envelope::write(out, self.header, job)
    }
}

const CSS: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}main{max-width:1320px;margin:0 auto;padding:16px 24px 48px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d5d9e0}table{border-collapse:collapse;font-size:13px;background:#fff}td,th{padding:3px 10px;border-bottom:1px solid #e6e8ec;text-align:left}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}.verdict{padding:12px 16px;border-radius:6px;font-size:16px;margin:12px 0;border-left:6px solid;background:#e9f7ee;border-color:#2e9d57}.verdict.bad{background:#fdecea;border-color:#d93025}.bar{display:inline-block;height:10px;background:#4a7bd0;vertical-align:middle}.sub{color:#5b6475;font-size:13px}code{font:12px ui-monospace,monospace}";

/// The job as one self-contained HTML page: the verdict, the rank table with a bar per rank's
/// peak, the imbalance and the sites that differ.
pub struct Html;

impl Render<Job> for Html {
    fn render(&self, job: &Job, _opts: &Options, out: &mut dyn Write) -> io::Result<()> {
        html(job, out)
    }
}

fn html(job: &Job, out: &mut dyn Write) -> io::Result<()> {
    use crate::escape::html as esc;
    let bad = !job.oom_ranks.is_empty() || !job.leak_ranks.is_empty();
    write!(
        out,
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>memscope job of {} ranks</title><style>{CSS}</style></head><body><main>",
        job.ranks.len()
    )?;
    write!(
        out,
        "<h1>memscope: job of {} ranks</h1><div class=\"verdict{}\">{}</div>",
        job.ranks.len(),
        if bad { " bad" } else { "" },
        esc(&words::job_verdict(&job.verdict()))
    )?;
    write!(out, "<h2>Ranks</h2><table><tr>")?;
    for (i, h) in HEADINGS.iter().enumerate() {
        let class = if (1..7).contains(&i) {
            " class=\"n\""
        } else {
            ""
        };
        write!(out, "<th{class}>{}</th>", esc(h))?;
    }
    write!(out, "<th>peak</th></tr>")?;
    let top = job
        .ranks
        .iter()
        .map(|r| r.peak_allocated_bytes)
        .max()
        .unwrap_or(0)
        .max(1);
    for r in &job.ranks {
        write!(out, "<tr>")?;
        for (i, c) in rank_cells(r).iter().enumerate() {
            let class = if (1..7).contains(&i) {
                " class=\"n\""
            } else {
                ""
            };
            if i == 9 {
                write!(out, "<td><code>{}</code></td>", esc(c))?;
            } else {
                write!(out, "<td{class}>{}</td>", esc(c))?;
            }
        }
        let w = (r.peak_allocated_bytes as f64 / top as f64 * 240.0).round();
        write!(
            out,
            "<td><span class=\"bar\" style=\"width:{w}px\"></span></td></tr>"
        )?;
    }
    write!(out, "</table>")?;
    if job.ranks.iter().any(|r| !r.peak_exact) {
        write!(out, "<p class=\"sub\">{}</p>", esc(words::PEAKS_SEEN))?;
    }
    if !job.unjudged_ranks.is_empty() {
        write!(out, "<p class=\"sub\">{}</p>", esc(words::LEAKS_UNJUDGED))?;
    }
    if let Some(i) = &job.imbalance {
        write!(
            out,
            "<h2>Imbalance of peak allocated</h2><p>{}</p><p class=\"sub\">{}</p>",
            esc(&words::imbalance(&i.spread())),
            esc(words::IMBALANCE_HOW)
        )?;
    }
    if let Some(s) = &job.sites {
        write!(
            out,
            "<h2>Sites that differ</h2><p class=\"sub\">live at the peak, rank {} (highest) against rank {} (lowest)</p><table>",
            s.high_rank, s.low_rank
        )?;
        for c in s.changes.iter().take(SITE_ROWS) {
            write!(out, "<tr><td><code>{}</code></td></tr>", esc(&c.describe()))?;
        }
        write!(out, "</table>")?;
    }
    writeln!(out, "</main></body></html>")
}
