-- sweep: the recovery rules for leases that expired (their worker stopped renewing):
--   LEASED  + expired + no cancel -> QUEUED      (nothing ran; the lock is released)
--   LEASED  + expired + cancel    -> CANCELLED
--   RUNNING + expired             -> STALE       (side effects may exist: an operator decides;
--                                                 the lock is held unless the job says 'release';
--                                                 the attempt's appended outputs are sealed, lib/outputs)
-- Work is bounded by `batch` and proportional to expired leases, not to waiting jobs.
-- Concurrent sweeps are safe: each expired lease is handled by exactly one call.
-- A job that cannot be read (wrong key type, unknown state, bad attempt,
-- pipeline or resource) is moved to the quarantine instead (lib/quarantine).
-- Also hands a resource whose lock expired (or a flow gate below its limit) to its
-- first waiting job, and applies retention. Counts STALE and CANCELLED moves per
-- pipeline in this minute's counters and, once a minute, samples the waiting
-- jobs (lib/stats).
-- ARGV[4] batch  ARGV[5] '1' for a dry run (report only, change nothing)
-- Reply: { requeued, cancelled, stale, unparked, purged, then per job: id, from, to }
-- A malformed argument is an error reply. An expired job whose move needs a field
-- that is malformed (the pipeline, priority or creation time to queue it again, the
-- attempt number to record it) is left as it is, in the lease index.
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/events"
--- @include "lib/wake"
--- @include "lib/ready"
--- @include "lib/locks"
--- @include "lib/flow"
--- @include "lib/moves"
--- @include "lib/jobs"
--- @include "lib/attempts"
--- @include "lib/retention"
--- @include "lib/quarantine"
--- @include "lib/args"
--- @include "lib/groups"
--- @include "lib/stats"
--- @include "lib/outputs"
local bad = common_args('sweep')
if bad then return bad end
local batch, dry = int_value(ARGV[4], 1), flag_value(ARGV[5])
if not batch then return bad_arg('sweep', 'batch', ARGV[4]) end
if dry == nil then return bad_arg('sweep', 'dry run flag', ARGV[5]) end
local now = now_ms()
local expired = redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', fmt(now), 'LIMIT', 0, batch)
local requeued, cancelled, stale, unparked, purged = 0, 0, 0, 0, 0
local moves = {}
local events = event_log(true)
-- resources this call released: each was handed to its next waiter already
local released = {}
local st = stats_batch()
for _, id in ipairs(expired) do
  local jk = job_key(id)
  local f, bad_key = read_job(jk, { 'state', 'cancel_reason', 'resource', 'pipeline', 'attempt', 'worker',
    'priority', 'created_at', 'stale_lock', 'flow', 'links', 'group', 'id', 'fence', 'started_at', 'token',
    'leased_at' })
  -- a job that cannot be read goes to the quarantine (lib/quarantine), not back to a ready set
  local why, field = bad_key, '(key)'
  if f then
    why, field = nil, nil
    if id_problem(f[13], id) then
      why, field = id_problem(f[13], id), 'id'
    elseif f[1] and not known_state(f[1]) then
      why, field = 'not a state', 'state'
    elseif may('sweep', f[1]) then
      why = attempt_problem(f[5])
      field = 'attempt'
      if not why then why, field = name_problem(f[4]), 'pipeline' end
      if not why and f[3] and f[3] ~= '' then why, field = name_problem(f[3]), 'resource' end
    end
  end
  if why then
    if not dry then
      redis.call('ZREM', K_LEASES, id)
      if f then
        -- the old holder is refused from now on
        redis.call('HDEL', jk, 'token', 'lease_deadline')
        if f[3] and f[3] ~= '' and not name_problem(f[3]) then
          release_lock(f[3], id)
          released[f[3]] = true
        end
        if type(f[10]) == 'string' then flow_release(f[10], id) end
      end
      quarantine(events, id, why, field, 'leases', f and f[1], f and f[5], f and f[6])
    end
    f = { false }
  end
  local state, cancel, res, worker = f[1], f[2], f[3] or '', f[6] or ''
  -- the table's sweep moves from this state: a pending cancel is honoured where
  -- the table allows (LEASED), else the job goes back to waiting (LEASED) or to
  -- an operator (RUNNING)
  local to = nil
  if may_move('sweep', state, 'CANCELLED') and cancel and cancel ~= '' then
    to = 'CANCELLED'
  elseif may_move('sweep', state, 'QUEUED') then
    to = 'QUEUED'
  elseif may_move('sweep', state, 'STALE') then
    to = 'STALE'
  end
  -- the fields the move reads, checked before it writes
  local j = { id = id, attempt = f[5], pipeline = f[4], priority = f[7], created_at = f[8] }
  local corrupt = nil
  if to == 'CANCELLED' then
    corrupt = corrupt_field(j, { 'attempt' })
  elseif to == 'QUEUED' then
    corrupt = corrupt_field(j, { 'pipeline', 'priority', 'created_at' })
  end
  if corrupt then
    to = 'CORRUPT'
  elseif to == 'CANCELLED' then
    cancelled = cancelled + 1
  elseif to == 'QUEUED' then
    requeued = requeued + 1
  elseif to == 'STALE' then
    stale = stale + 1
  end
  if to and to ~= 'CORRUPT' then
    moves[#moves + 1] = id
    moves[#moves + 1] = state
    moves[#moves + 1] = to
  end
  if not dry and to ~= 'CORRUPT' then
    redis.call('ZREM', K_LEASES, id)
    local why = 'lease expired (worker ' .. worker .. ')'
    if to == 'CANCELLED' then
      append_attempt(id, f[5], attempt_record(jk, 'CANCELLED', now, { reason = why }))
      release_lock(res, id)
      released[res] = true
      flow_release(f[10], id)
      redis.call('HDEL', jk, unpack(ATTEMPT_FIELDS))
      make_terminal(jk, id, 'CANCELLED', now)
      emit(events, 'sweep', id, f[5], 'LEASED', 'CANCELLED', worker, why .. '; cancel requested: ' .. cancel)
      count_outcome(st, f[4], 'cancelled')
      if f[11] then links_moved(events, jk, id, 'CANCELLED', now) end
    elseif to == 'QUEUED' then
      release_lock(res, id)
      released[res] = true
      flow_release(f[10], id)
      redis.call('HDEL', jk, unpack(ATTEMPT_FIELDS))
      redis.call('HSET', jk, 'state', 'QUEUED', 'updated_at', fmt(now))
      redis.call('ZADD', ready_key(f[4]), ready_score(f[7], tonumber(f[8]) or now), id)
      emit(events, 'sweep', id, f[5], 'LEASED', 'QUEUED', worker, why)
      if f[12] then group_count(events, f[12], id, 'QUEUED', now) end
      wake(wake_key(f[4]))
    elseif to == 'STALE' then
      -- the attempt's outputs are sealed: what it appended so far counts (the
      -- operator's resolve or retry records it), nothing it appends from now on does
      -- (counted from `started_at`, or `leased_at` when the lease started it)
      local steps, last, outs, next_step = sealed_outputs(id, f[14], f[16], f[15] or f[17])
      drop_outputs(id)
      -- keep worker and fence for the operator; the token goes, so the old holder is refused
      redis.call('HDEL', jk, 'token', 'lease_deadline')
      if steps then
        -- the step it was cut off in: the one after its last completed step
        if next_step ~= '' and is_step_name(next_step) then
          outs[#outs + 1], outs[#outs + 2] = 'step', next_step
        else
          redis.call('HDEL', jk, 'step')
        end
        redis.call('HSET', jk, 'state', 'STALE', 'stale_at', fmt(now), 'updated_at', fmt(now), 'steps', steps,
          'last_step', last, unpack(outs))
      else
        redis.call('HSET', jk, 'state', 'STALE', 'stale_at', fmt(now), 'updated_at', fmt(now))
      end
      redis.call('ZADD', K_STALE, fmt(now), id)
      if f[9] == 'release' then flow_release(f[10], id) else flow_keep(f[10], id) end
      if res ~= '' then
        if f[9] == 'release' then
          release_lock(res, id)
          released[res] = true
        elseif redis.call('GET', lock_key(res)) == id then
          redis.call('PERSIST', lock_key(res))
        end
      end
      emit(events, 'sweep', id, f[5], 'RUNNING', 'STALE', worker, why)
      count_outcome(st, f[4], 'stale')
      if f[11] then links_moved(events, jk, id, 'STALE', now) end
    end
  end
end

-- jobs parked on a resource whose lock expired without a release: the
-- first waiter of each is handed it
local resources = redis.call('SRANDMEMBER', K_PARKED, 16)
for _, res in ipairs(resources) do
  if not released[res] and redis.call('EXISTS', lock_key(res), handed_key(res)) == 0 then
    if dry then
      unparked = unparked + math.min(1, redis.call('ZCARD', parked_key(res)))
    elseif unpark(res) then
      unparked = unparked + 1
    end
  end
end
-- and jobs waiting on a flow gate below its limit
unparked = unparked + flow_sweep(dry)

if not dry then
  purged = purge(now, batch)
  flush_stats(st)
  sample_waiting(now)
end
local out = { requeued, cancelled, stale, unparked, purged }
for _, v in ipairs(moves) do out[#out + 1] = v end
return out
