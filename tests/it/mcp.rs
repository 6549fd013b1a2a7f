//! `memscope mcp` driven as an MCP client drives it: a scripted JSON-RPC session over the real
//! binary's stdio (initialize, the initialized notification, tools/list, tools/call of every
//! tool), checked against an independent reading of the capture (serde-pickle).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{json, Value};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

struct Session {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: i64,
}

impl Session {
    fn start() -> Session {
        let mut child = Command::new(env!("CARGO_BIN_EXE_memscope"))
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        Session {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
            next: 1,
        }
    }
    fn send(&mut self, msg: &Value) {
        writeln!(self.stdin, "{msg}").unwrap();
        self.stdin.flush().unwrap();
    }
    fn recv(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let r = self.recv();
        assert_eq!(r["jsonrpc"], "2.0");
        assert_eq!(r["id"], id, "{r}");
        r
    }
    fn call(&mut self, tool: &str, args: Value) -> Value {
        let r = self.request("tools/call", json!({"name": tool, "arguments": args}));
        assert!(r["error"].is_null(), "{r}");
        r["result"].clone()
    }
}

/// The `oom` entry of the first device's log, as serde-pickle reads the file: its index, size.
fn oom_entry(name: &str) -> (i64, i64) {
    use serde_pickle::{HashableValue as H, Value as V};
    let data = std::fs::read(fixture(name)).unwrap();
    let v = serde_pickle::value_from_slice(
        &data,
        serde_pickle::DeOptions::new().replace_recursive_structures(),
    )
    .unwrap();
    let get = |v: &V, k: &str| match v {
        V::Dict(d) => d.get(&H::String(k.into())).cloned().unwrap_or(V::None),
        _ => V::None,
    };
    let V::List(traces) = get(&v, "device_traces") else {
        panic!()
    };
    let V::List(t) = &traces[0] else { panic!() };
    let (i, e) = t
        .iter()
        .enumerate()
        .find(|(_, e)| get(e, "action") == V::String("oom".into()))
        .unwrap();
    let V::I64(size) = get(e, "size") else {
        panic!()
    };
    (i as i64, size)
}

#[test]
fn an_agent_debugs_an_oom_over_mcp() {
    let mut s = Session::start();
    let init = s.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}),
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(init["result"]["serverInfo"]["name"], "memscope");
    assert!(init["result"]["capabilities"]["tools"].is_object());
    // A notification gets no answer: the next line read is the next request's.
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    let list = s.request("tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["analyze", "query", "diff", "check", "plan"]);
    for t in tools {
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
        assert!(t["inputSchema"]["required"].is_array(), "{t}");
        assert!(!t["description"].as_str().unwrap().is_empty());
    }

    let f = fixture("leak_oom.pickle");
    let (event, size) = oom_entry("leak_oom.pickle");
    let a = s.call("analyze", json!({"path": f}));
    assert_eq!(a["isError"], false);
    let report = &a["structuredContent"];
    assert_eq!(report["schema"], "memscope.report/1");
    assert_eq!(report["verdict"]["kind"], "oom_leak");
    let ooms = report["devices"][0]["ooms"].as_array().unwrap();
    assert_eq!(ooms.len(), 1);
    assert_eq!(ooms[0]["event"], event);
    assert_eq!(ooms[0]["requested_bytes"], size);
    assert_eq!(ooms[0]["cause"], "leak");
    let text = a["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains(&format!(
            "OOM on cuda:0 at event {event}: cause leak, requested {size} bytes"
        )),
        "{text}"
    );
    assert!(text.contains("retained_graph"), "{text}");

    // Then asks what the report does not say: what was live at the OOM, by line.
    let q = s.call(
        "query",
        json!({"path": f, "sql": "SELECT l.line, SUM(l.size) AS bytes FROM ooms o JOIN live l ON l.moment = 'oom' AND l.at_event = o.event GROUP BY l.line ORDER BY bytes DESC", "max_rows": 2}),
    );
    assert_eq!(q["isError"], false, "{q}");
    let rows = q["structuredContent"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(q["structuredContent"]["truncated"], true);
    assert_eq!(rows[0]["line"], 150);
    assert_eq!(q["structuredContent"]["columns"], json!(["line", "bytes"]));
    let q = s.call(
        "query",
        json!({"path": f, "sql": "SELECT event, requested_bytes FROM ooms"}),
    );
    assert_eq!(
        q["structuredContent"]["rows"],
        json!([{"event": event, "requested_bytes": size}])
    );
    let schema = s.call("query", json!({"path": f, "sql": ".schema ooms"}));
    assert!(schema["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("CREATE TABLE ooms"));
    // A mistake is the tool's error, for the model to read; the database stays read-only.
    let bad = s.call("query", json!({"path": f, "sql": "SELEC 1"}));
    assert_eq!(bad["isError"], true);
    assert!(bad["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("SQL error"));
    let write = s.call("query", json!({"path": f, "sql": "DELETE FROM ooms"}));
    assert_eq!(write["isError"], true);
    let missing = s.call("analyze", json!({"path": fixture("no_such.pickle")}));
    assert_eq!(missing["isError"], true);

    let c = s.call("check", json!({"paths": [f]}));
    assert_eq!(c["isError"], false, "{c}");
    assert_eq!(c["structuredContent"]["passed"], false);
    let c = s.call(
        "check",
        json!({"paths": [fixture("clean.pickle")], "fail_on": ["oom"]}),
    );
    assert_eq!(c["structuredContent"]["passed"], true, "{c}");

    let d = s.call(
        "diff",
        json!({"before": fixture("wi_leak_default.pickle"), "after": fixture("wi_leak_expandable.pickle")}),
    );
    assert_eq!(d["isError"], false, "{d}");
    assert!(
        d["structuredContent"]["schema"]
            .as_str()
            .unwrap()
            .starts_with("memscope.diff"),
        "{d}"
    );

    let p = s.call(
        "plan",
        json!({"path": fixture("plan/mlp_b256.pickle.gz"), "batch": 256, "at": ["512"]}),
    );
    assert_eq!(p["isError"], false, "{p}");
    assert!(p["structuredContent"].is_object(), "{p}");

    // Protocol errors.
    let e = s.request("no/such", json!({}));
    assert_eq!(e["error"]["code"], -32601);
    let e = s.request("tools/call", json!({"name": "nope", "arguments": {}}));
    assert_eq!(e["error"]["code"], -32602);
    let e = s.request(
        "tools/call",
        json!({"name": "query", "arguments": {"path": "x"}}),
    );
    assert_eq!(e["error"]["code"], -32602);
    assert_eq!(s.request("ping", json!({}))["result"], json!({}));
    writeln!(s.stdin, "{{not json").unwrap();
    assert_eq!(s.recv()["error"]["code"], -32700);

    drop(s.stdin);
    assert!(s.child.wait().unwrap().success());
}

#[test]
fn an_unknown_protocol_version_gets_the_servers() {
    let mut s = Session::start();
    let init = s.request(
        "initialize",
        json!({"protocolVersion": "1999-01-01", "capabilities": {}}),
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
}

/// The official MCP Python SDK's client against the binary (tests/python/mcp_client.py, which
/// asserts the OOM is found and a write refused). Needs `pip install mcp` in a virtualenv:
/// `MEMSCOPE_MCP_PYTHON=/path/to/venv/bin/python cargo test --test it mcp:: -- --ignored`.
#[test]
#[ignore = "needs the `mcp` Python package: set MEMSCOPE_MCP_PYTHON to a virtualenv's python"]
fn the_python_sdk_client_debugs_an_oom() {
    let py = std::env::var("MEMSCOPE_MCP_PYTHON").expect("MEMSCOPE_MCP_PYTHON");
    let out = Command::new(py)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/mcp_client.py"))
        .arg(env!("CARGO_BIN_EXE_memscope"))
        .arg(fixture("leak_oom.pickle"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("OOM on cuda:0 at event 3654"), "{text}");
}
