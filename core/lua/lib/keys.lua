-- keys: the fixed KEYS and common ARGV every script receives, and the names of
-- keys a script derives from KEYS[1] (the queue's base, with its {hash tag}).
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
--   ARGV[3] retention ages: '<terminal job max age ms>' or
--           '<terminal job max age ms>:<input-key outcome window ms>' (0 = no limit)
-- Script-specific KEYS start at 10, script-specific ARGV at 4.
--
-- Keys of jobs a script discovers through an index are named from KEYS[1] and
-- therefore carry the same hash tag (one cluster slot per queue): the jobs (and
-- their ready sets, locks, parked sets and wake lists) that lease and sweep find,
-- the old terminal jobs retention deletes, and the jobs woken from a parked set.
-- Every key of the job a single-job script is about is passed in KEYS.

-- These names are bound afresh at the start of every run by bind_call (the
-- registry makes it a script's first statement): a script may be loaded once
-- as a function library and run many times, so no run's KEYS or ARGV are used
-- by the next (what is derived from them is kept only to be reused by a run
-- given the same texts: KEPT below), and no library file reads them at its top
-- level.
local BASE, K_LEASES, K_FENCE, K_EVENTS, K_INPUTS, K_PARKED, K_DONE, K_STALE, K_ATTEMPTS
local EVENTS_MAX, KEEP_COUNT, KEEP_AGE_MS, INPUT_WINDOW_MS
-- The outcome of the latest job of each input key, kept after its job ended
-- (and after retention deleted it) for INPUT_WINDOW_MS: `outcomes` hash
-- input key -> '<job id> <SUCCEEDED|FAILED|CANCELLED|RESOLVED>', `outcomes:at`
-- zset input key -> when it was recorded (ms). Derived from KEYS[1].
local K_OUTCOMES, K_OUTCOMES_AT
-- The jobs set aside as unreadable (lib/quarantine). Derived from KEYS[1].
local K_QUARANTINE, K_QUARANTINE_WHY
-- The run's ARGV, for the checks of the common ARGV (lib/args).
local CALL_ARGV

-- What a run derived or checked that the next run given the same texts (the
-- same worker: most runs) may take as it is, kept between runs of the
-- function library (a script run by EVAL starts with it empty): `base` and
-- `ages`, the texts bind_call last derived names and numbers from; `fixed_base`
-- and `fixed`, the base forged_fixed_key last derived KEYS[2..9] from, and
-- those keys; `argv`, the common ARGV lib/args last found well formed. Only
-- names, numbers and texts derived from the arguments, never a run's data.
-- (One table: a script's main chunk has at most 200 locals.)
local KEPT = { fixed = {}, argv = {} }

-- Binds the names above to this run's KEYS and ARGV.
local function bind_call(keys, argv)
  BASE, K_LEASES, K_FENCE, K_EVENTS = keys[1], keys[2], keys[3], keys[4]
  K_INPUTS, K_PARKED, K_DONE, K_STALE = keys[5], keys[6], keys[7], keys[8]
  K_ATTEMPTS = keys[9]
  CALL_ARGV = argv
  EVENTS_MAX = argv[1]
  KEEP_COUNT = tonumber(argv[2]) or 0
  local ages = argv[3] or ''
  if ages ~= KEPT.ages then
    KEEP_AGE_MS = tonumber(string.match(ages, '^(%d+)')) or 0
    INPUT_WINDOW_MS = tonumber(string.match(ages, '^%d+:(%d+)$')) or 0
    KEPT.ages = ages
  end
  local base = BASE or ''
  if base ~= KEPT.base then
    K_OUTCOMES, K_OUTCOMES_AT = base .. ':outcomes', base .. ':outcomes:at'
    K_QUARANTINE, K_QUARANTINE_WHY = base .. ':quarantine', base .. ':quarantine:why'
    KEPT.base = base
  end
end

-- The suffixes after the base of KEYS[2..9], in order (the layout above).
local FIXED_SUFFIXES = { ':leases', ':fence', ':events', ':inputs', ':parked', ':done', ':stale', ':attempts' }

-- A key for a message: control and non-ASCII bytes shown as '?', at most 300 bytes.
local function key_shown(k)
  if type(k) ~= 'string' then return '(none)' end
  return (string.gsub(string.sub(k, 1, 300), '[%c\128-\255]', '?'))
end

-- The error reply 'BAD_KEY KEYS[<i>] is <given>, not <expected>' for a key
-- the caller passed where the queue's own key `expected` belongs (a forged or
-- foreign key: refused before anything is read or written).
local function bad_key(i, given, expected)
  return redis.error_reply('BAD_KEY KEYS[' .. i .. '] is ' .. key_shown(given) .. ', not ' .. key_shown(expected))
end

-- The error reply for the first of KEYS[2..9] that is not the base followed by
-- its fixed suffix, else nil: one string comparison per key, no Redis command.
local function forged_fixed_key(keys)
  local base = keys[1]
  if type(base) ~= 'string' or base == '' then return bad_key(1, base, '<prefix>:{<queue>}') end
  -- (the keys derived from the last base given, KEPT)
  if base ~= KEPT.fixed_base then
    local fixed = {}
    for i = 2, 9 do fixed[i] = base .. FIXED_SUFFIXES[i - 1] end
    KEPT.fixed_base, KEPT.fixed = base, fixed
  end
  local fixed = KEPT.fixed
  for i = 2, 9 do
    if keys[i] ~= fixed[i] then return bad_key(i, keys[i], fixed[i]) end
  end
  return nil
end

-- The error reply for the first of `keys` (position -> the name it must be,
-- derived from the base) that is another name, else nil.
local function forged_keys(keys, expected)
  for i, name in pairs(expected) do
    if keys[i] ~= name then return bad_key(i, keys[i], name) end
  end
  return nil
end

-- The checks of the keys a script derives from the base beyond the fixed
-- ones, by what they name (one table: a script's main chunk has at most 200
-- locals, and the function library holds every script's):
--   key_check.key(i, k, expected)          KEYS[i] is exactly `expected`
--   key_check.job(i, k)                    KEYS[i] is a job's key of this queue
--   key_check.pipeline_named(keys, i, what)  one pipeline's keys, named by them
--   key_check.pipeline(keys, i, what, p)   pipeline `p`'s keys
--   key_check.resource(keys, i, res, jk)   resource `res`'s lock and parked keys
-- Each answers the error reply naming the key (bad_key), or nil.
local key_check = {}

-- The error reply when `k`, given as KEYS[i], is not `expected`, else nil.
function key_check.key(i, k, expected)
  if k ~= expected then return bad_key(i, k, expected) end
  return nil
end

-- The error reply when `k`, given as KEYS[i], is not the key of a job of this
-- queue (the base, ':job:' and a non-empty id: the job it names, within the
-- queue's {hash tag}), else nil. One string comparison, no Redis command.
function key_check.job(i, k)
  local prefix = BASE .. ':job:'
  if type(k) ~= 'string' or #k <= #prefix or string.sub(k, 1, #prefix) ~= prefix then
    return bad_key(i, k, prefix .. '<job id>')
  end
  return nil
end

-- The error reply when KEYS[i] and the keys after it are not `what`'s keys of
-- one pipeline of this queue (`what` a list of 'ready', 'delayed', 'wake'),
-- else nil and the pipeline's name. For a call whose pipeline is known only
-- once the job is read: the job's own pipeline is compared with the name
-- afterwards. Each key names a pipeline; the one most of them name (the
-- first key's when they are two) is the call's, and the first key naming
-- another is the one refused. String comparisons only, no Redis command.
function key_check.pipeline_named(keys, i, what)
  local names = {}
  for n = 1, #what do
    local prefix = BASE .. ':' .. what[n] .. ':'
    local k = keys[i + n - 1]
    if type(k) ~= 'string' or #k <= #prefix or string.sub(k, 1, #prefix) ~= prefix then
      return bad_key(i + n - 1, k, prefix .. '<pipeline>'), nil
    end
    names[n] = string.sub(k, #prefix + 1)
  end
  local p = names[1]
  if #what >= 3 and names[1] ~= names[2] and names[2] == names[3] then p = names[2] end
  for n = 1, #what do
    if names[n] ~= p then return bad_key(i + n - 1, keys[i + n - 1], BASE .. ':' .. what[n] .. ':' .. p), nil end
  end
  return nil, p
end

-- The error reply when KEYS[i] and the keys after it are not `what`'s keys of
-- pipeline `p` (as key_check.pipeline_named), else nil.
function key_check.pipeline(keys, i, what, p)
  for n = 1, #what do
    local expected = BASE .. ':' .. what[n] .. ':' .. p
    if keys[i + n - 1] ~= expected then return bad_key(i + n - 1, keys[i + n - 1], expected) end
  end
  return nil
end

-- The error reply when KEYS[i] and KEYS[i + 1] are not the lock and parked
-- keys of resource `res`, or (no resource: '' or nil) both the job key `jk`,
-- else nil.
function key_check.resource(keys, i, res, jk)
  local lk, pk = jk, jk
  if res and res ~= '' then lk, pk = BASE .. ':lock:' .. res, BASE .. ':parked:' .. res end
  if keys[i] ~= lk then return bad_key(i, keys[i], lk) end
  if keys[i + 1] ~= pk then return bad_key(i + 1, keys[i + 1], pk) end
  return nil
end

local function job_key(id) return BASE .. ':job:' .. id end
-- the stream a holder appends its job's step outputs to (lib/outputs)
local function out_key(id) return BASE .. ':out:' .. id end
local function lock_key(res) return BASE .. ':lock:' .. res end
local function parked_key(res) return BASE .. ':parked:' .. res end
local function ready_key(p) return BASE .. ':ready:' .. p end
local function delayed_key(p) return BASE .. ':delayed:' .. p end
local function wake_key(p) return BASE .. ':wake:' .. p end
