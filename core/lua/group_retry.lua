-- group_retry (operator): retries the FAILED and CANCELLED children of a
-- group, each a new attempt in QUEUED as `retry` makes one (with its event),
-- one bounded batch of children per call from the cursor the group keeps
-- (`retry_next`, the index of the next child). The cursor is in the group
-- from the first call on, so a caller that stops between calls leaves a group
-- that says a retry is under way, and the next call goes on from there.
-- A child whose input key another live job holds is refused (INPUT_KEY_TAKEN),
-- one whose fields cannot be read is refused (CORRUPT); the others go on.
-- KEYS[10] group:<name>
-- ARGV[4] name  ARGV[5] mode ('resume' | 'start')  ARGV[6] who  ARGV[7] reason  ARGV[8] batch
-- Reply: {'OK', next child index ('' once done), then per child acted on: id,
--        'RETRIED' | 'INPUT_KEY_TAKEN' | 'CORRUPT', detail (new attempt, holder, field)}
--        | {'SETTLED', 'cancelled'} | {'GROUP_NOT_FOUND'}
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/events"
--- @include "lib/wake"
--- @include "lib/args"
--- @include "lib/groups"
--- @include "lib/new_attempt"
local bad = common_args('group_retry')
if bad then return bad end
local gk, name, mode, who, reason = KEYS[10], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local batch = int_value(ARGV[8], 1)
if not group_name_ok(name) then return bad_arg('group_retry', 'group name', name) end
local forged = forged_keys(KEYS, { [10] = group_key(name) })
if forged then return forged end
if mode ~= 'resume' and mode ~= 'start' then return bad_arg('group_retry', 'mode', mode) end
if who == nil then return bad_arg('group_retry', 'who', who) end
if reason == nil then return bad_arg('group_retry', 'reason', reason) end
if not batch then return bad_arg('group_retry', 'batch', ARGV[8]) end
local h = redis.call('HMGET', gk, 'status', 'retry_next')
if not h[1] then return { 'GROUP_NOT_FOUND' } end
if h[1] == 'cancelled' then return { 'SETTLED', h[1] } end
local now = now_ms()
local events = event_log(true)
local cursor = tonumber(h[2] or '')
if not cursor then
  cursor = 0
  redis.call('HSET', gk, 'retry_next', '0')
  group_event(events, gk, 'group_retry', 'QUEUED', who, 'retry of the failed and cancelled children (' .. mode .. '): ' .. reason)
end
local out = { 'OK', '' }
local ids = redis.call('ZRANGE', gk .. ':children', cursor, cursor + batch - 1)
local states = (#ids > 0) and redis.call('HMGET', gk .. ':states', unpack(ids)) or {}
for i, id in ipairs(ids) do
  if states[i] == 'FAILED' or states[i] == 'CANCELLED' then
    local jk = job_key(id)
    local f = redis.pcall('HMGET', jk, 'id', 'state', 'attempt', 'priority', 'input_key', 'created_at', 'resource',
      'flow', 'links', 'pipeline')
    if not f.err then f[1] = f[1] or id end
    local verdict, detail = nil, ''
    if f.err then
      verdict, detail = 'CORRUPT', '(key)'
    elseif f[2] == 'FAILED' or f[2] == 'CANCELLED' then
      local corrupt = corrupt_field({ id = f[1], attempt = f[3], priority = f[4], created_at = f[6], pipeline = f[10] },
        { 'id', 'attempt', 'priority', 'created_at', 'pipeline' })
      local holder = f[5] and f[5] ~= '' and redis.call('HGET', K_INPUTS, f[5])
      if corrupt then
        verdict, detail = 'CORRUPT', corrupt[2]
      elseif holder and holder ~= id then
        verdict, detail = 'INPUT_KEY_TAKEN', holder
      else
        redis.call('ZREM', K_DONE, id)
        verdict = 'RETRIED'
        detail = fmt(new_attempt(events, jk, f, mode, who, reason, now, ready_key(f[10])))
        wake(wake_key(f[10]))
      end
    end
    if verdict then
      out[#out + 1] = id
      out[#out + 1] = verdict
      out[#out + 1] = detail
    end
  end
end
if #ids == batch then
  out[2] = fmt(cursor + batch)
  redis.call('HSET', gk, 'retry_next', out[2])
else
  redis.call('HDEL', gk, 'retry_next')
end
return out
