-- Ranks whose peak allocated bytes lie far above the job's median: above
--   median + k * MAD,   MAD = the median of |peak - median|   (k = 3; change it in `params`).
-- The medians are computed with ROW_NUMBER and COUNT (the middle value, or the mean of the two
-- middle ones), not PERCENTILE_CONT, whose syntax differs between DuckDB, Spark and BigQuery.
-- Where MAD is 0 (at least half the ranks peak alike), any rank above the median is listed.
WITH params AS (SELECT 3 AS k),
ok AS (
  SELECT job, step, rank, peak_allocated_bytes AS peak
  FROM rank_summary
  WHERE status = 'ok' AND rank IS NOT NULL
),
by_peak AS (
  SELECT job, step, peak,
    ROW_NUMBER() OVER (PARTITION BY job, step ORDER BY peak NULLS LAST) AS i,
    COUNT(*) OVER (PARTITION BY job, step) AS n
  FROM ok
),
med AS (
  SELECT job, step, AVG(peak) AS median_bytes
  FROM by_peak
  WHERE 2 * i IN (n, n + 1, n + 2)
  GROUP BY job, step
),
dev AS (
  SELECT o.job, o.step, ABS(o.peak - m.median_bytes) AS d
  FROM ok o JOIN med m ON m.job = o.job AND m.step = o.step
),
by_dev AS (
  SELECT job, step, d,
    ROW_NUMBER() OVER (PARTITION BY job, step ORDER BY d NULLS LAST) AS i,
    COUNT(*) OVER (PARTITION BY job, step) AS n
  FROM dev
),
mad AS (
  SELECT job, step, AVG(d) AS mad_bytes
  FROM by_dev
  WHERE 2 * i IN (n, n + 1, n + 2)
  GROUP BY job, step
)
SELECT o.job, o.step, o.rank, o.peak AS peak_allocated_bytes,
  m.median_bytes, a.mad_bytes, p.k,
  (o.peak - m.median_bytes) / NULLIF(a.mad_bytes, 0) AS mads_above
FROM ok o
JOIN med m ON m.job = o.job AND m.step = o.step
JOIN mad a ON a.job = o.job AND a.step = o.step
CROSS JOIN params p
WHERE o.peak > m.median_bytes + p.k * a.mad_bytes
ORDER BY o.job NULLS LAST, o.step NULLS LAST, o.peak DESC, o.rank NULLS LAST
