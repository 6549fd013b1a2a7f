#!/usr/bin/env python3
"""Why a plan's largest batch misses the card's (issue 39): one row per set, workload and capture count.

For each workload of the truth sets, with one, two and three captures (as tools/plan_accuracy.py runs them):
the plan's largest batch against the card's (R), and the plan's replay at R set against the card's run at R
(its trials under the cap: `attempts` and `repeats` of truth.json, the largest peaks of those that fitted).
The columns that find the cause:
- `central@R`, `upper@R`: the allocated and reserved peaks of the two readings at R, no cap, against the card's
  (the model's error at the real largest batch; the card's reserved under its cap is at most the cap).
- `cap change for R`: the least change of the cap (on a grid, as a share of it) under which the upper reading at R
  replays (negative: R still replays under the cap cut by that share). The fit column, and so the largest batch
  (since session 14 the largest batch the column says fits), asks for R to replay under the cap and under the cap
  cut by the plan's band in either placement. `room kept`: the band's lower side, and `band rule` the rule that
  gave it (since session 15 each plan's own, src/analysis/plan/band.rs: `one_capture`, `convolutions` and
  `inexact_terms` keep the measured 5%; `explained`, every paired request on an exact term, takes the largest of 1%,
  the 20 MiB segment against the cap and the inferred share of the recorded peak, at most 5%; any rule is widened by
  the replay's error at the captures).
- `verdict at R`: the fit column at R; `verdict at the answer`: at the plan's largest batch (always `fits`).
  `said fits where the card failed`: the batches the card failed at where the column says `fits` (never one).
- `cause`: `model` (the upper reading fails R under the cap itself and the likelier reading's reserved peak at R
  without a cap is over the cap: a peak over-predicted), `upper` (the same failure where the likelier reading fits:
  the unsure requests' growth), `band` (R replays under the cap but not under it less the band in both placements: the
  plan's band), `window` (the column says R fits but a batch just below it does not), `limit` (the search
  stopped at its ceiling, SEARCH_LIMIT times the first capture's batch, and the plan says "this or more": R lies
  beyond it; since session 16, before which these rows read `band`), `above` (the answer is above R), or `-` where
  the answer is within 5% under R.

usage: tools/plan_maxbatch.py [--bin target/release/memscope] [--only SET]
"""
import argparse, json, os, subprocess

import plan_accuracy as pa

GRID = [-0.10, -0.08, -0.06, -0.05, -0.04, -0.03, -0.02, -0.01, 0.0, 0.01, 0.02, 0.03, 0.05, 0.08, 0.10, 0.15, 0.20, 0.30]


def cmd_for(binary, d, name, w, n, cap, at):
    b0, seq = w["b0"], w["seq"]
    cmd = [binary, "plan", os.path.join(d, f"{name}_b{b0}.pickle.gz"), "--batch", str(b0), "--format", "json",
           "--cap", str(cap)] + [x for b in at for x in ("--at", str(b))]
    if seq:
        cmd += ["--seq", str(seq)]
    if n >= 2:
        cmd += ["--with", os.path.join(d, f"{name}_b{2 * b0}.pickle.gz"), "--with-batch", str(2 * b0)]
    if n == 3:
        third = pa.third_capture(d, name, w)
        cmd += ["--also", third[0], "--also-batch", str(third[1])]
    return cmd


def plan(binary, d, name, w, n, cap, at):
    out = subprocess.run(cmd_for(binary, d, name, w, n, cap, at), check=True, capture_output=True, text=True)
    return json.loads(out.stdout)["data"]["devices"][0]


def card_at(w, b):
    """The card's largest peaks at batch b under the cap, over the trials that fitted."""
    runs = [r for r in w["cap"].get("attempts", []) + w["cap"].get("repeats", [])
            if r.get("batch") == b and r.get("fits") and r.get("max_memory_allocated")]
    if not runs:
        return None
    return max(r["max_memory_allocated"] for r in runs), max(r["max_memory_reserved"] for r in runs)


def pct(a, b):
    return 100.0 * (a - b) / b


def row(binary, d, name, w, n):
    cap, real = w["cap"]["cap_bytes"], w["cap"]["max_batch"]
    trials = {int(b): v for b, v in w["cap"]["trials_by_batch"].items()}
    dev = plan(binary, d, name, w, n, cap, sorted(set(trials) | {real}))
    mb = dev["max_batch"] or {}
    pred, central, margin = mb.get("batch"), mb.get("central_batch"), mb.get("margin_bytes", 0)
    at = {p["batch"]: p for p in dev["predictions"]}
    p = at[real]
    raise_ = None
    for g in GRID:
        if not plan(binary, d, name, w, n, int(cap * (1 + g)), [real])["predictions"][0]["oom"]:
            raise_ = g
            break
    card = card_at(w, real)
    failed = sorted(b for b, v in trials.items() if v["failed"] > 0)
    said_fit_failed = [b for b in failed if at[b].get("verdict") == "fits"]
    err = pct(pred, real) if pred else None
    verdict_at_answer = plan(binary, d, name, w, n, cap, [pred])["predictions"][0].get("verdict") if pred else None
    if err is not None and -5.0 <= err <= 0.0:
        cause = "-"
    elif err is not None and err > 0:
        cause = "above"
    elif mb.get("at_search_limit"):
        cause = "limit"
    elif p["oom"]:
        cause = "model" if plan_central_fails(binary, d, name, w, n, cap, real, p, card) else "upper"
    elif p.get("verdict") != "fits":
        cause = "band"
    else:
        cause = "window"
    return dict(set=os.path.relpath(d, pa.ROOT), workload=name, n=n, real=real, pred=pred, central=central,
                rule=dev["band"]["rule"],
                margin=margin / cap, err=err, p=p, card=card, raise_=raise_, verdict=p.get("verdict"),
                said_fit_failed=said_fit_failed, cause=cause,
                verdict_at_answer=verdict_at_answer)


def plan_central_fails(binary, d, name, w, n, cap, real, p, card):
    """Whether the likelier reading alone exceeds what the card holds at R: its reserved peak without a cap over
    the cap (the card ran R under the cap, so its reserved stayed under it)."""
    return p["peak_reserved_bytes"] > cap


def fmt(r):
    mib = lambda v: f"{v / 2**20:.0f}"
    p, c = r["p"], r["card"]
    if c:
        ca, cr = c
        m = (f"{mib(p['peak_allocated_bytes'])}/{mib(p['peak_reserved_bytes'])} "
             f"({pct(p['peak_allocated_bytes'], ca):+.1f}%/{pct(p['peak_reserved_bytes'], cr):+.1f}%)")
        u = (f"{mib(p['peak_allocated_upper_bytes'])}/{mib(p['peak_reserved_upper_bytes'])} "
             f"({pct(p['peak_allocated_upper_bytes'], ca):+.1f}%/{pct(p['peak_reserved_upper_bytes'], cr):+.1f}%)")
        card = f"{mib(ca)}/{mib(cr)}"
    else:
        m = f"{mib(p['peak_allocated_bytes'])}/{mib(p['peak_reserved_bytes'])}"
        u = f"{mib(p['peak_allocated_upper_bytes'])}/{mib(p['peak_reserved_upper_bytes'])}"
        card = "-"
    e = f"{r['err']:+.1f}%" if r["err"] is not None else "-"
    g = f"{100 * r['raise_']:+.0f}%" if r["raise_"] is not None else ">30%"
    sff = ",".join(map(str, r["said_fit_failed"])) or "none"
    return (f"| {r['set']} | {r['workload']} | {r['n']} | {r['pred']} ({r['central']}) | {r['real']} | {e} | "
            f"{r['verdict_at_answer']} | {100 * r['margin']:.1f}% | {r['rule']} | {card} | {m} | {u} | {g} | {r['verdict']} | {sff} | "
            f"{r['cause']} |")


HEADER = ("| set | workload | captures | largest (likelier) | real R | error | verdict at the answer | room kept | band rule | "
          "card at R alloc/res MiB | central at R | upper at R | cap change for R | verdict at R | "
          "said fits where the card failed | cause |\n"
          "|---|---|---:|---:|---:|---:|---|---:|---|---:|---:|---:|---:|---|---|---|")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(pa.ROOT, "target", "release", "memscope"))
    ap.add_argument("--only")
    ap.add_argument("--all", action="store_true", help="every row, not only the misses")
    a = ap.parse_args()
    print("# Why the plan's largest batch misses the card's (issue 39)\n")
    print("Made by `python3 tools/plan_maxbatch.py --all > docs/plan_maxbatch.md` (columns: the script's docstring). "
          "One row per truth set, workload and capture count (one: b0; two: b0 and 2*b0; three: and the set's "
          "third capture). The largest batch is the largest the plan's fit column says fits, under the plan's own band "
          "(session 15: `band rule` and `room kept`; the rule was fixed on the tuned sets, fixtures/plan and holdout2, "
          "and the holdouts read once with it: docs/plan_band_first_reading.txt).\n")
    print(HEADER)
    for sub, _seen in pa.SETS_SEEN:
        if a.only is not None and sub != a.only:
            continue
        d = os.path.join(pa.PLAN, sub) if sub else pa.PLAN
        truth = json.load(open(os.path.join(d, "truth.json")))
        for name, w in truth["workloads"].items():
            for n in (1, 2, 3):
                if n == 3 and not pa.third_capture(d, name, w):
                    continue
                r = row(a.bin, d, name, w, n)
                if a.all or r["cause"] != "-":
                    print(fmt(r), flush=True)


if __name__ == "__main__":
    main()
