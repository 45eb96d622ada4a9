-- start: LEASED -> RUNNING (the holder begins its first step), or
-- LEASED -> CANCELLED when a cancel was requested before the start.
-- KEYS[10] job  KEYS[11] lock:<resource> (or the job key when none)  KEYS[12] parked:<resource> (or the job key)
-- ARGV[4] token  ARGV[5] first step name  ARGV[6] resource ('' when none)
-- A repeated start by the holder of a RUNNING job (its first reply was lost)
-- answers RUNNING again and changes nothing.
-- Reply: {'OK', 'RUNNING'} | {'OK', 'CANCELLED', reason} | refusal
-- As a function: start(jk, lk, pk, token, step, res).
local function start(jk, lk, pk, token, step, res)
  local j = load_job(jk)
  local refusal = refuse_job(j, { LEASED = true, RUNNING = true }, token)
  if refusal then return refusal end
  if j.state == 'RUNNING' then return { 'OK', 'RUNNING' } end
  local now = now_ms()
  local id = j.id
  if j.cancel_reason and j.cancel_reason ~= '' then
    append_attempt(jk, j.attempt, record_of(j, 'CANCELLED', now, nil))
    release_lock_at(lk, pk, res, id)
    redis.call('ZREM', K_LEASES, id)
    redis.call('HDEL', jk, unpack(ATTEMPT_FIELDS))
    terminal_at(jk, id, j.input_key, 'CANCELLED', now)
    emit('start', id, j.attempt, 'LEASED', 'CANCELLED', j.worker, 'cancel requested before start: ' .. j.cancel_reason)
    purge(now, PURGE_PER_END)
    return { 'OK', 'CANCELLED', j.cancel_reason }
  end
  redis.call('HSET', jk, 'state', 'RUNNING', 'started_at', fmt(now), 'updated_at', fmt(now), 'step', step)
  emit('start', id, j.attempt, 'LEASED', 'RUNNING', j.worker, '')
  return { 'OK', 'RUNNING' }
end
