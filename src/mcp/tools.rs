//! The tools `memscope mcp` offers: `analyze`, `query`, `diff`, `check` and `plan`. Each takes
//! paths on this machine and returns memscope's typed JSON (the documents of `--format json`)
//! as `structuredContent`, with a short text. A failure (a file that is not a capture, bad
//! SQL) is a tool result with `isError`, so the model sees the message; an unknown tool or
//! malformed arguments (anything the tool's `inputSchema` refuses) are protocol errors.
//!
//! Every path goes through the roots ([`super::paths`]) before a loader sees it, and every
//! loader error is rephrased by [`super::safe`]; every capture string in a tool's text is a
//! quoted literal.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use serde_json::{json, Value};

use super::paths::Roots;
use super::safe::quoted;
use crate::query::Db;

/// What the server keeps between calls: the last capture opened for `query`, so that a
/// conversation of queries loads and analyses it once. It is keyed by the file's identity
/// ([`Identity`]), not its name and modification time: `cp -p` over it is a new file.
#[derive(Default)]
pub struct State {
    db: Option<(Identity, Db)>,
}

/// A file's identity: device, inode, size, and modification and status-change times in ns
/// (the status-change time moves on every write, and no user can set it back).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl Identity {
    #[cfg(unix)]
    pub fn of(path: &Path) -> Option<Identity> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).ok()?;
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Some(Identity {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: ns(m.mtime(), m.mtime_nsec()),
            ctime_ns: ns(m.ctime(), m.ctime_nsec()),
        })
    }

    #[cfg(not(unix))]
    pub fn of(_: &Path) -> Option<Identity> {
        None
    }
}

/// A call's cancellation: set by `notifications/cancelled` (or the client leaving), with the
/// hook that stops the work in flight (a query's interrupt).
#[derive(Default)]
pub struct Cancel {
    flag: AtomicBool,
    hook: Mutex<Option<Box<dyn Fn() + Send>>>,
}

impl Cancel {
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::SeqCst);
        if let Some(h) = self.hook.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            h();
        }
    }

    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// Runs `hook` on cancel (at once if the call is cancelled already), until [`Self::clear`].
    pub fn on_cancel(&self, hook: Box<dyn Fn() + Send>) {
        let mut h = self.hook.lock().unwrap_or_else(|e| e.into_inner());
        if self.is_cancelled() {
            hook();
        }
        *h = Some(hook);
    }

    pub fn clear(&self) {
        *self.hook.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// What a call runs under.
pub struct Ctx<'a> {
    pub roots: &'a Roots,
    pub cancel: &'a Cancel,
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
            "description": "Analyze a PyTorch GPU memory capture: the verdict, each OOM with its cause and the line that made the failing request, leaks with the line to change, steps and peaks. Returns the memscope.report/1 JSON. Given a directory of one job's captures (one per rank), returns the job view, memscope.job/1: each rank's peaks, end figures, OOMs and leaks, the rank that peaked, and the imbalance (max/min and spread, over each rank's peak allocated bytes).",
            "inputSchema": {"type": "object", "properties": {"path": {"type": "string", "description": "Path of a capture: a snapshot pickle (optionally .gz) or a profiler trace (.json, .json.gz); or a directory of one job's captures, one per rank"}}, "required": ["path"], "additionalProperties": false}
        },
        {
            "name": "query",
            "title": "SQL over a capture",
            "description": format!("Run read-only SQLite SQL over a capture's tables: {}. Sizes in bytes, times in µs; sites are file, line, function columns. Run `.schema` or `.schema TABLE` as the sql for the columns. Returns the rows as objects.", tables.join(", ")),
            "inputSchema": {"type": "object", "properties": {
                "path": path,
                "sql": {"type": "string", "description": "One SQL statement (or .schema, .tables)"},
                "max_rows": {"type": "integer", "minimum": 1, "maximum": MAX_ROWS, "description": format!("Rows to return at most (default {DEFAULT_ROWS}, at most {MAX_ROWS})")}
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
                "paths": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 1024, "description": "Captures, or directories of one job's captures (ranks of one run are compared)"},
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
                "batch": {"type": "integer", "minimum": 1, "maximum": crate::units::MAX_SHAPE, "description": "The batch size the capture was recorded at"},
                "seq": {"type": "integer", "minimum": 1, "maximum": crate::units::MAX_SHAPE, "description": "The sequence length it was recorded at"},
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

/// Checks `args` against a tool's `inputSchema` (the keywords [`list`] uses: `type`,
/// `required`, `additionalProperties`, `items`, `minItems`, `maxItems`, `minimum`, `maximum`, `enum`), so
/// that what the schema promises the client is what the server enforces.
fn validate(schema: &Value, v: &Value, at: &str) -> Result<(), RpcError> {
    let ty = schema["type"].as_str().unwrap_or("");
    let ok = match ty {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "integer" => v.is_u64() || v.is_i64(),
        _ => true,
    };
    if !ok {
        return Err(bad(format!("{at}: must be of type {ty}")));
    }
    if let Some(e) = schema["enum"].as_array() {
        if !e.contains(v) {
            return Err(bad(format!("{at}: not one of the allowed values")));
        }
    }
    if let Some(n) = v.as_i64() {
        if schema["minimum"].as_i64().is_some_and(|m| n < m) {
            return Err(bad(format!(
                "{at}: below the minimum {}",
                schema["minimum"]
            )));
        }
    }
    if let Some(n) = v.as_u64() {
        if schema["maximum"].as_u64().is_some_and(|m| n > m) {
            return Err(bad(format!(
                "{at}: above the maximum {}",
                schema["maximum"]
            )));
        }
    }
    if let Some(items) = v.as_array() {
        let min = schema["minItems"].as_u64().unwrap_or(0);
        if (items.len() as u64) < min {
            return Err(bad(format!("{at}: needs at least {min} item(s)")));
        }
        if let Some(max) = schema["maxItems"].as_u64() {
            if items.len() as u64 > max {
                return Err(bad(format!("{at}: takes at most {max} items")));
            }
        }
        for (i, x) in items.iter().enumerate() {
            validate(&schema["items"], x, &format!("{at}[{i}]"))?;
        }
    }
    if let Some(obj) = v.as_object() {
        for r in schema["required"].as_array().into_iter().flatten() {
            let k = r.as_str().unwrap_or("");
            if !obj.contains_key(k) {
                return Err(bad(format!("argument {k} is required")));
            }
        }
        let props = &schema["properties"];
        for (k, x) in obj {
            match props.get(k) {
                Some(p) => validate(p, x, k)?,
                None if schema["additionalProperties"] == false => {
                    return Err(bad(format!("unknown argument {}", quoted(k))))
                }
                None => {}
            }
        }
    }
    Ok(())
}

fn str_arg<'a>(args: &'a Value, k: &str) -> Result<&'a str, RpcError> {
    args.get(k)
        .and_then(Value::as_str)
        .ok_or_else(|| bad(format!("argument {k} (a string) is required")))
}

fn size_arg(args: &Value, k: &str) -> Result<Option<u64>, RpcError> {
    match args.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => crate::units::parse_bytes(s)
            .map(Some)
            .ok_or_else(|| bad(format!("{k}: not a size: {}", quoted(s)))),
        Some(_) => Err(bad(format!("{k}: a size such as 40GiB"))),
    }
}

/// A tool's answer: its typed JSON and a short text.
struct Answer {
    json: Value,
    text: String,
}

/// `tools/call`.
pub fn call(state: &mut State, params: &Value, ctx: &Ctx) -> Result<Value, RpcError> {
    let name = str_arg(params, "name")?;
    let args = params.get("arguments").cloned().unwrap_or(json!({}));
    let tools = list();
    let Some(tool) = tools
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == name))
    else {
        return Err(bad(format!("unknown tool: {}", quoted(name))));
    };
    validate(&tool["inputSchema"], &args, "arguments")?;
    let r = match name {
        "analyze" => analyze(&args, ctx),
        "query" => query(state, &args, ctx),
        "diff" => diff(&args, ctx),
        "check" => check(&args, ctx),
        _ => plan(&args, ctx)?,
    };
    Ok(match r {
        Ok(a) => json!({
            "content": [{"type": "text", "text": crate::escape::term_text(&a.text)}],
            "structuredContent": a.json,
            "isError": false
        }),
        Err(msg) => json!({
            "content": [{"type": "text", "text": crate::escape::term_text(&msg)}],
            "isError": true
        }),
    })
}

/// A tool's outcome: an answer, or a failure the model reads (`isError`).
type Outcome = Result<Answer, String>;

fn rendered(f: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> Result<Value, String> {
    let mut buf = Vec::new();
    f(&mut buf).map_err(|e| e.to_string())?;
    serde_json::from_slice(&buf).map_err(|e| e.to_string())
}

/// The file a path argument names, if the roots admit it.
fn admitted(ctx: &Ctx, given: &str) -> Result<PathBuf, String> {
    ctx.roots.admit(given)
}

fn analyze(args: &Value, ctx: &Ctx) -> Outcome {
    use crate::report::Render;
    let given = str_arg(args, "path").map_err(|e| e.1)?;
    let path = match ctx.roots.admit_file_or_dir(given)? {
        super::paths::Admitted::File(p) => p,
        super::paths::Admitted::Dir(files) => return job(&files),
    };
    let opened = crate::load::open(&path).map_err(|e| super::safe::load_error(given, &e))?;
    let product = crate::analysis::analyze(opened, Path::new(given));
    let analysis = product.report();
    let opts = crate::report::Options::default();
    let json = rendered(|b| crate::report::json::Json.render(analysis, &opts, b))?;
    Ok(Answer {
        text: super::text::analyze(analysis),
        json,
    })
}

/// `analyze` of a directory: the job view of its captures, one per rank, as `memscope analyze
/// DIR` prints it (`memscope.job/1`); captures of different programs are refused as one job.
fn job(files: &[(PathBuf, String)]) -> Outcome {
    let mut summaries = Vec::with_capacity(files.len());
    for (p, shown) in files {
        let mut s = crate::inputs::load_summaries(&[p], true)
            .map_err(|e| super::safe::input_error(shown, &e))?;
        // Named as the client would write it, not by the canonical path read.
        let read = p.display().to_string();
        for x in s.iter_mut().filter(|x| x.path == read) {
            x.path = shown.clone();
        }
        summaries.extend(s);
    }
    let members = crate::job::identify(summaries, None).map_err(|e| match e {
        // The file names come from the captures: quoted literals, as every capture string in
        // a tool's text.
        crate::job::JobError::Unrelated(u) => {
            let q = |v: &[String]| v.iter().map(|f| quoted(f)).collect::<Vec<_>>();
            crate::wording::job::unrelated_programs(
                &quoted(&u.first),
                &q(&u.first_files),
                &quoted(&u.other),
                &q(&u.other_files),
            )
        }
        e => e.to_string(),
    })?;
    let job = crate::job::Job::new(&members);
    let json = serde_json::to_value(&job).map_err(|e| e.to_string())?;
    Ok(Answer {
        text: super::text::job(&json),
        json,
    })
}

fn open_cached<'a>(state: &'a mut State, path: &Path, given: &str) -> Result<&'a Db, String> {
    let id = Identity::of(path);
    let fresh = matches!((&state.db, &id), (Some((had, _)), Some(now)) if had == now);
    if !fresh {
        state.db = None;
        let db =
            crate::query::open_capture(path).map_err(|e| super::safe::query_error(given, &e))?;
        if let Some(id) = id {
            state.db = Some((id, db));
        } else {
            // No identity to key it by: opened for this call only.
            state.db = Some((
                Identity {
                    dev: u64::MAX,
                    ino: u64::MAX,
                    size: 0,
                    mtime_ns: -1,
                    ctime_ns: -1,
                },
                db,
            ));
        }
    }
    Ok(&state.db.as_ref().expect("just opened").1)
}

fn query(state: &mut State, args: &Value, ctx: &Ctx) -> Outcome {
    let given = str_arg(args, "path").map_err(|e| e.1)?;
    let sql = str_arg(args, "sql").map_err(|e| e.1)?;
    let max = args
        .get("max_rows")
        .and_then(Value::as_u64)
        .map_or(DEFAULT_ROWS, |n| n.min(MAX_ROWS as u64) as usize);
    let path = admitted(ctx, given)?;
    let db = open_cached(state, &path, given)?;
    if ctx.cancel.is_cancelled() {
        return Err("cancelled".into());
    }
    if let Some(text) = db.dot(sql) {
        return Ok(Answer {
            json: json!({"text": text}),
            text,
        });
    }
    // `notifications/cancelled` interrupts the statement through SQLite's progress handler.
    let qc = crate::query::Cancel::new();
    let hook = qc.clone();
    ctx.cancel.on_cancel(Box::new(move || hook.cancel()));
    let r = db.run_with(sql, Some(max), &crate::query::Limits::default(), &qc);
    ctx.cancel.clear();
    let rs = r.map_err(|e| format!("SQL error: {e}"))?;
    let json = json!({
        "columns": rs.columns,
        "rows": crate::query::render::json(&rs),
        "truncated": rs.truncated,
    });
    Ok(Answer {
        text: super::text::rows(&json),
        json,
    })
}

fn one_summary(p: &Path, given: &str) -> Result<crate::check::InputSummary, String> {
    let mut v = crate::inputs::load_summaries(&[p], true)
        .map_err(|e| super::safe::input_error(given, &e))?;
    match v.len() {
        1 => Ok(v.remove(0)),
        n => Err(format!(
            "{}: holds {n} inputs; diff compares one with one",
            quoted(given)
        )),
    }
}

fn diff(args: &Value, ctx: &Ctx) -> Outcome {
    use crate::report::Render;
    let before = str_arg(args, "before").map_err(|e| e.1)?;
    let after = str_arg(args, "after").map_err(|e| e.1)?;
    let force = args.get("force").and_then(Value::as_bool).unwrap_or(false);
    let (bp, ap) = (admitted(ctx, before)?, admitted(ctx, after)?);
    let (b, a) = (one_summary(&bp, before)?, one_summary(&ap, after)?);
    if !force {
        crate::check::diff::comparable(&b, &a).map_err(|e| e.to_string())?;
    }
    let mut d = crate::check::diff::diff(&b, &a);
    d.before = before.to_owned();
    d.after = after.to_owned();
    let opts = crate::report::Options::default();
    let json = rendered(|w| crate::report::check::DiffJson.render(&d, &opts, w))?;
    Ok(Answer {
        text: super::text::flat(
            "diff",
            &json,
            &["largest_growth", "ooms", "leaks", "graph_growth", "devices"],
        ),
        json,
    })
}

fn check(args: &Value, ctx: &Ctx) -> Outcome {
    use crate::check::config::FailOn;
    use crate::check::CheckConfig;
    use crate::report::Render;
    let given: Vec<&str> = args["paths"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let fail_on = match args.get("fail_on").and_then(Value::as_array) {
        Some(v) => Some(
            v.iter()
                .filter_map(Value::as_str)
                .map(|s| FailOn::parse(s).map_err(|e| e.to_string()))
                .collect::<Result<Vec<_>, _>>()?,
        ),
        None => None,
    };
    let baseline = match args.get("baseline").and_then(Value::as_str) {
        Some(b) => Some((b, admitted(ctx, b)?)),
        None => None,
    };
    let cfg = CheckConfig {
        baseline: baseline.as_ref().map(|(_, p)| p.clone()),
        max_peak: size_arg(args, "max_peak").map_err(|e| e.1)?,
        max_reserved: size_arg(args, "max_reserved").map_err(|e| e.1)?,
        max_growth_per_step: size_arg(args, "max_growth_per_step").map_err(|e| e.1)?,
        fail_on,
        ..Default::default()
    };
    if cfg.checks_nothing() {
        return Err("no rule to check: fail_on is empty and no limit or baseline is set".into());
    }
    let base = match &baseline {
        Some((shown, p)) => {
            let input =
                crate::load::read_input(p).map_err(|e| super::safe::load_error(shown, &e))?;
            let text = std::str::from_utf8(&input)
                .map_err(|_| format!("{}: the baseline is not UTF-8 JSON", quoted(shown)))?;
            let b = crate::check::Baseline::from_json(text)
                .map_err(|e| format!("{}: {e}", quoted(shown)))?;
            Some((shown.to_string(), b))
        }
        None => None,
    };
    // A directory stands for its captures (one job's ranks), each named as the client would.
    let mut paths: Vec<(PathBuf, String)> = Vec::with_capacity(given.len());
    for g in &given {
        match ctx.roots.admit_file_or_dir(g)? {
            super::paths::Admitted::File(p) => paths.push((p, g.to_string())),
            super::paths::Admitted::Dir(files) => paths.extend(files),
        }
        if paths.len() > super::paths::MAX_DIR_CAPTURES {
            return Err(format!(
                "more than {} captures in paths; check one job's captures at a time",
                super::paths::MAX_DIR_CAPTURES
            ));
        }
    }
    let mut summaries = Vec::with_capacity(paths.len());
    for (p, g) in &paths {
        let mut s = crate::inputs::load_summaries(&[p], true)
            .map_err(|e| super::safe::input_error(g, &e))?;
        // A capture's summary is named by the path read (the canonical one): show the
        // client's. A baseline's entries keep their own names.
        let read = p.display().to_string();
        for x in s.iter_mut().filter(|x| x.path == read) {
            x.path = g.to_string();
        }
        summaries.extend(s);
    }
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
    Ok(Answer {
        text: super::text::check(&json),
        json,
    })
}

fn shape(s: &str) -> Result<(u64, Option<u64>), String> {
    let num = |t: &str| {
        t.trim()
            .parse::<u64>()
            .ok()
            .filter(|&n| (1..=crate::units::MAX_SHAPE).contains(&n))
    };
    let bad = || {
        format!(
            "at: not a shape (a batch size, or batch x sequence length, each 1 to {}): {}",
            crate::units::MAX_SHAPE,
            quoted(s)
        )
    };
    match s.split_once(['x', 'X']) {
        Some((b, q)) => match (num(b), num(q)) {
            (Some(b), Some(q)) => Ok((b, Some(q))),
            _ => Err(bad()),
        },
        None => num(s).map(|b| (b, None)).ok_or_else(bad),
    }
}

fn plan(args: &Value, ctx: &Ctx) -> Result<Outcome, RpcError> {
    use crate::analysis::plan::{self, Ask, Shape};
    use crate::report::plan::PlanDoc;
    use crate::report::Render;
    let given = str_arg(args, "path")?;
    let batch = args["batch"].as_u64().unwrap_or(1);
    let seq = args.get("seq").and_then(Value::as_u64);
    let at = args["at"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(shape)
        .collect::<Result<Vec<_>, _>>()
        .map_err(bad)?;
    let cap = size_arg(args, "cap")?;
    let inner = || -> Outcome {
        let path = admitted(ctx, given)?;
        let conf = crate::analysis::whatif::parse_alloc_conf("").map_err(|e| e.to_string())?;
        let ask = Ask::new(Shape { batch, seq }, &at, cap, conf).map_err(|e| e.to_string())?;
        let opened =
            crate::load::open_snapshot(&path).map_err(|e| super::safe::load_error(given, &e))?;
        let p = crate::analysis::analyze(opened, Path::new(given));
        let plans = plan::plan(&p.snap, &p, &ask, None).map_err(|e| e.to_string())?;
        let doc = PlanDoc {
            file: given,
            other: None,
            plans: &plans,
        };
        let json =
            rendered(|w| crate::report::plan::json::Json.render(&doc, &Default::default(), w))?;
        Ok(Answer {
            text: super::text::flat("plan", &json, &["plans"]),
            json,
        })
    };
    Ok(inner())
}

/// Rows a `query` may return at most, whatever `max_rows` asks.
pub const MAX_ROWS: usize = 10_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_is_enforced() {
        let tools = list();
        let check = &tools[3]["inputSchema"];
        assert!(validate(check, &json!({"paths": []}), "arguments").is_err());
        assert!(validate(check, &json!({"paths": ["a"]}), "arguments").is_ok());
        assert!(validate(check, &json!({"paths": ["a"], "x": 1}), "arguments").is_err());
        assert!(validate(check, &json!({"paths": [1]}), "arguments").is_err());
        assert!(validate(
            check,
            &json!({"paths": ["a"], "fail_on": ["nope"]}),
            "arguments"
        )
        .is_err());
        let plan = &tools[4]["inputSchema"];
        assert!(validate(plan, &json!({"path": "a", "batch": 0}), "arguments").is_err());
        assert!(validate(plan, &json!({"path": "a", "batch": u64::MAX}), "arguments").is_err());
        assert!(validate(plan, &json!({"path": "a", "batch": 1.5}), "arguments").is_err());
    }
}
