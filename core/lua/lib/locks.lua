-- locks: per-resource locks (lock:<resource>, the holder's job id) and the jobs
-- parked until a lock is released (parked:<resource>, a zset by ready score).
--- @include "lib/keys"
--- @include "lib/wake"

-- Moves every job parked on `res` (sorted set `pk`) back to its ready set.
local function unpark_at(pk, res)
  local waiting = redis.call('ZRANGE', pk, 0, -1, 'WITHSCORES')
  local woken = {}
  for i = 1, #waiting, 2 do
    local id = waiting[i]
    local p = redis.call('HGET', job_key(id), 'pipeline')
    if p then
      redis.call('ZADD', ready_key(p), waiting[i + 1], id)
      if not woken[p] then
        woken[p] = true
        wake(wake_key(p))
      end
    end
  end
  redis.call('DEL', pk)
  redis.call('SREM', K_PARKED, res)
end

-- Same, for scripts that discover the resource through an index (sweep).
local function unpark(res)
  unpark_at(parked_key(res), res)
end

-- Releases `res` (lock key `lk`) if `id` holds it, then wakes the jobs waiting
-- for it (parked set `pk`). Single-job scripts receive `lk` and `pk` in KEYS.
local function release_lock_at(lk, pk, res, id)
  if res == nil or res == false or res == '' then return end
  if redis.call('GET', lk) == id then
    redis.call('DEL', lk)
  end
  unpark_at(pk, res)
end

-- Same, for scripts that discover the resource through an index (sweep).
local function release_lock(res, id)
  if res == nil or res == false or res == '' then return end
  release_lock_at(lock_key(res), parked_key(res), res, id)
end
