//! The Chrome trace loader, the trace analysis and the TUI's trace views: any bytes load (maybe
//! with notes) or give an error, and what loads analyses and renders every view, drilled in,
//! without a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memscope::tui::{Action, App, Loaded, TraceData};
use ratatui::backend::TestBackend;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz.json");
    let Ok(trace) = memscope::load::trace_from_bytes(path, data) else {
        return;
    };
    let t = TraceData::from_trace(path, trace, data.len() as u64);
    let _ = serde_json::to_string(&t.analysis).expect("the report serialises");
    let mut app = App::with(Loaded::Trace(t));
    app.apply(Action::Resize(80, 24));
    let mut term = ratatui::Terminal::new(TestBackend::new(80, 24)).unwrap();
    let seqs: [&[Action]; 8] = [
        &[Action::Tab(0), Action::Enter],
        &[Action::Tab(1), Action::Peak, Action::NextMarker, Action::AllocEvent],
        &[Action::Tab(1), Action::TimeAxisToggle, Action::Click(40, 10), Action::Enter],
        &[Action::Tab(2), Action::Down, Action::Enter, Action::SortToggle],
        &[Action::Tab(2), Action::Enter, Action::Enter, Action::Down, Action::Enter],
        &[Action::Tab(3), Action::Enter],
        &[Action::Tab(4), Action::Enter, Action::Enter],
        &[Action::NextDevice, Action::Tab(1), Action::ZoomIn, Action::Right],
    ];
    for seq in seqs {
        for &a in seq {
            app.apply(a);
        }
        term.draw(|f| f.render_widget(&app, f.area())).unwrap();
        for _ in 0..3 {
            app.apply(Action::Back);
        }
    }
});
