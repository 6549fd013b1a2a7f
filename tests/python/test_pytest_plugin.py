"""The pytest plugin's judging (`memscope.pytest_plugin.judge`) on committed real captures.

CPU only: a capture of a leaking run must fail with memscope's typed reason and sentence and name
the kept capture; its clean twin must pass; `max_peak` must fail above the capture's peak and pass
above it. The binary is `MEMSCOPE_BIN`, else target/debug or target/release of this checkout;
without one the cases skip visibly. Run: `python3 -m unittest discover -s tests/python`.
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
from memscope import pytest_plugin  # noqa: E402

LEAK = os.path.join(ROOT, "fixtures", "claims36", "ema_leak.pickle.gz")
CLEAN = os.path.join(ROOT, "fixtures", "claims36", "ema_clean.pickle.gz")
# The plugin's own captures from fixtures/pytest42/test_gpu_plugin.py on an H200 (fixtures/pytest42/pytest_gpu.txt).
GPU_LEAK = os.path.join(ROOT, "fixtures", "pytest42", "leaky_step.pickle.gz")
GPU_CLEAN = os.path.join(ROOT, "fixtures", "pytest42", "clean_step.pickle.gz")


def binary():
    env = os.environ.get("MEMSCOPE_BIN")
    if env:
        return env
    for profile in ("debug", "release"):
        p = os.path.join(ROOT, "target", profile, "memscope")
        if os.access(p, os.X_OK):
            return p
    return None


@unittest.skipIf(binary() is None, "no memscope binary: build it (cargo build) or set MEMSCOPE_BIN")
class JudgeTest(unittest.TestCase):
    def test_leaking_capture_fails_with_memscopes_finding(self):
        passed, message = pytest_plugin.judge(LEAK, leak=True, binary=binary())
        self.assertFalse(passed)
        self.assertIn("memscope: rule leak failed (leak_found):", message)
        self.assertIn("grows", message)
        self.assertIn(f"capture kept at {LEAK}", message)

    def test_clean_twin_passes(self):
        passed, message = pytest_plugin.judge(CLEAN, leak=True, binary=binary())
        self.assertTrue(passed, message)
        self.assertEqual(message, "")

    def test_plugin_recorded_captures(self):
        passed, message = pytest_plugin.judge(GPU_LEAK, leak=True, binary=binary())
        self.assertFalse(passed)
        self.assertIn("(leak_found): 1 leak finding", message)
        self.assertIn("test_gpu_plugin.py:38 (in _step)", message)
        passed, message = pytest_plugin.judge(GPU_CLEAN, leak=True, binary=binary())
        self.assertTrue(passed, message)

    def test_max_peak(self):
        passed, message = pytest_plugin.judge(CLEAN, max_peak="1 MiB", binary=binary())
        self.assertFalse(passed)
        self.assertIn("memscope: rule max-peak failed", message)
        passed, message = pytest_plugin.judge(CLEAN, max_peak="1 TiB", binary=binary())
        self.assertTrue(passed, message)

    def test_size_and_command(self):
        self.assertEqual(pytest_plugin.size_arg("2 GiB"), "2GiB")
        cmd = pytest_plugin.check_command("x.pickle", max_peak="2 GiB", leak=True, binary="m")
        self.assertEqual(cmd[-3:], ["--max-peak", "2GiB", "x.pickle"])
        self.assertIn("oom,leak", cmd)


def has_pytest():
    try:
        import pytest  # noqa: F401
    except ImportError:
        return False
    return True


@unittest.skipIf(not has_pytest(), "pytest is not installed")
class PluginUnderPytestTest(unittest.TestCase):
    """`pytest -p memscope.pytest_plugin` registers the markers and, with no CUDA, skips with a reason."""

    def test_markers_skip_without_cuda(self):
        import subprocess
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "test_x.py"), "w") as f:
                f.write("import pytest\n"
                        "@pytest.mark.cuda_no_leak(warmup=1, steps=2)\n"
                        "def test_a():\n    pass\n"
                        "@pytest.mark.cuda_memory(max_peak='2 GiB')\n"
                        "def test_b():\n    pass\n")
            env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), CUDA_VISIBLE_DEVICES="")
            proc = subprocess.run(
                [sys.executable, "-m", "pytest", "-p", "memscope.pytest_plugin", "-rs", "-q",
                 "--strict-markers", "-p", "no:cacheprovider", d],
                capture_output=True, text=True, env=env, cwd=d)
        out = proc.stdout + proc.stderr
        self.assertEqual(proc.returncode, 0, out)
        self.assertIn("2 skipped", out)
        self.assertIn("memscope markers need CUDA", out)


if __name__ == "__main__":
    unittest.main()
