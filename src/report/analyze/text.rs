//! The human report: verdict first, then the figures that back it, then where to look.
//!
//! Ordered for someone whose job just died: one line that says what happened, the memory
//! summary, the OOM explained with its evidence and options, then the sites to blame.

use std::io::{self, Write};

use crate::analysis::categories::Categories;
use crate::analysis::figures::{Bound, Counter, Figure};
use crate::analysis::sites::{Site, SiteTotal};
use crate::analysis::{Analysis, DeviceReport, LeakReport, OomReport, StepReport};
use crate::model::frames::short_label;
use crate::report::style::Style;
use crate::report::{Options, Render};
use crate::units::{bytes, signed_bytes};
use crate::wording::{site_label, stack_lines, step_figures, step_label};

pub struct Text;

/// A peak as the text report writes it: exact, a lower bound (`>=`), or unknown.
pub(crate) fn peak_words(b: Bound) -> String {
    match b {
        Bound::Exact(v) => bytes(v),
        Bound::AtLeast(v) => format!(">= {}", bytes(v)),
        Bound::Unknown => "unknown".into(),
    }
}

/// A figure's current value: bytes in use, a signed change from the trace's start where that
/// is all the capture gives, or unknown.
pub(crate) fn current_words(f: &Figure) -> String {
    match (f.current, f.from_start) {
        (Some(v), _) => bytes(v),
        (None, Some(c)) => signed_bytes(c.current),
        (None, None) => "unknown".into(),
    }
}

/// A figure's peak: as [`peak_words`], or a signed change from the trace's start.
pub(crate) fn figure_peak_words(f: &Figure) -> String {
    match f.from_start {
        Some(c) => signed_bytes(c.peak),
        None => peak_words(f.peak),
    }
}

fn write_sites(
    out: &mut dyn Write,
    st: &Style,
    sites: &[SiteTotal],
    opts: &Options,
    indent: &str,
) -> io::Result<()> {
    writeln!(
        out,
        "{indent}{}",
        st.dim(&format!("{:>10}  {:>7}  site", "bytes", "blocks"))
    )?;
    for s in sites {
        let label = site_label(s);
        let label = if s.user_code { st.cyan(&label) } else { label };
        writeln!(
            out,
            "{indent}{:>10}  {:>7}  {label}",
            bytes(s.bytes),
            s.blocks
        )?;
        if opts.stacks {
            for f in stack_lines(&s.stack) {
                writeln!(out, "{indent}{:>21}{}", "", st.dim(&short_label(&f)))?;
            }
        }
    }
    Ok(())
}

/// A device's allocations by label (`user_metadata`) or compiled region (`compile_context`):
/// nothing where the capture records none. The labels are the program's strings; the
/// terminal writer makes their control characters visible.
fn write_labels(
    out: &mut dyn Write,
    st: &Style,
    device: u32,
    title: &str,
    rows: &[crate::analysis::labels::LabelTotal],
) -> io::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(out, "{}", st.bold(&format!("{title} cuda:{device}")))?;
    writeln!(
        out,
        "  {}",
        st.dim(&format!(
            "{:>10}  {:>11}  {:>10}  {:>10}  label",
            "allocs", "allocated", "at peak", "at end"
        ))
    )?;
    for r in rows.iter().take(crate::analysis::TOP_SITES * 2) {
        writeln!(
            out,
            "  {:>10}  {:>11}  {:>10}  {:>10}  {}",
            r.allocations,
            bytes(r.allocated_bytes),
            r.live_bytes_at_peak
                .map(bytes)
                .unwrap_or_else(|| "?".into()),
            bytes(r.live_bytes_at_end),
            crate::escape::term(&r.label)
        )?;
    }
    if rows.len() > crate::analysis::TOP_SITES * 2 {
        writeln!(
            out,
            "  … {} more (--format json lists them all)",
            rows.len() - crate::analysis::TOP_SITES * 2
        )?;
    }
    Ok(())
}

/// The device's pools, where one is private (a capture with the default pool alone reads as
/// it did before pools were reported).
fn write_pools(out: &mut dyn Write, st: &Style, d: &DeviceReport) -> io::Result<()> {
    use crate::analysis::pools::PoolKind;
    if !d.pools.iter().any(|p| p.is_private()) {
        return Ok(());
    }
    writeln!(
        out,
        "  {}",
        st.bold("pools:   id        kind         reserved   allocated   peak reserved  segments")
    )?;
    for p in &d.pools {
        let peak = if p.peak_reserved_exact {
            bytes(p.peak_reserved_bytes)
        } else {
            format!(">= {}", bytes(p.peak_reserved_bytes))
        };
        writeln!(
            out,
            "           {:<9} {:<11} {:>10} {:>11} {:>15} {:>9}",
            format!("({}, {})", p.pool_id[0], p.pool_id[1]),
            crate::wording::pool_kind(p.kind),
            bytes(p.reserved_bytes),
            bytes(p.allocated_bytes),
            peak,
            p.segments
        )?;
    }
    let private_free = crate::analysis::pools::private_free_bytes(&d.pools);
    if private_free > 0 {
        writeln!(out, "  {}", crate::wording::private_pool_free(private_free))?;
    }
    if let Some(u) = d.unknown_pool_peak_reserved_bytes {
        writeln!(out, "  {}", crate::wording::unknown_pool(u))?;
    }
    for p in d.pools.iter().filter(|p| p.ghost_blocks > 0) {
        writeln!(
            out,
            "  pool ({}, {}): {}",
            p.pool_id[0],
            p.pool_id[1],
            crate::wording::ghost_blocks(p.ghost_blocks, p.ghost_bytes)
        )?;
    }
    if let Some(w) = &d.pool_whatif {
        let graph = d.pools.iter().any(|p| p.kind == PoolKind::Graph);
        writeln!(out, "  {}", st.bold(&crate::wording::pool_whatif(w, graph)))?;
    }
    Ok(())
}

/// The findings by bytes at stake, where the report has findings of more than one kind.
fn write_ranked(out: &mut dyn Write, st: &Style, a: &Analysis) -> io::Result<()> {
    let ranked = a.ranked_findings();
    if !crate::analysis::ranked::mixed(&ranked) {
        return Ok(());
    }
    writeln!(out, "{}", st.bold("FINDINGS by bytes at stake"))?;
    for (i, r) in ranked.iter().enumerate() {
        writeln!(out, "  {}. {}", i + 1, crate::wording::ranked_finding(a, r))?;
    }
    Ok(())
}

fn write_device(out: &mut dyn Write, st: &Style, d: &DeviceReport) -> io::Result<()> {
    writeln!(out, "{}", st.bold(&format!("MEMORY cuda:{}", d.device)))?;
    writeln!(
        out,
        "  {:<12} {:>12} {:>14}",
        "",
        "current",
        if d.peak_exact { "peak" } else { "peak (seen)" }
    )?;
    for f in d.figures() {
        // Counters the kind of capture never records are left out; reserved, which it records
        // but this one does not (torch 1.9), is said to be unknown.
        if f.current.is_none() && f.from_start.is_none() && f.counter != Counter::Reserved {
            continue;
        }
        writeln!(
            out,
            "  {:<12} {:>12} {:>14}",
            f.counter.name(),
            current_words(&f),
            figure_peak_words(&f)
        )?;
    }
    if let Some(f) = &d.from_start {
        writeln!(
            out,
            "  {}",
            st.yellow(&format!(
                "allocated: changes from the trace's start, not bytes in use (its [memory] events carry no `Total Allocated`); in use at the peak: at least {}",
                bytes(f.at_least(f.peak_allocated_bytes))
            ))
        )?;
    }
    if let (Some(largest), Some(split), Some(segments)) = (
        d.largest_free_block_bytes,
        d.inactive_split_bytes,
        d.segments,
    ) {
        let exp = match (d.expandable_segments, d.expandable_free_bytes) {
            (Some(n), Some(free)) if n > 0 => {
                format!(", {n} expandable ({} free inside them)", bytes(free))
            }
            _ => String::new(),
        };
        writeln!(
            out,
            "  cached: {} reserved but free (ready for requests that fit); largest free block {}; {} free in split segments; {} segments{exp}",
            d.free_reserved_bytes.map_or_else(|| "unknown".into(), bytes),
            bytes(largest),
            bytes(split),
            segments
        )?;
    }
    write_pools(out, st, d)?;
    if let Some(r) = &d.reserved_excess {
        writeln!(out, "  {}", st.yellow(&crate::wording::reserved_excess(r)))?;
        writeln!(
            out,
            "    fix: {}",
            st.bold(&crate::wording::reserved_excess_fix(r))
        )?;
    }
    let c = &d.consistency;
    if d.segments.is_none() {
        // A trace: the profiler's own running totals, nothing replayed.
        return Ok(());
    }
    if d.has_history {
        if d.replay_consistent {
            writeln!(
                out,
                "  replay: {} events replayed; end state matches the snapshot ({} segments, {} live blocks compared)",
                d.events, c.segments_compared, c.blocks_compared
            )?;
        } else {
            writeln!(
                out,
                "  replay: {} events replayed; {} {} differences from the snapshot, first: {}",
                d.events,
                st.yellow("WARNING"),
                c.mismatches,
                c.first_mismatch
                    .as_ref()
                    .map(crate::wording::mismatch)
                    .unwrap_or_else(|| "?".into())
            )?;
            if let Some(a) = &c.first_anomaly {
                writeln!(
                    out,
                    "          first unexplained event: #{}: {}",
                    a.event.0,
                    crate::wording::anomaly(&a.what)
                )?;
            }
        }
    }
    Ok(())
}

fn write_oom(
    out: &mut dyn Write,
    st: &Style,
    dev: u32,
    n: usize,
    o: &OomReport,
    opts: &Options,
) -> io::Result<()> {
    writeln!(
        out,
        "{}",
        st.bold(&format!(
            "OOM #{n} on cuda:{dev} (event {}): {}",
            o.event,
            bytes(o.rounded_bytes)
        ))
    )?;
    writeln!(out, "  cause: {}", st.red(&crate::wording::oom_summary(o)))?;
    for e in crate::wording::oom_evidence(o) {
        writeln!(out, "    - {e}")?;
    }
    if let Some(s) = &o.site {
        writeln!(out, "  failing request from: {}", st.cyan(&s.to_string()))?;
    }
    if opts.stacks && !o.stack.is_empty() {
        for f in &o.stack {
            writeln!(out, "      {}", st.dim(&short_label(f)))?;
        }
    }
    if !o.top_sites.is_empty() {
        writeln!(out, "  held at the OOM:")?;
        write_sites(
            out,
            st,
            &o.top_sites[..o.top_sites.len().min(5)],
            opts,
            "  ",
        )?;
    }
    if let Some(l) = o.leak {
        writeln!(out, "  see leak #{} below", l + 1)?;
    }
    if let Some(c) = &o.categories {
        write_categories(out, c, "  held at the OOM by category: ")?;
    }
    if !o.remedies.is_empty() {
        writeln!(out, "  options (not promises):")?;
        for r in &o.remedies {
            writeln!(
                out,
                "    - {}",
                st.bold(crate::wording::remedy_action(r.kind))
            )?;
            writeln!(out, "      {}", crate::wording::remedy_assessment(o, r))?;
        }
    }
    Ok(())
}

fn write_categories(out: &mut dyn Write, c: &Categories, lead: &str) -> io::Result<()> {
    let parts: Vec<String> = c
        .named()
        .iter()
        .map(|(n, b)| format!("{n} {}", bytes(*b)))
        .collect();
    if !parts.is_empty() {
        writeln!(out, "{lead}{}", parts.join(", "))?;
    }
    Ok(())
}

fn write_leak(
    out: &mut dyn Write,
    st: &Style,
    n: usize,
    r: &LeakReport,
    opts: &Options,
) -> io::Result<()> {
    let l = &r.leak;
    writeln!(
        out,
        "{}",
        st.bold(&format!(
            "LEAK #{n} on cuda:{}: {} ({} confidence)",
            r.device,
            l.kind.label(),
            l.confidence
        ))
    )?;
    // A trace's lines are those current when a frame was entered or profiling began: name
    // the function and file, never a line that is not the statement's.
    let site = |s: &Option<Site>| match s {
        None => "(no Python stack)".into(),
        Some(s) if l.line_known => s.to_string(),
        Some(s) => format!("{} in {} (line not recorded)", s.file, s.function),
    };
    use crate::analysis::leaks::Blame;
    match l.blame {
        Blame::AllocatingLine => {
            writeln!(out, "  allocated at: {}", st.cyan(&site(&l.site)))?;
        }
        _ => {
            writeln!(out, "  loop line: {}", st.cyan(&site(&l.site)))?;
            if l.allocation_site.is_some() && l.allocation_site != l.site {
                writeln!(
                    out,
                    "  allocated inside it at: {}",
                    site(&l.allocation_site)
                )?;
            }
        }
    }
    if l.cause_site.is_some() {
        let what = match l.blame {
            Blame::RetainedBackward => "kept alive through the backward at",
            _ => "kept alive by",
        };
        writeln!(out, "  {what}: {}", st.cyan(&site(&l.cause_site)))?;
    }
    if let Some(k) = &l.kept_by {
        writeln!(
            out,
            "  kept by: {}",
            st.cyan(&crate::wording::holder_named(k))
        )?;
    }
    if l.kind == crate::analysis::leaks::LeakKind::RetainedAttempt {
        writeln!(
            out,
            "  {} failed attempt(s) retained ({} .. {}); at most {} in {} blocks held while the next attempt ran",
            l.steps,
            step_label(&l.first_step),
            step_label(&l.last_step),
            bytes(l.live_bytes),
            l.count
        )?;
    } else {
        let held = l.extent.held();
        writeln!(
            out,
            "  grows {} and {:.1} tensors per step over {} steps ({} .. {}, fit R² {:.2}); {} {held} in {} blocks",
            bytes(l.growth_bytes_per_step.max(0.0) as u64),
            l.growth_tensors_per_step,
            l.steps,
            step_label(&l.first_step),
            step_label(&l.last_step),
            l.r2,
            bytes(l.live_bytes),
            l.count
        )?;
        if let Some(f) = crate::wording::freed_by_fix(l) {
            writeln!(out, "  {f}")?;
        }
    }
    if let Some(rel) = &l.release {
        let at = rel
            .site
            .as_ref()
            .map(|s| format!(" at {}", site(&Some(s.clone()))))
            .unwrap_or_default();
        writeln!(
            out,
            "  {}: {}{at} ({:.0}% of it by the end)",
            st.bold(l.extent.label()),
            match (l.extent, rel.loop_function_active) {
                (crate::analysis::leaks::Extent::ReleasedEachEpoch, _) => format!(
                    "freed all at once every {} steps, {} time(s)",
                    rel.period_steps.unwrap_or(0),
                    rel.releases
                ),
                (_, Some(false)) => format!(
                    "freed after `{}` returned",
                    rel.loop_function
                        .as_deref()
                        .unwrap_or("the loop's function")
                ),
                (_, Some(true)) => "freed after the loop, in its function".to_string(),
                (_, None) => "freed after the last step".to_string(),
            },
            100.0 * rel.freed_share
        )?;
    }
    writeln!(out, "  why: {}", crate::wording::leak_explanation(l))?;
    writeln!(out, "  fix: {}", st.bold(crate::wording::leak_fix(l)))?;
    for rs in l.related_sites.iter().take(3) {
        writeln!(
            out,
            "  also growing with it: {} ({}/step)",
            site(&rs.site),
            bytes(rs.growth_bytes_per_step.max(0.0) as u64)
        )?;
    }
    if !l.samples.is_empty() {
        let shown: Vec<String> = l
            .samples
            .iter()
            .take(3)
            .map(|s| {
                format!(
                    "0x{:x} {} (event {})",
                    s.address,
                    bytes(s.size),
                    s.alloc_event.0
                )
            })
            .collect();
        writeln!(out, "  surviving blocks, e.g.: {}", shown.join(", "))?;
    }
    if opts.stacks {
        for f in &l.stack {
            writeln!(out, "      {}", st.dim(&short_label(f)))?;
        }
    }
    Ok(())
}

fn write_steps(
    out: &mut dyn Write,
    st: &Style,
    steps: &[StepReport],
    devices: &[crate::analysis::DeviceReport],
) -> io::Result<()> {
    // One pass over the steps, not one per device (a trace may name 100k device ids).
    let mut by_device: rustc_hash::FxHashMap<_, Vec<&StepReport>> = Default::default();
    for s in steps {
        by_device.entry(s.device).or_default().push(s);
    }
    for dev in devices {
        let d = dev.device;
        let ds: Vec<&StepReport> = by_device.remove(&d).unwrap_or_default();
        let how = &dev.structure;
        let Some((what, ends, peak)) = step_figures(&ds) else {
            if how.single_pass {
                writeln!(
                    out,
                    "{} none: the log is one pass through the program (its user frames never go back to an earlier line of a loop)",
                    st.bold(&format!("STEPS cuda:{d}"))
                )?;
            } else if let Some(l) = how.decoding_loops.first() {
                writeln!(
                    out,
                    "{} none: the loop is a decoding loop ({} iterations of `{}` from {}:{}): tokens, not steps",
                    st.bold(&format!("STEPS cuda:{d}")),
                    l.iterations,
                    l.function,
                    l.file,
                    l.line
                )?;
            }
            continue;
        };
        let ann = ds
            .iter()
            .filter(|s| matches!(s.source, crate::analysis::steps::StepSource::Annotation))
            .count();
        let mut sources = Vec::new();
        if ann > 0 {
            let fam = how.annotation.as_deref().unwrap_or("record_function");
            sources.push(format!("{ann} bounded by `{fam}` annotations"));
        }
        if ds.len() > ann {
            let loops: Vec<String> = how
                .loops
                .iter()
                .map(|l| format!("{}:{} in {}", l.file, l.line, l.function))
                .collect();
            sources.push(format!(
                "{} iterations of the loop at {}",
                ds.len() - ann,
                loops.join(" and ")
            ));
        }
        writeln!(
            out,
            "{} {} steps ({}); allocated at step end{what}: {ends}; highest step peak {peak}",
            st.bold(&format!("STEPS cuda:{d}")),
            ds.len(),
            sources.join("; "),
        )?;
        if !how.nested_loops.is_empty() {
            let inner: Vec<String> = how
                .nested_loops
                .iter()
                .map(|l| format!("{}:{} ({} iterations)", l.file, l.line, l.iterations))
                .collect();
            writeln!(
                out,
                "  loops inside a step (not steps): {}",
                inner.join(", ")
            )?;
        }
    }
    Ok(())
}

fn write_bounded(
    out: &mut dyn Write,
    st: &Style,
    b: &crate::analysis::BoundedGrowthReport,
) -> io::Result<()> {
    let at = b
        .growth
        .site
        .as_ref()
        .map(|s| format!("{}:{} in {}", s.file, s.line, s.function))
        .unwrap_or_else(|| "blocks with no recorded stack".into());
    writeln!(
        out,
        "{} cuda:{} {at}: grew {} per step over {} steps, then {:.0}% of it was released by the end: bounded (a capped cache, warm-up, memory freed later), not a leak",
        st.bold("BOUNDED GROWTH"),
        b.device,
        bytes(b.growth.growth_bytes_per_step.max(0.0) as u64),
        b.growth.steps,
        100.0 * b.growth.freed_share
    )
}

impl Render<Analysis> for Text {
    fn render(&self, a: &Analysis, opts: &Options, out: &mut dyn Write) -> io::Result<()> {
        let st = Style { on: opts.color };
        let events: usize = a.devices.iter().map(|d| d.events).sum();
        writeln!(
            out,
            "{} {} ({}, {}, {} events)",
            st.bold("memscope"),
            a.input.path,
            a.input.kind,
            bytes(a.input.bytes),
            events
        )?;
        if let Some(o) = &a.input.origin {
            writeln!(out, "  {}", crate::wording::taken_with(o))?;
        }
        writeln!(out)?;
        let v = match a.verdict.kind {
            crate::analysis::VerdictKind::Ok => st.green(&crate::wording::verdict(&a.verdict)),
            crate::analysis::VerdictKind::Unjudged => {
                st.yellow(&crate::wording::verdict(&a.verdict))
            }
            _ => st.red(&crate::wording::verdict(&a.verdict)),
        };
        writeln!(out, "{} {v}", st.bold("VERDICT"))?;
        write_ranked(out, &st, a)?;
        for d in &a.devices {
            writeln!(out)?;
            write_device(out, &st, d)?;
        }
        for d in &a.devices {
            for (i, o) in d.ooms.iter().enumerate() {
                writeln!(out)?;
                write_oom(out, &st, d.device, i + 1, o, opts)?;
            }
        }
        if let Some(dev) = &a.device {
            writeln!(out)?;
            for line in crate::wording::device::lines(dev) {
                writeln!(out, "{line}")?;
            }
        }
        if let Some(g) = &a.graph {
            writeln!(out)?;
            writeln!(
                out,
                "{} {} forward nodes, {} backward nodes, {} never consumed by a backward",
                st.bold("AUTOGRAD GRAPH"),
                g.forward_nodes,
                g.backward_nodes,
                g.unconsumed_nodes
            )?;
            for f in &g.growth {
                let at = f.site.as_ref().map(|s| {
                    if f.line_known {
                        s.to_string()
                    } else {
                        format!("in {} ({}; the line is not known: {}:{} is where that frame was when profiling began)", s.function, s.file, s.file, s.line)
                    }
                });
                writeln!(
                    out,
                    "  {} `{}` node(s) per step never backpropagated, over {} steps {}",
                    st.red(&format!("{}", f.nodes_per_step)),
                    f.op,
                    f.steps,
                    at.unwrap_or_default()
                )?;
                writeln!(out, "    why: {}", crate::wording::graph_explanation(f))?;
                writeln!(out, "    fix: {}", st.bold(crate::wording::graph_fix(f)))?;
            }
        }
        for (i, l) in a.leaks.iter().enumerate() {
            writeln!(out)?;
            write_leak(out, &st, i + 1, l, opts)?;
        }
        for b in &a.bounded_growth {
            writeln!(out)?;
            write_bounded(out, &st, b)?;
        }
        for g in &a.excluded_growth {
            writeln!(out)?;
            writeln!(
                out,
                "{} cuda:{} {}",
                st.bold(crate::wording::excluded_heading(&g.growth.reading)),
                g.device,
                crate::wording::excluded_explanation(&g.growth)
            )?;
        }
        if !a.steps.is_empty()
            || a.devices
                .iter()
                .any(|d| d.structure.single_pass || !d.structure.decoding_loops.is_empty())
        {
            writeln!(out)?;
            write_steps(out, &st, &a.steps, &a.devices)?;
        }
        if let Some(c) = &a.categories {
            let at = match c.at {
                crate::analysis::Moment::Peak => Some("at the allocated peak"),
                crate::analysis::Moment::Dump => {
                    Some("at the dump (no log: by each block's own stack)")
                }
                crate::analysis::Moment::Oom => None,
            };
            if let Some(at) = at {
                write_categories(
                    out,
                    &c.categories,
                    &format!(
                        "{} ",
                        st.bold(&format!("BY CATEGORY cuda:{} {at}:", c.device))
                    ),
                )?;
            }
        }
        for d in &a.devices {
            if d.top_sites.is_empty() && d.top_sites_at_peak.is_empty() {
                continue;
            }
            writeln!(out)?;
            writeln!(
                out,
                "{}",
                st.bold(&format!(
                    "TOP ALLOCATION SITES cuda:{} (live at the end)",
                    d.device
                ))
            )?;
            write_sites(out, &st, &d.top_sites, opts, "")?;
            if !d.top_sites_at_peak.is_empty() {
                let at = d
                    .peak_event
                    .map(|e| format!(" (event {e})"))
                    .unwrap_or_default();
                writeln!(out)?;
                writeln!(
                    out,
                    "{}",
                    st.bold(&format!(
                        "TOP ALLOCATION SITES cuda:{} at the allocated peak{at}",
                        d.device
                    ))
                )?;
                write_sites(out, &st, &d.top_sites_at_peak, opts, "")?;
            }
        }
        for d in &a.devices {
            write_labels(out, &st, d.device, "BY USER LABEL", &d.user_labels)?;
            write_labels(
                out,
                &st,
                d.device,
                "BY COMPILED REGION",
                &d.compiled_regions,
            )?;
        }
        if !a.notes.is_empty() {
            writeln!(out)?;
            writeln!(out, "{}", st.bold("NOTES"))?;
            for n in &a.notes {
                writeln!(out, "  - {}", crate::wording::note(n))?;
            }
        }
        Ok(())
    }
}
