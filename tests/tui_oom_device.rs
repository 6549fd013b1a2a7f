//! The device that ran out of memory comes first in the TUI (issue 23): it opens on it, and `o`
//! on another device moves there. Only one GPU is lent, so the two-device capture is made from a
//! real one: `fixtures/leak_oom.pickle`'s device, once as cuda:1 (with its OOM) and once as
//! cuda:0 with its OOM entry removed (the same allocations, no OOM).

mod common;

use std::path::Path;

use memscope::model::Action;
use memscope::tui::data::Data;
use memscope::tui::{App, Loaded};

fn two_devices() -> App {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/leak_oom.pickle");
    let len = std::fs::metadata(&p).unwrap().len();
    let mut snap = memscope::load::load_snapshot(&p).unwrap();
    let mut quiet = snap.devices[0].clone();
    quiet.index = 0;
    quiet.events.retain(|e| e.action != Action::Oom);
    let mut oom = snap.devices[0].clone();
    oom.index = 1;
    snap.devices = vec![quiet, oom];
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
