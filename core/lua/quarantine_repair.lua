-- quarantine_repair (operator): re-validates a quarantined job (lib/quarantine)
-- and, when every field a lease needs reads again, requeues it: QUEUED in its
-- pipeline's ready set, with the attempt number it has, its lease fields
-- cleared and its lock (if it still held it) released. The ready set, lock and
-- wake list are named from KEYS[1] (the pipeline and resource are read from
-- the job, which carries the queue's hash tag).
-- A child of a group is counted QUEUED there again (lib/groups), which moves
-- a group the quarantine held on.
-- KEYS[10] job
-- ARGV[4] job id  ARGV[5] who
-- Reply: {'OK', pipeline} | {'NOT_QUARANTINED'} | {'NOT_FOUND'}
--        | {'INVALID', reason, field}: still unreadable, nothing changed
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/events"
--- @include "lib/wake"
--- @include "lib/ready"
--- @include "lib/locks"
--- @include "lib/flow"
--- @include "lib/jobs"
--- @include "lib/quarantine"
local jk, id, who = KEYS[10], ARGV[4], ARGV[5]
if type(id) ~= 'string' or id == '' then return redis.error_reply('BAD_ARG quarantine_repair: job id is missing') end
local forged = forged_keys(KEYS, { [10] = job_key(id) })
if forged then return forged end
if not redis.call('ZSCORE', K_QUARANTINE, id) then return { 'NOT_QUARANTINED' } end
local f, bad_key = read_job(jk, { 'state', 'attempt', 'pipeline', 'input', 'resource', 'last_step', 'priority',
  'created_at', 'id' })
if not f then return { 'INVALID', bad_key, '(key)' } end
if redis.call('EXISTS', jk) == 0 then return { 'NOT_FOUND' } end

-- check everything before the first write
local function problem()
  local wrong_id = id_problem(f[9], id)
  if wrong_id then return wrong_id, 'id' end
  if not known_state(f[1]) then return (f[1] and 'not a state' or 'missing'), 'state' end
  local why = attempt_problem(f[2])
  if why then return why, 'attempt' end
  why = name_problem(f[3])
  if why then return why, 'pipeline' end
  why = input_problem(f[4])
  if why then return why, 'input' end
  if f[5] and f[5] ~= '' then
    why = name_problem(f[5])
    if why then return why, 'resource' end
  end
  why = text_problem(f[6])
  if why then return why, 'last_step' end
  if f[6] and f[6] ~= '' then
    local out = redis.call('HGET', jk, 'out:' .. f[6])
    if out and not is_utf8(out) then return 'not UTF-8', 'out:' .. f[6] end
  end
  local prio = f[7] and tonumber(f[7])
  if f[7] and (not prio or prio < 0 or prio > 255 or prio % 1 ~= 0) then
    return 'not a priority (0 to 255)', 'priority'
  end
  if f[8] and not tonumber(f[8]) then return 'not a time in ms', 'created_at' end
  return nil
end
local why, field = problem()
if why then return { 'INVALID', why, field } end

local now = now_ms()
local state, pipeline, res = f[1], f[3], f[5] or ''
for _, k in ipairs({ K_LEASES, K_STALE, K_DONE }) do redis.call('ZREM', k, id) end
release_lock(res, id)
flow_release(redis.call('HGET', jk, 'flow'), id)
redis.call('HDEL', jk, 'stale_at', 'step', unpack(ATTEMPT_FIELDS))
redis.call('HSET', jk, 'state', 'QUEUED', 'updated_at', fmt(now))
redis.call('ZADD', ready_key(pipeline), ready_score(f[7], tonumber(f[8]) or now), id)
redis.call('ZREM', K_QUARANTINE, id)
redis.call('HDEL', K_QUARANTINE_WHY, id)
local events = event_log(true)
emit(events, 'repair', id, f[2], state, 'QUEUED', who, 'repaired: requeued from the quarantine')
local g = redis.call('HGET', group_of_key(), id)
if g then group_count(events, g, id, 'QUEUED', now) end
wake(wake_key(pipeline))
return { 'OK', pipeline }
