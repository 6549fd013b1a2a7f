"""`memscope.summarize` and `memscope.reduce`: the map and the reduce of a large job.

`summarize(paths, out)` runs the `memscope` binary installed with this package
(`memscope summarize`): each capture becomes rows of the tables `rank_summary`,
`site_at_peak`, `step_series` and `leak_site`, written as Parquet (or JSON Lines) under
`out/job=J/step=S/rank=R/`. It is pure and idempotent, holds one capture in memory at a time,
and never fails for a capture that cannot be read (its row says why), so it is a map function
for any engine as it is:

    # Dask
    client.map(lambda chunk: memscope.summarize(chunk, out), chunks)
    # Ray Data
    ds.map_batches(lambda b: {"rows": memscope.summarize(list(b["path"]), out)})
    # Spark
    sc.parallelize(chunks).flatMap(lambda c: memscope.summarize(c, out))
    # a Slurm array task
    memscope.summarize([f"rank{os.environ['SLURM_ARRAY_TASK_ID']}.pickle"], out)

It returns the `rank_summary` rows as dicts. `reduce(out)` runs the shipped SQL queries
(`sql/*.sql`, docs/summaries.md) on DuckDB (`pip install duckdb`) and returns their rows.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Iterable, Sequence

from memscope import _sql
from memscope._find_bin import find_memscope_bin

__all__ = ["summarize", "reduce", "QUERIES"]

# The shipped queries, by name (sql/<name>.sql, embedded in `memscope._sql` by sql/embed.py).
QUERIES = ("imbalance", "first_oom", "far_above_median", "shared_leaks", "site_spread")


def _binary() -> str:
    # MEMSCOPE_BIN: a binary of a source checkout (`target/debug/memscope`), for tests.
    return os.environ.get("MEMSCOPE_BIN") or find_memscope_bin()


def summarize(
    paths: str | os.PathLike | Iterable[str | os.PathLike],
    out: str | os.PathLike,
    fmt: str = "parquet",
    job: str | None = None,
    step: str | None = None,
    rank: int | None = None,
    host: str | None = None,
    repo_root: str | os.PathLike | Iterable[str | os.PathLike] | None = None,
) -> list[dict]:
    """Summarizes captures into `out`; returns their `rank_summary` rows (one per capture).

    `repo_root`: the repository's root as the capturing hosts spelled it (or several, one per
    checkout): a site's file below it is identified by its path below it (`model/train.py`)
    rather than its name alone (`--repo-root`, docs/summaries.md).

    Raises `subprocess.CalledProcessError` only when the binary refuses the call itself (a bad
    `job` name, an `out` it cannot write); a capture it cannot read is a row with its `status`.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [os.fspath(p) for p in paths]
    if not paths:
        return []
    if fmt not in ("parquet", "jsonl"):
        raise ValueError(f"fmt must be 'parquet' or 'jsonl', not {fmt!r}")
    cmd = [_binary(), "summarize", "--rows", "--format", fmt, "-o", os.fspath(out)]
    for flag, value in (("--job", job), ("--step", step), ("--rank", rank), ("--host", host)):
        if value is not None:
            cmd += [flag, str(value)]
    if repo_root is not None:
        roots = [repo_root] if isinstance(repo_root, (str, os.PathLike)) else list(repo_root)
        for r in roots:
            cmd += ["--repo-root", os.fspath(r)]
    # `--` so that a capture named `-x.pickle` is not an option.
    cmd += ["--", *paths]
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    if done.returncode != 0:
        raise subprocess.CalledProcessError(
            done.returncode, cmd, output=done.stdout, stderr=done.stderr
        )
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def _glob(out: str, table: str, fmt: str) -> str:
    """The files of `table` under `out`, at the layout's fixed depth (`job=/step=/rank=`): a
    fixed-depth pattern lists 10,000 ranks' files several times faster than `**`."""
    base = os.path.basename(os.path.normpath(out))
    depth = 2 if base.startswith("job=") else 1 if base.startswith("step=") else 3
    return "/".join([out.rstrip("/")] + ["*"] * depth + [f"{table}-*.{fmt}"])


def views_sql(out: str | os.PathLike, fmt: str = "parquet") -> list[str]:
    """DuckDB's tables of the summaries under `out` (the only engine-specific SQL: the queries
    themselves read `rank_summary`, `site_at_peak`, `step_series`, `leak_site`). Each is read
    once into a table: the queries then scan memory, not thousands of small files again."""
    reader = "read_parquet" if fmt == "parquet" else "read_json_auto"
    stmts = []
    for t in ("rank_summary", "site_at_peak", "step_series", "leak_site"):
        path = _glob(os.fspath(out), t, fmt).replace("'", "''")
        # hive_partitioning off: every file holds its job, step and rank as columns already.
        opts = "hive_partitioning = false, union_by_name = true"
        if fmt == "jsonl":
            opts = "format = 'newline_delimited', " + opts
        stmts.append(f"CREATE OR REPLACE TABLE {t} AS SELECT * FROM {reader}('{path}', {opts})")
    return stmts


def reduce(
    out: str | os.PathLike,
    queries: Sequence[str] = QUERIES,
    fmt: str = "parquet",
    con=None,
) -> dict[str, list[dict]]:
    """Runs the shipped queries on DuckDB over the summaries under `out`; returns each
    query's rows as dicts, by name. `con`: a DuckDB connection to use (else an in-memory one)."""
    import duckdb  # the embedded reduce: pip install duckdb

    con = con or duckdb.connect()
    for s in views_sql(out, fmt):
        try:
            con.execute(s)
        except duckdb.IOException:
            # No file of this table (no ranks leaked, say): an empty view of its columns.
            name = s.split()[4]
            con.execute(f"CREATE OR REPLACE TABLE {name} AS {_EMPTY[name]}")
    res = {}
    for q in queries:
        cur = con.execute(_sql.QUERIES[q])
        cols = [d[0] for d in cur.description]
        res[q] = [dict(zip(cols, row)) for row in cur.fetchall()]
    return res


_EMPTY = {
    "leak_site": "SELECT CAST(NULL AS VARCHAR) AS job, CAST(NULL AS VARCHAR) AS step, "
    "CAST(NULL AS BIGINT) AS rank, CAST(NULL AS VARCHAR) AS site_id, CAST(NULL AS VARCHAR) AS rel_path, "
    "CAST(NULL AS VARCHAR) AS function, CAST(NULL AS BIGINT) AS line, CAST(NULL AS VARCHAR) AS leak_kind, "
    "CAST(NULL AS BIGINT) AS live_bytes WHERE false",
    "step_series": "SELECT CAST(NULL AS VARCHAR) AS job, CAST(NULL AS VARCHAR) AS step, "
    "CAST(NULL AS BIGINT) AS rank, CAST(NULL AS BIGINT) AS index, CAST(NULL AS VARCHAR) AS name, "
    "CAST(NULL AS BIGINT) AS peak_allocated_bytes, CAST(NULL AS BIGINT) AS end_allocated_bytes WHERE false",
    "site_at_peak": "SELECT CAST(NULL AS VARCHAR) AS job, CAST(NULL AS VARCHAR) AS step, "
    "CAST(NULL AS BIGINT) AS rank, CAST(NULL AS BIGINT) AS position, CAST(NULL AS VARCHAR) AS site_id, "
    "CAST(NULL AS VARCHAR) AS rel_path, CAST(NULL AS VARCHAR) AS function, CAST(NULL AS BIGINT) AS line, "
    "CAST(NULL AS BIGINT) AS bytes, CAST(NULL AS BIGINT) AS blocks WHERE false",
}
