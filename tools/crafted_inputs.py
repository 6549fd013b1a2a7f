#!/usr/bin/env python3
"""Crafted inputs whose cost must stay in proportion to their size (issue 24).

Nothing here is committed as a binary: run it to make the inputs, then time them (see
BENCHMARKS.md, "Crafted inputs", and FUZZING.md). Needs only the standard library.

    python3 tools/crafted_inputs.py segments N OUT.pickle[.gz] [EVENTS]
        a snapshot with N segments (one segment_alloc each, one stream) and EVENTS more
        alloc/free events (default 16 N) that are the same few memoized dicts: a small
        file, a large replay state, many events (replay checkpoints).
    python3 tools/crafted_inputs.py stacks S D OUT.pickle
        S allocations, each with its own stack D frames deep, the frames drawn from a pool of
        memoized frame dicts (site grouping).
    python3 tools/crafted_inputs.py devices N OUT.trace.json
        a profiler trace with 4 steps and one [memory] event on each of N device ids
        (per-device passes over the steps).
    python3 tools/crafted_inputs.py memory M OUT.trace.json
        a profiler trace with M [memory] events in reverse time order (the sort's scratch).
    python3 tools/crafted_inputs.py plan_segments N OUT.pickle
        N 12 MiB requests, none freed, each in a segment of its own (segment_alloc, then the
        alloc): `plan` replays them into N segments (segment placement, issue 37).
    python3 tools/crafted_inputs.py rank_lines MIB OUT.jsonl
        MIB MiB of rank lines (memscope.rank/1), about 4 KB a rank: read back by `check`
        and `analyze` (issue 37: bounded however large).
"""
import gzip
import json
import pickle
import sys

MIB = 1 << 20
BASE = 0x7F0000000000


def settings():
    return {
        "PYTORCH_CUDA_ALLOC_CONF": "",
        "max_split_size": -1,
        "expandable_segments": False,
        "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)},
    }


def event(action, addr, size, frames, t):
    return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t,
            "compile_context": "N/A", "user_metadata": "", "frames": frames}


def write_pickle(obj, out):
    data = pickle.dumps(obj, protocol=4)
    if out.endswith(".gz"):
        data = gzip.compress(data, 6)
    with open(out, "wb") as f:
        f.write(data)


def segments(n, out, events=None):
    """N 2 MiB segments, then EVENTS alloc/free events: the same three memoized dicts again
    and again (alloc, free_requested, free_completed of one block in the first segment)."""
    events = 16 * n if events is None else events
    fr = [{"filename": "train.py", "line": 10, "name": "step"}]
    trace = [event("segment_alloc", BASE + i * 2 * MIB, 2 * MIB, fr, i) for i in range(n)]
    cycle = [event("alloc", BASE, 512, fr, n), event("free_requested", BASE, 512, fr, n),
             event("free_completed", BASE, 512, fr, n)]
    trace.extend(cycle[i % 3] for i in range(events - events % 3))
    write_pickle({"segments": [], "device_traces": [trace], "allocator_settings": settings(),
                  "external_annotations": []}, out)


def stacks(s, depth, out):
    """S live 512-byte blocks in one segment, each allocated with its own D-frame stack."""
    pool = [{"filename": f"/home/user/project/src/package/subpackage/models/layers/block{i % 97}/module_{i}.py",
             "line": i, "name": f"forward_layer_{i}"} for i in range(1009)]
    trace = [event("segment_alloc", BASE, 64 * MIB, pool[:1], 0)]
    for k in range(s):
        frames = [pool[(k * 7 + j * 13) % len(pool)] for j in range(depth)]
        trace.append(event("alloc", BASE + k * 512, 512, frames, k + 1))
    write_pickle({"segments": [], "device_traces": [trace], "allocator_settings": settings(),
                  "external_annotations": []}, out)


def trace_doc(events, out):
    with open(out, "w") as f:
        f.write('{"schemaVersion": 1, "traceName": "crafted", "traceEvents": [\n')
        first = True
        for e in events:
            if not first:
                f.write(",\n")
            f.write(json.dumps(e, separators=(",", ":")))
            first = False
        f.write("\n]}\n")


def step(k, ts, dur):
    return {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "pid": 1,
            "tid": 1, "ts": ts, "dur": dur}


def mem(ts, addr, nbytes, device, total):
    return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1,
            "tid": 1, "ts": ts, "args": {"Addr": addr, "Bytes": nbytes, "Total Allocated": total,
                                         "Total Reserved": 2 * MIB, "Device Type": 1,
                                         "Device Id": device}}


def devices(n, out):
    def gen():
        for k in range(4):
            yield step(k, k * 1000.0, 999.0)
        for d in range(n):
            yield mem(1.0 + (d % 3900) / 1.0, BASE + d * 512, 512, d, 512)
    trace_doc(gen(), out)


def memory(m, out):
    def gen():
        for k in range(4):
            yield step(k, k * m / 4.0, m / 4.0 - 0.5)
        for i in range(m):
            # Reverse time order: a real sort, not an already sorted run.
            yield mem(float(m - i), BASE + (i % 4096) * 512, 512 if i % 2 == 0 else -512, 0,
                      512 * (i % 2))
    trace_doc(gen(), out)


def plan_segments(n, out):
    """N requests of 12 MiB (over kMinLargeAlloc: a segment each), never freed."""
    fr = [{"filename": "train.py", "line": 10, "name": "step"}]
    size = 12 * MIB
    trace = []
    for i in range(n):
        addr = BASE + i * size
        trace.append(event("segment_alloc", addr, size, fr, 2 * i))
        trace.append(event("alloc", addr, size, fr, 2 * i + 1))
    write_pickle({"segments": [], "device_traces": [trace], "allocator_settings": settings(),
                  "external_annotations": []}, out)


def rank_summary(rank):
    """A rank's memscope.baseline/1 summary as `memscope baseline` writes it (5 sites, 12
    steps: about 3 KB, as for fixtures/clean.pickle)."""
    sites = [{"site": {"file": "train.py", "line": 100 + k, "function": f"layer_{k}"},
              "bytes": (k + 1) * MIB, "blocks": k + 1,
              "chain": ["forward", "_call_impl", "_wrapped_call_impl", f"layer_{k}"]}
             for k in range(5)]
    device = {"device": "cuda:0", "peak_allocated_bytes": 400 * MIB,
              "peak_reserved_bytes": 420 * MIB, "peak_exact": True,
              "end_allocated_bytes": 330 * MIB, "end_reserved_bytes": 420 * MIB,
              "sites_at_peak": sites, "sites_at_end": sites}
    steps = [{"name": f"step {k}", "peak_allocated_bytes": 400 * MIB,
              "end_allocated_bytes": 330 * MIB} for k in range(1, 13)]
    cats = {c: MIB for c in ["activation", "before_recording", "gradient", "kv_cache",
                             "optimizer_state", "other", "output", "parameter", "temporary"]}
    return {"path": f"rank{rank}.pickle", "kind": "snapshot", "verdict": "ok",
            "devices": [device], "ooms": [], "leaks": [], "graph_growth": None, "steps": steps,
            "categories": cats, "leak_judgement": {"judged": True, "steps": 12, "min_steps": 3},
            "rank": {"rank": rank, "source": "device"}}


def rank_lines(mib, out):
    """Rank lines to MIB MiB, one rank a line, numbered in order."""
    with open(out, "w") as f:
        written, rank = 0, 0
        while written < mib * MIB:
            line = json.dumps({"schema": "memscope.rank/1", "rank": rank, "rank_from": "pattern",
                               "path": f"rank{rank}.pickle", "kind": "snapshot", "verdict": "ok",
                               "devices": 1, "peak_allocated_bytes": 400 * MIB,
                               "peak_reserved_bytes": 420 * MIB, "peak_exact": True,
                               "end_allocated_bytes": 330 * MIB,
                               "end_reserved_bytes": 420 * MIB, "ooms": 0, "oom_cause": "",
                               "leaks_judged": True, "leaks": 0, "leak_live_bytes": 0,
                               "summary": json.dumps(rank_summary(rank))}) + "\n"
            f.write(line)
            written += len(line)
            rank += 1


def main(argv):
    kinds = {"segments": (segments, 2), "stacks": (stacks, 3), "devices": (devices, 2),
             "memory": (memory, 2), "plan_segments": (plan_segments, 2),
             "rank_lines": (rank_lines, 2)}
    if len(argv) < 3 or argv[1] not in kinds:
        sys.exit(__doc__)
    fn, nargs = kinds[argv[1]]
    nums = [int(a) for a in argv[2:2 + nargs - 1]]
    out = argv[1 + nargs]
    extra = [int(a) for a in argv[2 + nargs:]]
    fn(*nums, out, *extra)


if __name__ == "__main__":
    main(sys.argv)
