"""Scales a real profiler trace up for benchmarks: python3 bench/scale_trace.py IN.json[.gz] OUT.json K

Copies the trace's events K times, each copy shifted in time past the previous one (and its
[memory] addresses shifted so copies do not pair with each other), and writes one Chrome
trace JSON. Large traces cannot be committed; this script can.
"""
import gzip
import json
import sys


def main():
    src, dst, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
    opener = gzip.open if src.endswith(".gz") else open
    with opener(src, "rb") as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    ts = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float))]
    span = (max(ts) - min(ts) + 1) if ts else 1
    steps = [int(e["name"].split("#")[1]) for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    nsteps = (max(steps) + 1) if steps else 0
    out = []
    for r in range(k):
        for e in events:
            c = dict(e)
            # Each copy is a new stretch of the run: new step numbers, autograd sequence
            # numbers, correlation and flow ids, so copies never link to each other.
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
            if isinstance(c.get("ts"), (int, float)):
                c["ts"] = c["ts"] + r * span
            if c.get("name") == "[memory]" and isinstance(c.get("args"), dict) and "Addr" in c["args"]:
                c["args"]["Addr"] = c["args"]["Addr"] + r * (1 << 44)
            out.append(c)
    if isinstance(doc, dict):
        doc = dict(doc)
        doc["traceEvents"] = out
    else:
        doc = out
    with open(dst, "w") as f:
        json.dump(doc, f)
    print(f"wrote {len(out)} events to {dst}", file=sys.stderr)


if __name__ == "__main__":
    main()
