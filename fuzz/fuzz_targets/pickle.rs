//! The pickle reader alone: any bytes either decode or give an error; never a panic, never
//! unbounded work. A decoded pickle is walked with every accessor (iteratively: it may be cyclic).
#![no_main]

use libfuzzer_sys::fuzz_target;
use memscope::load::pickle::{self, Value};

fuzz_target!(|data: &[u8]| {
    let Ok(p) = pickle::parse(data) else { return };
    // Visit each reachable container once (memo references can make cycles).
    let mut seen = std::collections::HashSet::new();
    let mut todo = vec![p.root()];
    while let Some(v) = todo.pop() {
        let _ = p.describe(v);
        let _ = p.str(v);
        let _ = p.raw_bytes(v);
        let _ = p.bigint_bytes(v);
        let _ = p.bigint_as_u64(v);
        let _ = p.int(v);
        let _ = p.float(v);
        match v {
            Value::List(id) | Value::Tuple(id) | Value::Set(id) | Value::Dict(id) => {
                if !seen.insert(id) {
                    continue;
                }
            }
            _ => continue,
        }
        if let Some(items) = p.seq(v) {
            todo.extend_from_slice(items);
        }
        if let Some(pairs) = p.dict(v) {
            for &(k, x) in pairs {
                todo.push(k);
                todo.push(x);
            }
            let _ = p.get(v, "segments");
        }
    }
});
