-- renew: extends many leases in one call (the worker's heartbeat).
-- KEYS[10..] pairs of (job key, lock key or the job key when none), one pair per lease
-- ARGV[4] lease ttl ms  ARGV[5] lock ttl ms  ARGV[6..] pairs of (token, '1' when a lock is held)
-- Reply: per lease, 'OK' | 'CANCEL:<reason>' | 'LOST:<state>' (wrong token, swept, or gone)
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/moves"
local ttl, lock_ttl = tonumber(ARGV[4]), tonumber(ARGV[5])
local now = now_ms()
local deadline = fmt(now + ttl)
local out = {}
local n = (#KEYS - 9) / 2
for i = 1, n do
  local jk, lk = KEYS[8 + 2 * i], KEYS[9 + 2 * i]
  local token, has_lock = ARGV[4 + 2 * i], ARGV[5 + 2 * i] == '1'
  local f = redis.call('HMGET', jk, 'state', 'token', 'id', 'cancel_reason')
  -- A lock that vanished (expired, evicted) and was taken by another job is
  -- lost: never extend the other job's lock. One that vanished unclaimed is re-taken.
  local holder = has_lock and redis.call('GET', lk)
  local renewable = f[2] == token and may('renew', f[1])
  if renewable and holder and holder ~= f[3] then
    out[i] = 'LOST:' .. f[1]
  elseif renewable then
    redis.call('HSET', jk, 'lease_deadline', deadline)
    redis.call('ZADD', K_LEASES, 'XX', deadline, f[3])
    if has_lock then redis.call('SET', lk, f[3], 'PX', lock_ttl) end
    if f[4] and f[4] ~= '' then out[i] = 'CANCEL:' .. f[4] else out[i] = 'OK' end
  else
    out[i] = 'LOST:' .. (f[1] or 'GONE')
  end
end
return out
