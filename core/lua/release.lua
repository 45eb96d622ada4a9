-- release: LEASED -> QUEUED, the holder hands an unstarted job back (shutdown).
-- KEYS[10] job  KEYS[11] ready:<pipeline>
-- ARGV[4] token  ARGV[5] resource ('' when none)
-- Reply: {'OK'} | refusal
local jk, k_ready = KEYS[10], KEYS[11]
local token, res = ARGV[4], ARGV[5]
local refusal = refuse_unless(jk, { LEASED = true }, token)
if refusal then return refusal end
local now = now_ms()
local f = redis.call('HMGET', jk, 'id', 'attempt', 'worker', 'priority', 'created_at')
local id = f[1]
release_lock(res, id)
redis.call('ZREM', K_LEASES, id)
redis.call('HDEL', jk, unpack(ATTEMPT_FIELDS))
redis.call('HSET', jk, 'state', 'QUEUED', 'updated_at', fmt(now))
redis.call('ZADD', k_ready, ready_score(f[4], tonumber(f[5]) or now), id)
emit('release', id, f[2], 'LEASED', 'QUEUED', f[3], 'released by its worker')
wake()
return { 'OK' }
