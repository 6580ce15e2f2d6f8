-- Calendar quota: at most limit units per calendar day, ISO week or month in
-- local time at a fixed UTC offset or in an IANA time zone, e.g. 10000
-- requests a month, renewed on the 1st at midnight. One atomic decision per
-- call.
--
-- KEYS[1]  state key; the only key touched, so the script is Redis Cluster safe
-- ARGV[1]  limit   units per period, integer 1..2147483647
-- ARGV[2]  period  "day", "week" (ISO: from Monday 00:00) or "month" (from the
--                  1st, 00:00)
-- ARGV[3]  utc_offset_minutes  the local time's offset from UTC in minutes,
--                  integer -1439..1439 (-300 for UTC-05:00, 330 for
--                  UTC+05:30), a fixed offset; or an IANA time zone name
--                  ("Europe/Berlin": led by a letter, then letters, digits,
--                  '/', '_', '-', '+', at most 64 bytes), whose rules this
--                  script cannot know: its caller finds the period's end for
--                  `now` and passes both (ARGV[5], ARGV[6]).
-- ARGV[4]  cost    optional, units this request takes, integer 0..2147483647,
--                  default 1. 0 peeks: the answer a cost-1 request would get
--                  now, with nothing written.
-- ARGV[5]  now     optional, the time in ms since the epoch, integer
--                  0..9007199254740, default Redis TIME. The stored period end
--                  says which period a count belongs to, so a caller's clock
--                  running ahead of the server's is fine. Required with a
--                  time zone: the period's end was found for it.
-- ARGV[6]  period_end  with a time zone only, and then required: when the
--                  period holding `now` ends there, in ms since the epoch,
--                  integer, after `now` and at most 32 days on (a month of 31
--                  days and a change of offset). Never sent with an offset, so
--                  that call is what it always was.
-- The period is found with integer day arithmetic (days since 1970-01-01 to
-- a civil date and back, proleptic Gregorian), so month lengths and leap
-- years are exact; Redis Lua has no os.date.
-- Settle   the cost may also be "-n" or "+n", n 1..2147483647, for a request
--          already served whose actual cost is known. "-n" refunds: gives back
--          up to n units the key holds, never making it better than an
--          untouched key; always "allow"; a key that holds nothing (missing,
--          or its window over) is not written. "+n" forces: takes n whatever
--          the limit; "allow" when the state after is within the limit, else
--          "deny". Either way the headers describe the state after (remaining
--          >= 0), retry-after on a deny. Any other cost is refused: "ERR
--          calendar_quota: cost must be an integer 0..2147483647, '-n' or '+n'
--          with n 1..2147483647, got '<value>'".
--          Refund: SET of the lower count with the same expiry, DEL at 0.
--          Force: the count goes past the limit up to 4294967294; the key
--          expires a minute after the period ends, as always.
-- Reply    {"allow"|"deny", {limit, reset, remaining[, retry_after]}} as strings:
--          reset        seconds (ceil) until the period ends;
--          remaining    what the period has left after this request;
--          retry_after  on deny only: the reset, when the quota renews (also
--                       when cost > limit, which no period admits).
--          Bad opts: error "ERR calendar_quota: <field> <rule>, got '<value>'".
-- Cost     TIME (unless ARGV[5]), GET, and SET ... PXAT (Redis >= 6.2) on an
--          admitted cost: 1 to 3 commands.
-- Memory   one short string "<period end ms> <count>" per key, expiring a
--          minute after the period ends.

local MAX = 2147483647 -- keeps every value exact in a double
local CAP = 2 * MAX -- the most a forced charge leaves counted
local DAY = 86400000
local MARGIN = 60000 -- a key outlives its period by this much
local find, match, fmt, floor, ceil = string.find, string.match, string.format, math.floor, math.ceil
local limit_s, period, offset_s, cost_s, now_s = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local MONTH_MAX = 32 * DAY -- the longest a period in a time zone lasts, and some
local limit = tonumber(limit_s)

-- tonumber alone would also take "1.5e1", "0x10" and " 3".
if not (limit and limit <= MAX and find(limit_s, '^[1-9]%d*$')) then
  local v = limit_s or ''
  local n = find(v, '^%d+$') and tonumber(v)
  local rule = (not n or n < 1) and 'must be a positive integer' or n > MAX and 'must be <= 2147483647'
  if rule then
    return redis.error_reply("ERR calendar_quota: limit " .. rule .. ", got '" .. v .. "'")
  end
  limit_s = fmt('%d', limit) -- leading zeros
end
if period ~= 'day' and period ~= 'week' and period ~= 'month' then
  return redis.error_reply("ERR calendar_quota: period must be day, week or month, got '"
    .. (period or '') .. "'")
end
local offset = offset_s and find(offset_s, '^%-?%d+$') and tonumber(offset_s)
-- A time zone: its name's form only; whether it is one, its caller knows.
local zoned = not offset and offset_s and find(offset_s, '^%a[%w/_+-]*$') and #offset_s <= 64
if zoned then
  offset = 0
elseif offset_s and find(offset_s, '^%a') then
  return redis.error_reply("ERR calendar_quota: utc_offset_minutes must be an integer from -1439 to 1439 or an IANA time zone name, got '"
    .. offset_s .. "'")
elseif not offset or offset < -1439 or offset > 1439 then
  return redis.error_reply("ERR calendar_quota: utc_offset_minutes must be an integer from -1439 to 1439, got '"
    .. (offset_s or '') .. "'")
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
    return redis.error_reply("ERR calendar_quota: cost must be an integer 0..2147483647, '-n' or '+n' with n 1..2147483647, got '" .. cost_s .. "'")
  end
end
if now_s then
  now = find(now_s, '^%d+$') and tonumber(now_s)
  if not now or now > 9007199254740 then
    return redis.error_reply("ERR calendar_quota: now " .. (now and 'must be <= 9007199254740'
      or 'must be a non-negative integer') .. ", got '" .. now_s .. "'")
  end
elseif zoned then
  return redis.error_reply("ERR calendar_quota: now must be given with a time zone, got ''")
else
  local time = redis.call('TIME')
  now = time[1] * 1000 + floor(time[2] / 1000)
end
local need = cost > 0 and cost or 1 -- a peek answers as a cost-1 request would

-- The local day (days since 1970-01-01 at the offset), then the period's first
-- and next-first local days.
local ends
if zoned then
  local ends_s = ARGV[6] or ''
  ends = find(ends_s, '^%d+$') and tonumber(ends_s)
  if not ends or ends <= now or ends > now + MONTH_MAX then
    return redis.error_reply("ERR calendar_quota: period_end must be an integer after now and at most "
      .. fmt('%d', MONTH_MAX) .. " ms on, got '" .. ends_s .. "'")
  end
end
local shift = offset * 60000
local day = floor((now + shift) / DAY)
local first, next_first
if zoned then
  first, next_first = 0, 0
elseif period == 'day' then
  first, next_first = day, day + 1
elseif period == 'week' then
  first = day - (day + 3) % 7 -- 1970-01-01 was a Thursday; % is floored
  next_first = first + 7
else
  -- Civil date of `day` (H. Hinnant's civil_from_days), enough for y, m, d.
  local z = day + 719468
  local era = floor(z / 146097)
  local doe = z - era * 146097
  local yoe = floor((doe - floor(doe / 1460) + floor(doe / 36524) - floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + floor(yoe / 4) - floor(yoe / 100))
  local mp = floor((5 * doy + 2) / 153)
  local d = doy - floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400 + (m <= 2 and 1 or 0)
  local length
  if m == 2 then
    length = (y % 4 == 0 and (y % 100 ~= 0 or y % 400 == 0)) and 29 or 28
  else
    length = 31 - (m - 1) % 7 % 2
  end
  first = day - (d - 1)
  next_first = first + length
end
ends = ends or next_first * DAY - shift
local reset_s = fmt('%d', ceil((ends - now) / 1000))

local key = KEYS[1]
local count = 0
local stored = redis.call('GET', key)
if stored then
  local e, c = match(stored, '^(%d+) (%d+)$')
  -- A count of another period (or of another offset) is over.
  if tonumber(e) == ends then count = tonumber(c) end
end

if sign == '-' then
  if count > 0 then
    count = count > cost and count - cost or 0
    if count > 0 then
      redis.call('SET', key, fmt('%d %d', ends, count), 'PXAT', ends + MARGIN)
    else
      redis.call('DEL', key)
    end
  end
  return {'allow', {limit_s, reset_s, fmt('%d', count < limit and limit - count or 0)}}
end

if sign == '+' then
  count = count + cost
  if count > CAP then count = CAP end
  redis.call('SET', key, fmt('%d %d', ends, count), 'PXAT', ends + MARGIN)
  if count <= limit then
    return {'allow', {limit_s, reset_s, fmt('%d', limit - count)}}
  end
  return {'deny', {limit_s, reset_s, '0', reset_s}}
end

if count + need <= limit then
  if cost > 0 then
    redis.call('SET', key, fmt('%d %d', ends, count + cost), 'PXAT', ends + MARGIN)
  end
  return {'allow', {limit_s, reset_s, fmt('%d', limit - count - need)}}
end
-- Nothing is taken; what is left may be below a lowered limit's count.
local left = limit - count
if left < 0 then left = 0 end
return {'deny', {limit_s, reset_s, fmt('%d', left), reset_s}}
