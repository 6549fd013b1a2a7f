"""A stand-in for `torch`, just what memscope's recorder touches, logging each call.

Every call is appended as one JSON line to `$FAKE_TORCH_LOG`; `_dump_snapshot` copies
`$FAKE_TORCH_SNAPSHOT` (a real snapshot) to the path it is given, so what the recorder writes is a
file memscope can read. CI has no torch; the GPU runs (fixtures/run/) cover the real one.
"""
import json
import os


def _log(event, **kw):
    path = os.environ.get("FAKE_TORCH_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(dict(event=event, **kw)) + "\n")


class OutOfMemoryError(RuntimeError):
    pass


__version__ = "2.11.0+cu128"


class version:
    cuda = "12.8"


from torch import cuda, optim, profiler  # noqa: E402,F401

_log("import")
