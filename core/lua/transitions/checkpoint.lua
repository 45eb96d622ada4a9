-- checkpoint: records a completed step and its output, renews the lease, and
-- reports a pending cancel request. RUNNING stays RUNNING.
-- A repeated checkpoint of a step already recorded in this attempt (its first
-- reply was lost) only renews the lease: the step list is not appended twice.
-- Called by settle: checkpoint(batch, jk, lk, token, step, output, next_step, ttl,
-- lock_ttl, has_lock); `lk` is the lock key (the job key when none), `next_step`
-- '' after the last step.
-- Reply: {'OK', cancel_reason or ''} | refusal | {'CORRUPT', problem, field}
--- @include "lib/time"
--- @include "lib/indexes"
--- @include "lib/jobs"
--- @include "lib/attempts"
--- @include "lib/args"
local function checkpoint(batch, jk, lk, token, step, output, next_step, ttl, lock_ttl, has_lock)
  -- `resource` only when a lock is renewed: each field an HMGET names is a
  -- scan of the job's listpack (a missing one, the whole of it)
  local f
  if has_lock then
    f = redis.call('HMGET', jk, 'id', 'steps', 'cancel_reason', 'state', 'token', 'started_at', 'resource')
  else
    f = redis.call('HMGET', jk, 'id', 'steps', 'cancel_reason', 'state', 'token', 'started_at')
  end
  local key_id = job_id_of(jk)
  f[1] = f[1] or key_id
  local refusal = refusal_of(f[4], f[5], 'checkpoint', nil, token)
  if refusal then return refusal end
  if f[1] ~= key_id then return id_mismatch(f[1], jk) end
  -- the lock renewed is the job's resource's (settle named it from the resource given)
  if has_lock and (not f[7] or f[7] == '' or lk ~= lock_key(f[7])) then
    return { 'BAD_KEY', lk, lock_key(f[7] or '<resource>') }
  end
  -- fast test first; the refusal (and its tables) only for a bad field
  if not (type(f[1]) == 'string' and f[1] ~= '' and (not f[6] or is_count(f[6]))) then
    local corrupt = corrupt_field({ id = f[1], started_at = f[6] }, { 'id', 'started_at' })
    if corrupt then return corrupt end
  end
  local now = now_ms()
  -- The resource lock vanished and another job took it: this holder lost it.
  local holder = has_lock and redis.call('GET', lk)
  if holder and holder ~= f[1] then return { 'LOST', f[4] } end
  local steps = f[2] or ''
  -- (the lease deadline is the lease index's score only: relet below; the
  -- same for every checkpoint of the call, whose clock and ttl are one, so
  -- formatted once and kept in the call's index batch)
  local deadline = batch.ix.deadline
  if not deadline then
    deadline = fmt(now + ttl)
    batch.ix.deadline = deadline
  end
  if not string.find(',' .. steps, ',' .. step .. '@', 1, true) then
    if steps ~= '' then steps = steps .. ',' end
    steps = steps .. step_entry(step, now, f[6])
    -- an output is written only when the step returned something: an absent
    -- one is JSON null (lease replies 'null' for it)
    if output == 'null' then
      redis.call('HSET', jk, 'last_step', step, 'step', next_step, 'steps', steps, 'updated_at', now_s())
    else
      redis.call('HSET', jk, 'last_step', step, 'out:' .. step, output, 'step', next_step, 'steps', steps,
        'updated_at', now_s())
    end
  end
  relet(batch.ix, deadline, f[1])
  if has_lock then redis.call('SET', lk, f[1], 'PX', lock_ttl) end
  return { 'OK', f[3] or '' }
end
