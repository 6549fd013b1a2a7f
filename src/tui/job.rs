//! `memscope tui` given several captures of one job: the Ranks view.
//!
//! One component that owns its state (the selected rank) and its keys, and draws the job the
//! analysis built ([`Job`]): the verdict, the per-rank table with a bar for each rank's peak,
//! the imbalance, and the sites that differ between the highest and the lowest rank. It reads
//! the product only; the sentences are [`crate::wording::job`]'s. Up/Down (or j/k) select a
//! rank, whose figures the detail line spells out; Enter opens that rank's capture in the
//! one-capture views (q there comes back here); q quits. Esc, which goes back one step in
//! every mode, has no step to go back to here and does nothing.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use crate::job::table::SITE_ROWS;
use crate::job::Job;
use crate::units::bytes;
use crate::wording::job as words;

/// The Ranks view and its state.
pub struct JobView {
    pub job: Job,
    /// Index into `job.ranks`.
    pub selected: usize,
    pub quit: bool,
    /// The capture Enter asked to open (the selected rank's path), for the caller to open.
    pub open: Option<String>,
    /// A line to show under the title (why a rank could not be opened).
    pub message: Option<String>,
}

impl JobView {
    pub fn new(job: Job) -> JobView {
        JobView {
            job,
            selected: 0,
            quit: false,
            open: None,
            message: None,
        }
    }

    /// Takes one key.
    pub fn key(&mut self, k: KeyEvent) {
        let n = self.job.ranks.len();
        match k.code {
            // Esc goes back one step in every mode, and the ranks list is the first: nothing
            // to go back to, so it does not quit (q does).
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => self.quit = true,
            KeyCode::Down | KeyCode::Char('j') if self.selected + 1 < n => self.selected += 1,
            KeyCode::Up | KeyCode::Char('k') => self.selected = self.selected.saturating_sub(1),
            KeyCode::Home | KeyCode::Char('g') => self.selected = 0,
            KeyCode::End | KeyCode::Char('G') => self.selected = n.saturating_sub(1),
            KeyCode::Enter => self.open = self.job.ranks.get(self.selected).map(|r| r.path.clone()),
            _ => {}
        }
    }

    fn lines(&self, width: u16) -> Vec<Line<'static>> {
        let bold = Style::default().add_modifier(Modifier::BOLD);
        let mut out = vec![
            Line::from(Span::styled(
                format!(
                    "memscope: job of {} ranks   (Up/Down select a rank, Enter opens it and q there comes back; q here quits)",
                    self.job.ranks.len()
                ),
                bold,
            )),
            match &self.message {
                Some(m) => Line::from(Span::styled(m.clone(), Style::default().fg(Color::Yellow))),
                None => Line::from(vec![
                    Span::styled("VERDICT ", bold),
                    Span::raw(words::job_verdict(&self.job.verdict())),
                ]),
            },
            Line::raw(""),
            Line::from(Span::styled("RANKS", bold)),
        ];
        let top = self
            .job
            .ranks
            .iter()
            .map(|r| r.peak_allocated_bytes)
            .max()
            .unwrap_or(0)
            .max(1);
        // The bar goes in front of each row, so that it stays visible however narrow; the
        // columns give way by priority in the rest of the width.
        const BAR: usize = 12;
        let table = super::rank_table::lines(&self.job, (width as usize).saturating_sub(BAR + 4));
        out.push(Line::raw(format!("  {:BAR$}  {}", "peak", table[0])));
        for (i, (row, r)) in table[1..].iter().zip(&self.job.ranks).enumerate() {
            let filled = (r.peak_allocated_bytes as f64 / top as f64 * BAR as f64).round() as usize;
            let bar = format!(
                "{}{}",
                "█".repeat(filled),
                " ".repeat(BAR - filled.min(BAR))
            );
            let mut style = Style::default();
            if r.ooms > 0 || r.leaks.is_some_and(|n| n > 0) {
                style = style.fg(Color::Red);
            }
            if i == self.selected {
                style = style.add_modifier(Modifier::REVERSED);
            }
            out.push(Line::from(vec![
                Span::raw(if i == self.selected { "> " } else { "  " }),
                Span::styled(bar, Style::default().fg(Color::Blue)),
                Span::raw("  "),
                Span::styled(row.clone(), style),
            ]));
        }
        if let Some(r) = self.job.ranks.get(self.selected) {
            out.push(Line::raw(format!(
                "  rank {} ({}): peak {} allocated, {} reserved; {} live at the end; {} OOM(s); leaks {}",
                r.rank,
                words::rank_from(r.rank_from),
                words::peak_cell(r.peak_exact, r.peak_allocated_bytes),
                words::peak_cell(r.peak_exact, r.peak_reserved_bytes),
                bytes(r.end_allocated_bytes),
                r.ooms,
                words::leak_cell(r.leaks)
            )));
        }
        // The job's figures as `analyze` prints them: the rank that peaked, the OOM ranks, the
        // imbalance and how it is computed.
        if let Some(p) = self.job.peak_rank {
            out.push(Line::raw(format!("  peak_rank: {p}")));
        }
        out.push(Line::raw(format!(
            "  oom_ranks: {}",
            if self.job.oom_ranks.is_empty() {
                "none".into()
            } else {
                words::rank_list(&self.job.oom_ranks)
            }
        )));
        if let Some(i) = &self.job.imbalance {
            out.push(Line::raw(""));
            out.push(Line::from(vec![
                Span::styled("IMBALANCE ", bold),
                Span::raw(words::imbalance(&i.spread())),
            ]));
            out.push(Line::from(Span::styled(
                format!("  {}", words::IMBALANCE_HOW),
                Style::default().add_modifier(Modifier::DIM),
            )));
        }
        if let Some(s) = &self.job.sites {
            out.push(Line::raw(""));
            out.push(Line::from(Span::styled(
                format!(
                    "SITES THAT DIFFER at the peak, rank {} (highest) against rank {} (lowest)",
                    s.high_rank, s.low_rank
                ),
                bold,
            )));
            for c in s.changes.iter().take(SITE_ROWS) {
                out.push(Line::raw(format!("  {}", short_change(c))));
            }
        }
        // Capture strings (paths, sites) shown as the terminal boundary shows them.
        out.into_iter()
            .map(|l| {
                Line::from(
                    l.spans
                        .into_iter()
                        .map(|s| {
                            Span::styled(crate::escape::term(&s.content).into_owned(), s.style)
                        })
                        .collect::<Vec<_>>(),
                )
            })
            .collect()
    }
}

impl Widget for &JobView {
    fn render(self, area: Rect, buf: &mut Buffer) {
        // Scrolled so that the selected rank's row (the 6th line and on) stays in view.
        let row = 5 + self.selected as u16;
        let scroll = (row + 2).saturating_sub(area.height);
        Paragraph::new(self.lines(area.width))
            .scroll((scroll, 0))
            .render(area, buf);
    }
}

/// A site change as the rank view says it: C++ names with their template arguments collapsed
/// (`c10::impl::wrap_kernel_functor_unboxed_<…>::call(…)`), where the sentence would otherwise
/// carry a name of 600 characters and more (issue 42).
fn short_change(c: &crate::check::diff::SiteChange) -> String {
    let short = |s: &Option<crate::analysis::sites::Site>| {
        s.clone().map(|mut s| {
            s.function = crate::model::frames::short_cpp(&s.function);
            s
        })
    };
    let mut c = c.clone();
    c.site = short(&c.site);
    c.moved_from = short(&c.moved_from);
    c.describe()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::sites::Site;
    use crate::check::diff::{SiteChange, SiteStatus};

    /// A rank diff's C++ site reads as its collapsed name, not 600 characters of template.
    #[test]
    fn a_rank_diffs_cpp_names_have_their_templates_collapsed() {
        let long = format!(
            "c10::impl::wrap_kernel_functor_unboxed_<{}>::call(c10::OperatorKernel*)",
            "c10::impl::detail::WrapFunctionIntoFunctor_<at::Tensor (*)(at::Tensor const&), std::vector<long>>, "
                .repeat(6)
        );
        assert!(long.len() > 600);
        let c = SiteChange {
            site: Some(Site {
                file: "??".into(),
                line: 0,
                function: long,
            }),
            status: SiteStatus::Grown,
            moved_from: None,
            before_bytes: Some(1 << 20),
            after_bytes: Some(3 << 20),
            delta_bytes: 2 << 20,
            below_top: false,
        };
        let s = short_change(&c);
        assert!(
            s.contains("c10::impl::wrap_kernel_functor_unboxed_<…>::call(c10::OperatorKernel*)"),
            "{s}"
        );
        assert!(s.len() < 200, "{s}");
        assert!(c.describe().len() > 600);
    }
}
