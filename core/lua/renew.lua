-- renew: extends many leases in one call (the worker's heartbeat).
-- KEYS[10..] pairs of (job key, lock key or the job key when none), one pair per lease
-- ARGV[4] lease ttl ms  ARGV[5] lock ttl ms  ARGV[6..] pairs of (token, '1' when a lock is held)
-- Reply: per lease, 'OK' | 'CANCEL:<reason>' | 'LOST:<state>' (wrong token, swept, or gone)
-- A malformed argument (a ttl that is not a positive integer, an empty token, a
-- flag other than '1', '0' or '', pairs that do not match the KEYS) is an error
-- reply. Every lease is read (and its fate decided) before any is written.
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/moves"
--- @include "lib/args"
local bad = common_args('renew')
if bad then return bad end
local ttl, lock_ttl = int_value(ARGV[4], 1), int_value(ARGV[5], 1)
if not ttl then return bad_arg('renew', 'lease ttl ms', ARGV[4]) end
if not lock_ttl then return bad_arg('renew', 'lock ttl ms', ARGV[5]) end
local n = (#KEYS - 9) / 2
if n ~= math.floor(n) or #ARGV ~= 5 + 2 * n then
  return redis.error_reply('BAD_ARG renew: ' .. #KEYS .. ' keys do not match ' .. #ARGV .. ' values')
end
for i = 1, n do
  local token, has_lock = ARGV[4 + 2 * i], ARGV[5 + 2 * i]
  if token == '' then return bad_arg('renew', 'lease ' .. i .. ' token', token) end
  if flag_value(has_lock) == nil then return bad_arg('renew', 'lease ' .. i .. ' lock flag', has_lock) end
end
local now = now_ms()
local deadline = fmt(now + ttl)
local out = {}
-- the leases to extend: job key, lock key (nil when none), job id
local renewed = {}
for i = 1, n do
  local jk, lk = KEYS[8 + 2 * i], KEYS[9 + 2 * i]
  local token, has_lock = ARGV[4 + 2 * i], flag_value(ARGV[5 + 2 * i])
  local forged = key_check.job(8 + 2 * i, jk)
  if forged then return forged end
  local f = redis.call('HMGET', jk, 'state', 'token', 'id', 'cancel_reason', 'resource')
  -- a job hash may leave out its id: the key names it (lib/jobs); a hash
  -- that names another job is never renewed as either (the lease runs out
  -- and the sweep sets the hash aside)
  local own_id = string.sub(jk, #BASE + 6)
  f[3] = f[3] or own_id
  -- the lock key given is the job's resource's (the job key when it has none)
  if f[1] then
    local res = f[5] or ''
    if has_lock ~= (res ~= '') then return bad_arg('renew', 'lease ' .. i .. ' lock flag', ARGV[5 + 2 * i]) end
    forged = key_check.key(9 + 2 * i, lk, res ~= '' and lock_key(res) or jk)
    if forged then return forged end
  end
  local renewable = f[2] == token and may('renew', f[1]) and f[3] == own_id
  -- A lock that vanished (expired, evicted) and was taken by another job is
  -- lost: never extend the other job's lock. One that vanished unclaimed is re-taken.
  local holder = renewable and has_lock and redis.call('GET', lk)
  if renewable and holder and holder ~= f[3] then
    out[i] = 'LOST:' .. f[1]
  elseif renewable then
    renewed[#renewed + 1] = { jk, has_lock and lk or nil, f[3] }
    if f[4] and f[4] ~= '' then out[i] = 'CANCEL:' .. f[4] else out[i] = 'OK' end
  else
    out[i] = 'LOST:' .. (f[1] or 'GONE')
  end
end
-- the lease index is moved on in one ZADD XX per 1,000 leases, not one per
-- lease: the same members and scores, a fraction of the calls
local index = {}
for _, r in ipairs(renewed) do
  index[#index + 1] = deadline
  index[#index + 1] = r[3]
  if r[2] then redis.call('SET', r[2], r[3], 'PX', lock_ttl) end
end
for i = 1, #index, 2000 do
  redis.call('ZADD', K_LEASES, 'XX', unpack(index, i, math.min(i + 1999, #index)))
end
return out
