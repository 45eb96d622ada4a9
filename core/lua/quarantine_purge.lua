-- quarantine_purge (operator): deletes a quarantined job (lib/quarantine): its
-- key whatever its type, its attempt records, its quarantine entry and record,
-- any index entry left (its search index members too), its input key's claim
-- and its lock if it held it. A child of a group stays counted QUARANTINED
-- there, and purged (lib/groups).
-- KEYS[10] job
-- ARGV[4] job id  ARGV[5] who
-- Reply: {'OK'} | {'NOT_QUARANTINED'}
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/events"
--- @include "lib/locks"
--- @include "lib/flow"
--- @include "lib/attempts"
--- @include "lib/quarantine"
--- @include "lib/search"
local jk, id, who = KEYS[10], ARGV[4], ARGV[5]
if type(id) ~= 'string' or id == '' then return redis.error_reply('BAD_ARG quarantine_purge: job id is missing') end
local forged = forged_keys(KEYS, { [10] = job_key(id) })
if forged then return forged end
if not redis.call('ZSCORE', K_QUARANTINE, id) then return { 'NOT_QUARANTINED' } end
local f = read_job(jk, { 'state', 'attempt', 'pipeline', 'resource', 'input_key', 'flow', 'also_groups', 'window' })
for _, k in ipairs({ K_LEASES, K_STALE, K_DONE }) do redis.call('ZREM', k, id) end
if f then
  local state, attempt, pipeline, res, ik = f[1], f[2], f[3], f[4], f[5]
  if pipeline and not name_problem(pipeline) then
    redis.call('ZREM', ready_key(pipeline), id)
    redis.call('ZREM', delayed_key(pipeline), id)
  end
  if res and res ~= '' and not name_problem(res) then
    redis.call('ZREM', parked_key(res), id)
    release_lock(res, id)
  end
  if type(f[6]) == 'string' then
    flow_forget(f[6], id)
    flow_release(f[6], id)
  end
  if ik and ik ~= '' and redis.call('HGET', K_INPUTS, ik) == id then redis.call('HDEL', K_INPUTS, ik) end
  unsearch(search_members(id, type(ik) == 'string' and ik or '', search_resource(type(res) == 'string' and res or '', f[6]),
    type(f[8]) == 'string' and f[8] or ''))
  local n = (not attempt_problem(attempt)) and tonumber(attempt) or 0
  if n > 0 then
    local fields = {}
    for i = 1, math.min(n, 1000) do fields[i] = attempt_field(id, i) end
    redis.call('HDEL', K_ATTEMPTS, unpack(fields))
  end
  if known_state(state) then
    emit(event_log(true), 'purge', id, n, state, state, who, 'quarantined job deleted')
  end
end
redis.call('DEL', jk, BASE .. ':proc:' .. id, out_key(id))
local g = redis.call('HGET', group_of_key(), id)
if g then group_job_deleted(id, g, false, f and f[7]) end
redis.call('ZREM', K_QUARANTINE, id)
redis.call('HDEL', K_QUARANTINE_WHY, id)
return { 'OK' }
