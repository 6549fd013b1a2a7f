#!/usr/bin/env python3
"""An independent reading of memory snapshots and profiler traces, for writing test expectations.

memscope's tests must assert its conclusions against facts that do not come from memscope. This
script is those facts' source: Python's standard library only, sharing no code or logic with the
Rust crate. Snapshots are read with a `pickle.Unpickler` whose `find_class` refuses every global,
so a capture can build only plain dicts, lists, strings and numbers and can run nothing. Traces are
read with `json` (gzip-aware). It prints what an expert looks at by hand: layout, devices, the
state at the dump, the log's actions, what was allocated before recording began, whether a
backward pass ran, how the outermost user frame moves (loop iterations), OOMs; for traces the
version fields, ProfilerStep spans, `[memory]` events and their arguments, backward ops.

Usage: tools/read_capture.py [--markdown] PATH...   (a folder is walked; files sorted)
       tools/read_capture.py --markdown ../shared/corpus > tests/it/corpus_facts.md
"""

import gzip
import io
import json
import os
import pickle
import re
import sys
from collections import Counter, OrderedDict


class SafeUnpickler(pickle.Unpickler):
    """Refuses every class or function: a snapshot is plain containers, nothing else runs."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refused global {module}.{name}")


def open_bytes(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data


def mib(n):
    return f"{n} B ({n / 2**20:.1f} MiB)"


# ----------------------------------------------------------------------------- frames

BACKWARD_NAME = re.compile(r"(Engine::evaluate_function|Backward\d*::apply|_engine_run_backward)")


def is_backward_frame(fr):
    name = fr.get("name", "") or ""
    fn = fr.get("filename", "") or ""
    if BACKWARD_NAME.search(name):
        return True
    if name == "backward" and (
        fn.endswith("torch/autograd/__init__.py") or fn.endswith("torch/_tensor.py")
    ):
        return True
    return False


LIB_MARKERS = (
    "/site-packages/",
    "/dist-packages/",
    "/lib/python3",
    "/torch/",
    "<frozen",
    "<string>",
)


def is_user_frame(fr):
    fn = fr.get("filename", "") or ""
    if not fn or fn == "??":
        return False
    if fn.endswith((".cpp", ".h", ".hpp", ".cc", ".cu", ".cuh", ".c", ".S")):
        return False
    if any(m in fn for m in LIB_MARKERS):
        return False
    return fn.endswith(".py")


def is_optim_frame(fr):
    fn = fr.get("filename", "") or ""
    return "/torch/optim/" in fn


def outermost_user(frames):
    user = [f for f in frames if is_user_frame(f)]
    return user[-1] if user else None


# ----------------------------------------------------------------------------- snapshots


def layout(snap):
    segs = snap.get("segments", [])
    for s in segs:
        for b in s.get("blocks", []):
            if "history" in b and "address" not in b:
                return "torch20 (blocks carry history, no address)"
    for t in snap.get("device_traces", []):
        for e in t:
            if e.get("action") != "snapshot":
                return "modern (time_us)" if "time_us" in e else "torch21 (no time_us)"
    for t in snap.get("device_traces", []):
        for e in t:
            return "modern (time_us)" if "time_us" in e else "torch21 (no time_us)"
    return "unknown (empty traces)"


def dump_state(snap):
    """Per device: segments, blocks by state, reserved and allocated bytes at the dump."""
    out = OrderedDict()
    for s in snap.get("segments", []):
        d = out.setdefault(
            s.get("device", 0),
            dict(segments=0, reserved=0, allocated=0, active=0, blocks=Counter(), seg_types=Counter(),
                 expandable=0),
        )
        d["segments"] += 1
        d["reserved"] += s.get("total_size", 0)
        d["seg_types"][s.get("segment_type", "?")] += 1
        d["expandable"] += 1 if s.get("is_expandable") else 0
        for b in s.get("blocks", []):
            st = b.get("state", "?")
            d["blocks"][st] += 1
            if st == "active_allocated":
                d["allocated"] += b.get("size", 0)
            if st.startswith("active"):
                d["active"] += b.get("size", 0)
    return out


def final_blocks(snap, dev):
    """(address -> size) of allocated blocks at the dump, and segment (address -> size)."""
    blocks, segs = {}, {}
    for s in snap.get("segments", []):
        if s.get("device", 0) != dev:
            continue
        segs[s.get("address")] = s.get("total_size", 0)
        for b in s.get("blocks", []):
            if b.get("state") == "active_allocated" and "address" in b:
                blocks[b["address"]] = b.get("size", 0)
    return blocks, segs


def replay_pre_recording(trace, blocks_end, segs_end):
    """What existed before the first event: frees of blocks the log never allocated, plus blocks
    alive at the dump that the log never allocated (same for segments)."""
    live, freeing_pre = {}, set()
    pre_freed = pre_freed_n = 0
    seg_live = {}
    pre_seg_freed = 0
    for e in trace:
        a, addr, size = e.get("action"), e.get("addr"), e.get("size", 0)
        if a == "alloc":
            live[addr] = size
            freeing_pre.discard(addr)
        elif a == "free_requested":
            if addr not in live and addr not in freeing_pre:
                pre_freed += size
                pre_freed_n += 1
                freeing_pre.add(addr)
        elif a == "free_completed":
            if addr in live:
                del live[addr]
            elif addr in freeing_pre:
                freeing_pre.discard(addr)
            else:
                pre_freed += size
                pre_freed_n += 1
        elif a == "segment_alloc":
            seg_live[addr] = size
        elif a == "segment_free":
            if addr in seg_live:
                del seg_live[addr]
            else:
                pre_seg_freed += size
    alloc_addrs = {e.get("addr") for e in trace if e.get("action") == "alloc"}
    # A block alive at the dump predates the log when no alloc in the log made it. A block made
    # in the log at an address that held a pre-recording block is counted by the free above.
    pre_alive = {a: s for a, s in blocks_end.items() if a not in live}
    pre_alive_bytes = sum(pre_alive.values())
    seg_addrs = {e.get("addr") for e in trace if e.get("action") == "segment_alloc"}
    pre_seg_alive = sum(s for a, s in segs_end.items() if a not in seg_addrs)
    return dict(
        pre_alive_blocks=len(pre_alive),
        pre_alive_bytes=pre_alive_bytes,
        pre_freed_blocks=pre_freed_n,
        pre_freed_bytes=pre_freed,
        pre_total_bytes=pre_alive_bytes + pre_freed,
        pre_segments_alive_bytes=pre_seg_alive,
        pre_segments_freed_bytes=pre_seg_freed,
        log_alloc_addrs=len(alloc_addrs),
    )


def round512(n):
    """The allocator's smallest rounding (kMinBlockSize): a block is at least its request rounded
    up to 512 B. A large block may hold up to 1 MiB more (an unsplit remainder), so a curve of
    rounded requests is a lower bound on torch's `allocated_bytes`."""
    return max(512, (n + 511) // 512 * 512)


def allocated_curve(trace, start, rounded=False):
    """Allocated bytes over the log, from `start` (bytes alive before the first event)."""
    cur = peak = start
    peak_i = None
    for i, e in enumerate(trace):
        a, size = e.get("action"), e.get("size", 0)
        if rounded:
            size = round512(size)
        if a == "alloc":
            cur += size
            if cur > peak:
                peak, peak_i = cur, i
        elif a == "free_completed":
            cur -= size
    return peak, peak_i, cur


def phases(trace, pred):
    """Number of maximal runs of alloc events whose frames satisfy `pred`."""
    n, inside = 0, False
    for e in trace:
        if e.get("action") != "alloc":
            continue
        hit = any(pred(f) for f in e.get("frames", []))
        if hit and not inside:
            n += 1
        inside = hit
    return n


def outer_walk(trace):
    """The outermost user frame of each alloc: its run-length sequence and backward jumps."""
    seq = []
    for e in trace:
        if e.get("action") != "alloc":
            continue
        f = outermost_user(e.get("frames", []))
        key = (f["filename"], f["name"], f["line"]) if f else None
        if seq and seq[-1][0] == key:
            seq[-1][1] += 1
        else:
            seq.append([key, 1])
    jumps = Counter()
    prev = None
    for key, _ in seq:
        if key and prev and key[:2] == prev[:2] and key[2] < prev[2]:
            jumps[(key[0], key[1])] += 1
        if key:
            prev = key
    return seq, jumps


def read_snapshot(path, out):
    snap = SafeUnpickler(io.BytesIO(open_bytes(path))).load()
    w = out.append
    w(f"- kind: snapshot; top-level keys: {', '.join(snap.keys())}")
    w(f"- layout: {layout(snap)}")
    traces = snap.get("device_traces", [])
    state = dump_state(snap)
    w(f"- devices with segments: {list(state.keys())}; device_traces lengths: {[len(t) for t in traces]}")
    for dev, d in state.items():
        w(
            f"- cuda:{dev} at the dump: {d['segments']} segments ({d['expandable']} expandable; "
            f"{dict(d['seg_types'])}), reserved {mib(d['reserved'])}, allocated {mib(d['allocated'])}, "
            f"active {mib(d['active'])}, blocks {dict(d['blocks'])}"
        )
    if "allocator_settings" in snap:
        w(f"- allocator_settings: {snap['allocator_settings']}")
    ann = snap.get("external_annotations")
    if ann is not None:
        names = Counter((a.get("name"), a.get("stage")) for a in ann)
        w(f"- external_annotations: {len(ann)} entries; (name, stage) counts: {dict(names.most_common(12))}")
    # Torch 2.0 keeps history on blocks instead of in the trace.
    hist_frames = []
    for s in snap.get("segments", []):
        for b in s.get("blocks", []):
            for h in b.get("history", []) or []:
                hist_frames.append(h.get("frames", []))
            hist_frames.append(b.get("frames", []))
    for dev, t in enumerate(traces):
        if not t:
            w(f"- cuda:{dev} trace: empty")
            continue
        acts = Counter(e.get("action") for e in t)
        w(f"- cuda:{dev} trace: {len(t)} entries; actions {dict(acts)}")
        history = acts.get("alloc", 0) > 0
        w(f"- cuda:{dev} history (the log holds alloc entries): {history}")
        ooms = [e for e in t if e.get("action") == "oom"]
        w(f"- cuda:{dev} OOM entries: {len(ooms)}" + (
            f" (requests: {[e.get('size') for e in ooms]}, device_free: {[e.get('device_free') for e in ooms]})"
            if ooms else ""))
        if not history:
            continue
        blocks_end, segs_end = final_blocks(snap, dev)
        pre = replay_pre_recording(t, blocks_end, segs_end)
        w(
            f"- cuda:{dev} before recording: {pre['pre_alive_blocks']} blocks alive at the dump that the log "
            f"never allocated ({mib(pre['pre_alive_bytes'])}); {pre['pre_freed_blocks']} frees of blocks the log "
            f"never allocated ({mib(pre['pre_freed_bytes'])}); bytes alive at the first event >= "
            f"{mib(pre['pre_total_bytes'])}; segments alive at the dump not made in the log: "
            f"{mib(pre['pre_segments_alive_bytes'])}; segment_free of segments not made in the log: "
            f"{mib(pre['pre_segments_freed_bytes'])}"
        )
        peak, peak_i, end = allocated_curve(t, pre["pre_total_bytes"])
        alloc_end = state.get(dev, {}).get("allocated", 0)
        rpeak, rpeak_i, rend = allocated_curve(t, pre["pre_total_bytes"], rounded=True)
        w(
            f"- cuda:{dev} allocated curve from that start (entry sizes): peak {mib(peak)} at entry {peak_i}; "
            f"end {mib(end)} (dump says {mib(alloc_end)}); with sizes rounded up to 512 B: peak "
            f"{mib(rpeak)} at entry {rpeak_i}, end {mib(rend)}"
        )
        bw = sum(1 for e in t if any(is_backward_frame(f) for f in e.get("frames", [])))
        bw_names = Counter(
            f.get("name") for e in t for f in e.get("frames", []) if is_backward_frame(f)
        )
        w(
            f"- cuda:{dev} backward: {bw} entries with autograd-engine frames; backward phases (runs of allocs): "
            f"{phases(t, is_backward_frame)}; frames: {dict(bw_names.most_common(5))}"
        )
        w(f"- cuda:{dev} optimizer phases (runs of allocs under torch/optim): {phases(t, is_optim_frame)}")
        with_frames = sum(1 for e in t if e.get("frames"))
        user_frames = Counter()
        for e in t:
            for f in e.get("frames", []):
                if is_user_frame(f):
                    user_frames[(f["filename"], f["name"])] += 1
        w(f"- cuda:{dev} entries with frames: {with_frames}; user (file, function) frames: "
          f"{[f'{os.path.basename(a)}:{b} x{n}' for (a, b), n in user_frames.most_common(10)]}")
        seq, jumps = outer_walk(t)
        shown = " -> ".join(
            (f"{os.path.basename(k[0])}:{k[1]}:{k[2]}" if k else "(no user frame)") + f" x{n}"
            for k, n in seq[:40]
        )
        w(f"- cuda:{dev} outermost user frame over allocs ({len(seq)} runs): {shown}{' ...' if len(seq) > 40 else ''}")
        w(f"- cuda:{dev} outermost frame returns to an earlier line: "
          f"{ {f'{os.path.basename(a)}:{b}': n for (a, b), n in jumps.items()} }")
    nf = [b.get("size", 0) for seg in snap.get("segments", []) for b in seg.get("blocks", [])
          if b.get("state") == "active_allocated" and not b.get("frames") and not b.get("history")]
    w(f"- allocated blocks at the dump with no frames or history (made while nothing recorded them): "
      f"{len(nf)}, {mib(sum(nf))}")
    if hist_frames and any(hist_frames):
        bw = sum(1 for fr in hist_frames if any(is_backward_frame(f) for f in fr))
        user = Counter(
            (os.path.basename(f["filename"]), f["name"]) for fr in hist_frames for f in fr if is_user_frame(f)
        )
        w(f"- frames on blocks at the dump: {len(hist_frames)} stacks, {bw} with autograd-engine frames; "
          f"user frames {[f'{a}:{b} x{n}' for (a, b), n in user.most_common(8)]}")


# ----------------------------------------------------------------------------- traces

MEMORY_DEVICE_TYPES = {0: "CPU", 1: "CUDA"}


def read_trace(path, out):
    w = out.append
    raw = open_bytes(path)
    try:
        doc = json.loads(raw)
    except ValueError as e:
        w(f"- kind: not JSON ({e.__class__.__name__}); first bytes {raw[:40]!r}")
        return
    if not isinstance(doc, dict) or "traceEvents" not in doc:
        keys = list(doc.keys())[:10] if isinstance(doc, dict) else type(doc).__name__
        w(f"- kind: JSON but not a Chrome trace (no traceEvents); top level: {keys}")
        if isinstance(doc, dict) and "nodes" in doc:
            w(f"- an execution trace: {len(doc['nodes'])} nodes, schema {doc.get('schema')}")
        return
    ev = doc["traceEvents"]
    w(f"- kind: Chrome trace, {len(ev)} events")
    meta = {k: v for k, v in doc.items() if k != "traceEvents" and not isinstance(v, (list, dict))}
    w(f"- scalar top-level fields: {meta}")
    if "distributedInfo" in doc:
        w(f"- distributedInfo: {doc['distributedInfo']}")
    else:
        w("- distributedInfo: absent")
    if "deviceProperties" in doc:
        w(f"- deviceProperties: {[d.get('name') for d in doc['deviceProperties']]}")
    cats = Counter(e.get("cat") for e in ev)
    w(f"- categories: {dict(cats.most_common(14))}")
    steps = [e for e in ev if str(e.get("name", "")).startswith("ProfilerStep#")]
    by_cat = Counter((e.get("cat"), e.get("ph")) for e in steps)
    nums = sorted({int(e["name"].split("#")[1]) for e in steps if e["name"].split("#")[1].isdigit()})
    w(f"- ProfilerStep spans: {len(steps)} by (cat, ph) {dict(by_cat)}; numbers {nums}")
    # Chrome traces need not list events in time order: running totals are read in time order.
    mem = sorted((e for e in ev if e.get("name") == "[memory]"), key=lambda e: e.get("ts", 0))
    w(f"- [memory] events: {len(mem)}")
    per_dev = OrderedDict()
    for e in mem:
        a = e.get("args", {})
        key = (a.get("Device Type"), a.get("Device Id"))
        d = per_dev.setdefault(key, dict(n=0, keys=Counter(), peak=None, net=0, net_peak=0, first_total=None))
        d["n"] += 1
        d["keys"][tuple(sorted(a.keys()))] += 1
        d["net"] += a.get("Bytes", 0)
        d["net_peak"] = max(d["net_peak"], d["net"])
        if "Total Allocated" in a:
            t = a["Total Allocated"]
            d["peak"] = t if d["peak"] is None else max(d["peak"], t)
            if d["first_total"] is None:
                d["first_total"] = t - a.get("Bytes", 0)
            d["last_total"] = t
    for (dt, di), d in per_dev.items():
        tname = MEMORY_DEVICE_TYPES.get(dt, dt)
        keysets = [list(k) for k in d["keys"]]
        line = f"- [memory] device type {dt} ({tname}) id {di}: {d['n']} events; arg sets {keysets}; "
        if d["peak"] is not None:
            line += (f"Total Allocated: before the first event {mib(d['first_total'])}, peak {mib(d['peak'])}, "
                     f"after the last {mib(d['last_total'])}")
        else:
            line += (f"no Total Allocated: the running sum of Bytes peaks {mib(d['net_peak'])} above the start "
                     f"and ends {d['net']} B from it")
        w(line)
    cuda_keys = [k for k in per_dev if k[0] == 1]
    spans = sorted(
        (e for e in steps if e.get("cat") != "gpu_user_annotation" and e.get("ph") == "X"),
        key=lambda e: e.get("ts", 0),
    )
    for key in cuda_keys:
        pts, run = [], 0
        for e in mem:
            a = e.get("args", {})
            if (a.get("Device Type"), a.get("Device Id")) != key:
                continue
            run += a.get("Bytes", 0)
            pts.append((e.get("ts", 0), a.get("Total Allocated", run)))
        for s in spans:
            inside = [v for t, v in pts if s["ts"] <= t <= s["ts"] + s.get("dur", 0)]
            if inside:
                w(f"- {s['name']} on CUDA {key[1]}: {len(inside)} [memory] events, peak {mib(max(inside))}, "
                  f"end {mib(inside[-1])}" + ("" if pts and "Total Allocated" in mem[0].get("args", {})
                                             else " (running sum of Bytes from the trace's start)"))
    bw = Counter()
    for e in ev:
        n = str(e.get("name", ""))
        if n.startswith("autograd::engine::evaluate_function"):
            bw["autograd::engine::evaluate_function"] += 1
        elif re.search(r"Backward\d*$", n) or "Backward0" in n:
            bw["*Backward*"] += 1
    w(f"- backward ops: {dict(bw)}")
    gpu = sum(cats.get(c, 0) for c in ("kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"))
    cuda_mem = sum(d["n"] for (dt, _), d in per_dev.items() if dt == 1)
    w(f"- GPU activity: {gpu} kernel/memcpy/memset events; CUDA [memory] events {cuda_mem}; "
      f"CPU-only: {gpu == 0 and cuda_mem == 0}")
    fwd_top = Counter(
        e.get("name") for e in ev if e.get("cat") in ("python_function", "user_annotation") and e.get("ph") == "X"
    )
    w(f"- most frequent python_function/user_annotation spans: {dict(fwd_top.most_common(6))}")


# ----------------------------------------------------------------------------- main


def walk(p):
    if os.path.isdir(p):
        for root, _, files in sorted(os.walk(p)):
            for f in sorted(files):
                yield os.path.join(root, f)
    else:
        yield p


def main(argv):
    md = "--markdown" in argv
    paths = [a for a in argv if a != "--markdown"]
    if md:
        print("# Corpus facts, read independently of memscope\n")
        print("Generated by `python3 tools/read_capture.py --markdown ../shared/corpus > tests/it/corpus_facts.md`")
        print("(Python standard library only; the unpickler refuses every global). ")
        print("`tests/it/corpus_expectations.toml` is written from these facts; review one against the other.\n")
    for root in paths:
        for f in walk(root):
            if f.endswith(".md"):
                continue
            rel = os.path.relpath(f, root) if os.path.isdir(root) else f
            out = []
            try:
                if f.endswith(".pickle") or f.endswith(".pkl"):
                    read_snapshot(f, out)
                else:
                    read_trace(f, out)
            except Exception as e:  # a reader that fails says so; it never guesses
                out.append(f"- unreadable: {e.__class__.__name__}: {e}")
            print(f"## `{rel}`\n" if md else f"== {rel}")
            print("\n".join(out))
            print()


if __name__ == "__main__":
    main(sys.argv[1:])
