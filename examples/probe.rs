//! Times each phase of `analyze` on snapshots (for profiling; see BENCHMARKS.md):
//! `cargo run --release --example probe -- FILE...`
use std::path::Path;
use std::time::Instant;
fn main() {
    for a in std::env::args().skip(1) {
        let p = Path::new(&a);
        let t = Instant::now();
        let snap = memscope::load::load_snapshot(p).unwrap();
        let t_load = t.elapsed();
        let mut tls = Vec::new();
        for d in &snap.devices {
            tls.push(memscope::analysis::replay::replay(d, &snap.settings));
        }
        let t_replay = t.elapsed();
        for (d, tl) in snap.devices.iter().zip(&tls) {
            let steps = memscope::analysis::steps::split(&snap, d, tl);
            let t0 = t.elapsed();
            let leaks = memscope::analysis::leaks::find(&snap, d, tl, &steps).leaks;
            let t1 = t.elapsed();
            println!(
                "  steps {:?} ({} steps), leaks {:?} ({} found)",
                t0 - t_replay,
                steps.len(),
                t1 - t0,
                leaks.len()
            );
        }
        let t_mid = t.elapsed();
        let an = memscope::analysis::analyze_snapshot(&snap, p, 0);
        let t_an = t.elapsed();
        println!(
            "{a}: load {:?} replay {:?} (steps+leaks above, {:?}); full analyze_snapshot again {:?}; {} devices",
            t_load,
            t_replay - t_load,
            t_mid - t_replay,
            t_an - t_mid,
            an.devices.len()
        );
    }
}
