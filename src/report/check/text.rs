//! Human output of `memscope check` and `memscope diff`: one line per rule, PASS/FAIL, the
//! measured value against the limit, and for a failure the line responsible and the evidence.

use std::io::{self, Write};

use crate::check::diff::{Diff, Presence, SiteChange};
use crate::check::{CheckReport, RuleResult, Status};
use crate::report::style::Style;
use crate::report::{Options, Render};
use crate::units::bytes;

pub struct CheckText;

fn status(st: &Style, s: Status) -> String {
    match s {
        Status::Pass => st.green("PASS"),
        Status::Fail => st.red("FAIL"),
        Status::Skip => st.yellow("SKIP"),
    }
}

fn write_rule(out: &mut dyn Write, st: &Style, r: &RuleResult) -> io::Result<()> {
    writeln!(
        out,
        "  {} {:<26} {}",
        status(st, r.status),
        r.rule.name(),
        r.message
    )?;
    if r.status == Status::Fail {
        if let Some(s) = &r.site {
            let at = crate::check::site_words(s, !r.line_unknown);
            if r.line_unknown && !crate::check::is_native(s) {
                writeln!(
                    out,
                    "       at {} (a trace does not record the line)",
                    st.cyan(&at)
                )?;
            } else {
                writeln!(out, "       at {}", st.cyan(&at))?;
            }
        }
        for e in &r.evidence {
            writeln!(out, "       - {e}")?;
        }
    }
    Ok(())
}

impl Render<CheckReport> for CheckText {
    fn render(&self, report: &CheckReport, opts: &Options, out: &mut dyn Write) -> io::Result<()> {
        let st = Style { on: opts.color };
        let (pass, fail, skip) = report.counts();
        let head = if report.passed {
            st.green("PASS")
        } else {
            st.red("FAIL")
        };
        writeln!(
            out,
            "memscope check: {head}: {fail} failed, {pass} passed, {skip} skipped ({} file{})",
            report.files.len(),
            if report.files.len() == 1 { "" } else { "s" }
        )?;
        if let Some(b) = &report.baseline {
            writeln!(
                out,
                "baseline: {b} (tolerance {:.1}%)",
                report.config.tolerance.unwrap_or(0.0) * 100.0
            )?;
        }
        for f in &report.files {
            writeln!(out)?;
            writeln!(out, "{} ({})", st.bold(&f.path), f.kind)?;
            for n in &f.skipped {
                writeln!(out, "  {} {n}", st.yellow("NOTE"))?;
            }
            for r in &f.rules {
                write_rule(out, &st, r)?;
            }
        }
        for g in &report.groups {
            writeln!(out)?;
            writeln!(out, "{}", st.bold(&g.label().to_uppercase()))?;
            writeln!(
                out,
                "  {}",
                st.dim(&format!(
                    "{:>4}  {:>12}  {:>13}  {:>11}  {:>4}  {:>5}  {:<6}  file",
                    "rank", "peak alloc", "peak reserved", "live at end", "OOMs", "leaks", "result"
                ))
            )?;
            for r in &g.ranks {
                // A rank that recorded no device memory has no figures, not zeros; one that
                // records only changes from its trace's start has lower bounds.
                let mem = |b: u64| match (r.has_memory, r.from_trace_start) {
                    (false, _) => "-".into(),
                    (true, true) => format!(">= {}", bytes(b)),
                    (true, false) => bytes(b),
                };
                writeln!(
                    out,
                    "  {:>4}  {:>12}  {:>13}  {:>11}  {:>4}  {:>5}  {:<6}  {}",
                    r.rank,
                    mem(r.peak_allocated_bytes),
                    if r.reserved_unrecorded {
                        "-".into()
                    } else {
                        mem(r.peak_reserved_bytes)
                    },
                    mem(r.end_allocated_bytes),
                    r.ooms,
                    r.leaks.map_or_else(|| "-".into(), |n| n.to_string()),
                    if r.passed { "pass" } else { "FAIL" },
                    r.path
                )?;
            }
            if g.ranks.iter().all(|r| r.source.is_none()) {
                writeln!(
                    out,
                    "  {}",
                    st.dim("(ranks in the order given: nothing in the files numbers them)")
                )?;
            }
            match &g.imbalance {
                Some(im) => {
                    writeln!(
                        out,
                        "  imbalance: {}",
                        crate::wording::job::imbalance(&im.spread())
                    )?;
                    writeln!(out, "  {}", st.dim(crate::wording::job::IMBALANCE_HOW))?;
                }
                None => {
                    let none = g.ranks.iter().filter(|r| !r.has_memory).count();
                    writeln!(
                        out,
                        "  imbalance: not measured ({none} of {} ranks recorded no device memory)",
                        g.ranks.len()
                    )?
                }
            }
        }
        for u in &report.not_one_job {
            writeln!(out)?;
            writeln!(out, "{}", st.bold("NOT RANKS OF ONE JOB"))?;
            writeln!(out, "  {u}; no imbalance between them")?;
        }
        if !report.ranks_rules.is_empty() {
            writeln!(out)?;
            for r in &report.ranks_rules {
                write_rule(out, &st, r)?;
            }
        }
        Ok(())
    }
}

pub struct DiffText;

const SHOWN: usize = 8;

fn write_changes(out: &mut dyn Write, title: &str, changes: &[SiteChange]) -> io::Result<()> {
    if changes.is_empty() {
        return Ok(());
    }
    writeln!(out, "  {title} (largest change first):")?;
    for c in changes.iter().take(SHOWN) {
        writeln!(out, "    {}", c.describe())?;
    }
    if changes.len() > SHOWN {
        writeln!(out, "    ... {} more", changes.len() - SHOWN)?;
    }
    Ok(())
}

impl Render<Diff> for DiffText {
    fn render(&self, d: &Diff, opts: &Options, out: &mut dyn Write) -> io::Result<()> {
        let st = Style { on: opts.color };
        writeln!(out, "memscope diff {} -> {}", d.before, d.after)?;
        writeln!(out)?;
        match &d.largest_growth {
            Some(c) => writeln!(
                out,
                "LARGEST GROWTH {} at {}",
                st.bold(&crate::units::signed_bytes(c.delta_bytes)),
                st.cyan(
                    &c.site
                        .as_ref()
                        .map_or_else(|| "(no Python stack)".into(), |s| {
                            crate::check::site_words(s, true)
                        })
                )
            )?,
            None if d.sites_recorded => {
                writeln!(out, "LARGEST GROWTH none: no site holds more memory")?
            }
            None if d.devices.is_empty() => writeln!(
                out,
                "LARGEST GROWTH unknown: neither side records device memory"
            )?,
            None => writeln!(
                out,
                "LARGEST GROWTH unknown: neither side records memory by site (a profiler trace's memory events carry no stack)"
            )?,
        }
        for dev in &d.devices {
            writeln!(out)?;
            let presence = match dev.presence {
                Presence::BeforeOnly => " (only before)",
                Presence::AfterOnly => " (only after)",
                Presence::Both => "",
            };
            writeln!(
                out,
                "{}",
                st.bold(&format!("DEVICE {}{presence}", dev.device))
            )?;
            writeln!(out, "  peak allocated  {}", dev.peak_allocated.describe())?;
            writeln!(out, "  peak reserved   {}", dev.peak_reserved.describe())?;
            writeln!(out, "  live at end     {}", dev.end_allocated.describe())?;
            write_changes(out, "sites at the peak", &dev.sites_at_peak)?;
            write_changes(out, "sites live at the end", &dev.sites_at_end)?;
        }
        if d.ooms.delta != 0 {
            writeln!(out)?;
            writeln!(out, "OOMS {} -> {}", d.ooms.before, d.ooms.after)?;
        }
        let named = |out: &mut dyn Write,
                     title: &str,
                     v: &[crate::check::diff::NamedDelta]|
         -> io::Result<()> {
            if v.is_empty() {
                return Ok(());
            }
            writeln!(out)?;
            writeln!(out, "{}", st.bold(title))?;
            let (both, one): (Vec<_>, Vec<_>) = v
                .iter()
                .partition(|n| n.before.is_some() && n.after.is_some());
            for side in ["before", "after"] {
                let only: Vec<&str> = one
                    .iter()
                    .filter(|n| n.before.is_some() == (side == "before"))
                    .map(|n| n.name.as_str())
                    .collect();
                if let (Some(first), Some(last)) = (only.first(), only.last()) {
                    let range = if only.len() == 1 {
                        (*first).to_owned()
                    } else {
                        format!("{first} .. {last}")
                    };
                    writeln!(
                        out,
                        "  {} only {side}: {range}",
                        if only.len() == 1 {
                            "1 entry".to_owned()
                        } else {
                            format!("{} entries", only.len())
                        }
                    )?;
                }
            }
            for n in both.iter().take(SHOWN) {
                match (n.before, n.after) {
                    (Some(b), Some(a)) => writeln!(
                        out,
                        "  {:>12}  {:<20} ({} -> {})",
                        crate::units::signed_bytes(n.delta),
                        n.name,
                        bytes(b),
                        bytes(a)
                    )?,
                    (b, a) => writeln!(
                        out,
                        "  {:>12}  {:<20} (only {}: {})",
                        "",
                        n.name,
                        if b.is_some() { "before" } else { "after" },
                        bytes(b.or(a).unwrap_or(0))
                    )?,
                }
            }
            Ok(())
        };
        named(out, "CATEGORIES", &d.categories)?;
        named(out, "STEPS (peak allocated)", &d.steps)?;
        for (title, v, unit) in [
            ("LEAKS", &d.leaks, crate::check::Unit::BytesPerStep),
            (
                "GRAPH GROWTH",
                &d.graph_growth,
                crate::check::Unit::NodesPerStep,
            ),
        ] {
            if v.is_empty() {
                continue;
            }
            writeln!(out)?;
            writeln!(out, "{}", st.bold(title))?;
            for f in v {
                let site = f.site.as_ref().map_or_else(
                    || "(no Python stack)".into(),
                    |s| crate::check::site_words(s, true),
                );
                writeln!(
                    out,
                    "  {:<4} {} at {site} ({})",
                    f.status.word(),
                    f.kind,
                    unit.format(f.per_step)
                )?;
            }
        }
        write_not_compared(out, &st, &d.not_compared)
    }
}

/// What the diff could not compare, and why: an absent section is then never read as "no
/// change".
fn write_not_compared(
    out: &mut dyn Write,
    st: &Style,
    v: &[crate::check::diff::NotCompared],
) -> io::Result<()> {
    use crate::check::diff::{Missing, Record};
    if v.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(out, "{}", st.bold("NOT COMPARED"))?;
    for n in v {
        let what = match n.record {
            Record::DeviceMemory => "device memory",
            Record::SiteMemory => "memory by source line",
            Record::Categories => "memory by category",
            Record::Steps => "steps",
            Record::Leaks => "leaks",
            Record::GraphGrowth => "autograd graph growth",
        };
        let why = match n.record {
            Record::DeviceMemory => "a profiler trace records it only with profile_memory=True",
            Record::SiteMemory => "a profiler trace's memory events carry no stack",
            Record::Categories => "categories need a snapshot's stacks",
            Record::Steps => "no loop or profiler step was found",
            Record::Leaks => "a leak judgement needs an event log with enough steps",
            Record::GraphGrowth => {
                "the autograd graph is read from a trace with grad-mode ops and a backward"
            }
        };
        let side = match n.missing_in {
            Missing::Neither => "neither side records it",
            Missing::Before => "the before side does not record it",
            Missing::After => "the after side does not record it",
        };
        writeln!(out, "  {what}: {side} ({why})")?;
    }
    Ok(())
}
