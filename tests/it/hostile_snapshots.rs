//! Snapshots that are valid pickles but hostile or nonsensical as snapshots: overflowing sizes
//! and addresses, overlapping segments, frees without allocs, wrong shapes. Each must load and
//! analyse (text and JSON) without a panic — tests run as debug builds, so any unchecked
//! arithmetic overflow fails here — or be refused with a clear error.
//!
//! The pickles are written by a tiny encoder below, so the cases read as data. A seeded
//! generator then mixes the same hostile values into thousands of random snapshots (a
//! structure-aware complement to the byte-level `cargo fuzz` targets in `fuzz/`).

use std::path::Path;

use memscope::report;

#[derive(Clone, Debug)]
enum P {
    None,
    Bool(bool),
    Int(i64),
    /// Little-endian two's complement bytes (LONG1), for values beyond i64.
    Big(Vec<u8>),
    Float(f64),
    Str(String),
    List(Vec<P>),
    Tuple(Vec<P>),
    Dict(Vec<(P, P)>),
}

fn s(x: &str) -> P {
    P::Str(x.into())
}
fn d(pairs: Vec<(&str, P)>) -> P {
    P::Dict(pairs.into_iter().map(|(k, v)| (s(k), v)).collect())
}
fn u(x: u64) -> P {
    if x <= i64::MAX as u64 {
        P::Int(x as i64)
    } else {
        let mut b = x.to_le_bytes().to_vec();
        b.push(0);
        P::Big(b)
    }
}

fn enc(v: &P, out: &mut Vec<u8>) {
    match v {
        P::None => out.push(b'N'),
        P::Bool(true) => out.push(0x88),
        P::Bool(false) => out.push(0x89),
        P::Int(i) => {
            if let Ok(x) = i32::try_from(*i) {
                out.push(b'J');
                out.extend_from_slice(&x.to_le_bytes());
            } else {
                out.push(0x8a);
                out.push(8);
                out.extend_from_slice(&i.to_le_bytes());
            }
        }
        P::Big(b) => {
            out.push(0x8a);
            out.push(b.len() as u8);
            out.extend_from_slice(b);
        }
        P::Float(f) => {
            out.push(b'G');
            out.extend_from_slice(&f.to_be_bytes());
        }
        P::Str(t) => {
            out.push(b'X');
            out.extend_from_slice(&(t.len() as u32).to_le_bytes());
            out.extend_from_slice(t.as_bytes());
        }
        P::List(items) => {
            out.extend_from_slice(b"](");
            items.iter().for_each(|x| enc(x, out));
            out.push(b'e');
        }
        P::Tuple(items) => {
            out.push(b'(');
            items.iter().for_each(|x| enc(x, out));
            out.push(b't');
        }
        P::Dict(pairs) => {
            out.extend_from_slice(b"}(");
            for (k, x) in pairs {
                enc(k, out);
                enc(x, out);
            }
            out.push(b'u');
        }
    }
}

fn pickle(v: &P) -> Vec<u8> {
    let mut out = vec![0x80, 2];
    enc(v, &mut out);
    out.push(b'.');
    out
}

fn frames() -> P {
    P::List(vec![d(vec![
        ("filename", s("train.py")),
        ("line", P::Int(12)),
        ("name", s("step")),
    ])])
}

fn seg(addr: P, total: P, blocks: Vec<P>) -> P {
    d(vec![
        ("device", P::Int(0)),
        ("address", addr),
        ("total_size", total),
        ("stream", P::Int(0)),
        ("segment_type", s("large")),
        ("frames", frames()),
        ("blocks", P::List(blocks)),
    ])
}

fn blk(addr: P, size: P, state: &str) -> P {
    d(vec![
        ("address", addr),
        ("size", size.clone()),
        ("requested_size", size),
        ("state", s(state)),
        ("frames", frames()),
    ])
}

fn ev(action: &str, addr: P, size: P) -> P {
    d(vec![
        ("action", s(action)),
        ("addr", addr),
        ("size", size),
        ("stream", P::Int(0)),
        ("time_us", P::Int(1)),
        ("frames", frames()),
    ])
}

fn snap(segments: Vec<P>, trace: Vec<P>) -> P {
    d(vec![
        ("segments", P::List(segments)),
        ("device_traces", P::List(vec![P::List(trace)])),
    ])
}

/// Loads and analyses; renders both formats. Returns the error text when refused.
fn run(name: &str, bytes: &[u8]) -> Result<String, String> {
    let path = Path::new(name);
    let snap = memscope::load::snapshot_from_bytes(path, bytes).map_err(|e| e.to_string())?;
    let a = memscope::analysis::analyze_snapshot(&snap, path, bytes.len() as u64);
    let text = report::to_string(
        &report::text::Text,
        &a,
        &report::Options {
            color: true,
            stacks: true,
        },
    );
    let json = report::to_string(&report::json::Json, &a, &report::Options::default());
    serde_json::from_str::<serde_json::Value>(&json)
        .unwrap_or_else(|e| panic!("{name}: JSON report does not parse: {e}"));
    Ok(text)
}

const MAX: u64 = u64::MAX;

fn named_cases() -> Vec<(&'static str, P)> {
    let big_neg = P::Big({
        // -2^70
        let mut b = vec![0u8; 9];
        b[8] = 0xc0;
        b
    });
    let base = 0x7f00_0000_0000u64;
    vec![
        (
            "segment_at_top_of_address_space",
            snap(
                vec![seg(
                    u(MAX - 10),
                    u(1 << 63),
                    vec![blk(u(MAX - 10), u(1 << 63), "active_allocated")],
                )],
                vec![
                    ev("segment_alloc", u(MAX - 10), u(1 << 63)),
                    ev("alloc", u(MAX - 10), u(1 << 63)),
                    ev("alloc", u(MAX - 5), u(MAX)),
                ],
            ),
        ),
        (
            "zero_size_blocks",
            snap(
                vec![seg(
                    u(base),
                    u(0),
                    vec![
                        blk(u(base), u(0), "active_allocated"),
                        blk(u(base), u(0), "inactive"),
                    ],
                )],
                vec![
                    ev("segment_alloc", u(base), u(0)),
                    ev("alloc", u(base), u(0)),
                    ev("free_completed", u(base), u(0)),
                ],
            ),
        ),
        (
            "negative_sizes",
            snap(
                vec![seg(
                    P::Int(-1),
                    P::Int(-5),
                    vec![blk(big_neg.clone(), big_neg.clone(), "active_allocated")],
                )],
                vec![
                    ev("alloc", P::Int(-4096), big_neg.clone()),
                    ev("segment_alloc", big_neg.clone(), P::Int(i64::MIN)),
                ],
            ),
        ),
        (
            "overlapping_segments_and_blocks",
            snap(
                vec![
                    seg(
                        u(base),
                        u(4 << 20),
                        vec![
                            blk(u(base), u(3 << 20), "active_allocated"),
                            blk(u(base + 512), u(3 << 20), "active_allocated"),
                        ],
                    ),
                    seg(
                        u(base + (1 << 20)),
                        u(4 << 20),
                        vec![blk(u(base + (1 << 20)), u(1 << 20), "active_allocated")],
                    ),
                    seg(u(base), u(4 << 20), vec![]),
                ],
                vec![
                    ev("segment_alloc", u(base), u(4 << 20)),
                    ev("segment_alloc", u(base + (1 << 20)), u(4 << 20)),
                    ev("segment_alloc", u(base), u(4 << 20)),
                    ev("alloc", u(base), u(3 << 20)),
                    ev("alloc", u(base + 512), u(3 << 20)),
                    ev("alloc", u(base), u(3 << 20)),
                ],
            ),
        ),
        (
            "events_outside_any_segment_and_frees_without_alloc",
            snap(
                vec![seg(u(base), u(2 << 20), vec![])],
                vec![
                    ev("alloc", u(12345), u(512)),
                    ev("free_requested", u(99), u(512)),
                    ev("free_completed", u(99), u(512)),
                    ev("free_completed", u(base), u(MAX)),
                    ev("segment_free", u(base + 7), u(2 << 20)),
                    ev("segment_unmap", u(1), u(MAX)),
                    ev("segment_map", u(MAX), u(MAX)),
                    ev("oom", u(0), u(MAX)),
                ],
            ),
        ),
        (
            "unknown_actions_and_odd_fields",
            snap(
                vec![],
                vec![
                    ev("explode", u(1), u(1)),
                    ev("", u(1), u(1)),
                    d(vec![("action", P::Int(3))]),
                    d(vec![
                        ("action", s("alloc")),
                        ("addr", s("x")),
                        ("size", P::Float(f64::NAN)),
                        ("time_us", P::Int(i64::MIN)),
                        ("frames", d(vec![])),
                    ]),
                    d(vec![
                        ("action", s("oom")),
                        ("size", u(MAX)),
                        ("device_free", u(MAX)),
                        ("time_us", P::Int(i64::MAX)),
                    ]),
                    P::None,
                    P::List(vec![]),
                ],
            ),
        ),
        (
            "frames_are_dicts_and_frame_fields_wrong",
            snap(
                vec![d(vec![
                    ("address", u(base)),
                    ("total_size", u(2 << 20)),
                    ("frames", d(vec![("filename", s("x"))])),
                    ("blocks", d(vec![])),
                ])],
                vec![
                    d(vec![
                        ("action", s("alloc")),
                        ("addr", u(base)),
                        ("size", u(512)),
                        ("frames", d(vec![("a", P::None)])),
                    ]),
                    d(vec![
                        ("action", s("alloc")),
                        ("addr", u(base + 512)),
                        ("size", u(512)),
                        (
                            "frames",
                            P::List(vec![
                                P::Int(1),
                                d(vec![
                                    ("filename", P::Int(3)),
                                    ("line", u(MAX)),
                                    ("name", P::None),
                                ]),
                                P::List(vec![]),
                            ]),
                        ),
                    ]),
                ],
            ),
        ),
        (
            "device_traces_is_a_dict",
            d(vec![
                ("segments", P::List(vec![])),
                ("device_traces", d(vec![("0", P::List(vec![]))])),
            ]),
        ),
        (
            "segments_is_a_str",
            d(vec![
                ("segments", s("nope")),
                ("device_traces", P::List(vec![])),
            ]),
        ),
        (
            "huge_and_many_devices",
            d(vec![
                (
                    "segments",
                    P::List(
                        [0i64, i64::MAX, u32::MAX as i64, -3, 7]
                            .iter()
                            .map(|&dev| {
                                d(vec![
                                    ("device", P::Int(dev)),
                                    ("address", u(base)),
                                    ("total_size", u(MAX)),
                                    (
                                        "blocks",
                                        P::List(vec![blk(u(base), u(MAX), "active_allocated")]),
                                    ),
                                ])
                            })
                            .collect(),
                    ),
                ),
                (
                    "device_traces",
                    P::List(vec![
                        P::List(vec![]),
                        P::List(vec![
                            ev("segment_alloc", u(0), u(MAX)),
                            ev("segment_alloc", u(1), u(MAX)),
                        ]),
                    ]),
                ),
            ]),
        ),
        (
            "huge_reserved_sums",
            snap(
                (0..4)
                    .map(|i| {
                        seg(
                            u(i << 62),
                            u(MAX / 2),
                            vec![blk(u(i << 62), u(MAX / 2), "active_allocated")],
                        )
                    })
                    .collect(),
                (0..4)
                    .flat_map(|i| {
                        [
                            ev("segment_alloc", u(i << 62), u(MAX / 2)),
                            ev("alloc", u(i << 62), u(MAX / 2)),
                        ]
                    })
                    .collect(),
            ),
        ),
        (
            "allocator_settings_extremes",
            d(vec![
                ("segments", P::List(vec![seg(u(base), u(64 << 20), vec![])])),
                (
                    "device_traces",
                    P::List(vec![P::List(vec![
                        ev("alloc", u(base), u((1 << 20) + 3)),
                        ev("alloc", u(base + (8 << 20)), u(MAX - 3)),
                    ])]),
                ),
                (
                    "allocator_settings",
                    d(vec![
                        ("max_split_size", P::Int(i64::MAX)),
                        (
                            "roundup_power2_divisions",
                            P::Dict(
                                (0..70)
                                    .map(|i| {
                                        (
                                            s(&(1u128 << i.min(100)).to_string()),
                                            P::Int(i64::MAX - i),
                                        )
                                    })
                                    .collect(),
                            ),
                        ),
                        ("garbage_collection_threshold", P::Float(f64::INFINITY)),
                        ("expandable_segments", P::Bool(true)),
                    ]),
                ),
            ]),
        ),
        (
            "annotations_extremes",
            d(vec![
                ("segments", P::List(vec![])),
                (
                    "device_traces",
                    P::List(vec![P::List(vec![
                        ev("alloc", u(1), u(512)),
                        ev("alloc", u(1 << 20), u(512)),
                    ])]),
                ),
                (
                    "external_annotations",
                    P::List(vec![
                        d(vec![
                            ("name", s("ProfilerStep#1")),
                            ("stage", s("START")),
                            ("time_us", P::Int(i64::MAX)),
                            ("device", P::Int(-1)),
                        ]),
                        d(vec![
                            ("name", s("ProfilerStep#1")),
                            ("stage", s("END")),
                            ("time_us", P::Int(i64::MIN)),
                        ]),
                        d(vec![
                            ("name", s("ProfilerStep#2")),
                            ("stage", s("END")),
                            ("time_us", P::Int(0)),
                        ]),
                        P::Tuple(vec![]),
                    ]),
                ),
            ]),
        ),
        (
            "bare_list_of_garbage_segments",
            P::List(vec![
                d(vec![("total_size", u(MAX)), ("address", u(MAX))]),
                d(vec![("total_size", P::None)]),
            ]),
        ),
    ]
}

#[test]
fn named_hostile_snapshots_never_panic() {
    for (name, v) in named_cases() {
        match run(name, &pickle(&v)) {
            Ok(_) => {}
            Err(e) => {
                // A refusal must say where and what.
                assert!(
                    e.contains(name)
                        && (e.contains("expected") || e.contains("not a memory snapshot")),
                    "{name}: {e}"
                );
            }
        }
    }
    // The shapes that cannot be a snapshot are refused, not guessed at.
    let e = run("device_traces_is_a_dict", &pickle(&named_cases()[7].1)).unwrap_err();
    assert!(e.contains("device_traces: expected a list"), "{e}");
    let e = run("segments_is_a_str", &pickle(&named_cases()[8].1)).unwrap_err();
    assert!(e.contains("segments: expected a list"), "{e}");
}

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize].clone()
    }
}

fn interesting_u64(r: &mut Rng, base: u64) -> P {
    match r.below(12) {
        0 => u(0),
        1 => u(MAX),
        2 => u(MAX - r.below(4096)),
        3 => u(1 << 63),
        4 => P::Int(-(r.below(1 << 20) as i64) - 1),
        5 => P::Big(vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80]),
        6 => s("12"),
        7 => P::None,
        _ => u(base + r.below(8) * 512 * (1 << r.below(14))),
    }
}

fn random_snapshot(r: &mut Rng) -> P {
    let actions = [
        "alloc",
        "free_requested",
        "free_completed",
        "segment_alloc",
        "segment_free",
        "segment_map",
        "segment_unmap",
        "snapshot",
        "oom",
        "bogus",
    ];
    let states = [
        "active_allocated",
        "active_pending_free",
        "inactive",
        "weird",
    ];
    let base = r.pick(&[0u64, 0x7f00_0000_0000, MAX - (64 << 20), 1 << 63]);
    let addr = |r: &mut Rng| {
        if r.below(5) == 0 {
            interesting_u64(r, base)
        } else {
            u(base.wrapping_add(r.below(64) * (1 << 20)))
        }
    };
    let size = |r: &mut Rng| {
        if r.below(5) == 0 {
            interesting_u64(r, 0)
        } else {
            u(512 * (1 + r.below(8192)))
        }
    };
    let segments: Vec<P> = (0..r.below(6))
        .map(|_| {
            let a = addr(r);
            let blocks = (0..r.below(5))
                .map(|_| {
                    blk(
                        if r.below(3) == 0 { P::None } else { addr(r) },
                        size(r),
                        r.pick(&states),
                    )
                })
                .collect();
            let mut fields = vec![
                ("device", P::Int(r.pick(&[0i64, 0, 1, 3, -1, i64::MAX]))),
                ("address", a),
                ("total_size", size(r)),
                ("stream", interesting_u64(r, 0)),
                ("segment_type", s(r.pick(&["small", "large", "huge"]))),
                ("blocks", P::List(blocks)),
            ];
            if r.below(3) == 0 {
                fields.push(("is_expandable", P::Bool(true)));
            }
            d(fields)
        })
        .collect();
    let traces: Vec<P> = (0..1 + r.below(2))
        .map(|_| {
            let mut t = 0i64;
            P::List(
                (0..r.below(60))
                    .map(|_| {
                        t += r.below(1000) as i64 - 100;
                        let mut fields = vec![
                            ("action", s(r.pick(&actions))),
                            ("addr", addr(r)),
                            ("size", size(r)),
                            ("stream", P::Int(r.below(3) as i64)),
                            ("frames", frames()),
                        ];
                        if r.below(8) != 0 {
                            fields.push(("time_us", P::Int(t)));
                        }
                        if r.below(4) == 0 {
                            fields.push(("device_free", interesting_u64(r, 0)));
                        }
                        d(fields)
                    })
                    .collect(),
            )
        })
        .collect();
    let mut root = vec![
        ("segments", P::List(segments)),
        ("device_traces", P::List(traces)),
    ];
    if r.below(3) == 0 {
        root.push((
            "allocator_settings",
            d(vec![
                (
                    "max_split_size",
                    P::Int(r.pick(&[-1i64, 0, 1 << 20, i64::MAX])),
                ),
                (
                    "roundup_power2_divisions",
                    P::List(
                        (0..r.below(20))
                            .map(|_| P::Int(r.pick(&[0i64, 1, 2, 4, 3, 1 << 40, -1, i64::MAX])))
                            .collect(),
                    ),
                ),
                ("expandable_segments", P::Bool(r.below(2) == 0)),
            ]),
        ));
    }
    if r.below(3) == 0 {
        root.push((
            "external_annotations",
            P::List(
                (0..r.below(8))
                    .map(|i| {
                        d(vec![
                            ("name", s(&format!("ProfilerStep#{}", i / 2))),
                            ("stage", s(if i % 2 == 0 { "START" } else { "END" })),
                            ("time_us", P::Int(r.next() as i64 >> r.below(64))),
                        ])
                    })
                    .collect(),
            ),
        ));
    }
    d(root)
}

#[test]
fn thousands_of_random_hostile_snapshots_never_panic() {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let n = 3000;
    let mut analysed = 0;
    for i in 0..n {
        let v = random_snapshot(&mut r);
        let bytes = pickle(&v);
        let name = format!("random_{i}.pickle");
        let res = std::panic::catch_unwind(|| run(&name, &bytes));
        match res {
            Ok(Ok(_)) => analysed += 1,
            Ok(Err(_)) => {}
            Err(_) => {
                let out = std::env::temp_dir().join(format!("memscope-hostile-{i}.pickle"));
                std::fs::write(&out, &bytes).unwrap();
                panic!("case {i} panicked; input written to {}", out.display());
            }
        }
    }
    assert!(
        analysed > n / 2,
        "only {analysed} of {n} random snapshots were analysed"
    );
}

/// Every value a trace entry can hold comes back from the packed model exactly (issue #43):
/// addresses and sizes up to `u64::MAX`, times of any sign and size or none, more distinct
/// streams than the model's 16-bit stream table holds, free bytes only where written.
#[test]
fn extreme_entry_values_load_exactly() {
    let times = [None, Some(i64::MIN), Some(-1), Some(0), Some(i64::MAX)];
    let vals = [0, 1, MAX, MAX - 1, 1 << 63];
    let n = 90_000usize;
    let mut trace = Vec::with_capacity(n);
    let mut want = Vec::with_capacity(n);
    for i in 0..n {
        let (addr, size) = (vals[i % 5], vals[(i / 5) % 5]);
        let stream = if i % 5 == 0 { 0 } else { MAX - i as u64 };
        let time = times[(i / 25) % 5];
        let free = (i % 7 == 0).then_some(vals[(i / 7) % 5]);
        let action = if free.is_some() { "oom" } else { "alloc" };
        let mut pairs = vec![
            ("action", s(action)),
            ("addr", u(addr)),
            ("size", u(size)),
            ("stream", u(stream)),
        ];
        if let Some(t) = time {
            pairs.push(("time_us", P::Int(t)));
        }
        if let Some(f) = free {
            pairs.push(("device_free", u(f)));
        }
        pairs.push(("frames", frames()));
        trace.push(d(pairs));
        want.push((action, addr, size, stream, time, free));
    }
    let bytes = pickle(&snap(Vec::new(), trace));
    let got = memscope::load::snapshot_from_bytes(Path::new("extreme.pickle"), &bytes).unwrap();
    let ev = &got.devices[0].events;
    assert_eq!(ev.len(), n);
    for (i, w) in want.iter().enumerate() {
        let e = ev.data(i).unwrap();
        let seen = (
            e.action.name(),
            e.addr,
            e.size,
            e.stream,
            e.time_us,
            e.device_free,
        );
        assert_eq!(seen, *w, "entry {i}");
        assert_eq!(ev[i].time_us(), w.4, "entry {i}");
        assert_eq!(ev.stream(i), w.3, "entry {i}");
    }
}
