-- new_job: the writing of one new job in QUEUED (ready, or delayed until
-- not-before), the one way every job is created: by `enqueue` and
-- `schedule_tick` (lib/create create_job, after its idempotency check) and a
-- group's completion job (lib/groups fire_completion). A job is given as the
-- JOB_VALUES (11) values of lib/create's layout (the client's new-job encoder,
-- core/src/wire/new_job.rs) in `argv` from offset `a`: id, input, input_key,
-- resource, priority, delay_ms, max_attempts, stale_lock, rerun (not read
-- here), flow, trace. Its input window (lib/search) is kept in its `window`
-- field, and its search index members are added to `sb` (written once per
-- call by the caller). A file of its own, apart from lib/create's argument
-- checks, so that the scripts that settle groups (settle among them) take in
-- one more local only: the shared helpers are locals of one main chunk, which
-- Lua allows 200 (tests/function_library.rs keeps every script 16 short of it).
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/events"
--- @include "lib/ready"
--- @include "lib/search"

-- Writes the new job given at offset `a` of `argv` under key `jk` (which no
-- job holds: the caller checked) in QUEUED: its hash (fields at their default
-- left out; then the field/value pairs of `extra`, a list or nil), its input
-- key's entry, its search index members (added to `sb`), its ready (or
-- delayed) entry and its `enqueue` event with `why`. `previous` names the job
-- it re-runs ('' for none).
local function write_new_job(events, jk, k_ready, k_delayed, pipeline, argv, a, previous, why, sb, extra)
  local flow, trace = argv[a + 10], argv[a + 11]
  local id, input, input_key, resource = argv[a + 1], argv[a + 2], argv[a + 3], argv[a + 4]
  local priority, delay_ms, max_attempts, stale_lock = argv[a + 5], tonumber(argv[a + 6]) or 0, argv[a + 7], argv[a + 8]
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
  if extra then
    for i = 1, #extra, 2 do opt(extra[i], extra[i + 1]) end
  end
  redis.call('HSET', jk, unpack(fields))
  search_add(sb, id, input_key, search_resource(resource, flow), window)
  if input_key and input_key ~= '' then redis.call('HSET', K_INPUTS, input_key, id) end
  if delay_ms > 0 then
    redis.call('ZADD', k_delayed, fmt(not_before), id)
  else
    redis.call('ZADD', k_ready, ready_score(priority, now), id)
  end
  emit(events, 'enqueue', id, 1, '', 'QUEUED', '', why)
end
