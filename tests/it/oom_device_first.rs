//! The device that ran out of memory comes first (issue 23): the TUI opens on it and `o` on
//! another device moves there; the HTML report shows its section first. Only one GPU is lent, so the two-device capture is made from a
//! real one: `fixtures/leak_oom.pickle`'s device, once as cuda:1 (with its OOM) and once as
//! cuda:0 with its OOM entry removed (the same allocations, no OOM).

use crate::common;

use std::path::Path;

use memscope::model::Action;
use memscope::tui::data::Data;
use memscope::tui::{App, Loaded};

fn two_device_snapshot() -> (std::path::PathBuf, memscope::model::Snapshot, u64) {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/leak_oom.pickle");
    let len = std::fs::metadata(&p).unwrap().len();
    let mut snap = memscope::load::load_snapshot(&p).unwrap();
    let mut quiet = snap.devices[0].clone();
    quiet.index = 0;
    quiet.events.retain(|e| e.action != Action::Oom);
    let mut oom = snap.devices[0].clone();
    oom.index = 1;
    snap.devices = vec![quiet, oom];
    (p, snap, len)
}

fn two_devices() -> App {
    let (p, snap, len) = two_device_snapshot();
    let mut app = App::with(Loaded::Snapshot(Data::from_snapshot(&p, snap, len)));
    app.set_path("two_devices.pickle".to_owned());
    app
}

fn status(screen: &str) -> String {
    screen.lines().last().unwrap_or("").to_owned()
}

#[test]
fn the_tui_opens_on_the_device_that_ran_out_of_memory() {
    let mut app = two_devices();
    let s = common::screen(&mut app, 120, 40);
    assert!(status(&s).contains("cuda:1"), "{}", status(&s));
}

#[test]
fn o_on_a_device_without_an_oom_moves_to_the_one_that_has_it() {
    let mut app = two_devices();
    common::key(&mut app, 'd');
    let s = common::screen(&mut app, 120, 40);
    assert!(status(&s).contains("cuda:0"), "{}", status(&s));
    common::key(&mut app, 'o');
    // What the status line says after the key (the next resize clears it).
    assert!(
        app.message().contains("the OOM is on cuda:1"),
        "{}",
        app.message()
    );
    let s = common::screen(&mut app, 120, 40);
    assert!(status(&s).contains("cuda:1"), "{}", status(&s));
    // The cursor is on the OOM (event 3654 of leak_oom.pickle's log).
    assert!(s.contains("oom 16.0 MiB"), "{s}");
}

#[test]
fn the_html_report_shows_the_oom_device_first() {
    let (p, snap, len) = two_device_snapshot();
    let a = memscope::analysis::analyze_snapshot(&snap, &p, len);
    let h = memscope::report::html::Html {
        snap: &snap,
        product: &a,
        extra: "",
    };
    let html = memscope::report::to_string(&h, &a, &memscope::report::Options::default());
    let one = html
        .find(r#"<section id="memory-1""#)
        .expect("cuda:1's section");
    let zero = html
        .find(r#"<section id="memory-0""#)
        .expect("cuda:0's section");
    assert!(one < zero, "cuda:1, which ran out of memory, comes first");
}
