-- finish: ends the current attempt as SUCCEEDED, FAILED or CANCELLED
-- (RUNNING -> SUCCEEDED | FAILED | CANCELLED, LEASED -> CANCELLED), appends the
-- attempt record (except for a plain success, whose attempt stays described by
-- the job hash), releases the resource lock. A retryable failure with attempts
-- left creates the next attempt in QUEUED, delayed by the caller's backoff,
-- unless a cancel was requested (then the attempt ends FAILED). An attempt
-- interrupted by a worker shutdown (`interrupted`, outcome FAILED) always gets a
-- new attempt, unless a cancel is pending: then it ends CANCELLED, from RUNNING
-- or LEASED, as the operator asked (nothing failed).
-- Called by settle: finish(batch, jk, k_ready, k_delayed, k_wake, lk, pk, token, outcome,
-- kind, message, retryable, backoff, cleanup, reason, res, interrupted, last_step,
-- last_output, appended), the flags as booleans except `retryable` ('1', 'used_up': the
-- step said retryable but the caller's automatic retries are used up, else not
-- retryable); `last_step` (with its output) is a step
-- completed just before the end, recorded as its checkpoint would ('' for none);
-- `appended`: the holder may have appended step outputs (lib/outputs), which
-- this call seals (a holder that appended none spares the read).
-- Reply: {'OK', outcome} | {'RETRY', next attempt, not_before ms} | refusal
--        | {'CORRUPT', problem, field}: a field it reads is malformed (nothing written).
-- Every field the chosen path reads is checked before the first write.
-- Counts the outcome in `batch.stats` (lib/stats: `retried` for a new attempt).
--- @include "lib/keys"
--- @include "lib/time"
--- @include "lib/events"
--- @include "lib/wake"
--- @include "lib/ready"
--- @include "lib/indexes"
--- @include "lib/locks"
--- @include "lib/flow"
--- @include "lib/jobs"
--- @include "lib/attempts"
--- @include "lib/args"
--- @include "lib/groups"
--- @include "lib/stats"
--- @include "lib/outputs"
local function finish(batch, jk, k_ready, k_delayed, k_wake, lk, pk, token, outcome, kind, message, retryable, backoff, cleanup,
    reason, res, interrupted, last_step, last_output, appended)
  if not TERMINAL[outcome] then return { 'BAD_ARG', 'outcome' } end
  if type(backoff) ~= 'number' or backoff < 0 then return { 'BAD_ARG', 'backoff' } end
  local used_up = retryable == 'used_up'
  retryable = retryable == '1' or used_up
  local j = load_fields(jk, HOT_FIELDS, {})
  -- A worker shutting down with a cancel pending (not yet seen by it) ends the
  -- attempt CANCELLED: that is what the operator asked for, and nothing failed.
  -- Decided before the table is asked, so the move checked is the one made.
  if interrupted and j.cancel_reason and j.cancel_reason ~= '' then
    outcome = 'CANCELLED'
    reason = 'cancel requested: ' .. j.cancel_reason .. ' (honoured at a worker shutdown)'
    interrupted = false
  end
  -- the rest of the fields, unless the attempt ends plainly (no record, no retry)
  if outcome ~= 'SUCCEEDED' or reason ~= '' or (j.cancel_reason and j.cancel_reason ~= '') then
    load_fields(jk, COLD_FIELDS, j)
  end
  local refusal = refuse_job(j, 'finish', outcome, token)
  if refusal then return refusal end
  -- a hash that names another job is not ended as either (lib/jobs)
  if j.id ~= job_id_of(jk) then return id_mismatch(j.id, jk) end
  -- the keys that may queue the job again are its pipeline's (settle checked
  -- they name one pipeline: the ready key stands for the three)
  if k_ready ~= jk and j.pipeline and k_ready ~= ready_key(j.pipeline) then
    return { 'BAD_KEY', k_ready, ready_key(j.pipeline) }
  end
  local corrupt = nil
  if not id_and_attempt_ok(j.id, j.attempt) then
    corrupt = corrupt_field(j, { 'id', 'attempt' })
    if corrupt then return corrupt end
  end
  local now = now_ms()
  local id, attempt, worker, from = j.id, tonumber(j.attempt), j.worker, j.state
  -- A pending cancel request stops the job: no new attempt would honour it (the
  -- request would be cleared with the episode), so the attempt ends FAILED, keeping it.
  local cancel_pending = j.cancel_reason and j.cancel_reason ~= ''
  -- whether the attempt is retried; decided (and what it reads checked) before any write
  local retried = false
  if outcome == 'FAILED' and not cancel_pending then
    if interrupted then
      retried = true
    elseif retryable then
      corrupt = corrupt_field(j, { 'max_attempts' })
      if corrupt then return corrupt end
      retried = not used_up and attempt < tonumber(j.max_attempts or '1')
    end
  end
  if retried then
    corrupt = corrupt_field(j, { 'priority' })
    if corrupt then return corrupt end
  end
  -- every field this call sets (field, value, ...), written with one HSET at
  -- the end; `ns` counts them (no closure made afresh for every finish)
  local sets, ns = {}, 0
  local steps_changed = false
  -- the seal: the outputs the attempt appended while it was live count, in
  -- the job's fields; anything appended from now on counts for no one
  -- A plain success keeps no `last_step` when its attempt completed a step:
  -- it is the last entry of `steps` (readers derive it, record/fields.rs)
  local plain = outcome == 'SUCCEEDED' and reason == ''
  if appended and j.state == 'RUNNING' then
    local steps, sealed_last, outs = sealed_outputs(id, j.fence, j.token, started_of(j))
    if steps then
      j.steps, steps_changed = steps, true
      if not plain then sets[1], sets[2], ns = 'last_step', sealed_last, 2 end
      for i = 1, #outs do sets[ns + i] = outs[i] end
      ns = ns + #outs
    end
  end
  if last_step and last_step ~= '' and j.state == 'RUNNING' then
    local steps = j.steps or ''
    if not string.find(',' .. steps, ',' .. last_step .. '@', 1, true) then
      if steps ~= '' then steps = steps .. ',' end
      j.steps = steps .. step_entry(last_step, now, started_of(j))
      steps_changed = true
      if not plain then sets[ns + 1], sets[ns + 2], ns = 'last_step', last_step, ns + 2 end
      -- written only when the step returned something (absent: JSON null)
      if last_output ~= 'null' then sets[ns + 1], sets[ns + 2], ns = 'out:' .. last_step, last_output, ns + 2 end
    end
  end
  if cleanup then j.cleanup_needed = '1' end
  local extra = {}
  if reason ~= '' then extra.reason = reason end
  if outcome == 'FAILED' then
    -- the step's verdict, and apart from it whether automatic retries are used up
    local exhausted = retryable and not interrupted and not cancel_pending
      and (used_up or attempt >= tonumber(j.max_attempts or '1'))
    extra.error = { kind = kind, message = message, retryable = retryable, retries_exhausted = exhausted or nil }
  end
  -- A plain success (no reason given) keeps its attempt in the job hash, which
  -- already holds all its record would (worker, fence, leased_at, started_at,
  -- steps, a late cancel request; ended_at is updated_at): readers build the
  -- record from it (Queue::job). Only the lease (token, deadline) goes, and
  -- `last_step` when this attempt completed a step: readers take the last
  -- entry of `steps`. The job never gets another attempt, so nothing ever
  -- needs to move it out.
  if plain then
    if steps_changed then sets[ns + 1], sets[ns + 2], ns = 'steps', j.steps, ns + 2 end
  elseif not append_attempt(id, attempt, record_of(j, outcome, now, extra)) then
    -- the record first: nothing is written before it, so an existing one refuses the call cleanly
    return { 'CORRUPT', 'attempt ' .. attempt .. ' already recorded (' .. attempt_field(id, attempt) .. ' in the attempts hash)' }
  end
  sets[ns + 1], sets[ns + 2], ns = 'updated_at', now_s(), ns + 2
  if appended then drop_outputs(id) end
  release_lock_at(lk, pk, res, id, true)
  flow_release(j.flow, id)
  unlease(batch.ix, id)
  -- the step field goes with the lease: an absent step is none (lib/jobs)
  if plain then
    if steps_changed then
      redis.call('HDEL', jk, 'token', 'step', 'last_step')
    else
      redis.call('HDEL', jk, 'token', 'step')
    end
  else
    redis.call('HDEL', jk, 'step', unpack(ATTEMPT_FIELDS))
  end
  -- an accepted cancel the job outran: its finish event says so
  if outcome == 'SUCCEEDED' and reason == '' and cancel_pending then
    local by = (j.cancel_by and j.cancel_by ~= '') and j.cancel_by or '?'
    message = 'completed first: the cancel requested by ' .. by .. ' was not honoured'
  end
  -- the attempt as its field holds it (checked above: digits only), which is
  -- how the number prints when it has no leading zero and under 15 digits,
  -- without formatting it again
  local attempt_text = (#j.attempt <= 14 and string.byte(j.attempt) ~= 48) and j.attempt or attempt
  emit(batch.events, 'finish', id, attempt_text, from, outcome, worker,
    reason ~= '' and reason or message)

  if retried then
    local next_attempt = attempt + 1
    local not_before = now + backoff
    redis.call('HDEL', jk, unpack(EPISODE_FIELDS))
    sets[ns + 1], sets[ns + 2], sets[ns + 3], sets[ns + 4] = 'state', 'QUEUED', 'attempt', next_attempt
    sets[ns + 5], sets[ns + 6] = 'not_before', fmt(not_before)
    redis.call('HSET', jk, unpack(sets))
    if backoff > 0 then
      redis.call('ZADD', k_delayed, fmt(not_before), id)
    else
      redis.call('ZADD', k_ready, ready_score(j.priority, now), id)
    end
    local why = 'automatic retry, backoff ' .. fmt(backoff) .. ' ms'
    -- an interrupted attempt's retry says what interrupted it (a shutdown, or
    -- a lease given up at its local deadline), as the finish event does
    if interrupted then why = 'new attempt after an interruption: ' .. (reason ~= '' and reason or message) end
    emit(batch.events, 'retry', id, next_attempt, 'FAILED', 'QUEUED', worker, why)
    if j.links then links_moved(batch.events, jk, id, 'QUEUED', now) end
    wake(k_wake)
    count_outcome(batch.stats, j.pipeline, 'retried')
    return { 'RETRY', next_attempt, fmt(not_before) }
  end
  if cleanup then sets[ns + 1], sets[ns + 2], ns = 'cleanup_needed', '1', ns + 2 end
  sets[ns + 1], sets[ns + 2] = 'state', outcome
  redis.call('HSET', jk, unpack(sets))
  free_input_key(j.input_key, id, outcome, now)
  index_done(batch.ix, now_s(), id)
  if j.links then links_moved(batch.events, jk, id, outcome, now) end
  count_outcome(batch.stats, j.pipeline, outcome == 'SUCCEEDED' and 'succeeded' or string.lower(outcome))
  return { 'OK', outcome }
end
