-- lease: QUEUED -> LEASED for up to n jobs of the served pipelines, in one call.
-- Promotes due delayed jobs first. A job whose resource is locked by another job
-- is parked on that resource (no polling) until the lock is released.
-- KEYS[10..] pairs of (ready:<pipeline>, delayed:<pipeline>) for each served pipeline
-- ARGV[4] worker id  ARGV[5] lease ttl ms  ARGV[6] lock ttl ms  ARGV[7] n  ARGV[8..] n tokens
-- Reply: { next_due_ms or -1, now ms, jobs parked on a locked resource by this call,
--          then per leased job 10 values:
--          id, token, fence, attempt, pipeline, input, resource, last_step, last_output, not_before }
-- As a function: lease(ready_keys, delayed_keys, worker, ttl, lock_ttl, n, tokens), the
-- key and token arguments as lists.
local function lease(ready_keys, delayed_keys, worker, ttl, lock_ttl, n, tokens)
  local now = now_ms()
  local pairs_n = #ready_keys

  -- promote due delayed jobs
  for p = 1, pairs_n do
    local due = redis.call('ZRANGEBYSCORE', delayed_keys[p], '-inf', fmt(now), 'WITHSCORES', 'LIMIT', 0, 1000)
    for i = 1, #due, 2 do
      local id = due[i]
      local prio = redis.call('HGET', job_key(id), 'priority')
      redis.call('ZADD', ready_keys[p], ready_score(prio, tonumber(due[i + 1])), id)
      redis.call('ZREM', delayed_keys[p], id)
    end
  end

  local out = { -1, fmt(now), 0 }
  local taken, scanned, parked = 0, 0, 0
  local deadline = now + ttl
  while taken < n and scanned < n * 4 + 16 do
    scanned = scanned + 1
    local best_key, best_id, best_score = nil, nil, nil
    if pairs_n == 1 then
      local h = redis.call('ZPOPMIN', ready_keys[1])
      if h[1] then best_key, best_id, best_score = ready_keys[1], h[1], h[2] end
    else
      for p = 1, pairs_n do
        local h = redis.call('ZRANGE', ready_keys[p], 0, 0, 'WITHSCORES')
        if h[1] then
          local s = tonumber(h[2])
          if best_score == nil or s < best_score or (s == best_score and h[1] < best_id) then
            best_key, best_id, best_score = ready_keys[p], h[1], s
          end
        end
      end
      if best_key then redis.call('ZREM', best_key, best_id) end
    end
    if not best_key then break end
    local id = best_id
    local jk = job_key(id)
    local f = redis.call('HMGET', jk, 'state', 'resource', 'attempt', 'pipeline', 'input', 'last_step', 'not_before')
    if f[1] == 'QUEUED' then
      local res = f[2] or ''
      local holder = false
      if res ~= '' then holder = redis.call('GET', lock_key(res)) end
      if holder and holder ~= id then
        redis.call('ZADD', parked_key(res), best_score, id)
        redis.call('SADD', K_PARKED, res)
        parked = parked + 1
      else
        if res ~= '' then redis.call('SET', lock_key(res), id, 'PX', lock_ttl) end
        local fence = redis.call('INCR', K_FENCE)
        taken = taken + 1
        local token = tokens[taken]
        redis.call('HSET', jk, 'state', 'LEASED', 'token', token, 'fence', fence, 'worker', worker,
          'lease_deadline', fmt(deadline), 'leased_at', fmt(now), 'updated_at', fmt(now), 'steps', '')
        redis.call('ZADD', K_LEASES, fmt(deadline), id)
        emit('lease', id, f[3], 'QUEUED', 'LEASED', worker, '')
        local last = f[6] or ''
        local last_out = ''
        if last ~= '' then last_out = redis.call('HGET', jk, 'out:' .. last) or '' end
        out[#out + 1] = id
        out[#out + 1] = token
        out[#out + 1] = fence
        out[#out + 1] = f[3]
        out[#out + 1] = f[4]
        out[#out + 1] = f[5]
        out[#out + 1] = res
        out[#out + 1] = last
        out[#out + 1] = last_out
        out[#out + 1] = f[7] or ''
      end
    end
    -- any other state: a stale index entry; dropping it is the repair
  end

  local next_due = nil
  for p = 1, pairs_n do
    local h = redis.call('ZRANGE', delayed_keys[p], 0, 0, 'WITHSCORES')
    if h[1] then
      local s = tonumber(h[2])
      if next_due == nil or s < next_due then next_due = s end
    end
  end
  if next_due then out[1] = fmt(next_due) end
  out[3] = parked
  return out
end
