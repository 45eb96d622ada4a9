-- start: LEASED -> RUNNING (the holder begins its first step), or
-- LEASED -> CANCELLED when a cancel was requested before the start.
-- KEYS[10] job  KEYS[11] lock:<resource> (or the job key when none)  KEYS[12] parked:<resource> (or the job key)
-- ARGV[4] token  ARGV[5] first step name  ARGV[6] resource ('' when none)
-- A repeated start by the holder of a RUNNING job (its first reply was lost)
-- answers RUNNING again and changes nothing.
-- Reply: {'OK', 'RUNNING'} | {'OK', 'CANCELLED', reason} | refusal
-- As a function: start(jk, lk, pk, token, step, res).
local function start(jk, lk, pk, token, step, res)
  local f = redis.call('HMGET', jk, 'state', 'token', 'cancel_reason', 'id', 'attempt', 'worker')
  local state = f[1]
  if not state then return { 'NOT_FOUND' } end
  if state ~= 'LEASED' and state ~= 'RUNNING' then return { 'REFUSED', state } end
  if f[2] ~= token then return { 'LOST', state } end
  if state == 'RUNNING' then return { 'OK', 'RUNNING' } end
  local now = now_ms()
  local id = f[4]
  if f[3] and f[3] ~= '' then
    local j = load_job(jk)
    append_attempt(id, j.attempt, record_of(j, 'CANCELLED', now, nil))
    release_lock_at(lk, pk, res, id)
    redis.call('ZREM', K_LEASES, id)
    redis.call('HDEL', jk, unpack(ATTEMPT_FIELDS))
    terminal_at(jk, id, j.input_key, 'CANCELLED', now)
    emit('start', id, j.attempt, 'LEASED', 'CANCELLED', j.worker, 'cancel requested before start: ' .. j.cancel_reason)
    purge(now, PURGE_PER_END)
    return { 'OK', 'CANCELLED', j.cancel_reason }
  end
  redis.call('HSET', jk, 'state', 'RUNNING', 'started_at', now_s(), 'updated_at', now_s(), 'step', step)
  emit('start', id, f[5], 'LEASED', 'RUNNING', f[6], '')
  return { 'OK', 'RUNNING' }
end
