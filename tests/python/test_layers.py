"""tools/layers.py, the layering check of `.ci/run`: it catches an import circle and an upward
import planted in a copy of the tree (the real `src/` is never touched), and ignores what is no
import (a doc comment, a string, a test module)."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "layers.py")


def run(src):
    p = subprocess.run([sys.executable, TOOL, src], capture_output=True, text=True)
    return p.returncode, p.stdout


def violations(out):
    """The violation lines of the tool's output."""
    lines = out.splitlines()
    at = next((i for i, l in enumerate(lines) if "layering violation" in l), len(lines))
    return {l.strip() for l in lines[at + 1:]}


class LayersTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.src = os.path.join(self.tmp, "src")
        shutil.copytree(os.path.join(ROOT, "src"), self.src)
        self.before = violations(run(self.src)[1])

    def planted(self):
        """The violations the planted lines added."""
        rc, out = run(self.src)
        self.assertEqual(rc, 1, out)
        return violations(out) - self.before, out

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def append(self, rel, text):
        with open(os.path.join(self.src, rel), "a", encoding="utf-8") as f:
            f.write(text)

    def test_the_tree_is_layered(self):
        rc, out = run(os.path.join(ROOT, "src"))
        self.assertEqual(rc, 0, out)
        self.assertIn("no circle, no upward import", out)
        self.assertIn("analysis", out)

    def test_a_planted_upward_import_fails(self):
        self.append("analysis/mod.rs", "\n#[allow(unused_imports)]\nuse crate::check::Status;\n")
        new, out = self.planted()
        self.assertIn("upward: analysis (analysis) uses check (views), a higher layer", new, out)

    def test_a_planted_circle_fails(self):
        # check uses wording; wording using check closes a circle (and is upward too).
        self.append("wording/mod.rs", "\nfn planted() { let _ = crate::check::CHECK_SCHEMA; }\n")
        new, out = self.planted()
        self.assertTrue(any(v.startswith("circle") and "check <-> wording" in v for v in new), out)
        # A circle within one layer is caught too: report uses query; query using report.
        shutil.rmtree(self.src)
        shutil.copytree(os.path.join(ROOT, "src"), self.src)
        self.append("query/mod.rs", "\nuse crate::{escape, report::Format as _};\n")
        new, out = self.planted()
        self.assertTrue(any(v.startswith("circle") and "query <-> report" in v for v in new), out)
        self.assertFalse(any(v.startswith("upward") for v in new), out)

    def test_the_tui_reaching_the_report_fails(self):
        self.append("tui/mod.rs", "\nuse super::report;\n")
        self.before.discard("forbidden: tui uses report")
        new, out = self.planted()
        self.assertIn("forbidden: tui uses report", new, out)

    def test_comments_strings_and_tests_are_no_imports(self):
        self.append(
            "analysis/mod.rs",
            '\n/// See [`crate::report::Format`].\nconst _PLANTED: &str = "crate::tui::App";\n'
            "#[cfg(test)]\nmod planted { use crate::check::Status; }\n",
        )
        rc, out = run(self.src)
        self.assertEqual(violations(out), self.before, out)


if __name__ == "__main__":
    unittest.main()
