-- call: what every script run does first (the script registry writes the
-- call to begin_call as each script's first statement): binds this run's KEYS
-- and ARGV (lib/keys), forgets the previous run's clock (lib/time) and checks
-- that the fixed keys are the queue's own (a forged key is refused). A script
-- loaded once as a function library keeps its helpers between runs, never
-- its data.
--- @include "lib/keys"
--- @include "lib/time"

-- Starts a run of a script with its `keys` and `argv`: the error reply when
-- one of the fixed keys (KEYS[2..9]) is not the base's own, else nil (the
-- script returns that reply at once: nothing is read or written).
local function begin_call(keys, argv)
  bind_call(keys, argv)
  reset_clock()
  return forged_fixed_key(keys)
end
