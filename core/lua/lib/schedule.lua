-- schedule: the record of a tick. Every schedule script receives
--   KEYS[10] schedule:<name>        hash: definition, cursor, paused, counters
--   KEYS[11] schedules              zset: schedule name -> next due (ms)
--   KEYS[12] schedule:<name>:ticks  stream: one entry per tick outcome or action
-- and names them itself (a library file never reads KEYS).
--- @include "lib/time"

-- entries kept in a schedule's ticks stream (approximate)
local TICKS_MAX = 1000

-- Appends one entry to the schedule's ticks stream `k_ticks`: `outcome` (enqueued,
-- caught_up, skipped, missed, delayed, triggered, paused, resumed,
-- registered, redefined), the window (ms, '' when none), job, lag and why.
local function record_tick(k_ticks, outcome, start_ms, end_ms, job, lag_ms, by, why)
  redis.call('XADD', k_ticks, 'MAXLEN', '~', TICKS_MAX, '*', 'outcome', outcome,
    'start', start_ms or '', 'end', end_ms or '', 'job', job or '', 'lag_ms', lag_ms or '',
    'by', by or '', 'reason', why or '')
end

-- Milliseconds since the epoch as UTC RFC 3339 text for messages
-- ('2026-05-06T00:00:00Z', with '.123' when not a whole second), by the
-- days-to-civil-date arithmetic of the proleptic Gregorian calendar.
local function utc_text(ms)
  local secs = math.floor(ms / 1000)
  local frac = ms - secs * 1000
  local days = math.floor(secs / 86400)
  local sod = secs - days * 86400
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  local out = string.format('%04d-%02d-%02dT%02d:%02d:%02d', y, m, d, math.floor(sod / 3600),
    math.floor((sod % 3600) / 60), sod % 60)
  if frac ~= 0 then out = out .. string.format('.%03d', frac) end
  return out .. 'Z'
end

-- A window bound given as ms text, as utc_text; the text itself when not a number.
local function utc_of(text)
  local ms = tonumber(text or '')
  if ms == nil then return text or '' end
  return utc_text(ms)
end

-- `n` windows as text: '1 window', '3 windows'.
local function windows_text(n)
  if tonumber(n) == 1 then return '1 window' end
  return n .. ' windows'
end
