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
        let n: usize = snap.devices.iter().map(|d| d.events.len()).sum();
        println!(
            "after load: {} (events {n}, {} B each)",
            mem(),
            std::mem::size_of::<memscope::model::Event>()
        );
        let threads = memscope::threads::wanted();
        let mut tls = Vec::new();
        for d in &snap.devices {
            tls.push(memscope::analysis::replay::replay_on(
                d,
                &snap.settings,
                threads,
            ));
        }
        let t_replay = t.elapsed();
        if threads > 1 {
            // The serial replay beside it: its time, and whether the split one equals it.
            for (d, tl) in snap.devices.iter().zip(&tls) {
                let t0 = Instant::now();
                let one = memscope::analysis::replay::replay_on(d, &snap.settings, 1);
                let same = one.series.allocated == tl.series.allocated
                    && one.series.active == tl.series.active
                    && one.series.reserved == tl.series.reserved
                    && one.end == tl.end
                    && format!("{:?}", one.peaks) == format!("{:?}", tl.peaks);
                let split = memscope::analysis::replay::replay_split(d, &snap.settings, threads);
                println!(
                    "  device {}: replay on 1 thread {:?}; on {threads}: split {}, equal {same}",
                    d.index,
                    t0.elapsed(),
                    split.is_some()
                );
            }
        }
        let t_replay2 = t.elapsed();
        println!(
            "after replay: {} (checkpoint weight {:?})",
            mem(),
            tls.iter()
                .map(|t| t.checkpoint_weight())
                .collect::<Vec<_>>()
        );
        for (d, tl) in snap.devices.iter().zip(&tls) {
            let steps = memscope::analysis::steps::split(&snap, d, tl);
            let t0 = t.elapsed();
            let leaks = memscope::analysis::leaks::find(&snap, d, tl, &steps).leaks;
            let t1 = t.elapsed();
            println!(
                "  steps {:?} ({} steps), leaks {:?} ({} found)",
                t0 - t_replay2,
                steps.len(),
                t1 - t0,
                leaks.len()
            );
        }
        let t_mid = t.elapsed();
        let an = memscope::analysis::analyze_snapshot(&snap, p, 0);
        let t_an = t.elapsed();
        println!("after analyze: {}", mem());
        println!(
            "{a}: load {:?} replay {:?} (steps+leaks above, {:?}); full analyze_snapshot again {:?}; {} devices",
            t_load,
            t_replay - t_load,
            t_mid - t_replay2,
            t_an - t_mid,
            an.devices.len()
        );
    }
}

/// Resident and peak resident memory of this process (`/proc/self/status`).
fn mem() -> String {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .filter(|l| l.starts_with("VmRSS") || l.starts_with("VmHWM"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join(", ")
}
