-- call: what every script run does first (the script registry writes the
-- call to begin_call as each script's first statement): binds this run's KEYS
-- and ARGV (lib/keys) and forgets the previous run's clock (lib/time). A script
-- loaded once as a function library keeps its helpers between runs, never
-- its data.
--- @include "lib/keys"
--- @include "lib/time"

-- Starts a run of a script with its `keys` and `argv`.
local function begin_call(keys, argv)
  bind_call(keys, argv)
  reset_clock()
end
