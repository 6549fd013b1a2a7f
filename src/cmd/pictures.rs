//! The picture commands (`flamegraph`, `report`, `export`): load, replay, write to `-o` only.
//!
//! Kept apart from `main.rs` so the dispatcher stays a list of one-liners. Each command
//! writes only the file named by `-o` (through [`crate::cmd::output`]), and refuses when that is the
//! input itself: a typo must not destroy the only copy of an OOM capture.

use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context};

use crate::cmd::output::Output;

use crate::cmd::cli::{ExportArgs, FlameBy, FlamegraphArgs, PlanOpts, ReportArgs};
use memscope::analysis::plan::{self, Ask, Plan, PlanError, Shape};
use memscope::analysis::replay::Timeline;
use memscope::analysis::SnapshotProduct;
use memscope::escape::html as esc;
use memscope::report::{self, flamegraph as fg};
use memscope::units::bytes;

/// Opens a snapshot and analyses it once: the product every picture is drawn from.
fn load(file: &Path) -> anyhow::Result<SnapshotProduct> {
    // The size as read: a pipe's bytes count too (`-` has no file size).
    let opened = memscope::load::open_snapshot(file)?;
    Ok(memscope::analysis::analyze(opened, file))
}

/// Opens `-o` for writing (see [`crate::cmd::output`]): never the input, `-` is stdout.
fn create(output: &Path, input: &Path) -> anyhow::Result<Output> {
    Output::create(output, &[input])
}

pub fn flamegraph(a: &FlamegraphArgs) -> anyhow::Result<u8> {
    if let Some(given) = &a.at {
        if fg::At::parse(given).is_none() {
            bail!("--at {given}: expected end, peak, oom or an event index");
        }
    }
    let product = load(&a.file)?;
    let snap = &product.snap;
    let tls: Vec<&Timeline> = product.timelines().collect();
    let pick = match a.device {
        Some(d) => tls
            .iter()
            .position(|t| t.device == d)
            .with_context(|| format!("the snapshot has no device {d}"))?,
        // The device whose OOM came last (the one that ended the run), else the first.
        None => tls
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.ooms.last().map(|o| (i, o.time_us.unwrap_or(0))))
            .max_by_key(|&(_, t)| t)
            .map_or(0, |(i, _)| i),
    };
    // By default the OOM, where there is one: what filled the memory when it ran out.
    let default_at = match tls.get(pick) {
        Some(t) if !t.ooms.is_empty() => "oom",
        _ => "end",
    };
    let at_text = a.at.as_deref().unwrap_or(default_at);
    let Some(at) = fg::At::parse(at_text) else {
        bail!("--at {at_text}: expected end, peak, oom or an event index");
    };
    let Some((dev, p)) = product.device(snap, pick) else {
        return flamegraph_of_nothing(a);
    };
    let (m, state) = product.state_at(pick, at)?;
    let label = fg::moment_label(m);
    let by = match a.by {
        FlameBy::Stack => fg::By::Stack,
        FlameBy::Site => fg::By::Site,
        FlameBy::Category => fg::By::Category,
    };
    let folded = fg::fold(snap, dev, &state, by, &p.classifier);
    let mut w = create(&a.output, &a.file)?;
    if a.folded {
        // Folded lines are text too: a name cannot command the terminal it is printed on.
        let mut t = memscope::report::escape::TermWriter::new(&mut w, false);
        fg::write_folded(&folded, &mut t)?;
        t.flush()?;
    } else {
        let opts = fg::SvgOptions {
            title: format!(
                "Live memory on cuda:{} at {}: {}",
                dev.index,
                label,
                bytes(folded.total_bytes)
            ),
            subtitle: Some(format!(
                "{} · width = bytes held · orange = your code, grey = PyTorch and libraries",
                a.file.display()
            )),
            no_javascript: false,
            width: None,
        };
        fg::write_svg(&folded, &opts, &mut w)?;
    }
    let name = w.name();
    let n = w.finish()?;
    crate::cmd::output::eprint_term(&format!(
        "memscope: wrote {} ({}; {} live at {})",
        name,
        bytes(n),
        bytes(folded.total_bytes),
        label
    ));
    Ok(0)
}

pub fn report(a: &ReportArgs) -> anyhow::Result<u8> {
    if crate::cmd::job::is_job(&a.files) {
        return crate::cmd::job::report(a);
    }
    let file = &a.files[0];
    // The plan's arguments are checked before the capture is read.
    let ask = plan_ask(&a.plan)?;
    // One analysis serves the report, its pictures and the plan.
    let product = load(file)?;
    let snap = &product.snap;
    let extra = match &ask {
        Some(ask) => {
            let plans = plan::plan(snap, &product, ask, None);
            if let Err(e) = &plans {
                crate::cmd::output::eprint_term(&format!(
                    "memscope: warning: --batch: no capacity plan: {e}"
                ));
            }
            capacity_section(&plans)
        }
        None => String::new(),
    };
    let mut w = create(&a.output, file)?;
    let html = report::html::Html {
        snap,
        product: &product.analyzed,
    };
    html.render_with(
        &product.analysis,
        &report::Options::default(),
        &extra,
        &mut w,
    )?;
    let name = w.name();
    let n = w.finish()?;
    crate::cmd::output::eprint_term(&format!("memscope: wrote {} ({})", name, bytes(n)));
    Ok(0)
}

pub fn export(a: &ExportArgs) -> anyhow::Result<u8> {
    let SnapshotProduct { snap, analyzed } = load(&a.file)?;
    let tls: Vec<Timeline> = analyzed
        .per_device
        .into_iter()
        .map(|d| d.timeline)
        .collect();
    let mut w = create(&a.output, &a.file)?;
    let sum = report::perfetto::write(
        &snap,
        &tls,
        &a.file.display().to_string(),
        &report::perfetto::Options::default(),
        &mut w,
    )?;
    if let Some(why) = sum.empty_because() {
        crate::cmd::output::eprint_term(&format!("memscope: warning: {why}"));
    }
    let name = w.name();
    let n = w.finish()?;
    // Through the terminal boundary, as every message that names a file.
    crate::cmd::output::eprint_term(&format!(
        "memscope: wrote {} ({}; {} counter points, {} block slices, {} instants{})",
        name,
        bytes(n),
        sum.counter_points,
        sum.slices,
        sum.instants,
        if sum.index_time_devices.is_empty() {
            ""
        } else {
            "; no time_us in the log: event indices used as times"
        }
    ));
    Ok(0)
}

/// `flamegraph` of a snapshot with no device (nothing was allocated on a GPU): an SVG that says
/// so (or no folded lines), exit 0, as `report` and `export` write their empty page and trace.
fn flamegraph_of_nothing(a: &FlamegraphArgs) -> anyhow::Result<u8> {
    let mut w = create(&a.output, &a.file)?;
    if !a.folded {
        fg::write_note_svg(
            "the snapshot holds no device: no GPU memory to draw",
            &mut w,
        )?;
    }
    let name = w.name();
    w.finish()?;
    crate::cmd::output::eprint_term(&format!(
        "memscope: wrote {name} (empty: the snapshot holds no device, so no memory was live)"
    ));
    Ok(0)
}

/// What `--batch` (with `--seq`, `--cap`, `--at`) asks of a plan, as `memscope plan` asks it
/// (the shapes by default 2, 4 and 8 times the recorded batch, the recorded allocator
/// settings); `None` without `--batch`. The arguments alone are checked here, before the capture
/// is read (and before the TUI takes the terminal), in the words of [`PlanError`].
pub fn plan_ask(o: &PlanOpts) -> anyhow::Result<Option<Ask>> {
    let Some(batch) = o.batch else {
        return Ok(None);
    };
    let recorded = Shape { batch, seq: o.seq };
    Ok(Some(Ask::new(recorded, &o.at, o.cap, Default::default())?))
}

/// The report's "Capacity plan" section (`report --batch`): per device plan, the largest batch
/// (or why none), the chart of peak against batch with the cap, the predictions and the notes;
/// or why there is no plan. Everything from the capture is escaped.
fn capacity_section(plans: &Result<Vec<Plan>, PlanError>) -> String {
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
                Some(c) => format!(
                    "{} ({})",
                    bytes(c),
                    esc(memscope::wording::cap_source(p.cap.source))
                ),
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
                    o.push_str(&esc(&memscope::wording::plan_search_limit()));
                }
                if m.rounded_down_by > 0 || m.margin_bytes > 0 {
                    let _ = write!(
                        o,
                        " <span class=sub>rounded down by {} from {} (the likelier reading), keeping {} under the cap for the model's error at the recorded batch</span>",
                        m.rounded_down_by,
                        m.central_batch,
                        bytes(m.margin_bytes)
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
                    esc(memscope::wording::no_max_batch(*r))
                );
            }
        }
        let chart = report::plan::html::chart_svg(p);
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
            esc(&memscope::wording::plan_fit(&p.fit, p.recorded))
        );
        for n in memscope::wording::plan_notes(p) {
            let _ = write!(o, "<li>{}</li>", esc(&n));
        }
        o.push_str("</ul>");
    }
    o.push_str("</section>");
    o
}
