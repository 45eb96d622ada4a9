-- create: one new job in QUEUED (ready, or delayed until not-before), idempotent
-- on its input key and id: the enqueue of `enqueue` and of `schedule_tick`.
-- A job is given as JOB_VALUES (11) values of the run's ARGV (`argv`, passed
-- in: a library file never reads ARGV itself) from offset `a` (argv[a + 1 ..
-- a + 11]), in the one layout the client's new-job encoder writes
-- (core/src/wire/new_job.rs): id, input, input_key, resource, priority,
-- delay_ms, max_attempts, stale_lock, rerun ('1': create a new job even when
-- the key's latest job SUCCEEDED), flow (its flow-control gates, lib/flow; ''
-- for none, and no field), trace (a W3C traceparent; '' for none, and no
-- field: a plain job pays nothing).
-- A created job's input window (lib/search) is kept in its `window` field, and
-- its search index members are added to `sb` (written once per call by the caller).
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/events"
--- @include "lib/ready"
--- @include "lib/args"
--- @include "lib/search"
--- @include "lib/flow"

-- The values of one new job in a call's ARGV.
local JOB_VALUES = 11
local STALE_LOCKS = { hold = true, release = true }

-- Whether `v` is a W3C traceparent: version 00, a 32-hex trace id and a
-- 16-hex parent id (neither all zeros), 2-hex flags, all lower case.
local function traceparent_ok(v)
  local trace_id, parent_id = string.match(v or '', '^00%-(%x+)%-(%x+)%-%x%x$')
  if not trace_id or #trace_id ~= 32 or #parent_id ~= 16 then return false end
  if string.find(v, '%u') then return false end
  return string.find(trace_id, '[^0]') ~= nil and string.find(parent_id, '[^0]') ~= nil
end

-- each job's checked values: offset in its JOB_VALUES, name, check
local JOB_CHECKS = {
  { 1, 'id', function(v) return v ~= '' end },
  { 5, 'priority', function(v) return int_value(v, 0, 255) end },
  { 6, 'delay ms', function(v) return int_value(v, 0) end },
  { 7, 'max attempts', function(v) return int_value(v, 1) end },
  { 8, 'stale lock policy', function(v) return STALE_LOCKS[v] end },
  { 9, 'rerun flag', function(v) return v == '1' or v == '0' or v == '' end },
  { 10, 'flow', function(v) return v == '' or gates_of(v) end },
  { 11, 'trace', function(v) return v == '' or traceparent_ok(v) end },
}

-- The error reply for the first malformed value of job `i` at offset `a` of
-- `argv` (for `script`), or nil.
local function job_args_bad(script, argv, a, i)
  for _, c in ipairs(JOB_CHECKS) do
    local v = argv[a + c[1]]
    if not c[3](v) then return bad_arg(script, 'job ' .. i .. ' ' .. c[2], v) end
  end
  return nil
end

-- The job an enqueue of the job given at offset `a` of `argv` (under key
-- `jk`) answers with instead of creating it: its id and status ('existing':
-- a job not terminal holds its input key, or its id exists; 'succeeded': the
-- input key's latest job SUCCEEDED and no re-run is asked), or nil and the
-- input key's latest job ('' for none), which a new job re-runs.
local function existing_job(argv, a, jk)
  local input_key, previous = argv[a + 3], ''
  if input_key ~= '' then
    local existing = redis.call('HGET', K_INPUTS, input_key)
    if existing then return existing, 'existing' end
    local last = redis.call('HGET', K_OUTCOMES, input_key)
    local last_id, last_outcome = string.match(last or '', '^(%S+) (%u+)$')
    if last_outcome == 'SUCCEEDED' and argv[a + 9] ~= '1' then return last_id, 'succeeded' end
    if last_id then previous = last_id end
  end
  -- an id given by the caller is idempotent too: never overwrite a job
  if redis.call('EXISTS', jk) == 1 then return argv[a + 1], 'existing' end
  return nil, previous
end

-- Creates the job given at offset `a` of `argv` under key `jk` (unless its input key
-- or id already has a job: existing_job), emitting `enqueue` with `why` (or the re-run's).
-- Returns id, status ('created' | 'rerun' | 'existing' | 'succeeded'),
-- previous id or '', and whether a job was created.
local function create_job(events, jk, k_ready, k_delayed, queue, pipeline, argv, a, why, sb)
  local flow, trace = argv[a + 10], argv[a + 11]
  local id, input, input_key, resource = argv[a + 1], argv[a + 2], argv[a + 3], argv[a + 4]
  local priority, delay_ms, max_attempts, stale_lock = argv[a + 5], tonumber(argv[a + 6]), argv[a + 7], argv[a + 8]
  local existing, previous = existing_job(argv, a, jk)
  if existing then return existing, previous, '', false end
  local now = now_ms()
  local not_before = now + delay_ms
  -- a field at its default is not written (lib/jobs): the key names the queue,
  -- and an absent input key, resource, priority, attempts allowed, STALE lock
  -- policy, step, last step or cleanup flag reads as none, none, 0, 1, hold,
  -- none, none, 0
  -- no `id` (the key names the job) and no `not_before` unless delayed (it is
  -- then `created_at`); the fields every transition reads come first, since a
  -- field is found by a scan of the hash from its start
  local fields = { 'state', 'QUEUED', 'attempt', '1', 'pipeline', pipeline, 'input', input,
    'created_at', fmt(now), 'updated_at', fmt(now) }
  local function opt(name, value, default)
    if value and value ~= '' and value ~= default then
      fields[#fields + 1] = name
      fields[#fields + 1] = value
    end
  end
  if delay_ms > 0 then opt('not_before', fmt(not_before)) end
  opt('input_key', input_key)
  opt('resource', resource)
  opt('priority', priority, '0')
  opt('max_attempts', max_attempts, '1')
  opt('stale_lock', stale_lock, 'hold')
  local window = input_window(input)
  opt('window', window)
  opt('previous', previous)
  opt('flow', flow)
  opt('trace', trace)
  redis.call('HSET', jk, unpack(fields))
  search_add(sb, id, input_key, search_resource(resource, flow), window)
  if input_key ~= '' then redis.call('HSET', K_INPUTS, input_key, id) end
  if delay_ms > 0 then
    redis.call('ZADD', k_delayed, fmt(not_before), id)
  else
    redis.call('ZADD', k_ready, ready_score(priority, now), id)
  end
  if previous ~= '' then
    why = 're-run of ' .. previous .. ((why ~= '' and ('; ' .. why)) or '')
  end
  emit(events, 'enqueue', id, 1, '', 'QUEUED', '', why)
  return id, ((previous ~= '') and 'rerun' or 'created'), previous, true
end
