//! `memscope query`: every documented table exists with its documented columns, its counts
//! equal an independent reading of the capture (serde-pickle on the pickle, serde_json on the
//! trace, torch's own `memory_stats()` written by the generator), the database cannot be
//! written, outputs escape the capture's strings, and docs/query.md's worked questions still
//! give the outputs it shows.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use memscope::query::render::{self, Format};
use memscope::query::{open_capture, schema, Cell, Db, ResultSet};
use serde_pickle::{HashableValue as H, Value as V};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

fn db(name: &str) -> Db {
    open_capture(&fixture(name)).expect("the fixture opens")
}

fn int(db: &Db, sql: &str) -> i64 {
    match db
        .run(sql, None)
        .unwrap()
        .rows
        .first()
        .map(|r| r[0].clone())
    {
        Some(Cell::Int(v)) => v,
        Some(Cell::Null) | None => 0,
        other => panic!("{sql}: {other:?}"),
    }
}

/// The pickle as Python reads it (serde-pickle: no memscope code).
fn pickle(name: &str) -> V {
    let data = std::fs::read(fixture(name)).unwrap();
    serde_pickle::value_from_slice(
        &data,
        serde_pickle::DeOptions::new().replace_recursive_structures(),
    )
    .expect("serde-pickle reads the fixture")
}

fn get<'a>(v: &'a V, key: &str) -> &'a V {
    match v {
        V::Dict(d) => d.get(&H::String(key.into())).unwrap_or(&V::None),
        _ => &V::None,
    }
}

fn list(v: &V) -> &[V] {
    match v {
        V::List(l) => l,
        V::Tuple(l) => l,
        _ => &[],
    }
}

fn num(v: &V) -> i64 {
    match v {
        V::I64(i) => *i,
        V::Int(i) => i.to_string().parse().unwrap_or(i64::MAX),
        _ => 0,
    }
}

fn text(v: &V) -> String {
    match v {
        V::String(s) => s.clone(),
        _ => String::new(),
    }
}

fn stats(name: &str) -> serde_json::Value {
    let t = std::fs::read_to_string(fixture(name)).unwrap();
    serde_json::from_str(&t).unwrap()
}

#[test]
fn every_documented_table_exists_with_its_columns() {
    for (name, trace) in [
        ("leak_oom.pickle", false),
        ("trace_total_loss.trace.json.gz", true),
    ] {
        let db = db(name);
        let mut seen = 0;
        for t in schema::tables_for(trace) {
            let rs = db
                .run(&format!("SELECT * FROM {} LIMIT 1", t.name), None)
                .unwrap();
            let want: Vec<&str> = t.columns.iter().map(|c| c.name).collect();
            assert_eq!(rs.columns, want, "{name}: {}", t.name);
            seen += 1;
        }
        assert_eq!(db.tables().len(), seen);
        // A table of the other kind of capture is not there.
        let other = if trace { "events" } else { "ops" };
        assert!(db.run(&format!("SELECT * FROM {other}"), None).is_err());
    }
}

#[test]
fn snapshot_counts_equal_an_independent_reading() {
    for name in [
        "leak_oom.pickle",
        "two_streams.pickle",
        "fragmentation_oom.pickle",
    ] {
        let p = pickle(name);
        let db = db(name);
        let traces = list(get(&p, "device_traces"));
        let mut by_action: BTreeMap<(i64, String), i64> = BTreeMap::new();
        let mut by_stream: BTreeMap<i64, i64> = BTreeMap::new();
        for (d, t) in traces.iter().enumerate() {
            let n = list(t).len() as i64;
            let got = int(
                &db,
                &format!("SELECT COUNT(*) FROM events WHERE device = {d}"),
            );
            assert_eq!(got, n, "{name}: events of cuda:{d}");
            for e in list(t) {
                *by_action
                    .entry((d as i64, text(get(e, "action"))))
                    .or_default() += 1;
                *by_stream.entry(num(get(e, "stream"))).or_default() += 1;
            }
        }
        for ((d, a), n) in &by_action {
            let got = int(
                &db,
                &format!("SELECT COUNT(*) FROM events WHERE device = {d} AND action = '{a}'"),
            );
            assert_eq!(got, *n, "{name}: {a} events");
        }
        for (s, n) in &by_stream {
            let got = int(
                &db,
                &format!("SELECT COUNT(*) FROM events WHERE stream = {s}"),
            );
            assert_eq!(got, *n, "{name}: events on stream {s}");
        }
        // Event indices are the positions in the log, with no gap.
        let max = int(&db, "SELECT MAX(idx) FROM events WHERE device = 0");
        assert_eq!(max + 1, list(&traces[0]).len() as i64, "{name}");
        let segs = list(get(&p, "segments"));
        assert_eq!(int(&db, "SELECT COUNT(*) FROM segments"), segs.len() as i64);
        let blocks: usize = segs.iter().map(|s| list(get(s, "blocks")).len()).sum();
        assert_eq!(int(&db, "SELECT COUNT(*) FROM blocks"), blocks as i64);
        let total: i64 = segs.iter().map(|s| num(get(s, "total_size"))).sum();
        assert_eq!(int(&db, "SELECT SUM(size) FROM segments"), total, "{name}");
        // torch's own figure at the dump, written by the generator.
        let st = stats(&name.replace(".pickle", ".stats.json"));
        assert_eq!(
            int(
                &db,
                "SELECT SUM(size) FROM blocks WHERE state = 'active_allocated'"
            ),
            st["allocated_bytes.all.current"].as_i64().unwrap(),
            "{name}: allocated at the dump"
        );
        assert_eq!(
            int(&db, "SELECT SUM(size) FROM segments"),
            st["reserved_bytes.all.current"].as_i64().unwrap(),
            "{name}: reserved at the dump"
        );
        // Every event lies in exactly one step of its device.
        assert_eq!(
            int(&db, "SELECT COUNT(*) FROM events WHERE step IS NULL"),
            0,
            "{name}"
        );
    }
}

#[test]
fn live_at_the_peak_and_the_oom_are_torchs_figures() {
    let db = db("leak_oom.pickle");
    let st = stats("leak_oom.stats.json");
    let peak = st["allocated_bytes.all.peak"].as_i64().unwrap();
    assert_eq!(
        int(&db, "SELECT SUM(size) FROM live WHERE moment = 'peak'"),
        peak
    );
    // The OOM entry, as the pickle has it.
    let p = pickle("leak_oom.pickle");
    let t = list(&list(get(&p, "device_traces"))[0]);
    let (i, e) = t
        .iter()
        .enumerate()
        .find(|(_, e)| text(get(e, "action")) == "oom")
        .unwrap();
    let rs = db
        .run(
            "SELECT event, requested_bytes, device_free_bytes, stream FROM ooms",
            None,
        )
        .unwrap();
    assert_eq!(
        rs.rows,
        vec![vec![
            Cell::Int(i as i64),
            Cell::Int(num(get(e, "size"))),
            Cell::Int(num(get(e, "device_free"))),
            Cell::Int(num(get(e, "stream"))),
        ]]
    );
    // What was live at the OOM is what `analyze` says was allocated then.
    assert_eq!(
        int(&db, "SELECT SUM(l.size) FROM live l JOIN ooms o ON l.moment = 'oom' AND l.at_event = o.event"),
        int(&db, "SELECT allocated_bytes FROM ooms")
    );
    // The site lists of the report are the `live` table grouped by site.
    let by_site = db
        .run(
            "SELECT SUM(size) AS b FROM live WHERE moment = 'peak' GROUP BY site_id ORDER BY b DESC LIMIT 3",
            None,
        )
        .unwrap();
    let top = db
        .run(
            "SELECT bytes FROM top_sites WHERE moment = 'peak' ORDER BY rank LIMIT 3",
            None,
        )
        .unwrap();
    assert_eq!(by_site.rows, top.rows);
}

/// The trace's `[memory]` events and CPU ops, counted with serde_json alone.
#[test]
fn trace_counts_equal_an_independent_reading() {
    use std::io::Read;
    let name = "trace_total_loss.trace.json.gz";
    let mut s = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(fixture(name)).unwrap())
        .read_to_string(&mut s)
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&s).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    let mem: Vec<&serde_json::Value> = events.iter().filter(|e| e["name"] == "[memory]").collect();
    let ops = events.iter().filter(|e| e["cat"] == "cpu_op").count();
    let db = db(name);
    assert_eq!(
        int(&db, "SELECT COUNT(*) FROM memory_events"),
        mem.len() as i64
    );
    assert_eq!(int(&db, "SELECT COUNT(*) FROM ops"), ops as i64);
    let allocs = mem
        .iter()
        .filter(|e| e["args"]["Bytes"].as_i64().unwrap() > 0)
        .count();
    assert_eq!(
        int(
            &db,
            "SELECT COUNT(*) FROM memory_events WHERE action = 'alloc'"
        ),
        allocs as i64
    );
    let bytes: i64 = mem
        .iter()
        .map(|e| e["args"]["Bytes"].as_i64().unwrap())
        .filter(|&b| b > 0)
        .sum();
    assert_eq!(
        int(
            &db,
            "SELECT SUM(size) FROM memory_events WHERE action = 'alloc'"
        ),
        bytes
    );
    // The graph's never-consumed nodes are the ones `analyze` counts (10 `aten::add_`, one per
    // step: the workload accumulates the loss tensor, see the fixture's meta).
    assert_eq!(
        int(&db, "SELECT COUNT(*) FROM graph_nodes WHERE consumed = 0"),
        10
    );
    assert_eq!(
        int(&db, "SELECT COUNT(DISTINCT step) FROM graph_nodes WHERE consumed = 0 AND name = 'aten::add_'"),
        10
    );
}

#[test]
fn the_database_cannot_be_written() {
    let db = db("leak_oom.pickle");
    let dir = std::env::temp_dir().join(format!("memscope-query-ro-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("out.db");
    let fs = f.display().to_string();
    for sql in [
        "INSERT INTO sites VALUES (99, 'x', 1, 'f', 'user')".to_owned(),
        "UPDATE sites SET line = 0".to_owned(),
        "DELETE FROM sites".to_owned(),
        "DROP TABLE sites".to_owned(),
        "CREATE TABLE t(x)".to_owned(),
        "CREATE TEMP TABLE t(x)".to_owned(),
        "CREATE TEMP VIEW v AS SELECT 1".to_owned(),
        "CREATE INDEX i ON sites(line)".to_owned(),
        format!("ATTACH '{fs}' AS other"),
        format!("VACUUM INTO '{fs}'"),
        "PRAGMA query_only = 0".to_owned(),
        "PRAGMA writable_schema = 1".to_owned(),
        "SELECT load_extension('/tmp/x')".to_owned(),
        "INSERT INTO events(idx) VALUES (1)".to_owned(),
    ] {
        assert!(db.run(&sql, None).is_err(), "{sql} was allowed");
    }
    assert!(!f.exists(), "a query wrote {fs}");
    // Reading pragmas still work.
    let cols = db.run("PRAGMA table_info(ooms)", None).unwrap();
    assert_eq!(
        cols.rows.len(),
        schema::table("ooms").unwrap().columns.len()
    );
    // Still readable afterwards, CTEs and window functions included.
    assert_eq!(int(&db, "WITH x AS (SELECT 1 AS a) SELECT a FROM x"), 1);
    assert_eq!(int(&db, "SELECT COUNT(*) FROM sites"), 7);
    assert_eq!(
        int(
            &db,
            "SELECT MAX(n) FROM (SELECT ROW_NUMBER() OVER (ORDER BY idx) AS n FROM events)"
        ),
        3667
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn hostile() -> ResultSet {
    ResultSet {
        columns: vec!["file".into(), "n".into()],
        rows: vec![
            vec![
                Cell::from("a\x1b]0;pwned\x07b,\"c\"\n=cmd|' /C calc'!A0"),
                Cell::Int(-5),
            ],
            vec![Cell::from(" lead"), Cell::Null],
        ],
        truncated: false,
    }
}

#[test]
fn outputs_escape_the_captures_strings() {
    let t = render::table(&hostile());
    assert!(!t.contains('\x1b') && !t.contains('\x07'), "{t}");
    assert!(t.contains("\\x1b") && t.contains("\\n"), "{t}");
    assert_eq!(t.lines().count(), 5, "one line per row:\n{t}");
    let c = render::csv(&hostile());
    assert_eq!(
        c,
        "file,n\r\n\"a\x1b]0;pwned\x07b,\"\"c\"\"\n=cmd|' /C calc'!A0\",-5\r\n\" lead\",\r\n"
    );
    let j: serde_json::Value =
        serde_json::from_str(&render::render(&hostile(), Format::Json)).unwrap();
    assert_eq!(j[0]["file"], "a\x1b]0;pwned\x07b,\"c\"\n=cmd|' /C calc'!A0");
    assert_eq!(j[1]["n"], serde_json::Value::Null);
}

#[test]
fn the_cli_runs_sql_in_each_format_and_from_stdin() {
    let bin = env!("CARGO_BIN_EXE_memscope");
    let f = fixture("leak_oom.pickle");
    let run = |args: &[&str], stdin: Option<&str>| {
        use std::io::Write;
        let mut c = Command::new(bin);
        c.arg("query").arg(&f).args(args);
        c.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped());
        let mut ch = c.spawn().unwrap();
        let mut i = ch.stdin.take().unwrap();
        if let Some(s) = stdin {
            i.write_all(s.as_bytes()).unwrap();
        }
        drop(i);
        let o = ch.wait_with_output().unwrap();
        (o.status.code(), String::from_utf8(o.stdout).unwrap())
    };
    let (code, out) = run(
        &["SELECT COUNT(*) AS n FROM events", "--format", "json"],
        None,
    );
    assert_eq!(code, Some(0));
    let doc = common::envelope::data(out.as_bytes());
    assert_eq!(doc["schema"], "memscope.query/1");
    assert_eq!(doc["results"][0]["columns"], serde_json::json!(["n"]));
    assert_eq!(doc["results"][0]["rows"], serde_json::json!([[3667]]));
    let (_, out) = run(
        &[
            "SELECT action, COUNT(*) AS n FROM events WHERE action = 'oom' GROUP BY action",
            "--format",
            "csv",
        ],
        None,
    );
    assert_eq!(out, "action,n\r\noom,1\r\n");
    let (_, out) = run(&["--format", "csv"], Some("SELECT 1 AS a; SELECT 2 AS b;"));
    assert_eq!(out, "a\r\n1\r\nb\r\n2\r\n");
    let (_, out) = run(&[".schema ooms"], None);
    assert!(
        out.contains("CREATE TABLE ooms") && out.contains("requested_bytes INTEGER"),
        "{out}"
    );
    let (code, _) = run(&["SELECT * FROM nowhere"], None);
    assert_eq!(code, Some(2));
}

const DOC: &str = "docs/query.md";
const SCHEMA_BEGIN: &str =
    "<!-- schema: generated from src/query/schema.rs by tests/it/query.rs -->\n";
const SCHEMA_END: &str = "<!-- end of schema -->";

/// The worked questions: each ```sql FILE block is followed by a ```text block with the
/// output `memscope query FILE "SQL"` prints. `MEMSCOPE_UPDATE_DOCS=1` rewrites the outputs
/// and the schema reference from the code.
#[test]
fn docs_worked_questions_and_schema_are_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(DOC);
    let doc = std::fs::read_to_string(&path).unwrap();
    let update = std::env::var("MEMSCOPE_UPDATE_DOCS").is_ok_and(|v| v == "1");
    let mut out = String::new();
    let mut lines = doc.split_inclusive('\n').peekable();
    let mut questions = 0;
    let mut dbs: BTreeMap<String, Db> = BTreeMap::new();
    while let Some(line) = lines.next() {
        out.push_str(line);
        if line == SCHEMA_BEGIN {
            let mut old = String::new();
            for l in lines.by_ref() {
                if l.starts_with(SCHEMA_END) {
                    let want = schema::markdown();
                    assert!(update || old == want, "{DOC}'s schema differs from src/query/schema.rs: run with MEMSCOPE_UPDATE_DOCS=1");
                    out.push_str(&want);
                    out.push_str(l);
                    break;
                }
                old.push_str(l);
            }
            continue;
        }
        let Some(file) = line.strip_prefix("```sql ") else {
            continue;
        };
        let file = file.trim().to_owned();
        let mut sql = String::new();
        for l in lines.by_ref() {
            out.push_str(l);
            if l.starts_with("```") {
                break;
            }
            sql.push_str(l);
        }
        // The output block.
        assert_eq!(
            lines.next(),
            Some("```text\n"),
            "{DOC}: an output block after {sql}"
        );
        out.push_str("```text\n");
        let mut old = String::new();
        for l in lines.by_ref() {
            if l.starts_with("```") {
                break;
            }
            old.push_str(l);
        }
        let db = dbs.entry(file.clone()).or_insert_with(|| {
            open_capture(&Path::new(env!("CARGO_MANIFEST_DIR")).join(&file)).unwrap()
        });
        let got: String = db
            .run_all(&sql, None)
            .unwrap_or_else(|e| panic!("{DOC}: {sql}: {e}"))
            .iter()
            .map(render::table)
            .collect();
        assert!(
            update || got == old,
            "{DOC}: the output of\n{sql}\nis now\n{got}\nnot\n{old}"
        );
        out.push_str(&got);
        out.push_str("```\n");
        questions += 1;
    }
    assert!(questions >= 10, "{DOC} works through {questions} questions");
    if update {
        std::fs::write(&path, out).unwrap();
    }
}

/// The lazy `live` table is bounded: a capture whose states would outgrow it is an error when
/// read, not an abort under a memory limit (the bound is far above any fixture).
#[test]
fn live_is_bounded() {
    use memscope::query::fill_snapshot::LIVE_ROWS;
    let db = db("leak_oom.pickle");
    let n = int(&db, "SELECT COUNT(*) FROM live");
    assert!(n > 0 && (n as usize) < LIVE_ROWS);
    // Each step's end is a moment, and the peak, the OOM and the end.
    assert_eq!(
        int(
            &db,
            "SELECT COUNT(DISTINCT at_event) FROM live WHERE moment = 'step_end'"
        ),
        int(&db, "SELECT COUNT(*) FROM steps")
    );
    assert_eq!(
        int(
            &db,
            "SELECT COUNT(*) FROM (SELECT DISTINCT moment FROM live)"
        ),
        4
    );
}
