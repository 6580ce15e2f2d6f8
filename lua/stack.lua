-- Stacked limits: several built-in limits (per client, per tenant, global; or
-- 10/s and 1000/day) decided in one atomic call, consumed from all only if all
-- allow.
--
-- Not a script of its own: the library sends it after a function
-- `algorithm(name)` that returns the built-in `name`'s script wrapped as
-- `function(KEYS, ARGV) <script> end` (nil for another name), so every limit
-- runs its own script, as it runs alone when given `now`.
--
-- KEYS[i]  the i-th limit's key. On Redis Cluster every key of one call is in
--          one slot (the caller groups the keys by slot).
-- ARGV[1]  now, the time in ms since the epoch, or '' for Redis TIME: one time
--          for every limit of the call
-- then, for each limit in KEYS order:
--          name   a built-in's name
--          soft   '1': its denial does not deny the call (shadow mode), '0'
--          cost   units this request takes from it, integer 0..2147483647
--          count  how many options follow
--          opts   its options, as it takes them alone
--          ends   '' or, for a calendar_quota in a time zone, the end of the
--                 period holding `now` in ms (found by the caller, which
--                 then sends `now` too: the end was found for it)
-- Each limit runs with ARGV = {opts..., cost, now[, ends]}. A limit that
-- denies (and is not soft) ends the call: every limit before it that took
-- units gets them back, the latest first, and the limits after it are not
-- run. Most give back
-- by their own refund (the same script with cost '-n'): at the same `now` it
-- undoes the take (the count is what it was, a key the take made is gone, a
-- window begun this very millisecond and given back in full is no window), so
-- the next call decides as if the denied one never came. A token_bucket's
-- refill and retry-after hang on the time of its last take, which a refund
-- cannot move back: its key is snapshotted (DUMP, PEXPIRETIME) before its
-- take, when a limit follows it, and restored byte for byte. A limit's own
-- denial writes nothing that counts, as alone.
-- Reply    one string: each run limit's own reply, in KEYS order, as a record
--          of its decision, then each of its header values after a '\31', then
--          the window that decided after a '\29' when the limit says
--          (multi_window); the records separated by '\30' (no header value can
--          hold any of these bytes).
--          Fewer records than KEYS when the last one's limit denied. One string
--          costs Redis and the client far less than nested arrays. An error of
--          any limit (its error reply, or a command's error such as WRONGTYPE)
--          is the reply, after the same give-back of the limits before it.
-- Needs Redis >= 7: PEXPIRETIME (fixed_window's refund), and `now` given to
-- every limit.
-- Cost     each limit's own commands, plus a DUMP and a PEXPIRETIME for each
--          token_bucket but the last limit; on a denial, each earlier limit's
--          refund (a RESTORE or DEL for a token_bucket) too.

local n = #KEYS
local now = ARGV[1]
if now == '' then
  local time = redis.call('TIME')
  now = string.format('%d', time[1] * 1000 + math.floor(time[2] / 1000))
end

-- taken[i] = the argv limit i took with, when it took units: its refund runs
-- with the same options, `now` and period end, and the cost (at costs[i]) as
-- '-n'. saved[i] = {dump or false, expiry in ms or -1}: the snapshot of a
-- limit restored instead.
local runs, taken, costs, saved = {}, {}, {}, {}

local function give_back(last)
  for i = last, 1, -1 do
    local argv, snapshot = taken[i], saved[i]
    if snapshot then
      local key, dump, expiry = KEYS[i], snapshot[1], snapshot[2]
      if not dump then
        redis.call('DEL', key)
      elseif expiry > 0 then
        redis.call('RESTORE', key, expiry, dump, 'REPLACE', 'ABSTTL')
      else
        redis.call('RESTORE', key, 0, dump, 'REPLACE')
      end
    elseif argv then
      local at = costs[i]
      argv[at] = '-' .. argv[at]
      -- The same script and options that just took: it cannot refuse its own refund.
      runs[i]({KEYS[i]}, argv)
    end
  end
end

local concat = table.concat

local replies, at = {}, 2
for i = 1, n do
  local name, soft, cost, count = ARGV[at], ARGV[at + 1], ARGV[at + 2], tonumber(ARGV[at + 3])
  local run = algorithm(name)
  if not (run and count) then
    give_back(i - 1)
    return redis.error_reply("ERR stack: limit " .. i .. " names no built-in, got '" .. tostring(name) .. "'")
  end
  local argv = {}
  for j = 1, count do argv[j] = ARGV[at + 3 + j] end
  argv[count + 1], argv[count + 2] = cost, now
  local ends = ARGV[at + 4 + count]
  if ends ~= '' then argv[count + 3] = ends end
  at = at + 5 + count
  local snapshot
  if name == 'token_bucket' and i < n then
    snapshot = {redis.call('DUMP', KEYS[i]), redis.call('PEXPIRETIME', KEYS[i])}
  end
  -- A command's error (WRONGTYPE) raises: caught, so that the limits before
  -- get their units back all the same.
  local ok, reply = pcall(run, {KEYS[i]}, argv)
  if not ok then
    give_back(i - 1)
    return redis.error_reply(type(reply) == 'table' and reply.err or tostring(reply))
  end
  if reply.err then
    give_back(i - 1)
    return reply
  end
  local headers = reply[2]
  replies[i] = #headers > 0 and reply[1] .. '\31' .. concat(headers, '\31') or reply[1]
  if reply[3] then replies[i] = replies[i] .. '\29' .. reply[3] end
  if reply[1] == 'deny' and soft ~= '1' then
    give_back(i - 1)
    return concat(replies, '\30')
  end
  if reply[1] == 'allow' and cost ~= '0' and i < n then
    runs[i], taken[i], costs[i], saved[i] = run, argv, count + 1, snapshot
  end
end
return concat(replies, '\30')
