-- quarantine: jobs that cannot be read (a key of the wrong Redis type, a field
-- that is missing, not a number, not UTF-8 or not JSON, a state no table knows)
-- are set aside on first sight instead of being leased, swept or indexed again:
--   quarantine      zset  job id -> time it was set aside (ms)
--   quarantine:why  hash  job id -> JSON {reason, field, at, from_index}
-- Both are named from KEYS[1] (lib/keys). The job's own key is left as it was found (it
-- may not even be a hash): it is the evidence an operator repairs or purges.
-- A child of a group is counted QUARANTINED there (lib/groups) until it is
-- repaired (QUEUED again) or purged.
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/moves"
--- @include "lib/events"
--- @include "lib/groups"

-- Whether `s` is well-formed UTF-8 (ASCII text takes the fast path).
local function is_utf8(s)
  if not string.find(s, '[\128-\255]') then return true end
  local i, n = 1, #s
  while i <= n do
    local c = string.byte(s, i)
    local len
    if c < 0x80 then len = 1
    elseif c >= 0xC2 and c <= 0xDF then len = 2
    elseif c >= 0xE0 and c <= 0xEF then len = 3
    elseif c >= 0xF0 and c <= 0xF4 then len = 4
    else return false end
    if i + len - 1 > n then return false end
    for j = i + 1, i + len - 1 do
      local b = string.byte(s, j)
      if b < 0x80 or b > 0xBF then return false end
    end
    if len == 3 then
      local b = string.byte(s, i + 1)
      if (c == 0xE0 and b < 0xA0) or (c == 0xED and b > 0x9F) then return false end
    elseif len == 4 then
      local b = string.byte(s, i + 1)
      if (c == 0xF0 and b < 0x90) or (c == 0xF4 and b > 0x8F) then return false end
    end
    i = i + len
  end
  return true
end

-- Why `s` cannot be a name inside keys (pipeline, resource), or nil: 1 to 200
-- bytes of UTF-8 without braces, spaces or control characters.
local function name_problem(s)
  if not s or s == '' then return 'missing' end
  if #s > 200 then return 'longer than 200 bytes' end
  if not is_utf8(s) then return 'not UTF-8' end
  if string.find(s, '[%z\1-\32{}\127]') then return 'has braces, spaces or control characters' end
  return nil
end

-- Why a job hash's `id` field (`v`, nil when absent) makes it corrupt for the
-- job `id` its key names, or nil: a hash that names another job is never read
-- as that job (nor as its own: which of the two is wrong is an operator's call).
local function id_problem(v, id)
  if v and v ~= id then return 'names another job: ' .. key_shown(v) end
  return nil
end

-- Whether `s` is the name of a state of the transition table.
local function known_state(s)
  return s ~= nil and s ~= false and STATES[s] == true
end

-- Why an attempt number is unreadable (it must be a positive integer), or nil.
local function attempt_problem(a)
  if not a then return 'missing' end
  if not string.find(a, '^[1-9]%d*$') or #a > 9 then return 'not a positive integer' end
  return nil
end

-- Why a job's input is unreadable (it must be JSON text in UTF-8), or nil.
local function input_problem(s)
  if not s then return 'missing' end
  if not is_utf8(s) then return 'not UTF-8' end
  if not pcall(cjson.decode, s) then return 'not JSON' end
  return nil
end

-- Why an optional text field is unreadable (present but not UTF-8), or nil.
local function text_problem(s)
  if s and not is_utf8(s) then return 'not UTF-8' end
  return nil
end

-- The HMGET of `fields` on job key `jk`, or nil and the reason when the key
-- is not a hash (a wrong-type key raises an error that must not stop the caller).
local function read_job(jk, fields)
  local f = redis.pcall('HMGET', jk, unpack(fields))
  if type(f) == 'table' and f.err then
    local t = redis.call('TYPE', jk)
    return nil, 'the key is a ' .. tostring(t.ok or t) .. ', not a hash'
  end
  return f, nil
end

-- Sets job `id` aside: indexes it in the quarantine with why (`reason`, the
-- offending `field`, the index it was found in), and records an event when its
-- state is one the table knows (`state`, `attempt` as read; nil when unreadable).
local function quarantine(log, id, reason, field, from_index, state, attempt, by)
  local now = now_ms()
  redis.call('ZADD', K_QUARANTINE, fmt(now), id)
  redis.call('HSET', K_QUARANTINE_WHY, id,
    cjson.encode({ reason = reason, field = field, at = now, from_index = from_index }))
  if log and known_state(state) then
    local n = 0
    if attempt and not attempt_problem(attempt) then n = attempt end
    emit(log, 'quarantine', id, n, state, state, by or '',
      'quarantined: ' .. field .. ' ' .. reason .. ' (found in ' .. from_index .. ')')
  end
  group_quarantined(log, id, now)
end
