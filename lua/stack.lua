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
-- Each limit runs with ARGV = {opts..., cost, now}. A limit that denies (and
-- is not soft) ends the call: every limit before it that took units gets them
-- back, the latest first, by its own refund (the same script with cost '-n'),
-- and the limits after it are not run. A refund at the same `now` undoes the
-- take: the count is what it was, a key the take made is gone (a window begun
-- this very millisecond and given back in full is no window), and the next
-- call decides as if the denied one never came. A limit's own denial writes
-- nothing that counts, as alone.
-- Reply    one string: each run limit's own reply, in KEYS order, as a record
--          of its decision, then each of its header values after a '\31'; the
--          records separated by '\30' (no header value can hold either byte).
--          Fewer records than KEYS when the last one's limit denied. One string
--          costs Redis and the client far less than nested arrays. An error of
--          any limit (its error reply, or a command's error such as WRONGTYPE)
--          is the reply, after the same give-back of the limits before it.
-- Needs Redis >= 7: PEXPIRETIME (fixed_window's refund), and `now` given to
-- every limit.
-- Cost     each limit's own commands and nothing more when every limit allows;
--          on a denial, each earlier limit's refund too.

local n = #KEYS
local now = ARGV[1]
if now == '' then
  local time = redis.call('TIME')
  now = string.format('%d', time[1] * 1000 + math.floor(time[2] / 1000))
end

-- taken[i] = the argv limit i took with, when it took units: its refund runs
-- with the same options and `now`, and the cost as '-n'.
local runs, taken = {}, {}

local function give_back(last)
  for i = last, 1, -1 do
    local argv = taken[i]
    if argv then
      local at = #argv - 1
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
  at = at + 4 + count
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
  if reply[1] == 'deny' and soft ~= '1' then
    give_back(i - 1)
    return concat(replies, '\30')
  end
  if reply[1] == 'allow' and cost ~= '0' and i < n then
    runs[i], taken[i] = run, argv
  end
end
return concat(replies, '\30')
