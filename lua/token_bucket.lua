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

-- Only plain digits pass, so "1.5", "1e3", " 3" and missing values are refused;
-- the upper bound keeps every value exact in Lua's doubles and valid for PEXPIREAT.
local function invalid(name, v, max)
  local n = v and v:match('^%d+$') and tonumber(v)
  local broken
  if not n then
    broken = 'must be a positive integer'
  elseif n < 1 then
    broken = name == 'burst' and 'must be >= 1' or 'must be a positive integer'
  elseif n > max then
    broken = name == 'burst' and 'must be <= limit' or 'must be <= 2147483647'
  end
  if broken then
    return redis.error_reply(string.format("ERR token_bucket: %s %s, got '%s'", name, broken, v or ''))
  end
end

local err = invalid('limit', ARGV[1], 2147483647)
  or invalid('window', ARGV[2], 2147483647)
  or invalid('burst', ARGV[3], tonumber(ARGV[1]))
if err then
  return err
end

local key = KEYS[1]
local limit, window, burst = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local refill = limit - burst -- tokens added per window; 0 means no refill
local fmt = string.format
local policy = fmt('%d %d;w=%d;burst=%d;policy=token_bucket', limit, limit, window, burst)

local time = redis.call('TIME')
local now = time[1] * 1000 + math.floor(time[2] / 1000)
local state = redis.call('HMGET', key, 'b', 'r', 't', 'e')
local tokens, remaining = tonumber(state[1]), tonumber(state[2])
local last, expiry = tonumber(state[3]), tonumber(state[4])

if not (tokens and remaining and last and expiry) then
  -- A missing or partial hash starts a new window.
  tokens, remaining, expiry = burst - 1, limit - 1, now + window * 1000
  redis.call('HSET', key, 'b', tokens, 'r', remaining, 't', now, 'e', expiry)
  redis.call('PEXPIREAT', key, expiry)
  local headers = {policy, fmt('%d', window), fmt('%d', remaining)}
  if tokens < 1 then
    headers[4] = fmt('%d', refill > 0 and math.ceil(window / refill) or window)
  end
  return {'allow', headers}
end

-- Same rounding as Redis TTL, without asking for it.
local ttl = math.max(math.floor((expiry - now + 500) / 1000), 0)
local elapsed = math.max(now - last, 0) -- TIME can step back
if refill > 0 then
  tokens = tokens + refill * elapsed / window / 1000
end

if tokens >= 1 and remaining >= 1 then
  tokens, remaining = tokens - 1, remaining - 1
  redis.call('HSET', key, 'b', tokens, 'r', remaining, 't', now)
  local headers = {policy, fmt('%d', ttl), fmt('%d', remaining)}
  if tokens < 1 then
    headers[4] = fmt('%d', refill > 0 and math.min(math.ceil(window / refill), ttl) or ttl)
  end
  return {'allow', headers}
end

-- Nothing comes back before the window ends once remaining is spent or there is no refill.
local retry = ttl
if refill > 0 and remaining >= 1 then
  retry = math.min(math.abs(math.ceil(window / refill - elapsed / 1000)), ttl)
end
return {'deny', {policy, fmt('%d', ttl), fmt('%d', remaining), fmt('%d', retry)}}
