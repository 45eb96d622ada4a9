-- group_seal: closes a group to new children (its last child was added), so
-- that it may settle: a group whose children already all ended settles here.
-- KEYS[10] group:<name>
-- ARGV[4] name  ARGV[5] who
-- Reply: {'OK', status after} | {'ALREADY', status} (not open any more) | {'GROUP_NOT_FOUND'}
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/events"
--- @include "lib/args"
--- @include "lib/groups"
local bad = common_args('group_seal')
if bad then return bad end
local gk, name, who = KEYS[10], ARGV[4], ARGV[5] or ''
if not group_name_ok(name) then return bad_arg('group_seal', 'group name', name) end
local forged = forged_keys(KEYS, { [10] = group_key(name) })
if forged then return forged end
local h = redis.call('HMGET', gk, 'status', 'total')
if not h[1] then return { 'GROUP_NOT_FOUND' } end
if h[1] ~= 'open' then return { 'ALREADY', h[1] } end
local now = now_ms()
local events = event_log(true)
redis.call('HSET', gk, 'status', 'sealed', 'sealed_at', fmt(now))
group_event(events, gk, 'group_seal', 'QUEUED', who, 'group ' .. name .. ' sealed with ' .. (h[2] or '0') .. ' children')
group_check(events, name, gk, now)
-- (a group whose children retention all deleted already is deleted as it completes)
return { 'OK', redis.call('HGET', gk, 'status') or 'completed' }
