-- settle: a worker's holder operations on many jobs (start, checkpoint, finish,
-- release) and its next lease, in one call. Each operation is the same
-- transition function its own script runs, compared by the job's lease token;
-- one refused operation does not affect the others.
-- KEYS[10..] per operation 5 keys: job, lock:<resource>, parked:<resource> (the job
--            key for both when none), ready:<pipeline>, delayed:<pipeline>;
--            then pairs (ready:<pipeline>, delayed:<pipeline>) of the pipelines to lease
-- ARGV[4] worker  ARGV[5] lease ttl ms  ARGV[6] lock ttl ms  ARGV[7] operations
-- ARGV[8] pipelines to lease  ARGV[9] jobs to lease (0: no lease)
-- then per operation 13 values: kind, token, resource, v1 .. v10
--   start:      v1 first step
--   checkpoint: v1 step, v2 output, v3 next step
--   finish:     v1 outcome, v2 error kind, v3 message, v4 '1' retryable, v5 backoff ms,
--               v6 '1' cleanup needed, v7 reason, v8 '1' interrupted,
--               v9 last step to checkpoint first ('' for none), v10 its output
--   release:    (nothing)
-- then one token per job to lease
-- Reply: one reply per operation, as its own script would give, then the lease reply
--        ({} when nothing was asked).
local worker, ttl, lock_ttl = ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
local n_ops, n_pipelines, n_lease = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
PURGE_PER_END = 0
local out = {}
for i = 1, n_ops do
  local k = 9 + (i - 1) * 5
  local a = 9 + (i - 1) * 13
  local jk, lk, pk, k_ready, k_delayed = KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4], KEYS[k + 5]
  local kind, token, res = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  local v = function(j) return ARGV[a + 3 + j] end
  local has_lock = res ~= ''
  if kind == 'start' then
    out[i] = start(jk, lk, pk, token, v(1), res)
  elseif kind == 'checkpoint' then
    out[i] = checkpoint(jk, lk, token, v(1), v(2), v(3), ttl, lock_ttl, has_lock)
  elseif kind == 'finish' then
    out[i] = finish(jk, k_ready, k_delayed, lk, pk, token, v(1), v(2), v(3), v(4) == '1', tonumber(v(5)),
      v(6) == '1', v(7), res, v(8) == '1', v(9), v(10))
  elseif kind == 'release' then
    out[i] = release(jk, k_ready, lk, pk, token, res)
  else
    out[i] = { 'BAD_ARG', 'operation ' .. tostring(kind) }
  end
end
if n_lease > 0 then
  local ready_keys, delayed_keys, tokens = {}, {}, {}
  local k = 9 + n_ops * 5
  for p = 1, n_pipelines do
    ready_keys[p] = KEYS[k + 2 * p - 1]
    delayed_keys[p] = KEYS[k + 2 * p]
  end
  local a = 9 + n_ops * 13
  for j = 1, n_lease do tokens[j] = ARGV[a + j] end
  out[n_ops + 1] = lease(ready_keys, delayed_keys, worker, ttl, lock_ttl, n_lease, tokens)
else
  out[n_ops + 1] = {}
end
purge(now_ms(), 8)
return out
