"""The shipped reduce queries on more than DuckDB (issue #40): sqlglot reads each one alike as
DuckDB, Spark SQL and BigQuery (BigQuery is checked this way only), and Spark SQL (local mode)
returns DuckDB's rows over the same files, Parquet and JSON Lines (fixtures/job40/engines.py).

The sqlglot test needs `pip install sqlglot`; the Spark one `pip install pyspark duckdb`, Java 17
and the binary ($MEMSCOPE_BIN, else target/debug/memscope). Without them they skip, and say so.
.ci/run installs them with the engine pipeline's DuckDB and Dask (pyspark is about 520 MB;
BENCHMARKS.md says what it costs).
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
JOB40 = os.path.join(ROOT, "fixtures", "job40")
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, JOB40)

BIN = os.environ.get("MEMSCOPE_BIN") or os.path.join(ROOT, "target", "debug", "memscope")


def have(module):
    try:
        __import__(module)
        return True
    except ImportError:
        return False


@unittest.skipUnless(have("sqlglot"), "sqlglot is not installed (pip install sqlglot)")
class Dialects(unittest.TestCase):
    def test_every_query_reads_alike_in_duckdb_spark_and_bigquery(self):
        import engines

        self.assertEqual(engines.sqlglot_check(), [])

    def test_the_check_fails_on_a_default_null_order_and_an_unguarded_division(self):
        import engines
        from memscope import _sql

        saved = dict(_sql.QUERIES)
        try:
            # Ascending without NULLS LAST: DuckDB puts NULLs last, Spark and BigQuery first.
            _sql.QUERIES["shared_leaks"] = saved["shared_leaks"].replace("site_id NULLS LAST", "site_id")
            _sql.QUERIES["imbalance"] = saved["imbalance"].replace("NULLIF(f.min_bytes, 0)", "f.min_bytes")
            bad = engines.sqlglot_check()
        finally:
            _sql.QUERIES.clear()
            _sql.QUERIES.update(saved)
        self.assertTrue(any(b.startswith("shared_leaks: spark reads it otherwise") for b in bad), bad)
        self.assertTrue(any(b.startswith("shared_leaks: bigquery reads it otherwise") for b in bad), bad)
        self.assertIn("imbalance: a division whose divisor is not NULLIF(x, 0)", bad)


@unittest.skipUnless(os.access(BIN, os.X_OK), f"no memscope binary at {BIN} (cargo build)")
@unittest.skipUnless(have("pyspark") and have("duckdb") and have("sqlglot"),
                     "needs pip install pyspark duckdb sqlglot")
@unittest.skipUnless(shutil.which("java"), "Spark needs Java 17 (no java on PATH)")
class Spark(unittest.TestCase):
    def test_spark_sql_returns_duckdbs_rows(self):
        tmp = tempfile.mkdtemp()
        try:
            caps = os.path.join(tmp, "caps")
            subprocess.check_call([sys.executable, os.path.join(JOB40, "make_ranks.py"), caps,
                                   "--ranks", "40", "--bad", "4"], stdout=subprocess.DEVNULL)
            ranks = [os.path.join(caps, f"rank{r}_memory_snapshot.pickle") for r in range(40)]
            outs = []
            for fmt in ("parquet", "jsonl"):
                out = os.path.join(tmp, fmt)
                outs.append(out)
                run = [BIN, "summarize", "--format", fmt, "-o", out]
                subprocess.run(run + ["--job", "job40", *ranks], check=True, stderr=subprocess.DEVNULL)
                # Three more jobs (the real rank captures), so that PARTITION BY job counts.
                for job in ("bridge", "verl", "titan"):
                    files = sorted(glob.glob(os.path.join(ROOT, "fixtures", "ranks", job, "**", "*.pickle.gz"),
                                             recursive=True))
                    subprocess.run(run + ["--job", job, "--step", "3", *files], check=True,
                                   stderr=subprocess.DEVNULL)
            # One job without leaks or steps: no leak_site or step_series file, so empty views.
            bridge = os.path.join(tmp, "bridge")
            subprocess.run([BIN, "summarize", "-o", bridge, *sorted(glob.glob(os.path.join(
                ROOT, "fixtures", "ranks", "bridge", "*.pickle.gz")))], check=True, stderr=subprocess.DEVNULL)
            self.assertEqual(glob.glob(os.path.join(bridge, "*", "*", "*", "leak_site-*")), [])
            outs.append(bridge)
            p = subprocess.run([sys.executable, os.path.join(JOB40, "engines.py"), *outs, "--spark"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            self.assertEqual(p.returncode, 0, p.stdout[-4000:])
            self.assertIn("ENGINES EQUAL", p.stdout)
            for q in ("imbalance: equal (4 rows)", "first_oom: equal (2 rows)", "site_spread: equal (19 rows)"):
                self.assertEqual(p.stdout.count(q), 2, q)
            self.assertIn("shared_leaks: equal (0 rows)", p.stdout)
            self.assertEqual(p.stdout.count(": equal ("), 15)
        finally:
            shutil.rmtree(tmp)


if __name__ == "__main__":
    unittest.main()
