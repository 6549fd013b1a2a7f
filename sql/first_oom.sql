-- The ranks that hit an OOM, first in time first (`oom_order` = 1 is the first OOM of the job
-- and step). The time is the rank's first OOM's, from the allocator's log (microseconds since
-- the epoch); ranks whose log has no times come last, by rank. The cause and the request are
-- those of the rank's last OOM, the one that ended it.
SELECT job, step,
  ROW_NUMBER() OVER (
    PARTITION BY job, step
    ORDER BY first_oom_time_us NULLS LAST, rank NULLS LAST
  ) AS oom_order,
  rank, host, path, first_oom_time_us, ooms, oom_cause, oom_requested_bytes,
  outside_allocator_bytes, device_total_bytes, peak_allocated_bytes
FROM rank_summary
WHERE status = 'ok' AND ooms > 0
ORDER BY job NULLS LAST, step NULLS LAST, oom_order NULLS LAST
