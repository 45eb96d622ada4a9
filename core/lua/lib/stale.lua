-- stale: the record of a STALE attempt an operator decided, for `retry` and
-- `resolve` only (kept apart from lib/attempts, which the hot path includes).
--- @include "lib/attempts"
--- @include "lib/jobs"

-- The final record of a STALE attempt an operator decided (retry, resolve):
-- its facts as they stood when it went STALE, never the decision's moment: it
-- ended at `stale_at` (when the sweep found its lease expired), the step that
-- was running is kept as `cut_step`, and `decision` ({action, by, reason, at,
-- to, mode}) is added beside them as `resolution`. The reader builds the same
-- record from the hash while the job waits (Job::stale_attempt_from_hash).
local function stale_record(jk, decision, now)
  local s = redis.call('HMGET', jk, 'stale_at', 'step')
  local extra = { resolution = decision }
  if s[2] and s[2] ~= '' then extra.cut_step = s[2] end
  return record_of(load_job(jk), 'STALE', tonumber(s[1] or '') or now, extra)
end
