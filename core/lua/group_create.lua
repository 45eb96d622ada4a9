-- group_create: creates a named group of jobs (lib/groups), open for children
-- until it is sealed, with an optional completion job enqueued once when the
-- group settles.
-- KEYS[10] group:<name>  KEYS[11] groups
-- ARGV[4] name  ARGV[5] group id (names it in events)  ARGV[6] policy (all_succeeded | all_terminal)
-- ARGV[7] who  ARGV[8] the completion job's pipeline ('' for none), then (with one)
-- ARGV[9..] its JOB_VALUES (11) values, as the client's one new-job encoder
--   writes them and lib/create reads them (id, input, input_key, resource,
--   priority, delay_ms, max_attempts, stale_lock, rerun, flow, trace): the
--   completion job is created with its id, input, resource, priority, max
--   attempts, stale lock policy, flow-control gates and trace, as an enqueue
--   of its pipeline would be (its input key, delay and re-run flag are not used)
-- Reply: {'CREATED', group id} | {'EXISTS', group id, status}
-- A malformed argument is an error reply, before anything is written.
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/events"
--- @include "lib/args"
--- @include "lib/flow"
--- @include "lib/create"
--- @include "lib/quarantine"
--- @include "lib/groups"
local bad = common_args('group_create')
if bad then return bad end
local gk, name, gid, policy = KEYS[10], ARGV[4], ARGV[5], ARGV[6]
if not group_name_ok(name) then return bad_arg('group_create', 'group name', name) end
local forged = forged_keys(KEYS, { [10] = group_key(name), [11] = groups_key() })
if forged then return forged end
if gid == nil or gid == '' then return bad_arg('group_create', 'group id', gid) end
if policy ~= 'all_succeeded' and policy ~= 'all_terminal' then return bad_arg('group_create', 'policy', policy) end
-- the completion job's values start after ARGV[C]
local C = 8
local who, cp = ARGV[7] or '', ARGV[C] or ''
if cp ~= '' then
  if #ARGV ~= C + JOB_VALUES then return bad_arg('group_create', 'completion job values', #ARGV - C) end
  local bad_job = job_args_bad('group_create', ARGV, C, 'completion')
  if bad_job then return bad_job end
  if ARGV[C + 4] ~= '' and name_problem(ARGV[C + 4]) then
    return bad_arg('group_create', 'completion resource', ARGV[C + 4])
  end
elseif #ARGV ~= C then
  return bad_arg('group_create', 'completion pipeline', cp)
end
local h = redis.call('HMGET', gk, 'id', 'status')
if h[1] then return { 'EXISTS', h[1], h[2] or '' } end
local now = now_ms()
redis.call('HSET', gk, 'id', gid, 'name', name, 'status', 'open', 'policy', policy, 'total', '0',
  'QUEUED', '0', 'LEASED', '0', 'RUNNING', '0', 'SUCCEEDED', '0', 'FAILED', '0', 'CANCELLED', '0', 'STALE', '0',
  'QUARANTINED', '0', 'purged', '0', 'created_at', fmt(now), 'fired', '')
if cp ~= '' then
  redis.call('HSET', gk, 'completion_id', ARGV[C + 1], 'completion_pipeline', cp, 'completion_input', ARGV[C + 2],
    'completion_priority', ARGV[C + 5], 'completion_max_attempts', ARGV[C + 7], 'completion_stale_lock', ARGV[C + 8],
    'completion_resource', ARGV[C + 4], 'completion_flow', ARGV[C + 10], 'completion_trace', ARGV[C + 11])
end
redis.call('ZADD', KEYS[11], fmt(now), name)
group_event(event_log(true), gk, 'group_create', 'QUEUED', who, 'group ' .. name .. ' created')
return { 'CREATED', gid }
