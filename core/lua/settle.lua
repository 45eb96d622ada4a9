-- settle: a worker's holder operations on many jobs (start, checkpoint, finish,
-- release) and its next lease, in one call: the only script that runs them (a
-- single operation is a settle call of one). Each operation is a transition
-- function (core/lua/transitions/), compared by the job's lease token;
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
--   checkpoint: step, output, next step ('' when last)
--   finish:     outcome, last step to checkpoint first ('' for none), its output, and
--               unless the outcome is SUCCEEDED: error kind, message, retryable ('1',
--               'used_up': retryable but the caller's automatic retries are used up, '0'),
--               backoff ms, '1' cleanup needed, reason, '1' interrupted
--   release:    (nothing)
-- then one token per job to lease
-- Reply: one reply per operation, as its own script would give, then the lease reply
--        ({} when nothing was asked). A malformed operation list is an error reply.
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/indexes"
--- @include "lib/events"
--- @include "lib/retention"
--- @include "transitions/start"
--- @include "transitions/checkpoint"
--- @include "transitions/finish"
--- @include "transitions/release"
--- @include "transitions/lease"
local worker, ttl, lock_ttl = ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
local n_ops, n_pipelines, n_lease = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
-- Terminal jobs deleted per call beyond the retention policy (once, not per job ended).
local PURGE_PER_CALL = 8
-- The call's index writes (applied once, before the lease) and events (the
-- stream is trimmed once, at the end), handed to every transition.
local batch = { ix = index_batch(), events = event_log(false) }
local out = {}

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

-- Walks the operations (KEYS from index 10, ARGV from index 10) and, when `run`, applies
-- each; returns the next KEYS and ARGV indexes, or nil when the list is malformed.
local function walk(run)
  local k, a = 10, 10
  for i = 1, n_ops do
    local kind, token, res = ARGV[a], ARGV[a + 1], ARGV[a + 2]
    if res == nil then return nil end
    a = a + 3
    local jk = KEYS[k]
    k = k + 1
    local lk, pk, k_ready, k_delayed, k_wake = jk, jk, jk, jk, jk
    if res ~= '' then
      lk, pk = KEYS[k], KEYS[k + 1]
      k = k + 2
    end
    local values
    if kind == 'start' then
      values = 1
    elseif kind == 'checkpoint' then
      values = 3
    elseif kind == 'finish' then
      values = (ARGV[a] == 'SUCCEEDED') and 3 or 10
    elseif kind == 'release' then
      values = 0
    else
      return nil
    end
    if kind == 'release' or values == 10 then
      k_ready, k_delayed, k_wake = KEYS[k], KEYS[k + 1], KEYS[k + 2]
      k = k + 3
    end
    if k - 1 > #KEYS or a + values - 1 > #ARGV then return nil end
    if run then
      if kind == 'start' then
        out[i] = guarded(start, batch, jk, lk, pk, token, ARGV[a], res)
      elseif kind == 'checkpoint' then
        out[i] = guarded(checkpoint, batch, jk, lk, token, ARGV[a], ARGV[a + 1], ARGV[a + 2], ttl, lock_ttl, res ~= '')
      elseif kind == 'release' then
        out[i] = guarded(release, batch, jk, k_ready, k_wake, lk, pk, token, res)
      elseif values == 3 then
        out[i] = guarded(finish, batch, jk, k_ready, k_delayed, k_wake, lk, pk, token, 'SUCCEEDED', '', '', false, 0, false, '', res, false,
          ARGV[a + 1], ARGV[a + 2])
      else
        out[i] = guarded(finish, batch, jk, k_ready, k_delayed, k_wake, lk, pk, token, ARGV[a], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5],
          tonumber(ARGV[a + 6]) or 0, ARGV[a + 7] == '1', ARGV[a + 8], res, ARGV[a + 9] == '1', ARGV[a + 1],
          ARGV[a + 2])
      end
    end
    a = a + values
  end
  return k, a
end

-- check the whole list before writing anything
local k, a = walk(false)
if not k or (n_lease > 0 and (k + 3 * n_pipelines - 1 > #KEYS or a + n_lease - 1 > #ARGV)) then
  return redis.error_reply('BAD_ARG settle operations do not match their keys and values')
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
  out[n_ops + 1] = lease(batch, ready_keys, delayed_keys, wake_keys, worker, ttl, lock_ttl, n_lease, tokens)
else
  out[n_ops + 1] = {}
end
purge(now_ms(), PURGE_PER_CALL)
trim_events(batch.events)
return out
