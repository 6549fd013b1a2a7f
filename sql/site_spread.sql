-- The sites live at the peak that differ most between the rank that peaked highest and the one
-- that peaked lowest (the ranks of imbalance.sql, the lower rank winning ties), by `site_id`;
-- the blocks without a Python stack are one row (`site_id` NULL). `high_bytes` or `low_bytes`
-- is 0 where the site is not among that rank's listed top sites (it may lie below them).
WITH ok AS (
  SELECT job, step, rank, peak_allocated_bytes AS peak
  FROM rank_summary
  WHERE status = 'ok' AND rank IS NOT NULL
),
ends AS (
  SELECT job, step,
    MAX(CASE WHEN from_top = 1 THEN rank END) AS high_rank,
    MAX(CASE WHEN from_bottom = 1 THEN rank END) AS low_rank
  FROM (
    SELECT job, step, rank,
      ROW_NUMBER() OVER (PARTITION BY job, step ORDER BY peak DESC, rank NULLS LAST) AS from_top,
      ROW_NUMBER() OVER (PARTITION BY job, step ORDER BY peak NULLS LAST, rank NULLS LAST) AS from_bottom
    FROM ok
  ) t
  GROUP BY job, step
),
sides AS (
  SELECT s.job, s.step, s.site_id,
    MIN(s.rel_path) AS rel_path, MIN(s.function) AS function, MIN(s.line) AS line,
    SUM(CASE WHEN s.rank = e.high_rank THEN s.bytes ELSE 0 END) AS high_bytes,
    SUM(CASE WHEN s.rank = e.low_rank THEN s.bytes ELSE 0 END) AS low_bytes
  FROM site_at_peak s
  JOIN ends e ON e.job = s.job AND e.step = s.step
  WHERE (s.rank = e.high_rank OR s.rank = e.low_rank) AND e.high_rank <> e.low_rank
  GROUP BY s.job, s.step, s.site_id
)
SELECT d.job, d.step, e.high_rank, e.low_rank, d.site_id, d.rel_path, d.function, d.line,
  d.high_bytes, d.low_bytes, d.high_bytes - d.low_bytes AS delta_bytes
FROM sides d
JOIN ends e ON e.job = d.job AND e.step = d.step
WHERE d.high_bytes <> d.low_bytes
ORDER BY d.job NULLS LAST, d.step NULLS LAST, ABS(d.high_bytes - d.low_bytes) DESC,
  d.site_id NULLS LAST
