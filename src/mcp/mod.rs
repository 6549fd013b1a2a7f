//! `memscope mcp`: a Model Context Protocol server over stdio, so that an agent can debug an
//! OOM with memscope's own analyses instead of writing Python over the pickle.
//!
//! A small JSON-RPC 2.0 loop (the MCP spec, revision 2025-06-18, stdio transport: one message
//! per line, nothing else on stdout) rather than the `rmcp` SDK, whose async runtime and
//! schema macros would more than double this crate's dependencies for five tools. It answers
//! `initialize`, `ping`, `tools/list` and `tools/call`; notifications get no answer. Each tool
//! ([`tools`]) returns the typed JSON memscope writes with `--format json` as
//! `structuredContent`, and a short text for the model to read first.

pub mod tools;

use std::io::{BufRead, Write};

use serde_json::{json, Value};

/// The protocol revisions this server speaks, newest first.
pub const PROTOCOL_VERSIONS: [&str; 3] = ["2025-06-18", "2025-03-26", "2024-11-05"];

/// Serves requests from `input` until it ends, answering on `output`.
pub fn serve(input: impl BufRead, mut output: impl Write) -> std::io::Result<()> {
    let mut state = tools::State::default();
    for line in input.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        if let Some(reply) = handle(&mut state, &line) {
            let mut text = serde_json::to_string(&reply).expect("JSON of a reply");
            text.push('\n');
            output.write_all(text.as_bytes())?;
            output.flush()?;
        }
    }
    Ok(())
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// The answer to one message (`None` for a notification).
pub fn handle(state: &mut tools::State, line: &str) -> Option<Value> {
    let msg: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => return Some(error(Value::Null, -32700, &format!("parse error: {e}"))),
    };
    let Some(obj) = msg.as_object() else {
        return Some(error(Value::Null, -32600, "a request is a JSON object"));
    };
    let method = obj.get("method").and_then(Value::as_str);
    let Some(id) = obj.get("id").cloned() else {
        // A notification (`notifications/initialized`, `notifications/cancelled`), or a
        // response to a request this server never makes: nothing to answer.
        return None;
    };
    let Some(method) = method else {
        return Some(error(id, -32600, "a request needs a method"));
    };
    let params = obj.get("params").cloned().unwrap_or(json!({}));
    let result = match method {
        "initialize" => Ok(initialize(&params)),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(json!({"tools": tools::list()})),
        "tools/call" => tools::call(state, &params),
        other => Err((-32601, format!("method not found: {other}"))),
    };
    Some(match result {
        Ok(r) => json!({"jsonrpc": "2.0", "id": id, "result": r}),
        Err((code, m)) => error(id, code, &m),
    })
}

fn initialize(params: &Value) -> Value {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = asked
        .filter(|v| PROTOCOL_VERSIONS.contains(v))
        .unwrap_or(PROTOCOL_VERSIONS[0]);
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {"name": "memscope", "title": "memscope", "version": env!("CARGO_PKG_VERSION")},
        "instructions": "memscope reads PyTorch GPU memory captures (snapshot pickles from torch.cuda.memory._dump_snapshot, profiler traces) without running them. Start with analyze on the capture: its verdict, OOMs with causes, leaks and steps. Use query (SQL, tables listed by query's description and `.schema`) for what the report does not answer, diff to compare two captures, check to gate on limits, plan to size a batch."
    })
}
