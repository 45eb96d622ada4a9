-- events: the queue's events stream. An event log says whether each event caps
-- the stream itself (`trim_each`: scripts that emit one or two events) or the
-- caller trims once at the end with trim_events (settle).
--- @include "lib/keys"

-- A new event log.
local function event_log(trim_each)
  return { trim_each = trim_each, emitted = false }
end

-- Appends one transition event to the stream.
local function emit(log, op, id, attempt, from, to, worker, reason)
  log.emitted = true
  if log.trim_each then
    redis.call('XADD', K_EVENTS, 'MAXLEN', '~', EVENTS_MAX, '*',
      'op', op, 'job', id, 'attempt', tostring(attempt), 'from', from, 'to', to,
      'by', worker or '', 'reason', reason or '')
  else
    redis.call('XADD', K_EVENTS, '*',
      'op', op, 'job', id, 'attempt', tostring(attempt), 'from', from, 'to', to,
      'by', worker or '', 'reason', reason or '')
  end
end

-- Trims the stream to its cap once, after emits of `log` that did not.
local function trim_events(log)
  if log.emitted and not log.trim_each then redis.call('XTRIM', K_EVENTS, 'MAXLEN', '~', EVENTS_MAX) end
end
