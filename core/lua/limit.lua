-- limit: takes n tokens from a named rate limiter inside a step
-- (`ctx.limit(name).acquire(n)`), the same GCRA state lease uses for a rate
-- gate of that name (lib/flow: hash rate:<name>, field tat), on Redis TIME.
-- Granted when the limiter's theoretical arrival time has come; it then moves
-- n periods on. Otherwise nothing is written and the reply says how long to wait.
-- ARGV[4] limiter name  ARGV[5] period ms (one token per period)  ARGV[6] tokens
-- Reply: {0} granted | {ms to wait before asking again}; a malformed argument
-- is an error reply.
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/args"
local bad = common_args('limit')
if bad then return bad end
local name, period, n = ARGV[4], int_value(ARGV[5], 1), int_value(ARGV[6], 1)
if name == nil or name == '' or string.find(name, '[%s{}]') then return bad_arg('limit', 'limiter name', name) end
if not period then return bad_arg('limit', 'period ms', ARGV[5]) end
if not n then return bad_arg('limit', 'token count', ARGV[6]) end
local key = BASE .. ':rate:' .. name
local now = now_ms()
local tat = tonumber(redis.call('HGET', key, 'tat')) or 0
if now < tat then return { tat - now } end
redis.call('HSET', key, 'tat', fmt(math.max(tat, now) + n * period))
return { 0 }
