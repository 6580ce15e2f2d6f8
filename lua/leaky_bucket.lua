-- Leaky-bucket rate limiter (meter form): one atomic decision per call.
--
-- KEYS[1]  bucket key; the only key touched, so the script is Redis Cluster safe
-- ARGV[1]  limit   bucket capacity, integer 1..2147483647; the bucket leaks
--                  limit units per window
-- ARGV[2]  window  window length in seconds, integer 1..2147483647, with
--                  limit * window <= 9007199254740 so the level stays an exact
--                  integer in a double
-- ARGV[3]  cost    optional, units this request pours in, integer
--                  0..2147483647, default 1. 0 peeks: the answer a cost-1
--                  request would get now, with nothing written.
-- ARGV[4]  now     optional, the time in ms since the epoch, integer
--                  0..9007199254740, default Redis TIME. The level is computed
--                  from the stored level and time either way, so a caller's
--                  clock running ahead of the server's is fine.
-- A request is admitted when level + cost <= limit. The level is kept in
-- unit-milliseconds (a unit is window_ms of them and limit of them leak each
-- ms), so filling and leaking are exact integer steps: no rounding error
-- accumulates however often the bucket is touched.
-- Settle   the cost may also be "-n" or "+n", n 1..2147483647, for a request
--          already served whose actual cost is known. "-n" refunds: gives back
--          up to n units the key holds, never making it better than an
--          untouched key; always "allow"; a key that holds nothing (missing,
--          or its window over) is not written. "+n" forces: takes n whatever
--          the limit; "allow" when the state after is within the limit, else
--          "deny". Either way the headers describe the state after (remaining
--          >= 0), retry-after on a deny. Any other cost is refused: "ERR
--          leaky_bucket: cost must be an integer 0..2147483647, '-n' or '+n'
--          with n 1..2147483647, got '<value>'".
--          Refund: the level drops by n units, never below 0 (DEL when empty);
--          the expiry moves closer. Force: the level goes past capacity, up to
--          twice the capacity (and 2^53 unit-ms); the key expires when that
--          has leaked.
-- Reply    {"allow"|"deny", {limit, reset, remaining[, retry_after]}} as strings:
--          remaining   floor(limit - level) after this request, >= 0;
--          reset       seconds (ceil) until the bucket is empty;
--          retry_after on deny only, seconds (ceil) until the level has
--                      leaked down to limit - cost (never, when cost > limit:
--                      the figure then only says how far over it is).
--          Bad opts: error "ERR leaky_bucket: <field> <rule>, got '<value>'".
-- Cost     TIME (unless ARGV[4]), GET, and SET ... PXAT (Redis >= 6.2) on
--          allow: 1 to 3 commands, always the same steps.
-- Memory   one short string "<level> <ms>" per key, expiring when the bucket
--          has leaked empty.

local MAX = 2147483647 -- keeps every value exact in a double
local find, match, fmt, floor, ceil = string.find, string.match, string.format, math.floor, math.ceil
local limit_s, window_s, cost_s, now_s = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local limit, window = tonumber(limit_s), tonumber(window_s)

-- tonumber alone would also take "1.5e1", "0x10" and " 3".
if not (limit and window and limit <= MAX and window <= MAX and limit * window <= 9007199254740
    and find(limit_s, '^[1-9]%d*$') and find(window_s, '^[1-9]%d*$')) then
  local names = {'limit', 'window'}
  for i = 1, 2 do
    local v = ARGV[i] or ''
    local n = find(v, '^%d+$') and tonumber(v)
    local rule = (not n or n < 1) and 'must be a positive integer'
      or n > MAX and 'must be <= 2147483647'
      or i == 2 and n * limit > 9007199254740 and 'must be <= 9007199254740 / limit'
    if rule then
      return redis.error_reply("ERR leaky_bucket: " .. names[i] .. ' ' .. rule .. ", got '" .. v .. "'")
    end
  end
  limit_s = fmt('%d', limit) -- leading zeros
end

local cost, now, sign = 1, nil, nil
if cost_s then
  cost = find(cost_s, '^%d+$') and tonumber(cost_s)
  if not cost then
    -- Off the hot path: a refund ('-n') or a forced charge ('+n').
    local digits
    sign, digits = string.match(cost_s, '^([+-])(%d+)$')
    cost = tonumber(digits)
    if cost == 0 then cost = nil end
  end
  if not cost or cost > MAX then
    return redis.error_reply("ERR leaky_bucket: cost must be an integer 0..2147483647, '-n' or '+n' with n 1..2147483647, got '" .. cost_s .. "'")
  end
end
if now_s then
  now = find(now_s, '^%d+$') and tonumber(now_s)
  if not now or now > 9007199254740 then
    return redis.error_reply("ERR leaky_bucket: now " .. (now and 'must be <= 9007199254740'
      or 'must be a non-negative integer') .. ", got '" .. now_s .. "'")
  end
else
  local time = redis.call('TIME')
  now = time[1] * 1000 + floor(time[2] / 1000)
end
local need = cost > 0 and cost or 1 -- a peek answers as a cost-1 request would

local key, span = KEYS[1], window * 1000
local capacity, per_s = limit * span, limit * 1000
local level = 0
-- The time every write stores: now, or the stored time when now is behind it. TIME can step
-- back, and another server's clock run ahead: a time behind leaks nothing and never moves the
-- stored time back, or the leak between would be given again.
local since = now
local stored = redis.call('GET', key)
if stored then
  local q, t = match(stored, '^(%d+) (%d+)$')
  q, t = tonumber(q), tonumber(t)
  if q and t then
    local elapsed = now - t
    if elapsed < 0 then elapsed, since = 0, t end
    level = q - elapsed * limit
    if level < 0 then level = 0 end
  end
end

if sign == '-' then
  if level > 0 then
    level = level - cost * span
    if level > 0 then
      -- Empties sooner: the expiry moves closer, never later.
      redis.call('SET', key, fmt('%d %d', level, since), 'PXAT', since + ceil(level / limit))
    else
      level = 0
      redis.call('DEL', key)
    end
  end
  local remaining = floor((capacity - level) / span)
  if remaining < 0 then remaining = 0 end
  return {'allow', {limit_s, fmt('%d', ceil(level / per_s)), fmt('%d', remaining)}}
end

if sign == '+' then
  -- Past capacity by at most one more capacity (and 2^53, to stay exact).
  local after, top = level + cost * span, 2 * capacity
  if top > 9007199254740992 then top = 9007199254740992 end
  if after > top then after = top end
  redis.call('SET', key, fmt('%d %d', after, since), 'PXAT', since + ceil(after / limit))
  if after <= capacity then
    return {'allow', {limit_s, fmt('%d', ceil(after / per_s)), fmt('%d', floor((capacity - after) / span))}}
  end
  return {'deny', {limit_s, fmt('%d', ceil(after / per_s)), '0',
    fmt('%d', ceil((after + span - capacity) / per_s))}}
end

local after = level + need * span
if after <= capacity then
  if cost > 0 then
    redis.call('SET', key, fmt('%d %d', after, since), 'PXAT', since + ceil(after / limit))
  end
  return {'allow', {limit_s, fmt('%d', ceil(after / per_s)), fmt('%d', floor((capacity - after) / span))}}
end

local remaining = floor((capacity - level) / span)
if remaining < 0 then remaining = 0 end
return {'deny', {limit_s, fmt('%d', ceil(level / per_s)), fmt('%d', remaining),
  fmt('%d', ceil((after - capacity) / per_s))}}
