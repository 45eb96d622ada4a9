-- schedule: the keys every schedule script receives and the record of a tick.
--   KEYS[10] schedule:<name>        hash: definition, cursor, paused, counters
--   KEYS[11] schedules              zset: schedule name -> next due (ms)
--   KEYS[12] schedule:<name>:ticks  stream: one entry per tick outcome or action
--- @include "lib/time"

local K_SCHEDULE, K_SCHEDULES, K_TICKS = KEYS[10], KEYS[11], KEYS[12]
-- entries kept in a schedule's ticks stream (approximate)
local TICKS_MAX = 1000

-- Appends one entry to the schedule's ticks stream: `outcome` (enqueued,
-- caught_up, skipped, missed, delayed, triggered, paused, resumed,
-- registered, redefined), the window (ms, '' when none), job, lag and why.
local function record_tick(outcome, start_ms, end_ms, job, lag_ms, by, why)
  redis.call('XADD', K_TICKS, 'MAXLEN', '~', TICKS_MAX, '*', 'outcome', outcome,
    'start', start_ms or '', 'end', end_ms or '', 'job', job or '', 'lag_ms', lag_ms or '',
    'by', by or '', 'reason', why or '')
end
