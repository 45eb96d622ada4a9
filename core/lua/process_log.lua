-- process_log: the record of one process step of a running attempt (how its
-- child ended or was cut off, its progress, the tails of its stdout and
-- stderr), in the hash proc:<job id> beside the job (never in the job's hash),
-- written by the lease's holder only: the job must be RUNNING under its token.
-- KEYS[10] the job's hash  KEYS[11] its process records (proc:<job id>)
-- ARGV[4] lease token  ARGV[5] field '<attempt>:<step>'  ARGV[6] record (JSON)
-- Reply: {1} written | {0} the lease is not held by this token (nothing written).
--- @include "lib/keys"
--- @include "lib/args"
local bad = common_args('process_log')
if bad then return bad end
local token, field, record = ARGV[4], ARGV[5], ARGV[6]
if type(token) ~= 'string' or token == '' then return bad_arg('process_log', 'lease token', token) end
if type(field) ~= 'string' or not string.find(field, '^%d+:.') then return bad_arg('process_log', 'field', field) end
if type(record) ~= 'string' or string.sub(record, 1, 1) ~= '{' then return bad_arg('process_log', 'record', record) end
-- the job's key, and its process records' beside it (named by the same id)
local forged = key_check.job(10, KEYS[10])
  or key_check.key(11, KEYS[11], BASE .. ':proc:' .. string.sub(KEYS[10], #BASE + 6))
if forged then return forged end
local f = redis.pcall('HMGET', KEYS[10], 'state', 'token')
if type(f) ~= 'table' or f.err or f[1] ~= 'RUNNING' or f[2] ~= token then return { 0 } end
redis.call('HSET', KEYS[11], field, record)
return { 1 }
