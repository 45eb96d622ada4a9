-- cancel: cancelling a QUEUED job at once, for `cancel` (one job) and
-- `group_cancel` (a group's children, a batch per call), and telling the
-- holder of a LEASED or RUNNING job of its cancel request at once.
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/events"
--- @include "lib/locks"
--- @include "lib/flow"
--- @include "lib/jobs"
--- @include "lib/attempts"
--- @include "lib/groups"

-- Cancels QUEUED job `id` (hash `jk`, attempt `attempt`) at once: out of its
-- ready and delayed sets (`k_ready`, `k_delayed`), out of parked set `pk` of
-- its resource `res` ('' for none; a free resource goes to its next waiter:
-- this job may have been the one a release handed it), out of its flow gates'
-- waiting sets (`flow`); the attempt recorded CANCELLED with `reason` by
-- `who`; its group and dependents told when it has `links`.
local function cancel_queued(events, jk, id, attempt, res, flow, links, k_ready, k_delayed, pk, reason, who, now)
  redis.call('ZREM', k_ready, id)
  redis.call('ZREM', k_delayed, id)
  if res ~= '' then
    redis.call('ZREM', pk, id)
    if redis.call('EXISTS', lock_key(res)) == 0 then
      unpark_at(pk, res)
    elseif redis.call('EXISTS', pk) == 0 then
      redis.call('SREM', K_PARKED, res)
    end
  end
  flow_forget(flow, id)
  redis.call('HSET', jk, 'cancel_reason', reason, 'cancel_at', fmt(now), 'cancel_by', who)
  append_attempt(id, attempt, attempt_record(jk, 'CANCELLED', now, nil))
  make_terminal(jk, id, 'CANCELLED', now)
  emit(events, 'cancel', id, attempt, 'QUEUED', 'CANCELLED', who, reason)
  if links then links_moved(events, jk, id, 'CANCELLED', now) end
end

-- Tells the workers subscribed to the queue's cancel channel (`B:cancels`,
-- named from KEYS[1]) that job `id`, held by one of them, has a cancel request
-- just recorded: its holder stops the running step now instead of at its next
-- renewal (which still reports the request when this message is missed). The
-- message is only a hint: the holder reads the job's `cancel_reason` and token
-- before it stops anything. PUBLISH, not SPUBLISH: it works on one server and
-- on a cluster alike (there it reaches every node), and cancels are rare.
local function push_cancel(id)
  redis.call('PUBLISH', BASE .. ':cancels', id)
end
