//! The capacity plan (`--batch`) in the HTML report (`memscope report --batch`) and in the TUI's
//! Plan view (`memscope tui --batch`): the chart of peak against batch with the cap and the
//! largest batch, the predictions, the notes. The numbers shown are checked against those
//! `plan::plan` returns; no byte value is written down here (the analysis is still being tuned).

use std::path::{Path, PathBuf};
use std::process::Command;

use memscope::analysis::plan::{self, Ask, Plan, Shape};
use memscope::escape::html as esc;
use memscope::load::Progress;
use memscope::report::Render;
use memscope::tui::{App, Loaded, View};
use memscope::units::bytes;

use crate::common;

use common::{key, screen};

const TRANSFORMER: &str = "plan/transformer_b2.pickle.gz";
/// `--cap 1694MiB`.
const CAP: u64 = 1694 * 1024 * 1024;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_memscope"))
}

fn tmp(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("plan_views");
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// What `--batch B [--seq S] [--cap C]` asks, as `memscope plan` asks it: the shapes 2, 4 and 8
/// times the batch, the recorded allocator settings.
fn ask(batch: u64, seq: Option<u64>, cap: Option<u64>) -> Ask {
    Ask {
        recorded: Shape { batch, seq },
        at: [2, 4, 8]
            .iter()
            .map(|k| Shape {
                batch: batch * k,
                seq,
            })
            .collect(),
        cap,
        conf: Default::default(),
    }
}

/// The plans `plan::plan` makes of fixture `name` for `ask`.
fn plans(name: &str, ask: &Ask) -> Vec<Plan> {
    let p = fixture(name);
    let (snap, len) = memscope::load::load_snapshot_sized(&p).unwrap();
    let an = memscope::analysis::analyze_snapshot(&snap, &p, len);
    plan::plan(&snap, &an, ask, None).unwrap()
}

/// The TUI on fixture `name`, planned for `ask`, showing the file name only.
fn planned_app(name: &str, ask: Option<&Ask>) -> App {
    let loaded = Loaded::load_planned(&fixture(name), &Progress::default(), ask).unwrap();
    let mut app = App::with(loaded);
    app.set_path(name.to_owned());
    app
}

/// `memscope report FILE -o OUT ARGS...`: its exit code, stderr and the page.
fn report(file: &Path, out: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let o = bin()
        .arg("report")
        .arg(file)
        .arg("-o")
        .arg(out)
        .args(args)
        .output()
        .unwrap();
    let page = std::fs::read_to_string(out).unwrap_or_default();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        page,
    )
}

/// The report's capacity plan section, whole.
fn section(page: &str) -> &str {
    let start = page
        .find(r#"<section id="capacity-plan""#)
        .expect("a capacity plan section");
    let len = page[start..].find("</section>").expect("the section ends") + "</section>".len();
    &page[start..start + len]
}

#[test]
fn report_with_batch_has_the_chart_the_cap_and_the_largest_batch() {
    let file = fixture(TRANSFORMER);
    let out = tmp("transformer_b2.html");
    let (code, err, page) = report(
        &file,
        &out,
        &["--batch", "2", "--seq", "256", "--cap", "1694MiB"],
    );
    assert_eq!(code, Some(0), "{err}");
    let s = section(&page);
    assert!(s.contains("<h2>Capacity plan</h2>"), "{s}");
    let ps = plans(TRANSFORMER, &ask(2, Some(256), Some(CAP)));
    assert_eq!(ps.len(), 1);
    let p = &ps[0];
    // The chart, with the cap as a red line and the largest batch as a green one.
    assert!(s.contains("<svg"), "{s}");
    assert!(
        s.contains(&memscope::report::plan::html::chart_svg(p)),
        "the chart is plan's"
    );
    assert!(s.contains(r##"stroke="#dc2626""##), "the cap line: {s}");
    assert!(
        s.contains(&format!(">cap {}</text>", esc(&bytes(CAP)))),
        "{s}"
    );
    let m = p.max_batch.as_ref().expect("a largest batch under the cap");
    assert!(
        s.contains(&format!(
            "<b>Largest batch:</b> {} at sequence 256",
            m.batch
        )),
        "{s}"
    );
    assert!(s.contains(&format!("max batch {}</text>", m.batch)), "{s}");
    // The predictions, as plan::plan made them.
    assert_eq!(p.predictions.len(), 3);
    for r in &p.predictions {
        let row = format!(
            "<tr><td>batch {} x seq 256</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td>{}</td></tr>",
            r.batch,
            bytes(r.peak_allocated_bytes),
            bytes(r.peak_allocated_upper_bytes),
            bytes(r.peak_reserved_bytes),
            bytes(r.peak_reserved_upper_bytes),
            if r.oom == Some(true) { "OOM" } else { "fits" }
        );
        assert!(s.contains(&row), "{row}\n{s}");
    }
    // The notes and the fit, escaped.
    for n in memscope::wording::plan_notes(p) {
        assert!(s.contains(&format!("<li>{}</li>", esc(&n))), "{n}");
    }
    assert!(s.contains(&esc(&memscope::wording::plan_fit(&p.fit, p.recorded))));
    // After the devices' sections, before the notes and the end of the page.
    let at = page.find(r#"<section id="capacity-plan""#).unwrap();
    assert!(page.find(r#"<section id="memory-0""#).unwrap() < at);
    assert!(page.find("</main>").unwrap() > at);
}

#[test]
fn report_without_batch_is_the_page_it_was() {
    let file = fixture(TRANSFORMER);
    let (code, err, without) = report(&file, &tmp("without.html"), &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!without.contains("capacity-plan"));
    // The page the library writes (`Render::render`), byte for byte.
    let (snap, len) = memscope::load::load_snapshot_sized(&file).unwrap();
    let product = memscope::analysis::analyze_snapshot(&snap, &file, len);
    let mut v = Vec::new();
    memscope::report::html::Html {
        snap: &snap,
        product: &product,
        extra: "",
    }
    .render(&product, &Default::default(), &mut v)
    .unwrap();
    assert_eq!(String::from_utf8(v).unwrap(), without);
    // With --batch, the same page with the section added, nothing else.
    let (code, err, with) = report(&file, &tmp("with.html"), &["--batch", "2"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(with.replacen(section(&with), "", 1), without);
}

#[test]
fn report_plan_arguments_are_checked_before_the_capture_is_read() {
    let file = fixture(TRANSFORMER);
    let out = tmp("refused.html");
    let _ = std::fs::remove_file(&out);
    let (code, err, _) = report(&file, &out, &["--batch", "0"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("--batch: the recorded batch size must be at least 1"),
        "{err}"
    );
    let (code, err, _) = report(&file, &out, &["--batch", "2", "--at", "4x512"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("a sequence length needs the recorded one (--seq)"),
        "{err}"
    );
    // The plan's options mean nothing without --batch.
    let (code, err, _) = report(&file, &out, &["--cap", "1GiB"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--batch"), "{err}");
    assert!(!out.exists(), "nothing written");
}

#[test]
fn report_of_a_capture_with_no_history_says_why_there_is_no_plan() {
    let file = fixture("unit/tiny_nohistory_p4.pickle");
    let (code, err, page) = report(&file, &tmp("nohistory.html"), &["--batch", "8"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("warning: --batch: no capacity plan"), "{err}");
    let s = section(&page);
    assert!(s.contains("No capacity plan: "), "{s}");
    assert!(s.contains("no device with an allocation history"), "{s}");
    assert!(!s.contains("<svg"), "{s}");
}

/// The Plan view's screen, with what it must show whatever the size: the largest batch, and
/// each prediction's batch and reserved peak as `plan::plan` made them.
fn plan_screen(app: &mut App, p: &Plan, w: u16, h: u16) -> String {
    let s = screen(app, w, h);
    for l in s.lines() {
        assert!(l.chars().count() <= w as usize, "{w}x{h}: {l}");
    }
    assert_eq!(s.lines().count(), h as usize);
    let m = p.max_batch.as_ref().unwrap();
    assert!(
        s.contains(&format!("MAX BATCH {} at seq 256", m.batch)),
        "{w}x{h}\n{s}"
    );
    for r in &p.predictions {
        let row = s
            .lines()
            .find(|l| l.starts_with(&format!("{}x256 ", r.batch)))
            .unwrap_or_else(|| panic!("{w}x{h}: no row for batch {}\n{s}", r.batch));
        let cells: Vec<&str> = row
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        assert_eq!(cells[1], bytes(r.peak_reserved_bytes), "{row}");
        assert_eq!(cells[2], bytes(r.peak_reserved_upper_bytes), "{row}");
        assert_eq!(
            cells[3],
            if r.oom == Some(true) { "OOM" } else { "fits" },
            "{row}"
        );
        if let Some(c) = cells.get(4) {
            assert_eq!(*c, bytes(r.peak_allocated_bytes), "{row}");
        }
    }
    s
}

#[test]
fn tui_plan_view_at_three_sizes() {
    let a = ask(2, Some(256), Some(CAP));
    let want = plans(TRANSFORMER, &a);
    let mut app = planned_app(TRANSFORMER, Some(&a));
    assert_eq!(app.views().last(), Some(&View::Plan));
    key(&mut app, '6');
    assert_eq!(app.view(), View::Plan);
    // The view keeps the plan made at load time: the one plan::plan makes.
    let kept = app.plans().unwrap().unwrap();
    assert_eq!(kept.len(), want.len());
    assert_eq!(kept[0].predictions, want[0].predictions);
    assert_eq!(kept[0].max_batch, want[0].max_batch);
    let p = &want[0];
    let m = p.max_batch.as_ref().unwrap().batch;
    let cap = format!("cap {}", bytes(CAP));
    for (w, h) in [(80, 24), (120, 40)] {
        let s = plan_screen(&mut app, p, w, h);
        // The chart: braille curves, the cap across the plot, the largest batch down it.
        assert!(
            s.contains(&format!("─ {cap} ─")),
            "{w}x{h}: the cap line\n{s}"
        );
        assert!(
            s.contains(&format!("┊max {m}")),
            "{w}x{h}: the largest batch\n{s}"
        );
        assert!(
            s.chars().any(|c| ('\u{2801}'..='\u{28ff}').contains(&c)),
            "{w}x{h}: the curves\n{s}"
        );
        assert!(
            s.contains(&format!("┊ max batch {m}")),
            "{w}x{h}: the legend\n{s}"
        );
        // The batch axis names the recorded batch, every predicted one and the largest.
        let axis = s
            .lines()
            .find(|l| l.trim_start().starts_with("batch "))
            .unwrap();
        let named: Vec<&str> = axis.split_whitespace().skip(1).collect();
        let mut batches: Vec<String> = std::iter::once(2)
            .chain(p.predictions.iter().map(|r| r.batch))
            .chain([m])
            .map(|b| b.to_string())
            .collect();
        batches.sort_by_key(|b| b.parse::<u64>().unwrap());
        assert_eq!(named, batches, "{axis}");
        assert!(s.contains("recorded at batch 2 x seq 256"), "{s}");
    }
    // Small: no room for the chart; the largest batch and the predictions stay.
    let s = plan_screen(&mut app, p, 40, 12);
    assert!(!s.contains(&format!("┊max {m}")), "{s}");
    // Nothing planned again on drawing: still the plan made at load time.
    assert_eq!(
        app.plans().unwrap().unwrap()[0].predictions,
        want[0].predictions
    );
}

#[test]
fn tui_plan_view_without_a_cap_says_why_there_is_no_largest_batch() {
    let name = "plan/mlp_b256.pickle.gz";
    let a = ask(256, None, None);
    let want = plans(name, &a);
    let reason = match &want[0].max_batch {
        Err(r) => memscope::wording::no_max_batch(*r),
        Ok(m) => panic!("no cap, yet a largest batch {m:?}"),
    };
    let mut app = planned_app(name, Some(&a));
    key(&mut app, '6');
    let s = screen(&mut app, 120, 40);
    assert!(s.contains("MAX BATCH unknown: no cap"), "{s}");
    assert!(s.contains("│ no cap"), "{s}");
    assert!(!s.contains("─ cap"), "no cap line: {s}");
    // The whole reason, in the notes.
    let notes: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        notes.contains(&format!("no largest batch: {reason}")),
        "{s}"
    );
    for r in &want[0].predictions {
        assert!(
            s.lines().any(|l| l.starts_with(&format!("{} ", r.batch))
                && l.contains(&bytes(r.peak_reserved_bytes))),
            "{s}"
        );
    }
}

#[test]
fn tui_plan_view_of_a_capture_with_no_history_says_why() {
    let a = ask(8, None, None);
    let mut app = planned_app("unit/tiny_nohistory_p4.pickle", Some(&a));
    key(&mut app, '6');
    assert_eq!(app.view(), View::Plan);
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("CAPACITY PLAN"), "{s}");
    assert!(s.contains("no plan: the snapshot holds no device"), "{s}");
    assert!(app.plans().unwrap().is_err());
}

#[test]
fn without_batch_nothing_changes() {
    let plain = App::with(Loaded::load(&fixture(TRANSFORMER)).unwrap());
    let unplanned = planned_app(TRANSFORMER, None);
    for app in [&plain, &unplanned] {
        assert_eq!(app.views().len(), 5);
        assert!(!app.views().contains(&View::Plan));
        assert!(app.plans().is_none());
    }
    // A trace has no allocator log to plan from: no Plan view.
    let a = ask(8, None, None);
    let trace = planned_app("trace_clean.trace.json.gz", Some(&a));
    assert!(!trace.views().contains(&View::Plan));
}

#[test]
fn tui_plan_view_draws_at_any_size() {
    let a = ask(2, Some(256), Some(CAP));
    let mut app = planned_app(TRANSFORMER, Some(&a));
    key(&mut app, '6');
    for w in (20..=130).step_by(7) {
        for h in (5..=45).step_by(4) {
            let s = screen(&mut app, w, h);
            for l in s.lines() {
                assert!(l.chars().count() <= w as usize, "{w}x{h}: {l}");
            }
            assert!(s.contains("CAPACITY PLAN"), "{w}x{h}\n{s}");
        }
    }
    // The notes scroll; the view keeps drawing.
    for c in ['j', 'j', 'G', 'g'] {
        key(&mut app, c);
        assert!(screen(&mut app, 80, 24).contains("MAX BATCH"));
    }
}

/// A capture that ends at an OOM: the peaks are lower bounds and the largest batch only has an
/// upper bound, in the report and in the view alike.
#[test]
fn a_capture_that_ends_at_an_oom_shows_lower_bounds_and_the_bound_on_the_batch() {
    let name = "leak_oom.pickle";
    let a = ask(8, None, None);
    let want = plans(name, &a);
    let p = &want[0];
    assert!(p.ends_in_oom && p.max_batch.is_err());
    let at_most = p
        .max_batch_at_most
        .expect("a bound from the requests up to the OOM");
    let reason = memscope::wording::no_max_batch(*p.max_batch.as_ref().unwrap_err());
    let (code, err, page) = report(&fixture(name), &tmp("leak_oom.html"), &["--batch", "8"]);
    assert_eq!(code, Some(0), "{err}");
    let s = section(&page);
    assert!(
        s.contains(&format!(
            "<b>Largest batch:</b> unknown (at most {at_most}): {}",
            esc(reason)
        )),
        "{s}"
    );
    for r in &p.predictions {
        assert!(
            s.contains(&format!(
                "<td class=n>≥ {}</td><td class=n>≥ {}</td><td>",
                bytes(r.peak_reserved_bytes),
                bytes(r.peak_reserved_upper_bytes)
            )),
            "{s}"
        );
    }
    let mut app = planned_app(name, Some(&a));
    key(&mut app, '6');
    let s = screen(&mut app, 120, 40);
    assert!(
        s.contains(&format!("MAX BATCH unknown (at most {at_most}): ")),
        "{s}"
    );
    assert!(s.contains(&format!("┊max ≤ {at_most}")), "{s}");
    for r in &p.predictions {
        let row = s
            .lines()
            .find(|l| l.starts_with(&format!("{} ", r.batch)))
            .unwrap_or_else(|| panic!("no row for batch {}\n{s}", r.batch));
        assert!(
            row.contains(&format!("≥ {}", bytes(r.peak_reserved_bytes))),
            "{row}"
        );
    }
    std::fs::write("/tmp/pv/leak_oom.txt", &s).ok();
}
