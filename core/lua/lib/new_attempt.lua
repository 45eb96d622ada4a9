-- new_attempt: an operator's new attempt of a job whose attempt ended (its
-- record kept), for `retry` (one job) and `group_retry` (a group's failed
-- children, a batch per call).
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/events"
--- @include "lib/ready"
--- @include "lib/jobs"
--- @include "lib/groups"
--- @include "lib/outputs"

-- Starts attempt n + 1 of job `f[1]` (hash `jk`; `f` holds id, state,
-- attempt, priority, input_key, created_at, resource, flow, links, checked by
-- the caller, which has recorded the old attempt) in QUEUED in ready set
-- `k_ready`: the attempt and episode fields cleared ('start' also drops the
-- step outputs), its input key claimed again, its old place in line kept (its
-- age is its enqueue time, so jobs parked behind it do not overtake it), the
-- event emitted, its group and parents told. Returns the new attempt number.
local function new_attempt(events, jk, f, mode, who, reason, now, k_ready)
  local id = f[1]
  -- whatever a holder of an ended attempt appended late counts for no one (lib/outputs)
  drop_outputs(id)
  -- absent step, last step and cleanup flag: none, none, 0 (lib/jobs)
  redis.call('HDEL', jk, 'step', unpack(ATTEMPT_FIELDS))
  redis.call('HDEL', jk, unpack(EPISODE_FIELDS))
  if mode == 'start' then
    local fields = redis.call('HKEYS', jk)
    for _, name in ipairs(fields) do
      if string.sub(name, 1, 4) == 'out:' then redis.call('HDEL', jk, name) end
    end
    redis.call('HDEL', jk, 'last_step')
  end
  local next_attempt = tonumber(f[3]) + 1
  redis.call('HSET', jk, 'state', 'QUEUED', 'attempt', next_attempt, 'updated_at', fmt(now),
    'not_before', fmt(now))
  if f[5] and f[5] ~= '' then redis.call('HSETNX', K_INPUTS, f[5], id) end
  redis.call('ZADD', k_ready, ready_score(f[4], tonumber(f[6]) or now), id)
  emit(events, 'retry', id, next_attempt, f[2], 'QUEUED', who, mode .. ': ' .. reason)
  if f[9] then links_moved(events, jk, id, 'QUEUED', now) end
  return next_attempt
end
