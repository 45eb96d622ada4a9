-- stats: the queue's per-minute counters for the dashboard's charts, in one
-- hash per minute (`stats:<minute>`, minute = ms / 60000, derived from KEYS[1]):
-- field `<pipeline>:<outcome>` counts jobs that ended or moved that minute
-- (`succeeded`, `failed`, `cancelled`, `retried`: an automatic retry, `stale`),
-- and the sampled gauges `<pipeline>:waiting` (ready + delayed) and
-- `<pipeline>:oldest_ms` (age of the oldest ready job), written once per minute
-- (field `sampled`). Each hash expires STATS_TTL_S after its first write.
-- A call counts its outcomes in a Lua table and writes one HINCRBY per distinct
-- field at its end; the EXPIRE goes only with a field's first increment.
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/ready"

-- How long a minute's counters are kept (s): 25 hours, so the last day is whole.
local STATS_TTL_S = 90000
-- Most pipelines one sample reads, and most priority levels per pipeline.
local SAMPLE_PIPELINES, SAMPLE_LEVELS = 64, 8

-- The counters' hash of the minute of time `ms`.
local function stats_key(ms)
  return BASE .. ':stats:' .. fmt(math.floor(ms / 60000))
end

-- A new, empty set of counts for one call.
local function stats_batch()
  return {}
end

-- Counts one `outcome` of a job of `pipeline`.
local function count_outcome(st, pipeline, outcome)
  if not pipeline or pipeline == '' then return end
  local field = pipeline .. ':' .. outcome
  st[field] = (st[field] or 0) + 1
end

-- Adds the call's counts to the current minute's hash: one HINCRBY per field,
-- and the EXPIRE when that increment created the field.
local function flush_stats(st)
  local key = nil
  for field, n in pairs(st) do
    key = key or stats_key(now_ms())
    if redis.call('HINCRBY', key, field, n) == n then redis.call('EXPIRE', key, STATS_TTL_S) end
  end
end

-- Age (ms) of the oldest job in ready set `k` at `now`, or nil when it holds
-- none: the head of each priority level present (the score is the level, then
-- the time), at most SAMPLE_LEVELS levels. Pause markers (negative scores) are skipped.
local function oldest_ready(k, now)
  local oldest, lo = nil, 0
  for _ = 1, SAMPLE_LEVELS do
    local head = redis.call('ZRANGEBYSCORE', k, fmt(lo), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    if #head == 0 then break end
    local score = tonumber(head[2]) or 0
    local level = math.floor(score / PRIORITY_SPAN)
    local t = score - level * PRIORITY_SPAN
    if oldest == nil or t < oldest then oldest = t end
    lo = (level + 1) * PRIORITY_SPAN
  end
  if oldest == nil then return nil end
  return math.max(0, now - oldest)
end

-- Samples the waiting jobs of every published pipeline into this minute's
-- hash, unless a call did so already this minute (one HSETNX otherwise).
local function sample_waiting(now)
  local key = stats_key(now)
  if redis.call('HSETNX', key, 'sampled', fmt(now)) == 0 then return end
  redis.call('EXPIRE', key, STATS_TTL_S)
  local pipelines = redis.call('HKEYS', BASE .. ':pipelines')
  local sets = {}
  for i = 1, math.min(#pipelines, SAMPLE_PIPELINES) do
    local p = pipelines[i]
    local waiting = redis.call('ZCOUNT', ready_key(p), 0, '+inf') + redis.call('ZCARD', delayed_key(p))
    sets[#sets + 1] = p .. ':waiting'
    sets[#sets + 1] = fmt(waiting)
    local age = oldest_ready(ready_key(p), now)
    if age then
      sets[#sets + 1] = p .. ':oldest_ms'
      sets[#sets + 1] = fmt(age)
    end
  end
  if #sets > 0 then redis.call('HSET', key, unpack(sets)) end
end
