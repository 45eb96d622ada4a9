-- purge: deletes terminal jobs beyond the retention policy (count and age),
-- at most `batch` per call.
-- ARGV[4] batch
-- Reply: number of jobs deleted
return purge(now_ms(), tonumber(ARGV[4]))
