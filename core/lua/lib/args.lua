-- args: checks made before a script's first write, of its arguments and of the
-- job fields it reads. A malformed argument fails the whole call with an error
-- reply 'BAD_ARG <script>: <what>' (the caller's defect; nothing is written). A
-- malformed job field refuses the operation on that job with
-- {'CORRUPT', problem, field} (the data's defect; that job is left as it is).
--
-- Numbers are plain decimal integers: digits only (no sign, fraction, exponent
-- or spaces), at most 15 of them (below 10^15, exact as a Lua number: ms values
-- up to ~31,000 years). Flags are '1' (true), '0' or '' (false).
--- @include "lib/keys"

-- The number in text `v` when it is a plain integer in [min, max] (max: none
-- when nil); else nil.
local function int_value(v, min, max)
  if type(v) ~= 'string' or #v == 0 or #v > 15 or string.find(v, '%D') then return nil end
  local n = tonumber(v)
  if n == nil or n < min or (max ~= nil and n > max) then return nil end
  return n
end

local FLAGS = { ['1'] = true, ['0'] = false, [''] = false }

-- The flag in text `v` (true or false), or nil when it is not a flag.
local function flag_value(v)
  return FLAGS[v]
end

-- A step name as a `steps` entry can hold it: not empty, no ',' or '@'
-- (two plain searches: cheaper than one character-class pattern).
local function is_step_name(v)
  return type(v) == 'string' and v ~= '' and not string.find(v, ',', 1, true) and not string.find(v, '@', 1, true)
end

-- A short, printable rendering of an argument or field for a message.
local function shown(v)
  if v == nil then return 'nothing' end
  if v == false then return 'missing' end
  local s = string.gsub(string.sub(tostring(v), 1, 40), '[%c"\128-\255]', '?')
  if #tostring(v) > 40 then s = s .. '...' end
  return '"' .. s .. '"'
end

-- The error reply for malformed argument `what` (value `v`) of `script`.
local function bad_arg(script, what, v)
  return redis.error_reply('BAD_ARG ' .. script .. ': ' .. what .. ' is ' .. shown(v))
end

-- The error reply for the common ARGV (lib/keys) when one is malformed, else
-- nil. The three texts last found well formed are kept (lib/keys: KEPT): a
-- run given the same ones needs no second look at them.
local function common_args(script)
  local a1, a2, ages = CALL_ARGV[1], CALL_ARGV[2], CALL_ARGV[3]
  local ok = KEPT.argv
  if a1 ~= nil and a1 == ok[1] and a2 == ok[2] and ages == ok[3] then return nil end
  if not int_value(a1, 0) then return bad_arg(script, 'events max length (ARGV[1])', a1) end
  if not int_value(a2, 0) then return bad_arg(script, 'retention keep count (ARGV[2])', a2) end
  -- '<keep age ms>' or '<keep age ms>:<input window ms>', each part digits
  -- (at most 15: read into KEEP_AGE_MS and INPUT_WINDOW_MS by lib/keys)
  if type(ages) ~= 'string' or #ages > 31
    or not (string.find(ages, '^%d+:%d+$') or string.find(ages, '^%d+$'))
    or string.find(ages, '%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d') then
    return bad_arg(script, 'retention ages (ARGV[3])', ages)
  end
  KEPT.argv = { a1, a2, ages }
  return nil
end

-- What the job fields the scripts read must hold, by name: `int` fields a plain
-- integer in [min, max]; `text` fields not empty; `required` ones present.
-- (Built on first use: only a job that fails a fast check below needs them.)
local FIELD_RULES = nil
local function field_rules()
  if not FIELD_RULES then
    FIELD_RULES = {
      id = { text = true, required = true },
      pipeline = { text = true, required = true },
      attempt = { int = true, min = 1, required = true },
      max_attempts = { int = true, min = 1 },
      priority = { int = true, min = 0, max = 255 },
      created_at = { int = true, min = 0 },
      started_at = { int = true, min = 0 },
      leased_at = { int = true, min = 0 },
      fence = { int = true, min = 0 },
    }
  end
  return FIELD_RULES
end

-- Whether `v` is a plain integer field of at least 1 (an attempt number):
-- the fast check transitions make on every job, building nothing. One
-- anchored pattern (digits only, the first not '0', at most 15).
local function is_count(v)
  return type(v) == 'string' and #v <= 15 and string.find(v, '^[1-9]%d*$') ~= nil
end

-- Whether a job's `id` and `attempt` fields are well formed (the fast path of
-- corrupt_field(j, { 'id', 'attempt' })).
local function id_and_attempt_ok(id, attempt)
  return type(id) == 'string' and id ~= '' and is_count(attempt)
end

-- The refusal for the first of `names` whose value in `j` (a table by field
-- name, false for a missing field) breaks its rule; nil when all hold.
local function corrupt_field(j, names)
  for _, name in ipairs(names) do
    local rule, v = field_rules()[name], j[name]
    local problem = nil
    if v == false or v == nil then
      if rule.required then problem = 'missing' end
    elseif rule.int and not int_value(v, rule.min, rule.max) then
      problem = shown(v) .. ' is not an integer'
      if rule.max then
        problem = problem .. ' from ' .. rule.min .. ' to ' .. rule.max
      else
        problem = problem .. ' of at least ' .. rule.min
      end
    elseif rule.text and v == '' then
      problem = 'empty'
    end
    if problem then return { 'CORRUPT', 'field ' .. name .. ': ' .. problem, name } end
  end
  return nil
end
