-- events: the queue's events stream. An event log says whether each event caps
-- the stream itself (`trim_each`: scripts that emit one or two events) or the
-- caller trims once at the end with trim_events (settle).
--- @include "lib/keys"

-- A new event log.
local function event_log(trim_each)
  return { trim_each = trim_each, emitted = false }
end

-- Appends one transition event to the stream. `reason` is left out when empty
-- (readers take a missing field as ''): most events of the happy path have
-- none, and they then share the field names of the stream node's first
-- entry, which Redis then does not store again.
local function emit(log, op, id, attempt, from, to, worker, reason)
  log.emitted = true
  local a = { 'op', op, 'job', id, 'attempt', tostring(attempt), 'from', from, 'to', to, 'by', worker or '' }
  if reason and reason ~= '' then
    a[13] = 'reason'
    a[14] = reason
  end
  if log.trim_each then
    redis.call('XADD', K_EVENTS, 'MAXLEN', '~', EVENTS_MAX, '*', unpack(a))
  else
    redis.call('XADD', K_EVENTS, '*', unpack(a))
  end
end

-- Trims the stream to its cap once, after emits of `log` that did not.
local function trim_events(log)
  if log.emitted and not log.trim_each then redis.call('XTRIM', K_EVENTS, 'MAXLEN', '~', EVENTS_MAX) end
end
