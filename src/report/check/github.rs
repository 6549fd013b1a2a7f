//! GitHub Actions output for `memscope check`: `::error` workflow commands (annotations on the
//! responsible lines, at most [`MAX_ANNOTATIONS`]) and a Markdown job summary for
//! `$GITHUB_STEP_SUMMARY`.
//!
//! Annotations name files from the repository root, mapped from the recorded paths by a
//! [`PathMap`] (library files are never annotated), and a finding whose line is not known
//! (profiler traces) is annotated at file level with its function named, never at a line.
//!
//! Workflow commands are escaped per GitHub's rules (the runner's `toolkit/command.ts`): in the
//! message `%`, `\r`, `\n` become `%25`, `%0D`, `%0A`; in properties (`file=`, `line=`,
//! `title=`) `:` and `,` also become `%3A` and `%2C`.

use std::io::{self, Write};

use crate::check::paths::{PathMap, Target};
use crate::check::{CheckReport, RuleResult, Status};
use crate::report::escape::{self, md_code};
use crate::report::{Options, Render};

/// GitHub shows at most 10 error annotations per step; more are dropped by the runner.
pub const MAX_ANNOTATIONS: usize = 10;

/// Escapes a workflow command's message and property (the rules are in [`escape`]).
pub use crate::report::escape::{gh_data as escape_data, gh_property as escape_property};

/// `::error` annotations for the failed rules (stderr in the binary). The default map takes
/// recorded paths as they are (library files are still left out).
#[derive(Default)]
pub struct GithubAnnotations {
    pub paths: PathMap,
}

fn annotation_message(r: &RuleResult) -> String {
    let mut m = r.message.clone();
    for e in &r.evidence {
        m.push_str("\n- ");
        m.push_str(e);
    }
    m
}

impl Render<CheckReport> for GithubAnnotations {
    fn render(&self, report: &CheckReport, _opts: &Options, out: &mut dyn Write) -> io::Result<()> {
        let failed: Vec<(&str, &RuleResult)> = report
            .all_rules()
            .filter(|(_, r)| r.status == Status::Fail)
            .collect();
        for (file, r) in failed.iter().take(MAX_ANNOTATIONS) {
            let mut props = Vec::new();
            let name = file.rsplit(['/', '\\']).next().unwrap_or(file);
            let mut title = format!("memscope {}: {name}", r.rule.name());
            let mut message = annotation_message(r);
            if let Some(s) = r.site.as_ref().filter(|s| !crate::check::is_native(s)) {
                match self.paths.target(&s.file) {
                    Target::File(f) => {
                        props.push(format!("file={}", escape_property(&f)));
                        if r.line_unknown {
                            title.push_str(&format!(" (in {})", s.function));
                        } else if s.line > 0 {
                            props.push(format!("line={}", s.line));
                        }
                    }
                    Target::Library => {}
                    Target::NotFound => {
                        message.push_str(&format!(
                            "\n(recorded at {}; not found in the checkout: see --source-root, --strip-prefix)",
                            s.file
                        ));
                    }
                }
            }
            props.push(format!("title={}", escape_property(&title)));
            writeln!(
                out,
                "::error {}::{}",
                props.join(","),
                escape_data(&message)
            )?;
        }
        if failed.len() > MAX_ANNOTATIONS {
            writeln!(
                out,
                "::warning title=memscope::{}",
                escape_data(&format!(
                    "{} more failed rules are not annotated; see the job summary",
                    failed.len() - MAX_ANNOTATIONS
                ))
            )?;
        }
        Ok(())
    }
}

/// The Markdown job summary (appended to `$GITHUB_STEP_SUMMARY` in the binary).
pub struct GithubSummary;

/// Text for a Markdown table cell: each line escaped by [`escape::md_text`] (nothing
/// renders: no HTML, link, image or emphasis from a capture), the lines joined by `<br>`.
fn cell(s: &str) -> String {
    s.split('\n')
        .map(escape::md_text)
        .collect::<Vec<_>>()
        .join("<br>")
}

impl Render<CheckReport> for GithubSummary {
    fn render(&self, report: &CheckReport, _opts: &Options, out: &mut dyn Write) -> io::Result<()> {
        let (pass, fail, skip) = report.counts();
        let verdict = if report.passed {
            "✅ passed"
        } else {
            "❌ failed"
        };
        writeln!(out, "## memscope check {verdict}")?;
        writeln!(out)?;
        writeln!(out, "{fail} failed, {pass} passed, {skip} skipped.")?;
        writeln!(out)?;
        writeln!(
            out,
            "| file | rule | result | measured | limit | site | details |"
        )?;
        writeln!(out, "|---|---|---|---|---|---|---|")?;
        for (file, r) in report.all_rules() {
            let result = match r.status {
                Status::Pass => "✅ pass",
                Status::Fail => "❌ **fail**",
                Status::Skip => "⏭️ skip",
            };
            let site = r.site.as_ref().map_or_else(String::new, |s| {
                if crate::check::is_native(s) {
                    format!("{} (native)", md_code(&s.function))
                } else if r.line_unknown {
                    format!("{} in {}", md_code(&s.file), md_code(&s.function))
                } else {
                    md_code(&format!("{}:{}", s.file, s.line))
                }
            });
            let mut details = r.message.clone();
            if r.status == Status::Fail {
                for e in &r.evidence {
                    details.push_str("\n• ");
                    details.push_str(e);
                }
            }
            writeln!(
                out,
                "| {} | {} | {result} | {} | {} | {site} | {} |",
                cell(file),
                r.rule.name(),
                cell(&r.measured_text()),
                cell(&r.limit_text()),
                cell(&details)
            )?;
        }
        let skipped: Vec<(&str, &String)> = report
            .files
            .iter()
            .flat_map(|f| f.skipped.iter().map(move |n| (f.path.as_str(), n)))
            .collect();
        if !skipped.is_empty() {
            writeln!(out)?;
            writeln!(out, "Events no rule saw:")?;
            writeln!(out)?;
            for (file, n) in skipped {
                writeln!(out, "- {}: {}", cell(file), cell(n))?;
            }
        }
        for g in &report.groups {
            writeln!(out)?;
            writeln!(out, "{}:", cell(&g.label()))?;
            writeln!(out)?;
            writeln!(
                out,
                "| rank | file | peak allocated | peak reserved | OOMs | result |"
            )?;
            writeln!(out, "|---|---|---|---|---|---|")?;
            for r in &g.ranks {
                // No figure where nothing was recorded; a lower bound said as one (allocated
                // bytes known only as changes from the trace's start).
                let mem =
                    |b: u64, bound: bool, recorded: bool| match (r.has_memory && recorded, bound) {
                        (false, _) => "-".into(),
                        (true, true) => format!(">= {}", crate::units::bytes(b)),
                        (true, false) => crate::units::bytes(b),
                    };
                writeln!(
                    out,
                    "| {} | {} | {} | {} | {} | {} |",
                    r.rank,
                    cell(&r.path),
                    mem(r.peak_allocated_bytes, r.from_trace_start, true),
                    mem(r.peak_reserved_bytes, false, !r.reserved_unrecorded),
                    r.ooms,
                    if r.passed { "pass" } else { "**fail**" }
                )?;
            }
            writeln!(out)?;
            match &g.imbalance {
                Some(im) => writeln!(
                    out,
                    "Imbalance between ranks: {} ({}).",
                    crate::wording::job::imbalance(&im.spread()),
                    crate::wording::job::IMBALANCE_HOW
                )?,
                None => writeln!(
                    out,
                    "Imbalance between ranks: not measured (a rank recorded no device memory)."
                )?,
            }
        }
        for u in &report.not_one_job {
            writeln!(out)?;
            writeln!(out, "Not ranks of one job: {}.", cell(&u.to_string()))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_per_workflow_command_rules() {
        assert_eq!(escape_data("50% a\r\nb: c, d"), "50%25 a%0D%0Ab: c, d");
        assert_eq!(escape_property("C:\\x,y%\n"), "C%3A\\x%2Cy%25%0A");
        assert_eq!(cell("a|b\nc<d>"), "a\\|b<br>c&lt;d&gt;");
    }
}
