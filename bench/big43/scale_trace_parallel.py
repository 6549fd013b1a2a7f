"""Scales a real profiler trace to any size, streaming and on every core (issue 43's 10 GB trace).

    python3 bench/big43/scale_trace_parallel.py IN.json[.gz] OUT.json K [WORKERS]

The same copies as bench/scale_trace.py (each copy a new stretch of the run: steps, sequence
numbers, correlation and flow ids, times and [memory] addresses shifted), but never holding more
than one copy per worker in memory: each worker writes its share of the copies to a part file,
and the parts are joined into one Chrome trace JSON at the end. Memory stays at a few copies
of the input per worker whatever K is.
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
    part, lo, hi = args
    _, events, span, nsteps = SRC
    with open(part, "w") as f:
        for r in range(lo, hi):
            text = json.dumps(copy(events, r, span, nsteps))[1:-1]
            if text:
                f.write(", " + text if r else text)
    return part


def main():
    global SRC
    src, dst, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
    workers = int(sys.argv[4]) if len(sys.argv) > 4 else os.cpu_count() or 1
    SRC = load(src)
    doc = SRC[0]
    per = max(1, -(-k // workers))
    jobs = [(f"{dst}.part{i:04d}", lo, min(k, lo + per)) for i, lo in enumerate(range(0, k, per))]
    with mp.get_context("fork").Pool(min(workers, len(jobs))) as pool:
        parts = pool.map(work, jobs)
    with open(dst, "wb") as out:
        if isinstance(doc, dict):
            rest = {key: v for key, v in doc.items() if key != "traceEvents"}
            head = json.dumps(rest)[:-1]
            out.write((head + (", " if rest else "") + '"traceEvents": [').encode())
        else:
            out.write(b"[")
        for p in parts:
            with open(p, "rb") as f:
                shutil.copyfileobj(f, out, 16 << 20)
            os.remove(p)
        out.write(b"]}" if isinstance(doc, dict) else b"]")
    print(f"wrote {k} copies of {len(SRC[1])} events to {dst}", file=sys.stderr)


if __name__ == "__main__":
    main()
