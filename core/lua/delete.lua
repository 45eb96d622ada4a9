-- delete (operator): deletes one terminal job (SUCCEEDED, FAILED or CANCELLED)
-- before retention would: its hash, its attempt records, its `done` entry and
-- its search index members, as retention does (lib/retention delete_job: a
-- group child is counted purged in its group; its input key's last outcome
-- is kept, so that a later enqueue of the key still knows how its latest job
-- ended), recorded as a `delete` event
-- (from = to = its state) with who and why. A job in any other state is
-- refused: it may still run, or wait for a decision.
-- KEYS[10] job
-- ARGV[4] who  ARGV[5] reason (not empty)
-- Reply: {'OK', state} | {'NOT_FOUND'} | {'REFUSED', state} |
-- {'CORRUPT', problem, field} (nothing written)
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/events"
--- @include "lib/jobs"
--- @include "lib/args"
--- @include "lib/retention"
local jk = KEYS[10]
local who, reason = ARGV[4], ARGV[5]
local bad = common_args('delete')
if bad then return bad end
if who == nil then return bad_arg('delete', 'who', who) end
if reason == nil or reason == '' then return bad_arg('delete', 'reason', reason) end
local forged = key_check.job(10, jk)
if forged then return forged end
local f = redis.call('HMGET', jk, 'state', 'id', 'attempt')
local state = f[1]
if not state then return { 'NOT_FOUND' } end
if not TERMINAL[state] then return { 'REFUSED', state } end
local id = f[2] or job_id_of(jk)
if id ~= job_id_of(jk) then return id_mismatch(id, jk) end
local corrupt = corrupt_field({ id = id, attempt = f[3] }, { 'id', 'attempt' })
if corrupt then return corrupt end
local members = {}
delete_job(jk, id, members)
unsearch(members)
redis.call('ZREM', K_DONE, id)
emit(event_log(true), 'delete', id, f[3], state, state, who, reason)
return { 'OK', state }
