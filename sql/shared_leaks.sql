-- Leak lines by the number of ranks they leak on: one row per job, step and `site_id` (the
-- line's identity across hosts, docs/summaries.md), with how many ranks, which (the lowest and
-- the highest), and the bytes the findings held alive at the end, summed over the ranks.
-- A line on N ranks is a bug in code all ranks run; a line on one is that rank's own.
SELECT job, step, site_id,
  MIN(rel_path) AS rel_path, MIN(function) AS function, MIN(line) AS line,
  COUNT(DISTINCT rank) AS ranks,
  MIN(rank) AS first_rank, MAX(rank) AS last_rank,
  SUM(live_bytes) AS live_bytes
FROM leak_site
WHERE site_id IS NOT NULL AND rank IS NOT NULL
GROUP BY job, step, site_id
ORDER BY job NULLS LAST, step NULLS LAST, ranks DESC, live_bytes DESC, site_id NULLS LAST
