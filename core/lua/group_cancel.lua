-- group_cancel: cancels a group, one bounded batch of its children per call.
-- The first call marks it cancelled: it takes no more children, never fires
-- its completion job, and the jobs waiting for it are told it ended
-- CANCELLED. Each call then cancels up to a batch of its children from the
-- cursor the group keeps (`cancel_next`, the index of the next child): a
-- QUEUED child at once, a LEASED or RUNNING one by a request its holder
-- honours (as `cancel` does, with its event and its message on the queue's
-- cancel channel); a STALE child is left to an
-- operator. The cursor is in the group from the first call on, so a caller
-- that stops between calls leaves a group that says its cancel is under way,
-- and the next call goes on from there.
-- KEYS[10] group:<name>
-- ARGV[4] name  ARGV[5] reason  ARGV[6] who  ARGV[7] batch (children per call)
-- Reply: {'OK', cancelled, requested, skipped, next child index ('' once done)}
--        | {'SETTLED', status} (completed already) | {'GROUP_NOT_FOUND'}
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/events"
--- @include "lib/args"
--- @include "lib/groups"
--- @include "lib/cancel"
local bad = common_args('group_cancel')
if bad then return bad end
local gk, name, reason, who = KEYS[10], ARGV[4], ARGV[5], ARGV[6] or ''
local batch = int_value(ARGV[7], 1)
if not group_name_ok(name) then return bad_arg('group_cancel', 'group name', name) end
local forged = forged_keys(KEYS, { [10] = group_key(name) })
if forged then return forged end
if reason == nil or reason == '' then return bad_arg('group_cancel', 'reason', reason) end
if not batch then return bad_arg('group_cancel', 'batch', ARGV[7]) end
local h = redis.call('HMGET', gk, 'status', 'cancel_next', 'cancel_reason')
local status = h[1]
if not status then return { 'GROUP_NOT_FOUND' } end
if status == 'completed' then return { 'SETTLED', status } end
local now = now_ms()
local events = event_log(true)
local cursor = tonumber(h[2] or '')
if status ~= 'cancelled' then
  cursor = 0
  redis.call('HSET', gk, 'status', 'cancelled', 'cancel_reason', reason, 'settled_at', fmt(now), 'outcome', 'CANCELLED',
    'cancel_next', '0')
  group_event(events, gk, 'group_cancel', 'CANCELLED', who, reason)
  notify_dependents(events, gk .. ':dependents', 'group ' .. name, 'CANCELLED', now)
end
if not cursor then return { 'OK', 0, 0, 0, '' } end
local why = 'group ' .. name .. ' cancelled: ' .. (h[3] or reason)
local cancelled, requested, skipped = 0, 0, 0
local ids = redis.call('ZRANGE', gk .. ':children', cursor, cursor + batch - 1)
for _, id in ipairs(ids) do
  local jk = job_key(id)
  local f = redis.pcall('HMGET', jk, 'state', 'attempt', 'resource', 'flow', 'links', 'pipeline', 'cancel_reason')
  local state = (not f.err) and f[1]
  if not state or not id_and_attempt_ok(id, f[2]) or not f[6] then
    skipped = skipped + 1
  elseif may_move('cancel', state, 'CANCELLED') then
    local res = f[3] or ''
    cancel_queued(events, jk, id, f[2], res, f[4], f[5], ready_key(f[6]), delayed_key(f[6]), parked_key(res), why, who, now)
    cancelled = cancelled + 1
  elseif may('cancel', state) and state ~= 'STALE' then
    if not f[7] or f[7] == '' then
      redis.call('HSET', jk, 'cancel_reason', why, 'cancel_at', fmt(now), 'cancel_by', who, 'updated_at', fmt(now))
      emit(events, 'cancel', id, f[2], state, state, who, 'cancel requested: ' .. why)
      push_cancel(id)
    end
    requested = requested + 1
  else
    skipped = skipped + 1
  end
end
local next_child = ''
if #ids == batch then
  next_child = cursor + batch
  redis.call('HSET', gk, 'cancel_next', fmt(next_child))
else
  redis.call('HDEL', gk, 'cancel_next')
  group_event(events, gk, 'group_cancelled', 'CANCELLED', who,
    'group ' .. name .. ': every child cancelled or asked to cancel')
  group_gc(name, gk)
end
return { 'OK', cancelled, requested, skipped, next_child == '' and '' or fmt(next_child) }
