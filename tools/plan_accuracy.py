#!/usr/bin/env python3
"""memscope plan against the ground truth of fixtures/plan/truth.json (issue 27).

For each workload: `memscope plan` on the capture at b0 (and, with --with, the fit from the
capture at 2*b0) at every batch/sequence the truth measured, and the largest batch under the
workload's cap; prints a Markdown table (real against predicted, error in %). The truth comes
from the workloads (fresh processes on the GPU), never from memscope.

usage: tools/plan_accuracy.py [--bin target/release/memscope] [--with] [--json OUT]
"""
import argparse, json, os, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PLAN = os.path.join(ROOT, "fixtures", "plan")


def run_plan(binary, capture, b0, seq, at, cap, other=None):
    cmd = [binary, "plan", capture, "--batch", str(b0), "--format", "json", "--cap", str(cap)]
    if seq:
        cmd += ["--seq", str(seq)]
    for b, s in at:
        cmd += ["--at", f"{b}x{s}" if s else str(b)]
    if other:
        cmd += ["--with", other[0], "--with-batch", str(other[1])]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def pct(pred, real):
    return 100.0 * (pred - real) / real


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "memscope"))
    ap.add_argument("--with", dest="with_", action="store_true", help="fit from the two captures")
    ap.add_argument("--json", help="write the rows as JSON here")
    a = ap.parse_args()
    truth = json.load(open(os.path.join(PLAN, "truth.json")))
    rows, maxrows = [], []
    for name, w in truth["workloads"].items():
        b0, seq = w["b0"], w["seq"]
        cap = w["cap"]["cap_bytes"]
        cap_path = os.path.join(PLAN, f"{name}_b{b0}.pickle.gz")
        other = (os.path.join(PLAN, f"{name}_b{2 * b0}.pickle.gz"), 2 * b0) if a.with_ else None
        pts = [t for t in w["truth"] if t.get("fits") and t.get("max_memory_allocated")]
        at = [(t["batch"], t["seq"] if seq else None) for t in pts]
        doc = run_plan(a.bin, cap_path, b0, seq, at, cap, other)
        preds = doc["devices"][0]["predictions"]
        for t, p in zip(pts, preds):
            assert p["batch"] == t["batch"], (p, t)
            rows.append({
                "workload": name, "batch": t["batch"], "seq": t["seq"],
                "real_alloc": t["max_memory_allocated"], "pred_alloc": p["peak_allocated_bytes"],
                "upper_alloc": p["peak_allocated_upper_bytes"],
                "real_res": t["max_memory_reserved"], "pred_res": p["peak_reserved_bytes"],
                "upper_res": p["peak_reserved_upper_bytes"],
            })
        maxrows.append({
            "workload": name, "cap": cap, "real": w["cap"]["max_batch"],
            "pred": doc["max_batch"],
            "central": doc["devices"][0]["max_batch"]["central_batch"] if doc["max_batch"] else None,
        })
    mib = lambda v: f"{v / 2**20:.1f}"
    print("| workload | batch | seq | real alloc MiB | predicted | err % | real reserved MiB | predicted | err % |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['workload']} | {r['batch']} | {r['seq'] or ''} | {mib(r['real_alloc'])} | {mib(r['pred_alloc'])} | "
              f"{pct(r['pred_alloc'], r['real_alloc']):+.1f} | {mib(r['real_res'])} | {mib(r['pred_res'])} | {pct(r['pred_res'], r['real_res']):+.1f} |")
    print()
    print("| workload | cap MiB | real max batch | predicted | err % | likelier reading |")
    print("|---|---:|---:|---:|---:|---:|")
    for m in maxrows:
        e = pct(m["pred"], m["real"]) if m["pred"] else float("nan")
        print(f"| {m['workload']} | {mib(m['cap'])} | {m['real']} | {m['pred']} | {e:+.1f} | {m['central']} |")
    if a.json:
        json.dump({"peaks": rows, "max_batch": maxrows}, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
