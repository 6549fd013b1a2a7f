//! Times each phase of `analyze` on one snapshot (for profiling; see BENCHMARKS.md).
use std::path::Path;
use std::time::Instant;
fn main() {
    for a in std::env::args().skip(1) {
        let p = Path::new(&a);
        let t = Instant::now();
        let bytes = memscope::load::read_input(p).unwrap();
        let t_read = t.elapsed();
        let pk = memscope::load::pickle::parse(&bytes).unwrap();
        let t_parse = t.elapsed();
        let snap = memscope::load::snapshot::from_pickle(&pk).unwrap();
        let t_model = t.elapsed();
        drop(pk);
        let mut t_replay = t.elapsed();
        for d in &snap.devices {
            let _tl = memscope::analysis::replay::replay(d, &snap.settings);
            t_replay = t.elapsed();
        }
        let a = memscope::analysis::analyze_snapshot(&snap, p, 0);
        let t_an = t.elapsed();
        println!(
            "{a_} read {:?} parse {:?} model {:?} replay {:?} analyze(all again) {:?}; {} devices",
            t_read, t_parse - t_read, t_model - t_parse, t_replay - t_model, t_an - t_replay, a.devices.len(), a_ = a.input.path
        );
    }
}
