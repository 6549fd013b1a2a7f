//! The picture commands (`flamegraph`, `report`, `export`): load, replay, write to `-o` only.
//!
//! Kept apart from `main.rs` so the dispatcher stays a list of one-liners. Each command
//! writes only the file named by `-o` (through [`crate::output`]), and refuses when that is the
//! input itself: a typo must not destroy the only copy of an OOM capture.

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context};

use crate::output::Output;

use crate::cli::{ExportArgs, FlameBy, FlamegraphArgs, ReportArgs};
use memscope::analysis::replay::Timeline;
use memscope::model::Snapshot;
use memscope::report::{self, flamegraph as fg, Format};
use memscope::units::bytes;

fn load(file: &Path) -> anyhow::Result<(Snapshot, u64)> {
    // The size as read: a pipe's bytes count too (`-` has no file size).
    Ok(memscope::load::load_snapshot_sized(file)?)
}

/// Opens `-o` for writing (see [`crate::output`]): never the input, `-` is stdout.
fn create(output: &Path, input: &Path) -> anyhow::Result<Output> {
    Output::create(output, &[input])
}

pub fn flamegraph(a: &FlamegraphArgs) -> anyhow::Result<u8> {
    if let Some(given) = &a.at {
        if fg::At::parse(given).is_none() {
            bail!("--at {given}: expected end, peak, oom or an event index");
        }
    }
    let (snap, len) = load(&a.file)?;
    let product = memscope::analysis::analyze_snapshot(&snap, &a.file, len);
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
    let Some((dev, p)) = product.device(&snap, pick) else {
        return flamegraph_of_nothing(a);
    };
    let m = product.resolve(&snap, pick, at)?;
    let label = fg::moment_label(m);
    let state = product.state_at(&snap, pick, m);
    let by = match a.by {
        FlameBy::Stack => fg::By::Stack,
        FlameBy::Site => fg::By::Site,
        FlameBy::Category => fg::By::Category,
    };
    let folded = fg::fold(&snap, dev, &state, by, &p.classifier);
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
    crate::output::eprint_term(&format!(
        "memscope: wrote {} ({}; {} live at {})",
        name,
        bytes(n),
        bytes(folded.total_bytes),
        label
    ));
    Ok(0)
}

pub fn report(a: &ReportArgs) -> anyhow::Result<u8> {
    let (snap, len) = load(&a.file)?;
    // One analysis serves the report and its pictures.
    let product = memscope::analysis::analyze_snapshot(&snap, &a.file, len);
    let mut w = create(&a.output, &a.file)?;
    let html = report::html::Html {
        snap: &snap,
        product: &product,
    };
    html.render(&product, &report::Options::default(), &mut w)?;
    let name = w.name();
    let n = w.finish()?;
    crate::output::eprint_term(&format!("memscope: wrote {} ({})", name, bytes(n)));
    Ok(0)
}

pub fn export(a: &ExportArgs) -> anyhow::Result<u8> {
    let (snap, len) = load(&a.file)?;
    let product = memscope::analysis::analyze_snapshot(&snap, &a.file, len);
    let tls: Vec<Timeline> = product.per_device.into_iter().map(|d| d.timeline).collect();
    let mut w = create(&a.output, &a.file)?;
    let sum = report::perfetto::write(
        &snap,
        &tls,
        &a.file.display().to_string(),
        &report::perfetto::Options::default(),
        &mut w,
    )?;
    if let Some(why) = sum.empty_because() {
        eprintln!("memscope: warning: {why}");
    }
    let name = w.name();
    let n = w.finish()?;
    eprintln!(
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
    );
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
    eprintln!(
        "memscope: wrote {name} (empty: the snapshot holds no device, so no memory was live)"
    );
    Ok(0)
}
