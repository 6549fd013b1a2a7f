"""`memscope.capture()`: record the allocator's history around a block or a function.

    import memscope

    with memscope.capture("mem/"):          # or @memscope.capture("mem/") on a function
        train()

writes `mem/memscope-oom.pickle` when an `OutOfMemoryError` escapes the block (then re-raises
it), and with `snapshot_on="exit"` or `"both"` `mem/memscope-exit.pickle` when the block ends.
Under torchrun the rank is in the name (`memscope-oom-rank1.pickle`). Recording stops when the
block ends. The defaults keep the overhead and the file small: `max_entries=100_000` allocator
events (the oldest are dropped past that; memscope says so), `stacks="python"` (Python frames
only: C++ unwinding costs far more per allocation).
"""

from __future__ import annotations

import contextlib

from memscope._recorder import DEFAULT_MAX_ENTRIES, DEFAULT_STACKS, Recorder


class capture(contextlib.ContextDecorator):
    """Context manager and decorator: record, write a snapshot on OOM (and on exit if asked)."""

    def __init__(self, out_dir: str = "memscope-snapshots", snapshot_on: str = "oom",
                 max_entries: int = DEFAULT_MAX_ENTRIES, stacks: str = DEFAULT_STACKS):
        self._args = dict(out_dir=out_dir, snapshot_on=snapshot_on, max_entries=max_entries,
                          stacks=stacks)
        Recorder(**self._args)  # checks the arguments now, not at the first use
        self.recorder = None

    @property
    def written(self) -> list:
        """The files written by the last use."""
        return list(self.recorder.written) if self.recorder else []

    def __enter__(self):
        import torch

        self.recorder = Recorder(**self._args, torch=torch)
        # Recording starts in an initialised CUDA context, as under `memscope run`: a block is
        # about to use CUDA anyway.
        torch.cuda.init()
        self.recorder.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        r = self.recorder
        try:
            if exc is not None:
                r.on_exception(exc)
            if r.snapshot_on in ("exit", "both") and not r.oom_written:
                r.dump("exit")
        finally:
            r.stop()
        return False
