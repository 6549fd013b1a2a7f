"""Where pip put the `memscope` binary, for `python -m memscope`.

pip installs a `bin` wheel's executable into the scheme's scripts directory, which depends on how
it was installed: a virtualenv or the system (`sysconfig` scripts of this interpreter or its base),
`pip install --user` (the user scheme), `pip install --prefix P` (`P/bin`, with this package under
`P/lib/pythonX.Y/site-packages/memscope`; `lib64/` on Fedora and RHEL, whose platform wheels go
there; `P/local/bin` and `P/local/lib/pythonX.Y/dist-packages` with Debian's and Ubuntu's Python)
or `pip install --target T` (`T/bin`, with this package at `T/memscope`). The search uv's
`find_uv_bin` does, with those distributions' layouts too.
"""

from __future__ import annotations

import fnmatch
import os
import sys
import sysconfig


class MemscopeNotFound(FileNotFoundError):
    """No `memscope` executable in any of the places pip puts one."""


def _user_scripts() -> str | None:
    if sys.version_info >= (3, 10):
        scheme = sysconfig.get_preferred_scheme("user")
    elif os.name == "nt":
        scheme = "nt_user"
    elif sys.platform == "darwin" and getattr(sys, "_framework", None):
        scheme = "osx_framework_user"
    else:
        scheme = "posix_user"
    try:
        return sysconfig.get_path("scripts", scheme=scheme)
    except KeyError:
        return None


def _strip_suffix(path: str, pattern: str) -> str | None:
    """`path` without its last components when they match `pattern` (`/`-separated, `*` allowed)."""
    parts = os.path.normpath(path).split(os.sep)
    want = pattern.split("/")
    if len(parts) <= len(want):
        return None
    tail = parts[-len(want):]
    if not all(fnmatch.fnmatch(p.lower(), w.lower()) for p, w in zip(tail, want)):
        return None
    return os.sep.join(parts[: -len(want)]) or os.sep


def candidate_dirs(package_dir: str | None = None) -> list[str]:
    """The directories searched, in order, without duplicates."""
    package_dir = package_dir or os.path.dirname(os.path.abspath(__file__))
    # `lib` or `lib64`; `site-packages`, or `dist-packages` (Debian's Python, under `P/local`).
    prefix_root = _strip_suffix(package_dir, "lib*/python*/*-packages/memscope")
    target_root = _strip_suffix(package_dir, "memscope")
    dirs = [
        sysconfig.get_path("scripts"),
        sysconfig.get_path("scripts", vars={"base": sys.base_prefix}),
        _user_scripts(),
        os.path.join(prefix_root, "bin") if prefix_root else None,
        os.path.join(target_root, "bin") if target_root else None,
    ]
    seen: list[str] = []
    for d in dirs:
        if d and d not in seen:
            seen.append(d)
    return seen


def find_memscope_bin(package_dir: str | None = None) -> str:
    """The path of the `memscope` executable installed with this package."""
    exe = "memscope" + (sysconfig.get_config_var("EXE") or "")
    dirs = candidate_dirs(package_dir)
    for d in dirs:
        path = os.path.join(d, exe)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    listed = "\n".join(f" - {d}" for d in dirs)
    raise MemscopeNotFound(f"could not find the memscope binary in any of:\n{listed}")
