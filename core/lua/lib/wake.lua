-- wake: wake-up tokens for idle workers, one list per pipeline (wake:<pipeline>).

-- Pushes up to `n` (at most 16) wake-up tokens for idle workers of one pipeline,
-- blocked on its wake list `k`. A lease that leaves the pipeline's ready set
-- empty deletes the tokens nobody needed (see lease).
local function wake(k, n)
  n = math.min(n or 1, 16)
  local tokens = {}
  for i = 1, n do tokens[i] = '1' end
  redis.call('RPUSH', k, unpack(tokens))
  redis.call('LTRIM', k, -64, -1)
end
