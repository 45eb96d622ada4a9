-- moves: what the transition table (core/src/transitions.rs) allows, as the
-- scripts ask it. MOVES (every row as ' op:FROM>TO ') and TERMINAL are
-- generated from the Rust table when the scripts are built ("gen/moves"); no
-- script lists accepted states itself. A state is upper-case letters: any
-- other text (a corrupted field) is no state at all.
--- @include "gen/moves"

-- Whether the table lets `op` act on a job in state `from` at all.
local function may(op, from)
  if type(from) ~= 'string' or string.find(from, '[^%u]') then return false end
  return string.find(MOVES, ' ' .. op .. ':' .. from .. '>', 1, true) ~= nil
end

-- Whether the table lets `op` take a job from `from` to `to`.
local function may_move(op, from, to)
  if type(from) ~= 'string' or string.find(from, '[^%u]') then return false end
  return string.find(MOVES, ' ' .. op .. ':' .. from .. '>' .. to .. ' ', 1, true) ~= nil
end
