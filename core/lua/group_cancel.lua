-- group_cancel: cancels a group: it takes no more children, never fires its
-- completion job, and the jobs waiting for it are told it ended CANCELLED.
-- Replies with its children that are not settled (QUEUED, LEASED, RUNNING),
-- which the caller then cancels one by one with `cancel` (a QUEUED child at
-- once, a running one by an in-flight request its holder honours); STALE
-- children are left to an operator.
-- KEYS[10] group:<name>
-- ARGV[4] name  ARGV[5] reason  ARGV[6] who
-- Reply: {'OK', child ids...} | {'SETTLED', status} (completed already) | {'GROUP_NOT_FOUND'}
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/events"
--- @include "lib/args"
--- @include "lib/groups"
local bad = common_args('group_cancel')
if bad then return bad end
local gk, name, reason, who = KEYS[10], ARGV[4], ARGV[5], ARGV[6] or ''
if not group_name_ok(name) or gk ~= group_key(name) then return bad_arg('group_cancel', 'group name', name) end
if reason == nil or reason == '' then return bad_arg('group_cancel', 'reason', reason) end
local status = redis.call('HGET', gk, 'status')
if not status then return { 'GROUP_NOT_FOUND' } end
if status == 'completed' then return { 'SETTLED', status } end
local now = now_ms()
local events = event_log(true)
if status ~= 'cancelled' then
  redis.call('HSET', gk, 'status', 'cancelled', 'cancel_reason', reason, 'settled_at', fmt(now), 'outcome', 'CANCELLED')
  group_event(events, gk, 'group_cancel', 'CANCELLED', who, reason)
  notify_dependents(events, gk .. ':dependents', 'group ' .. name, 'CANCELLED', now)
end
local out = { 'OK' }
local children = redis.call('ZRANGE', gk .. ':children', 0, -1)
for _, id in ipairs(children) do
  local state = redis.call('HGET', job_key(id), 'state')
  if state and not TERMINAL[state] and state ~= 'STALE' then out[#out + 1] = id end
end
return out
