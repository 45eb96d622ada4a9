-- enqueue: creates jobs in QUEUED (ready, or delayed until not-before).
-- KEYS[10] ready:<pipeline>  KEYS[11] delayed:<pipeline>  KEYS[12] wake:<pipeline>
-- KEYS[13..] job keys, one per job
-- ARGV[4] queue  ARGV[5] pipeline  ARGV[6] job count
-- then per job the JOB_VALUES (11) values of lib/create (id, input, input_key, resource,
--   priority, delay_ms, max_attempts, stale_lock, rerun, flow, trace)
-- An input key is idempotent: while a job with it is not terminal, that job is
-- the answer ('existing'); when its latest job SUCCEEDED (recorded in
-- `outcomes` for the queue's input window), that job is the answer
-- ('succeeded') unless `rerun`; after any other end (FAILED, CANCELLED,
-- RESOLVED) or with `rerun`, a new job is created with `previous` naming the
-- latest one ('rerun').
-- Optionally, after the jobs, 3 link values shared by every job of the call
-- (lib/groups): group ('' for none), depends_on ('j:<id> g:<group> ...', '' for
-- none), on_parent_failure ('cancel' | 'run'). The parents apply to the jobs
-- created; the group to every job of the call: one that exists already (the
-- answer 'existing' or 'succeeded') joins it, counted in the state it is in
-- (lib/groups link_existing_job). Refused before any write with
-- {'{refused}', code, values...}: 'GROUP_NOT_FOUND', g | 'GROUP_SEALED', g, status
-- | 'PARENT_NOT_FOUND', ref | 'PARENT_ENDED', ref, state | 'CYCLE', g, job id or ''
-- | 'CANNOT_JOIN', job id, why | 'BAD_LINKS', what, value. No job id has
-- braces, so a refusal is never read as a reply's first id.
-- Reply: flat list of (id, 'created' | 'rerun' | 'existing' | 'succeeded', previous id or '') triples.
-- A malformed argument (lib/args: an empty id, queue or pipeline, a priority
-- outside 0..255, a delay or max attempts that is not an integer, a stale-lock
-- policy other than hold or release, a rerun flag other than '1', '0' or '', a
-- flow text that lists no gates, a trace that is not a traceparent, a count that does not match
-- the KEYS and ARGV) is an error reply, before any
-- job is written.
--- @include "lib/keys"
--- @include "lib/args"
--- @include "lib/wake"
--- @include "lib/create"
--- @include "lib/flow"
--- @include "lib/groups"
--- @include "lib/search"
local bad = common_args('enqueue')
if bad then return bad end
local k_ready, k_delayed, k_wake = KEYS[10], KEYS[11], KEYS[12]
local queue, pipeline, n = ARGV[4], ARGV[5], int_value(ARGV[6], 0)
if queue == nil or queue == '' then return bad_arg('enqueue', 'queue', queue) end
if pipeline == nil or pipeline == '' then return bad_arg('enqueue', 'pipeline', pipeline) end
if not n then return bad_arg('enqueue', 'job count', ARGV[6]) end
local links = #ARGV == 9 + JOB_VALUES * n
if (#ARGV ~= 6 + JOB_VALUES * n and not links) or #KEYS ~= 12 + n then
  return redis.error_reply('BAD_ARG enqueue: ' .. n .. ' jobs do not match ' .. #KEYS .. ' keys and ' .. #ARGV .. ' values')
end
for i = 1, n do
  local a = 6 + (i - 1) * JOB_VALUES
  local bad_job = job_args_bad('enqueue', ARGV, a, i)
  if bad_job then return bad_job end
end
-- the keys given are the pipeline's, and each job's is named by its id
local forged = key_check.pipeline(KEYS, 10, { 'ready', 'delayed', 'wake' }, pipeline)
if forged then return forged end
for i = 1, n do
  forged = key_check.key(12 + i, KEYS[12 + i], job_key(ARGV[7 + (i - 1) * JOB_VALUES]))
  if forged then return forged end
end
local lg, ld, lp = ARGV[7 + JOB_VALUES * n], ARGV[8 + JOB_VALUES * n], ARGV[9 + JOB_VALUES * n]
if links then
  -- the jobs that exist already and would join the group
  local joining = {}
  if lg ~= '' then
    for i = 1, n do
      local ex = existing_job(ARGV, 6 + (i - 1) * JOB_VALUES, KEYS[12 + i])
      if ex then joining[#joining + 1] = ex end
    end
  end
  local refused = links_refusal(lg, ld, lp, joining)
  if refused then return refused end
end
local out = {}
local events = event_log(true)
local created = 0
local sb = search_batch()
for i = 1, n do
  local a = 6 + (i - 1) * JOB_VALUES
  local id, status, previous, made = create_job(events, KEYS[12 + i], k_ready, k_delayed, queue, pipeline,
    ARGV, a, '', sb)
  if made then created = created + 1 end
  -- a dependent waits for its parents in the waiting index, in no ready set (lib/groups)
  if made and links and link_new_job(KEYS[12 + i], id, lg, ld, lp, now_ms()) then
    redis.call('ZREM', k_ready, id)
    redis.call('ZREM', k_delayed, id)
  elseif not made and links and lg ~= '' then
    link_existing_job(events, id, lg, now_ms())
  end
  out[#out + 1] = id
  out[#out + 1] = status
  out[#out + 1] = previous
end
flush_search(sb)
-- a delayed job wakes a worker too, so that it learns the new next-due time
if created > 0 then wake(k_wake, created) end
return out
