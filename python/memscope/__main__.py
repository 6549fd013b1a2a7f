"""`python -m memscope ARGS`: run the `memscope` binary installed with this package."""

import os
import subprocess
import sys

from memscope._find_bin import MemscopeNotFound, find_memscope_bin


def _run() -> int:
    try:
        exe = find_memscope_bin()
    except MemscopeNotFound as e:
        print(f"memscope: {e}", file=sys.stderr)
        return 2
    args = [exe, *sys.argv[1:]]
    if sys.platform == "win32":
        return subprocess.run(args).returncode
    # Replace this process, as the binary would be if it had been run directly: signals, exit
    # code and terminal all belong to it.
    os.execvp(exe, args)
    return 2  # not reached


if __name__ == "__main__":
    sys.exit(_run())
