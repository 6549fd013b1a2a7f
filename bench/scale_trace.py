"""Scales a real profiler trace up for benchmarks: python3 bench/scale_trace.py IN.json[.gz] OUT.json K

Copies the trace's events K times, each copy shifted in time past the previous one (and its
[memory] addresses shifted so copies do not pair with each other), and writes one Chrome
trace JSON. Large traces cannot be committed; this script can.

It is also the one writer of bench/big43/scale_trace_parallel.py (issue 43's 10 GB trace),
which calls `write` with one worker per core: the copies are streamed (a worker holds one
copy at a time, in a part file of its own), and the parts are joined in order, so the file is
the same byte for byte whatever the number of workers.
"""
import gzip
import json
import multiprocessing as mp
import os
import shutil
import sys

SRC = None


def load(src):
    opener = gzip.open if src.endswith(".gz") else open
    with opener(src, "rb") as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    ts = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float))]
    span = (max(ts) - min(ts) + 1) if ts else 1
    steps = [int(e["name"].split("#")[1]) for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    nsteps = (max(steps) + 1) if steps else 0
    return doc, events, span, nsteps


def copy(events, r, span, nsteps):
    """Copy r of the events: a new stretch of the run, with new step numbers, autograd sequence
    numbers, correlation and flow ids (so copies never link to each other), times past the
    previous copy, and [memory] addresses of its own (so copies do not pair)."""
    out = []
    for e in events:
        c = dict(e)
        name = str(c.get("name", ""))
        if name.startswith("ProfilerStep#") and r:
            c["name"] = f"ProfilerStep#{int(name.split('#')[1]) + r * nsteps}"
        if isinstance(c.get("id"), int):
            c["id"] = c["id"] + r * 10**9
        if isinstance(c.get("args"), dict):
            a = c["args"] = dict(c["args"])
            for key, step in (("Sequence number", 10**8), ("External id", 10**9), ("correlation", 10**9)):
                if isinstance(a.get(key), int):
                    a[key] = a[key] + r * step
            if c.get("name") == "[memory]" and "Addr" in a:
                a["Addr"] = a["Addr"] + r * (1 << 44)
        if isinstance(c.get("ts"), (int, float)):
            c["ts"] = c["ts"] + r * span
        out.append(c)
    return out


def work(args):
    """Copies lo..hi into the file `part`, each copy's events as JSON list items."""
    part, lo, hi = args
    _, events, span, nsteps = SRC
    with open(part, "w") as f:
        for r in range(lo, hi):
            text = json.dumps(copy(events, r, span, nsteps))[1:-1]
            if text:
                f.write(", " + text if r else text)
    return part


def write(src, dst, k, workers=1):
    """Writes K copies of SRC's events to DST, as `json.dump` writes the document with its
    `traceEvents` replaced (the other keys in their places), on WORKERS processes."""
    global SRC
    SRC = load(src)
    doc = SRC[0]
    per = max(1, -(-k // workers))
    jobs = [(f"{dst}.part{i:04d}", lo, min(k, lo + per)) for i, lo in enumerate(range(0, k, per))]
    if workers > 1 and len(jobs) > 1:
        with mp.get_context("fork").Pool(min(workers, len(jobs))) as pool:
            parts = pool.map(work, jobs)
    else:
        parts = [work(j) for j in jobs]
    if isinstance(doc, dict):
        keys = list(doc)
        at = keys.index("traceEvents")
        before = {key: doc[key] for key in keys[:at]}
        after = {key: doc[key] for key in keys[at + 1:]}
        head = (json.dumps(before)[:-1] + ", " if before else "{") + '"traceEvents": ['
        tail = "]" + (", " + json.dumps(after)[1:] if after else "}")
    else:
        head, tail = "[", "]"
    with open(dst, "wb") as out:
        out.write(head.encode())
        for p in parts:
            with open(p, "rb") as f:
                shutil.copyfileobj(f, out, 16 << 20)
            os.remove(p)
        out.write(tail.encode())
    return len(SRC[1])


def main():
    src, dst, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
    n = write(src, dst, k)
    print(f"wrote {n * k} events to {dst}", file=sys.stderr)


if __name__ == "__main__":
    main()
