-- retention: deleting terminal jobs (and their attempt records) beyond the
-- queue's retention policy, oldest first, a bounded number per call, with
-- their search index members (lib/search).
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/attempts"
--- @include "lib/groups"
--- @include "lib/search"

-- Deletes job `jk` (`id`), its attempt records and process step records, and adds its search index
-- members to `members`. A job key of another type (overwritten by hand) is
-- deleted too: reading it must not fail the call.
-- A child or completion job of a group tells the group (lib/groups: the
-- fields come with the attempt, in the same HMGET, as the indexed fields do).
local function delete_job(jk, id, members)
  local f = redis.pcall('HMGET', jk, 'attempt', 'group', 'completes', 'also_groups', 'input_key', 'resource',
    'window', 'flow')
  local attempt, g, c, also = nil, nil, nil, nil
  if type(f) ~= 'table' or f.err then
    g = redis.call('HGET', group_of_key(), id)
  else
    attempt, g, c, also = f[1], f[2], f[3], f[4]
    for _, m in ipairs(search_members(id, f[5], search_resource(f[6], f[8]), f[7])) do members[#members + 1] = m end
  end
  local n = type(attempt) == 'string' and tonumber(attempt) or 0
  if n > 0 then
    local fields = {}
    for i = 1, math.min(n, 1000) do fields[i] = attempt_field(id, i) end
    redis.call('HDEL', K_ATTEMPTS, unpack(fields))
  end
  -- the job's process step records and outputs list go with it (lib/keys:
  -- proc:<id>, out:<id>; absent for most jobs)
  redis.call('DEL', jk, BASE .. ':proc:' .. id, out_key(id))
  if g or c then group_job_deleted(id, g, c, also) end
end

-- Deletes the jobs `ids` and their `done` entries (one ZREM per 1000) and their
-- search index members (one ZREM); returns how many.
local function delete_done(ids)
  if #ids == 0 then return 0 end
  local members = {}
  for _, id in ipairs(ids) do delete_job(job_key(id), id, members) end
  unsearch(members)
  for i = 1, #ids, 1000 do
    redis.call('ZREM', K_DONE, unpack(ids, i, math.min(i + 999, #ids)))
  end
  return #ids
end

-- Deletes terminal jobs beyond the retention policy, oldest first; at most
-- `budget` jobs (callers bound it, so that no call is slow). Costs one command
-- per limit in force when nothing is beyond it.
local function purge(now, budget)
  local removed = 0
  if budget <= 0 then return 0 end
  if KEEP_AGE_MS > 0 then
    removed = delete_done(redis.call('ZRANGEBYSCORE', K_DONE, '-inf', fmt(now - KEEP_AGE_MS), 'LIMIT', 0, budget))
  end
  if KEEP_COUNT > 0 and removed < budget then
    local excess = redis.call('ZCARD', K_DONE) - KEEP_COUNT
    if excess > budget - removed then excess = budget - removed end
    if excess > 0 then
      removed = removed + delete_done(redis.call('ZRANGE', K_DONE, 0, excess - 1))
    end
  end
  return removed
end
