"""memscope: offline forensics of PyTorch GPU memory.

The analysis is the `memscope` binary installed beside this package (`memscope --help`,
`python -m memscope --help`). This package adds what has to run inside the user's process:

- `memscope.capture()`, a context manager and decorator that records the CUDA caching
  allocator's history and writes a snapshot when an `OutOfMemoryError` escapes (and on exit if
  asked);
- the recorder `memscope run -- python train.py` injects (`memscope._recorder`);
- `find_memscope_bin()`, the path of the binary;
- `memscope.summarize(paths, out)` and `memscope.reduce(out)`: the map step of a large job (a
  map function for Dask, Ray, Spark or a Slurm array task) and its SQL reduce on DuckDB.
"""

from memscope._find_bin import MemscopeNotFound, find_memscope_bin
from memscope.capture import capture
from memscope.summarize import reduce, summarize

__all__ = ["capture", "find_memscope_bin", "MemscopeNotFound", "summarize", "reduce"]
