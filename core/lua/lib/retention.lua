-- retention: deleting terminal jobs (and their attempt records) beyond the
-- queue's retention policy, oldest first, a bounded number per call.
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/attempts"

-- Deletes job `jk` (`id`) and its attempt records.
local function delete_job(jk, id)
  local n = tonumber(redis.call('HGET', jk, 'attempt') or '') or 0
  if n > 0 then
    local fields = {}
    for i = 1, math.min(n, 1000) do fields[i] = attempt_field(id, i) end
    redis.call('HDEL', K_ATTEMPTS, unpack(fields))
  end
  redis.call('DEL', jk)
end

-- Deletes terminal jobs beyond the retention policy; at most `budget` jobs.
local function purge(now, budget)
  local removed = 0
  if budget <= 0 then return 0 end
  if KEEP_AGE_MS > 0 then
    local old = redis.call('ZRANGEBYSCORE', K_DONE, '-inf', fmt(now - KEEP_AGE_MS), 'LIMIT', 0, budget)
    for _, id in ipairs(old) do
      delete_job(job_key(id), id)
      redis.call('ZREM', K_DONE, id)
      removed = removed + 1
    end
  end
  if KEEP_COUNT > 0 and removed < budget then
    local excess = redis.call('ZCARD', K_DONE) - KEEP_COUNT
    if excess > budget - removed then excess = budget - removed end
    if excess > 0 then
      local victims = redis.call('ZRANGE', K_DONE, 0, excess - 1)
      for _, id in ipairs(victims) do
        delete_job(job_key(id), id)
        redis.call('ZREM', K_DONE, id)
        removed = removed + 1
      end
    end
  end
  return removed
end
