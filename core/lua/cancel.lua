-- cancel: QUEUED -> CANCELLED at once; LEASED or RUNNING: records the request
-- for the lease holder to honour, and publishes the job's id on the queue's
-- cancel channel so the holder hears of it at once (lib/cancel push_cancel;
-- renew, checkpoint and start report it too).
-- KEYS[10] job  KEYS[11] ready:<pipeline>  KEYS[12] delayed:<pipeline>  KEYS[13] parked:<resource> (or the job key)
-- ARGV[4] reason  ARGV[5] who  ARGV[6] resource ('' when none)
-- Reply: {'CANCELLED'} | {'REQUESTED', state} | {'ALREADY_REQUESTED', state, reason}
--        | {'TERMINAL', state} | {'REFUSED', 'STALE'} | {'NOT_FOUND'}
--        | {'CORRUPT', problem, field} (nothing written); an empty reason is an error reply
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/events"
--- @include "lib/moves"
--- @include "lib/jobs"
--- @include "lib/attempts"
--- @include "lib/retention"
--- @include "lib/args"
--- @include "lib/flow"
--- @include "lib/cancel"
local bad = common_args('cancel')
if bad then return bad end
local jk, k_ready, k_delayed = KEYS[10], KEYS[11], KEYS[12]
local reason, who, res = ARGV[4], ARGV[5], ARGV[6]
-- a request is pending while its reason is set: an empty one would not be seen
if reason == nil or reason == '' then return bad_arg('cancel', 'reason', reason) end
if who == nil then return bad_arg('cancel', 'who', who) end
if res == nil then return bad_arg('cancel', 'resource', res) end
local forged = key_check.job(10, jk)
if forged then return forged end
local f = redis.call('HMGET', jk, 'state', 'id', 'attempt', 'worker', 'cancel_reason', 'resource', 'flow', 'links',
  'pipeline')
local state, id = f[1], f[2]
if not state then return { 'NOT_FOUND' } end
id = id or job_id_of(jk)
-- a hash that names another job is never taken for it (lib/jobs)
if id ~= job_id_of(jk) then return id_mismatch(id, jk) end
if not may('cancel', state) then
  if TERMINAL[state] then return { 'TERMINAL', state } end
  return { 'REFUSED', state }
end
-- cancelled at once where the table says so (QUEUED); elsewhere a request the holder honours
local now_cancelled = may_move('cancel', state, 'CANCELLED')
local corrupt = corrupt_field({ id = id, attempt = f[3], pipeline = f[9] },
  now_cancelled and { 'id', 'attempt', 'pipeline' } or { 'id', 'pipeline' })
if corrupt then return corrupt end
if res ~= (f[6] or '') then return { 'BAD_ARG', 'resource' } end
-- the keys given are the job's pipeline's and resource's (or the job key when none)
forged = key_check.pipeline(KEYS, 11, { 'ready', 'delayed' }, f[9])
  or key_check.key(13, KEYS[13], res ~= '' and parked_key(res) or jk)
if forged then return forged end
local now = now_ms()
local events = event_log(true)
if now_cancelled then
  cancel_queued(events, jk, id, f[3], res, f[7], f[8], k_ready, k_delayed, KEYS[13], reason, who, now)
  purge(now, 4)
  return { 'CANCELLED' }
end
-- LEASED or RUNNING: the state stays, the request is recorded
if f[5] and f[5] ~= '' then return { 'ALREADY_REQUESTED', state, f[5] } end
redis.call('HSET', jk, 'cancel_reason', reason, 'cancel_at', fmt(now), 'cancel_by', who, 'updated_at', fmt(now))
emit(events, 'cancel', id, f[3], state, state, who, 'cancel requested: ' .. reason)
push_cancel(id)
return { 'REQUESTED', state }
