-- leasehold: shared prelude, prepended to every transition script.
--
-- KEYS layout shared by every script (fixed keys of one queue, all with the
-- queue's {hash tag}):
--   KEYS[1] base      <prefix>:{<queue>}        (name prefix of the queue's keys)
--   KEYS[2] leases    zset  job id -> lease deadline (ms)
--   KEYS[3] fence     string, fencing counter (only grows)
--   KEYS[4] events    stream of transitions
--   KEYS[5] inputs    hash  input key -> id of the non-terminal job for it
--   KEYS[6] parked    set   resources that have jobs waiting for their lock
--   KEYS[7] done      zset  terminal job id -> end time (ms), for retention
--   KEYS[8] stale     zset  STALE job id -> time it went STALE (ms)
--   KEYS[9] attempts  hash  '<job id>:<n>' -> final record of attempt n (JSON), written once
-- ARGV layout shared by every script:
--   ARGV[1] events stream max length (approximate)
--   ARGV[2] retention: terminal jobs kept per queue (0 = no count limit)
--   ARGV[3] retention: terminal job max age in ms (0 = no age limit)
-- Script-specific KEYS start at 10, script-specific ARGV at 4.
--
-- Keys of jobs a script discovers through an index are named from KEYS[1] and
-- therefore carry the same hash tag: the jobs (and their ready sets, locks and
-- parked sets and wake lists) that lease and sweep find, the old terminal jobs retention
-- deletes (purge, also run at the end of terminal transitions), and the jobs
-- woken from a parked set. Every key of the job a single-job script is about
-- is passed in KEYS.

local BASE, K_LEASES, K_FENCE, K_EVENTS = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local K_INPUTS, K_PARKED, K_DONE, K_STALE = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local K_ATTEMPTS = KEYS[9]
local EVENTS_MAX = ARGV[1]
local KEEP_COUNT = tonumber(ARGV[2]) or 0
local KEEP_AGE_MS = tonumber(ARGV[3]) or 0

local PRIORITY_SPAN = 4398046511104 -- 2^42 ms (~139 years) per priority level

-- An integral number as text. '%d' (an integer conversion) rather than '%.0f'
-- or Lua's own '%.14g': printing doubles is a visible share of Redis's CPU.
local function fmt(n)
  return string.format('%d', n)
end

-- Redis TIME in ms, read once per script run (a script runs atomically).
local NOW_MS, NOW_S = nil, nil
local function now_ms()
  if NOW_MS == nil then
    local t = redis.call('TIME')
    NOW_MS = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    NOW_S = fmt(NOW_MS)
  end
  return NOW_MS
end

-- The same time as text (formatted once per run).
local function now_s()
  now_ms()
  return NOW_S
end

-- Index writes of terminal transitions, collected while `settle` runs its
-- operations and applied with one command each (flush_indexes) before it
-- leases or purges; single-job scripts write them at once.
local DEFER_INDEXES = false
local UNLEASED, DONE_ADDS, RENEWED = {}, {}, {}

-- Moves `id`'s deadline in the lease index to `deadline` (text), if it is there.
local function relet(deadline, id)
  if DEFER_INDEXES then
    RENEWED[#RENEWED + 1] = deadline
    RENEWED[#RENEWED + 1] = id
  else
    redis.call('ZADD', K_LEASES, 'XX', deadline, id)
  end
end

-- Removes `id` from the lease index.
local function unlease(id)
  if DEFER_INDEXES then
    UNLEASED[#UNLEASED + 1] = id
  else
    redis.call('ZREM', K_LEASES, id)
  end
end

-- Adds `id` to the terminal-jobs index at time `at` (text).
local function index_done(at, id)
  if DEFER_INDEXES then
    DONE_ADDS[#DONE_ADDS + 1] = at
    DONE_ADDS[#DONE_ADDS + 1] = id
  else
    redis.call('ZADD', K_DONE, at, id)
  end
end

-- Applies the collected index writes (in chunks that unpack can take).
local function flush_indexes()
  for i = 1, #RENEWED, 2000 do
    redis.call('ZADD', K_LEASES, 'XX', unpack(RENEWED, i, math.min(i + 1999, #RENEWED)))
  end
  for i = 1, #UNLEASED, 1000 do
    redis.call('ZREM', K_LEASES, unpack(UNLEASED, i, math.min(i + 999, #UNLEASED)))
  end
  for i = 1, #DONE_ADDS, 2000 do
    redis.call('ZADD', K_DONE, unpack(DONE_ADDS, i, math.min(i + 1999, #DONE_ADDS)))
  end
  UNLEASED, DONE_ADDS, RENEWED = {}, {}, {}
end

-- Old terminal jobs deleted when a transition ends a job (settle sets it to 0
-- and purges once per call instead).
local PURGE_PER_END = 4

local function job_key(id) return BASE .. ':job:' .. id end
local function lock_key(res) return BASE .. ':lock:' .. res end
local function parked_key(res) return BASE .. ':parked:' .. res end
local function ready_key(p) return BASE .. ':ready:' .. p end
local function delayed_key(p) return BASE .. ':delayed:' .. p end
local function wake_key(p) return BASE .. ':wake:' .. p end

-- Ready-set score: higher priority first, then older first.
local function ready_score(priority, ms)
  return fmt((255 - (tonumber(priority) or 0)) * PRIORITY_SPAN + ms)
end

-- Whether emit trims the stream itself; settle trims it once per call instead.
local EMIT_TRIMS = true
local EMITTED = false

local function emit(op, id, attempt, from, to, worker, reason)
  EMITTED = true
  if EMIT_TRIMS then
    redis.call('XADD', K_EVENTS, 'MAXLEN', '~', EVENTS_MAX, '*',
      'op', op, 'job', id, 'attempt', tostring(attempt), 'from', from, 'to', to,
      'by', worker or '', 'reason', reason or '')
  else
    redis.call('XADD', K_EVENTS, '*',
      'op', op, 'job', id, 'attempt', tostring(attempt), 'from', from, 'to', to,
      'by', worker or '', 'reason', reason or '')
  end
end

-- Trims the events stream to its cap once, after emits that did not.
local function trim_events()
  if EMITTED then redis.call('XTRIM', K_EVENTS, 'MAXLEN', '~', EVENTS_MAX) end
end

-- Pushes up to `n` (at most 16) wake-up tokens for idle workers of one pipeline,
-- blocked on its wake list `k` (wake:<pipeline>). A lease that leaves the
-- pipeline's ready set empty deletes the tokens nobody needed (see lease).
local function wake(k, n)
  n = math.min(n or 1, 16)
  local tokens = {}
  for i = 1, n do tokens[i] = '1' end
  redis.call('RPUSH', k, unpack(tokens))
  redis.call('LTRIM', k, -64, -1)
end

local TERMINAL = { SUCCEEDED = true, FAILED = true, CANCELLED = true }

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

-- The field of attempt `n` of job `id` in the attempts hash.
local function attempt_field(id, n)
  return id .. ':' .. n
end

-- Appends attempt `n`'s final record (JSON text) of job `id`; refuses to
-- rewrite one that exists.
local function append_attempt(id, n, record)
  return redis.call('HSETNX', K_ATTEMPTS, attempt_field(id, n), record) == 1
end

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


-- One entry of a job's `steps` field: the step and when its checkpoint was
-- recorded, as ms after the attempt's start ('@+' form) so that the field stays
-- short: a hash value over 64 bytes (hash-max-listpack-value) would turn the job
-- hash into a hashtable, twice its size. Absolute ms ('@' form) when the
-- attempt has no start time (never for a RUNNING job).
local function step_entry(step, now, started_at)
  local base = tonumber(started_at or '')
  if base then return step .. '@+' .. fmt(math.max(0, now - base)) end
  return step .. '@' .. fmt(now)
end

-- The job fields the transitions read, fetched with one HMGET.
local JOB_FIELDS = { 'state', 'token', 'id', 'attempt', 'max_attempts', 'worker', 'fence', 'priority',
  'input_key', 'cancel_reason', 'cancel_at', 'cancel_by', 'leased_at', 'started_at', 'steps', 'cleanup_needed' }

-- Reads the job's fields into a table by name (false for a missing field).
local function load_job(jk)
  local v = redis.call('HMGET', jk, unpack(JOB_FIELDS))
  local j = {}
  for i, name in ipairs(JOB_FIELDS) do j[name] = v[i] end
  return j
end

-- A JSON string. Names the client checked need escaping only in rare cases
-- (quotes, backslashes, control or non-ASCII bytes): those go through cjson.
local function jstr(s)
  if string.find(s, '[%c"\\\128-\255]') then return cjson.encode(s) end
  return '"' .. s .. '"'
end

-- A JSON number from a field's text, or nil when it is not a number.
local function jnum(v)
  local n = tonumber(v or '')
  if n == nil or n ~= n or n == math.huge or n == -math.huge then return nil end
  return fmt(n)
end

-- The final record of the job's current attempt (JSON text), from its loaded
-- fields: n, state, worker, fence, leased_at, started_at, ended_at, steps
-- ([{step, at}], omitted when none), cleanup_needed, cancel {reason, at, by},
-- then the `extra` keys (reason, error, resolution). Written by hand rather
-- than with cjson: this runs for every job that ends, and building the table
-- for cjson cost as much as the rest of the transition.
local function record_of(j, final_state, now, extra)
  local p = { '{"state":', jstr(final_state), ',"worker":', jstr(j.worker or ''), ',"fence":',
    jnum(j.fence) or '0', ',"ended_at":', fmt(now) }
  -- left out when false (the reader's default): every byte of a record is kept
  -- for as long as its job
  if j.cleanup_needed == '1' then p[#p + 1] = ',"cleanup_needed":true' end
  local n, la, sa = jnum(j.attempt), jnum(j.leased_at), jnum(j.started_at)
  if n then p[#p + 1] = ',"n":' .. n end
  if la then p[#p + 1] = ',"leased_at":' .. la end
  if sa then p[#p + 1] = ',"started_at":' .. sa end
  if j.steps and j.steps ~= '' then
    local steps = {}
    local base = tonumber(j.started_at or '') or 0
    for entry in string.gmatch(j.steps, '[^,]+') do
      local name, rel, at = string.match(entry, '^(.*)@(%+?)(%d+)$')
      if name then
        if rel == '+' then at = fmt(base + tonumber(at)) end
        steps[#steps + 1] = '{"step":' .. jstr(name) .. ',"at":' .. (jnum(at) or '0') .. '}'
      end
    end
    if #steps > 0 then p[#p + 1] = ',"steps":[' .. table.concat(steps, ',') .. ']' end
  end
  if j.cancel_reason and j.cancel_reason ~= '' then
    p[#p + 1] = ',"cancel":' .. cjson.encode({ reason = j.cancel_reason, at = tonumber(j.cancel_at or ''),
      by = j.cancel_by or '' })
  end
  if extra then
    for k, v in pairs(extra) do p[#p + 1] = ',' .. jstr(k) .. ':' .. cjson.encode(v) end
  end
  p[#p + 1] = '}'
  return table.concat(p)
end

-- Builds the final record of the job's current attempt, reading the job.
local function attempt_record(jk, final_state, now, extra)
  return record_of(load_job(jk), final_state, now, extra)
end

-- Fields describing the live lease / attempt, cleared when an attempt ends.
local ATTEMPT_FIELDS = { 'token', 'lease_deadline', 'worker', 'fence', 'leased_at', 'started_at', 'steps' }
-- Fields of a cancel request and a STALE episode, cleared when a new attempt starts.
local EPISODE_FIELDS = { 'cancel_reason', 'cancel_at', 'cancel_by', 'stale_at', 'cleanup_needed' }

-- Marks the job terminal: indexes for retention, frees its input key `ik`.
local function terminal_at(jk, id, ik, state, now)
  if ik and ik ~= '' and redis.call('HGET', K_INPUTS, ik) == id then
    redis.call('HDEL', K_INPUTS, ik)
  end
  redis.call('HSET', jk, 'state', state, 'updated_at', fmt(now), 'step', '')
  redis.call('ZADD', K_DONE, fmt(now), id)
end

-- Same, reading the input key.
local function make_terminal(jk, id, state, now)
  terminal_at(jk, id, redis.call('HGET', jk, 'input_key'), state, now)
end

-- Checks that the job exists, that its state allows the move (`allowed` is a
-- set of from-states), and that `token` is the job's current lease token.
-- Returns nil when all hold, else the refusal reply for the caller.
local function refuse_unless(jk, allowed, token)
  local f = redis.call('HMGET', jk, 'state', 'token')
  if not f[1] then return { 'NOT_FOUND' } end
  if not allowed[f[1]] then return { 'REFUSED', f[1] } end
  if token ~= nil and f[2] ~= token then return { 'LOST', f[1] } end
  return nil
end

-- The same checks on a job loaded with load_job.
local function refuse_job(j, allowed, token)
  if not j.state then return { 'NOT_FOUND' } end
  if not allowed[j.state] then return { 'REFUSED', j.state } end
  if token ~= nil and j.token ~= token then return { 'LOST', j.state } end
  return nil
end
