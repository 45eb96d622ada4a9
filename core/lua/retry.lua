-- retry (operator): a new attempt, in QUEUED, for a job whose current attempt is
-- FAILED, CANCELLED or STALE. The old attempt's record is kept (a STALE attempt is
-- recorded as it went STALE, with the retry beside it: lib/stale stale_record).
-- 'resume' keeps the last completed step and its output so the new attempt
-- continues after it; 'start' clears them.
-- KEYS[10] job  KEYS[11] ready:<pipeline>  KEYS[12] wake:<pipeline>
-- KEYS[13] lock:<resource>  KEYS[14] parked:<resource> (the job key for both when none)
-- A job whose input key is now held by another non-terminal job is refused
-- ({'INPUT_KEY_TAKEN', other id}): the same input would be processed twice.
-- ARGV[4] mode ('resume' | 'start')  ARGV[5] who  ARGV[6] reason  ARGV[7] resource ('' when none)
-- Reply: {'OK', new attempt} | refusal | {'CORRUPT', problem, field} (nothing written)
-- A mode other than resume or start is an error reply.
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/events"
--- @include "lib/wake"
--- @include "lib/ready"
--- @include "lib/locks"
--- @include "lib/flow"
--- @include "lib/jobs"
--- @include "lib/attempts"
--- @include "lib/stale"
--- @include "lib/args"
--- @include "lib/new_attempt"
local jk, k_ready, k_wake = KEYS[10], KEYS[11], KEYS[12]
local mode, who, reason, res = ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local bad = common_args('retry')
if bad then return bad end
if mode ~= 'resume' and mode ~= 'start' then return bad_arg('retry', 'mode', mode) end
if who == nil then return bad_arg('retry', 'who', who) end
if reason == nil then return bad_arg('retry', 'reason', reason) end
if res == nil then return bad_arg('retry', 'resource', res) end
local forged = key_check.job(10, jk)
if forged then return forged end
local refusal = refuse_unless(jk, 'retry', 'QUEUED', nil)
if refusal then return refusal end
local f = redis.call('HMGET', jk, 'id', 'state', 'attempt', 'priority', 'input_key', 'created_at', 'resource', 'flow',
  'links', 'pipeline')
f[1] = f[1] or job_id_of(jk)
if f[1] ~= job_id_of(jk) then return id_mismatch(f[1], jk) end
local corrupt = corrupt_field({ id = f[1], attempt = f[3], priority = f[4], created_at = f[6], pipeline = f[10] },
  { 'id', 'attempt', 'priority', 'created_at', 'pipeline' })
if corrupt then return corrupt end
if res ~= (f[7] or '') then return { 'BAD_ARG', 'resource' } end
-- the keys given are the job's pipeline's and resource's (the job key when none)
forged = key_check.pipeline(KEYS, 11, { 'ready', 'wake' }, f[10]) or key_check.resource(KEYS, 13, res, jk)
if forged then return forged end
local now = now_ms()
local id, from, attempt = f[1], f[2], tonumber(f[3])
if f[5] and f[5] ~= '' then
  local holder = redis.call('HGET', K_INPUTS, f[5])
  if holder and holder ~= id then return { 'INPUT_KEY_TAKEN', holder } end
end
if from == 'STALE' then
  local rec = stale_record(jk, { action = 'retry', by = who, reason = reason, at = now, to = 'QUEUED', mode = mode }, now)
  if not append_attempt(id, attempt, rec) then
    return { 'CORRUPT', 'attempt ' .. attempt .. ' already recorded (' .. attempt_field(id, attempt) .. ' in the attempts hash)' }
  end
  redis.call('ZREM', K_STALE, id)
  release_lock_at(KEYS[13], KEYS[14], res, id)
  flow_release(f[8], id)
else
  redis.call('ZREM', K_DONE, id)
end
local events = event_log(true)
local next_attempt = new_attempt(events, jk, f, mode, who, reason, now, k_ready)
wake(k_wake)
return { 'OK', next_attempt }
