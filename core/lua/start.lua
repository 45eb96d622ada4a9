-- start: LEASED -> RUNNING (the holder begins its first step), or
-- LEASED -> CANCELLED when a cancel was requested before the start.
-- KEYS[10] job  KEYS[11] lock:<resource> (or the job key when none)  KEYS[12] parked:<resource> (or the job key)
-- ARGV[4] token  ARGV[5] first step name  ARGV[6] resource ('' when none)
-- A repeated start by the holder of a RUNNING job (its first reply was lost)
-- answers RUNNING again and changes nothing.
-- Reply: {'OK', 'RUNNING'} | {'OK', 'CANCELLED', reason} | refusal
-- As a function: start(jk, lk, pk, token, step, res).
local function start(jk, lk, pk, token, step, res)
  local refusal = refuse_unless(jk, { LEASED = true, RUNNING = true }, token)
  if refusal then return refusal end
  if redis.call('HGET', jk, 'state') == 'RUNNING' then return { 'OK', 'RUNNING' } end
  local now = now_ms()
  local f = redis.call('HMGET', jk, 'id', 'attempt', 'worker', 'cancel_reason')
  local id = f[1]
  if f[4] and f[4] ~= '' then
    append_attempt(jk, f[2], attempt_record(jk, 'CANCELLED', now, nil))
    release_lock_at(lk, pk, res, id)
    redis.call('ZREM', K_LEASES, id)
    redis.call('HDEL', jk, unpack(ATTEMPT_FIELDS))
    make_terminal(jk, id, 'CANCELLED', now)
    emit('start', id, f[2], 'LEASED', 'CANCELLED', f[3], 'cancel requested before start: ' .. f[4])
    purge(now, PURGE_PER_END)
    return { 'OK', 'CANCELLED', f[4] }
  end
  redis.call('HSET', jk, 'state', 'RUNNING', 'started_at', fmt(now), 'updated_at', fmt(now), 'step', step)
  emit('start', id, f[2], 'LEASED', 'RUNNING', f[3], '')
  return { 'OK', 'RUNNING' }
end
