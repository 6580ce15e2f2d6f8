-- Token-bucket rate limiter: one atomic decision per call.
--
-- KEYS[1]  bucket key; the only key touched, so the script is Redis Cluster safe
-- ARGV[1]  limit   requests per window, integer 1..2147483647
-- ARGV[2]  window  window length in seconds, integer 1..2147483647
-- ARGV[3]  burst   tokens available at once, integer 1..limit; the other
--                  limit - burst tokens refill evenly over the window
-- Reply    {"allow"|"deny", {limit, reset, remaining[, retry_after]}}: the
--          x-ratelimit-limit ("<limit> <limit>;w=<window>;burst=<burst>;
--          policy=token_bucket"), x-ratelimit-reset (key TTL, seconds),
--          x-ratelimit-remaining and, only when no token is left, retry-after
--          (seconds), all as strings.
--          Bad opts: error "ERR token_bucket: <rule>, got '<value>'".
-- Cost     TIME + HMGET per call, then HSET to take a token, plus PEXPIREAT
--          when the window starts: 4 on a new key, 3 on allow, 2 on deny.
-- Memory   one small hash with a TTL per key, gone when the window ends:
--          b = tokens (float), r = remaining, t = last refill (ms), e = expiry (ms).
--          Keeping the expiry in the hash spares a PTTL call.

local MAX = 2147483647 -- keeps every value exact in a double and valid for PEXPIREAT
local find, fmt, floor, ceil, min = string.find, string.format, math.floor, math.ceil, math.min
local limit_s, window_s, burst_s = ARGV[1], ARGV[2], ARGV[3]
local limit, window, burst = tonumber(limit_s), tonumber(window_s), tonumber(burst_s)

-- Canonical digits are echoed into the policy header as they are: number-to-
-- string conversion is a large share of this script's cost. tonumber alone
-- would also take "1.5e1", "0x10" and " 3".
if not (limit and window and burst and limit <= MAX and window <= MAX and burst <= limit
    and find(limit_s, '^[1-9]%d*$') and find(window_s, '^[1-9]%d*$') and find(burst_s, '^[1-9]%d*$')) then
  local names = {'limit', 'window', 'burst'}
  for i = 1, 3 do
    local v = ARGV[i] or ''
    local n = find(v, '^%d+$') and tonumber(v)
    local rule = not n and 'must be a positive integer'
      or i == 3 and (n < 1 and 'must be >= 1' or n > limit and 'must be <= limit')
      or i < 3 and (n < 1 and 'must be a positive integer' or n > MAX and 'must be <= 2147483647')
    if rule then
      return redis.error_reply("ERR token_bucket: " .. names[i] .. ' ' .. rule .. ", got '" .. v .. "'")
    end
  end
  limit_s, window_s, burst_s = fmt('%d', limit), fmt('%d', window), fmt('%d', burst) -- leading zeros
end

local key = KEYS[1]
local refill = limit - burst -- tokens added per window; 0 means no refill
local policy = limit_s .. ' ' .. limit_s .. ';w=' .. window_s .. ';burst=' .. burst_s .. ';policy=token_bucket'

local time = redis.call('TIME')
local now = time[1] * 1000 + floor(time[2] / 1000)
local state = redis.call('HMGET', key, 'b', 'r', 't', 'e')
local tokens, remaining = tonumber(state[1]), tonumber(state[2])
local last, expiry = tonumber(state[3]), tonumber(state[4])

if not (tokens and remaining and last and expiry and expiry > now) then
  -- A missing or partial hash starts a new window, and so does one that
  -- outlived its stored expiry (its TTL was lost) rather than deny forever.
  tokens, remaining, expiry = burst - 1, limit - 1, now + window * 1000
  local remaining_s = fmt('%d', remaining)
  redis.call('HSET', key, 'b', tokens, 'r', remaining_s, 't', fmt('%d', now), 'e', fmt('%d', expiry))
  redis.call('PEXPIREAT', key, expiry)
  if tokens >= 1 then
    return {'allow', {policy, window_s, remaining_s}}
  end
  return {'allow', {policy, window_s, remaining_s, fmt('%d', refill > 0 and ceil(window / refill) or window)}}
end

-- Same rounding as Redis TTL, without asking for it.
local ttl = floor((expiry - now + 500) / 1000)
local elapsed = now - last
if elapsed < 0 then elapsed = 0 end -- TIME can step back
if refill > 0 then
  tokens = tokens + refill * elapsed / window / 1000
end

if tokens >= 1 and remaining >= 1 then
  tokens, remaining = tokens - 1, remaining - 1
  local remaining_s = fmt('%d', remaining)
  redis.call('HSET', key, 'b', tokens, 'r', remaining_s, 't', fmt('%d', now))
  if tokens >= 1 then
    return {'allow', {policy, fmt('%d', ttl), remaining_s}}
  end
  return {'allow', {policy, fmt('%d', ttl), remaining_s, fmt('%d', refill > 0 and min(ceil(window / refill), ttl) or ttl)}}
end

-- Nothing comes back before the window ends once remaining is spent or there is no refill.
local retry = ttl
if refill > 0 and remaining >= 1 then
  retry = min(math.abs(ceil(window / refill - elapsed / 1000)), ttl)
end
return {'deny', {policy, fmt('%d', ttl), fmt('%d', remaining), fmt('%d', retry)}}
