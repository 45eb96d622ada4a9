-- resolve (operator): STALE -> FAILED | CANCELLED | SUCCEEDED with a mandatory
-- reason. The attempt's final record keeps what it was (STALE, ended when it went
-- STALE, its cut-off step) with the decision beside it (lib/stale
-- stale_record). Releases the resource lock.
-- Resolving as FAILED or CANCELLED queues the job on the cleanup list, where a
-- worker serving its pipeline runs the pipeline's cleanup hook.
-- KEYS[10] job  KEYS[11] cleanup list
-- KEYS[12] lock:<resource>  KEYS[13] parked:<resource> (the job key for both when none)
-- ARGV[4] resolved state  ARGV[5] who  ARGV[6] reason  ARGV[7] resource ('' when none)
-- Reply: {'OK', state} | refusal | {'BAD_ARG', what} | {'CORRUPT', problem, field} (nothing written)
--- @include "lib/outputs"
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/events"
--- @include "lib/locks"
--- @include "lib/flow"
--- @include "lib/jobs"
--- @include "lib/attempts"
--- @include "lib/stale"
--- @include "lib/retention"
--- @include "lib/args"
--- @include "lib/groups"
local jk = KEYS[10]
local as, who, reason, res = ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local bad = common_args('resolve')
if bad then return bad end
if who == nil then return bad_arg('resolve', 'who', who) end
if res == nil then return bad_arg('resolve', 'resource', res) end
if not TERMINAL[as] then return { 'BAD_ARG', 'resolved state' } end
if reason == '' then return { 'BAD_ARG', 'reason' } end
local forged = key_check.job(10, jk) or forged_keys(KEYS, { [11] = BASE .. ':cleanup' })
if forged then return forged end
local refusal = refuse_unless(jk, 'resolve', as, nil)
if refusal then return refusal end
local f = redis.call('HMGET', jk, 'id', 'attempt', 'resource', 'flow', 'links')
f[1] = f[1] or job_id_of(jk)
if f[1] ~= job_id_of(jk) then return id_mismatch(f[1], jk) end
local corrupt = corrupt_field({ id = f[1], attempt = f[2] }, { 'id', 'attempt' })
if corrupt then return corrupt end
if res ~= (f[3] or '') then return { 'BAD_ARG', 'resource' } end
forged = key_check.resource(KEYS, 12, res, jk)
if forged then return forged end
local now = now_ms()
local id = f[1]
local rec = stale_record(jk, { action = 'resolve', by = who, reason = reason, at = now, to = as }, now)
if not append_attempt(id, f[2], rec) then
  return { 'CORRUPT', 'attempt ' .. f[2] .. ' already recorded (' .. attempt_field(id, f[2]) .. ' in the attempts hash)' }
end
redis.call('ZREM', K_STALE, id)
release_lock_at(KEYS[12], KEYS[13], res, id)
flow_release(f[4], id)
redis.call('HDEL', jk, unpack(ATTEMPT_FIELDS))
-- what the STALE attempt's holder appended after its seal counts for no one (lib/outputs)
drop_outputs(id)
make_terminal(jk, id, as, now, 'RESOLVED')
local events = event_log(true)
emit(events, 'resolve', id, f[2], 'STALE', as, who, reason)
if f[5] then links_moved(events, jk, id, as, now) end
if as ~= 'SUCCEEDED' then
  redis.call('RPUSH', KEYS[11], id)
end
purge(now, 4)
return { 'OK', as }
