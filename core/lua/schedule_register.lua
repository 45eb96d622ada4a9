-- schedule_register: a worker serving a scheduled pipeline writes the
-- schedule's definition on start, idempotently. The paused flag and the
-- counters are never reset; a schedule Redis does not have (first start, or a
-- flushed Redis) gets `cursor` = ARGV[8] and `next_due` = ARGV[9], and so does
-- one whose start changed (recorded as 'restarted': a start added or moved
-- later is honoured). A schedule registered before `start_ms` was kept only
-- records its start.
-- KEYS[10..12] as lib/schedule says.
-- ARGV[4] name  ARGV[5] pipeline  ARGV[6] definition (JSON)  ARGV[7] digest
-- ARGV[8] initial cursor (ms)  ARGV[9] initial next due (ms, '' when none)  ARGV[10] by (worker)
-- ARGV[11] start (ms, '' when none)
-- Reply: {'created' | 'redefined' | 'same', cursor, next due or '', Redis now (ms)}.
--- @include "lib/keys"
--- @include "lib/args"
--- @include "lib/schedule"
local bad = common_args('schedule_register')
if bad then return bad end
local K_SCHEDULE, K_SCHEDULES, K_TICKS = KEYS[10], KEYS[11], KEYS[12]
local name, pipeline, definition, digest = ARGV[4], ARGV[5], ARGV[6], ARGV[7]
if name == nil or name == '' then return bad_arg('schedule_register', 'name', name) end
local forged = forged_schedule_keys(KEYS, name)
if forged then return forged end
if pipeline == nil or pipeline == '' then return bad_arg('schedule_register', 'pipeline', pipeline) end
if definition == nil or string.sub(definition, 1, 1) ~= '{' then
  return bad_arg('schedule_register', 'definition', definition)
end
if digest == nil or not string.find(digest, '^%x+$') then return bad_arg('schedule_register', 'digest', digest) end
if not int_value(ARGV[8], 0) then return bad_arg('schedule_register', 'initial cursor', ARGV[8]) end
if ARGV[9] ~= '' and not int_value(ARGV[9], 0) then return bad_arg('schedule_register', 'next due', ARGV[9]) end
local by = ARGV[10] or ''
local start = ARGV[11] or ''
if start ~= '' and not int_value(start, 0) then return bad_arg('schedule_register', 'start', start) end
local now = now_s()
local h = redis.call('HMGET', K_SCHEDULE, 'cursor', 'digest', 'next_due', 'start_ms')
local outcome = 'same'
if not h[1] then
  outcome = 'created'
  redis.call('HSET', K_SCHEDULE, 'cursor', ARGV[8], 'next_due', ARGV[9], 'paused', '0')
  redis.call('ZADD', K_SCHEDULES, (ARGV[9] ~= '') and ARGV[9] or '+inf', name)
  record_tick(K_TICKS, 'registered', '', '', '', '', by, 'cursor at ' .. utc_of(ARGV[8]))
  h[3] = ARGV[9]
elseif h[2] ~= digest then
  outcome = 'redefined'
  record_tick(K_TICKS, 'redefined', '', '', '', '', by, 'definition ' .. (h[2] or '?') .. ' -> ' .. digest)
  if h[4] and h[4] ~= start then
    record_tick(K_TICKS, 'restarted', '', '', '', '', by,
      'start changed: cursor ' .. utc_of(h[1]) .. ' -> ' .. utc_of(ARGV[8]))
    redis.call('HSET', K_SCHEDULE, 'cursor', ARGV[8], 'next_due', ARGV[9], 'waiting', '')
    h[1], h[3] = ARGV[8], ARGV[9]
  end
end
redis.call('HSET', K_SCHEDULE, 'start_ms', start)
if outcome ~= 'same' then
  redis.call('HSET', K_SCHEDULE, 'pipeline', pipeline, 'definition', definition, 'digest', digest,
    'registered_at', now, 'registered_by', by)
  -- a schedule that is known again is listed again
  redis.call('ZADD', K_SCHEDULES, (h[3] and h[3] ~= '') and h[3] or '+inf', name)
end
return { outcome, h[1] or ARGV[8], h[3] or '', now }
