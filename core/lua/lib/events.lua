-- events: the queue's events stream. An event log says whether each event caps
-- the stream itself (`trim_each`: scripts that emit one or two events) or the
-- caller trims once at the end with trim_events (settle).
--
-- A log that does not trim each event (settle's) also gathers the call's
-- happy-path events (no reason, and the same `by`) into one stream entry,
-- written by trim_events (or before the next event that has a reason, so that
-- the stream keeps the order the events happened in): the first event in the
-- usual fields (op, job, attempt, from, to, by), every further one in the field
-- `more` as five space-separated words, `<op> <job> <attempt> <from> <to>`,
-- with the entry's `by` (a job id never holds whitespace; an attempt is a
-- number; ops and states are single words). Readers expand it
-- (core/src/inspect/events.rs, the `events` helper of docs/redis-keys.md).
-- Every event with a reason (everything off the happy path) keeps an entry of
-- its own. The stream's cap counts entries; so that it keeps about as many
-- events as before, such a log trims to the cap divided by the events per
-- entry it wrote (its call's average).
--- @include "lib/keys"

-- Most events one stream entry gathers (its `more` stays a few KB at most).
local EVENTS_PER_ENTRY = 64

-- A new event log.
local function event_log(trim_each)
  return { trim_each = trim_each, emitted = false, held = nil, held_by = nil, held_n = 0, entries = 0, events = 0,
    plain_by = nil }
end

-- Writes the events `log` gathered as one stream entry.
local function flush_held(log)
  local h, by = log.held, log.held_by
  if not h then return end
  log.entries, log.events = log.entries + 1, log.events + log.held_n
  log.held, log.held_by, log.held_n = nil, nil, 0
  local a = { 'op', h[1], 'job', h[2], 'attempt', h[3], 'from', h[4], 'to', h[5], 'by', by }
  if #h > 5 then
    a[13] = 'more'
    a[14] = table.concat(h, ' ', 6)
  end
  redis.call('XADD', K_EVENTS, '*', unpack(a))
end

-- Appends one transition event to the stream. `reason` is left out when empty
-- (readers take a missing field as ''): most events of the happy path have
-- none, and they then share the field names of the stream node's first
-- entry, which Redis then does not store again.
local function emit(log, op, id, attempt, from, to, worker, reason)
  log.emitted = true
  local by = worker or ''
  if not log.trim_each then
    -- (`plain_by`: the last `by` found without whitespace, so that a call's
    -- events from one worker search it once)
    if (not reason or reason == '') and (by == log.plain_by or not string.find(by, '%s')) then
      log.plain_by = by
      if log.held and (log.held_by ~= by or log.held_n >= EVENTS_PER_ENTRY) then flush_held(log) end
      local h = log.held
      if not h then
        h = {}
        log.held, log.held_by = h, by
      end
      local n = log.held_n * 5
      h[n + 1], h[n + 2], h[n + 3], h[n + 4], h[n + 5] = op, id, tostring(attempt), from, to
      log.held_n = log.held_n + 1
      return
    end
    -- an event with a reason: the gathered ones happened before it
    flush_held(log)
  end
  local a = { 'op', op, 'job', id, 'attempt', tostring(attempt), 'from', from, 'to', to, 'by', by }
  if reason and reason ~= '' then
    a[13] = 'reason'
    a[14] = reason
  end
  if log.trim_each then
    redis.call('XADD', K_EVENTS, 'MAXLEN', '~', EVENTS_MAX, '*', unpack(a))
  else
    log.entries, log.events = log.entries + 1, log.events + 1
    redis.call('XADD', K_EVENTS, '*', unpack(a))
  end
end

-- Writes the gathered events and trims the stream to its cap once, after
-- emits of `log` that did not.
local function trim_events(log)
  if log.trim_each then return end
  flush_held(log)
  if not log.emitted then return end
  local cap = tonumber(EVENTS_MAX) or 0
  if log.events > log.entries then cap = math.ceil(cap * log.entries / log.events) end
  redis.call('XTRIM', K_EVENTS, 'MAXLEN', '~', cap)
end
