"""A pytest plugin: gate a test's GPU memory with memscope, inside pytest.

Loaded by `pytest -p memscope.pytest_plugin`, or by plain `pytest` when the wheel is installed
(the `pytest11` entry point in pyproject.toml). Two markers:

    @pytest.mark.cuda_memory(max_peak="2 GiB")
    def test_forward(): ...

    @pytest.mark.cuda_no_leak(warmup=2, steps=8)
    def test_train_step(): ...          # the body is ONE training step

`cuda_memory` records the test once and fails when memscope's `max-peak` rule fails (or an OOM
is recorded). `cuda_no_leak` runs the test body `warmup` times unrecorded, then `steps` times
recorded (pytest-memray's `limit_leaks(..., warmups=N)` habit: the plugin repeats the body), and
fails when memscope finds a leak. memscope finds the steps in the capture as it does for any
run: the body should be one step (an optimizer step, or one call of the code under test).

The snapshot is written with memscope's recorder (`memscope._recorder`) and judged by the
memscope binary (`memscope check --format json`): the plugin reads memscope's typed result and
quotes it; it decides nothing itself. A failure names the rule, its typed reason, memscope's
sentence and evidence, and the kept capture's path. Captures of passing tests are deleted unless
`--memscope-keep DIR` is given (then every capture is kept there). Without CUDA the markers skip
with a reason. `MEMSCOPE_BIN` overrides where the binary is found.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile

MARKERS = {
    "cuda_memory": "cuda_memory(max_peak='2 GiB'): fail when memscope finds the test's peak of "
                   "allocated GPU memory above max_peak",
    "cuda_no_leak": "cuda_no_leak(warmup=2, steps=8): run the body warmup times, then steps "
                    "times recorded; fail when memscope finds a leak",
}


def memscope_bin() -> str:
    env = os.environ.get("MEMSCOPE_BIN")
    if env:
        return env
    from memscope._find_bin import find_memscope_bin

    return find_memscope_bin()


def size_arg(text) -> str:
    """`"2 GiB"` -> `"2GiB"` (memscope's size syntax has no space); ints are bytes."""
    if isinstance(text, int):
        return f"{text}B"
    return re.sub(r"\s+", "", str(text))


def check_command(path: str, max_peak=None, leak: bool = False, binary: str | None = None) -> list:
    fail_on = "oom,leak" if leak else "oom"
    cmd = [binary or memscope_bin(), "check", "--format", "json", "--no-config",
           "--color", "never", "--fail-on", fail_on]
    if max_peak is not None:
        cmd += ["--max-peak", size_arg(max_peak)]
    return cmd + [path]


def failures(report: dict) -> list:
    """The failing rules of memscope's `check` JSON, as memscope typed them."""
    out = []
    for f in report.get("data", {}).get("files", []):
        for r in f.get("rules", []):
            if r.get("status") == "fail":
                out.append(r)
    return out


def describe(rule: dict) -> str:
    lines = [f"memscope: rule {rule.get('rule')} failed ({rule.get('reason')}): {rule.get('message')}"]
    site = rule.get("site")
    if site:
        lines.append(f"  at {site.get('file')}:{site.get('line')} (in {site.get('function')})")
    for e in rule.get("evidence", []):
        lines.append(f"  {e}")
    return "\n".join(lines)


def judge(path: str, max_peak=None, leak: bool = False, binary: str | None = None):
    """Runs memscope on one capture. Returns (passed, message); message quotes memscope's failing
    rules (typed reason + sentence + evidence) and names the capture."""
    cmd = check_command(path, max_peak=max_peak, leak=leak, binary=binary)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        return False, f"memscope could not check {path} (exit {proc.returncode}):\n{proc.stderr.strip()}"
    report = json.loads(proc.stdout)
    failed = failures(report)
    if report.get("data", {}).get("passed", not failed) and not failed:
        return True, ""
    body = "\n".join(describe(r) for r in failed) or "memscope: check failed"
    return False, f"{body}\ncapture kept at {path}"


# -- pytest hooks -------------------------------------------------------------------------------
def pytest_addoption(parser):
    group = parser.getgroup("memscope")
    group.addoption("--memscope-keep", metavar="DIR", default=None,
                    help="keep every test's memscope capture in DIR (default: only failing tests', "
                         "in a temporary directory)")


def pytest_configure(config):
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")


def _cuda_torch():
    try:
        import torch
    except ImportError:
        return None, "torch is not installed"
    if not torch.cuda.is_available():
        return None, "no CUDA device"
    return torch, None


def _capture_dir(config, nodeid: str) -> str:
    keep = config.getoption("--memscope-keep")
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid)[-120:]
    if keep:
        d = os.path.join(os.path.abspath(keep), name)
    else:
        d = tempfile.mkdtemp(prefix="memscope-pytest-")
    os.makedirs(d, exist_ok=True)
    return d


def _record(torch, out_dir: str, run_once, warmup: int, steps: int) -> str:
    from memscope._recorder import Recorder

    for _ in range(warmup):
        run_once()
    torch.cuda.synchronize()
    rec = Recorder(out_dir, snapshot_on="exit", torch=torch, announce=False)
    torch.cuda.init()
    rec.start()
    try:
        for _ in range(steps):
            run_once()
        torch.cuda.synchronize()
        return rec.dump("exit")
    finally:
        rec.stop()


def pytest_pyfunc_call(pyfuncitem):
    mem = pyfuncitem.get_closest_marker("cuda_memory")
    leak = pyfuncitem.get_closest_marker("cuda_no_leak")
    if mem is None and leak is None:
        return None
    import pytest

    torch, why = _cuda_torch()
    if torch is None:
        pytest.skip(f"memscope markers need CUDA: {why}")
    args = pyfuncitem._fixtureinfo.argnames
    funcargs = {a: pyfuncitem.funcargs[a] for a in args}

    def run_once():
        pyfuncitem.obj(**funcargs)

    warmup = int(leak.kwargs.get("warmup", 2)) if leak else 0
    steps = int(leak.kwargs.get("steps", 8)) if leak else 1
    max_peak = mem.kwargs.get("max_peak", mem.args[0] if mem.args else None) if mem else None
    out_dir = _capture_dir(pyfuncitem.config, pyfuncitem.nodeid)
    path = _record(torch, out_dir, run_once, warmup, steps)
    passed, message = judge(path, max_peak=max_peak, leak=leak is not None)
    if passed and not pyfuncitem.config.getoption("--memscope-keep"):
        shutil.rmtree(out_dir, ignore_errors=True)
    if not passed:
        pytest.fail(message, pytrace=False)
    return True
