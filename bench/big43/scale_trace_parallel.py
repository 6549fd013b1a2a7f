"""Scales a real profiler trace to any size, streaming and on every core (issue 43's 10 GB trace).

    python3 bench/big43/scale_trace_parallel.py IN.json[.gz] OUT.json K [WORKERS]

The same file as bench/scale_trace.py, byte for byte (its `write` is the one writer: each copy
a new stretch of the run), but on WORKERS processes (default: every core): each worker writes
its share of the copies to a part file, one copy in memory at a time, and the parts are joined
into one Chrome trace JSON at the end. Memory stays at a few copies of the input per worker
whatever K is.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from scale_trace import write  # noqa: E402


def main():
    src, dst, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
    workers = int(sys.argv[4]) if len(sys.argv) > 4 else os.cpu_count() or 1
    n = write(src, dst, k, workers)
    print(f"wrote {k} copies of {n} events to {dst}", file=sys.stderr)


if __name__ == "__main__":
    main()
