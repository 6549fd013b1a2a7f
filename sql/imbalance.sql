-- Imbalance of a job: over each rank's peak allocated bytes,
--   imbalance = max / min   (a ratio, "x"; NULL when min is 0)
--   spread %  = (max - min) / max * 100
-- with the ranks that hold the max and the min (the lower rank wins ties), one row per job and
-- step. Only ranks whose capture gave figures (status = 'ok') count; `ranks_without_figures`
-- says how many did not. Portable SQL: DuckDB, Spark SQL, BigQuery (docs/summaries.md).
WITH ok AS (
  SELECT job, step, rank, peak_allocated_bytes AS peak
  FROM rank_summary
  WHERE status = 'ok' AND rank IS NOT NULL
),
ordered AS (
  SELECT job, step, rank, peak,
    ROW_NUMBER() OVER (PARTITION BY job, step ORDER BY peak DESC, rank NULLS LAST) AS from_top,
    ROW_NUMBER() OVER (PARTITION BY job, step ORDER BY peak NULLS LAST, rank NULLS LAST) AS from_bottom
  FROM ok
),
figures AS (
  SELECT job, step,
    COUNT(*) AS ranks,
    MAX(CASE WHEN from_top = 1 THEN peak END) AS max_bytes,
    MAX(CASE WHEN from_top = 1 THEN rank END) AS max_rank,
    MAX(CASE WHEN from_bottom = 1 THEN peak END) AS min_bytes,
    MAX(CASE WHEN from_bottom = 1 THEN rank END) AS min_rank,
    AVG(peak) AS mean_bytes
  FROM ordered
  GROUP BY job, step
),
failed AS (
  SELECT job, step, COUNT(*) AS ranks_without_figures
  FROM rank_summary
  WHERE status <> 'ok' OR rank IS NULL
  GROUP BY job, step
)
SELECT f.job, f.step, f.ranks,
  COALESCE(x.ranks_without_figures, 0) AS ranks_without_figures,
  f.max_rank, f.max_bytes, f.min_rank, f.min_bytes,
  f.max_bytes / NULLIF(f.min_bytes, 0) AS imbalance,
  (f.max_bytes - f.min_bytes) * 100 / NULLIF(f.max_bytes, 0) AS spread_pct,
  f.mean_bytes
FROM figures f
LEFT JOIN failed x ON x.job = f.job AND x.step = f.step
ORDER BY f.job NULLS LAST, f.step NULLS LAST
