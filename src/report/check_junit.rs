//! JUnit XML for `memscope check`: one `<testsuite>` per input, one `<testcase>` per rule, so
//! CI systems (GitLab, Jenkins, Azure, GitHub test reporters) show each rule natively. A
//! failed rule has a `<failure>`, a skipped one a `<skipped>`.

use std::io::{self, Write};

use super::check::CheckFormat;
use super::Options;
use crate::check::{CheckReport, RuleResult, Status};

pub struct Junit;

/// Escapes text for XML (the one rule is [`super::escape::xml`]).
pub use super::escape::xml as xml_escape;

fn counts(rules: &[&RuleResult]) -> (usize, usize) {
    let f = rules.iter().filter(|r| r.status == Status::Fail).count();
    let s = rules.iter().filter(|r| r.status == Status::Skip).count();
    (f, s)
}

fn write_case(out: &mut dyn Write, classname: &str, r: &RuleResult) -> io::Result<()> {
    write!(
        out,
        "    <testcase name=\"{}\" classname=\"{}\"",
        xml_escape(r.rule),
        xml_escape(classname)
    )?;
    // A native frame has no file; a trace's line is not the statement's: never a wrong line.
    if let Some(s) = r.site.as_ref().filter(|s| !crate::check::is_native(s)) {
        write!(out, " file=\"{}\"", xml_escape(&s.file))?;
        if !r.line_unknown {
            write!(out, " line=\"{}\"", s.line)?;
        }
    }
    match r.status {
        Status::Pass => writeln!(out, "/>"),
        Status::Skip => {
            writeln!(out, ">")?;
            writeln!(
                out,
                "      <skipped message=\"{}\"/>",
                xml_escape(&r.message)
            )?;
            writeln!(out, "    </testcase>")
        }
        Status::Fail => {
            writeln!(out, ">")?;
            let mut body = format!(
                "measured {} against limit {}",
                r.measured_text(),
                r.limit_text()
            );
            if let Some(s) = &r.site {
                body.push_str(&format!(
                    "\nat {}",
                    crate::check::site_words(s, !r.line_unknown)
                ));
            }
            for e in &r.evidence {
                body.push_str(&format!("\n- {e}"));
            }
            writeln!(
                out,
                "      <failure message=\"{}\" type=\"{}\">{}</failure>",
                xml_escape(&r.message),
                xml_escape(r.rule),
                xml_escape(&body)
            )?;
            writeln!(out, "    </testcase>")
        }
    }
}

impl CheckFormat for Junit {
    fn render(&self, report: &CheckReport, _opts: &Options, out: &mut dyn Write) -> io::Result<()> {
        let all: Vec<&RuleResult> = report.all_rules().map(|(_, r)| r).collect();
        let (f, s) = counts(&all);
        writeln!(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>")?;
        writeln!(
            out,
            "<testsuites name=\"memscope check\" tests=\"{}\" failures=\"{f}\" errors=\"0\" skipped=\"{s}\">",
            all.len()
        )?;
        let mut suites: Vec<(String, Vec<&RuleResult>)> = report
            .files
            .iter()
            .map(|file| (file.path.clone(), file.rules.iter().collect()))
            .collect();
        if !report.ranks_rules.is_empty() {
            suites.push(("ranks".into(), report.ranks_rules.iter().collect()));
        }
        for (name, rules) in suites {
            let (f, s) = counts(&rules);
            writeln!(
                out,
                "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{f}\" errors=\"0\" skipped=\"{s}\">",
                xml_escape(&name),
                rules.len()
            )?;
            let classname = format!("memscope.check.{name}");
            for r in rules {
                write_case(out, &classname, r)?;
            }
            writeln!(out, "  </testsuite>")?;
        }
        writeln!(out, "</testsuites>")
    }
}
