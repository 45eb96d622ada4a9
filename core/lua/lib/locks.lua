-- locks: per-resource locks (lock:<resource>, the holder's job id) and the jobs
-- parked until a lock is released (parked:<resource>, a zset by ready score).
-- A release hands the resource to the next waiter only (priority, then age):
-- one job goes back to its ready set and one wake-up token to its pipeline's
-- idle workers, whatever the number of waiters (no thundering herd, and a
-- backfill of n jobs on one resource does O(n) work, not O(n^2)).
--- @include "lib/keys"
--- @include "lib/wake"
--- @include "lib/moves"

-- Moves the first QUEUED job of waiting set `wk` (a zset by ready score) back
-- to its ready set and wakes its pipeline's idle workers; entries of jobs that
-- are no longer QUEUED (or gone) are dropped on the way, a few at most per call
-- (the sweeper's pass over waiting resources gets the rest). Returns whether a
-- job was handed the resource, whether the waiting set is now empty, the
-- job handed it, and whether the set was found empty at once.
local function hand_off(wk)
  for i = 1, 4 do
    local h = redis.call('ZPOPMIN', wk)
    if not h[1] then return false, true, nil, i == 1 end
    local f = redis.call('HMGET', job_key(h[1]), 'state', 'pipeline')
    if may('lease', f[1]) and f[2] then
      redis.call('ZADD', ready_key(f[2]), h[2], h[1])
      wake(wake_key(f[2]))
      return true, redis.call('EXISTS', wk) == 0, h[1]
    end
  end
  return false, redis.call('EXISTS', wk) == 0
end

-- How long the sweeper's pass leaves a resource alone after a release handed
-- it to a waiter (that job is on its way to a worker through its ready set).
local HANDED_MS = 30000

-- The marker of a resource just handed to its next waiter (`handed:<res>`:
-- that job's id, for HANDED_MS), so the sweeper's pass does not hand it on a
-- second time meanwhile.
local function handed_key(res) return BASE .. ':handed:' .. res end

-- Hands `res` (parked set `pk`) to its next waiter; forgets the resource in
-- the parked index once nobody waits. Returns whether a job was handed it.
-- `quick`: the caller removed no waiter, so a set found empty at once was
-- already empty, and whoever emptied it took the resource out of the index
-- (every path that empties a parked set does): the common release, with
-- nobody waiting, spares that SREM.
local function unpark_at(pk, res, quick)
  local handed, empty, id, none = hand_off(pk)
  if empty and not (quick and none) then redis.call('SREM', K_PARKED, res) end
  if handed and not empty then redis.call('SET', handed_key(res), id, 'PX', HANDED_MS) end
  return handed
end

-- Same, for scripts that discover the resource through an index (sweep).
local function unpark(res)
  return unpark_at(parked_key(res), res)
end

-- Releases `res` (lock key `lk`) if `id` holds it, then hands it to the next
-- job waiting for it (parked set `pk`). Single-job scripts receive `lk` and
-- `pk` in KEYS. `quick`: as for unpark_at (the holder's own transitions,
-- which never take a waiter out of the set).
local function release_lock_at(lk, pk, res, id, quick)
  if res == nil or res == false or res == '' then return end
  if redis.call('GET', lk) == id then
    redis.call('DEL', lk)
  end
  unpark_at(pk, res, quick)
end

-- Same, for scripts that discover the resource through an index (sweep).
local function release_lock(res, id)
  if res == nil or res == false or res == '' then return end
  release_lock_at(lock_key(res), parked_key(res), res, id)
end
