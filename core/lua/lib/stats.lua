-- stats: the queue's per-minute counters for the dashboard's charts, in one
-- hash per minute (`stats:<minute>`, minute = ms / 60000, derived from KEYS[1]):
-- field `<pipeline>:<outcome>` counts jobs that ended or moved that minute
-- (`succeeded`, `failed`, `cancelled`, `retried`: an automatic retry, `stale`),
-- and the sampled gauges `<pipeline>:waiting` (ready + delayed) and
-- `<pipeline>:oldest_ms` (age of the oldest ready job), written once per minute
-- (field `sampled`), with the queue's totals `waiting` (every QUEUED job: ready
-- and delayed jobs of the pipelines workers registered, parked behind a lock,
-- waiting for a flow-control slot; what `leasehold status` counts, which also
-- finds the ready and delayed sets of pipelines no worker registered) and
-- `oldest_ms` (now minus the `created_at` of the oldest of them, as `status`
-- computes it). Each hash expires STATS_TTL_S after its first write.
-- A call counts its outcomes in a Lua table and writes one HINCRBY per distinct
-- field at its end; the EXPIRE goes only with a field's first increment.
-- Roll-ups: the first sample of a minute folds the minutes before it that are
-- not folded yet (`stats:rolled` = the last one folded, at most ROLL_MAX_MINUTES
-- per call) into `stats:h:<hour>` (kept HOUR_TTL_S) and `stats:d:<day>` (kept
-- DAY_TTL_S, UTC days): counts are summed, the gauges keep their maximum.
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

-- Samples the waiting jobs of every published pipeline and the queue's totals
-- into this minute's hash, unless a call did so already this minute (one
-- HSETNX otherwise); the first sample of a minute also folds the roll-ups.
local function sample_waiting(now)
  local key = stats_key(now)
  if redis.call('HSETNX', key, 'sampled', fmt(now)) == 0 then return end
  redis.call('EXPIRE', key, STATS_TTL_S)
  -- What follows runs once a minute; its constants and helpers are local to
  -- this function, so the scripts including lib/stats stay under Lua's 200
  -- locals of a main chunk.
  -- Hourly roll-ups are kept 8 days (the 7-day chart is whole), daily ones 92
  -- days (the 90-day chart is whole).
  local HOUR_TTL_S, DAY_TTL_S = 8 * 86400, 92 * 86400
  -- Most minutes one call folds into the roll-ups (the minutes' retention).
  local ROLL_MAX_MINUTES = 1500
  -- Most parked resources and flow gates one sample reads.
  local SAMPLE_SETS = 256
  -- Jobs read at the head of each priority level of each set for the oldest waiting.
  local SAMPLE_HEADS = 4

  -- The ids at the head of each priority level (at most SAMPLE_LEVELS levels,
  -- SAMPLE_HEADS ids each) of banded set `k`, appended to `out`.
  local function level_heads(k, out)
    local lo = 0
    for _ = 1, SAMPLE_LEVELS do
      local head = redis.call('ZRANGEBYSCORE', k, fmt(lo), '+inf', 'WITHSCORES', 'LIMIT', 0, SAMPLE_HEADS)
      if #head == 0 then return end
      for i = 1, #head, 2 do out[#out + 1] = head[i] end
      local level = math.floor((tonumber(head[2]) or 0) / PRIORITY_SPAN)
      lo = (level + 1) * PRIORITY_SPAN
    end
  end

  -- Age (ms) at `now` of the QUEUED job among `ids` created first, or nil.
  local function oldest_created(ids, now)
    local oldest = nil
    for _, id in ipairs(ids) do
      -- pcall: a job key of the wrong type is the quarantine's business, not the sample's
      local f = redis.pcall('HMGET', job_key(id), 'state', 'created_at')
      local t = not f.err and tonumber(f[2])
      if t and f[1] == 'QUEUED' and (oldest == nil or t < oldest) then oldest = t end
    end
    if oldest == nil then return nil end
    return math.max(0, now - oldest)
  end

  -- Folds a minute hash's `fields` into roll-up hash `rk` (kept `ttl` s): counts are
  -- added, the gauges (`waiting`, `oldest_ms`) keep the larger value.
  local function fold_into(rk, ttl, fields)
    for i = 1, #fields, 2 do
      local f, v = fields[i], fields[i + 1]
      if f ~= 'sampled' then
        local tail = string.match(f, '([^:]+)$')
        if tail == 'waiting' or tail == 'oldest_ms' then
          local cur, n = tonumber(redis.call('HGET', rk, f)), tonumber(v)
          if n and (cur == nil or n > cur) then redis.call('HSET', rk, f, v) end
        else
          -- only what the scripts write: an integer (anything else is left
          -- out, and a roll-up field that is not one is left as it is: pcall)
          local n = tonumber(v)
          if n and n == math.floor(n) and math.abs(n) < 2 ^ 53 then
            redis.pcall('HINCRBY', rk, f, fmt(n))
          end
        end
      end
    end
    redis.call('EXPIRE', rk, ttl)
  end

  -- Folds the minutes before `minute` not folded yet into the hourly and daily roll-ups.
  local function roll_up(minute)
    local mark = BASE .. ':stats:rolled'
    local last = tonumber(redis.call('GET', mark)) or (minute - 1)
    local from = math.max(last + 1, minute - ROLL_MAX_MINUTES)
    for m = from, minute - 1 do
      local fields = redis.pcall('HGETALL', BASE .. ':stats:' .. fmt(m))
      if not fields.err and #fields > 0 then
        fold_into(BASE .. ':stats:h:' .. fmt(math.floor(m / 60)), HOUR_TTL_S, fields)
        fold_into(BASE .. ':stats:d:' .. fmt(math.floor(m / 1440)), DAY_TTL_S, fields)
      end
    end
    redis.call('SET', mark, fmt(minute - 1), 'EX', DAY_TTL_S)
  end

  roll_up(math.floor(now / 60000))
  local pipelines = redis.call('HKEYS', BASE .. ':pipelines')
  local sets = {}
  local total, heads = 0, {}
  for i = 1, math.min(#pipelines, SAMPLE_PIPELINES) do
    local p = pipelines[i]
    local waiting = redis.call('ZCOUNT', ready_key(p), 0, '+inf') + redis.call('ZCARD', delayed_key(p))
    total = total + waiting
    sets[#sets + 1] = p .. ':waiting'
    sets[#sets + 1] = fmt(waiting)
    local age = oldest_ready(ready_key(p), now)
    if age then
      sets[#sets + 1] = p .. ':oldest_ms'
      sets[#sets + 1] = fmt(age)
    end
    level_heads(ready_key(p), heads)
    local due = redis.call('ZRANGE', delayed_key(p), 0, 0)
    if due[1] then heads[#heads + 1] = due[1] end
  end
  -- parked behind a lock, and waiting for a flow-control slot
  local banded = redis.call('SRANDMEMBER', BASE .. ':parked', SAMPLE_SETS)
  for i = 1, #banded do banded[i] = parked_key(banded[i]) end
  local gates = redis.call('SRANDMEMBER', BASE .. ':waiting', SAMPLE_SETS)
  for _, g in ipairs(gates) do banded[#banded + 1] = BASE .. ':waiting:' .. g end
  for _, k in ipairs(banded) do
    total = total + redis.call('ZCARD', k)
    level_heads(k, heads)
  end
  sets[#sets + 1] = 'waiting'
  sets[#sets + 1] = fmt(total)
  local oldest = oldest_created(heads, now)
  if oldest then
    sets[#sets + 1] = 'oldest_ms'
    sets[#sets + 1] = fmt(oldest)
  end
  redis.call('HSET', key, unpack(sets))
end
