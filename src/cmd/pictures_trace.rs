//! The picture commands on a profiler trace: `report` (an HTML page), `flamegraph` (the live
//! memory by Python stack and op, at the peak or at a step's peak) and `export` (the trace
//! itself with memscope's findings added for Perfetto). Each draws from the trace's analysis
//! product and writes only `-o`, as for a snapshot ([`super::pictures`]).

use std::path::Path;

use anyhow::bail;

use crate::cmd::cli::{ExportArgs, FlameBy, FlamegraphArgs, ReportArgs};
use memscope::analysis::trace_report::TraceMoment;
use memscope::analysis::TraceProduct;
use memscope::report::pictures::{trace_page, trace_perfetto};
use memscope::report::{flamegraph as fg, Render};
use memscope::units::bytes;

use super::pictures::write_picture;

pub fn flamegraph(a: &FlamegraphArgs, p: &TraceProduct) -> anyhow::Result<u8> {
    let t = &p.trace;
    let at = match (a.step, a.at.as_deref()) {
        (Some(n), _) => {
            if !t.steps.iter().any(|s| s.number == n) {
                bail!(memscope::wording::no_such_step(
                    n,
                    t.steps.first().map(|s| s.number),
                    t.steps.last().map(|s| s.number)
                ));
            }
            TraceMoment::Step(n)
        }
        (None, None | Some("peak")) => TraceMoment::Peak,
        (None, Some("end")) => TraceMoment::End,
        (None, Some(other)) => bail!(memscope::wording::trace_at_values(other)),
    };
    let devices: Vec<_> = p
        .memory
        .devices
        .iter()
        .filter(|d| d.device.is_cuda())
        .collect();
    let dev = match a.device {
        Some(n) => devices
            .iter()
            .find(|d| d.device.device_id == i64::from(n))
            .copied(),
        // The device with the highest allocated peak.
        None => devices
            .iter()
            .max_by_key(|d| d.peak.as_ref().map_or(i64::MIN, |p| p.allocated_bytes))
            .copied(),
    };
    let live = dev.and_then(|d| p.live_at(d.device, at));
    let (Some(dev), Some(live)) = (dev, live) else {
        if let Some(n) = a.device {
            bail!(memscope::wording::no_trace_device(n));
        }
        return super::pictures::flamegraph_note(
            a,
            memscope::wording::NO_TRACE_MEMORY,
            "the trace holds no CUDA memory events",
        );
    };
    let by = match a.by {
        FlameBy::Site => fg::By::Site,
        FlameBy::Stack | FlameBy::Category => fg::By::Stack,
    };
    let folded = fg::fold_trace(p, &live, by);
    let step = t.step_at(live.ts).map(|s| t.step(s).name.clone());
    let moment = memscope::wording::trace_moment(at, step.as_deref());
    let svg = fg::Svg {
        title: memscope::wording::trace_flame_title(&dev.label, &moment, folded.total_bytes),
        subtitle: Some(format!(
            "{} · width = bytes alive · Python stack, then ops · orange = your code, grey = PyTorch and libraries",
            a.file.display()
        )),
        no_javascript: false,
        width: None,
    };
    let picture: &dyn Render<fg::Folded> = if a.folded { &fg::Lines } else { &svg };
    let (name, n) = write_picture(&a.output, &a.file, picture, &folded)?;
    crate::cmd::output::eprint_term(&format!(
        "memscope: wrote {} ({}; {} alive at {})",
        name,
        bytes(n),
        bytes(folded.total_bytes),
        moment
    ));
    Ok(0)
}

pub fn report(a: &ReportArgs, file: &Path, p: &TraceProduct) -> anyhow::Result<u8> {
    let (name, n) = write_picture(&a.output, file, &trace_page::Page { product: p }, p)?;
    crate::cmd::output::eprint_term(&format!("memscope: wrote {} ({})", name, bytes(n)));
    Ok(0)
}

pub fn export(
    a: &ExportArgs,
    p: &TraceProduct,
    input: &memscope::load::Input,
) -> anyhow::Result<u8> {
    let (events, summary) = trace_perfetto::events(p);
    let doc = trace_perfetto::Annotated {
        raw: &input.data,
        events,
        summary,
    };
    let kept = trace_perfetto::insertion_point(doc.raw).is_some();
    let (name, n) = write_picture(&a.output, &a.file, &trace_perfetto::Json, &doc)?;
    if let Some(at) = p.trace.cut_at_byte {
        crate::cmd::output::eprint_term(&format!(
            "memscope: warning: {}",
            memscope::wording::export_cut(at)
        ));
    }
    let s = &doc.summary;
    crate::cmd::output::eprint_term(&format!(
        "memscope: wrote {} ({}; the trace{} with {} counter points, {} finding slices, {} instants added)",
        name,
        bytes(n),
        if kept { "" } else { " (its events array not found: not kept)" },
        s.counter_points,
        s.slices,
        s.instants
    ));
    Ok(0)
}
