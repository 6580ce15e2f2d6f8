-- Sliding-window counter rate limiter (weighted two-window estimate): one
-- atomic decision per call.
--
-- KEYS[1]  state key; the only key touched, so the script is Redis Cluster safe
-- ARGV[1]  limit   requests per window, integer 1..2147483647
-- ARGV[2]  window  window length in seconds, integer 1..2147483647
-- ARGV[3]  cost    optional, units this request takes, integer 0..2147483647,
--                  default 1. 0 peeks: the answer a cost-1 request would get
--                  now, with nothing written.
-- ARGV[4]  now     optional, the time in ms since the epoch, integer
--                  0..9007199254740, default Redis TIME. Expiry is decided by
--                  the stored window start either way, so a caller's clock
--                  running ahead of the server's is fine.
-- Windows start at multiples of the window length since the epoch. With
-- previous and current the counts of the last and the current window, and
-- elapsed the ms since the current one started:
--          estimate = previous * (window_ms - elapsed) / window_ms + current
-- and a request is admitted when estimate + cost <= limit. Counts are
-- integers; the estimate is recomputed on every call and never stored, so no
-- rounding error accumulates.
-- Settle   the cost may also be "-n" or "+n", n 1..2147483647, for a request
--          already served whose actual cost is known. "-n" refunds: gives back
--          up to n units the key holds, never making it better than an
--          untouched key; always "allow"; a key that holds nothing (missing,
--          or its window over) is not written. "+n" forces: takes n whatever
--          the limit; "allow" when the state after is within the limit, else
--          "deny". Either way the headers describe the state after (remaining
--          >= 0), retry-after on a deny. Any other cost is refused: "ERR
--          sliding_window: cost must be an integer 0..2147483647, '-n' or '+n'
--          with n 1..2147483647, got '<value>'".
--          Refund: from the current window's count first, then the previous
--          one's; SET with the key's own expiry, or DEL once both are 0.
--          Force: the current count goes past the limit up to 4294967294; the
--          key expires two windows after the current one started.
-- Reply    {"allow"|"deny", {limit, reset, remaining[, retry_after]}} as strings:
--          remaining   floor(limit - estimate) after this request, >= 0;
--          reset       seconds (ceil) until the estimate decays to 0 with no
--                      further requests: the end of the next window once the
--                      current one counts anything, else the end of this one;
--          retry_after on deny only, seconds (ceil) until the estimate has
--                      room for cost as the previous window's weight decays;
--                      the reset when cost > limit, which never passes.
--          Bad opts: error "ERR sliding_window: <field> <rule>, got '<value>'".
-- Cost     TIME (unless ARGV[4]), GET, and SET ... PXAT (Redis >= 6.2) on
--          allow: 1 to 3 commands, always the same steps.
-- Memory   one short string "<window start ms> <current> <previous>" per key,
--          expiring two windows after the current one started, when both
--          counts have aged out.

local MAX = 2147483647 -- keeps every value exact in a double
local CAP = 2 * MAX -- the most a forced charge leaves counted
local find, match, fmt, floor, ceil = string.find, string.match, string.format, math.floor, math.ceil
local limit_s, window_s, cost_s, now_s = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local limit, window = tonumber(limit_s), tonumber(window_s)

-- tonumber alone would also take "1.5e1", "0x10" and " 3".
if not (limit and window and limit <= MAX and window <= MAX
    and find(limit_s, '^[1-9]%d*$') and find(window_s, '^[1-9]%d*$')) then
  local names = {'limit', 'window'}
  for i = 1, 2 do
    local v = ARGV[i] or ''
    local n = find(v, '^%d+$') and tonumber(v)
    local rule = (not n or n < 1) and 'must be a positive integer'
      or n > MAX and 'must be <= 2147483647'
    if rule then
      return redis.error_reply("ERR sliding_window: " .. names[i] .. ' ' .. rule .. ", got '" .. v .. "'")
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
    return redis.error_reply("ERR sliding_window: cost must be an integer 0..2147483647, '-n' or '+n' with n 1..2147483647, got '" .. cost_s .. "'")
  end
end
if now_s then
  now = find(now_s, '^%d+$') and tonumber(now_s)
  if not now or now > 9007199254740 then
    return redis.error_reply("ERR sliding_window: now " .. (now and 'must be <= 9007199254740'
      or 'must be a non-negative integer') .. ", got '" .. now_s .. "'")
  end
else
  local time = redis.call('TIME')
  now = time[1] * 1000 + floor(time[2] / 1000)
end
local need = cost > 0 and cost or 1 -- a peek answers as a cost-1 request would

local key, span = KEYS[1], window * 1000
local start = now - now % span
local current, previous, ends = 0, 0, nil
local stored = redis.call('GET', key)
if stored then
  local s, c, p = match(stored, '^(%d+) (%d+) (%d+)$')
  s = tonumber(s)
  if s == start then
    current, previous, ends = tonumber(c), tonumber(p), start + 2 * span
  elseif s == start - span then
    previous, ends = tonumber(c), start + span
  end
end

local elapsed = now - start
-- Seconds until the key holds nothing: two windows after the current count, one after the
-- previous.
local function reset_s(current, previous)
  if current > 0 then return ceil((start + 2 * span - now) / 1000) end
  if previous > 0 then return ceil((start + span - now) / 1000) end
  return 0
end
local left = limit - (previous * (span - elapsed) / span + current)
if sign then
  if sign == '-' then
    -- From the current window's count first, then the previous one's.
    if current + previous > 0 then
      local back = current < cost and current or cost
      current, cost = current - back, cost - back
      previous = previous > cost and previous - cost or 0
      if current + previous > 0 then
        -- The key's own expiry: a refund never extends it.
        redis.call('SET', key, fmt('%d %d %d', start, current, previous), 'PXAT', ends)
      else
        redis.call('DEL', key)
      end
    end
  else
    current = current + cost
    if current > CAP then current = CAP end
    redis.call('SET', key, fmt('%d %d %d', start, current, previous), 'PXAT', start + 2 * span)
  end
  left = limit - (previous * (span - elapsed) / span + current)
  if sign == '-' or left >= 0 then
    return {'allow', {limit_s, fmt('%d', reset_s(current, previous)), fmt('%d', left > 0 and floor(left) or 0)}}
  end
  need = 1 -- denied: retry_after is when a cost-1 request passes
elseif need <= left then
  if cost > 0 then
    redis.call('SET', key, fmt('%d %d %d', start, current + cost, previous), 'PXAT', start + 2 * span)
  end
  return {'allow', {limit_s, fmt('%d', ceil((start + 2 * span - now) / 1000)), fmt('%d', floor(left - need))}}
end

local remaining = floor(left)
if remaining < 0 then remaining = 0 end
local reset = reset_s(current, previous)
local retry = reset
if need <= limit then
  local wait
  if current + need <= limit then
    -- Room comes within this window, as the previous window's weight decays.
    wait = span - elapsed - (limit - need - current) * span / previous
  else
    -- Only in the next window, where this window's count is the one decaying.
    wait = span - elapsed + span - (limit - need) * span / current
  end
  retry = ceil(wait / 1000)
  if retry < 0 then retry = 0 end
end
return {'deny', {limit_s, fmt('%d', reset), fmt('%d', remaining), fmt('%d', retry)}}
