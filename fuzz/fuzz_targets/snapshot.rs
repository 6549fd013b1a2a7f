//! The whole snapshot path as `memscope analyze` runs it: sniff, pickle, snapshot model,
//! replay and every analysis, then the text (with stacks) and JSON reports.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memscope::report::{self, Render};
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz.pickle");
    let Ok(snap) = memscope::load::snapshot_from_bytes(path, data) else {
        return;
    };
    let analysis = memscope::analysis::analyze_snapshot(&snap, path, data.len() as u64);
    for stacks in [false, true] {
        let opts = report::Options {
            color: stacks,
            stacks,
        };
        let mut out = Vec::new();
        report::text::Text
            .render(&analysis, &opts, &mut out)
            .expect("rendering to memory");
        out.clear();
        report::json::Json
            .render(&analysis, &opts, &mut out)
            .expect("rendering to memory");
        serde_json::from_slice::<serde_json::Value>(&out).expect("the JSON report parses");
    }
});
