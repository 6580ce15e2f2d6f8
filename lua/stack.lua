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
-- is not soft) ends the call: every limit before it is restored to what it
-- held before the call, byte for byte and with its expiry, and the limits
-- after it are not run. A limit's own writes on a denial (fixed_window's
-- counter past its limit) stay, as they would alone.
-- Reply    {reply_1, ..., reply_k}: each run limit's own reply, in KEYS order;
--          k < #KEYS when limit k denied. An error of any limit (its error
--          reply, or a command's error such as WRONGTYPE) is the reply, after
--          the same restore of the limits before it.
-- Needs Redis >= 7: PEXPIRETIME, and `now` given to every limit.
-- Cost     each limit's own commands, plus DUMP and PEXPIRETIME of every key
--          but the last (the last has nothing after it that could deny), and
--          on a denial RESTORE or DEL of every key before the denying one.
--          DUMP is O(size of the key): a sliding_log with many entries costs
--          in proportion, so it is best placed last.

local n = #KEYS
local now = ARGV[1]
if now == '' then
  local time = redis.call('TIME')
  now = string.format('%d', time[1] * 1000 + math.floor(time[2] / 1000))
end

local saved = {} -- saved[i] = {dump or false, expiry in ms or -1}

local function restore(last)
  for i = last, 1, -1 do
    local key, dump, expiry = KEYS[i], saved[i][1], saved[i][2]
    if dump then
      if expiry > 0 then
        redis.call('RESTORE', key, expiry, dump, 'REPLACE', 'ABSTTL')
      else
        redis.call('RESTORE', key, 0, dump, 'REPLACE')
      end
    else
      redis.call('DEL', key)
    end
  end
end

local replies, at = {}, 2
for i = 1, n do
  local name, soft, cost, count = ARGV[at], ARGV[at + 1], ARGV[at + 2], tonumber(ARGV[at + 3])
  local run = algorithm(name)
  if not (run and count) then
    restore(i - 1)
    return redis.error_reply("ERR stack: limit " .. i .. " names no built-in, got '" .. tostring(name) .. "'")
  end
  local argv = {}
  for j = 1, count do argv[j] = ARGV[at + 3 + j] end
  argv[count + 1], argv[count + 2] = cost, now
  at = at + 4 + count
  local key = KEYS[i]
  if i < n then
    saved[i] = {redis.call('DUMP', key), redis.call('PEXPIRETIME', key)}
  end
  -- A command's error (WRONGTYPE) raises: caught, so that the limits before
  -- are restored all the same.
  local ok, reply = pcall(run, {key}, argv)
  if not ok then
    restore(i - 1)
    return redis.error_reply(type(reply) == 'table' and reply.err or tostring(reply))
  end
  if reply.err then
    restore(i - 1)
    return reply
  end
  replies[i] = reply
  if reply[1] == 'deny' and soft ~= '1' then
    restore(i - 1)
    return replies
  end
end
return replies
