-- release: LEASED -> QUEUED, the holder hands an unstarted job back (shutdown);
-- LEASED -> CANCELLED instead when a cancel was requested meanwhile.
-- Called by settle: release(batch, jk, k_ready, k_wake, lk, pk, token, res).
-- Reply: {'OK', 'QUEUED' | 'CANCELLED'} | refusal | {'CORRUPT', problem, field}
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/events"
--- @include "lib/wake"
--- @include "lib/ready"
--- @include "lib/locks"
--- @include "lib/flow"
--- @include "lib/jobs"
--- @include "lib/attempts"
--- @include "lib/args"
--- @include "lib/groups"
local function release(batch, jk, k_ready, k_wake, lk, pk, token, res)
  local refusal = refuse_unless(jk, 'release', nil, token)
  if refusal then return refusal end
  local now = now_ms()
  local f = redis.call('HMGET', jk, 'id', 'attempt', 'worker', 'priority', 'created_at', 'cancel_reason', 'flow',
    'links', 'group', 'pipeline')
  f[1] = f[1] or job_id_of(jk)
  -- a hash that names another job is not released as either (lib/jobs)
  if f[1] ~= job_id_of(jk) then return id_mismatch(f[1], jk) end
  local corrupt = corrupt_field({ id = f[1], attempt = f[2], priority = f[4], created_at = f[5], pipeline = f[10] },
    { 'id', 'attempt', 'priority', 'created_at', 'pipeline' })
  if corrupt then return corrupt end
  -- the keys that queue it again are its pipeline's (settle checked they name one)
  if k_ready ~= ready_key(f[10]) then return { 'BAD_KEY', k_ready, ready_key(f[10]) } end
  local id = f[1]
  release_lock_at(lk, pk, res, id, true)
  flow_release(f[7], id)
  redis.call('ZREM', K_LEASES, id)
  if f[6] and f[6] ~= '' then
    append_attempt(id, f[2], attempt_record(jk, 'CANCELLED', now, { reason = 'released by its worker with a cancel pending' }))
    redis.call('HDEL', jk, unpack(ATTEMPT_FIELDS))
    make_terminal(jk, id, 'CANCELLED', now)
    if f[8] then links_moved(batch.events, jk, id, 'CANCELLED', now) end
    emit(batch.events, 'release', id, f[2], 'LEASED', 'CANCELLED', f[3], 'released with a cancel pending: ' .. f[6])
    return { 'OK', 'CANCELLED' }
  end
  redis.call('HDEL', jk, unpack(ATTEMPT_FIELDS))
  redis.call('HSET', jk, 'state', 'QUEUED', 'updated_at', fmt(now))
  redis.call('ZADD', k_ready, ready_score(f[4], tonumber(f[5]) or now), id)
  emit(batch.events, 'release', id, f[2], 'LEASED', 'QUEUED', f[3], 'released by its worker')
  if f[9] then group_count(batch.events, f[9], id, 'QUEUED', now) end
  wake(k_wake)
  return { 'OK', 'QUEUED' }
end
