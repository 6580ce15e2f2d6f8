-- Token-bucket rate limiter: one atomic decision per call.
--
-- KEYS[1]  bucket key; the only key touched, so the script is Redis Cluster safe
-- ARGV[1]  limit   requests per window, integer 1..2147483647
-- ARGV[2]  window  window length in seconds, integer 1..2147483647
-- ARGV[3]  burst   tokens available at once, integer 1..limit; the other
--                  limit - burst tokens refill evenly over the window
-- ARGV[4]  cost    optional, tokens this request takes, integer 0..2147483647,
--                  default 1; it needs tokens >= cost and remaining >= cost.
--                  0 peeks: the answer a cost-1 request would get now, with
--                  nothing written.
-- ARGV[5]  now     optional, the time in ms since the epoch, integer
--                  0..9007199254740, default Redis TIME. Expiry is decided by
--                  the stored expiry either way, so a caller's clock running
--                  ahead of the server's is fine.
-- Settle   the cost may also be "-n" or "+n", n 1..2147483647, for a request
--          already served whose actual cost is known. "-n" refunds: gives back
--          up to n units the key holds, never making it better than an
--          untouched key; always "allow"; a key that holds nothing (missing,
--          or its window over) is not written. "+n" forces: takes n whatever
--          the limit; "allow" when the state after is within the limit, else
--          "deny". Either way the headers describe the state after (remaining
--          >= 0), and retry-after whenever a cost-1 request would be denied.
--          Any other cost is refused: "ERR token_bucket: cost must be an
--          integer 0..2147483647, '-n', '+n' or '~n' with n 1..2147483647, got
--          '<value>'".
--          Refund: tokens back up to what a bucket untouched since its window
--          began holds now (never lowering tokens above it), remaining up to
--          limit; the expiry stays, and a window begun at now and given back in
--          full is deleted. Force: tokens
--          and remaining go negative, at most one burst of token debt and one
--          limit of remaining; everything resets with the window as usual. One
--          HSET (and PEXPIREAT on a new window).
-- Batch    the cost "~n", n 1..2147483647, takes up to n: g = min(n, whole
--          tokens, remaining) units, "allow" when g >= 1, else "deny" with
--          nothing written. A local batch reserves its units this way. The
--          reply carries g and the milliseconds left of the window after the
--          headers: {decision, {headers}, g, ttl_ms}, the headers as a take of
--          g would give them, a deny's as a cost-1 deny's; ttl_ms tells a
--          batch to the millisecond when its units stop counting.
-- Reply    {"allow"|"deny", {limit, reset, remaining[, retry_after]}}: the
--          x-ratelimit-limit ("<limit> <limit>;w=<window>;burst=<burst>;
--          policy=token_bucket"), x-ratelimit-reset (seconds left of the
--          window, rounded as Redis TTL rounds), x-ratelimit-remaining (what
--          the window has left after this request) and, on every deny and on
--          an allow that leaves less than one token, retry-after (seconds),
--          all as strings. retry-after on a deny: the window's reset when
--          remaining < cost or nothing refills, else
--          ceil((cost - whole tokens the last take left) * window / refill
--          - seconds since that take), at most the reset; for cost 1 that is
--          the reference's ceil(window / refill - seconds since the last take).
--          Bad opts: error "ERR token_bucket: <field> <rule>, got '<value>'".
-- Cost     TIME (unless ARGV[5]) + HMGET per call, then HSET to take tokens,
--          plus PEXPIREAT when the window starts: 4 on a new key, 3 on allow,
--          2 on deny or peek (one fewer each with ARGV[5]).
-- Memory   one small hash with a TTL per key, gone when the window ends:
--          b = tokens (float), r = remaining, t = last refill (ms), e = expiry (ms).
--          Keeping the expiry in the hash spares a PTTL call.

local MAX = 2147483647 -- keeps every value exact in a double and valid for PEXPIREAT
local find, fmt, floor, ceil, min = string.find, string.format, math.floor, math.ceil, math.min
local limit_s, window_s, burst_s, cost_s, now_s = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
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
    return redis.error_reply("ERR token_bucket: cost must be an integer 0..2147483647, '-n', '+n' or '~n' with n 1..2147483647, got '" .. cost_s .. "'")
  end
end
if now_s then
  now = find(now_s, '^%d+$') and tonumber(now_s)
  if not now or now > 9007199254740 then
    return redis.error_reply("ERR token_bucket: now " .. (now and 'must be <= 9007199254740'
      or 'must be a non-negative integer') .. ", got '" .. now_s .. "'")
  end
end
local need = cost > 0 and cost or 1 -- a peek answers as a cost-1 request would

local key = KEYS[1]
local refill = limit - burst -- tokens added per window; 0 means no refill
local policy = limit_s .. ' ' .. limit_s .. ';w=' .. window_s .. ';burst=' .. burst_s .. ';policy=token_bucket'

if not now then
  local time = redis.call('TIME')
  now = time[1] * 1000 + floor(time[2] / 1000)
end
local state = redis.call('HMGET', key, 'b', 'r', 't', 'e')
local tokens, remaining = tonumber(state[1]), tonumber(state[2])
local last, expiry = tonumber(state[3]), tonumber(state[4])

if sign then
  local live = tokens and remaining and last and expiry and expiry > now
  if sign == '-' and not live then
    -- No window to give back to: nothing is written.
    return {'allow', {policy, window_s, limit_s}}
  end
  local ttl, taken, elapsed = window, 0, 0
  if live then
    ttl = floor((expiry - now + 500) / 1000)
    elapsed = now - last
    -- TIME can step back, and another server's clock run ahead: a time behind the last refill
    -- refills nothing and never moves it back (the writes keep the later), or the refill
    -- between would be given again.
    if elapsed < 0 then elapsed = 0 end
    taken = tokens
    if refill > 0 then
      tokens = tokens + refill * elapsed / window / 1000
    end
  else
    tokens, remaining, expiry = burst, limit, now + window * 1000
  end
  local grant
  if sign == '~' then
    grant = min(cost, floor(tokens), remaining)
    if grant < 1 then
      -- As a cost-1 request's deny (only a live bucket can have nothing left).
      local retry = ttl
      if refill > 0 and remaining >= 1 then
        retry = min(math.abs(ceil((1 - floor(taken)) * window / refill - elapsed / 1000)), ttl)
      end
      return {'deny', {policy, fmt('%d', ttl), fmt('%d', remaining > 0 and remaining or 0), fmt('%d', retry)}, 0, expiry - now}
    end
    tokens, remaining = tokens - grant, remaining - grant
  elseif sign == '-' then
    -- Never above what a bucket untouched since its window began holds now (refill since may
    -- already have filled it), nor above a full window. Below that bound a refund is the
    -- exact inverse of a take at the same now: tokens - cost + cost is tokens in a double.
    local full = burst
    if refill > 0 then full = burst + refill * (now - (expiry - window * 1000)) / window / 1000 end
    if tokens + cost <= full then
      tokens = tokens + cost
    elseif tokens < full then
      tokens = full
    end
    remaining = min(remaining + cost, limit)
    if tokens >= burst and remaining >= limit and expiry == now + window * 1000 then
      -- A window begun this very millisecond and given back in full is no window: the key
      -- goes, as if nothing had been taken (a stack's denial gives back this way).
      redis.call('DEL', key)
      return {'allow', {policy, window_s, limit_s}}
    end
  else
    -- Debt of at most one bucket, and one window.
    tokens, remaining = tokens - cost, remaining - cost
    if tokens < -burst then tokens = -burst end
    if remaining < -limit then remaining = -limit end
  end
  local remaining_s = fmt('%d', remaining)
  if live then
    redis.call('HSET', key, 'b', tokens, 'r', remaining_s, 't', fmt('%d', last > now and last or now))
  else
    redis.call('HSET', key, 'b', tokens, 'r', remaining_s, 't', fmt('%d', now), 'e', fmt('%d', expiry))
    redis.call('PEXPIREAT', key, expiry)
  end
  if grant then
    -- The headers a take of the units granted gets.
    local headers = {policy, fmt('%d', ttl), remaining_s}
    if tokens < 1 then
      headers[4] = fmt('%d', refill > 0 and min(ceil(window / refill), ttl) or ttl)
    end
    return {'allow', headers, grant, expiry - now}
  end
  local headers = {policy, fmt('%d', ttl), remaining > 0 and remaining_s or '0'}
  if tokens < 1 or remaining < 1 then
    -- When a cost-1 request passes again.
    local retry = ttl
    if refill > 0 and remaining >= 1 then
      retry = min(ceil((1 - tokens) * window / refill), ttl)
    end
    headers[4] = fmt('%d', retry)
  end
  if sign == '-' or (tokens >= 0 and remaining >= 0) then
    return {'allow', headers}
  end
  return {'deny', headers}
end

if not (tokens and remaining and last and expiry and expiry > now) then
  -- A missing or partial hash starts a new window, and so does one that
  -- outlived its stored expiry (its TTL was lost) rather than deny forever.
  if need > burst then
    -- A full bucket cannot cover the cost: nothing is taken, nothing written.
    local retry = window
    if refill > 0 and limit >= need then
      retry = min(ceil((need - burst) * window / refill), window)
    end
    return {'deny', {policy, window_s, limit_s, fmt('%d', retry)}}
  end
  tokens, remaining, expiry = burst - need, limit - need, now + window * 1000
  local remaining_s = fmt('%d', remaining)
  if cost > 0 then
    redis.call('HSET', key, 'b', tokens, 'r', remaining_s, 't', fmt('%d', now), 'e', fmt('%d', expiry))
    redis.call('PEXPIREAT', key, expiry)
  end
  if tokens >= 1 then
    return {'allow', {policy, window_s, remaining_s}}
  end
  return {'allow', {policy, window_s, remaining_s, fmt('%d', refill > 0 and ceil(window / refill) or window)}}
end

-- Same rounding as Redis TTL, without asking for it.
local ttl = floor((expiry - now + 500) / 1000)
local elapsed = now - last
if elapsed < 0 then elapsed = 0 end -- TIME can step back: the HSET keeps the later time
local taken = tokens -- what the last take left
if refill > 0 then
  tokens = tokens + refill * elapsed / window / 1000
end

if tokens >= need and remaining >= need then
  tokens, remaining = tokens - need, remaining - need
  local remaining_s = fmt('%d', remaining)
  if cost > 0 then
    redis.call('HSET', key, 'b', tokens, 'r', remaining_s, 't', fmt('%d', last > now and last or now))
  end
  if tokens >= 1 then
    return {'allow', {policy, fmt('%d', ttl), remaining_s}}
  end
  return {'allow', {policy, fmt('%d', ttl), remaining_s, fmt('%d', refill > 0 and min(ceil(window / refill), ttl) or ttl)}}
end

-- Nothing comes back before the window ends once remaining is spent or there is no refill.
-- Counting only whole tokens left by the last take keeps cost 1 at the reference's value.
local retry = ttl
if refill > 0 and remaining >= need then
  retry = min(math.abs(ceil((need - floor(taken)) * window / refill - elapsed / 1000)), ttl)
end
-- remaining is below 0 only after a forced charge.
return {'deny', {policy, fmt('%d', ttl), fmt('%d', remaining > 0 and remaining or 0), fmt('%d', retry)}}
