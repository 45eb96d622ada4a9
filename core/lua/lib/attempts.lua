-- attempts: the final record of an attempt (JSON, written once into the queue's
-- attempts hash as '<job id>:<n>') and the entries of a job's `steps` field.
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/jobs"

-- The field of attempt `n` of job `id` in the attempts hash.
local function attempt_field(id, n)
  return id .. ':' .. n
end

-- Appends attempt `n`'s final record (JSON text) of job `id`; refuses to
-- rewrite one that exists.
local function append_attempt(id, n, record)
  return redis.call('HSETNX', K_ATTEMPTS, attempt_field(id, n), record) == 1
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
  local started = started_of(j)
  local n, la, sa = jnum(j.attempt), jnum(j.leased_at), jnum(started)
  if n then p[#p + 1] = ',"n":' .. n end
  if la then p[#p + 1] = ',"leased_at":' .. la end
  if sa then p[#p + 1] = ',"started_at":' .. sa end
  if j.steps and j.steps ~= '' then
    local steps = {}
    local base = tonumber(started or '') or 0
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
