//! Leak and step analysis on real captures (`/work/shared/fixtures`, `fixtures/`).

use std::path::{Path, PathBuf};

use memscope::analysis::{categories, leaks, replay, steps};
use memscope::model::{Device, Snapshot};

struct Run {
    snap: Snapshot,
    dev: Device,
    tl: replay::Timeline,
    steps: Vec<steps::Step>,
    leaks: Vec<leaks::Leak>,
}

fn shared(name: &str) -> PathBuf {
    Path::new("/work/shared/fixtures").join(name)
}

fn run(path: &Path) -> Option<Run> {
    if !path.exists() {
        eprintln!("skipping: {} is missing", path.display());
        return None;
    }
    let snap = memscope::load::load_snapshot(path).expect("loads");
    let dev = snap.devices.first().cloned().unwrap_or_default();
    let tl = replay::replay(&dev, &snap.settings);
    let steps = steps::split(&snap, &dev, &tl);
    let leaks = leaks::find(&snap, &dev, &tl, &steps);
    Some(Run { snap, dev, tl, steps, leaks })
}

fn show(name: &str, r: &Run) {
    let n_iter = r.steps.iter().filter(|s| s.is_iteration()).count();
    eprintln!("== {name}: {} steps ({n_iter} iterations)", r.steps.len());
    for s in r.steps.iter().take(3).chain(r.steps.iter().rev().take(3).rev()) {
        eprintln!("   {:?}", s);
    }
    for l in &r.leaks {
        eprintln!(
            "  leak {} site={:?} cause={:?} growth={:.0} B/step {:.2} t/step steps={} live={} count={} r2={:.3} conf={}",
            l.kind, l.site, l.cause_site, l.growth_bytes_per_step, l.growth_tensors_per_step, l.steps, l.live_bytes, l.count, l.r2, l.confidence
        );
        for rs in &l.related_sites {
            eprintln!("     related {:?} {:.0} B/step {:.2} t/step", rs.site, rs.growth_bytes_per_step, rs.growth_tensors_per_step);
        }
        eprintln!("     {}", l.explanation);
    }
}

#[test]
fn print_all() {
    for n in ["val_no_grad_oom.pickle", "clean_training.pickle", "fragmentation_oom.pickle"] {
        if let Some(r) = run(&shared(n)) {
            show(n, &r);
            let at = r.tl.peaks.allocated.event.unwrap();
            let c = categories::at_event(&r.snap, &r.dev, &r.tl, &r.steps, at);
            eprintln!("  categories at peak: {}", serde_json::to_string(&c).unwrap());
            for o in &r.tl.ooms {
                eprintln!("  oom signal: {:?}", leaks::leak_signal_before(&r.snap, &r.dev, &r.tl, o.event));
            }
        }
    }
}
