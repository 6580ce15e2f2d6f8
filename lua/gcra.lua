-- Generic cell rate algorithm (GCRA) rate limiter, as redis-cell and go-redis
-- redis_rate implement it: one atomic decision per call.
--
-- KEYS[1]  key holding the theoretical arrival time (TAT); the only key
--          touched, so the script is Redis Cluster safe
-- ARGV[1]  limit   requests per window, integer 1..2147483647
-- ARGV[2]  window  window length in seconds, integer 1..2147483647
-- ARGV[3]  burst   requests admitted at once, integer 1..limit (any rate and
--                  burst fit: scale limit and window together)
-- ARGV[4]  cost    optional, units this request takes, integer 0..2147483647,
--                  default 1. 0 peeks: the answer a cost-1 request would get
--                  now, with nothing written.
-- ARGV[5]  now     optional, the time in ms since the epoch, integer
--                  0..9007199254740, default Redis TIME (to the microsecond).
--                  Expiry is decided by the stored TAT either way, so a
--                  caller's clock running ahead of the server's is fine.
-- Time is in integer microseconds, so every step is exact in a double and no
-- rounding error accumulates: emission interval T = ceil(window * 10^6 / limit)
-- (rounded up, so the rate never exceeds limit per window), burst tolerance
-- tau = T * burst. With tat = max(stored TAT, now), new_tat = tat + T * cost
-- and allow_at = new_tat - tau, a request is admitted when allow_at <= now;
-- new_tat is then stored.
-- Settle   the cost may also be "-n" or "+n", n 1..2147483647, for a request
--          already served whose actual cost is known. "-n" refunds: gives back
--          up to n units the key holds, never making it better than an
--          untouched key; always "allow"; a key that holds nothing (missing,
--          or its window over) is not written. "+n" forces: takes n whatever
--          the limit; "allow" when the state after is within the limit, else
--          "deny". Either way the headers describe the state after (remaining
--          >= 0), retry-after on a deny. Any other cost is refused: "ERR gcra:
--          cost must be an integer 0..2147483647, '-n' or '+n' with n
--          1..2147483647, got '<value>'".
--          Refund: the TAT moves back by T * n, never before now (DEL then).
--          Force: the TAT moves forward by T * n, to at most now + 2 * tau
--          (one burst of debt); the key expires at the TAT.
-- Reply    {"allow"|"deny", {limit, reset, remaining[, retry_after]}} as strings,
--          as redis_rate defines them:
--          limit       burst: remaining counts down from it;
--          remaining   allow: floor((now - allow_at) / T); deny: 0;
--          reset       seconds (ceil) until the TAT, when the state is back to
--                      empty: new_tat - now on allow, tat - now on deny;
--          retry_after on deny only, seconds (ceil) of allow_at - now (a cost
--                      above burst never passes; the figure then only says how
--                      far over it is).
--          Bad opts: error "ERR gcra: <field> <rule>, got '<value>'".
-- Cost     TIME (unless ARGV[5]), GET, and SET ... PXAT (Redis >= 6.2) on
--          allow: 1 to 3 commands, always the same steps.
-- Memory   one integer string (the TAT in us) per key, expiring at the TAT.

local MAX = 2147483647 -- keeps every value exact in a double
local find, fmt, floor, ceil = string.find, string.format, math.floor, math.ceil
local limit_s, window_s, burst_s, cost_s, now_s = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local limit, window, burst = tonumber(limit_s), tonumber(window_s), tonumber(burst_s)

-- tonumber alone would also take "1.5e1", "0x10" and " 3".
if not (limit and window and burst and limit <= MAX and window <= MAX and burst <= limit
    and find(limit_s, '^[1-9]%d*$') and find(window_s, '^[1-9]%d*$') and find(burst_s, '^[1-9]%d*$')) then
  local names = {'limit', 'window', 'burst'}
  for i = 1, 3 do
    local v = ARGV[i] or ''
    local n = find(v, '^%d+$') and tonumber(v)
    local rule = (not n or n < 1) and 'must be a positive integer'
      or i < 3 and n > MAX and 'must be <= 2147483647'
      or i == 3 and n > limit and 'must be <= limit'
    if rule then
      return redis.error_reply("ERR gcra: " .. names[i] .. ' ' .. rule .. ", got '" .. v .. "'")
    end
  end
  burst_s = fmt('%d', burst) -- leading zeros
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
    return redis.error_reply("ERR gcra: cost must be an integer 0..2147483647, '-n' or '+n' with n 1..2147483647, got '" .. cost_s .. "'")
  end
end
if now_s then
  now = find(now_s, '^%d+$') and tonumber(now_s)
  if not now or now > 9007199254740 then
    return redis.error_reply("ERR gcra: now " .. (now and 'must be <= 9007199254740'
      or 'must be a non-negative integer') .. ", got '" .. now_s .. "'")
  end
  now = now * 1000
else
  local time = redis.call('TIME')
  now = time[1] * 1000000 + time[2]
end
local need = cost > 0 and cost or 1 -- a peek answers as a cost-1 request would

local key = KEYS[1]
local interval = ceil(window * 1000000 / limit)
local tat = tonumber(redis.call('GET', key))
if not tat or tat < now then tat = now end
if sign == '-' then
  if tat > now then
    tat = tat - interval * cost
    if tat > now then
      redis.call('SET', key, fmt('%d', tat), 'PXAT', ceil(tat / 1000))
    else
      tat = now -- never before now: an empty state, which is no key
      redis.call('DEL', key)
    end
  end
  return {'allow', {burst_s, fmt('%d', ceil((tat - now) / 1000000)),
    fmt('%d', floor((now - (tat - interval * burst)) / interval))}}
end

if sign == '+' then
  -- Ahead of now by at most two burst tolerances: one burst of debt.
  local forced, top = tat + interval * cost, now + 2 * interval * burst
  if forced > top then forced = top end
  redis.call('SET', key, fmt('%d', forced), 'PXAT', ceil(forced / 1000))
  local reset_s, allow_at = fmt('%d', ceil((forced - now) / 1000000)), forced - interval * burst
  if allow_at <= now then
    return {'allow', {burst_s, reset_s, fmt('%d', floor((now - allow_at) / interval))}}
  end
  return {'deny', {burst_s, reset_s, '0', fmt('%d', ceil((allow_at + interval - now) / 1000000))}}
end

local new_tat = tat + interval * need
local allow_at = new_tat - interval * burst

if allow_at <= now then
  if cost > 0 then
    redis.call('SET', key, fmt('%d', new_tat), 'PXAT', ceil(new_tat / 1000))
  end
  return {'allow', {burst_s, fmt('%d', ceil((new_tat - now) / 1000000)),
    fmt('%d', floor((now - allow_at) / interval))}}
end
return {'deny', {burst_s, fmt('%d', ceil((tat - now) / 1000000)), '0',
  fmt('%d', ceil((allow_at - now) / 1000000))}}
