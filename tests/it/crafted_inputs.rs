//! Crafted inputs whose cost must stay in proportion to their size (issue 24), at sizes a test
//! can afford, asserted by counts rather than time: replay checkpoints hold no more than the
//! log's events, a site's stack is spelled out to a bounded depth, per-device and per-step
//! results come from one pass. `tools/crafted_inputs.py` makes the big ones (BENCHMARKS.md).

use std::collections::BTreeMap;
use std::path::Path;

use serde_pickle::{HashableValue as H, Value as V};

const MIB: i64 = 1 << 20;
const BASE: i64 = 0x7F00_0000_0000;

fn d(pairs: &[(&str, V)]) -> V {
    V::Dict(
        pairs
            .iter()
            .map(|(k, v)| (H::String((*k).into()), v.clone()))
            .collect::<BTreeMap<_, _>>(),
    )
}

fn s(x: &str) -> V {
    V::String(x.into())
}

fn frame(file: &str, line: i64, name: &str) -> V {
    d(&[
        ("filename", s(file)),
        ("line", V::I64(line)),
        ("name", s(name)),
    ])
}

fn event(action: &str, addr: i64, size: i64, frames: V, t: i64) -> V {
    d(&[
        ("action", s(action)),
        ("addr", V::I64(addr)),
        ("size", V::I64(size)),
        ("stream", V::I64(0)),
        ("time_us", V::I64(t)),
        ("frames", frames),
    ])
}

fn snapshot(trace: Vec<V>) -> Vec<u8> {
    let doc = d(&[
        ("segments", V::List(vec![])),
        ("device_traces", V::List(vec![V::List(trace)])),
    ]);
    serde_pickle::value_to_vec(&doc, serde_pickle::SerOptions::new()).unwrap()
}

/// `n` 2 MiB segments, then `events` alloc/free events of one block.
fn many_segments(n: i64, events: i64) -> Vec<u8> {
    let fr = V::List(vec![frame("train.py", 10, "step")]);
    let mut trace: Vec<V> = (0..n)
        .map(|i| event("segment_alloc", BASE + i * 2 * MIB, 2 * MIB, fr.clone(), i))
        .collect();
    let acts = ["alloc", "free_requested", "free_completed"];
    trace.extend((0..events).map(|i| event(acts[(i % 3) as usize], BASE, 512, fr.clone(), n + i)));
    snapshot(trace)
}

#[test]
fn replay_checkpoints_hold_no_more_than_the_log() {
    // 4000 segments and 30k events: a checkpoint every 4096 events would copy the 4000
    // segments 8 times (64k units against 34k events).
    let bytes = many_segments(4000, 30_000);
    let snap = memscope::load::snapshot_from_bytes(Path::new("seg.pickle"), &bytes).unwrap();
    let dev = &snap.devices[0];
    let tl = memscope::analysis::replay::replay(dev, &snap.settings);
    assert_eq!(tl.end.segments.len(), 4000);
    assert!(
        tl.checkpoint_weight() <= dev.events.len(),
        "checkpoints hold {} units for {} events",
        tl.checkpoint_weight(),
        dev.events.len()
    );
    // Random access still answers: the state after the last event is the end state.
    let last = tl.state_after(dev, &snap.settings, Some(dev.events.len() - 1));
    assert_eq!(last.segments.len(), tl.end.segments.len());
    assert_eq!(last.counters, tl.end.counters);
}

#[test]
fn deep_stacks_are_grouped_without_a_string_per_frame() {
    // 12 live blocks, each with its own 3000-frame stack drawn from 101 frames.
    let pool: Vec<V> = (0..101)
        .map(|i| frame(&format!("mod{}.py", i % 7), i, &format!("f{i}")))
        .collect();
    let mut trace = vec![event(
        "segment_alloc",
        BASE,
        2 * MIB,
        V::List(vec![pool[0].clone()]),
        0,
    )];
    for k in 0..12i64 {
        let frames = (0..3000)
            .map(|j| pool[((k * 7 + j * 13) % 101) as usize].clone())
            .collect();
        trace.push(event("alloc", BASE + k * 512, 512, V::List(frames), k + 1));
    }
    let snap =
        memscope::load::snapshot_from_bytes(Path::new("deep.pickle"), &snapshot(trace)).unwrap();
    let a = memscope::analysis::analyze_snapshot(&snap, Path::new("deep.pickle"), 0);
    assert!(!a.devices[0].top_sites_at_peak.is_empty());
    for site in &a.devices[0].top_sites_at_peak {
        assert!(
            site.stack.frames.len() <= memscope::analysis::sites::MAX_STACK_LABELS,
            "{} labels",
            site.stack.frames.len()
        );
    }
    // The flamegraph draws a bounded depth too: 256 outermost, one box, 256 innermost.
    use memscope::report::flamegraph as fg;
    let dev = &snap.devices[0];
    let folded = fg::fold(
        &snap,
        dev,
        &a.per_device[0].timeline.end,
        fg::By::Stack,
        &a.per_device[0].classifier,
    );
    assert!(!folded.lines.is_empty());
    for (line, _) in &folded.lines {
        assert_eq!(
            line.split(';').count(),
            fg::MAX_FLAME_DEPTH + 1,
            "{}",
            &line[..80]
        );
        assert!(line.contains(";[2488 frames];"));
    }
    let deep = a.devices[0]
        .top_sites_at_peak
        .iter()
        .find(|s| s.stack.more > 0)
        .unwrap();
    assert_eq!(deep.stack.more, 2488);
    assert_eq!(
        memscope::wording::stack_lines(&deep.stack).last().unwrap(),
        "... 2488 more frames"
    );
}

#[test]
fn a_trace_with_thousands_of_devices_reports_each_once() {
    let mut ev = Vec::new();
    for k in 0..4 {
        ev.push(format!(
            r#"{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{k}","pid":1,"tid":1,"ts":{},"dur":999}}"#,
            k * 1000
        ));
    }
    let n = 3000;
    for dv in 0..n {
        ev.push(format!(
            r#"{{"ph":"i","cat":"cpu_instant_event","s":"t","name":"[memory]","pid":1,"tid":1,"ts":{},"args":{{"Addr":{},"Bytes":512,"Total Allocated":512,"Total Reserved":2097152,"Device Type":1,"Device Id":{dv}}}}}"#,
            1 + dv % 3900,
            BASE + dv * 512
        ));
    }
    let doc = format!(r#"{{"traceEvents":[{}]}}"#, ev.join(","));
    let p = Path::new("devices.trace.json");
    let t = memscope::load::trace_from_bytes(p, doc.as_bytes()).unwrap();
    let a = memscope::analysis::analyze_trace(&t, p, doc.len() as u64);
    let text = memscope::report::to_string(
        &memscope::report::text::Text,
        &a,
        &memscope::report::Options::default(),
    );
    assert!(text.contains("cuda:2999"), "every device is reported");
}
