-- Concurrency limiter: at most `limit` requests in flight per key, across every
-- instance. Each admitted request holds a lease until it is released (when its
-- response body ends) or expires (when the instance holding it died first).
--
-- KEYS[1]  sorted set key: one member per unit held, scored by its expiry in
--          ms; the only key touched, so the script is Redis Cluster safe
-- ARGV[1]  limit   units in flight, integer 1..2147483647
-- ARGV[2]  lease   seconds a lease lives unless released, integer
--                  1..2147483647: the longest a crashed instance's leases keep
--                  their units after their last renewal (the library renews a
--                  lease in flight every third of it)
-- ARGV[3]  cost    optional, default 1. 'n', integer 0..2147483647: units this
--                  request holds; 0 peeks, the answer a cost-1 request would
--                  get now, with only expired leases removed. '-n', n
--                  1..2147483647: releases the n units of lease ARGV[5].
-- ARGV[4]  now     optional, the time in ms since the epoch, integer
--                  0..9007199254740, or '' (the default) for Redis TIME.
--                  Leases end by their scores, so a caller's clock running
--                  ahead of the server's is fine.
-- ARGV[5]  lease id, 1 to 64 ASCII letters, digits, '_' or '-'; required
--          unless cost is 0. A cost-1 lease is the member '<id>'; a cost-n
--          lease the members '<id>:1' .. '<id>:n'. Acquiring a lease id that is
--          already held renews it: its members take the new expiry, and the
--          units it holds are not counted against it again, so a renewal is
--          admitted at the limit and a duplicated call counts once; releasing
--          one that is not held changes nothing.
-- A lease taken (or last renewed) at t holds its units while now < t + lease_ms;
-- a request is admitted when the units held by other leases plus cost are
-- <= limit.
-- Reply    {"allow"|"deny", {limit, reset, remaining[, retry_after]}} as strings:
--          remaining   limit - units held after the call, >= 0 (a peek: as if
--                      a cost-1 request had been admitted);
--          reset       seconds (ceil) until the oldest lease still held
--                      expires unless renewed: when a unit comes back at the
--                      latest if its holder dies, 0 when none is held;
--          retry_after on deny only, '1': a unit comes back as soon as any
--                      request in flight ends, which no clock foresees.
--          A release always answers "allow".
--          Bad opts: error "ERR concurrency: <field> <rule>, got '<value>'".
-- Cost     TIME (without ARGV[4]), ZREMRANGEBYSCORE, ZCARD, ZMSCORE (one per
--          1000 units, only at the limit: does this lease hold units already?),
--          then ZADD (one per 1000 units) and PEXPIREAT on allow, and ZRANGE for
--          the reset: 4 to 7 commands; a release is ZREM instead of ZMSCORE,
--          ZADD and PEXPIREAT. A cost above the limit is denied before any
--          per-unit command.
--          ZREMRANGEBYSCORE is O(log n + leases expired); ZADD and ZREM are
--          O(cost log n).
-- Memory   one sorted set per key, one member per unit held (about 40 bytes
--          each while the set is a listpack), at most limit members; gone when
--          the last lease is released or expires.

local MAX = 2147483647 -- keeps every value exact in a double
local find, fmt, floor, ceil, min = string.find, string.format, math.floor, math.ceil, math.min
local limit_s, lease_s, cost_s, now_s, id = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local limit, lease = tonumber(limit_s), tonumber(lease_s)

-- tonumber alone would also take "1.5e1", "0x10" and " 3".
if not (limit and lease and limit <= MAX and lease <= MAX
    and find(limit_s, '^[1-9]%d*$') and find(lease_s, '^[1-9]%d*$')) then
  local names = {'limit', 'lease'}
  for i = 1, 2 do
    local v = ARGV[i] or ''
    local n = find(v, '^%d+$') and tonumber(v)
    local rule = (not n or n < 1) and 'must be a positive integer'
      or n > MAX and 'must be <= 2147483647'
    if rule then
      return redis.error_reply("ERR concurrency: " .. names[i] .. ' ' .. rule .. ", got '" .. v .. "'")
    end
  end
  limit_s = fmt('%d', limit) -- leading zeros
end

local cost, release, now = 1, false, nil
if cost_s then
  local digits = cost_s
  if find(cost_s, '^%-') then
    release, digits = true, cost_s:sub(2)
  end
  cost = find(digits, '^%d+$') and tonumber(digits)
  if not cost or cost > MAX or (release and cost < 1) then
    return redis.error_reply("ERR concurrency: cost must be an integer 0..2147483647,"
      .. " or '-n' (n >= 1) to release a lease, got '" .. cost_s .. "'")
  end
end
if now_s and now_s ~= '' then
  now = find(now_s, '^%d+$') and tonumber(now_s)
  if not now or now > 9007199254740 then
    return redis.error_reply("ERR concurrency: now " .. (now and 'must be <= 9007199254740'
      or "must be a non-negative integer or ''") .. ", got '" .. now_s .. "'")
  end
else
  local time = redis.call('TIME')
  now = time[1] * 1000 + floor(time[2] / 1000)
end
if cost > 0 and not (id and #id <= 64 and find(id, '^[%w_%-]+$')) then
  return redis.error_reply("ERR concurrency: lease must be 1 to 64 letters, digits, '_' or '-', got '"
    .. (id or '') .. "'")
end

-- The members of lease `id` holding `n` units, from the `from`-th, at most 1000.
local function members(n, from, score)
  if n == 1 then
    return score and {score, id} or {id}
  end
  local batch, last = {}, min(n, from + 999)
  for i = from, last do
    if score then
      batch[#batch + 1] = score
    end
    batch[#batch + 1] = id .. ':' .. i
  end
  return batch
end

local key = KEYS[1]
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)

local function answer(decision, held, taken)
  local reset = 0
  if held > 0 then
    local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2]
    reset = ceil((oldest - now) / 1000)
  end
  local remaining = limit - held - taken
  if remaining < 0 then remaining = 0 end
  if decision == 'deny' then
    return {'deny', {limit_s, fmt('%d', reset), fmt('%d', remaining), '1'}}
  end
  return {'allow', {limit_s, fmt('%d', reset), fmt('%d', remaining)}}
end

if release then
  for from = 1, cost, 1000 do
    redis.call('ZREM', key, unpack(members(cost, from)))
  end
  return answer('allow', redis.call('ZCARD', key), 0)
end

local held = redis.call('ZCARD', key)
local need = cost > 0 and cost or 1 -- a peek answers as a cost-1 request would
if need > limit then
  return answer('deny', held, 0) -- never admitted, whatever is held
end
-- Only at the limit do the units this lease holds already matter (a renewal, or a
-- duplicated call): they are not counted against it again.
local mine = 0
if cost > 0 and held + need > limit then
  for from = 1, cost, 1000 do
    for _, score in ipairs(redis.call('ZMSCORE', key, unpack(members(cost, from)))) do
      if score then
        mine = mine + 1
      end
    end
  end
end
if held - mine + need > limit then
  return answer('deny', held, 0)
end
if cost == 0 then
  return answer('allow', held, need)
end
local expiry = now + lease * 1000
for from = 1, cost, 1000 do
  redis.call('ZADD', key, unpack(members(cost, from, expiry)))
end
if held == 0 then
  redis.call('PEXPIREAT', key, expiry)
else
  -- Never shortens the life of a lease another caller's clock set further.
  redis.call('PEXPIREAT', key, expiry, 'GT')
end
return answer('allow', redis.call('ZCARD', key), 0)
