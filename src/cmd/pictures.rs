//! The picture commands (`flamegraph`, `report`, `export`): load, replay, write to `-o` only.
//!
//! Kept apart from `main.rs` so the dispatcher stays a list of one-liners. Each command
//! writes only the file named by `-o` (through [`crate::cmd::output`]), and refuses when that is the
//! input itself: a typo must not destroy the only copy of an OOM capture.

use std::path::Path;

use anyhow::{bail, Context};

use crate::cmd::output::Output;

use crate::cmd::cli::{ExportArgs, FlameBy, FlamegraphArgs, PlanOpts, ReportArgs};
use memscope::analysis::plan::{self, Ask, Shape};
use memscope::analysis::replay::Timeline;
use memscope::analysis::{Product, SnapshotProduct};
use memscope::report::{self, flamegraph as fg, Render};
use memscope::units::bytes;

/// Opens `-o` for writing (see [`crate::cmd::output`]): never the input, `-` is stdout.
pub(super) fn create(output: &Path, input: &Path) -> anyhow::Result<Output> {
    Output::create(output, &[input])
}

/// Renders `doc` with `picture` into `-o` (opened by [`create`]): the output's name, and the
/// bytes written.
pub(super) fn write_picture<D: ?Sized>(
    output: &Path,
    input: &Path,
    picture: &dyn Render<D>,
    doc: &D,
) -> anyhow::Result<(String, u64)> {
    let mut w = create(output, input)?;
    picture.render(doc, &report::Options::default(), &mut w)?;
    let name = w.name();
    Ok((name, w.finish()?))
}

/// `flamegraph` where there is no memory to draw: an SVG holding `note` (no lines with
/// `--folded`), exit 0, and a line saying why it is empty.
pub(super) fn flamegraph_note(a: &FlamegraphArgs, note: &str, why: &str) -> anyhow::Result<u8> {
    let name = if a.folded {
        let w = create(&a.output, &a.file)?;
        let name = w.name();
        w.finish()?;
        name
    } else {
        write_picture(&a.output, &a.file, &fg::NoteSvg, note)?.0
    };
    crate::cmd::output::eprint_term(&format!("memscope: wrote {name} (empty: {why})"));
    Ok(0)
}

/// Opens a snapshot or a profiler trace and analyses it once.
fn load_any(file: &Path) -> anyhow::Result<Product> {
    let opened = memscope::load::open(file)?;
    Ok(memscope::analysis::analyze(opened, file))
}

pub fn flamegraph(a: &FlamegraphArgs) -> anyhow::Result<u8> {
    let product = match load_any(&a.file)? {
        Product::Trace(t) => return super::pictures_trace::flamegraph(a, &t),
        Product::Snapshot(s) => s,
    };
    if let Some(given) = &a.at {
        if fg::At::parse(given).is_none() {
            bail!("--at {given}: expected end, peak, oom or an event index");
        }
    }
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
    let Some(mut at) = fg::At::parse(at_text) else {
        bail!("--at {at_text}: expected end, peak, oom or an event index");
    };
    // `--step N`: the peak of the analysis's step N, as a trace's `--step` is its step's peak.
    let mut step_label = None;
    if let Some(n) = a.step {
        let Some(dp) = product.per_device.get(pick) else {
            bail!(memscope::wording::no_snapshot_step(n, 0));
        };
        let Some((step, e)) = dp.step_peak(n) else {
            bail!(memscope::wording::no_snapshot_step(
                n,
                dp.iterations().count()
            ));
        };
        at = fg::At::Event(e.0);
        step_label = Some(memscope::wording::snapshot_step_moment(&step.name, e.0));
    }
    let Some((dev, p)) = product.device(snap, pick) else {
        return flamegraph_of_nothing(a);
    };
    let (m, state) = product.state_at(pick, at)?;
    let label = step_label.unwrap_or_else(|| fg::moment_label(m));
    let by = match a.by {
        FlameBy::Stack => fg::By::Stack,
        FlameBy::Site => fg::By::Site,
        FlameBy::Category => fg::By::Category,
    };
    let folded = fg::fold(snap, dev, &state, by, &p.classifier);
    let svg = fg::Svg {
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
    // The one place `flamegraph` picks its picture.
    let picture: &dyn Render<fg::Folded> = if a.folded { &fg::Lines } else { &svg };
    let (name, n) = write_picture(&a.output, &a.file, picture, &folded)?;
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
    let product = match load_any(file)? {
        Product::Trace(t) => {
            if ask.is_some() {
                bail!(
                    "{}: {}",
                    file.display(),
                    memscope::wording::snapshot_needed(memscope::wording::SnapshotOnly::Plan)
                );
            }
            return super::pictures_trace::report(a, file, &t);
        }
        Product::Snapshot(s) => s,
    };
    let snap = &product.snap;
    let extra = match &ask {
        Some(ask) => {
            let plans = plan::plan(snap, &product, ask, None);
            if let Err(e) = &plans {
                crate::cmd::output::eprint_term(&format!(
                    "memscope: warning: --batch: no capacity plan: {e}"
                ));
            }
            report::to_string(&report::plan::section::Section, &plans, &Default::default())
        }
        None => String::new(),
    };
    let mut w = create(&a.output, file)?;
    let html = report::html::Html {
        snap,
        product: &product.analyzed,
        extra: &extra,
    };
    html.render(&product.analysis, &report::Options::default(), &mut w)?;
    let name = w.name();
    let n = w.finish()?;
    crate::cmd::output::eprint_term(&format!("memscope: wrote {} ({})", name, bytes(n)));
    Ok(0)
}

pub fn export(a: &ExportArgs) -> anyhow::Result<u8> {
    // Read once: a trace's own text is copied into the export.
    let input = memscope::load::read_input(&a.file)?;
    let opened = memscope::load::open_read(&a.file, &input)?;
    let SnapshotProduct { snap, analyzed } = match memscope::analysis::analyze(opened, &a.file) {
        Product::Trace(t) => return super::pictures_trace::export(a, &t, &input),
        Product::Snapshot(s) => {
            drop(input);
            s
        }
    };
    let tls: Vec<Timeline> = analyzed
        .per_device
        .into_iter()
        .map(|d| d.timeline)
        .collect();
    let mut w = create(&a.output, &a.file)?;
    let trace = report::perfetto::document(
        &snap,
        &tls,
        &a.file.display().to_string(),
        &report::perfetto::Options::default(),
    );
    report::perfetto::Json.render(&trace, &report::Options::default(), &mut w)?;
    let sum = &trace.summary;
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
    flamegraph_note(
        a,
        "the snapshot holds no device: no GPU memory to draw",
        "the snapshot holds no device, so no memory was live",
    )
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

/// Opens a snapshot for a command that replays the allocator (`whatif`, `plan`): a profiler
/// trace is refused in words that say why (no addresses, no segments) and name the capture to
/// take instead. The input is looked at again only when it failed to open as a snapshot.
pub(crate) fn open_snapshot_for(
    path: &Path,
    cmd: memscope::wording::SnapshotOnly,
) -> anyhow::Result<memscope::load::Opened<memscope::model::Snapshot>> {
    match memscope::load::open_snapshot(path) {
        Ok(o) => Ok(o),
        Err(e) => {
            // JSON that is not one of memscope's own documents: a profiler trace.
            let is_trace = path != Path::new("-")
                && memscope::load::read_input(path).is_ok_and(|i| {
                    memscope::load::sniff(&i) == memscope::load::Sniffed::Json
                        && !memscope::inputs::is_memscope_document(&i)
                });
            if is_trace {
                return Err(memscope::load::LoadError::WrongKind {
                    path: path.to_owned(),
                    what: memscope::wording::snapshot_needed(cmd),
                }
                .into());
            }
            Err(e.into())
        }
    }
}
