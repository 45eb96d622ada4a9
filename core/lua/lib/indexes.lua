-- indexes: writes to the lease index and the terminal-jobs index collected while
-- settle runs its operations (an index batch, passed to each transition), then
-- applied with one command each by flush_indexes before settle leases or purges.
--- @include "lib/keys"

-- A new, empty index batch.
local function index_batch()
  return { renewed = {}, unleased = {}, done = {} }
end

-- Moves `id`'s deadline in the lease index to `deadline` (text), if it is there.
local function relet(ix, deadline, id)
  local r = ix.renewed
  r[#r + 1] = deadline
  r[#r + 1] = id
end

-- Removes `id` from the lease index.
local function unlease(ix, id)
  ix.unleased[#ix.unleased + 1] = id
end

-- Adds `id` to the terminal-jobs index at time `at` (text).
local function index_done(ix, at, id)
  local d = ix.done
  d[#d + 1] = at
  d[#d + 1] = id
end

-- Applies the batch's writes (in chunks that unpack can take) and empties it.
local function flush_indexes(ix)
  local renewed, unleased, done = ix.renewed, ix.unleased, ix.done
  for i = 1, #renewed, 2000 do
    redis.call('ZADD', K_LEASES, 'XX', unpack(renewed, i, math.min(i + 1999, #renewed)))
  end
  for i = 1, #unleased, 1000 do
    redis.call('ZREM', K_LEASES, unpack(unleased, i, math.min(i + 999, #unleased)))
  end
  for i = 1, #done, 2000 do
    redis.call('ZADD', K_DONE, unpack(done, i, math.min(i + 1999, #done)))
  end
  ix.renewed, ix.unleased, ix.done = {}, {}, {}
end
