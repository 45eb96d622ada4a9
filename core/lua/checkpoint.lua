-- checkpoint: records a completed step and its output, renews the lease, and
-- reports a pending cancel request. RUNNING stays RUNNING.
-- KEYS[10] job  KEYS[11] lock:<resource> (or the job key when none)
-- ARGV[4] token  ARGV[5] completed step  ARGV[6] output (JSON)  ARGV[7] next step ('' when last)
-- ARGV[8] lease ttl ms  ARGV[9] lock ttl ms  ARGV[10] '1' when a lock is held
-- A repeated checkpoint of a step already recorded in this attempt (its first
-- reply was lost) only renews the lease: the step list is not appended twice.
-- Reply: {'OK', cancel_reason or ''} | refusal
-- As a function: checkpoint(jk, lk, token, step, output, next_step, ttl, lock_ttl, has_lock).
local function checkpoint(jk, lk, token, step, output, next_step, ttl, lock_ttl, has_lock)
  local f = redis.call('HMGET', jk, 'id', 'steps', 'cancel_reason', 'state', 'token', 'started_at')
  if not f[4] then return { 'NOT_FOUND' } end
  if f[4] ~= 'RUNNING' then return { 'REFUSED', f[4] } end
  if f[5] ~= token then return { 'LOST', f[4] } end
  local now = now_ms()
  -- The resource lock vanished and another job took it: this holder lost it.
  local holder = has_lock and redis.call('GET', lk)
  if holder and holder ~= f[1] then return { 'LOST', 'RUNNING' } end
  local steps = f[2] or ''
  local deadline = fmt(now + ttl)
  if string.find(',' .. steps, ',' .. step .. '@', 1, true) then
    redis.call('HSET', jk, 'lease_deadline', deadline)
  else
    if steps ~= '' then steps = steps .. ',' end
    steps = steps .. step_entry(step, now, f[6])
    redis.call('HSET', jk, 'last_step', step, 'out:' .. step, output, 'step', next_step, 'steps', steps,
      'lease_deadline', deadline, 'updated_at', now_s())
  end
  relet(deadline, f[1])
  if has_lock then redis.call('SET', lk, f[1], 'PX', lock_ttl) end
  return { 'OK', f[3] or '' }
end
