//! Times the snapshot pre-scan (`memscope::load::prescan`) on a file and prints its plan:
//! `cargo run --release --example prescan -- FILE`.

fn main() {
    let path = std::env::args().nth(1).expect("usage: prescan FILE");
    let data = std::fs::read(&path).expect("read");
    let t = std::time::Instant::now();
    let plan = memscope::load::prescan::scan(&data);
    let secs = t.elapsed().as_secs_f64();
    let mb = data.len() as f64 / 1e6;
    match plan {
        Ok(p) => println!(
            "{path}: {mb:.1} MB scanned in {secs:.3} s ({:.2} ms/MB): {} entries, {} batches, \
             {} dependent, {} cross-batch GETs ({} of containers), {} prefix GETs; {} memo entries to build first ({} containers)",
            secs * 1e3 / mb,
            p.entries,
            p.chunks.len(),
            p.dependent_chunks,
            p.cross_gets,
            p.cross_container_gets,
            p.prefix_gets,
            p.shared_keys,
            p.shared_container_keys
        ),
        Err(e) => println!("{path}: {e} after {secs:.3} s"),
    }
}
