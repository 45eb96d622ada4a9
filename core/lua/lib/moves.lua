-- moves: what the transition table (core/src/transitions.rs) allows, as the
-- scripts ask it. MOVES and TERMINAL are generated from the Rust table when the
-- scripts are built ("gen/moves"); no script lists accepted states itself.
--- @include "gen/moves"

-- Whether the table lets `op` act on a job in state `from` at all.
local function may(op, from)
  return from ~= nil and from ~= false and MOVES[op][from] ~= nil
end

-- Whether the table lets `op` take a job from `from` to `to`.
local function may_move(op, from, to)
  local row = from and MOVES[op][from]
  return row ~= nil and row ~= false and row[to] == true
end
