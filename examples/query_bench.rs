//! Times `memscope query`'s phases on a snapshot (BENCHMARKS.md, "SQL over a capture"):
//! `cargo run --release --example query_bench -- FILE [SQL...]`. Load, analysis, opening the
//! tables, then each query three times (the first reads the lazy `live` table, if it uses it).
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

const DEFAULT: &[&str] = &[
    "SELECT file, line, function, COUNT(*) AS allocs, SUM(size) AS bytes FROM events WHERE action = 'alloc' GROUP BY file, line, function ORDER BY bytes DESC LIMIT 5",
    "SELECT site_id, COUNT(*) AS allocs, SUM(size) AS bytes FROM events WHERE action = 'alloc' GROUP BY site_id ORDER BY bytes DESC LIMIT 5",
    "SELECT COUNT(*) FROM events",
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let p = Path::new(&args[0]);
    let queries: Vec<&str> = if args.len() > 1 {
        args[1..].iter().map(|s| s.as_str()).collect()
    } else {
        DEFAULT.to_vec()
    };
    let t = Instant::now();
    let opened = memscope::load::open_snapshot(p).unwrap();
    let t_load = t.elapsed();
    let product = memscope::analysis::analyze(opened, p);
    let t_an = t.elapsed();
    let events: usize = product.snap.devices.iter().map(|d| d.events.len()).sum();
    let tables = memscope::query::fill_snapshot::tables(Arc::new(product));
    let db = memscope::query::Db::open(tables, false).unwrap();
    let t_open = t.elapsed();
    println!(
        "{events} events: load {:.3} s, analyze {:.3} s, open tables {:.3} s",
        t_load.as_secs_f64(),
        (t_an - t_load).as_secs_f64(),
        (t_open - t_an).as_secs_f64()
    );
    for q in queries {
        let mut times = Vec::new();
        let mut rows = 0;
        for _ in 0..3 {
            let t0 = Instant::now();
            rows = db.run(q, None).unwrap().rows.len();
            times.push(t0.elapsed().as_secs_f64());
        }
        println!("{times:.3?} s, {rows} rows: {q}");
    }
}
