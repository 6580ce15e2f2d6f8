-- Sliding-log rate limiter: exact, one atomic decision per call.
--
-- KEYS[1]  sorted set key; the only key touched, so the script is Redis Cluster safe
-- ARGV[1]  limit   requests per window, integer 1..2147483647
-- ARGV[2]  window  window length in seconds, integer 1..2147483647
-- ARGV[3]  cost    optional, units this request takes, integer 0..2147483647,
--                  default 1; a cost-N request logs N entries. 0 peeks: the
--                  answer a cost-1 request would get now, with nothing written
--                  (entries that left the window are still removed).
-- ARGV[4]  now     optional, the time in ms since the epoch, integer
--                  0..9007199254740, default Redis TIME. Entries leave by their
--                  scores either way, so a caller's clock running ahead of the
--                  server's is fine.
-- An entry logged at t counts while now < t + window_ms; a request is admitted
-- when the entries in the window plus cost are <= limit.
-- Settle   the cost may also be "-n" or "+n", n 1..2147483647, for a request
--          already served whose actual cost is known. "-n" refunds: gives back
--          up to n units the key holds, never making it better than an
--          untouched key; always "allow"; a key that holds nothing (missing,
--          or its window over) is not written. "+n" forces: takes n whatever
--          the limit; "allow" when the state after is within the limit, else
--          "deny". Either way the headers describe the state after (remaining
--          >= 0), retry-after on a deny. Any other cost is refused: "ERR
--          sliding_log: cost must be an integer 0..2147483647, '-n' or '+n'
--          with n 1..2147483647, got '<value>'".
--          Refund: ZREMRANGEBYRANK of the n newest entries at or before now
--          (ZCOUNT finds them), then of the newest after it; the expiry stays.
--          Force: logs min(n, limit) entries, then trims the log to its newest
--          limit entries (only those ever decide anything), so the set never
--          holds more than limit entries; the decision counts all n.
-- Reply    {"allow"|"deny", {limit, reset, remaining[, retry_after]}} as strings:
--          remaining   limit - entries in the window after this request, >= 0;
--          reset       seconds (ceil) until the newest entry leaves: the
--                      window itself on allow;
--          retry_after on deny only, seconds (ceil) until the entry whose
--                      leaving makes room for cost leaves (the
--                      (entries + cost - limit)-th oldest); the reset when
--                      cost > limit, which never passes.
--          Bad opts: error "ERR sliding_log: <field> <rule>, got '<value>'".
-- Cost     TIME (unless ARGV[4]), ZREMRANGEBYSCORE, ZCARD, then ZADD (one per
--          1000 entries) + PEXPIREAT on allow, or one or two ZRANGE on deny:
--          2 to 5 commands. ZREMRANGEBYSCORE is O(log n + entries removed),
--          the one step whose work is not bounded in advance; ZADD is
--          O(cost log n), ZRANGE O(log n).
-- Memory   one sorted set per key, one entry per unit admitted in the last
--          window, up to limit entries: about 30 bytes an entry while the set
--          is a listpack (128 entries by default), about 100 beyond. Gone a
--          window after the newest entry.
--
-- Members are "<ms>-<n>", n counting up from the number of entries in the
-- window: unique for any number of requests in the same ms while time moves
-- forward. Should TIME step back onto an older ms, ZADD's count of new members
-- shows a clash and the loop adds the missing entries under later numbers.

local MAX = 2147483647 -- keeps every value exact in a double
local find, fmt, floor, ceil, min = string.find, string.format, math.floor, math.ceil, math.min
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
      return redis.error_reply("ERR sliding_log: " .. names[i] .. ' ' .. rule .. ", got '" .. v .. "'")
    end
  end
  limit_s, window_s = fmt('%d', limit), fmt('%d', window) -- leading zeros
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
    return redis.error_reply("ERR sliding_log: cost must be an integer 0..2147483647, '-n' or '+n' with n 1..2147483647, got '" .. cost_s .. "'")
  end
end
if now_s then
  now = find(now_s, '^%d+$') and tonumber(now_s)
  if not now or now > 9007199254740 then
    return redis.error_reply("ERR sliding_log: now " .. (now and 'must be <= 9007199254740'
      or 'must be a non-negative integer') .. ", got '" .. now_s .. "'")
  end
else
  local time = redis.call('TIME')
  now = time[1] * 1000 + floor(time[2] / 1000)
end
local need = cost > 0 and cost or 1 -- a peek answers as a cost-1 request would

local key, span = KEYS[1], window * 1000
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - span)
local count = redis.call('ZCARD', key)

if sign == '-' then
  -- The newest entries at or before now go first (a take at now logged its own there), then
  -- the newest of those a clock ahead logged after now: an entry after now outlives one at
  -- now, and giving it back in the place of one at now would leave the log looser than
  -- before the take. An empty set is no key.
  if count > 0 then
    local upto = redis.call('ZCOUNT', key, '-inf', now)
    local back = upto < cost and upto or cost
    if back > 0 then redis.call('ZREMRANGEBYRANK', key, upto - back, upto - 1) end
    if cost > back and count > upto then redis.call('ZREMRANGEBYRANK', key, -(cost - back), -1) end
    count = count > cost and count - cost or 0
  end
  local reset = 0
  if count > 0 then
    reset = ceil((redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2] + span - now) / 1000)
  end
  return {'allow', {limit_s, fmt('%d', reset), fmt('%d', count < limit and limit - count or 0)}}
end

local forced = sign == '+'
if forced or count + need <= limit then
  if cost > 0 then
    -- Only the newest limit entries ever decide anything: a forced charge logs no more.
    local logged = forced and min(cost, limit) or cost
    local at = fmt('%d', now)
    local added, seq = 0, count
    while added < logged do
      local batch = {}
      for i = 1, min(logged - added, 1000) do
        batch[2 * i - 1] = at
        batch[2 * i] = at .. '-' .. seq
        seq = seq + 1
      end
      added = added + redis.call('ZADD', key, unpack(batch))
    end
    if forced then redis.call('ZREMRANGEBYRANK', key, 0, -limit - 1) end
    redis.call('PEXPIREAT', key, now + span)
  end
  if not forced then
    return {'allow', {limit_s, window_s, fmt('%d', limit - count - need)}}
  end
  count = count + cost -- every unit counts toward the decision
  if count <= limit then
    return {'allow', {limit_s, window_s, fmt('%d', limit - count)}}
  end
  -- The log now holds limit entries: a cost-1 request waits for the oldest.
  local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2]
  return {'deny', {limit_s, window_s, '0', fmt('%d', ceil((oldest + span - now) / 1000))}}
end

local remaining = limit - count
if remaining < 0 then remaining = 0 end
local reset, retry = 0, 0
if count > 0 then
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2]
  reset = ceil((newest + span - now) / 1000)
  retry = reset
  local leaving = count + need - limit -- entries that must leave first
  if need <= limit and leaving < count then
    local last = redis.call('ZRANGE', key, leaving - 1, leaving - 1, 'WITHSCORES')[2]
    retry = ceil((last + span - now) / 1000)
  end
end
return {'deny', {limit_s, fmt('%d', reset), fmt('%d', remaining), fmt('%d', retry)}}
