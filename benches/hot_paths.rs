//! The hot paths, on committed captures: the pickle reader, the streaming snapshot decode, the
//! allocator replay, the whole snapshot analysis, and the Chrome trace loader.
//! `cargo bench --bench hot_paths`; the end-to-end figures on large inputs are in BENCHMARKS.md.

use std::path::Path;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn read(rel: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    let raw = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    if raw.starts_with(&[0x1f, 0x8b]) {
        use std::io::Read;
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .unwrap();
        out
    } else {
        raw
    }
}

fn snapshot_paths(c: &mut Criterion) {
    let data = read("fixtures/leak_oom.pickle");
    let mut g = c.benchmark_group("snapshot leak_oom.pickle");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.bench_function("pickle::parse (generic tree)", |b| {
        b.iter(|| {
            memscope::load::pickle::parse(&data)
                .unwrap()
                .container_count()
        })
    });
    g.bench_function("snapshot::parse (streaming)", |b| {
        b.iter(|| {
            memscope::load::snapshot::parse(&data, None)
                .unwrap()
                .devices
                .len()
        })
    });
    let snap = memscope::load::snapshot::parse(&data, None).unwrap();
    g.bench_function("replay", |b| {
        b.iter(|| {
            memscope::analysis::replay::replay(&snap.devices[0], &snap.settings)
                .peaks
                .allocated
                .bytes
        })
    });
    g.bench_function("analyze_snapshot", |b| {
        b.iter(|| {
            memscope::analysis::analyze_snapshot(&snap, Path::new("leak_oom.pickle"), 0)
                .devices
                .len()
        })
    });
    g.finish();
}

fn trace_paths(c: &mut Criterion) {
    let data = read("fixtures/trace_total_loss.trace.json.gz");
    let mut g = c.benchmark_group("trace trace_total_loss.trace.json");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.bench_function("chrome::parse", |b| {
        b.iter(|| memscope::load::chrome::parse(&data).unwrap().memory.len())
    });
    let t = memscope::load::chrome::parse(&data).unwrap();
    g.bench_function("analyze_trace", |b| {
        b.iter(|| {
            memscope::analysis::analyze_trace(&t, Path::new("t.json"), 0)
                .devices
                .len()
        })
    });
    g.finish();
}

criterion_group!(benches, snapshot_paths, trace_paths);
criterion_main!(benches);
