//! The tools `memscope mcp` offers: `analyze`, `query`, `diff`, `check` and `plan`. Each takes
//! paths on this machine and returns memscope's typed JSON (the documents of `--format json`)
//! as `structuredContent`, with a short text. A failure (a file that is not a capture, bad
//! SQL) is a tool result with `isError`, so the model sees the message; an unknown tool or
//! malformed arguments are protocol errors.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::query::{render, Db};

/// What the server keeps between calls: the last capture opened for `query`, so that a
/// conversation of queries loads and analyses it once.
#[derive(Default)]
pub struct State {
    db: Option<(PathBuf, Option<std::time::SystemTime>, Db)>,
}

/// Rows a `query` returns unless `max_rows` says otherwise.
pub const DEFAULT_ROWS: usize = 200;

/// Every tool, with its input schema (JSON Schema).
pub fn list() -> Value {
    let path = json!({"type": "string", "description": "Path of a capture: a snapshot pickle (optionally .gz) or a profiler trace (.json, .json.gz)"});
    let tables: Vec<&str> = crate::query::schema::TABLES
        .iter()
        .map(|t| t.name)
        .collect();
    json!([
        {
            "name": "analyze",
            "title": "Analyze a capture",
            "description": "Analyze a PyTorch GPU memory capture: the verdict, each OOM with its cause and the line that made the failing request, leaks with the line to change, steps and peaks. Returns the memscope.report/1 JSON.",
            "inputSchema": {"type": "object", "properties": {"path": path}, "required": ["path"], "additionalProperties": false}
        },
        {
            "name": "query",
            "title": "SQL over a capture",
            "description": format!("Run read-only SQLite SQL over a capture's tables: {}. Sizes in bytes, times in µs; sites are file, line, function columns. Run `.schema` or `.schema TABLE` as the sql for the columns. Returns the rows as objects.", tables.join(", ")),
            "inputSchema": {"type": "object", "properties": {
                "path": path,
                "sql": {"type": "string", "description": "One SQL statement (or .schema, .tables)"},
                "max_rows": {"type": "integer", "minimum": 1, "description": format!("Rows to return at most (default {DEFAULT_ROWS})")}
            }, "required": ["path", "sql"], "additionalProperties": false}
        },
        {
            "name": "diff",
            "title": "Compare two captures",
            "description": "Compare two captures (or baseline summaries) of the same program: peaks, findings and sites that changed. Returns the memscope.diff JSON.",
            "inputSchema": {"type": "object", "properties": {
                "before": {"type": "string", "description": "The earlier capture or baseline"},
                "after": {"type": "string", "description": "The later capture"},
                "force": {"type": "boolean", "description": "Compare even captures of different kinds or devices"}
            }, "required": ["before", "after"], "additionalProperties": false}
        },
        {
            "name": "check",
            "title": "Gate captures on rules",
            "description": "Check captures against limits and findings, as CI does with `memscope check`: fails on OOMs, leaks and graph growth by default. Returns the check JSON with passed true or false.",
            "inputSchema": {"type": "object", "properties": {
                "paths": {"type": "array", "items": {"type": "string"}, "minItems": 1, "description": "Captures (ranks of one run are compared)"},
                "max_peak": {"type": "string", "description": "Largest allowed allocated peak, e.g. 40GiB"},
                "max_reserved": {"type": "string", "description": "Largest allowed reserved peak"},
                "max_growth_per_step": {"type": "string", "description": "Largest allowed growth per step"},
                "fail_on": {"type": "array", "items": {"type": "string", "enum": ["oom", "leak", "fragmentation", "graph-growth"]}, "description": "Findings that fail the check (default: oom, leak, graph-growth)"},
                "baseline": {"type": "string", "description": "A baseline file written by `memscope baseline`"}
            }, "required": ["paths"], "additionalProperties": false}
        },
        {
            "name": "plan",
            "title": "Plan batch sizes",
            "description": "Predict peak memory at other batch sizes (or sequence lengths) from a snapshot with an allocation history, and the largest batch that fits a cap. Returns the plan JSON.",
            "inputSchema": {"type": "object", "properties": {
                "path": path,
                "batch": {"type": "integer", "minimum": 1, "description": "The batch size the capture was recorded at"},
                "seq": {"type": "integer", "minimum": 1, "description": "The sequence length it was recorded at"},
                "at": {"type": "array", "items": {"type": "string"}, "description": "Shapes to predict: \"64\" or \"8x4096\" (default 2, 4 and 8 times the batch)"},
                "cap": {"type": "string", "description": "Memory cap, e.g. 80GiB (default: from the OOM or the device's size)"}
            }, "required": ["path", "batch"], "additionalProperties": false}
        }
    ])
}

type RpcError = (i64, String);

fn bad(m: impl Into<String>) -> RpcError {
    (-32602, m.into())
}

fn str_arg<'a>(args: &'a Value, k: &str) -> Result<&'a str, RpcError> {
    args.get(k)
        .and_then(Value::as_str)
        .ok_or_else(|| bad(format!("argument {k} (a string) is required")))
}

fn size_arg(args: &Value, k: &str) -> Result<Option<u64>, RpcError> {
    match args.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| bad(format!("{k}: a size"))),
        Some(Value::String(s)) => crate::units::parse_bytes(s)
            .map(Some)
            .ok_or_else(|| bad(format!("{k}: not a size: {s}"))),
        Some(_) => Err(bad(format!("{k}: a size such as 40GiB"))),
    }
}

/// A tool's answer: its typed JSON and a short text.
struct Answer {
    json: Value,
    text: String,
}

/// `tools/call`.
pub fn call(state: &mut State, params: &Value) -> Result<Value, RpcError> {
    let name = str_arg(params, "name")?;
    let args = params.get("arguments").cloned().unwrap_or(json!({}));
    if !args.is_object() {
        return Err(bad("arguments must be an object"));
    }
    let r = match name {
        "analyze" => analyze(&args)?,
        "query" => query(state, &args)?,
        "diff" => diff(&args)?,
        "check" => check(&args)?,
        "plan" => plan(&args)?,
        other => return Err(bad(format!("unknown tool: {other}"))),
    };
    Ok(match r {
        Ok(a) => json!({
            "content": [{"type": "text", "text": a.text}],
            "structuredContent": a.json,
            "isError": false
        }),
        Err(msg) => json!({
            "content": [{"type": "text", "text": msg}],
            "isError": true
        }),
    })
}

/// A tool's outcome: an answer, or a failure the model reads (`isError`).
type Outcome = Result<Result<Answer, String>, RpcError>;

fn rendered(f: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> Result<Value, String> {
    let mut buf = Vec::new();
    f(&mut buf).map_err(|e| e.to_string())?;
    serde_json::from_slice(&buf).map_err(|e| e.to_string())
}

fn text_of(f: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> String {
    let mut buf = Vec::new();
    let _ = f(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

fn analyze(args: &Value) -> Outcome {
    use crate::load::Capture;
    use crate::report::Format;
    let path = Path::new(str_arg(args, "path")?);
    let inner = || -> Result<Answer, String> {
        let progress = crate::load::Progress::default();
        let cap = crate::load::load_with_progress(path, &progress).map_err(|e| e.to_string())?;
        let len = progress.stored.load(std::sync::atomic::Ordering::Relaxed) as u64;
        let analysis = match &cap {
            Capture::Snapshot(s) => crate::analysis::analyze_snapshot(s, path, len).analysis,
            Capture::Trace(t) => crate::analysis::analyze_trace(t, path, len),
        };
        let opts = crate::report::Options::default();
        let json = rendered(|b| crate::report::json::Json.render(&analysis, &opts, b))?;
        Ok(Answer {
            text: analyze_text(&json),
            json,
        })
    };
    Ok(inner())
}

/// The verdict, the last OOM and the leaks, in a few lines, from the report's JSON.
fn analyze_text(j: &Value) -> String {
    let s = |v: &Value| v.as_str().unwrap_or("").to_owned();
    let mut t = format!(
        "verdict: {}: {}\n",
        s(&j["verdict"]["kind"]),
        s(&j["verdict"]["summary"])
    );
    for d in j["devices"].as_array().into_iter().flatten() {
        for o in d["ooms"].as_array().into_iter().flatten() {
            let site = &o["site"];
            t.push_str(&format!(
                "OOM on cuda:{} at event {}: cause {}, requested {} bytes{}\n",
                d["device"],
                o["event"],
                s(&o["cause"]),
                o["requested_bytes"],
                if site.is_object() {
                    format!(
                        " at {}:{} in {}",
                        s(&site["file"]),
                        site["line"],
                        s(&site["function"])
                    )
                } else {
                    String::new()
                }
            ));
        }
    }
    for l in j["leaks"].as_array().into_iter().flatten() {
        let site = &l["site"];
        t.push_str(&format!(
            "leak on cuda:{}: {} ({} confidence), {} bytes live{}\n",
            l["device"],
            s(&l["kind"]),
            s(&l["confidence"]),
            l["live_bytes"],
            if site.is_object() {
                format!(
                    ", line to change {}:{} in {}",
                    s(&site["file"]),
                    site["line"],
                    s(&site["function"])
                )
            } else {
                String::new()
            }
        ));
    }
    t.push_str("The full report is in structuredContent; use the query tool for details.\n");
    t
}

fn open_cached<'a>(state: &'a mut State, path: &Path) -> Result<&'a Db, String> {
    let mtime = std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let fresh = matches!(&state.db, Some((p, m, _)) if p == path && *m == mtime && mtime.is_some());
    if !fresh {
        state.db = None;
        let db = crate::query::open_capture(path).map_err(|e| e.to_string())?;
        state.db = Some((path.to_owned(), mtime, db));
    }
    Ok(&state.db.as_ref().expect("just opened").2)
}

fn query(state: &mut State, args: &Value) -> Outcome {
    let path = Path::new(str_arg(args, "path")?);
    let sql = str_arg(args, "sql")?;
    let max = match args.get("max_rows") {
        None | Some(Value::Null) => DEFAULT_ROWS,
        Some(v) => v
            .as_u64()
            .filter(|&n| n > 0)
            .ok_or_else(|| bad("max_rows: a positive integer"))? as usize,
    };
    let db = match open_cached(state, path) {
        Ok(db) => db,
        Err(e) => return Ok(Err(e)),
    };
    if let Some(text) = db.dot(sql) {
        return Ok(Ok(Answer {
            json: json!({"text": text}),
            text,
        }));
    }
    Ok(match db.run(sql, Some(max)) {
        Ok(rs) => Ok(Answer {
            json: json!({
                "columns": rs.columns,
                "rows": render::json(&rs),
                "truncated": rs.truncated,
            }),
            text: render::table(&rs),
        }),
        Err(e) => Err(format!("SQL error: {e}")),
    })
}

fn one_summary(p: &Path) -> Result<crate::check::InputSummary, String> {
    let mut v = crate::inputs::load_summaries(&[p], true).map_err(|e| e.to_string())?;
    match v.len() {
        1 => Ok(v.remove(0)),
        n => Err(format!(
            "{}: holds {n} inputs; diff compares one with one",
            p.display()
        )),
    }
}

fn diff(args: &Value) -> Outcome {
    use crate::report::check::DiffFormat;
    let before = Path::new(str_arg(args, "before")?);
    let after = Path::new(str_arg(args, "after")?);
    let force = args.get("force").and_then(Value::as_bool).unwrap_or(false);
    let inner = || -> Result<Answer, String> {
        let (b, a) = (one_summary(before)?, one_summary(after)?);
        if !force {
            crate::check::diff::comparable(&b, &a).map_err(|e| e.to_string())?;
        }
        let mut d = crate::check::diff::diff(&b, &a);
        d.before = before.display().to_string();
        d.after = after.display().to_string();
        let opts = crate::report::Options::default();
        let json = rendered(|w| crate::report::check::DiffJson.render(&d, &opts, w))?;
        let text = text_of(|w| crate::report::check::DiffText.render(&d, &opts, w));
        Ok(Answer { json, text })
    };
    Ok(inner())
}

fn check(args: &Value) -> Outcome {
    use crate::check::config::FailOn;
    use crate::check::CheckConfig;
    use crate::report::check::CheckFormat;
    let paths: Vec<PathBuf> = args
        .get("paths")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("argument paths (an array of strings) is required"))?
        .iter()
        .map(|p| {
            p.as_str()
                .map(PathBuf::from)
                .ok_or_else(|| bad("paths: strings"))
        })
        .collect::<Result<_, _>>()?;
    let fail_on = match args.get("fail_on").and_then(Value::as_array) {
        Some(v) => Some(
            v.iter()
                .map(|f| {
                    f.as_str()
                        .ok_or_else(|| bad("fail_on: strings"))
                        .and_then(|s| FailOn::parse(s).map_err(|e| bad(e.to_string())))
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
        None => None,
    };
    let cfg = CheckConfig {
        baseline: args
            .get("baseline")
            .and_then(Value::as_str)
            .map(PathBuf::from),
        max_peak: size_arg(args, "max_peak")?,
        max_reserved: size_arg(args, "max_reserved")?,
        max_growth_per_step: size_arg(args, "max_growth_per_step")?,
        fail_on,
        ..Default::default()
    };
    let inner = || -> Result<Answer, String> {
        if cfg.checks_nothing() {
            return Err(
                "no rule to check: fail_on is empty and no limit or baseline is set".into(),
            );
        }
        let base = match &cfg.baseline {
            Some(p) => {
                let input = crate::load::read_input(p).map_err(|e| e.to_string())?;
                let text = std::str::from_utf8(&input)
                    .map_err(|_| format!("{}: the baseline is not UTF-8 JSON", p.display()))?;
                let b = crate::check::Baseline::from_json(text)
                    .map_err(|e| format!("{}: {e}", p.display()))?;
                Some((p.display().to_string(), b))
            }
            None => None,
        };
        let summaries = crate::inputs::load_summaries(&paths, true).map_err(|e| e.to_string())?;
        let ranks = vec![None; summaries.len()];
        let report = crate::check::check(
            &summaries,
            &ranks,
            &cfg,
            base.as_ref().map(|(p, b)| (p.as_str(), b)),
        )
        .map_err(|e| e.to_string())?;
        let opts = crate::report::Options::default();
        let json = rendered(|w| crate::report::check::CheckJson.render(&report, &opts, w))?;
        let text = text_of(|w| crate::report::check::CheckText.render(&report, &opts, w));
        Ok(Answer { json, text })
    };
    Ok(inner())
}

fn shape(s: &str) -> Result<(u64, Option<u64>), RpcError> {
    let num = |t: &str| t.trim().parse::<u64>().ok().filter(|&n| n > 0);
    match s.split_once(['x', 'X']) {
        Some((b, q)) => match (num(b), num(q)) {
            (Some(b), Some(q)) => Ok((b, Some(q))),
            _ => Err(bad(format!("at: not a shape: {s}"))),
        },
        None => num(s)
            .map(|b| (b, None))
            .ok_or_else(|| bad(format!("at: not a shape: {s}"))),
    }
}

fn plan(args: &Value) -> Outcome {
    use crate::analysis::plan::{self, Ask, Shape};
    use crate::report::plan::{PlanDoc, PlanFormat};
    let path = Path::new(str_arg(args, "path")?);
    let batch = args
        .get("batch")
        .and_then(Value::as_u64)
        .filter(|&b| b > 0)
        .ok_or_else(|| bad("argument batch (a positive integer) is required"))?;
    let seq = args.get("seq").and_then(Value::as_u64);
    let at = match args.get("at").and_then(Value::as_array) {
        Some(v) => v
            .iter()
            .map(|s| s.as_str().ok_or_else(|| bad("at: strings")).and_then(shape))
            .collect::<Result<Vec<_>, _>>()?,
        None => Vec::new(),
    };
    let cap = size_arg(args, "cap")?;
    let inner = || -> Result<Answer, String> {
        let conf = crate::analysis::whatif::parse_alloc_conf("").map_err(|e| e.to_string())?;
        let ask = Ask::new(Shape { batch, seq }, &at, cap, conf).map_err(|e| e.to_string())?;
        let (snap, len) = crate::load::load_snapshot_sized(path).map_err(|e| e.to_string())?;
        let analyzed = crate::analysis::analyze_snapshot(&snap, path, len);
        let plans = plan::plan(&snap, &analyzed, &ask, None).map_err(|e| e.to_string())?;
        let file = path.display().to_string();
        let doc = PlanDoc {
            file: &file,
            other: None,
            plans: &plans,
        };
        let json = rendered(|w| crate::report::plan::json::Json.render(&doc, false, w))?;
        let text = text_of(|w| crate::report::plan::text::Text.render(&doc, false, w));
        Ok(Answer { json, text })
    };
    Ok(inner())
}
