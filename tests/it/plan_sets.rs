//! A plan truth set of `fixtures/plan` (holdout5, holdout6, ...) as the tests read it: its
//! truth.json, its captures, the card's measured peaks and trials, and the plan of a workload
//! from one, two or three of its captures (b0; and 2*b0; and the set's third capture). The
//! sets' tests each wrote this; one copy keeps them reading the sets the same way.

use std::path::{Path, PathBuf};

use memscope::analysis::plan::{self, Ask, Other, Plan, Shape};
use memscope::analysis::whatif::AllocConf;
use memscope::model::Snapshot;
use serde_json::Value;

/// `fixtures/plan`.
pub(crate) fn plan_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/plan")
}

/// One set: its folder and its truth.
pub(crate) struct TruthSet {
    dir: PathBuf,
    pub(crate) truth: Value,
}

impl TruthSet {
    /// `fixtures/plan/NAME`.
    pub(crate) fn open(name: &str) -> TruthSet {
        let dir = plan_dir().join(name);
        let truth = serde_json::from_str(&std::fs::read_to_string(dir.join("truth.json")).unwrap())
            .unwrap();
        TruthSet { dir, truth }
    }

    /// The workloads' names, in truth.json's order.
    pub(crate) fn names(&self) -> Vec<String> {
        self.truth["workloads"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    }

    pub(crate) fn workload(&self, w: &str) -> &Value {
        &self.truth["workloads"][w]
    }

    /// The card's largest batch under the set's cap.
    pub(crate) fn max_batch(&self, w: &str) -> u64 {
        self.workload(w)["cap"]["max_batch"].as_u64().unwrap()
    }

    fn capture(&self, w: &str, batch: u64) -> PathBuf {
        self.dir.join(format!("{w}_b{batch}.pickle.gz"))
    }

    /// The batches of `w`'s captures: b0, 2*b0, then the set's third (if any).
    fn capture_batches(&self, w: &str) -> Vec<u64> {
        let wl = self.workload(w);
        let b0 = wl["b0"].as_u64().unwrap();
        let mut out = vec![b0, 2 * b0];
        out.extend(
            wl["captures"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["batch"].as_u64())
                .find(|&b| b != b0 && b != 2 * b0),
        );
        out
    }

    /// The plan of `w` from its first `captures` captures, at `at` (batches, at the recorded
    /// sequence length), under the set's cap.
    pub(crate) fn plan(&self, w: &str, captures: usize, at: &[u64]) -> Plan {
        let wl = self.workload(w);
        let seq = wl["seq"].as_u64();
        let batches = self.capture_batches(w);
        assert!(
            captures >= 1 && captures <= batches.len(),
            "{w}: {captures}"
        );
        let p = self.capture(w, batches[0]);
        let (s, len) = memscope::load::load_snapshot_sized(&p).unwrap();
        let a = memscope::analysis::analyze_snapshot(&s, &p, len);
        let ask = Ask {
            recorded: Shape {
                batch: batches[0],
                seq,
            },
            at: at.iter().map(|&batch| Shape { batch, seq }).collect(),
            cap: wl["cap"]["cap_bytes"].as_u64(),
            conf: AllocConf::default(),
        };
        let others: Vec<(Snapshot, u64)> = batches[1..captures]
            .iter()
            .map(|&b| {
                let snap = memscope::load::load_snapshot_sized(&self.capture(w, b))
                    .unwrap()
                    .0;
                (snap, b)
            })
            .collect();
        let os: Vec<Other> = others
            .iter()
            .map(|(snap, b)| Other {
                snap,
                shape: Shape { batch: *b, seq },
            })
            .collect();
        plan::plan_all(&s, &a, &ask, &os).unwrap().remove(0)
    }
}

/// Real (batch, allocated, reserved) at every measured batch but b0, at the recorded length.
pub(crate) fn points(wl: &Value) -> Vec<(u64, u64, u64)> {
    let b0 = wl["b0"].as_u64().unwrap();
    let mut out: Vec<(u64, u64, u64)> = wl["truth"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["fits"] == true && t["batch"].as_u64() != Some(b0))
        .map(|t| {
            (
                t["batch"].as_u64().unwrap(),
                t["max_memory_allocated"].as_u64().unwrap(),
                t["max_memory_reserved"].as_u64().unwrap(),
            )
        })
        .collect();
    out.sort_unstable();
    out.dedup_by_key(|t| t.0);
    out
}

/// The card's trials under the cap: (batch, fitted every time, failed at least once).
pub(crate) fn trials(wl: &Value) -> Vec<(u64, bool, bool)> {
    let mut out: Vec<(u64, bool, bool)> = wl["cap"]["trials_by_batch"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(b, v)| {
            let failed = v["failed"].as_u64().unwrap() > 0;
            (b.parse().unwrap(), !failed, failed)
        })
        .collect();
    out.sort_unstable();
    out
}
