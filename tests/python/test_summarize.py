"""`memscope.summarize` and `memscope.reduce` (issue #40): the map step through the real binary,
the shipped SQL on DuckDB, and a 40-rank Dask pipeline checked against `memscope analyze`.

The binary is $MEMSCOPE_BIN, else the checkout's target/debug/memscope (`cargo test` builds it;
.ci/run runs this after it). The DuckDB and Dask tests need `pip install duckdb
"dask[distributed]"` (.ci/run installs them in a virtualenv); without them they skip, and say so.
"""

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "sql"))

import memscope  # noqa: E402
from memscope import _sql  # noqa: E402

BIN = os.environ.get("MEMSCOPE_BIN") or os.path.join(ROOT, "target", "debug", "memscope")
BRIDGE = sorted(glob.glob(os.path.join(ROOT, "fixtures", "ranks", "bridge", "*.pickle.gz")))


def read(path):
    with open(path, "rb") as f:
        return f.read()


def have(module):
    try:
        __import__(module)
        return True
    except ImportError:
        return False


class EmbeddedSql(unittest.TestCase):
    def test_the_package_holds_the_queries_of_sql(self):
        import embed

        with open(os.path.join(ROOT, "python", "memscope", "_sql.py"), encoding="utf-8") as f:
            self.assertEqual(f.read(), embed.render(), "run python3 sql/embed.py")
        self.assertEqual(sorted(_sql.QUERIES), sorted(memscope.summarize.__globals__["QUERIES"]))


@unittest.skipUnless(os.access(BIN, os.X_OK), f"no memscope binary at {BIN} (cargo build)")
class Summarize(unittest.TestCase):
    def setUp(self):
        os.environ["MEMSCOPE_BIN"] = BIN
        self.tmp = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_rows_come_back_and_an_unreadable_capture_is_a_row(self):
        missing = os.path.join(self.tmp, "rank7_memory_snapshot.pickle")
        out = os.path.join(self.tmp, "out")
        rows = memscope.summarize(BRIDGE + [missing], out, fmt="jsonl", job="bridge", step="3")
        self.assertEqual([r["rank"] for r in rows], [0, 1, 2, 7])
        self.assertEqual([r["status"] for r in rows], ["ok", "ok", "ok", "missing"])
        oom = rows[2]
        self.assertEqual((oom["ooms"], oom["oom_cause"], oom["verdict"]), (1, "capacity", "oom_capacity"))
        self.assertIsNone(rows[3]["peak_allocated_bytes"])
        files = sorted(glob.glob(os.path.join(out, "job=bridge", "step=3", "rank=*", "*.jsonl")))
        self.assertIn("rank=7", files[-1])
        # site_id is the documented FNV-1a of rel_path, function and line: any engine recomputes it.
        sites = [json.loads(l) for f in files if "site_at_peak" in os.path.basename(f) for l in read(f).splitlines()]
        named = [s for s in sites if s["site_id"] is not None]
        self.assertTrue(named)
        for s in named:
            h = 0xCBF29CE484222325
            for b in f"{s['rel_path']}\0{s['function']}\0{s['line']}".encode():
                h = ((h ^ b) * 0x100000001B3) % (1 << 64)
            self.assertEqual(s["site_id"], f"{h:016x}")
        # Idempotent: the same captures give the same files, byte for byte.
        before = {f: read(f) for f in files}
        memscope.summarize(BRIDGE + [missing], out, fmt="jsonl", job="bridge", step="3")
        after = {f: read(f) for f in glob.glob(os.path.join(out, "**", "*.jsonl"), recursive=True)}
        self.assertEqual(before, after)

    def test_repo_root_identifies_a_site_by_its_path_below_the_checkout(self):
        roots = os.path.join(ROOT, "fixtures", "job40", "roots")
        caps = [os.path.join(roots, "node-a", "rank0_memory_snapshot.pickle.gz"),
                os.path.join(roots, "node-b", "rank1_memory_snapshot.pickle.gz")]

        def sites(repo_root, name):
            out = os.path.join(self.tmp, name)
            rows = memscope.summarize(caps, out, fmt="jsonl", repo_root=repo_root)
            files = sorted(glob.glob(os.path.join(out, "*", "*", "rank=*", "site_at_peak-*.jsonl")))
            got = {}
            for f in files:
                for line in read(f).splitlines():
                    s = json.loads(line)
                    if s["site_id"] is not None:
                        got[(s["rank"], s["file"], s["line"])] = (s["rel_path"], s["site_id"])
                        h = 0xCBF29CE484222325
                        for b in f"{s['rel_path']}\0{s['function']}\0{s['line']}".encode():
                            h = ((h ^ b) * 0x100000001B3) % (1 << 64)
                        self.assertEqual(s["site_id"], f"{h:016x}")
            return rows, got

        rows, plain = sites(None, "plain")
        # The host and torch version the captures record.
        self.assertEqual([(r["host"], r["host_from"], r["torch_version"]) for r in rows],
                         [("node-a", "capture", "2.11.0+cu128"), ("node-b", "capture", "2.11.0+cu128")])
        _, rooted = sites(["/home/alice/proj", "/scratch/j17/proj"], "rooted")
        a_model = (0, "/home/alice/proj/model/generate.py", 56)
        a_data = (0, "/home/alice/proj/data/generate.py", 56)
        b_model = (1, "/scratch/j17/proj/model/generate.py", 56)
        # The file's name alone by default: two files of one name, one identity.
        self.assertEqual(plain[a_model], plain[a_data])
        self.assertEqual(plain[a_model][0], "generate.py")
        # Below the roots: the two files part, and one file is one identity on both hosts.
        self.assertEqual(rooted[a_model], ("model/generate.py", rooted[b_model][1]))
        self.assertNotEqual(rooted[a_model][1], rooted[a_data][1])

    def test_rank_overrides_the_name_for_one_capture(self):
        rows = memscope.summarize(BRIDGE[0], os.path.join(self.tmp, "o"), rank=41, host="node3")
        self.assertEqual((rows[0]["rank"], rows[0]["host"], rows[0]["rank_from"]), (41, "node3", "summary"))
        with self.assertRaises(subprocess.CalledProcessError):
            memscope.summarize(BRIDGE, os.path.join(self.tmp, "o"), rank=41)
        with self.assertRaises(subprocess.CalledProcessError):
            memscope.summarize(BRIDGE, os.path.join(self.tmp, "o"), job="../up")

    @unittest.skipUnless(have("duckdb"), "duckdb is not installed (pip install duckdb)")
    def test_the_sql_reduce_agrees_with_the_job_view(self):
        for fmt in ("parquet", "jsonl"):
            out = os.path.join(self.tmp, fmt)
            memscope.summarize(BRIDGE, out, fmt=fmt)
            res = memscope.reduce(out, fmt=fmt)
            job = json.loads(subprocess.check_output([BIN, "analyze", "--format", "json", *BRIDGE]))["data"]
            imb = res["imbalance"][0]
            self.assertEqual((imb["max_rank"], imb["min_rank"]), (job["imbalance"]["max"]["rank"], job["imbalance"]["min"]["rank"]))
            self.assertAlmostEqual(imb["imbalance"], job["imbalance"]["max_over_min"], places=12)
            mx, mn = imb["max_bytes"], imb["min_bytes"]
            self.assertAlmostEqual(imb["spread_pct"], (mx - mn) / mx * 100, places=9)
            self.assertEqual([r["rank"] for r in res["first_oom"]], job["oom_ranks"])
            self.assertEqual([r["rank"] for r in res["far_above_median"]], [2])
            self.assertEqual(res["shared_leaks"], [])
            # The largest difference between the highest and the lowest rank is the job view's first.
            top = res["site_spread"][0]
            first = job["sites"]["changes"][0]
            self.assertEqual((top["line"], top["delta_bytes"]), (first["site"]["line"], first["delta_bytes"]))


@unittest.skipUnless(os.access(BIN, os.X_OK), f"no memscope binary at {BIN} (cargo build)")
@unittest.skipUnless(have("duckdb") and have("distributed"), 'needs pip install duckdb "dask[distributed]"')
class DaskPipeline(unittest.TestCase):
    def test_forty_ranks_through_dask_and_duckdb_equal_analyze(self):
        tmp = tempfile.mkdtemp()
        try:
            caps, out = os.path.join(tmp, "caps"), os.path.join(tmp, "out")
            job40 = os.path.join(ROOT, "fixtures", "job40")
            made = json.loads(subprocess.check_output(
                [sys.executable, os.path.join(job40, "make_ranks.py"), caps, "--ranks", "40", "--bad", "4"]))
            env = dict(os.environ, MEMSCOPE_BIN=BIN, PYTHONPATH=os.path.join(ROOT, "python"))
            p = subprocess.run(
                [sys.executable, os.path.join(job40, "pipeline.py"), caps, out, "--ranks", "40", "--chunk", "5"],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            self.assertEqual(p.returncode, 0, p.stdout)
            self.assertIn("PIPELINE EQUAL", p.stdout)
            self.assertIn(f'"missing": [{made["missing"][0]}]', p.stdout)
            self.assertIn(f"rank {made['oom_rank']} hit an OOM", p.stdout)
        finally:
            shutil.rmtree(tmp)


if __name__ == "__main__":
    unittest.main()
