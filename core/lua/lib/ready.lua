-- ready: the score of a job in its pipeline's ready set.
--- @include "lib/time"

local PRIORITY_SPAN = 4398046511104 -- 2^42 ms (~139 years) per priority level

-- Ready-set score: higher priority first, then older first.
local function ready_score(priority, ms)
  return fmt((255 - (tonumber(priority) or 0)) * PRIORITY_SPAN + ms)
end
