-- outputs: the step outputs a holder appends to its job's outputs list
-- without a script, and the seal that decides which of them count.
--
-- A holder appends two elements per completed step (core/src/wire/append.rs):
--   RPUSH <base>:out:<id> <F>@<lease token>@<ms>@<next step>@<step> <output JSON>
-- (`ms` the holder's clock when the step completed; step names hold no '@')
-- and reads the job's state, token, cancel request and id in the same round
-- trip. An entry counts for attempt F only if it carries F's fence and lease
-- token and landed before F was sealed. Every script that ends an attempt
-- seals it (finish; sweep, RUNNING -> STALE): it moves F's entries, in order,
-- into the job's fields (steps, last_step, out:<step>) and deletes the list.
-- An entry that lands later (a holder that outlived its lease) is read by no
-- one, and the next script that seals, replaces or deletes the job deletes it.
-- (A list, not a stream: a new stream preallocates a 4 KB node, which a
-- running job would hold until its seal.)
--- @include "lib/keys"
--- @include "lib/args"
--- @include "lib/attempts"

-- Attempt `fence`'s entries in job `id`'s outputs list (`fence` and `token`
-- as the job's fields hold them, `started_at` its start, ms), read for a
-- seal: returns the attempt's steps list (as the job's `steps` field holds
-- it), its last step, a flat list { 'out:<step>', output, ... } of the
-- outputs to keep (a step that returned nothing, JSON null, keeps none) and
-- the step the last one named as next ('' after the last step); nil when the
-- attempt appended nothing that counts. Writes nothing: the sealing script
-- deletes the list (drop_outputs) once its own checks passed.
-- A step appended twice (a checkpoint sent again after a lost reply) counts
-- once, the first time. An entry not of the holder's shape (written by hand)
-- or naming a step a steps list cannot hold does not count.
local function sealed_outputs(id, fence, token, started_at)
  if not fence or fence == '' or not token or token == '' then return nil end
  local items = redis.pcall('LRANGE', out_key(id), 0, -1)
  -- not a list (a key written by hand): nothing in it counts
  if type(items) ~= 'table' or items.err or #items < 2 then return nil end
  local head = fence .. '@' .. token .. '@'
  local n_head = #head
  -- the entries count from the attempt's start, read once (see step_entry)
  local base = tonumber(started_at or '')
  local steps, outs, seen, last, next_step, n = {}, {}, {}, nil, '', 0
  for i = 1, #items - 1, 2 do
    local h = items[i]
    if string.sub(h, 1, n_head) == head then
      -- the pattern already keeps '@' out of the step and requires one byte;
      -- a ',' is all a step name may not hold beyond that (is_step_name)
      local at, nxt, step = string.match(h, '^(%d+)@([^@]*)@([^@]+)$', n_head + 1)
      if at and not seen[step] and not string.find(step, ',', 1, true) then
        seen[step] = true
        n = n + 1
        if base then
          steps[n] = step .. '@+' .. fmt(math.max(0, tonumber(at) - base))
        else
          steps[n] = step_entry(step, tonumber(at), started_at)
        end
        last, next_step = step, nxt
        local output = items[i + 1]
        if output ~= 'null' then
          outs[#outs + 1] = 'out:' .. step
          outs[#outs + 1] = output
        end
      end
    end
  end
  if not last then return nil end
  return table.concat(steps, ','), last, outs, next_step
end

-- Deletes job `id`'s outputs list: what it holds once the attempt that wrote
-- it is sealed or replaced counts for no one.
local function drop_outputs(id)
  redis.call('DEL', out_key(id))
end
