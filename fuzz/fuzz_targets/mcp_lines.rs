//! The MCP transport (`memscope::mcp`): any bytes as the client's stream, in one session, with
//! a small line cap so that overlong lines are common. The server must never panic or abort,
//! must answer every line it answers with one JSON-RPC message per line, and must echo each
//! request's id as the client wrote it. Tools run under a root that holds no file, so every
//! path a call names is refused without being read.
#![no_main]

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};

use libfuzzer_sys::fuzz_target;
use memscope::mcp::{serve_with, wire, Config};

#[derive(Clone, Default)]
struct Out(Arc<Mutex<Vec<u8>>>);

impl Write for Out {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    // The line reader alone, on tiny buffers: every line comes back whole or as TooLong.
    let mut r = std::io::BufReader::with_capacity(3, data);
    let mut total = 0u64;
    while let Some(l) = wire::read_line(&mut r, 64).unwrap() {
        total += match l {
            wire::Line::Bytes(b) => {
                assert!(b.len() <= 64);
                b.len() as u64 + 1
            }
            wire::Line::TooLong { len } => len + 1,
        };
    }
    assert!(total + 1 >= data.len() as u64);
    let mut rest = Vec::new();
    r.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());

    // A whole session.
    let root = std::env::temp_dir().join("memscope-fuzz-empty-root");
    let _ = std::fs::create_dir_all(&root);
    let cfg = Config {
        roots: vec![root],
        max_line: 4096,
        roots_wait: std::time::Duration::ZERO,
    };
    let out = Out::default();
    serve_with(&cfg, data, out.clone()).unwrap();
    let bytes = out.0.lock().unwrap().clone();
    let text = String::from_utf8(bytes).expect("replies are UTF-8");
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("each reply is JSON");
        assert_eq!(v["jsonrpc"], "2.0");
        if let Some(id) = wire::raw_id(line) {
            // The id is one the client wrote (or null, or the server's own roots request).
            let quoted = id.starts_with('"') && id.contains("memscope-roots-");
            assert!(
                id == "null" || quoted || data.windows(id.len()).any(|w| w == id.as_bytes()),
                "{id} was never sent"
            );
        }
    }
});
