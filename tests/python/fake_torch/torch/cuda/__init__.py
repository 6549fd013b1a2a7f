import os
from torch import OutOfMemoryError, _log  # noqa: F401
from torch.cuda import memory  # noqa: F401

_initialized = False


def _lazy_init():
    global _initialized
    if not _initialized:
        _initialized = True
        _log("lazy_init")


def init():
    _lazy_init()


def is_initialized():
    return _initialized


def is_available():
    return True


def empty(nbytes):
    """A tensor allocation: initialises CUDA first, as PyTorch's C++ side does."""
    import torch.cuda as c

    c._lazy_init()  # by attribute, as torch's device_lazy_init calls it
    return bytearray(nbytes)


class _Props:
    name = "Stand-in GPU"
    total_memory = 85017493504


def device_count():
    return 1


def get_device_properties(i):
    _log("props", device=i)
    return _Props()


if os.environ.get("FAKE_TORCH_FREE"):
    def mem_get_info(device=None):
        """(free, total) with free from `$FAKE_TORCH_FREE`; absent unless that is set."""
        return int(os.environ["FAKE_TORCH_FREE"]), _Props.total_memory
