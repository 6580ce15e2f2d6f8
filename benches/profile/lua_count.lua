-- Lua VM instructions and C function calls of one script, by part, outside
-- Redis: lua5.1 (the Lua of Redis) runs the script against a stand-in `redis`
-- table that keeps keys in plain tables, so its logic runs as it would in
-- Redis without Redis' own time. Redis' sandbox has no `debug` library; this
-- is why the count is made here.
--
-- Usage: lua5.1 benches/profile/lua_count.lua SCRIPT CALLS ARG...
-- Runs SCRIPT CALLS times on one key with ARGV = ARG..., from an empty store,
-- and prints one line per call:
--   call=<n> <part>=<instructions>/<C calls> ... calls:<name>=<n>,...
-- Parts, by the line an instruction belongs to: `options` (before the line
-- that reads KEYS[1]: parsing and checking ARGV), `commands` (lines calling
-- redis.call: building their arguments), `reply` (lines returning or
-- formatting with fmt), `decision` (the rest: the algorithm's arithmetic).
-- A floor, which reads KEYS[1] only inside redis.call, has no `options`.

local path, calls = arg[1], tonumber(arg[2])
assert(path and calls, 'usage: lua_count.lua SCRIPT CALLS ARG...')
local argv = {}
for i = 3, #arg do argv[#argv + 1] = arg[i] end

local lines, keys_line = {}, 0
for text in io.lines(path) do
  lines[#lines + 1] = text
  if keys_line == 0 and not text:find('^%s*%-%-') and text:find('KEYS%[1%]')
      and not text:find('redis%.call') then
    keys_line = #lines
  end
end

local function part(line)
  local text = lines[line] or ''
  if text:find('redis%.call') then return 'commands' end
  if line < keys_line then return 'options' end
  if text:find('^%s*return') or text:find('fmt%(') then return 'reply' end
  return 'decision'
end

-- The stand-in: strings, hashes and sorted sets in Lua tables, replies typed
-- as Redis gives them to Lua (integers as numbers, bulk strings as strings,
-- nil as false). Expiry is not modelled: every call sees the keys it left.
local now_ms = 1700000000123
local strings, hashes, zsets = {}, {}, {}
local function tostr(v) return type(v) == 'number' and string.format('%.17g', v) or v end
local commands = {}
function commands.TIME() return {tostring(math.floor(now_ms / 1000)), tostring(now_ms % 1000 * 1000)} end
function commands.GET(k) return strings[k] or false end
function commands.SET(k, v) strings[k] = tostr(v) return {ok = 'OK'} end
function commands.INCRBY(k, by) local n = (tonumber(strings[k]) or 0) + tonumber(by) strings[k] = tostr(n) return n end
function commands.INCR(k) return commands.INCRBY(k, 1) end
function commands.DECRBY(k, by) return commands.INCRBY(k, -tonumber(by)) end
function commands.DEL(k) local had = strings[k] or hashes[k] or zsets[k] strings[k], hashes[k], zsets[k] = nil, nil, nil return had and 1 or 0 end
function commands.EXPIRE() return 1 end
function commands.PEXPIREAT() return 1 end
function commands.TTL(k) return (strings[k] or hashes[k] or zsets[k]) and 60 or -2 end
function commands.PEXPIRETIME(k) return (strings[k] or hashes[k] or zsets[k]) and now_ms + 60000 or -2 end
function commands.HMGET(k, ...)
  local h, out = hashes[k] or {}, {}
  for i, f in ipairs({...}) do out[i] = h[f] or false end
  return out
end
function commands.HSET(k, ...)
  local h, a, added = hashes[k] or {}, {...}, 0
  hashes[k] = h
  for i = 1, #a, 2 do
    if not h[a[i]] then added = added + 1 end
    h[a[i]] = tostr(a[i + 1])
  end
  return added
end
function commands.ZREMRANGEBYSCORE(k, _, max)
  local z, kept, removed = zsets[k] or {}, {}, 0
  for _, e in ipairs(z) do
    if e[1] <= tonumber(max) then removed = removed + 1 else kept[#kept + 1] = e end
  end
  zsets[k] = kept
  return removed
end
function commands.ZCARD(k) return #(zsets[k] or {}) end
function commands.ZADD(k, ...)
  local z, a = zsets[k] or {}, {...}
  zsets[k] = z
  for i = 1, #a, 2 do z[#z + 1] = {tonumber(a[i]), a[i + 1]} end
  table.sort(z, function(x, y) return x[1] < y[1] end)
  return #a / 2
end
function commands.ZRANGE(k, from, to)
  local z = zsets[k] or {}
  from, to = tonumber(from), tonumber(to)
  if from < 0 then from = #z + from end
  if to < 0 then to = #z + to end
  local out = {}
  for i = from + 1, to + 1 do out[#out + 1] = z[i][2] out[#out + 1] = tostr(z[i][1]) end
  return out
end
redis = {
  call = function(name, ...)
    local command = commands[name:upper()]
    assert(command, 'the stand-in has no ' .. name)
    return command(...)
  end,
  error_reply = function(message) return {err = message} end,
}

local chunk = assert(loadfile(path))
local source = '@' .. path
for call = 1, calls do
  KEYS, ARGV = {'profile:key'}, argv
  local instructions, ccalls, names = {}, {}, {}
  debug.sethook(function(event)
    if event == 'count' then
      local info = debug.getinfo(2, 'Sl')
      if info.source == source then
        local p = part(info.currentline)
        instructions[p] = (instructions[p] or 0) + 1
      end
    else
      local callee = debug.getinfo(2, 'nS')
      local caller = debug.getinfo(3, 'Sl')
      if callee.what == 'C' and caller and caller.source == source then
        local p = part(caller.currentline)
        ccalls[p] = (ccalls[p] or 0) + 1
        local name = callee.name or '?'
        names[name] = (names[name] or 0) + 1
      end
    end
  end, 'c', 1)
  local reply = chunk()
  debug.sethook()
  if type(reply) == 'table' and reply.err then error(reply.err) end
  local out = {'call=' .. call}
  for _, p in ipairs({'options', 'commands', 'decision', 'reply'}) do
    out[#out + 1] = p .. '=' .. (instructions[p] or 0) .. '/' .. (ccalls[p] or 0)
  end
  local list = {}
  for name, n in pairs(names) do list[#list + 1] = name .. '=' .. n end
  table.sort(list)
  out[#out + 1] = 'calls:' .. table.concat(list, ',')
  print(table.concat(out, ' '))
  now_ms = now_ms + 1000
end
