-- pause (operator): pauses or resumes a pipeline, or a whole queue (each of its
-- pipelines). A pause is a marker member at the head of the pipeline's ready
-- set ('{paused}' for the pipeline, '{paused:queue}' for the queue, scores -1
-- and -2: below every job's score, and no job id has braces): lease finds it
-- with the pop or peek it makes anyway, puts back what it popped and leases
-- nothing of that pipeline. Nothing else reads it, so a queue without a pause
-- pays nothing. Jobs already leased or running go on; new jobs queue behind
-- the marker. A resume removes the marker and wakes the pipeline's idle workers.
-- The record (who, since when, why) is in the `paused` hash: field
-- 'pipeline:<name>' or 'queue' -> JSON {since, by, reason}.
-- KEYS[10..] pairs (ready:<pipeline>, wake:<pipeline>) of the pipelines concerned
-- ARGV[4] 'pause' | 'resume'  ARGV[5] scope 'pipeline' | 'queue'  ARGV[6] its name
-- ARGV[7] who  ARGV[8] reason
-- Reply: {'OK', 'PAUSED' | 'RESUMED' | 'ALREADY_PAUSED' | 'NOT_PAUSED'}; a
-- malformed argument is an error reply, before anything is written.
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/events"
--- @include "lib/wake"
--- @include "lib/args"
local bad = common_args('pause')
if bad then return bad end
local action, scope, name, who, reason = ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8] or ''
if action ~= 'pause' and action ~= 'resume' then return bad_arg('pause', 'action', action) end
if scope ~= 'pipeline' and scope ~= 'queue' then return bad_arg('pause', 'scope', scope) end
if name == nil or name == '' then return bad_arg('pause', 'name', name) end
if who == nil then return bad_arg('pause', 'who', who) end
if (#KEYS - 9) % 2 ~= 0 then return bad_arg('pause', 'ready and wake key pairs', #KEYS - 9) end
if scope == 'pipeline' and #KEYS ~= 11 then return bad_arg('pause', 'keys of pipeline', name) end
-- each pair is one pipeline's ready and wake keys: the pipeline named when
-- the scope is one, else the pipeline the ready key names
for i = 10, #KEYS, 2 do
  local forged
  if scope == 'pipeline' then
    forged = key_check.pipeline(KEYS, i, { 'ready', 'wake' }, name)
  else
    forged = key_check.pipeline_named(KEYS, i, { 'ready', 'wake' })
  end
  if forged then return forged end
end
local K_PAUSED = BASE .. ':paused'
local field = scope == 'queue' and 'queue' or ('pipeline:' .. name)
local member = scope == 'queue' and '{paused:queue}' or '{paused}'
local score = scope == 'queue' and '-2' or '-1'
local now = now_ms()
local events = event_log(true)
local subject = (scope == 'queue' and 'queue:' or 'pipeline:') .. name
if action == 'pause' then
  -- (re)applied to every pipeline given, so that a queue pause reaches a
  -- pipeline that appeared since
  for i = 10, #KEYS, 2 do redis.call('ZADD', KEYS[i], score, member) end
  if redis.call('HEXISTS', K_PAUSED, field) == 1 then return { 'OK', 'ALREADY_PAUSED' } end
  redis.call('HSET', K_PAUSED, field, cjson.encode({ since = now, by = who, reason = reason }))
  emit(events, 'pause', subject, 0, 'QUEUED', 'QUEUED', who, reason)
  return { 'OK', 'PAUSED' }
end
for i = 10, #KEYS, 2 do
  if redis.call('ZREM', KEYS[i], member) == 1 then wake(KEYS[i + 1], 16) end
end
if redis.call('HDEL', K_PAUSED, field) == 0 then return { 'OK', 'NOT_PAUSED' } end
emit(events, 'resume', subject, 0, 'QUEUED', 'QUEUED', who, reason)
return { 'OK', 'RESUMED' }
