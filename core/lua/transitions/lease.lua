-- lease: QUEUED -> LEASED for up to n jobs of the served pipelines, in one call.
-- Promotes due delayed jobs first. A job whose resource is locked by another job
-- is parked on that resource (no polling) until the lock is released. A job
-- whose pipeline declares flow control (its `flow` field, lib/flow) waits in
-- the waiting set of the concurrency gate at its limit, or in its delayed set
-- until the start time a rate gate gave it. A pipeline whose ready set is
-- headed by a pause marker (a member starting with '{', which no job id can:
-- see pause.lua) is paused: its jobs stay where they are. A call
-- that empties the ready sets deletes the wake-up tokens of the pipelines with
-- no delayed job either: they were pushed for jobs that are now taken, and an
-- idle worker woken by one would only find nothing.
-- Called by settle: lease(batch, ready_keys, delayed_keys, wake_keys, worker, ttl,
-- lock_ttl, n, tokens, start_n, first_steps), the keys (one triple per served
-- pipeline) and the n lease tokens as lists; the first `start_n` jobs taken go
-- into free run slots of the worker and start in this call (LEASED -> RUNNING at
-- the first step of their pipeline, `first_steps[p]`, both times recorded, one
-- `start` event from QUEUED) when they have no completed step to resume from
-- (a resumed job's next step is the worker's to find: it is leased, and the
-- worker starts it with its own start). A worker that dies after such a reply
-- leaves the job RUNNING, so the sweeper makes it STALE, not QUEUED.
-- A popped job that cannot be read (its key is not a hash, or a field the
-- reply carries is unreadable: see job_problem) is moved to the quarantine
-- (lib/quarantine) with the reason and the field, and the call goes on with
-- the rest of the batch: one bad job never strands the others.
-- Reply: { next_due_ms or -1, now ms, jobs parked on a locked resource by this call,
--          jobs set aside by this call at a resource limit, at max_running, by a
--          rate limit, served pipelines found paused,
--          then per leased job 12 values:
--          id, token, fence, attempt, pipeline, input, resource, last_step, last_output, not_before,
--          trace (the enqueuer's traceparent, or ''), '1' when it started in this call else '' }
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/events"
--- @include "lib/ready"
--- @include "lib/moves"
--- @include "lib/quarantine"
--- @include "lib/flow"
--- @include "lib/groups"

-- The fields lease reads from a job hash (HMGET order); `group` is a group's
-- child (lib/groups: counted LEASED there), `trace` the enqueuer's trace
-- context (lib/create); a plain job has neither and pays nothing more. `id`
-- must name the job of the key (lib/quarantine: id_problem).
local LEASE_FIELDS = { 'state', 'resource', 'attempt', 'pipeline', 'input', 'last_step', 'not_before', 'flow',
  'group', 'trace', 'created_at', 'id' }

-- The reason and field that make a QUEUED job of `pipeline` unleasable (its
-- lease reply could not be read), or nil; `f` holds LEASE_FIELDS.
local function job_problem(f, pipeline)
  local why = attempt_problem(f[3])
  if why then return why, 'attempt' end
  if not f[4] then return 'missing', 'pipeline' end
  if f[4] ~= pipeline then
    return (name_problem(f[4]) or 'not the pipeline of its ready set (' .. pipeline .. ')'), 'pipeline'
  end
  -- text the reply can carry; whether it is JSON of the input type is the
  -- worker's to decide (it fails the attempt permanently, kind 'input', and
  -- enqueues check JSON): decoding every input here would cost every job
  if not f[5] then return 'missing', 'input' end
  why = text_problem(f[5])
  if why then return why, 'input' end
  if f[2] and f[2] ~= '' then
    why = name_problem(f[2])
    if why then return why, 'resource' end
  end
  why = text_problem(f[6])
  if why then return why, 'last_step' end
  if f[10] then
    why = text_problem(f[10])
    if why then return why, 'trace' end
  end
  return nil
end
local function lease(batch, ready_keys, delayed_keys, wake_keys, worker, ttl, lock_ttl, n, tokens, start_n,
    first_steps)
  local now = now_ms()
  local pairs_n = #ready_keys
  -- the pipeline of each ready set (its key is BASE .. ':ready:' .. name)
  local served = {}
  for p = 1, pairs_n do served[p] = string.sub(ready_keys[p], #BASE + 8) end

  -- promote due delayed jobs
  for p = 1, pairs_n do
    local due = redis.call('ZRANGEBYSCORE', delayed_keys[p], '-inf', fmt(now), 'WITHSCORES', 'LIMIT', 0, 1000)
    for i = 1, #due, 2 do
      local id = due[i]
      local prio = redis.pcall('HGET', job_key(id), 'priority')
      if type(prio) == 'table' and prio.err then
        local _, why = read_job(job_key(id), { 'priority' })
        quarantine(batch.events, id, why or 'unreadable', '(key)', 'delayed:' .. served[p], nil, nil, worker)
      else
        redis.call('ZADD', ready_keys[p], ready_score(prio, tonumber(due[i + 1])), id)
      end
      redis.call('ZREM', delayed_keys[p], id)
    end
  end

  local out = { -1, now_s(), 0, 0, 0, 0, 0 }
  local taken, scanned, parked = 0, 0, 0
  -- jobs set aside by flow control, by cause (a table only once one is); pipelines found paused
  local waits, paused = nil, 0
  -- jobs this call took a flow gate for (not yet in the lease index; a table only when used)
  local fresh = nil
  local limit = n * 4 + 16
  -- jobs taken by this call: id, job key, HMGET fields, served pipeline index
  local ids, jks, fields, pis = {}, {}, {}, {}

  -- Looks at one job popped from the ready set of pipeline `p` (`score` kept
  -- for parking it): takes it (and its resource's lock) when it is QUEUED and
  -- the lock is free; sets it aside when it cannot be read.
  local function consider(id, score, p)
    scanned = scanned + 1
    local jk = job_key(id)
    local f, bad_key = read_job(jk, LEASE_FIELDS)
    if not f then
      quarantine(batch.events, id, bad_key, '(key)', 'ready:' .. served[p], nil, nil, worker)
      return
    end
    local wrong_id = id_problem(f[12], id)
    if wrong_id then
      quarantine(batch.events, id, wrong_id, 'id', 'ready:' .. served[p], f[1], f[3], worker)
      return
    end
    if not may('lease', f[1]) then
      if f[1] and not known_state(f[1]) then
        quarantine(batch.events, id, 'not a state', 'state', 'ready:' .. served[p], nil, nil, worker)
      elseif not f[1] and (f[3] or f[4] or f[5]) then
        quarantine(batch.events, id, 'missing', 'state', 'ready:' .. served[p], nil, nil, worker)
      end
      return -- else a stale index entry; dropping it is the repair
    end
    local why, field = job_problem(f, served[p])
    local last_out = ''
    if not why and f[6] and f[6] ~= '' then
      -- a completed step without an output field returned nothing (JSON null)
      last_out = redis.call('HGET', jk, 'out:' .. f[6]) or 'null'
      if not is_utf8(last_out) then why, field = 'not UTF-8', 'out:' .. f[6] end
    end
    local gates = nil
    if not why and f[8] then
      gates = gates_of(f[8])
      if not gates then why, field = 'not a flow spec', 'flow' end
    end
    if why then
      quarantine(batch.events, id, why, field, 'ready:' .. served[p], f[1], f[3], worker)
      return
    end
    f[13] = last_out
    if gates then
      fresh = fresh or {}
      local g = flow_blocker(gates, jk, now, fresh)
      if g then
        local cause = flow_wait(g, id, jk, score, delayed_keys[p], now)
        waits = waits or { slots = 0, running = 0, rate = 0 }
        waits[cause] = waits[cause] + 1
        return
      end
    end
    local res = f[2] or ''
    if res ~= '' then
      -- taken when free, in one command (the holder it had, or nil)
      local holder = redis.call('SET', lock_key(res), id, 'NX', 'PX', lock_ttl, 'GET')
      if holder and holder ~= id then
        redis.call('ZADD', parked_key(res), score, id)
        redis.call('SADD', K_PARKED, res)
        parked = parked + 1
        return
      end
      -- a lock the job kept from an earlier attempt (stale_lock 'hold') gets a new ttl
      if holder then redis.call('SET', lock_key(res), id, 'PX', lock_ttl) end
    end
    if gates then flow_take(gates, id, jk, now, fresh) end
    taken = taken + 1
    ids[taken], jks[taken], fields[taken], pis[taken] = id, jk, f, p
  end

  -- whether every ready set was found empty (or paused)
  local drained = false
  -- the served pipelines found paused (several pipelines; a table only when one is)
  local paused_p = nil
  while taken < n and scanned < limit do
    if pairs_n == 1 then
      -- one pipeline: pop as many as are still wanted at once
      local want = math.min(n - taken, limit - scanned)
      local h = redis.call('ZPOPMIN', ready_keys[1], want)
      if #h < 2 * want then drained = true end
      if not h[1] then break end
      if string.byte(h[1]) == 123 then
        -- a pause marker heads the set: everything popped goes back
        local back = {}
        for i = 1, #h, 2 do
          back[i] = h[i + 1]
          back[i + 1] = h[i]
        end
        redis.call('ZADD', ready_keys[1], unpack(back))
        paused = paused + 1
        drained = true
        break
      end
      for i = 1, #h, 2 do consider(h[i], h[i + 1], 1) end
    else
      local best_key, best_id, best_score, best_p = nil, nil, nil, nil
      for p = 1, pairs_n do
        local h = redis.call('ZRANGE', ready_keys[p], 0, 0, 'WITHSCORES')
        if h[1] and string.byte(h[1]) == 123 then
          -- paused (a pause marker heads its ready set): counted once per call
          paused_p = paused_p or {}
          if not paused_p[p] then
            paused_p[p] = true
            paused = paused + 1
          end
        elseif h[1] then
          local s = tonumber(h[2])
          if best_score == nil or s < best_score or (s == best_score and h[1] < best_id) then
            best_key, best_id, best_score, best_p = ready_keys[p], h[1], s, p
          end
        end
      end
      if not best_key then
        drained = true
        break
      end
      redis.call('ZREM', best_key, best_id)
      consider(best_id, fmt(best_score), best_p)
    end
  end

  if taken > 0 then
    -- fencing tokens for the taken jobs in one step, in the order they were taken
    local fence = redis.call('INCRBY', K_FENCE, taken) - taken
    local deadline = fmt(now + ttl)
    local index = {}
    local now_text = now_s()
    for t = 1, taken do
      fence = fence + 1
      local id, jk, f, token = ids[t], jks[t], fields[t], tokens[t]
      local last = f[6] or ''
      local first = (t <= start_n and last == '') and first_steps[pis[t]] or ''
      if first ~= '' then
        -- started in its lease: no `started_at`, which would equal `leased_at`
        -- (every reader takes `leased_at` for a job past LEASED without one)
        redis.call('HSET', jk, 'state', 'RUNNING', 'token', token, 'fence', fmt(fence), 'worker', worker,
          'leased_at', now_text, 'updated_at', now_text, 'step', first)
        emit(batch.events, 'start', id, f[3], 'QUEUED', 'RUNNING', worker, '')
        if f[9] then group_count(batch.events, f[9], id, 'RUNNING', now) end
      else
        redis.call('HSET', jk, 'state', 'LEASED', 'token', token, 'fence', fmt(fence), 'worker', worker,
          'leased_at', now_text, 'updated_at', now_text)
        emit(batch.events, 'lease', id, f[3], 'QUEUED', 'LEASED', worker, '')
        if f[9] then group_count(batch.events, f[9], id, 'LEASED', now) end
      end
      index[2 * t - 1] = deadline
      index[2 * t] = id
      local last_out = f[13]
      local o = #out
      out[o + 1] = id
      out[o + 2] = token
      out[o + 3] = fence
      out[o + 4] = f[3]
      out[o + 5] = f[4]
      out[o + 6] = f[5]
      out[o + 7] = f[2] or ''
      out[o + 8] = last
      out[o + 9] = last_out
      -- an absent not-before is the enqueue time (lib/create)
      out[o + 10] = f[7] or f[11] or ''
      out[o + 11] = f[10] or ''
      out[o + 12] = (first ~= '') and '1' or ''
    end
    for i = 1, #index, 2000 do
      redis.call('ZADD', K_LEASES, unpack(index, i, math.min(i + 1999, #index)))
    end
  end

  local next_due = nil
  for p = 1, pairs_n do
    local h = redis.call('ZRANGE', delayed_keys[p], 0, 0, 'WITHSCORES')
    if h[1] then
      local s = tonumber(h[2])
      if next_due == nil or s < next_due then next_due = s end
    elseif drained then
      -- nothing ready and nothing delayed: every token was pushed for a job
      -- already taken. (A delayed job's token stays: it tells an idle worker
      -- about a due time that may be sooner than the one it sleeps until.)
      redis.call('DEL', wake_keys[p])
    end
  end
  if next_due then out[1] = fmt(next_due) end
  out[3] = parked
  if waits then out[4], out[5], out[6] = waits.slots, waits.running, waits.rate end
  out[7] = paused
  return out
end
