//! One source for every figure and bound (issue 23): the text report and the HTML report show
//! the same current value and the same peak (exact, `>=` bound or unknown) for each counter of
//! each device, and a lower bound is never below the value the dump holds.
//!
//! The case that broke: `verl_pending_free` (no event log, `active_pending_free` blocks, so
//! active > allocated) showed "active 23.8 GiB | ≥ 23.2 GiB" in HTML and "unknown" in text.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::shared;

fn memscope(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_memscope"))
        .env("NO_COLOR", "1")
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// `(counter, current, peak)` rows of the text report's MEMORY tables, in order.
fn text_rows(text: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut in_table = false;
    for l in text.lines() {
        if l.starts_with("MEMORY ") {
            in_table = true;
            continue;
        }
        if !in_table {
            continue;
        }
        let t = l.trim_start();
        let Some(name) = ["allocated", "active", "reserved", "requested"]
            .into_iter()
            .find(|n| t.starts_with(&format!("{n} ")))
        else {
            if !l.trim().is_empty() && !l.contains("current") {
                in_table = false;
            }
            continue;
        };
        // "allocated  23.2 GiB  >= 23.2 GiB": the current is two words, the peak the rest.
        let rest: Vec<&str> = t[name.len()..].split_whitespace().collect();
        out.push((name.to_owned(), rest[..2].join(" "), rest[2..].join(" ")));
    }
    out
}

/// The same rows from the HTML report's device tables.
fn html_rows(html: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut rest = html;
    let open = "<tr><td>";
    while let Some(i) = rest.find(open) {
        rest = &rest[i + open.len()..];
        let cells: Vec<&str> = rest
            .split("</tr>")
            .next()
            .unwrap()
            .split("</td>")
            .map(|c| c.rsplit('>').next().unwrap_or(c))
            .collect();
        if ["allocated", "active", "reserved", "requested"].contains(&cells[0]) && cells.len() >= 3
        {
            out.push((
                cells[0].to_owned(),
                cells[1].to_owned(),
                cells[2].replace("≥ ", ">= "),
            ));
        }
    }
    out
}

fn captures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut v: Vec<PathBuf> = ["clean.pickle", "leak_oom.pickle", "ring_overflow.pickle"]
        .iter()
        .map(|n| root.join("fixtures").join(n))
        .chain([root.join("fixtures/attribution/late_recording.pickle.gz")])
        .collect();
    if !cfg!(memscope_no_shared) {
        for n in [
            "verl_pending_free",
            "llm_inference_oom",
            "select_n_t21_b",
            "octree_nca_b_segment_free",
        ] {
            if let Some(p) = shared::path(&format!("corpus/snapshots/{n}.pickle")) {
                v.push(p);
            }
        }
    }
    v
}

#[test]
fn text_and_html_show_one_reading_of_every_counter() {
    for c in captures() {
        let c = c.to_str().unwrap();
        let text = text_rows(&memscope(&["analyze", c]));
        let html = html_rows(&memscope(&["report", c, "-o", "-"]));
        assert!(text.len() >= 4, "{c}: {text:?}");
        assert_eq!(text, html, "{c}");
        for (name, cur, peak) in &text {
            assert_ne!(
                peak, "unknown",
                "{c} {name}: a dump's value bounds its peak"
            );
            let num = |s: &str| -> f64 {
                let mut w = s.trim_start_matches(">= ").split(' ');
                let v: f64 = w.next().unwrap().parse().unwrap();
                let unit = match w.next().unwrap() {
                    "B" => 1.0,
                    "KiB" => 1024.0,
                    "MiB" => 1024.0 * 1024.0,
                    "GiB" => 1024.0 * 1024.0 * 1024.0,
                    u => panic!("unit {u}"),
                };
                v * unit
            };
            assert!(
                num(peak) >= num(cur) * 0.999,
                "{c} {name}: peak {peak} below current {cur}"
            );
        }
    }
}
