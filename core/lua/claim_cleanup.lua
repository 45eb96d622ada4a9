-- claim_cleanup: hands a worker up to n resolved STALE jobs whose cleanup hook it
-- will run, for the pipelines it serves. A claim lives in `cleaning` until the
-- worker marks it done; a claim that expires (its worker died mid-hook) goes back
-- to the list first, so every hook runs at least once.
-- KEYS[10] cleanup (list of job ids)  KEYS[11] cleaning (zset job id -> claim deadline ms)
-- ARGV[4] n  ARGV[5] claim ttl ms  ARGV[6..] the pipelines the worker serves
-- The pipeline of each job is read from its hash, named from KEYS[1] (a job
-- discovered through the list). A job that no longer exists (purged) is dropped:
-- there is nothing left to clean up for. One served by other workers is put back.
-- Reply: { claimed job ids }. A malformed argument is an error reply.
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/args"
local bad = common_args('claim_cleanup')
if bad then return bad end
local forged = forged_keys(KEYS, { [10] = BASE .. ':cleanup', [11] = BASE .. ':cleaning' })
if forged then return forged end
local k_cleanup, k_cleaning = KEYS[10], KEYS[11]
local n, ttl = int_value(ARGV[4], 1), int_value(ARGV[5], 1)
if not n then return bad_arg('claim_cleanup', 'count', ARGV[4]) end
if not ttl then return bad_arg('claim_cleanup', 'claim ttl ms', ARGV[5]) end
local served = {}
for i = 6, #ARGV do served[ARGV[i]] = true end
local now = now_ms()

local expired = redis.call('ZRANGEBYSCORE', k_cleaning, '-inf', fmt(now), 'LIMIT', 0, 100)
for _, id in ipairs(expired) do
  redis.call('ZREM', k_cleaning, id)
  redis.call('RPUSH', k_cleanup, id)
end

local claimed = {}
local waiting = redis.call('LLEN', k_cleanup)
local looked = 0
while #claimed < n and looked < waiting do
  looked = looked + 1
  local id = redis.call('LPOP', k_cleanup)
  if not id then break end
  local pipeline = redis.call('HGET', job_key(id), 'pipeline')
  if pipeline and served[pipeline] then
    redis.call('ZADD', k_cleaning, fmt(now + ttl), id)
    claimed[#claimed + 1] = id
  elseif pipeline then
    redis.call('RPUSH', k_cleanup, id)
  end
end
return claimed
