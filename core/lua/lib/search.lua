-- search: the queue's lookup index of jobs (`search`, a zset derived from
-- KEYS[1], every score 0, read by lexicographic range): one member per job and
-- field it can be found by, `<tag>\0<value>\0<id>` with tag `k` (input key),
-- `r` (resource) and `w` (input window, `<start>/<end>`). A job with none of
-- them (a plain job) has no member and costs nothing. Written by enqueue (one
-- ZADD per call, lib/create) and cleaned by retention (one ZREM per purge,
-- lib/retention).
--- @include "lib/keys"

-- The input window of a job's input text: its `window` object's `start` and
-- `end` (what schedules give), else its `from` and `to` fields, as
-- `<start>/<end>` (`<start>/` without an end); nil when it has none.
local function input_window(input)
  if type(input) ~= 'string' then return nil end
  if string.find(input, '"window"', 1, true) then
    local w = string.match(input, '"window"%s*:%s*(%b{})')
    local s = w and string.match(w, '"start"%s*:%s*"([^"]*)"')
    if s then return s .. '/' .. (string.match(w, '"end"%s*:%s*"([^"]*)"') or '') end
  end
  if string.find(input, '"from"', 1, true) then
    local s = string.match(input, '"from"%s*:%s*"([^"]*)"')
    if s then return s .. '/' .. (string.match(input, '"to"%s*:%s*"([^"]*)"') or '') end
  end
  return nil
end

-- The resource a job is found by: its `resource`, else the resource whose
-- slots its flow text counts (`slots:<N>:<resource>`, lib/flow), else nil.
local function search_resource(resource, flow)
  if resource and resource ~= '' then return resource end
  if type(flow) == 'string' and flow ~= '' then return string.match(flow, 'slots:%d+:(%S+)') end
  return nil
end

-- The index members of job `id` with these fields ('' or nil: none).
local function search_members(id, input_key, resource, window)
  local m = {}
  if input_key and input_key ~= '' then m[#m + 1] = 'k\0' .. input_key .. '\0' .. id end
  if resource and resource ~= '' then m[#m + 1] = 'r\0' .. resource .. '\0' .. id end
  if window and window ~= '' then m[#m + 1] = 'w\0' .. window .. '\0' .. id end
  return m
end

-- A new, empty list of members to index.
local function search_batch()
  return {}
end

-- Adds job `id`'s members to batch `sb`.
local function search_add(sb, id, input_key, resource, window)
  for _, m in ipairs(search_members(id, input_key, resource, window)) do
    sb[#sb + 1] = '0'
    sb[#sb + 1] = m
  end
end

-- Writes the batch (one ZADD per 1000 members; none when it is empty).
local function flush_search(sb)
  for i = 1, #sb, 2000 do
    redis.call('ZADD', BASE .. ':search', unpack(sb, i, math.min(i + 1999, #sb)))
  end
end

-- Removes members (a list of them, one ZREM per 1000; none when it is empty).
local function unsearch(members)
  for i = 1, #members, 1000 do
    redis.call('ZREM', BASE .. ':search', unpack(members, i, math.min(i + 999, #members)))
  end
end
