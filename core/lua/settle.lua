-- settle: a worker's holder operations on many jobs (start, finish, release)
-- and its next lease, in one call: the only script that runs them (a single
-- operation is a settle call of one). A checkpoint is not one of them: the
-- holder appends it to the job's outputs list, and finish seals it
-- (lib/outputs). Each operation is a transition function
-- (core/lua/transitions/), compared by the job's lease token;
-- one refused operation does not affect the others. Operations are encoded
-- with only the keys and values their kind needs.
-- KEYS[10..] per operation: job; lock:<resource>, parked:<resource> when it has a
--            resource; ready:<pipeline>, delayed:<pipeline>, wake:<pipeline> for a release
--            and for a finish whose outcome is not SUCCEEDED (the ones that may queue the
--            job again); then triples (ready:<pipeline>, delayed:<pipeline>, wake:<pipeline>)
--            of the pipelines to lease
-- ARGV[4] worker  ARGV[5] lease ttl ms  ARGV[6] lock ttl ms  ARGV[7] operations
-- ARGV[8] pipelines to lease  ARGV[9] jobs to lease (0: no lease)
-- then per operation: kind, token, resource ('' when none), then by kind
--   start:      first step
--   finish:     outcome, last step to checkpoint first ('' for none), its output, and
--               unless the outcome is SUCCEEDED: error kind, message, retryable ('1',
--               'used_up': retryable but the caller's automatic retries are used up, '0'),
--               backoff ms, '1' cleanup needed, reason, '1' interrupted; then '1' when
--               the holder may have appended step outputs to seal, else '0'
--   release:    (nothing)
-- then one token per job to lease, then (when leasing, optional) how many of the
-- leased jobs start in this call (the worker's free run slots: transitions/lease)
-- and the first step of each pipeline to lease ('' for one whose jobs never
-- start here)
-- Reply: one reply per operation, as its own script would give, then the lease reply
--        ({} when nothing was asked). A malformed argument or operation list is an
--        error reply ('BAD_ARG ...'), given before anything is written (lib/args).
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/args"
--- @include "lib/moves"
--- @include "lib/indexes"
--- @include "lib/events"
--- @include "lib/retention"
--- @include "lib/stats"
--- @include "transitions/start"
--- @include "transitions/finish"
--- @include "transitions/release"
--- @include "transitions/lease"
local bad = common_args('settle')
if bad then return bad end
local worker, ttl, lock_ttl = ARGV[4], int_value(ARGV[5], 1), int_value(ARGV[6], 1)
local n_ops, n_pipelines, n_lease = int_value(ARGV[7], 0), int_value(ARGV[8], 0), int_value(ARGV[9], 0)
if not ttl then return bad_arg('settle', 'lease ttl ms (ARGV[5])', ARGV[5]) end
if not lock_ttl then return bad_arg('settle', 'lock ttl ms (ARGV[6])', ARGV[6]) end
if not n_ops then return bad_arg('settle', 'operation count (ARGV[7])', ARGV[7]) end
if not n_pipelines then return bad_arg('settle', 'pipeline count (ARGV[8])', ARGV[8]) end
if not n_lease then return bad_arg('settle', 'lease count (ARGV[9])', ARGV[9]) end
if n_lease > 0 and (worker == nil or worker == '') then return bad_arg('settle', 'worker (ARGV[4])', worker) end
if n_lease > 0 and n_pipelines == 0 then return bad_arg('settle', 'pipeline count (ARGV[8])', ARGV[8]) end
-- Retention per call: at least PURGE_MIN terminal jobs, and twice as many as the
-- call ended, at most PURGE_MAX. A call that ends up to PURGE_MAX jobs therefore
-- deletes at least as many as it ended (when that many are beyond the policy),
-- so the kept count stays at keep_count under any load, and a backlog shrinks
-- by at least the jobs ended per call; no call deletes more than PURGE_MAX.
local PURGE_MIN, PURGE_MAX = 8, 256
-- The call's index writes (applied once, before the lease), events (the
-- stream is trimmed once, at the end) and outcome counts (lib/stats: one
-- HINCRBY per pipeline and outcome, at the end), handed to every transition.
local batch = { ix = index_batch(), events = event_log(false), stats = stats_batch() }
local out = {}
-- jobs the call's operations ended (for the retention budget)
local ended = 0

-- Runs one operation; an error raised inside it (a job field corrupted in
-- Redis, say) becomes that operation's reply instead of failing the whole call.
-- Writes the operation made before the error stay (a script is not a
-- transaction); the transitions read and check everything before they write,
-- so the known case (a non-numeric attempt number) fails before any write.
local function guarded(fn, ...)
  local ok, reply = pcall(fn, ...)
  if ok then return reply end
  if type(reply) == 'table' then reply = reply.err or 'error' end
  return { 'OP_ERROR', tostring(reply) }
end

-- What is wrong with the values of an operation of `kind` at ARGV index `a`
-- (after its kind, token and resource), or nil: every value is checked before
-- anything is written. Texts (outputs, messages, reasons) may be anything.
local function bad_values(kind, a)
  if kind == 'finish' then
    local outcome = ARGV[a]
    if not TERMINAL[outcome] then return 'finish outcome', outcome end
    if ARGV[a + 1] ~= '' and not is_step_name(ARGV[a + 1]) then return 'finish last step', ARGV[a + 1] end
    local last = (outcome == 'SUCCEEDED') and a + 3 or a + 10
    if flag_value(ARGV[last]) == nil then return 'finish appended flag', ARGV[last] end
    if outcome ~= 'SUCCEEDED' then
      -- retryable: a flag, or 'used_up' (retryable, the caller's retries used up)
      if ARGV[a + 5] ~= 'used_up' and flag_value(ARGV[a + 5]) == nil then
        return 'finish retryable flag', ARGV[a + 5]
      end
      if not int_value(ARGV[a + 6], 0) then return 'finish backoff ms', ARGV[a + 6] end
      if flag_value(ARGV[a + 7]) == nil then return 'finish cleanup flag', ARGV[a + 7] end
      if flag_value(ARGV[a + 9]) == nil then return 'finish interrupted flag', ARGV[a + 9] end
    end
  end
  return nil
end

-- Walks the operations (KEYS from index 10, ARGV from index 10) and, when `run`, applies
-- each; returns the next KEYS and ARGV indexes, or nil, what and its value when
-- the list is malformed, or nil, nil, nil and the error reply for a key that
-- is not the queue's (checked when not `run`: a job key, lock and parked keys
-- of the resource given, one pipeline's ready, delayed and wake keys; the
-- pipeline and resource are compared with the job's by the transition).
local function walk(run)
  -- An operation's {'BAD_KEY', given, expected} refusal (a key the call gave
  -- that is not the job's pipeline's or resource's, found once the job is read)
  -- as {'BAD_KEY', 'KEYS[<i>] is <given>, not <expected>'}: the position is the
  -- operation's key (from `first` to `last`) that is `given`.
  local function placed(r, first, last)
    local at = first
    for x = first, last do
      if KEYS[x] == r[2] then at = x end
    end
    return { 'BAD_KEY', 'KEYS[' .. at .. '] is ' .. key_shown(r[2]) .. ', not ' .. key_shown(r[3]) }
  end
  local k, a = 10, 10
  for i = 1, n_ops do
    local kind, token, res = ARGV[a], ARGV[a + 1], ARGV[a + 2]
    if res == nil then return nil end
    a = a + 3
    local jk, jpos = KEYS[k], k
    k = k + 1
    local lk, pk, k_ready, k_delayed, k_wake = jk, jk, jk, jk, jk
    local lpos, rpos = k, nil
    if res ~= '' then
      lk, pk = KEYS[k], KEYS[k + 1]
      k = k + 2
    end
    local values
    if kind == 'start' then
      values = 1
    elseif kind == 'finish' then
      values = (ARGV[a] == 'SUCCEEDED') and 4 or 11
    elseif kind == 'release' then
      values = 0
    else
      return nil
    end
    if kind == 'release' or values == 11 then
      k_ready, k_delayed, k_wake = KEYS[k], KEYS[k + 1], KEYS[k + 2]
      rpos = k
      k = k + 3
    end
    if k - 1 > #KEYS or a + values - 1 > #ARGV then return nil end
    if run then
      if kind == 'start' then
        out[i] = guarded(start, batch, jk, lk, pk, token, ARGV[a], res)
      elseif kind == 'release' then
        out[i] = guarded(release, batch, jk, k_ready, k_wake, lk, pk, token, res)
      elseif values == 4 then
        out[i] = guarded(finish, batch, jk, k_ready, k_delayed, k_wake, lk, pk, token, 'SUCCEEDED', '', '', false, 0, false, '', res, false,
          ARGV[a + 1], ARGV[a + 2], flag_value(ARGV[a + 3]))
      else
        out[i] = guarded(finish, batch, jk, k_ready, k_delayed, k_wake, lk, pk, token, ARGV[a], ARGV[a + 3], ARGV[a + 4],
          ARGV[a + 5], int_value(ARGV[a + 6], 0), flag_value(ARGV[a + 7]), ARGV[a + 8], res,
          flag_value(ARGV[a + 9]), ARGV[a + 1], ARGV[a + 2], flag_value(ARGV[a + 10]))
      end
      local r = out[i]
      if r[1] == 'BAD_KEY' then
        r = placed(r, jpos, k - 1)
        out[i] = r
      end
      -- a job that ended (start and release end one when a cancel was pending)
      if r[1] == 'OK' and TERMINAL[r[2]] then ended = ended + 1 end
    else
      if token == '' then return nil, 'operation ' .. i .. ' lease token', token end
      local forged = key_check.job(jpos, jk)
      if not forged and res ~= '' then forged = key_check.resource(KEYS, lpos, res, jk) end
      if not forged and rpos then forged = key_check.pipeline_named(KEYS, rpos, { 'ready', 'delayed', 'wake' }) end
      if forged then return nil, nil, nil, forged end
      local what, v = bad_values(kind, a)
      if what then return nil, 'operation ' .. i .. ' ' .. what, v end
    end
    a = a + values
  end
  return k, a
end

-- check the whole list before writing anything
local k, a, v, forged = walk(false)
if forged then return forged end
if not k and a then return bad_arg('settle', a, v) end
if not k or (n_lease > 0 and (k + 3 * n_pipelines - 1 > #KEYS or a + n_lease - 1 > #ARGV)) then
  return redis.error_reply('BAD_ARG settle operations do not match their keys and values')
end
-- each pipeline to lease: its ready, delayed and wake keys (the ready key names it)
for p = 1, n_lease > 0 and n_pipelines or 0 do
  forged = key_check.pipeline_named(KEYS, k + 3 * p - 3, { 'ready', 'delayed', 'wake' })
  if forged then return forged end
end
for j = 1, n_lease do
  if ARGV[a + j - 1] == '' then return bad_arg('settle', 'lease token ' .. j, '') end
end
-- the starts in the lease: a count and one first step per pipeline (none
-- given: no job starts in the lease)
local start_n, first_steps = 0, {}
if n_lease > 0 and ARGV[a + n_lease] ~= nil then
  local s = a + n_lease
  start_n = int_value(ARGV[s], 0)
  if not start_n or start_n > n_lease then return bad_arg('settle', 'start count', ARGV[s]) end
  if s + n_pipelines > #ARGV then
    return redis.error_reply('BAD_ARG settle operations do not match their keys and values')
  end
  for p = 1, n_pipelines do
    local step = ARGV[s + p]
    if step ~= '' and not is_step_name(step) then return bad_arg('settle', 'first step ' .. p, step) end
    first_steps[p] = step
  end
end
walk(true)
flush_indexes(batch.ix)
if n_lease > 0 then
  local ready_keys, delayed_keys, wake_keys, tokens = {}, {}, {}, {}
  for p = 1, n_pipelines do
    ready_keys[p] = KEYS[k + 3 * p - 3]
    delayed_keys[p] = KEYS[k + 3 * p - 2]
    wake_keys[p] = KEYS[k + 3 * p - 1]
  end
  for j = 1, n_lease do tokens[j] = ARGV[a + j - 1] end
  out[n_ops + 1] = lease(batch, ready_keys, delayed_keys, wake_keys, worker, ttl, lock_ttl, n_lease, tokens, start_n,
    first_steps)
else
  out[n_ops + 1] = {}
end
-- a call that ended no job (checkpoints, starts, a lease alone) adds nothing
-- to retain and purges nothing: the sweep purges old jobs on its own pace
if ended > 0 then purge(now_ms(), math.min(PURGE_MAX, math.max(PURGE_MIN, 2 * ended))) end
trim_events(batch.events)
flush_stats(batch.stats)
return out
