-- purge: deletes terminal jobs beyond the retention policy (count and age),
-- at most `batch` per call.
-- ARGV[4] batch
-- Reply: number of jobs deleted. A malformed argument is an error reply.
--- @include "lib/time"
--- @include "lib/args"
--- @include "lib/retention"
local bad = common_args('purge')
if bad then return bad end
local batch = int_value(ARGV[4], 0)
if not batch then return bad_arg('purge', 'batch', ARGV[4]) end
return purge(now_ms(), batch)
