-- purge: deletes terminal jobs beyond the retention policy (count and age),
-- at most `batch` per call.
-- ARGV[4] batch
-- Reply: number of jobs deleted
--- @include "lib/time"
--- @include "lib/retention"
return purge(now_ms(), tonumber(ARGV[4]))
