use std::path::Path;
fn main() {
    for a in std::env::args().skip(1) {
        let t = std::time::Instant::now();
        let s = memscope::load::load_snapshot(Path::new(&a)).unwrap();
        let lt = t.elapsed();
        for d in &s.devices {
            let tl = memscope::analysis::replay::replay(d, &s.settings);
            println!(
                "{a} dev{} layout={:?} events={} segs={} load={:?} total={:?}",
                d.index,
                s.layout,
                d.events.len(),
                d.segments.len(),
                lt,
                t.elapsed()
            );
            println!("  end {:?}", tl.end.counters);
            println!(
                "  peaks alloc={} active={} reserved={} req={} isplit={} segs={}",
                tl.peaks.allocated.bytes,
                tl.peaks.active.bytes,
                tl.peaks.reserved.bytes,
                tl.peaks.requested.bytes,
                tl.peaks.inactive_split.bytes,
                tl.peaks.segments.bytes
            );
            println!(
                "  mid_run={} approx={} consistency={:?}",
                tl.starts_mid_run, tl.approximate_initial_blocks, tl.consistency
            );
            println!(
                "  anomalies={} first={:?}",
                tl.anomalies.len(),
                tl.anomalies.first()
            );
            for o in &tl.ooms {
                println!("  oom {:?}", o);
            }
        }
    }
}
