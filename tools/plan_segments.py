#!/usr/bin/env python3
"""The segment sequence of real captures (issue 39, item 2): each `segment_alloc`/`segment_free`
in log order, with the count of `alloc` events before it, its size (MiB), stream, and where the
driver put it relative to the segments that existed (below the lowest, above the highest, or in a
gap). Used on fixtures/plan/segments39 to find where the model's segments part from a real run's.

usage: tools/plan_segments.py CAPTURE.pickle.gz [...]
"""
import gzip, pickle, sys


def sequence(path):
    s = pickle.load(gzip.open(path) if path.endswith(".gz") else open(path, "rb"))
    t = s["device_traces"][0]
    created = {e["addr"] for e in t if e["action"] == "segment_alloc"}
    live = {g["address"]: g["total_size"] for g in s["segments"] if g["address"] not in created}
    n, out = 0, []
    for e in t:
        a = e["action"]
        if a == "alloc":
            n += 1
        elif a == "segment_alloc":
            addr, size = e["addr"], e["size"]
            where = ("below" if live and addr + size <= min(live) else
                     "above" if live and addr >= max(k + v for k, v in live.items()) else "gap")
            out.append((n, "alloc", size, e.get("stream", 0), where))
            live[addr] = size
        elif a == "segment_free":
            out.append((n, "free", e["size"], e.get("stream", 0), ""))
            live.pop(e["addr"], None)
    return out


def main():
    for p in sys.argv[1:]:
        seq = sequence(p)
        print(f"{p}: {len(seq)} segment events")
        for n, kind, size, stream, where in seq:
            print(f"  after alloc {n:5d}: {kind:5s} {size / 2**20:8.1f} MiB  stream {stream}  {where}")


if __name__ == "__main__":
    main()
