-- groups: groups of jobs (counts of the children per state, sealing, a
-- completion job enqueued once) and dependencies between jobs (a dependent
-- waits, QUEUED, in the queue's awaiting index instead of a ready set, until
-- its parents SUCCEEDED). A job that takes part in either has `links = '1'`
-- in its hash, and a child its `group`; every script that moves a job reads
-- those fields with the fields it reads anyway (the same HMGET) and calls
-- links_moved or group_count only when they are set, so jobs without links
-- pay nothing.
--
-- Keys (all derived from the queue's base, so one hash tag, one slot):
--   group:<g>            hash: id, name, status (open | sealed | blocked |
--                        completed | cancelled), policy (all_succeeded |
--                        all_terminal), total, one count per state a child may
--                        be in (QUEUED, LEASED, RUNNING, SUCCEEDED, FAILED,
--                        CANCELLED, STALE, QUARANTINED: their sum is total),
--                        purged (children retention deleted), outcome, fired,
--                        completion_* (the completion job's id, pipeline, input,
--                        priority, max_attempts, stale_lock, resource, flow,
--                        trace;
--                        completion_purged once retention deleted it),
--                        created_at, sealed_at, settled_at, cancel_reason,
--                        cancel_next / retry_next (the cursor of a group cancel
--                        or retry under way: the index of the next child)
--   group:<g>:children   zset  child id -> when it was added (ms)
--   group:<g>:states     hash  child id -> the state it is counted in
--   group:<g>:dependents set   jobs waiting for the group
--   groups               zset  group name -> created at (ms)
--   group_of             hash  child id -> its group (read where the job hash
--                        may be unreadable: quarantine, retention)
--   dependents:<id>      set   jobs waiting for job <id>
--   awaiting             zset  dependent job id -> enqueued at (ms): QUEUED, not leasable
-- Job fields: links '1'; group <g>; also_groups (other groups that counted it,
--   SUCCEEDED, when it was enqueued into them); deps 'j:<id> g:<name> ...' (its parents);
--   deps_left (parents not yet settled for it); on_parent_failure cancel | run;
--   completes <g> (on a completion job).
-- A group is deleted (every key above that is its own) once it is settled
-- (completed, blocked or cancelled), retention deleted all its children and
-- its completion job (if it fired): group_gc.
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/events"
--- @include "lib/wake"
--- @include "lib/ready"
--- @include "lib/moves"
--- @include "lib/jobs"
--- @include "lib/attempts"
--- @include "lib/search"
--- @include "lib/new_job"

local function group_key(g) return BASE .. ':group:' .. g end
local function dependents_key(id) return BASE .. ':dependents:' .. id end
local function awaiting_key() return BASE .. ':awaiting' end
local function groups_key() return BASE .. ':groups' end
local function group_of_key() return BASE .. ':group_of' end

-- Whether a group is done with a child counted in `state` (a terminal state,
-- or QUARANTINED: a child that did not succeed until it is repaired); the
-- other states hold the group open.
local function group_done(state)
  return state == 'QUARANTINED' or (state and TERMINAL[state]) or false
end

-- The reply of a refused enqueue: its first element can be no job id (ids
-- have no braces), so a reply is never read as the other kind.
local REFUSED = '{refused}'

-- Emits an event about group `g` (its id in the `job` field).
local function group_event(events, gk, op, to, by, reason)
  local id = redis.call('HGET', gk, 'id') or ''
  emit(events, op, id, 1, '', to, by, reason)
end

local links_moved -- defined below (the cascade of a cancelled dependent calls it again)

-- Releases waiting job `id` (hash `jk`) into its ready (or delayed) set.
local function release_waiting(events, jk, id, now, why)
  local d = redis.call('HMGET', jk, 'pipeline', 'priority', 'not_before', 'created_at', 'attempt')
  redis.call('ZREM', awaiting_key(), id)
  if not d[1] then return end
  local nb = tonumber(d[3] or '') or 0
  if nb > now then
    redis.call('ZADD', delayed_key(d[1]), fmt(nb), id)
  else
    redis.call('ZADD', ready_key(d[1]), ready_score(d[2], tonumber(d[4]) or now), id)
  end
  redis.call('HSET', jk, 'deps_left', '0', 'updated_at', fmt(now))
  emit(events, 'deps', id, d[5] or '1', 'QUEUED', 'QUEUED', '', why)
  wake(wake_key(d[1]))
end

-- Cancels waiting job `id` (QUEUED in the awaiting index) because a parent ended.
local function cancel_waiting(events, jk, id, now, why)
  local d = redis.call('HMGET', jk, 'attempt')
  redis.call('ZREM', awaiting_key(), id)
  redis.call('HSET', jk, 'cancel_reason', why, 'cancel_at', fmt(now), 'cancel_by', 'dependencies')
  append_attempt(id, d[1], attempt_record(jk, 'CANCELLED', now, { reason = why }))
  make_terminal(jk, id, 'CANCELLED', now)
  emit(events, 'cancel', id, d[1] or '1', 'QUEUED', 'CANCELLED', 'dependencies', why)
  links_moved(events, jk, id, 'CANCELLED', now)
end

-- Tells the jobs of set `dk` that parent `label` ended `outcome` (SUCCEEDED,
-- or FAILED / CANCELLED), once: the set is deleted.
local function notify_dependents(events, dk, label, outcome, now)
  local deps = redis.call('SMEMBERS', dk)
  if #deps == 0 then return end
  redis.call('DEL', dk)
  for _, dep in ipairs(deps) do
    local djk = job_key(dep)
    local d = redis.call('HMGET', djk, 'state', 'on_parent_failure')
    if d[1] == 'QUEUED' and redis.call('ZSCORE', awaiting_key(), dep) then
      if outcome == 'SUCCEEDED' or d[2] == 'run' then
        if redis.call('HINCRBY', djk, 'deps_left', -1) <= 0 then
          release_waiting(events, djk, dep, now, 'parents settled (last: ' .. label .. ' ' .. outcome .. ')')
        end
      else
        cancel_waiting(events, djk, dep, now, 'parent ' .. label .. ' ended ' .. outcome)
      end
    end
  end
end

-- Deletes group `g` (hash `gk`) and its keys once nothing of it is left: it
-- is settled (completed, blocked or cancelled), retention deleted every child
-- and its completion job, if it fired. A group that never had a child or a
-- completion job is kept (nothing of it is ever purged). True when deleted.
local function group_gc(g, gk)
  local h = redis.call('HMGET', gk, 'status', 'total', 'purged', 'fired', 'completion_purged')
  if h[1] ~= 'completed' and h[1] ~= 'blocked' and h[1] ~= 'cancelled' then return false end
  local total = tonumber(h[2] or '') or 0
  if (tonumber(h[3] or '') or 0) < total then return false end
  if h[4] == '1' then
    if h[5] ~= '1' then return false end
  elseif total == 0 then
    return false
  end
  redis.call('DEL', gk, gk .. ':children', gk .. ':states', gk .. ':dependents')
  redis.call('ZREM', groups_key(), g)
  return true
end

-- Enqueues group `g`'s completion job, once, as every new job is created
-- (lib/new_job write_new_job: its search index members, its input window, the
-- fields at their default left out), with the pipeline's resource and
-- flow-control gates it was declared with, its trace context and a
-- `completes` field naming the group.
local function fire_completion(events, g, gk, now)
  local c = redis.call('HMGET', gk, 'completion_id', 'completion_pipeline', 'completion_input',
    'completion_priority', 'completion_max_attempts', 'completion_stale_lock', 'fired', 'completion_resource',
    'completion_flow', 'completion_trace')
  if not c[1] or c[1] == '' or c[7] == '1' or not c[2] or c[2] == '' then return end
  redis.call('HSET', gk, 'fired', '1')
  local id, p = c[1], c[2]
  local jk = job_key(id)
  if redis.call('EXISTS', jk) == 1 then
    -- not this group's job: retention of the group does not wait for it
    redis.call('HSET', gk, 'completion_purged', '1')
    return
  end
  -- the JOB_VALUES layout of lib/create and lib/new_job: no input key, delay or re-run
  local v = { id, c[3] or '', '', c[8] or '', c[4] or '0', '0', c[5] or '1', c[6] or 'hold', '0', c[9] or '',
    c[10] or '' }
  local sb = search_batch()
  write_new_job(events, jk, ready_key(p), delayed_key(p), p, v, 0, '', 'completion of group ' .. g, sb,
    { 'completes', g })
  flush_search(sb)
  wake(wake_key(p))
end

-- Decides whether group `g` is settled and acts on it: a sealed group whose
-- children are all done with (SUCCEEDED, FAILED, CANCELLED, QUARANTINED)
-- completes (its completion job enqueued, its dependents told) when every
-- child SUCCEEDED or the policy is all_terminal, and is blocked otherwise (a
-- retried or repaired child may unblock it). A child QUEUED, LEASED, RUNNING
-- or STALE holds it open.
local function group_check(events, g, gk, now)
  local h = redis.call('HMGET', gk, 'status', 'policy', 'total', 'SUCCEEDED', 'FAILED', 'CANCELLED', 'QUARANTINED')
  local status = h[1]
  if status ~= 'sealed' and status ~= 'blocked' then return end
  local total, s = tonumber(h[3]) or 0, tonumber(h[4]) or 0
  local ended = s + (tonumber(h[5]) or 0) + (tonumber(h[6]) or 0) + (tonumber(h[7]) or 0)
  if ended < total then
    if status == 'blocked' then redis.call('HSET', gk, 'status', 'sealed', 'outcome', '') end
    return
  end
  local outcome = (s == total) and 'SUCCEEDED' or 'FAILED'
  if s == total or h[2] == 'all_terminal' then
    redis.call('HSET', gk, 'status', 'completed', 'outcome', outcome, 'settled_at', fmt(now))
    group_event(events, gk, 'group_complete', outcome, '', 'group ' .. g .. ' settled: ' .. s .. ' of ' .. total .. ' succeeded')
    fire_completion(events, g, gk, now)
  else
    if status == 'blocked' then return end
    redis.call('HSET', gk, 'status', 'blocked', 'outcome', outcome, 'settled_at', fmt(now))
    group_event(events, gk, 'group_blocked', 'FAILED', '',
      'group ' .. g .. ': ' .. (total - s) .. ' of ' .. total .. ' children did not succeed; completion held')
  end
  notify_dependents(events, gk .. ':dependents', 'group ' .. g, outcome, now)
  group_gc(g, gk)
end

-- Counts child `id` of group `g` in state `to` instead of the state it was
-- counted in (each child once, by its current attempt: the counts always sum
-- to the group's total), and checks the group when the child enters or
-- leaves a state that settles it.
local function group_count(events, g, id, to, now)
  local gk = group_key(g)
  local sk = gk .. ':states'
  local old = redis.call('HGET', sk, id)
  if old == to then return end
  if old then
    redis.call('HINCRBY', gk, old, -1)
  elseif redis.call('EXISTS', gk) == 0 then
    return -- the group was deleted (retention): nothing to count in
  end
  redis.call('HINCRBY', gk, to, 1)
  redis.call('HSET', sk, id, to)
  if group_done(old) or group_done(to) then group_check(events, g, gk, now) end
end

-- The parents of `deps` ('j:<id> g:<name> ...') that are not settled for a
-- dependent: returns the count, the first parent that ended FAILED or
-- CANCELLED (or a group that did not succeed) and its state, and a list of
-- the pending parents as {dependents-set key, job id or false for a group}. `run`: a failed parent counts as
-- settled (on_parent_failure = run).
local function pending_parents(deps, run)
  local pending, keys, bad, bad_state = 0, {}, nil, nil
  for ref in string.gmatch(deps or '', '%S+') do
    local kind, name = string.sub(ref, 1, 2), string.sub(ref, 3)
    local state
    if kind == 'g:' then
      local h = redis.call('HMGET', group_key(name), 'status', 'outcome')
      if h[1] == 'completed' and h[2] == 'SUCCEEDED' then
        state = 'SUCCEEDED'
      elseif h[1] == 'completed' or h[1] == 'blocked' then
        state = 'FAILED'
      elseif h[1] == 'cancelled' then
        state = 'CANCELLED'
      else
        state = h[1] and 'OPEN' or false
      end
      if state == 'OPEN' then keys[#keys + 1] = { group_key(name) .. ':dependents', false } end
    else
      state = redis.call('HGET', job_key(name), 'state')
      if state and not TERMINAL[state] then keys[#keys + 1] = { dependents_key(name), name } end
    end
    if not state then
      bad, bad_state = ref, 'missing'
    elseif state ~= 'SUCCEEDED' then
      if TERMINAL[state] then
        if not run and not bad then bad, bad_state = ref, state end
      else
        pending = pending + 1
      end
    end
  end
  return pending, bad, bad_state, keys
end

-- Makes job `id` (hash `jk`, QUEUED, in no ready set yet) wait for its
-- pending parents: returns true when it waits (in the awaiting index).
local function wait_for_parents(jk, id, deps, run, now)
  local pending, _, _, keys = pending_parents(deps, run)
  if pending == 0 then return false end
  for _, k in ipairs(keys) do
    redis.call('SADD', k[1], id)
    if k[2] then redis.call('HSET', job_key(k[2]), 'links', '1') end
  end
  redis.call('HSET', jk, 'deps_left', pending)
  redis.call('ZADD', awaiting_key(), fmt(now), id)
  return true
end

-- What a script calls after it moved job `id` (hash `jk`, `links` set) to
-- `to`: the job's group counts it, and when it settled its dependents are
-- told (released, or cancelled); a new attempt of a dependent (`to` QUEUED)
-- waits again for parents that are not SUCCEEDED. (A move that concerns only
-- the group's counts, a lease, a start, a hand-back, calls group_count.)
links_moved = function(events, jk, id, to, now)
  local f = redis.call('HMGET', jk, 'group', 'deps', 'on_parent_failure', 'pipeline')
  if TERMINAL[to] then redis.call('ZREM', awaiting_key(), id) end
  if f[1] and f[1] ~= '' then group_count(events, f[1], id, to, now) end
  if TERMINAL[to] then
    notify_dependents(events, dependents_key(id), id, to, now)
  elseif to == 'QUEUED' and f[2] and f[2] ~= '' and f[4] then
    if wait_for_parents(jk, id, f[2], f[3] == 'run', now) then
      redis.call('ZREM', ready_key(f[4]), id)
      redis.call('ZREM', delayed_key(f[4]), id)
    end
  end
end

-- Checks enqueue's link arguments (group, deps, on_parent_failure) and the
-- jobs of the call that exist already and would join the group (`joining`)
-- before any write: nil, or the refusal reply ({REFUSED, code, values...}).
-- Cycles: parents exist before their dependent, and a job with parents joins
-- no group that has dependents (nor a group it waits for itself): a cycle
-- through a group needs both, so none can be built.
local function links_refusal(group, deps, policy, joining)
  if policy ~= 'cancel' and policy ~= 'run' then return { REFUSED, 'BAD_LINKS', 'on_parent_failure', policy or '' } end
  local gk = group_key(group)
  if group ~= '' then
    local status = redis.call('HGET', gk, 'status')
    if not status then return { REFUSED, 'GROUP_NOT_FOUND', group } end
    if status ~= 'open' then return { REFUSED, 'GROUP_SEALED', group, status } end
  end
  local _, bad, bad_state = pending_parents(deps, policy == 'run')
  if bad then
    if bad_state == 'missing' then return { REFUSED, 'PARENT_NOT_FOUND', bad } end
    return { REFUSED, 'PARENT_ENDED', bad, bad_state }
  end
  if group == '' then return nil end
  local waited = nil
  -- whether a job with parents `d` joining the group could close a cycle
  local function closes_cycle(d)
    if not d or d == '' then return false end
    if string.find(' ' .. d .. ' ', ' g:' .. group .. ' ', 1, true) then return true end
    if waited == nil then waited = redis.call('EXISTS', gk .. ':dependents') == 1 end
    return waited
  end
  if closes_cycle(deps) then return { REFUSED, 'CYCLE', group, '' } end
  for _, id in ipairs(joining) do
    if redis.call('ZSCORE', K_QUARANTINE, id) then
      return { REFUSED, 'CANNOT_JOIN', id, 'it is in the quarantine (repair or purge it first)' }
    end
    local h = redis.pcall('HMGET', job_key(id), 'group', 'deps', 'state')
    if h.err then return { REFUSED, 'CANNOT_JOIN', id, 'its key is not a job hash' } end
    if h[3] and not STATES[h[3]] then return { REFUSED, 'CANNOT_JOIN', id, 'its state cannot be read' } end
    if h[1] and h[1] ~= '' and h[1] ~= group and h[3] ~= 'SUCCEEDED' then
      return { REFUSED, 'CANNOT_JOIN', id, 'it is a child of group ' .. h[1] .. ' and ' .. (h[3] or 'gone') }
    end
    if h[1] ~= group and closes_cycle(h[2]) then return { REFUSED, 'CYCLE', group, id } end
  end
  return nil
end

-- Adds child `id` (state `state`) to group `group`: children, state count, total.
local function add_child(gk, id, state, now)
  redis.call('ZADD', gk .. ':children', fmt(now), id)
  redis.call('HINCRBY', gk, 'total', 1)
  redis.call('HINCRBY', gk, state, 1)
  redis.call('HSET', gk .. ':states', id, state)
end

-- Links a job enqueue just created (QUEUED, in no index yet) to its group and
-- parents; true when it waits for parents (enqueue then puts it in no ready set).
local function link_new_job(jk, id, group, deps, policy, now)
  redis.call('HSET', jk, 'links', '1')
  if group ~= '' then
    redis.call('HSET', jk, 'group', group)
    redis.call('HSET', group_of_key(), id, group)
    add_child(group_key(group), id, 'QUEUED', now)
  end
  if deps == '' then return false end
  redis.call('HSET', jk, 'deps', deps, 'on_parent_failure', policy)
  return wait_for_parents(jk, id, deps, policy == 'run', now)
end

-- Adds job `id`, which an enqueue with a group answered instead of creating
-- it ('existing', 'succeeded'; links_refusal allowed it), to the group: it is
-- counted in the state it is in. A job is the child of one group: one that
-- SUCCEEDED as another group's child (it never moves again) is counted
-- SUCCEEDED and listed in its `also_groups` field, for retention to tell
-- this group too when it deletes the job; one retention deleted already
-- (only its SUCCEEDED outcome is left) counts as SUCCEEDED and purged. A job
-- already in the group is left as it is; its parents are its own (an
-- enqueue's depends_on applies to the jobs it creates).
local function link_existing_job(events, id, group, now)
  local jk, gk = job_key(id), group_key(group)
  local h = redis.call('HMGET', jk, 'state', 'group', 'also_groups')
  if h[2] == group then return end
  local state = h[1]
  if not state then
    state = 'SUCCEEDED'
    redis.call('HINCRBY', gk, 'purged', 1)
  elseif h[2] and h[2] ~= '' then
    if string.find(' ' .. (h[3] or '') .. ' ', ' ' .. group .. ' ', 1, true) then return end
    redis.call('HSET', jk, 'also_groups', ((h[3] and h[3] ~= '') and (h[3] .. ' ') or '') .. group)
  else
    redis.call('HSET', jk, 'links', '1', 'group', group)
    redis.call('HSET', group_of_key(), id, group)
  end
  add_child(gk, id, state, now)
  group_event(events, gk, 'group_join', state, '', 'job ' .. id .. ' (' .. state .. ', enqueued before) joined group ' .. group)
end

-- Counts job `id` QUARANTINED in its group, if it has one (the job hash may be
-- unreadable: the group is looked up in group_of).
local function group_quarantined(events, id, now)
  local g = redis.call('HGET', group_of_key(), id)
  if g then group_count(events, g, id, 'QUARANTINED', now) end
end

-- Retention (or a quarantine purge) deleted job `id`, a child of group `g`
-- (and of the groups listed in `also`, its `also_groups` field) and/or the
-- completion job of group `c` (false for none): each group counts it and is
-- deleted once nothing of it is left (group_gc).
local function group_job_deleted(id, g, c, also)
  if g and g ~= '' then redis.call('HDEL', group_of_key(), id) end
  for name in string.gmatch((g or '') .. ' ' .. (also or ''), '%S+') do
    local gk = group_key(name)
    if redis.call('EXISTS', gk) == 1 then
      redis.call('HINCRBY', gk, 'purged', 1)
      group_gc(name, gk)
    end
  end
  if c and c ~= '' then
    local gk = group_key(c)
    if redis.call('HGET', gk, 'completion_id') == id then
      redis.call('HSET', gk, 'completion_purged', '1')
      group_gc(c, gk)
    end
  end
end

-- Whether `name` may name a group (it is part of key names and of a job's
-- `deps` field): 1 to 128 letters, digits, '.', '_', '-'.
local function group_name_ok(name)
  return type(name) == 'string' and #name >= 1 and #name <= 128 and not string.find(name, '[^%w%._%-]')
end
