-- start: LEASED -> RUNNING (the holder begins its first step), or
-- LEASED -> CANCELLED when a cancel was requested before the start.
-- A repeated start by the holder of a RUNNING job (its first reply was lost)
-- answers RUNNING again and changes nothing.
-- Called by settle: start(batch, jk, lk, pk, token, step, res), with `batch` the
-- call's {ix = index batch, events = event log}; `lk` and `pk` are the lock and
-- parked keys of resource `res` (the job key for both when it has none).
-- Reply: {'OK', 'RUNNING'} | {'OK', 'CANCELLED', reason} | refusal
--        | {'CORRUPT', problem, field} (a field it reads is malformed; nothing written)
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/events"
--- @include "lib/locks"
--- @include "lib/flow"
--- @include "lib/jobs"
--- @include "lib/attempts"
--- @include "lib/args"
--- @include "lib/groups"
--- @include "lib/outputs"
local function start(batch, jk, lk, pk, token, step, res)
  local f = redis.call('HMGET', jk, 'state', 'token', 'cancel_reason', 'id', 'attempt', 'worker', 'group')
  local state = f[1]
  local refusal = refusal_of(state, f[2], 'start', nil, token)
  if refusal then return refusal end
  if state == 'RUNNING' then return { 'OK', 'RUNNING' } end
  -- a job hash may leave out its id: the key names it (lib/jobs)
  f[4] = f[4] or job_id_of(jk)
  -- a hash that names another job is not started as either (lib/jobs)
  if f[4] ~= job_id_of(jk) then return id_mismatch(f[4], jk) end
  if not id_and_attempt_ok(f[4], f[5]) then
    local corrupt = corrupt_field({ id = f[4], attempt = f[5] }, { 'id', 'attempt' })
    if corrupt then return corrupt end
  end
  local now = now_ms()
  local id = f[4]
  if f[3] and f[3] ~= '' then
    local j = load_job(jk)
    append_attempt(id, j.attempt, record_of(j, 'CANCELLED', now, nil))
    release_lock_at(lk, pk, res, id, true)
    flow_release(j.flow, id)
    redis.call('ZREM', K_LEASES, id)
    redis.call('HDEL', jk, unpack(ATTEMPT_FIELDS))
    terminal_at(jk, id, j.input_key, 'CANCELLED', now)
    if j.links then links_moved(batch.events, jk, id, 'CANCELLED', now) end
    emit(batch.events, 'start', id, j.attempt, 'LEASED', 'CANCELLED', j.worker,
      'cancel requested before start: ' .. j.cancel_reason)
    return { 'OK', 'CANCELLED', j.cancel_reason }
  end
  -- a checkpoint appended before the start was refused: it counts for no one (lib/outputs)
  drop_outputs(id)
  redis.call('HSET', jk, 'state', 'RUNNING', 'started_at', now_s(), 'updated_at', now_s(), 'step', step)
  emit(batch.events, 'start', id, f[5], 'LEASED', 'RUNNING', f[6], '')
  if f[7] then group_count(batch.events, f[7], id, 'RUNNING', now) end
  return { 'OK', 'RUNNING' }
end
