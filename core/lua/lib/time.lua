-- time: Redis TIME, read once per script run, and integral numbers as text.

-- An integral number as text. '%d' (an integer conversion) rather than '%.0f'
-- or Lua's own '%.14g': printing doubles is a visible share of Redis's CPU.
local function fmt(n)
  return string.format('%d', n)
end

-- Redis TIME in ms, read once per script run (a script runs atomically).
local NOW_MS, NOW_S = nil, nil

-- Forgets the time read by the previous run (lib/call, at the start of each run).
local function reset_clock()
  NOW_MS, NOW_S = nil, nil
end

-- Redis TIME in ms, as read first in this run.
local function now_ms()
  if NOW_MS == nil then
    local t = redis.call('TIME')
    NOW_MS = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    NOW_S = fmt(NOW_MS)
  end
  return NOW_MS
end

-- The same time as text (formatted once per run).
local function now_s()
  now_ms()
  return NOW_S
end
