-- Fixed-window rate limiter: one atomic decision per call.
--
-- KEYS[1]  counter key; the only key touched, so the script is Redis Cluster safe
-- ARGV[1]  limit   requests per window, integer 1..2147483647
-- ARGV[2]  window  window length in seconds, integer 1..2147483647
-- ARGV[3]  cost    optional, units this request takes, integer 0..2147483647,
--                  default 1. 0 peeks: the answer a cost-1 request would get
--                  now, with nothing written.
-- ARGV[4]  now     optional, the time in ms since the epoch, integer
--                  0..9007199254740, default Redis TIME. The caller's clock may
--                  run ahead of the server's, so with it every expiry decision
--                  comes from PEXPIRETIME (Redis >= 7), never from Redis having
--                  deleted the key.
-- Settle   the cost may also be "-n" or "+n", n 1..2147483647, for a request
--          already served whose actual cost is known. "-n" refunds: gives back
--          up to n units the key holds, never making it better than an
--          untouched key; always "allow"; a key that holds nothing (missing,
--          or its window over) is not written. "+n" forces: takes n whatever
--          the limit; "allow" when the state after is within the limit, else
--          "deny". Either way the headers describe the state after (remaining
--          >= 0). Any other cost is refused: "ERR fixed_window: cost must be
--          an integer 0..2147483647, '-n', '+n' or '~n' with n 1..2147483647,
--          got '<value>'".
--          Refund: DECRBY, or DEL once the count reaches 0 (GET and TTL or
--          PEXPIRETIME first); the TTL stays. Force: INCRBY, the count going
--          past the limit up to 4294967294 (2 * 2147483647, one SET KEEPTTL to
--          cap it), the window's TTL set as a take sets it.
-- Batch    the cost "~n", n 1..2147483647, takes up to n: g = min(n, what the
--          window has left) units, "allow" when g >= 1, else "deny" with
--          nothing written. A local batch reserves its units this way. The
--          reply carries g and the milliseconds left of the window after the
--          headers: {decision, {headers}, g, ttl_ms}, the headers as a take of
--          g would give them (a deny's remaining is 0); ttl_ms tells a batch
--          to the millisecond when its units stop counting. GET, PTTL
--          (PEXPIRETIME) when the key exists, then INCRBY, or SET EX (PXAT)
--          for a new window (or a counter that lost its TTL).
-- Reply    {"allow"|"deny", {limit, reset, remaining}}: the x-ratelimit-limit,
--          x-ratelimit-reset and x-ratelimit-remaining values as strings.
--          reset is the key's TTL rounded as Redis TTL rounds it, so the window
--          is timed by Redis' own clock unless ARGV[4] is given. remaining is
--          what the window has left after this request: 0 on a cost-1 deny.
--          There is no retry-after: the reference sends none.
--          Bad opts: error "ERR fixed_window: <field> <rule>, got '<value>'".
-- Cost     2 commands per call: INCR (INCRBY for cost > 1 or with ARGV[4]),
--          then EXPIRE (PEXPIREAT with ARGV[4]) on the window's first hit or
--          TTL (PEXPIRETIME) after it. One more to undo a denial
--          (DECRBY), to drop a new key a denied cost created (DEL), to restart
--          a window past its stored expiry (SET PXAT) or a counter that lost
--          its TTL. A peek is GET, then TTL (PEXPIRETIME) when the key exists.
-- Memory   one integer string with a TTL per key, gone when the window ends.
--
-- A call INCRs before it knows whether it fits, which spares a read before the
-- write; a denied one takes its INCR back (DECRBY), so the count never passes
-- the limit but by a forced charge, and a refund gives back only what admitted
-- requests took.

local MAX = 2147483647 -- keeps every value exact in a double and valid for EXPIRE
local CAP = 2 * MAX -- the most a forced charge leaves counted
local find, fmt, floor = string.find, string.format, math.floor
local limit_s, window_s, cost_s, now_s = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
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

local cost, now, sign = 1, nil, nil
if cost_s then
  cost = find(cost_s, '^%d+$') and tonumber(cost_s)
  if not cost then
    -- Off the hot path: a refund ('-n'), a forced charge ('+n') or a batch ('~n').
    local digits
    sign, digits = string.match(cost_s, '^([+~-])(%d+)$')
    cost = tonumber(digits)
    if cost == 0 then cost = nil end
  end
  if not cost or cost > MAX then
    return redis.error_reply("ERR fixed_window: cost must be an integer 0..2147483647, '-n', '+n' or '~n' with n 1..2147483647, got '" .. cost_s .. "'")
  end
end
if now_s then
  now = find(now_s, '^%d+$') and tonumber(now_s)
  if not now or now > 9007199254740 then
    return redis.error_reply("ERR fixed_window: now " .. (now and 'must be <= 9007199254740'
      or 'must be a non-negative integer') .. ", got '" .. now_s .. "'")
  end
end

local key = KEYS[1]

if sign == '-' then
  local count, ttl_s = tonumber(redis.call('GET', key)), window_s
  if count and now then
    local expiry = redis.call('PEXPIRETIME', key)
    if expiry > now then ttl_s = fmt('%d', floor((expiry - now + 500) / 1000)) else count = nil end
  elseif count then
    local ttl = redis.call('TTL', key)
    if ttl >= 0 then ttl_s = fmt('%d', ttl) else count = nil end
  end
  if not count then
    -- No window to give back to: nothing is written.
    return {'allow', {limit_s, window_s, limit_s}}
  end
  if count <= cost then
    -- Back to an empty counter, which is no counter at all.
    redis.call('DEL', key)
    return {'allow', {limit_s, window_s, limit_s}}
  end
  count = redis.call('DECRBY', key, cost)
  return {'allow', {limit_s, ttl_s, fmt('%d', count < limit and limit - count or 0)}}
end

if sign == '~' then
  local count, ttl_ms, restart = tonumber(redis.call('GET', key)), window * 1000, true
  if count and now then
    local expiry = redis.call('PEXPIRETIME', key)
    if expiry > now then
      ttl_ms, restart = expiry - now, false
    else
      count = nil -- past its stored expiry: a new window
    end
  elseif count then
    local pttl = redis.call('PTTL', key)
    -- A counter without expiry keeps its count and restarts its window, as a take does.
    if pttl >= 0 then ttl_ms, restart = pttl, false end
  end
  -- Rounded as Redis TTL rounds.
  local ttl_s = fmt('%d', floor((ttl_ms + 500) / 1000))
  count = count or 0
  local grant = limit - count
  if grant > cost then grant = cost end
  if grant < 1 then
    if restart and count > 0 then
      -- A full counter that lost its TTL: its window restarts, as a take's does, or it
      -- would deny forever.
      if now then redis.call('PEXPIREAT', key, now + window * 1000) else redis.call('EXPIRE', key, window) end
    end
    return {'deny', {limit_s, ttl_s, '0'}, 0, ttl_ms}
  end
  if not restart then
    redis.call('INCRBY', key, grant)
  elseif now then
    redis.call('SET', key, count + grant, 'PXAT', now + window * 1000)
  else
    redis.call('SET', key, count + grant, 'EX', window)
  end
  return {'allow', {limit_s, ttl_s, fmt('%d', limit - count - grant)}, grant, ttl_ms}
end

if sign == '+' then
  local count, ttl_s = redis.call('INCRBY', key, cost), window_s
  if count ~= cost and now then
    local expiry = redis.call('PEXPIRETIME', key)
    if expiry > now then
      ttl_s = fmt('%d', floor((expiry - now + 500) / 1000))
    else
      count = cost -- past its stored expiry: a new window
      redis.call('SET', key, cost, 'PXAT', now + window * 1000)
    end
  elseif count ~= cost then
    local ttl = redis.call('TTL', key)
    if ttl >= 0 then ttl_s = fmt('%d', ttl) else redis.call('EXPIRE', key, window) end
  elseif now then
    redis.call('PEXPIREAT', key, now + window * 1000)
  else
    redis.call('EXPIRE', key, window)
  end
  if count > CAP then
    count = CAP
    redis.call('SET', key, fmt('%d', CAP), 'KEEPTTL')
  end
  if count <= limit then
    return {'allow', {limit_s, ttl_s, fmt('%d', limit - count)}}
  end
  return {'deny', {limit_s, ttl_s, '0'}}
end

if cost == 0 then
  local count, ttl_s = tonumber(redis.call('GET', key)), window_s
  if count then
    if now then
      local expiry = redis.call('PEXPIRETIME', key)
      -- Same rounding as Redis TTL.
      if expiry > now then ttl_s = fmt('%d', floor((expiry - now + 500) / 1000)) else count = 0 end
    else
      local ttl = redis.call('TTL', key)
      if ttl >= 0 then ttl_s = fmt('%d', ttl) end
    end
  else
    count = 0
  end
  if count < limit then
    return {'allow', {limit_s, ttl_s, fmt('%d', limit - count - 1)}}
  end
  return {'deny', {limit_s, ttl_s, '0'}}
end

local count
if cost == 1 and not now then
  count = redis.call('INCR', key)
else
  count = redis.call('INCRBY', key, cost)
end

local ttl_s, fresh = window_s, count == cost
if not fresh then
  if now then
    local expiry = redis.call('PEXPIRETIME', key)
    if expiry > now then
      ttl_s = fmt('%d', floor((expiry - now + 500) / 1000))
    else
      -- Past its stored expiry (or without one): this window is over.
      fresh = true
      if cost <= limit then
        redis.call('SET', key, cost, 'PXAT', now + window * 1000)
        return {'allow', {limit_s, window_s, fmt('%d', limit - cost)}}
      end
    end
  else
    local ttl = redis.call('TTL', key)
    if ttl < 0 then
      -- A counter without expiry would deny forever; restart its window instead.
      redis.call('EXPIRE', key, window)
    else
      ttl_s = fmt('%d', ttl)
    end
  end
end

if fresh then
  if cost > limit then
    redis.call('DEL', key)
    return {'deny', {limit_s, window_s, limit_s}}
  end
  if now then
    redis.call('PEXPIREAT', key, now + window * 1000)
  else
    redis.call('EXPIRE', key, window)
  end
  return {'allow', {limit_s, window_s, fmt('%d', limit - count)}}
end

if count <= limit then
  return {'allow', {limit_s, ttl_s, fmt('%d', limit - count)}}
end
redis.call('DECRBY', key, cost)
count = count - cost
return {'deny', {limit_s, ttl_s, fmt('%d', count < limit and limit - count or 0)}}
