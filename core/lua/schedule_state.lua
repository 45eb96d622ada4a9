-- schedule_state: an operator pauses or resumes a schedule, or a worker
-- records that a tick failed. While paused, its ticks still claim their
-- windows, recorded as skipped ('paused'); resuming does not bring them back
-- (trigger one, or backfill with enqueue --range). A failed tick counts in
-- 'failures' with the last error; the first one since the last success is
-- recorded as 'failing' in the ticks stream (the next claimed tick clears
-- them, in schedule_tick).
-- KEYS[10..12] as lib/schedule says.
-- ARGV[4] name  ARGV[5] 'pause' | 'resume' | 'failing'  ARGV[6] by  ARGV[7] reason (the error)
-- Reply: {'NOT_FOUND'} or {'OK', '1' | '0' (paused before)}; for 'failing',
-- {'OK', failures counted}.
--- @include "lib/keys"
--- @include "lib/args"
--- @include "lib/schedule"
local bad = common_args('schedule_state')
if bad then return bad end
local K_SCHEDULE, K_SCHEDULES, K_TICKS = KEYS[10], KEYS[11], KEYS[12]
local name, action, by, why = ARGV[4], ARGV[5], ARGV[6] or '', ARGV[7] or ''
if name == nil or name == '' then return bad_arg('schedule_state', 'name', name) end
local forged = forged_schedule_keys(KEYS, name)
if forged then return forged end
if action ~= 'pause' and action ~= 'resume' and action ~= 'failing' then return bad_arg('schedule_state', 'action', action) end
local was = redis.call('HGET', K_SCHEDULE, 'paused')
if not was then return { 'NOT_FOUND' } end
if action == 'failing' then
  local at = now_s()
  local failures = redis.call('HINCRBY', K_SCHEDULE, 'failures', 1)
  redis.call('HSET', K_SCHEDULE, 'last_error', why, 'last_error_at', at)
  redis.call('HSETNX', K_SCHEDULE, 'failing_since', at)
  if failures == 1 then record_tick(K_TICKS, 'failing', '', '', '', '', by, why) end
  return { 'OK', tostring(failures) }
end
local paused = (action == 'pause') and '1' or '0'
redis.call('HSET', K_SCHEDULE, 'paused', paused, 'paused_by', by, 'paused_at', now_s(), 'paused_reason', why)
record_tick(K_TICKS, (action == 'pause') and 'paused' or 'resumed', '', '', '', '', by, why)
return { 'OK', was }
