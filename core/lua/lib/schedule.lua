-- schedule: the record of a tick. Every schedule script receives
--   KEYS[10] schedule:<name>        hash: definition, cursor, paused, counters
--   KEYS[11] schedules              zset: schedule name -> next due (ms)
--   KEYS[12] schedule:<name>:ticks  stream: one entry per tick outcome or action
-- and names them itself (a library file never reads KEYS).
--- @include "lib/keys"
--- @include "lib/time"

-- The error reply when `keys` 10 to 12 are not schedule `name`'s keys, else nil.
local function forged_schedule_keys(keys, name)
  local k = BASE .. ':schedule:' .. name
  return forged_keys(keys, { [10] = k, [11] = BASE .. ':schedules', [12] = k .. ':ticks' })
end

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
