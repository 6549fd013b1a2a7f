"""Memory recording inside the user's process, for `memscope run` and `memscope.capture()`.

`memscope run -o DIR -- python train.py` writes this file as `sitecustomize.py` into a
temporary directory that it puts first on `PYTHONPATH`, so the user's program runs unchanged:

- it first runs the `sitecustomize` this one hides, if there is one;
- when `torch` has been imported it wraps `torch.cuda._lazy_init` (the function PyTorch calls,
  by name, before the first CUDA allocation) and turns the allocator's history on right after CUDA
  initialises: `_record_memory_history(max_entries=N, stacks="python")`. A process that never
  touches CUDA (torchrun's launcher, a data-prep script) records nothing and writes nothing;
- an `OutOfMemoryError` that escapes the program (also as the cause or context of another
  exception) gets `DIR/memscope-oom[-rankR].pickle`, written from `sys.excepthook` while the
  failing frames are still alive (and from `atexit`, if the program replaced the hook);
  `--snapshot-on exit|both` adds `DIR/memscope-exit[-rankR].pickle` at interpreter exit; a
  process other than the program's first (a multiprocessing worker, by spawn or fork) writes
  `-pidP` names instead (see `output_path`), and `DIR` is made only when a file is written;
- `--profile-steps A:B` counts optimizer steps with PyTorch's global optimizer step hook
  (`torch.optim.optimizer.register_optimizer_step_post_hook`): one `Optimizer.step()` call is
  one step; a `torch.profiler` trace (`profile_memory`, `with_stack`, `record_shapes`) covers
  steps A..B and is written to `DIR/memscope-trace[-rankR].json`;
- the CUDA context is measured once, where it exists and nothing else is outside the allocator:
  right after the program's `torch.cuda.set_device(i)`, else just before
  `torch.distributed.init_process_group` (see `measure_context`); snapshots carry it under
  `memscope.devices[i].context` with its source and moment;
- `--max-steps N` ends the program (`SystemExit(0)` out of the Nth `Optimizer.step()`) after N
  optimizer steps, counted by the same hook; the exit hooks then write the snapshot.

The rank in a file name comes from `RANK` (else `LOCAL_RANK`), as torchrun sets them. Settings
come from the environment `memscope run` sets: `MEMSCOPE_RUN_DIR`, `MEMSCOPE_SNAPSHOT_ON`,
`MEMSCOPE_MAX_ENTRIES`, `MEMSCOPE_STACKS`, `MEMSCOPE_PROFILE_STEPS`, `MEMSCOPE_MAX_STEPS`.
Nothing here imports torch:
it is only touched once the program imported it. Self-contained on purpose: the binary embeds this
file, so `memscope run` also works where only the binary was installed.
"""

from __future__ import annotations

import atexit
import importlib
import importlib.machinery
import importlib.util
import os
import socket
import sys

DEFAULT_MAX_ENTRIES = 100_000
DEFAULT_STACKS = "python"
SNAPSHOT_ON = ("oom", "exit", "both")


def rank_suffix(environ=None) -> str:
    """`-rankR` under torchrun (from `RANK`, else `LOCAL_RANK`), else empty."""
    environ = os.environ if environ is None else environ
    for key in ("RANK", "LOCAL_RANK"):
        value = environ.get(key, "").strip()
        if value.isdigit():
            return f"-rank{int(value)}"
    return ""


def output_path(out_dir: str, kind: str, ext: str, environ=None, main: bool = True) -> str:
    """`out_dir/memscope-KIND[-rankR][-pidP].EXT`, one name per process:

    - the program's first Python process (`main`) writes the plain name;
    - a rank (torchrun) makes the name its own: one process per rank;
    - any other process (a worker started by multiprocessing's spawn or fork, a subprocess)
      adds its pid, `-pidP`; so does any process whose plain name is already taken.
    """
    suffix = rank_suffix(environ)
    base = f"memscope-{kind}{suffix}"
    if not main and not suffix:
        base += f"-pid{os.getpid()}"
    path = os.path.join(out_dir, base + ext)
    if os.path.exists(path):
        path = os.path.join(out_dir, f"memscope-{kind}{suffix}-pid{os.getpid()}{ext}")
    return path


MAIN_PID_ENV = "MEMSCOPE_RUN_MAIN_PID"


def claim_main(environ=None) -> int:
    """The pid of the program's first Python process under `memscope run`: this one, if no
    process claimed it before (the claim is inherited by every process it starts, by spawn or
    by a subprocess; a fork keeps the claimer's pid in memory)."""
    environ = os.environ if environ is None else environ
    claimed = environ.get(MAIN_PID_ENV, "")
    if claimed.isdigit():
        return int(claimed)
    environ[MAIN_PID_ENV] = str(os.getpid())
    return os.getpid()


def parse_profile_steps(text: str | None):
    """`"A:B"` -> `(A, B)` with 1 <= A <= B; `None` for empty; `ValueError` otherwise."""
    if not text:
        return None
    a, sep, b = text.partition(":")
    if not sep or not a.strip().isdigit() or not b.strip().isdigit():
        raise ValueError(f"{text!r} is not A:B (e.g. 3:5)")
    first, last = int(a), int(b)
    if first < 1 or last < first:
        raise ValueError(f"{text!r}: steps count from 1 and A <= B")
    return first, last


def parse_max_steps(text: str | None):
    """`MEMSCOPE_MAX_STEPS`: a count of optimizer steps, at least 1, or None."""
    if not text:
        return None
    try:
        n = int(text)
    except ValueError:
        raise ValueError(f"{text!r}: --max-steps is a whole number of optimizer steps") from None
    if n < 1:
        raise ValueError(f"{text!r}: --max-steps counts from 1")
    return n


def device_memory(torch) -> list:
    """Each visible device's memory size, for `memscope plan` (a snapshot does not record it).
    Asks the driver nothing that allocates: safe while an OOM unwinds."""
    out = []
    try:
        for i in range(torch.cuda.device_count()):
            out.append({"index": i, "total_memory": int(torch.cuda.get_device_properties(i).total_memory)})
    except Exception:  # a broken or partial torch: the snapshot is what matters
        return []
    return out


# -- the device beyond the allocator (issue #41) ----------------------------------------------
MESSAGE_LIMIT = 2000

# Failures to allocate that PyTorch's caching allocator does not raise as OutOfMemoryError.
OUTSIDE_OOM_MARKERS = (
    ("nccl", ("ncclUnhandledCudaError", "Failed to CUDA calloc", "NCCL error")),
    ("cublas", ("CUBLAS_STATUS_ALLOC_FAILED",)),
    ("cudnn", ("CUDNN_STATUS_ALLOC_FAILED", "CUDNN_STATUS_NOT_ENOUGH_WORKSPACE")),
    ("cuda", ("CUDA error: out of memory", "cudaErrorMemoryAllocation")),
)


# Errors that name no failed allocation but are what a library says when it cannot get memory
# for its handle: on an H200 filled to 3.1 MiB free, the first convolution raised only
# `cuDNN error: CUDNN_STATUS_INTERNAL_ERROR` (fixtures/device41/cudnn_fill). Taken for an OOM
# only when the device had under FULL_BELOW free at the error, and recorded as such a reading.
INTERNAL_ERROR_MARKERS = (
    ("cudnn", ("CUDNN_STATUS_INTERNAL_ERROR",)),
)
FULL_BELOW = 256 << 20


def _chain_texts(exc):
    """The texts of `exc` and what it was raised from (`__cause__`, else `__context__`), each cut
    to 20,000 characters, at most 32 of them."""
    seen = 0
    while exc is not None and seen < 32:
        yield str(exc)[:20000]
        exc = exc.__cause__ or exc.__context__
        seen += 1


def internal_error_source(exc):
    """`cudnn` when `exc` (or what it was raised from) is one of INTERNAL_ERROR_MARKERS."""
    for text in _chain_texts(exc):
        for source, markers in INTERNAL_ERROR_MARKERS:
            if any(m in text for m in markers):
                return source
    return None


def free_now(torch):
    """The current device's free bytes (cudaMemGetInfo), or None."""
    try:
        return int(torch.cuda.mem_get_info()[0])
    except Exception:
        return None


def outside_oom_source(exc):
    """`nccl`, `cublas`, `cudnn` or `cuda` when `exc` (or what it was raised from) is a failure
    to allocate outside PyTorch's allocator; None otherwise. NCCL counts only when its message
    also says memory ran out."""
    for text in _chain_texts(exc):
        for source, markers in OUTSIDE_OOM_MARKERS:
            if any(m in text for m in markers):
                if source != "nccl" or "out of memory" in text or "calloc" in text or "alloc" in text.lower():
                    return source
    return None


class _Nvml:
    """NVML through ctypes (no pynvml needed): device memory and per-process usage. Every call
    answers None where NVML is missing or refuses."""

    def __init__(self):
        self.lib = None
        try:
            import ctypes
            self.ct = ctypes
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() == 0:
                self.lib = lib
        except Exception:
            self.lib = None

    def handle(self, index, uuid=None):
        if self.lib is None:
            return None
        ct = self.ct
        h = ct.c_void_p()
        if uuid:
            u = uuid if uuid.startswith(("GPU-", "MIG-")) else "GPU-" + uuid
            if self.lib.nvmlDeviceGetHandleByUUID(u.encode(), ct.byref(h)) == 0:
                return h
        if self.lib.nvmlDeviceGetHandleByIndex_v2(ct.c_uint(index), ct.byref(h)) == 0:
            return h
        return None

    def memory(self, h):
        ct = self.ct

        class Mem(ct.Structure):
            _fields_ = [("total", ct.c_ulonglong), ("free", ct.c_ulonglong), ("used", ct.c_ulonglong)]
        m = Mem()
        if h is None or self.lib.nvmlDeviceGetMemoryInfo(h, ct.byref(m)) != 0:
            return None
        return {"total": int(m.total), "free": int(m.free), "used": int(m.used)}

    def processes(self, h):
        ct = self.ct

        class Proc(ct.Structure):
            _fields_ = [("pid", ct.c_uint), ("usedGpuMemory", ct.c_ulonglong),
                        ("gpuInstanceId", ct.c_uint), ("computeInstanceId", ct.c_uint)]
        if h is None:
            return None
        for name in ("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"):
            fn = getattr(self.lib, name, None)
            if fn is None:
                continue
            n = ct.c_uint(64)
            arr = (Proc * 64)()
            if fn(h, ct.byref(n), arr) != 0:
                continue
            out = []
            for p in arr[:min(n.value, 64)]:
                used = int(p.usedGpuMemory)
                out.append({"pid": int(p.pid), "used": None if used >= (1 << 62) else used})
            return out
        return None


_NVML = None


def nvml():
    global _NVML
    if _NVML is None:
        _NVML = _Nvml()
    return _NVML


def _uuid(torch, i):
    try:
        u = getattr(torch.cuda.get_device_properties(i), "uuid", None)
        return str(u) if u is not None else None
    except Exception:
        return None


def nvml_usage(torch, i):
    """NVML's view of device `i`: its used/free bytes, this process's bytes and the other
    processes' bytes; {"available": False} where NVML cannot say."""
    n = nvml()
    if n.lib is None:
        return {"available": False}
    h = n.handle(i, _uuid(torch, i))
    mem = n.memory(h) if h is not None else None
    if mem is None:
        return {"available": False}
    out = {"available": True, "used": mem["used"], "free": mem["free"], "total": mem["total"]}
    procs = n.processes(h)
    if procs is not None:
        me = os.getpid()
        out["process_self"] = sum(p["used"] or 0 for p in procs if p["pid"] == me)
        others = [p for p in procs if p["pid"] != me]
        out["process_others"] = sum(p["used"] or 0 for p in others)
        out["other_pids"] = len(others)
    return out


def origin(torch) -> dict:
    """Where the capture is taken (issue #40: `memscope summarize` files it with the rank):
    torch's version, the CUDA it was built for (None on a CPU build) and the host. A value
    that cannot be read is left out."""
    out = {}
    for key, read in (("torch_version", lambda: str(torch.__version__)),
                      ("cuda_version", lambda: torch.version.cuda),
                      ("host", socket.gethostname)):
        try:
            value = read()
        except Exception:
            continue
        out[key] = None if value is None else str(value)[:255]
    return out


def device_state(torch, context=None, error=None) -> dict:
    """What `memscope run` adds under the snapshot's `memscope` key: each device's size, free
    bytes (cudaMemGetInfo) and NVML's view, the CUDA context measured at start-up, the NCCL
    settings, the ranks, and the error that raised a non-allocator OOM."""
    devices = device_memory(torch)
    try:
        current = int(torch.cuda.current_device())
    except Exception:
        current = None
    for d in devices:
        # cudaMemGetInfo on the process's own device only: on another it would create a
        # context there (hundreds of MiB).
        if d["index"] == current:
            try:
                free, _total = torch.cuda.mem_get_info(d["index"])
                d["free"] = int(free)
            except Exception:
                pass
        try:
            d["nvml"] = nvml_usage(torch, d["index"])
        except Exception:
            d["nvml"] = {"available": False}
        if context and context.get("device") == d["index"]:
            d["context"] = context
    env = {k: v[:200] for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")}
    ranks = {}
    for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"):
        try:
            ranks[k.lower()] = int(os.environ[k])
        except (KeyError, ValueError):
            pass
    out = {**origin(torch), "devices": devices, "current_device": current, "nccl_env": env, **ranks}
    if error is not None:
        out["error"] = error
    return out


def _has_context(torch, i):
    """Whether device `i` has its CUDA primary context; None where this torch cannot say."""
    has = getattr(getattr(torch, "_C", None), "_cuda_hasPrimaryContext", None)
    if has is None:
        return None
    try:
        return bool(has(i))
    except Exception:
        return None


def measure_context(torch, moment, create=False):
    """The CUDA context on the current device: NVML's bytes for this process there less the
    allocator's reserved bytes, taken before NCCL or anything else outside the allocator ran
    (`moment` says when: `cuda_init`, `set_device`, `init_process_group`). Kernels loaded
    lazily by then count with it (module images live outside the allocator too).

    Creates a context only with `create` (right after the program's own `set_device(i)`, on
    the device it chose): `torch.cuda._lazy_init` often runs inside `set_device`, before the
    device is chosen, and a context forced then would land on the wrong card. Where this torch
    cannot say whether a context exists, NVML listing the process decides."""
    try:
        i = int(torch.cuda.current_device())
        has = _has_context(torch, i)
        if has is False:
            if not create:
                return None
            torch.cuda.mem_get_info(i)  # cudaMemGetInfo: the primary context, on device i
        reserved = int(torch.cuda.memory_reserved(i))
        usage = nvml_usage(torch, i)
    except Exception:
        return None
    own = usage.get("process_self")
    if not own or own < reserved:
        return None
    return {"device": i, "bytes": own - reserved, "source": "nvml_process_less_reserved",
            "moment": moment, "nvml_process": own, "reserved": reserved}


def _measure_at(recorder, torch, owner, name, moment, create, before):
    """Wraps `owner.name` so the context is measured once, `before` or after the call."""
    original = getattr(owner, name, None) if owner is not None else None
    if original is None or getattr(original, "_memscope_wrapped", False):
        return

    def measure():
        if recorder.context is None and recorder.recording:
            recorder.context = measure_context(torch, moment, create=create)

    def wrapper(*args, **kwargs):
        if before:
            measure()
        result = original(*args, **kwargs)
        if not before:
            measure()
        return result

    wrapper._memscope_wrapped = True
    wrapper.__wrapped__ = original
    wrapper.__doc__ = getattr(original, "__doc__", None)
    wrapper.__name__ = getattr(original, "__name__", name)
    try:
        setattr(owner, name, wrapper)
    except Exception:
        pass


def hook_context_measurement(recorder, torch):
    """Measures the CUDA context at the first moment it exists and nothing else is outside
    the allocator: right after the program's `torch.cuda.set_device(i)` (making the context
    on device i, as the program's next CUDA call would), else just before
    `torch.distributed.init_process_group` (NCCL builds its communicator there or later)."""
    _measure_at(recorder, torch, getattr(torch, "cuda", None), "set_device", "set_device", True, False)
    _measure_at(recorder, torch, getattr(torch, "distributed", None), "init_process_group",
                "init_process_group", False, True)


def write_snapshot(torch, path: str, state=None) -> None:
    """What `torch.cuda.memory._dump_snapshot(path)` writes, plus `memscope: {devices: [...]}`
    (each device's memory size). Other readers ignore the extra key. Falls back to
    `_dump_snapshot` where `_snapshot` is missing."""
    mem = torch.cuda.memory
    snapshot = getattr(mem, "_snapshot", None)
    if snapshot is None:
        mem._dump_snapshot(path)
        return
    import pickle

    s = snapshot()
    if isinstance(s, dict):
        try:
            s["memscope"] = state() if state is not None else {"devices": device_memory(torch)}
        except Exception:  # the device figures are extra: the snapshot is what matters
            s["memscope"] = {"devices": device_memory(torch)}
    with open(path, "wb") as f:
        pickle.dump(s, f)


def oom_classes(torch) -> tuple:
    found = []
    for owner, name in ((torch, "OutOfMemoryError"), (getattr(torch, "cuda", None), "OutOfMemoryError")):
        cls = getattr(owner, name, None) if owner is not None else None
        if isinstance(cls, type) and cls not in found:
            found.append(cls)
    return tuple(found)


def is_oom(exc, torch) -> bool:
    """Whether `exc`, or an exception it was raised from or during, is a CUDA OOM."""
    classes = oom_classes(torch)
    seen = 0
    while exc is not None and seen < 32:
        if classes and isinstance(exc, classes):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


class Recorder:
    """Records the allocator's history from `start()` and writes snapshots and a trace."""

    def __init__(self, out_dir, snapshot_on="oom", max_entries=DEFAULT_MAX_ENTRIES,
                 stacks=DEFAULT_STACKS, profile_steps=None, torch=None, announce=True, max_steps=None):
        if snapshot_on not in SNAPSHOT_ON:
            raise ValueError(f"snapshot_on must be one of {SNAPSHOT_ON}, not {snapshot_on!r}")
        if stacks not in ("python", "all"):
            raise ValueError(f"stacks must be 'python' or 'all', not {stacks!r}")
        self.out_dir = os.path.abspath(out_dir)
        self.snapshot_on = snapshot_on
        self.max_entries = int(max_entries)
        self.stacks = stacks
        self.profile_steps = profile_steps
        # Stop the program after this many optimizer steps (`--max-steps`): a capture for
        # `memscope plan` needs a few steps, not a whole training run.
        self.max_steps = max_steps
        self.torch = torch
        self.announce = announce
        # The process that writes the plain file names (see `output_path`).
        self.main_pid = os.getpid()
        self.recording = False
        self.written = []
        self.oom_written = False
        self._steps_done = 0
        self._prof = None
        self._prof_done = False
        # The CUDA context measured when CUDA initialised, the error of a non-allocator OOM,
        # and the boot directory where the "this process used CUDA" marker goes.
        self.context = None
        self.error = None
        self.boot_dir = None

    # -- recording ---------------------------------------------------------------------------
    def start(self):
        if self.recording:
            return
        self.torch.cuda.memory._record_memory_history(
            enabled="all", context="all", stacks=self.stacks, max_entries=self.max_entries)
        self.recording = True
        if self.profile_steps and self.profile_steps[0] == 1:
            self._start_profiler()

    def stop(self):
        if self.recording:
            self.torch.cuda.memory._record_memory_history(enabled=None)
            self.recording = False

    def _path(self, kind: str, ext: str) -> str:
        """Where this process writes KIND; the directory is made now, when a file is written."""
        os.makedirs(self.out_dir, exist_ok=True)
        return output_path(self.out_dir, kind, ext, main=os.getpid() == self.main_pid)

    def dump(self, kind: str):
        """Writes `memscope-KIND[-rankR].pickle`; returns its path, or None when not recording."""
        if not self.recording:
            return None
        path = self._path(kind, ".pickle")
        write_snapshot(self.torch, path, lambda: device_state(self.torch, self.context, self.error))
        self.written.append(path)
        if kind == "oom":
            self.oom_written = True
        if self.announce:
            print(f"memscope: wrote {path}", file=sys.stderr, flush=True)
        return path

    def on_exception(self, exc):
        if self.snapshot_on not in ("oom", "both") or self.oom_written:
            return
        if is_oom(exc, self.torch):
            self.dump("oom")
            return
        source = outside_oom_source(exc)
        reading = {}
        if source is None:
            source = internal_error_source(exc)
            free = free_now(self.torch) if source is not None else None
            if free is None or free >= FULL_BELOW:
                return
            reading = {"reading": "internal_error_full_card", "free_at_error": free,
                       "full_below": FULL_BELOW}
        if source is not None:
            self.error = {"source": source, "type": type(exc).__name__[:200],
                          "message": str(exc)[:MESSAGE_LIMIT], **reading}
            self.dump("oom")

    def mark_cuda_used(self):
        """Leaves `cuda-PID` in the boot directory: `memscope run` then never says a process
        that used CUDA did not."""
        if self.boot_dir is None:
            return
        try:
            with open(os.path.join(self.boot_dir, f"cuda-{os.getpid()}"), "w") as f:
                f.write(" ".join(getattr(sys, "orig_argv", sys.argv))[:500])
        except OSError:
            pass

    def on_exit(self):
        self._stop_profiler()
        if not self.oom_written and self.snapshot_on in ("oom", "both"):
            last = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
            if last is not None:
                self.on_exception(last)
        # After an OOM snapshot an exit one would hold the same history: `both` writes one of them.
        if self.snapshot_on in ("exit", "both") and not self.oom_written:
            self.dump("exit")

    # -- profiler over optimizer steps -------------------------------------------------------
    def install_step_hook(self):
        if not self.profile_steps and not self.max_steps:
            return
        # Imported by name: `torch.optim.optimizer` need not be an attribute of `torch.optim`
        # right after `import torch`.
        try:
            module = importlib.import_module(self.torch.__name__ + ".optim.optimizer")
            register = module.register_optimizer_step_post_hook
        except (ImportError, AttributeError) as e:
            print(f"memscope: no global optimizer step hook in this torch ({e}); --profile-steps and --max-steps ignored",
                  file=sys.stderr)
            return
        register(self._after_step)

    def _after_step(self, *_args, **_kwargs):
        self._steps_done += 1
        if self.profile_steps:
            self._profile_step()
        if self.max_steps and self._steps_done >= self.max_steps:
            if self.announce:
                print(f"memscope: stopping the program after {self._steps_done} optimizer steps (--max-steps)",
                      file=sys.stderr, flush=True)
            # Out of `optimizer.step()` and the user's loop; the exit hooks write the snapshot.
            raise SystemExit(0)

    def _profile_step(self):
        first, last = self.profile_steps
        if self._prof is not None:
            if self._steps_done >= last:
                self._stop_profiler()  # closes ProfilerStep#B
            else:
                self._prof.step()  # ProfilerStep#N ends, ProfilerStep#N+1 begins
        elif not self._prof_done and self._steps_done == first - 1 and self.recording:
            self._start_profiler()

    def _start_profiler(self):
        prof_mod = self.torch.profiler
        acts = [prof_mod.ProfilerActivity.CPU]
        if getattr(self.torch.cuda, "is_available", lambda: False)():
            acts.append(prof_mod.ProfilerActivity.CUDA)
        # A schedule that always records: without one torch's profiler marks no steps; with it
        # every `step()` closes `ProfilerStep#N` and opens the next, and nothing is dropped.
        record = prof_mod.ProfilerAction.RECORD
        self._prof = prof_mod.profile(activities=acts, schedule=lambda _step: record,
                                      profile_memory=True, with_stack=True, record_shapes=True)
        try:
            self._prof.step_num = self.profile_steps[0]  # ProfilerStep#A for step A
        except AttributeError:
            pass
        self._prof.start()

    def _stop_profiler(self):
        if self._prof is None:
            return
        prof, self._prof = self._prof, None
        self._prof_done = True
        prof.stop()
        path = self._path("trace", ".json")
        prof.export_chrome_trace(path)
        self.written.append(path)
        if self.announce:
            print(f"memscope: wrote {path} (steps {self.profile_steps[0]}..{min(self._steps_done, self.profile_steps[1])})",
                  file=sys.stderr, flush=True)


# -- the sitecustomize side ------------------------------------------------------------------

def _chain_sitecustomize(here: str):
    """Runs the `sitecustomize` module this file hides on `sys.path`, if any."""
    def norm(p):
        return os.path.normcase(os.path.abspath(p or os.getcwd()))
    path = [p for p in sys.path if norm(p) != norm(here)]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


def _is_launcher(argv) -> bool:
    """torchrun's launcher process: its workers record, it does not."""
    launchers = ("torchrun", "torch.distributed.run", "torch.distributed.launch")
    return any(os.path.basename(a) in launchers for a in list(argv or [])[:3])


class _TorchImportHook:
    """A meta-path finder that calls `callback(torch)` once `import torch` has finished."""

    def __init__(self, callback):
        self.callback = callback

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        original = loader.exec_module
        callback = self.callback

        def exec_module(module):
            original(module)
            callback(module)

        loader.exec_module = exec_module
        return spec


def attach(recorder: Recorder, torch):
    """Starts `recorder` when CUDA initialises (now, if it already has) and hooks OOM and exit."""
    recorder.torch = torch
    cuda = torch.cuda
    original = cuda._lazy_init
    state = {"busy": False}

    def _lazy_init(*args, **kwargs):
        result = original(*args, **kwargs)
        if not recorder.recording and not state["busy"]:
            state["busy"] = True
            try:
                recorder.mark_cuda_used()
                recorder.start()
                recorder.context = measure_context(torch, "cuda_init")
            except Exception as e:  # never break the user's program
                print(f"memscope: could not start recording: {e}", file=sys.stderr)
            finally:
                state["busy"] = False
        return result

    cuda._lazy_init = _lazy_init
    is_initialized = getattr(cuda, "is_initialized", None)
    if is_initialized is not None and is_initialized():
        _lazy_init()
    hook_context_measurement(recorder, torch)
    recorder.install_step_hook()

    previous_hook = sys.excepthook

    def excepthook(exc_type, exc, tb):
        try:
            recorder.on_exception(exc)
        except Exception as e:
            print(f"memscope: could not write the OOM snapshot: {e}", file=sys.stderr)
        previous_hook(exc_type, exc, tb)

    sys.excepthook = excepthook

    def at_exit():
        try:
            recorder.on_exit()
        except Exception as e:
            print(f"memscope: could not write the snapshot at exit: {e}", file=sys.stderr)

    atexit.register(at_exit)

    # `os._exit` (common after a distributed failure) runs no exit hooks: write the exit
    # snapshot first, as atexit would have.
    real_exit = os._exit

    def _exit(code):
        at_exit()
        real_exit(code)

    os._exit = _exit


def recorder_from_env(environ=None):
    """The `Recorder` `memscope run` asked for through the environment, or None."""
    environ = os.environ if environ is None else environ
    out_dir = environ.get("MEMSCOPE_RUN_DIR")
    if not out_dir:
        return None
    main_pid = claim_main(environ)
    recorder = Recorder(
        out_dir,
        snapshot_on=environ.get("MEMSCOPE_SNAPSHOT_ON", "oom"),
        max_entries=int(environ.get("MEMSCOPE_MAX_ENTRIES", DEFAULT_MAX_ENTRIES)),
        stacks=environ.get("MEMSCOPE_STACKS", DEFAULT_STACKS),
        profile_steps=parse_profile_steps(environ.get("MEMSCOPE_PROFILE_STEPS")),
        max_steps=parse_max_steps(environ.get("MEMSCOPE_MAX_STEPS")),
    )
    recorder.main_pid = main_pid
    return recorder


def note_missing_torch(here: str):
    """Leaves `no-torch-PID` (this interpreter's path) in the boot directory when this Python
    cannot import torch: `memscope run` then says so instead of "it never used CUDA"."""
    import importlib.util
    try:
        missing = importlib.util.find_spec("torch") is None
    except (ImportError, ValueError):
        missing = True
    if missing:
        try:
            with open(os.path.join(here, f"no-torch-{os.getpid()}"), "w") as f:
                f.write(sys.executable or "python")
        except OSError:
            pass


def boot(here: str):
    """What `sitecustomize` does under `memscope run`."""
    try:
        _chain_sitecustomize(here)
    finally:
        try:
            recorder = recorder_from_env()
        except ValueError as e:
            print(f"memscope: {e}; not recording", file=sys.stderr)
            recorder = None
        if recorder is not None and not _is_launcher(getattr(sys, "orig_argv", sys.argv)):
            note_missing_torch(here)
            recorder.boot_dir = here
            if "torch" in sys.modules:
                attach(recorder, sys.modules["torch"])
            else:
                sys.meta_path.insert(0, _TorchImportHook(lambda torch: attach(recorder, torch)))


if __name__ == "sitecustomize":
    boot(os.path.dirname(os.path.abspath(__file__)))
