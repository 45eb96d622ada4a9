-- run_now (operator): makes a delayed QUEUED job due at once: its not-before
-- becomes now and its place in the pipeline's delayed set is moved to now, so
-- the next lease moves it to the ready set as it does any due job (its flow
-- gates and its resource lock still apply there), and the pipeline's idle
-- workers are woken. Recorded as a `run_now` event (QUEUED -> QUEUED) with
-- who and why. A job that is not QUEUED, or not delayed, is refused.
-- KEYS[10] job  KEYS[11] delayed:<pipeline>  KEYS[12] wake:<pipeline>
-- ARGV[4] who  ARGV[5] reason
-- Reply: {'OK', previous not-before (ms)} | {'NOT_FOUND'} | {'REFUSED', state} |
-- {'NOT_DELAYED'} | {'CORRUPT', problem, field} (nothing written)
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/events"
--- @include "lib/jobs"
--- @include "lib/args"
--- @include "lib/wake"
local jk, k_delayed, k_wake = KEYS[10], KEYS[11], KEYS[12]
local who, reason = ARGV[4], ARGV[5]
local bad = common_args('run_now')
if bad then return bad end
if who == nil then return bad_arg('run_now', 'who', who) end
if reason == nil then return bad_arg('run_now', 'reason', reason) end
local forged = key_check.job(10, jk)
if forged then return forged end
local f = redis.call('HMGET', jk, 'state', 'id', 'attempt', 'pipeline')
local state = f[1]
if not state then return { 'NOT_FOUND' } end
if state ~= 'QUEUED' then return { 'REFUSED', state } end
local id = f[2] or job_id_of(jk)
if id ~= job_id_of(jk) then return id_mismatch(id, jk) end
local corrupt = corrupt_field({ id = id, attempt = f[3], pipeline = f[4] }, { 'id', 'attempt', 'pipeline' })
if corrupt then return corrupt end
forged = key_check.pipeline(KEYS, 11, { 'delayed', 'wake' }, f[4])
if forged then return forged end
local was = redis.call('ZSCORE', k_delayed, id)
local now = now_ms()
if not was or tonumber(was) <= now then return { 'NOT_DELAYED' } end
redis.call('ZADD', k_delayed, 'XX', fmt(now), id)
redis.call('HSET', jk, 'not_before', fmt(now), 'updated_at', fmt(now))
emit(event_log(true), 'run_now', id, f[3], 'QUEUED', 'QUEUED', who, reason)
wake(k_wake)
return { 'OK', was }
