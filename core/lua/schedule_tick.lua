-- schedule_tick: claims a schedule's due windows on Redis time, exactly once,
-- and enqueues their jobs in the same call.
-- KEYS[10..12] as lib/schedule says; KEYS[13] ready:<pipeline>  KEYS[14] delayed:<pipeline>
-- KEYS[15] wake:<pipeline>; KEYS[16..] job keys, one per window.
-- ARGV[4] queue  ARGV[5] pipeline  ARGV[6] schedule name  ARGV[7] definition digest
-- ARGV[8] mode: 'tick' (the scheduler) or 'trigger' (an operator, one window)
-- ARGV[9] expected cursor (ms; tick mode)  ARGV[10] catch-up: all | latest | none
-- ARGV[11] overlap: allow | skip | wait  ARGV[12] grace (ms)
-- ARGV[13] next due after the last window (ms, '' when the schedule ends there)
-- ARGV[14] due windows before the first one that the catch-up left out  ARGV[15] by
-- ARGV[16] window count n, then per window WINDOW_VALUES (13) values: start (ms),
--   end (ms), and the job's JOB_VALUES (11) values as lib/create reads them
--   (its flow-control gates and trace among them), so a scheduled job is made as an enqueued one is.
--
-- Tick mode: the windows are the caller's computation from the cursor it last
-- saw (ARGV[9]); when Redis holds another cursor (another replica claimed
-- them), nothing is written and the reply is {'MOVED', cursor, next due}. Of
-- the windows, the leading ones whose end is at or before Redis TIME are due;
-- none due is {'EARLY', now}. Each due window, oldest first, is claimed:
-- skipped while paused; under catch-up 'latest' all but the last are skipped;
-- under 'none' a window later than the grace is missed; otherwise its job is
-- created (idempotent on the input key: a window a trigger already enqueued
-- is not enqueued twice), unless the previous window's job is not terminal and
-- the overlap policy is 'skip' (skipped) or 'wait' (the window is held as
-- delayed, the cursor stops before it, the reply's status is 'WAITING').
-- The cursor then moves to the end of the last claimed window, the counters
-- and the ticks stream record every window, and the schedules index holds the
-- next due time.
-- Trigger mode: one window, enqueued whatever the cursor, pause or overlap
-- (idempotent on the input key); the cursor does not move.
-- Reply: {'OK' | 'WAITING', cursor, next due or '', now, then per claimed window:
--   start (ms), outcome, job id or '', enqueue status or ''};
--   {'UNREGISTERED'} when Redis has no such schedule; {'VERSION', digest} when
--   it was registered with another definition (tick mode).
--- @include "lib/keys"
--- @include "lib/args"
--- @include "lib/wake"
--- @include "lib/create"
--- @include "lib/search"
--- @include "lib/schedule"
--- @include "lib/flow"
--- @include "gen/moves"
-- The values of one window in ARGV: its start, its end, then its job's.
local WINDOW_VALUES = 2 + JOB_VALUES
local S = 'schedule_tick'
local bad = common_args(S)
if bad then return bad end
local K_SCHEDULE, K_SCHEDULES, K_TICKS = KEYS[10], KEYS[11], KEYS[12]
local k_ready, k_delayed, k_wake = KEYS[13], KEYS[14], KEYS[15]
local queue, pipeline, name, digest, mode = ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
for _, c in ipairs({ { queue, 'queue' }, { pipeline, 'pipeline' }, { name, 'name' }, { digest, 'digest' } }) do
  if c[1] == nil or c[1] == '' then return bad_arg(S, c[2], c[1]) end
end
if mode ~= 'tick' and mode ~= 'trigger' then return bad_arg(S, 'mode', mode) end
local forged = forged_schedule_keys(KEYS, name)
if forged then return forged end
local CATCH_UPS, OVERLAPS = { all = true, latest = true, none = true }, { allow = true, skip = true, wait = true }
local expected, catch_up, overlap = ARGV[9], ARGV[10], ARGV[11]
if mode == 'tick' and not int_value(expected, 0) then return bad_arg(S, 'expected cursor', expected) end
if not CATCH_UPS[catch_up] then return bad_arg(S, 'catch-up policy', catch_up) end
if not OVERLAPS[overlap] then return bad_arg(S, 'overlap policy', overlap) end
local grace = int_value(ARGV[12], 0)
if not grace then return bad_arg(S, 'grace', ARGV[12]) end
local next_due = ARGV[13]
if next_due ~= '' and not int_value(next_due, 0) then return bad_arg(S, 'next due', next_due) end
local left_out = int_value(ARGV[14], 0)
if not left_out then return bad_arg(S, 'left-out count', ARGV[14]) end
local by = ARGV[15] or ''
local n = int_value(ARGV[16], 1)
if not n or (mode == 'trigger' and n ~= 1) then return bad_arg(S, 'window count', ARGV[16]) end
if #ARGV ~= 16 + WINDOW_VALUES * n or #KEYS ~= 15 + n then
  return redis.error_reply('BAD_ARG ' .. S .. ': ' .. n .. ' windows do not match ' .. #KEYS .. ' keys and ' .. #ARGV .. ' values')
end
local starts, ends = {}, {}
for i = 1, n do
  local a = 16 + (i - 1) * WINDOW_VALUES
  starts[i], ends[i] = int_value(ARGV[a + 1], 0), int_value(ARGV[a + 2], 0)
  if not starts[i] or not ends[i] or starts[i] >= ends[i] then
    return bad_arg(S, 'window ' .. i, (ARGV[a + 1] or '') .. '..' .. (ARGV[a + 2] or ''))
  end
  if i > 1 and starts[i] ~= ends[i - 1] then return bad_arg(S, 'window ' .. i .. ' start (not contiguous)', ARGV[a + 1]) end
  local bad_job = job_args_bad(S, ARGV, a + 2, i)
  if bad_job then return bad_job end
end
-- the keys given are the pipeline's, and each window's job's is named by its id
forged = key_check.pipeline(KEYS, 13, { 'ready', 'delayed', 'wake' }, pipeline)
if forged then return forged end
for i = 1, n do
  forged = key_check.key(15 + i, KEYS[15 + i], job_key(ARGV[16 + (i - 1) * WINDOW_VALUES + 3]))
  if forged then return forged end
end
if mode == 'tick' then
  local first_ok = (left_out == 0 and starts[1] == tonumber(expected)) or (left_out > 0 and starts[1] > tonumber(expected))
  if not first_ok then return bad_arg(S, 'window 1 start (not after the cursor)', ARGV[17]) end
end

local h = redis.call('HMGET', K_SCHEDULE, 'digest', 'cursor', 'paused', 'last_job', 'waiting', 'next_due', 'failures')
if not h[1] then return { 'UNREGISTERED' } end
local now = now_ms()
local events = event_log(true)
local sb = search_batch()
local out = {}
local created = 0

-- the outcome of creating window i's job: outcome, job id, enqueue status
local function enqueue_window(i, outcome)
  local a = 16 + (i - 1) * WINDOW_VALUES
  -- the window in UTC RFC 3339 (the events' reader shows it as it is)
  local why = 'schedule ' .. name .. ' window ' .. utc_of(ARGV[a + 1]) .. '..' .. utc_of(ARGV[a + 2])
  local id, status, _, made = create_job(events, KEYS[15 + i], k_ready, k_delayed, queue, pipeline, ARGV, a + 2, why, sb)
  if made then created = created + 1 end
  return outcome, id, status
end

if mode == 'trigger' then
  local outcome, id, status = enqueue_window(1, 'triggered')
  record_tick(K_TICKS, outcome, ARGV[17], ARGV[18], id, '', by, status)
  redis.call('HINCRBY', K_SCHEDULE, 'triggered', 1)
  flush_search(sb)
  if created > 0 then wake(k_wake, created) end
  return { 'OK', h[2] or '', h[6] or '', fmt(now), ARGV[17], outcome, id, status }
end

if h[1] ~= digest then return { 'VERSION', h[1] } end
if h[2] ~= expected then return { 'MOVED', h[2] or '', h[6] or '' } end
local due = 0
while due < n and ends[due + 1] <= now do due = due + 1 end
if due == 0 then return { 'EARLY', fmt(now) } end

local paused = h[3] == '1'
local last_job = h[4] or ''
local counts = { enqueued = 0, caught_up = 0, skipped = 0, missed = 0, delayed = 0 }
local status_reply = 'OK'
local claimed = 0
-- the start of the window held by the 'wait' overlap policy in this call, or ''
local held = ''
local lag_sum, lag_n = 0, 0
if left_out > 0 then
  -- the windows the caller left out, as one record: superseded under 'latest',
  -- beyond the bound under 'all', late under 'none'
  if catch_up == 'latest' then
    record_tick(K_TICKS, 'skipped', expected, ARGV[17], '', '', by, windows_text(left_out) .. ': catch-up latest, a later window is due')
    counts.skipped = counts.skipped + left_out
  else
    record_tick(K_TICKS, 'missed', expected, ARGV[17], '', '', by, windows_text(left_out) .. ' before the catch-up bound')
    counts.missed = counts.missed + left_out
  end
end
for i = 1, due do
  local a = 16 + (i - 1) * WINDOW_VALUES
  local late = now - ends[i]
  local outcome, id, status, why = nil, '', '', ''
  if paused then
    outcome, why = 'skipped', 'paused'
  elseif catch_up == 'latest' and i < due then
    outcome, why = 'skipped', 'catch-up latest: a later window is due'
  elseif catch_up == 'none' and late > grace then
    outcome, why = 'missed', 'catch-up none: ' .. late .. ' ms after its due time'
  else
    local prev_state = nil
    if overlap ~= 'allow' and last_job ~= '' then
      prev_state = redis.call('HGET', job_key(last_job), 'state')
      if prev_state and TERMINAL[prev_state] then prev_state = nil end
    end
    if prev_state and overlap == 'skip' then
      outcome, why = 'skipped', 'overlap: job ' .. last_job .. ' is ' .. prev_state
    elseif prev_state then
      -- wait: hold this window; record it once (the `waiting` field names
      -- it until it is claimed: the cursor update below keeps it)
      held = ARGV[a + 1]
      if h[5] ~= held then
        record_tick(K_TICKS, 'delayed', ARGV[a + 1], ARGV[a + 2], '', fmt(late), by, 'overlap: job ' .. last_job .. ' is ' .. prev_state)
        counts.delayed = counts.delayed + 1
        redis.call('HSET', K_SCHEDULE, 'waiting', held)
      end
      status_reply = 'WAITING'
      break
    else
      -- caught up: a later window is due too, or it is later than the grace
      outcome, id, status = enqueue_window(i, (i < due or late > grace) and 'caught_up' or 'enqueued')
      last_job = id
      why = status
      lag_sum, lag_n = lag_sum + late, lag_n + 1
    end
  end
  counts[outcome] = counts[outcome] + 1
  record_tick(K_TICKS, outcome, ARGV[a + 1], ARGV[a + 2], id, fmt(late), by, why)
  out[#out + 1] = ARGV[a + 1]
  out[#out + 1] = outcome
  out[#out + 1] = id
  out[#out + 1] = status
  claimed = i
end

local cursor = expected
local new_next = h[6] or ''
if claimed > 0 then
  cursor = fmt(ends[claimed])
  new_next = (claimed < n) and fmt(ends[claimed + 1]) or next_due
  redis.call('HSET', K_SCHEDULE, 'cursor', cursor, 'next_due', new_next, 'last_tick_at', fmt(now),
    'last_window', ARGV[16 + (claimed - 1) * WINDOW_VALUES + 1] .. ':' .. cursor, 'waiting', held)
  if last_job ~= '' then redis.call('HSET', K_SCHEDULE, 'last_job', last_job) end
  if lag_n > 0 then
    redis.call('HSET', K_SCHEDULE, 'last_lag_ms', fmt(lag_sum / lag_n))
    redis.call('HINCRBY', K_SCHEDULE, 'lag_ms_total', lag_sum)
  end
  -- an ended schedule stays listed, last
  redis.call('ZADD', K_SCHEDULES, (new_next ~= '') and new_next or '+inf', name)
  -- a claimed tick ends a failing spell
  if h[7] then
    redis.call('HDEL', K_SCHEDULE, 'failures', 'failing_since', 'last_error', 'last_error_at')
    record_tick(K_TICKS, 'recovered', '', '', '', '', by, h[7] .. ' failed ticks before')
  end
end
redis.call('HINCRBY', K_SCHEDULE, 'ticks', claimed)
for field, c in pairs(counts) do
  if c > 0 then redis.call('HINCRBY', K_SCHEDULE, field, c) end
end
if created > 0 then wake(k_wake, created) end
local reply = { status_reply, cursor, new_next, fmt(now) }
for _, v in ipairs(out) do reply[#reply + 1] = v end
flush_search(sb)
return reply
