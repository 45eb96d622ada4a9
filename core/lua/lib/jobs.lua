-- jobs: reading a job hash, the refusals every transition shares, and marking a
-- job terminal.
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/moves"

-- The job fields the transitions read, fetched with one HMGET.
local JOB_FIELDS = { 'state', 'token', 'id', 'attempt', 'max_attempts', 'worker', 'fence', 'priority',
  'input_key', 'cancel_reason', 'cancel_at', 'cancel_by', 'leased_at', 'started_at', 'steps', 'cleanup_needed',
  'flow', 'links', 'pipeline' }

-- A job hash leaves out the fields at their default (lib/create): `queue` (the
-- key names it), `input_key`, `resource`, `step`, `last_step` (absent: none),
-- `priority` ('0'), `max_attempts` ('1'), `stale_lock` ('hold'),
-- `cleanup_needed` ('0'). Every reader takes an absent or empty field as that
-- default (the hashes written before had them all). `id` may be absent too:
-- the key names the job.

-- The id of the job under key `jk` (named from KEYS[1] or passed in KEYS, so
-- always BASE .. ':job:' .. id).
local function job_id_of(jk)
  return string.sub(jk, #BASE + 6)
end

-- The refusal for the job hash under `jk` whose `id` field is `id`, another
-- job's: the data's defect, refused before anything is written; the hash is
-- never taken for the job it names (nor for its own: which of the two is
-- wrong is an operator's call; a lease or sweep that meets it quarantines it).
local function id_mismatch(id, jk)
  return { 'CORRUPT', 'field id: names another job: ' .. key_shown(id) .. ' (the key names '
    .. key_shown(job_id_of(jk)) .. ')', 'id' }
end

-- The part of JOB_FIELDS a plain success reads (finish), and the rest, read
-- only for an attempt whose record is written or that may be retried: every
-- field read is a scan of the job's listpack, and most jobs end plainly.
-- (load_fields builds HOT_FIELDS' table with a constructor in this order.)
-- (`steps` is not read: a live attempt's steps are in its outputs list
-- until its seal writes them, lib/outputs.)
local HOT_FIELDS = { 'state', 'token', 'id', 'attempt', 'worker', 'input_key', 'cancel_reason', 'started_at',
  'fence', 'flow', 'links', 'pipeline', 'leased_at' }
local COLD_FIELDS = { 'max_attempts', 'priority', 'cancel_at', 'cancel_by', 'cleanup_needed' }

-- Reads `names` of the job into table `j` by name (false for a missing field;
-- a missing `id` of an existing job is the one the key names).
local function load_fields(jk, names, j)
  local v = redis.call('HMGET', jk, unpack(names))
  if names == HOT_FIELDS and next(j) == nil then
    -- (every finish: one table constructor, sized once, not a field at a time)
    j = { state = v[1], token = v[2], id = v[3], attempt = v[4], worker = v[5], input_key = v[6],
      cancel_reason = v[7], started_at = v[8], fence = v[9], flow = v[10], links = v[11], pipeline = v[12],
      leased_at = v[13] }
    if not j.id and j.state then j.id = job_id_of(jk) end
    return j
  end
  for i, name in ipairs(names) do j[name] = v[i] end
  if not j.id and j.state then j.id = job_id_of(jk) end
  return j
end

-- Reads the job's fields into a table by name (false for a missing field;
-- a missing `id` is the one the key names).
local function load_job(jk)
  return load_fields(jk, JOB_FIELDS, {})
end

-- When the job's current attempt started, from its loaded fields (`state` as
-- it was read): `started_at`, or `leased_at` for a job past LEASED without one
-- (the lease call started it and wrote only `leased_at`); nil before it started.
local function started_of(j)
  if j.started_at and j.started_at ~= '' then return j.started_at end
  if j.state == 'QUEUED' or j.state == 'LEASED' then return nil end
  return j.leased_at or nil
end

-- Fields describing the live lease / attempt, cleared when an attempt ends.
local ATTEMPT_FIELDS = { 'token', 'lease_deadline', 'worker', 'fence', 'leased_at', 'started_at', 'steps' }
-- Fields of a cancel request and a STALE episode, cleared when a new attempt starts.
local EPISODE_FIELDS = { 'cancel_reason', 'cancel_at', 'cancel_by', 'stale_at', 'cleanup_needed' }

-- The refusal for a job in `state` holding lease `held` when `op` is asked to
-- take it to `to` (any of the op's moves when nil) by the holder of `token`
-- (nil: an operator, no lease compared); nil when the move may go ahead.
local function refusal_of(state, held, op, to, token)
  if not state then return { 'NOT_FOUND' } end
  if to == nil then
    if not may(op, state) then return { 'REFUSED', state } end
  elseif not may_move(op, state, to) then
    return { 'REFUSED', state }
  end
  if token ~= nil and held ~= token then return { 'LOST', state } end
  return nil
end

-- The same checks, reading the job's state and token.
local function refuse_unless(jk, op, to, token)
  local f = redis.call('HMGET', jk, 'state', 'token')
  return refusal_of(f[1], f[2], op, to, token)
end

-- The same checks on a job loaded with load_job.
local function refuse_job(j, op, to, token)
  return refusal_of(j.state, j.token, op, to, token)
end

-- Frees input key `ik` of job `id`, which ended as `outcome` (its final state,
-- or RESOLVED for an operator's decision on a STALE job), if the job held it,
-- and records the outcome for later enqueues of the key (enqueue.lua); trims
-- up to two outcomes older than the window on the way. Jobs without an input
-- key pay nothing.
local function free_input_key(ik, id, outcome, now)
  if not ik or ik == '' or redis.call('HGET', K_INPUTS, ik) ~= id then return end
  redis.call('HDEL', K_INPUTS, ik)
  redis.call('HSET', K_OUTCOMES, ik, id .. ' ' .. outcome)
  redis.call('ZADD', K_OUTCOMES_AT, fmt(now), ik)
  if INPUT_WINDOW_MS > 0 then
    local old = redis.call('ZRANGEBYSCORE', K_OUTCOMES_AT, '-inf', fmt(now - INPUT_WINDOW_MS), 'LIMIT', 0, 2)
    if #old > 0 then
      redis.call('HDEL', K_OUTCOMES, unpack(old))
      redis.call('ZREM', K_OUTCOMES_AT, unpack(old))
    end
  end
end

-- Marks the job terminal: indexes it for retention, frees its input key `ik`
-- (recording `outcome`, the state unless given).
local function terminal_at(jk, id, ik, state, now, outcome)
  free_input_key(ik, id, outcome or state, now)
  redis.call('HSET', jk, 'state', state, 'updated_at', fmt(now))
  redis.call('HDEL', jk, 'step')
  redis.call('ZADD', K_DONE, fmt(now), id)
end

-- Same, reading the input key.
local function make_terminal(jk, id, state, now, outcome)
  terminal_at(jk, id, redis.call('HGET', jk, 'input_key'), state, now, outcome)
end
