-- group_create: creates a named group of jobs (lib/groups), open for children
-- until it is sealed, with an optional completion job enqueued once when the
-- group settles.
-- KEYS[10] group:<name>  KEYS[11] groups
-- ARGV[4] name  ARGV[5] group id (names it in events)  ARGV[6] policy (all_succeeded | all_terminal)
-- ARGV[7] completion job id ('' for none)  ARGV[8] its pipeline  ARGV[9] its input (JSON)
-- ARGV[10] its priority  ARGV[11] its max attempts  ARGV[12] its stale lock policy  ARGV[13] who
-- ARGV[14] its flow-control gates (lib/flow; '' for none)  ARGV[15] its resource ('' for none):
-- the completion job is created with them, as an enqueue of its pipeline would be
-- Reply: {'CREATED', group id} | {'EXISTS', group id, status}
-- A malformed argument is an error reply, before anything is written.
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/events"
--- @include "lib/args"
--- @include "lib/flow"
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
local cid, cp, cin = ARGV[7] or '', ARGV[8] or '', ARGV[9] or ''
if cid ~= '' then
  if cp == '' then return bad_arg('group_create', 'completion pipeline', cp) end
  if not int_value(ARGV[10], 0, 255) then return bad_arg('group_create', 'completion priority', ARGV[10]) end
  if not int_value(ARGV[11], 1) then return bad_arg('group_create', 'completion max attempts', ARGV[11]) end
  if ARGV[12] ~= 'hold' and ARGV[12] ~= 'release' then return bad_arg('group_create', 'completion stale lock', ARGV[12]) end
end
local cflow, cres = ARGV[14] or '', ARGV[15] or ''
if cflow ~= '' and not gates_of(cflow) then return bad_arg('group_create', 'completion flow', cflow) end
if cres ~= '' and name_problem(cres) then return bad_arg('group_create', 'completion resource', cres) end
local who = ARGV[13] or ''
local h = redis.call('HMGET', gk, 'id', 'status')
if h[1] then return { 'EXISTS', h[1], h[2] or '' } end
local now = now_ms()
redis.call('HSET', gk, 'id', gid, 'name', name, 'status', 'open', 'policy', policy, 'total', '0',
  'QUEUED', '0', 'LEASED', '0', 'RUNNING', '0', 'SUCCEEDED', '0', 'FAILED', '0', 'CANCELLED', '0', 'STALE', '0',
  'QUARANTINED', '0', 'purged', '0', 'created_at', fmt(now), 'fired', '')
if cid ~= '' then
  redis.call('HSET', gk, 'completion_id', cid, 'completion_pipeline', cp, 'completion_input', cin,
    'completion_priority', ARGV[10], 'completion_max_attempts', ARGV[11], 'completion_stale_lock', ARGV[12],
    'completion_resource', cres, 'completion_flow', cflow)
end
redis.call('ZADD', KEYS[11], fmt(now), name)
group_event(event_log(true), gk, 'group_create', 'QUEUED', who, 'group ' .. name .. ' created')
return { 'CREATED', gid }
