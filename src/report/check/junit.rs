//! JUnit XML for `memscope check`: one `<testsuite>` per input, one `<testcase>` per rule, so
//! CI systems (GitLab, Jenkins, Azure, GitHub test reporters) show each rule natively. A
//! failed rule has a `<failure>`, a skipped one a `<skipped>`.

use std::io::{self, Write};

use crate::check::{CheckReport, RuleResult, Status};
use crate::report::{Options, Render};

pub struct Junit;

/// Escapes text for XML (the one rule is [`crate::report::escape::xml`]).
pub use crate::report::escape::xml as xml_escape;

/// A testcase's classname: the input's file name, its dots as `_` (`leak_oom_pickle`). JUnit
/// viewers read a classname's dots as packages, so `memscope.check./runs/a.pickle` became a tree
/// of path pieces; the path stays whole in the suite's name and its `path` property.
pub fn classname(path: &str) -> String {
    let base = path
        .rsplit(['/', '\\'])
        .find(|p| !p.is_empty())
        .unwrap_or(path);
    base.chars()
        .map(|c| {
            if c == '.' || c.is_whitespace() {
                '_'
            } else {
                c
            }
        })
        .collect()
}

fn counts(rules: &[&RuleResult]) -> (usize, usize) {
    let f = rules.iter().filter(|r| r.status == Status::Fail).count();
    let s = rules.iter().filter(|r| r.status == Status::Skip).count();
    (f, s)
}

fn write_case(out: &mut dyn Write, classname: &str, r: &RuleResult) -> io::Result<()> {
    write!(
        out,
        "    <testcase name=\"{}\" classname=\"{}\"",
        xml_escape(r.rule.name()),
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
                xml_escape(r.rule.name()),
                xml_escape(&body)
            )?;
            writeln!(out, "    </testcase>")
        }
    }
}

impl Render<CheckReport> for Junit {
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
        let n_files = report.files.len();
        for (k, (name, rules)) in suites.into_iter().enumerate() {
            let (f, s) = counts(&rules);
            writeln!(
                out,
                "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{f}\" errors=\"0\" skipped=\"{s}\">",
                xml_escape(&name),
                rules.len()
            )?;
            if k < n_files {
                // The path whole, where no viewer splits it: the classname is only its file name.
                writeln!(
                    out,
                    "    <properties><property name=\"path\" value=\"{}\"/></properties>",
                    xml_escape(&name)
                )?;
            }
            let classname = classname(&name);
            for r in rules {
                write_case(out, &classname, r)?;
            }
            writeln!(out, "  </testsuite>")?;
        }
        writeln!(out, "</testsuites>")
    }
}

#[cfg(test)]
mod tests {
    use super::classname;

    #[test]
    fn classnames_have_no_dots() {
        assert_eq!(classname("/path/to/leak_oom.pickle"), "leak_oom_pickle");
        assert_eq!(
            classname("runs/a.b/rank 0.pt.trace.json.gz"),
            "rank_0_pt_trace_json_gz"
        );
        assert_eq!(classname("C:\\ci\\mem.pickle"), "mem_pickle");
        assert_eq!(classname("ranks"), "ranks");
    }
}
