#!/usr/bin/env python3
"""The reserved error band of `memscope plan`'s fit/OOM column, measured on the ground truth (issue 39).

For every workload of the given truth sets, with one capture and with two (b0, 2*b0): the replay at the real
largest batch (which fits on the card, 4 of 4 trials) and at the real first failing batch (which fails 4 of 4)
under the cap scaled by 1+g, g on a grid. `over` is the least g >= 0 at which the real largest batch replays
without an OOM (the share a predicted OOM must clear not to call a real fit an OOM); `under` is the least
|g|, g <= 0, at which the first failing batch fails (the share a predicted fit must clear not to call a real
OOM a fit). Prints one row per workload and the largest of each, with and without cuDNN workloads.

usage: tools/plan_band.py --bin target/debug/memscope [SET ...]   (default: the four sets before holdout4)
"""
import argparse, json, os, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GRID = [0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.10, 0.15, 0.21, 0.30]


def ooms(binary, d, name, w, with_, cap):
    b0, seq = w["b0"], w["seq"]
    m, f = w["cap"]["max_batch"], w["cap"]["first_failing_batch"]
    cmd = [binary, "plan", os.path.join(d, f"{name}_b{b0}.pickle.gz"), "--batch", str(b0), "--format", "json",
           "--cap", str(cap), "--at", str(m), "--at", str(f)]
    if seq:
        cmd += ["--seq", str(seq)]
    if with_:
        cmd += ["--with", os.path.join(d, f"{name}_b{2 * b0}.pickle.gz"), "--with-batch", str(2 * b0)]
    doc = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["data"]
    p = doc["devices"][0]
    return [x["oom"] for x in p["predictions"]], p.get("convolution_requests", 0) > 0


def band(binary, d, name, w, with_):
    cap = w["cap"]["cap_bytes"]
    over = under = None
    conv = False
    for g in GRID:
        if over is None:
            (at_max, _), conv = ooms(binary, d, name, w, with_, int(cap * (1 + g)))
            if not at_max:
                over = g
        if under is None:
            (_, at_fail), conv = ooms(binary, d, name, w, with_, int(cap * (1 - g)))
            if at_fail:
                under = g
        if over is not None and under is not None:
            break
    return over, under, conv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "debug", "memscope"))
    ap.add_argument("sets", nargs="*")
    a = ap.parse_args()
    sets = a.sets or [os.path.join(ROOT, "fixtures", "plan", s) for s in ("", "holdout", "holdout2", "holdout3")]
    worst = {}
    for d in sets:
        truth = json.load(open(os.path.join(d, "truth.json")))
        for name, w in truth["workloads"].items():
            if not w["cap"].get("max_batch") or not w["cap"].get("first_failing_batch"):
                continue
            for with_ in (False, True):
                over, under, conv = band(a.bin, d, name, w, with_)
                print(f"{os.path.relpath(d, ROOT)} {name} {'two' if with_ else 'one'} conv={conv} over={over} under={under}",
                      flush=True)
                k = "cudnn" if conv else "kernels keep"
                o, u = worst.get(k, (0.0, 0.0))
                worst[k] = (max(o, GRID[-1] if over is None else over), max(u, GRID[-1] if under is None else under))
    for k, (o, u) in worst.items():
        print(f"WORST {k}: over {o:.2f} under {u:.2f}")


if __name__ == "__main__":
    main()
