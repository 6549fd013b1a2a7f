//! The MCP transport in process, on seeded random sessions (the invariants of the `mcp_lines`
//! fuzz target, run by `cargo test`): valid messages, their mutations, bad bytes, overlong
//! lines, responses and odd ids, mixed. The server never panics, writes one JSON-RPC message
//! per line, echoes ids exactly as sent, and answers a final ping.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const MESSAGES: &[&str] = &[
    r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"roots":{}}}}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    r#"{"jsonrpc":"2.0","id":"memscope-roots-1","result":{"roots":[{"uri":"file:///nonexistent%20dir"}]}}"#,
    r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"analyze","arguments":{"path":"-"}}}"#,
    r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"check","arguments":{"paths":[]}}}"#,
    r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"query","arguments":{"path":"/etc/passwd","sql":"SELECT 1"}}}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}"#,
    r#"{"jsonrpc":"2.0","id":18446744073709551617,"method":"ping"}"#,
    r#"{"jsonrpc":"2.0","id":-1.5e3,"method":"ping"}"#,
    r#"{"jsonrpc":"2.0","id":"\ud83d\ude00","method":"nope"}"#,
    r#"{"jsonrpc":"2.0","id":7,"result":{}}"#,
    r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#,
    r#"[{"jsonrpc":"2.0","id":8,"method":"ping"}]"#,
    r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"plan","arguments":{"path":"x","batch":1e30}}}"#,
    "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"ping\",\"x\":\"\u{202e}\\u0000\"}",
];

fn session(rng: &mut Rng) -> Vec<u8> {
    let mut s = Vec::new();
    for _ in 0..rng.below(24) {
        let m = MESSAGES[rng.below(MESSAGES.len())].as_bytes();
        match rng.below(8) {
            0 => s.extend_from_slice(&m[..rng.below(m.len())]),
            1 => {
                let mut m = m.to_vec();
                let i = rng.below(m.len());
                m[i] = rng.next() as u8;
                s.extend_from_slice(&m);
            }
            2 => s.extend(std::iter::repeat_n(b'x', 5000 + rng.below(3000))),
            3 => s.extend((0..rng.below(40)).map(|_| rng.next() as u8)),
            _ => s.extend_from_slice(m),
        }
        s.extend_from_slice(if rng.below(10) == 0 { b"\r\n" } else { b"\n" });
    }
    s
}

#[test]
fn random_sessions_keep_the_protocol() {
    let root = std::env::temp_dir().join(format!("memscope-mcp37-empty-{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..300 {
        let mut input = session(&mut rng);
        input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":\"last\",\"method\":\"ping\"}\n");
        let cfg = Config {
            roots: vec![root.clone()],
            max_line: 4096,
            roots_wait: Duration::ZERO,
        };
        let out = Out::default();
        serve_with(&cfg, &input[..], out.clone()).unwrap();
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let mut last = false;
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(v["jsonrpc"], "2.0", "{line}");
            if let Some(id) = wire::raw_id(line) {
                let ours = id.starts_with("\"memscope-roots-");
                assert!(
                    id == "null" || ours || input.windows(id.len()).any(|w| w == id.as_bytes()),
                    "{id} was never sent: {}",
                    String::from_utf8_lossy(&input)
                );
            }
            last |= line == r#"{"jsonrpc":"2.0","id":"last","result":{}}"#;
        }
        assert!(last, "no answer to the last ping: {text}");
    }
}
