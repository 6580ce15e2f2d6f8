-- Fixed-window rate limiter: one atomic decision per call.
--
-- KEYS[1]  counter key; the only key touched, so the script is Redis Cluster safe
-- ARGV[1]  limit   requests per window, integer 1..2147483647
-- ARGV[2]  window  window length in seconds, integer 1..2147483647
-- Reply    {"allow"|"deny", {limit, reset, remaining}}: the x-ratelimit-limit,
--          x-ratelimit-reset and x-ratelimit-remaining values as strings.
--          reset is the key's TTL, so the window is timed by Redis' own clock.
--          Bad opts: error "ERR fixed_window: <rule>, got '<value>'".
-- Cost     2 commands per call: INCR, then EXPIRE on the window's first hit or
--          TTL after it (plus one EXPIRE if the key somehow lost its TTL).
-- Memory   one integer string with a TTL per key, gone when the window ends.
--
-- Denied calls still INCR: that spares a read before the write, and remaining
-- is clamped at 0, so the overshoot is invisible to callers.

local MAX = 2147483647 -- keeps every value exact in a double and valid for EXPIRE
local find, fmt = string.find, string.format
local limit_s, window_s = ARGV[1], ARGV[2]
local limit, window = tonumber(limit_s), tonumber(window_s)

-- Canonical digits are echoed as headers as they are: number-to-string
-- conversion is a large share of this script's cost. tonumber alone would
-- also take "1.5e1", "0x10" and " 3".
if not (limit and window and limit <= MAX and window <= MAX
    and find(limit_s, '^[1-9]%d*$') and find(window_s, '^[1-9]%d*$')) then
  local names = {'limit', 'window'}
  for i = 1, 2 do
    local v = ARGV[i] or ''
    local n = find(v, '^%d+$') and tonumber(v)
    local rule = (not n or n < 1) and 'must be a positive integer'
      or n > MAX and 'must be <= 2147483647'
    if rule then
      return redis.error_reply("ERR fixed_window: " .. names[i] .. ' ' .. rule .. ", got '" .. v .. "'")
    end
  end
  limit_s, window_s = fmt('%d', limit), fmt('%d', window) -- leading zeros
end

local key = KEYS[1]
local count = redis.call('INCR', key)
local ttl_s
if count == 1 then
  redis.call('EXPIRE', key, window)
  ttl_s = window_s
else
  local ttl = redis.call('TTL', key)
  if ttl < 0 then
    -- A counter without expiry would deny forever; restart its window instead.
    redis.call('EXPIRE', key, window)
    ttl_s = window_s
  else
    ttl_s = fmt('%d', ttl)
  end
end

if count <= limit then
  return {'allow', {limit_s, ttl_s, fmt('%d', limit - count)}}
end
return {'deny', {limit_s, ttl_s, '0'}}
