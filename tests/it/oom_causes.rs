//! The verdict and OOM cause on every capture whose story is known (fixtures/README.md and
//! ../shared/fixtures/README.md): the diagnosis users act on.

use std::path::Path;

/// The verdict kind, the OOM causes, and the leak findings as (kind, allocation line).
type Outcome = (String, Vec<String>, Vec<(String, Option<u32>)>);

/// A capture and what it must give: directory, file, verdict, OOM causes, first leak (kind, line).
type Case<'a> = (
    &'a str,
    &'a str,
    &'a str,
    &'a [&'a str],
    Option<(&'a str, u32)>,
);

use crate::shared;

fn verdict(dir: &str, name: &str) -> Option<Outcome> {
    let p = match dir.strip_prefix("../shared/") {
        Some(rel) => shared::path(&format!("{rel}/{name}"))?,
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join(dir).join(name),
    };
    let snap = memscope::load::load_snapshot(&p).unwrap();
    let a = memscope::analysis::analyze_snapshot(&snap, &p, 0);
    let v = memscope::report::json::document(&a);
    let causes = a
        .devices
        .iter()
        .flat_map(|d| d.ooms.iter().map(|o| o.cause.name().to_string()))
        .collect();
    let leaks = v["leaks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["kind"].as_str().unwrap().to_string(),
                l["site"]["line"].as_u64().map(|x| x as u32),
            )
        })
        .collect();
    Some((a.verdict.kind.to_string(), causes, leaks))
}

#[test]
fn every_known_capture_gets_its_cause() {
    let own = "fixtures";
    let shared = "../shared/fixtures";
    let cases: &[Case] = &[
        (
            own,
            "leak_oom.pickle",
            "oom_leak",
            &["leak"],
            Some(("retained_graph", 150)),
        ),
        (
            own,
            "fragmentation_oom.pickle",
            "oom_fragmentation",
            &["fragmentation"],
            None,
        ),
        (
            own,
            "expandable_frag_oom.pickle",
            "oom_fragmentation",
            &["fragmentation"],
            None,
        ),
        (
            own,
            "huge_request_oom.pickle",
            "oom_capacity",
            &["capacity"],
            None,
        ),
        // A loop without model code whose temporaries are freed each iteration, keeping 5 MiB per step.
        (
            own,
            "wi_leak_default.pickle",
            "oom_leak",
            &["leak"],
            Some(("tensor_cache", 255)),
        ),
        (
            own,
            "wi_leak_expandable.pickle",
            "oom_leak",
            &["leak"],
            Some(("tensor_cache", 255)),
        ),
        (own, "clean.pickle", "ok", &[], None),
        (own, "two_streams.pickle", "ok", &[], None),
        (own, "expandable.pickle", "ok", &[], None),
        (own, "ring_overflow.pickle", "ok", &[], None),
        (
            own,
            "leak_val_no_grad.pickle",
            "leak",
            &[],
            Some(("retained_graph", 414)),
        ),
        (
            shared,
            "val_no_grad_oom.pickle",
            "oom_leak",
            &["leak"],
            Some(("retained_graph", 60)),
        ),
        (
            shared,
            "fragmentation_oom.pickle",
            "oom_fragmentation",
            &["fragmentation", "fragmentation"],
            None,
        ),
        (shared, "clean_training.pickle", "ok", &[], None),
    ];
    for (dir, name, kind, causes, leak) in cases {
        let Some((k, c, leaks)) = verdict(dir, name) else {
            continue;
        };
        assert_eq!(&k, kind, "{name}: verdict");
        assert_eq!(
            c,
            causes.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            "{name}: causes"
        );
        match leak {
            Some((lk, line)) => assert_eq!(
                leaks.first(),
                Some(&(lk.to_string(), Some(*line))),
                "{name}: {leaks:?}"
            ),
            None => assert!(leaks.is_empty(), "{name}: unexpected leaks {leaks:?}"),
        }
    }
}
