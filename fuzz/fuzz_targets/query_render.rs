//! `memscope query`'s renderers (`memscope::query::render`): any result set made from the
//! bytes, streamed through the table, CSV (defused, raw, for a terminal) and JSON sinks, keeps
//! each format's invariant (`query_render_check.rs`, also run by `tests/it/query_bounds.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "query_render_check.rs"]
mod query_render_check;

fuzz_target!(|data: &[u8]| {
    if let Some(rs) = query_render_check::result_set(data) {
        query_render_check::check(&rs);
    }
});
