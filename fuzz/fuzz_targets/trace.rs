//! The Chrome trace loader: any bytes load (maybe with notes) or give an error; never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let _ = memscope::load::trace_from_bytes(Path::new("fuzz.json"), data);
});
