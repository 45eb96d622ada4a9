-- create: one new job in QUEUED (ready, or delayed until not-before), idempotent
-- on its input key and id: the enqueue of `enqueue` and of `schedule_tick`
-- (create_job; the job itself is written by lib/new_job, as a group's
-- completion job is).
-- A job is given as JOB_VALUES (11) values of the run's ARGV (`argv`, passed
-- in: a library file never reads ARGV itself) from offset `a` (argv[a + 1 ..
-- a + 11]), in the one layout the client's new-job encoder writes
-- (core/src/wire/new_job.rs): id, input, input_key, resource, priority,
-- delay_ms, max_attempts, stale_lock, rerun ('1': create a new job even when
-- the key's latest job SUCCEEDED), flow (its flow-control gates, lib/flow; ''
-- for none, and no field), trace (a W3C traceparent; '' for none, and no
-- field: a plain job pays nothing).
--- @include "lib/keys"
--- @include "lib/args"
--- @include "lib/flow"
--- @include "lib/new_job"

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
  local existing, previous = existing_job(argv, a, jk)
  if existing then return existing, previous, '', false end
  if previous ~= '' then
    why = 're-run of ' .. previous .. ((why ~= '' and ('; ' .. why)) or '')
  end
  write_new_job(events, jk, k_ready, k_delayed, pipeline, argv, a, previous, why, sb)
  return argv[a + 1], ((previous ~= '') and 'rerun' or 'created'), previous, true
end
