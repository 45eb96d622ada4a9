-- flow: flow control enforced at lease time, for the jobs whose pipeline
-- declares it (a job without a `flow` field pays nothing: lease reads the field
-- with the HMGET it already makes, and no other script reads more for it).
--
-- A job's `flow` field (written at enqueue) lists its gates, separated by
-- spaces, each '<kind>:<n>:<name>':
--   slots:<N>:<resource>   at most N holders of the resource (resource_limit N > 1;
--                          N = 1 is the plain lock, lib/locks)
--   running:<N>:<pipeline> at most N leased or running jobs of the pipeline (max_running)
--   rate:<T>:<limiter>     one start per T ms (GCRA on Redis TIME, no burst), per
--                          resource or per named limiter shared by pipelines
-- Keys (derived from KEYS[1]):
--   <kind>:<name>          zset of holders, job id -> 0 (holds while its lease is in
--                          the lease index) or 1 (kept by a STALE job until an operator decides)
--   rate:<limiter>         hash tat (theoretical arrival time, ms), line (end of the
--                          reserved start times, ms)
--   waiting:<kind>:<name>  zset of jobs waiting for a slot, by ready score
--   waiting                set of '<kind>:<name>' gates that have waiting jobs
--   limits                 hash '<kind>:<name>' -> N, as the last waiting job declared it
-- A job stopped by a concurrency gate waits in its waiting set until a holder
-- leaves: the release hands the slot to the first waiter (lib/locks hand_off).
-- A job stopped by a rate gate is given the next free start time (its
-- reservation, the job's `rate_at` field) and put in its delayed set until then.
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/locks"

local GATE_KINDS = { slots = true, running = true, rate = true }

-- The index of gates with waiting jobs, and the hash of their limits (named
-- from KEYS[1] when called: no library file reads KEYS at its top level).
local function waiting_index() return BASE .. ':waiting' end
local function limits_key() return BASE .. ':limits' end

-- The gates of a flow text, or nil when it is not one.
local function gates_of(flow)
  local gates = {}
  for word in string.gmatch(flow, '%S+') do
    local kind, n, name = string.match(word, '^(%l+):(%d+):(.+)$')
    if not kind or not GATE_KINDS[kind] or tonumber(n) < 1 then return nil end
    local gate = kind .. ':' .. name
    gates[#gates + 1] = { kind = kind, n = tonumber(n), name = name, gate = gate, key = BASE .. ':' .. gate }
  end
  if #gates == 0 then return nil end
  return gates
end

-- Holders of concurrency gate `g`; at its limit, holders whose lease is gone
-- (a vanished job, a lease no sweep saw) are dropped first. `fresh` lists the
-- jobs taken by this call (not yet in the lease index).
local function holders_of(g, fresh)
  local n = redis.call('ZCARD', g.key)
  if n < g.n then return n end
  for _, h in ipairs(redis.call('ZRANGEBYSCORE', g.key, 0, 0)) do
    if not fresh[h] and not redis.call('ZSCORE', K_LEASES, h) then
      redis.call('ZREM', g.key, h)
      n = n - 1
    end
  end
  return n
end

-- Whether job `id` (key `jk`) may start now under `gates`: nil, or the gate
-- that stops it. Reads only; the rate state read is kept in the gate.
local function flow_blocker(gates, jk, now, fresh)
  for _, g in ipairs(gates) do
    if g.kind ~= 'rate' then
      g.held = holders_of(g, fresh)
      if g.held >= g.n then return g end
    end
  end
  for _, g in ipairs(gates) do
    if g.kind == 'rate' then
      local r = redis.call('HMGET', g.key, 'tat', 'line')
      g.tat, g.line = tonumber(r[1]) or 0, tonumber(r[2]) or 0
      g.mine = tonumber(redis.call('HGET', jk, 'rate_at'))
      local turn = now >= g.line or (g.mine ~= nil and g.mine <= now)
      if now < g.tat or not turn then return g end
    end
  end
  return nil
end

-- Takes every gate for job `id`: a slot in each concurrency gate, a start in each rate gate.
local function flow_take(gates, id, jk, now, fresh)
  fresh[id] = true
  for _, g in ipairs(gates) do
    if g.kind == 'rate' then
      redis.call('HSET', g.key, 'tat', fmt(math.max(g.tat, now) + g.n))
      if g.mine then redis.call('HDEL', jk, 'rate_at') end
    else
      redis.call('ZADD', g.key, 0, id)
    end
  end
  redis.call('HDEL', jk, 'waiting')
end

-- Sets job `id` aside for gate `g` that stopped it: in the gate's waiting set
-- (concurrency), or in its pipeline's delayed set `k_delayed` until its
-- reserved start time (rate). Returns the cause ('slots', 'running', 'rate').
local function flow_wait(g, id, jk, score, k_delayed, now)
  if g.kind == 'rate' then
    local at
    if g.mine and g.mine > now then
      at = g.mine
    elseif g.mine then
      -- its reserved time came but a start just before it moved `tat`: exactly when it allows
      at = math.max(g.tat, now)
    else
      at = math.max(g.tat, g.line, now)
      redis.call('HSET', g.key, 'line', fmt(at + g.n))
      redis.call('HSET', jk, 'rate_at', fmt(at))
    end
    redis.call('ZADD', k_delayed, fmt(at), id)
    redis.call('HSET', jk, 'waiting', 'rate ' .. g.name .. ' until ' .. fmt(at))
  else
    redis.call('ZADD', BASE .. ':waiting:' .. g.gate, score, id)
    redis.call('SADD', waiting_index(), g.gate)
    redis.call('HSET', limits_key(), g.gate, g.n)
    redis.call('HSET', jk, 'waiting', g.kind .. ' ' .. g.name .. ' ' .. g.held .. '/' .. g.n)
  end
  return g.kind
end

-- Hands concurrency gate `gate` (`<kind>:<name>`) to its next waiter; forgets
-- it in the waiting index once nobody waits. Returns whether a job was handed it.
local function hand_off_gate(gate)
  local handed, empty = hand_off(BASE .. ':waiting:' .. gate)
  if empty then redis.call('SREM', waiting_index(), gate) end
  return handed
end

-- Frees the slots job `id` holds under flow text `flow` (false/nil: none) and
-- hands each to the next waiter. Called wherever a lock is released.
local function flow_release(flow, id)
  if not flow or flow == '' then return end
  local gates = gates_of(flow)
  if not gates then return end
  for _, g in ipairs(gates) do
    if g.kind ~= 'rate' and redis.call('ZREM', g.key, id) == 1 then hand_off_gate(g.gate) end
  end
end

-- Keeps the slots of job `id` that went STALE (its lease is gone, its side
-- effects may not be): they count until an operator resolves or retries it.
local function flow_keep(flow, id)
  if not flow or flow == '' then return end
  local gates = gates_of(flow)
  if not gates then return end
  for _, g in ipairs(gates) do
    if g.kind ~= 'rate' then redis.call('ZADD', g.key, 'XX', 1, id) end
  end
end

-- Takes job `id` out of the waiting sets of flow text `flow` (a cancelled job).
local function flow_forget(flow, id)
  if not flow or flow == '' then return end
  local gates = gates_of(flow)
  if not gates then return end
  for _, g in ipairs(gates) do
    if g.kind ~= 'rate' then redis.call('ZREM', BASE .. ':waiting:' .. g.gate, id) end
  end
end

-- The sweeper's pass over gates with waiting jobs: a gate below its limit
-- (its holders left without a hand-off reaching a waiter: the waiter handed the
-- slot was cancelled, say) hands its free slots to waiters. Returns how many
-- jobs were handed a slot.
local function flow_sweep(dry)
  local handed = 0
  for _, gate in ipairs(redis.call('SRANDMEMBER', waiting_index(), 16)) do
    local n = tonumber(redis.call('HGET', limits_key(), gate)) or 1
    if dry then
      local free = n - redis.call('ZCARD', BASE .. ':' .. gate)
      handed = handed + math.max(0, math.min(free, redis.call('ZCARD', BASE .. ':waiting:' .. gate)))
    else
      local free = n - holders_of({ key = BASE .. ':' .. gate, n = n }, {})
      for _ = 1, math.min(free, 16) do
        if not hand_off_gate(gate) then break end
        handed = handed + 1
      end
    end
  end
  return handed
end
