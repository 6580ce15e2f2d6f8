-- Several fixed-window limits on one key (e.g. 1 per 5 s and 5 per hour),
-- checked and consumed atomically: one decision per call.
--
-- KEYS[1]  hash key; the only key touched, so the script is Redis Cluster safe
-- ARGV     "<limit>/<window>"..., cost?, now?: one or more limits, each
--          "<limit>/<window>" with limit requests per window seconds, both
--          integers 1..2147483647 without leading zeros, windows all
--          different; then the optional arguments after the last one holding
--          a "/":
--   cost   units this request takes, integer 0..2147483647, default 1. 0
--          peeks: the answer a cost-1 request would get now, with nothing
--          written.
--   now    the time in ms since the epoch, integer 0..9007199254740, default
--          Redis TIME. Window ends are stored, so a caller's clock running
--          ahead of the server's is fine.
-- Each window starts at its first request after the previous one ended, as in
-- fixed_window. A request is admitted when every limit has room for cost, and
-- then it is counted in every window; a request denied by any limit is
-- counted in none.
-- Settle   the cost may also be "-n" or "+n", n 1..2147483647, for a request
--          already served whose actual cost is known. "-n" refunds: gives back
--          up to n units the key holds, never making it better than an
--          untouched key; always "allow"; a key that holds nothing (missing,
--          or its window over) is not written. "+n" forces: takes n whatever
--          the limit; "allow" when the state after is within the limit, else
--          "deny". Either way the headers describe the state after (remaining
--          >= 0), retry-after on a deny. Any other cost is refused: "ERR
--          multi_window: cost must be an integer 0..2147483647, '-n' or '+n'
--          with n 1..2147483647, got '<value>'".
--          Refund: every window counting something gives back up to n (one
--          HSET); the expiry stays. Force: every window counts n more, up to
--          4294967294, written as an admitted request is.
-- Reply    {"allow"|"deny", {limit, reset, remaining[, retry_after]}, window}:
--          the headers as strings, for the most restrictive limit: the
--          smallest remaining after this request (ties: the longest reset, then
--          the first given); window its position among the limits, from 0.
--          remaining   limit - count after this request, >= 0;
--          reset       seconds (ceil) until that limit's window ends;
--          retry_after on deny only, seconds (ceil) until the last of the
--                      windows that deny ends: the longest wait among them.
--          Bad opts: error "ERR multi_window: <field> <rule>, got '<value>'".
-- Cost     TIME (unless now is given), HMGET of every window, then on allow
--          one HSET, plus PEXPIREAT when a window starts: 1 to 4 commands,
--          with O(limits) work in the script.
-- Memory   one hash per key with two fields per window, c<window> = count
--          and e<window> = window end (ms), expiring when the longest window
--          ends.

local MAX = 2147483647 -- keeps every value exact in a double
local CAP = 2 * MAX -- the most a forced charge leaves counted
local find, match, fmt, ceil = string.find, string.match, string.format, math.ceil

local n = 0 -- the limits are ARGV[1..n]
for i = #ARGV, 1, -1 do
  if find(ARGV[i], '/', 1, true) then
    n = i
    break
  end
end
if n == 0 then
  return redis.error_reply("ERR multi_window: opts must hold at least one \"<limit>/<window>\", got '"
    .. (ARGV[1] or '') .. "'")
end

local limits, limit_strs, windows, fields, seen = {}, {}, {}, {}, {}
for i = 1, n do
  local v = ARGV[i]
  local l_s, w_s = match(v, '^([1-9]%d*)/([1-9]%d*)$')
  local l, w = tonumber(l_s), tonumber(w_s)
  local rule = not l and 'must be "<limit>/<window>" with positive integers'
    or (l > MAX or w > MAX) and 'must have limit and window <= 2147483647'
    or seen[w] and 'must not repeat the window of opt ' .. seen[w]
  if rule then
    return redis.error_reply("ERR multi_window: opt " .. i .. ' ' .. rule .. ", got '" .. v .. "'")
  end
  seen[w] = i
  limits[i], limit_strs[i], windows[i] = l, l_s, w
  fields[2 * i - 1], fields[2 * i] = 'c' .. w_s, 'e' .. w_s
end

local cost_s, now_s = ARGV[n + 1], ARGV[n + 2]
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
    return redis.error_reply("ERR multi_window: cost must be an integer 0..2147483647, '-n' or '+n' with n 1..2147483647, got '" .. cost_s .. "'")
  end
end
if now_s then
  now = find(now_s, '^%d+$') and tonumber(now_s)
  if not now or now > 9007199254740 then
    return redis.error_reply("ERR multi_window: now " .. (now and 'must be <= 9007199254740'
      or 'must be a non-negative integer') .. ", got '" .. now_s .. "'")
  end
else
  local time = redis.call('TIME')
  now = time[1] * 1000 + math.floor(time[2] / 1000)
end
local need = cost > 0 and cost or 1 -- a peek answers as a cost-1 request would

local key = KEYS[1]
local stored = redis.call('HMGET', key, unpack(fields))
local counts, ends, denied, started = {}, {}, false, false
for i = 1, n do
  local c, e = tonumber(stored[2 * i - 1]), tonumber(stored[2 * i])
  if not (c and e and e > now) then
    c, e = 0, now + windows[i] * 1000
    started = true
  end
  counts[i], ends[i] = c, e
  if c + need > limits[i] then denied = true end
end

if sign == '-' then
  -- Only windows that count something give back; the key's expiry stays. A window begun
  -- this very millisecond and given back in full is no window: its fields go, as if nothing
  -- had been taken (a stack's denial gives back this way), and the key with the last of them.
  local writes, gone = {}, {}
  for i = 1, n do
    if counts[i] > 0 then
      counts[i] = counts[i] > cost and counts[i] - cost or 0
      if counts[i] == 0 and ends[i] == now + windows[i] * 1000 then
        gone[#gone + 1] = fields[2 * i - 1]
        gone[#gone + 1] = fields[2 * i]
      else
        writes[#writes + 1] = fields[2 * i - 1]
        writes[#writes + 1] = fmt('%d', counts[i])
      end
    end
  end
  if #writes > 0 then redis.call('HSET', key, unpack(writes)) end
  if #gone > 0 then redis.call('HDEL', key, unpack(gone)) end
elseif sign or (not denied and cost > 0) then
  local writes, last = {}, 0
  for i = 1, n do
    local c = counts[i] + cost
    if sign then
      if c > CAP then c = CAP end
      counts[i] = c
    end
    writes[#writes + 1] = fields[2 * i - 1]
    writes[#writes + 1] = fmt('%d', c)
    writes[#writes + 1] = fields[2 * i]
    writes[#writes + 1] = fmt('%d', ends[i])
    if ends[i] > last then last = ends[i] end
  end
  redis.call('HSET', key, unpack(writes))
  if started then redis.call('PEXPIREAT', key, last) end
end
if sign then
  -- The reply describes the state after; a forced charge denies past any limit.
  denied = false
  for i = 1, n do
    if sign == '+' and counts[i] > limits[i] then denied = true end
  end
  need = 1 -- retry_after is when a cost-1 request passes
end

-- The most restrictive limit, and on deny the longest wait among those that deny.
local pick, pick_left, pick_reset, retry = 0, 0, 0, 0
for i = 1, n do
  local left = limits[i] - counts[i]
  if not (denied or sign) then left = left - need end
  if left < 0 then left = 0 end
  local reset = ceil((ends[i] - now) / 1000)
  if pick == 0 or left < pick_left or (left == pick_left and reset > pick_reset) then
    pick, pick_left, pick_reset = i, left, reset
  end
  if denied and counts[i] + need > limits[i] and reset > retry then retry = reset end
end

local headers = {limit_strs[pick], fmt('%d', pick_reset), fmt('%d', pick_left)}
if denied then
  headers[4] = fmt('%d', retry)
  return {'deny', headers, pick - 1}
end
return {'allow', headers, pick - 1}
