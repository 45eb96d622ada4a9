-- enqueue: creates jobs in QUEUED (ready, or delayed until not-before).
-- KEYS[10] ready:<pipeline>  KEYS[11] delayed:<pipeline>  KEYS[12] wake:<pipeline>
-- KEYS[13..] job keys, one per job
-- ARGV[4] queue  ARGV[5] pipeline  ARGV[6] job count
-- then per job 10 values: id, input, input_key, resource, priority, delay_ms, max_attempts, stale_lock,
--   rerun ('1': create a new job even when the key's latest job SUCCEEDED), flow (the
--   job's flow-control gates, lib/flow; '' for none: the field is then not written)
-- An input key is idempotent: while a job with it is not terminal, that job is
-- the answer ('existing'); when its latest job SUCCEEDED (recorded in
-- `outcomes` for the queue's input window), that job is the answer
-- ('succeeded') unless `rerun`; after any other end (FAILED, CANCELLED,
-- RESOLVED) or with `rerun`, a new job is created with `previous` naming the
-- latest one ('rerun').
-- Reply: flat list of (id, 'created' | 'rerun' | 'existing' | 'succeeded', previous id or '') triples.
-- A malformed argument (lib/args: an empty id, queue or pipeline, a priority
-- outside 0..255, a delay or max attempts that is not an integer, a stale-lock
-- policy other than hold or release, a rerun flag other than '1', '0' or '', a
-- flow text that lists no gates, a count that does not match the KEYS and ARGV) is an error reply, before any
-- job is written.
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/events"
--- @include "lib/wake"
--- @include "lib/ready"
--- @include "lib/args"
--- @include "lib/flow"
local bad = common_args('enqueue')
if bad then return bad end
local k_ready, k_delayed, k_wake = KEYS[10], KEYS[11], KEYS[12]
local queue, pipeline, n = ARGV[4], ARGV[5], int_value(ARGV[6], 0)
if queue == nil or queue == '' then return bad_arg('enqueue', 'queue', queue) end
if pipeline == nil or pipeline == '' then return bad_arg('enqueue', 'pipeline', pipeline) end
if not n then return bad_arg('enqueue', 'job count', ARGV[6]) end
if #ARGV ~= 6 + 10 * n or #KEYS ~= 12 + n then
  return redis.error_reply('BAD_ARG enqueue: ' .. n .. ' jobs do not match ' .. #KEYS .. ' keys and ' .. #ARGV .. ' values')
end
local STALE_LOCKS = { hold = true, release = true }
-- each job's checked values: offset in its 9, name, check
local JOB_CHECKS = {
  { 1, 'id', function(v) return v ~= '' end },
  { 5, 'priority', function(v) return int_value(v, 0, 255) end },
  { 6, 'delay ms', function(v) return int_value(v, 0) end },
  { 7, 'max attempts', function(v) return int_value(v, 1) end },
  { 8, 'stale lock policy', function(v) return STALE_LOCKS[v] end },
  { 9, 'rerun flag', function(v) return v == '1' or v == '0' or v == '' end },
  { 10, 'flow', function(v) return v == '' or gates_of(v) end },
}
for i = 1, n do
  local a = 6 + (i - 1) * 10
  for _, c in ipairs(JOB_CHECKS) do
    local v = ARGV[a + c[1]]
    if not c[3](v) then return bad_arg('enqueue', 'job ' .. i .. ' ' .. c[2], v) end
  end
end
local now = now_ms()
local out = {}
local events = event_log(true)
local created = 0
for i = 1, n do
  local a = 6 + (i - 1) * 10
  local id, input, input_key, resource = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  local priority, delay_ms, max_attempts, stale_lock = ARGV[a + 5], tonumber(ARGV[a + 6]), ARGV[a + 7], ARGV[a + 8]
  local rerun = ARGV[a + 9] == '1'
  local existing, status, previous = false, 'existing', ''
  if input_key ~= '' then
    existing = redis.call('HGET', K_INPUTS, input_key)
    if not existing then
      local last = redis.call('HGET', K_OUTCOMES, input_key)
      local last_id, last_outcome = string.match(last or '', '^(%S+) (%u+)$')
      if last_outcome == 'SUCCEEDED' and not rerun then
        existing, status = last_id, 'succeeded'
      elseif last_id then
        previous = last_id
      end
    end
  end
  -- an id given by the caller is idempotent too: never overwrite a job
  if not existing and redis.call('EXISTS', KEYS[12 + i]) == 1 then existing, status = id, 'existing' end
  if existing then
    out[#out + 1] = existing
    out[#out + 1] = status
    out[#out + 1] = ''
  else
    local jk = KEYS[12 + i]
    local not_before = now + delay_ms
    redis.call('HSET', jk, 'id', id, 'queue', queue, 'pipeline', pipeline, 'input', input,
      'input_key', input_key, 'resource', resource, 'priority', priority, 'max_attempts', max_attempts,
      'stale_lock', stale_lock, 'created_at', fmt(now), 'updated_at', fmt(now), 'not_before', fmt(not_before),
      'attempt', '1', 'state', 'QUEUED', 'step', '', 'last_step', '', 'cleanup_needed', '0')
    if previous ~= '' then redis.call('HSET', jk, 'previous', previous) end
    if ARGV[a + 10] ~= '' then redis.call('HSET', jk, 'flow', ARGV[a + 10]) end
    if input_key ~= '' then redis.call('HSET', K_INPUTS, input_key, id) end
    if delay_ms > 0 then
      redis.call('ZADD', k_delayed, fmt(not_before), id)
    else
      redis.call('ZADD', k_ready, ready_score(priority, now), id)
    end
    local why = ''
    if previous ~= '' then why = 're-run of ' .. previous end
    emit(events, 'enqueue', id, 1, '', 'QUEUED', '', why)
    created = created + 1
    out[#out + 1] = id
    out[#out + 1] = (previous ~= '') and 'rerun' or 'created'
    out[#out + 1] = previous
  end
end
-- a delayed job wakes a worker too, so that it learns the new next-due time
if created > 0 then wake(k_wake, created) end
return out
