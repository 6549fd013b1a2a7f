"""`python -m memscope` finds the binary wherever pip put it: a virtualenv, `--user`,
`--prefix`, `--target`.

A wheel laid out as maturin lays out memscope's (the package from `python/memscope`, the binary
as `memscope_torch-VERSION.data/scripts/memscope`) is built here with a stand-in binary, a shell
script that prints its arguments, so no Rust build is needed; pip installs it offline in each
layout and `python -m memscope` must run that script. `.ci/run` does the same with the real wheel
in a virtualenv.
"""

import base64
import csv
import hashlib
import io
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
import unittest
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.join(os.path.dirname(os.path.dirname(HERE)), "python", "memscope")
DIST = "memscope_torch-0.0.0"
FAKE_BIN = '#!/bin/sh\necho "memscope stand-in: $*"\n'


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [name, f"sha256={digest}", str(len(data))]


def build_wheel(out_dir):
    """A `py3-none-any` wheel with the package and the stand-in binary as a script."""
    files = {}
    for name in sorted(os.listdir(PKG)):
        if name.endswith(".py"):
            with open(os.path.join(PKG, name), "rb") as f:
                files[f"memscope/{name}"] = f.read()
    files[f"{DIST}.data/scripts/memscope"] = FAKE_BIN.encode()
    files[f"{DIST}.dist-info/METADATA"] = b"Metadata-Version: 2.1\nName: memscope-torch\nVersion: 0.0.0\n"
    files[f"{DIST}.dist-info/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: memscope-tests\nRoot-Is-Purelib: false\nTag: py3-none-any\n")
    record = io.StringIO()
    w = csv.writer(record, lineterminator="\n")
    for name, data in files.items():
        w.writerow(_record_line(name, data))
    w.writerow([f"{DIST}.dist-info/RECORD", "", ""])
    files[f"{DIST}.dist-info/RECORD"] = record.getvalue().encode()
    path = os.path.join(out_dir, f"{DIST}-py3-none-any.whl")
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            info = zipfile.ZipInfo(name)
            mode = 0o755 if name.endswith("scripts/memscope") else 0o644
            info.external_attr = (stat.S_IFREG | mode) << 16  # pip wants the file type too
            z.writestr(info, data)
    return path


def has_pip(python):
    return subprocess.run([python, "-m", "pip", "--version"], capture_output=True).returncode == 0


class PipLayouts(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not has_pip(sys.executable):
            raise unittest.SkipTest(f"{sys.executable} has no pip")
        cls.tmp = tempfile.mkdtemp(prefix="memscope-install-")
        cls.wheel = build_wheel(cls.tmp)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def pip_install(self, python, *args, env=None):
        # Everything goes to temporary directories, never into the system: a distribution's
        # Python that is "externally managed" (PEP 668) may let pip do that. Older pips ignore
        # the variable.
        env = dict(os.environ if env is None else env, PIP_BREAK_SYSTEM_PACKAGES="1")
        r = subprocess.run([python, "-m", "pip", "install", "--no-index", "--no-deps", "--quiet",
                            "--disable-pip-version-check", *args, self.wheel],
                           env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)

    def run_memscope(self, python, env):
        """`python -m memscope analyze x.pickle` from an unrelated directory."""
        r = subprocess.run([python, "-m", "memscope", "analyze", "x.pickle"], env=env, cwd=self.tmp,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual((r.returncode, r.stdout, r.stderr),
                         (0, "memscope stand-in: analyze x.pickle\n", ""))

    def clean_env(self, **extra):
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONUSERBASE")}
        env["PATH"] = "/usr/bin:/bin"  # no memscope on PATH: the finder must not rely on it
        env.update(extra)
        return env

    def test_target(self):
        t = os.path.join(self.tmp, "target")
        self.pip_install(sys.executable, "--target", t)
        self.assertTrue(os.path.isfile(os.path.join(t, "bin", "memscope")))
        self.run_memscope(sys.executable, self.clean_env(PYTHONPATH=t))

    def test_prefix(self):
        p = os.path.join(self.tmp, "prefix")
        self.pip_install(sys.executable, "--prefix", p)
        site = sysconfig.get_path("platlib", vars={"base": p, "platbase": p})
        self.assertTrue(os.path.isdir(os.path.join(site, "memscope")), site)
        self.run_memscope(sys.executable, self.clean_env(PYTHONPATH=site))

    def test_user_scheme_with_its_own_home(self):
        if sys.prefix != sys.base_prefix:
            self.skipTest("pip refuses --user inside a virtualenv")
        home = os.path.join(self.tmp, "home")
        os.makedirs(home)
        env = self.clean_env(HOME=home, PYTHONNOUSERSITE="")
        env.pop("PYTHONNOUSERSITE")
        self.pip_install(sys.executable, "--user", env=env)
        self.run_memscope(sys.executable, env)

    def test_virtualenv(self):
        v = os.path.join(self.tmp, "venv")
        r = subprocess.run([sys.executable, "-m", "venv", v], capture_output=True, text=True)
        if r.returncode != 0:
            self.skipTest(f"no venv module: {r.stderr.strip()}")
        py = os.path.join(v, "bin", "python")
        if not has_pip(py):
            self.skipTest("the virtualenv has no pip (ensurepip missing)")
        self.pip_install(py)
        self.run_memscope(py, self.clean_env())

    def test_debian_prefix_layout(self):
        """Debian's and Ubuntu's Python put `--prefix P` under `P/local/.../dist-packages`."""
        python = "/usr/bin/python3"
        probe = subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_path('platlib', vars={'base': 'P', 'platbase': 'P'}))"],
            capture_output=True, text=True) if os.path.exists(python) else None
        if probe is None or "dist-packages" not in probe.stdout or not has_pip(python):
            self.skipTest("no Debian-style system Python with pip here")
        p = os.path.join(self.tmp, "debian-prefix")
        self.pip_install(python, "--prefix", p)
        site = os.path.join(p, probe.stdout.strip()[len("P/"):])
        self.assertTrue(os.path.isfile(os.path.join(p, "local", "bin", "memscope")))
        self.run_memscope(python, self.clean_env(PYTHONPATH=site))


if __name__ == "__main__":
    unittest.main()
