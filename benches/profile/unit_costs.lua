-- What the operations a built-in script is made of cost inside Redis' own Lua,
-- each timed over ARGV[1] iterations with Redis TIME: ns per operation, loop
-- overhead removed. Run with EVAL (it writes nothing): the per-unit costs
-- benches/script_profile.sh multiplies lua_count.lua's counts by.
--
-- Reply: {name, ns, name, ns, ...}
local n = tonumber(ARGV[1])
local find, fmt, floor, tonumber_, tostring_ = string.find, string.format, math.floor, tonumber, tostring
local function now()
  local t = redis.call('TIME')
  return t[1] * 1000000 + t[2]
end
local reply, empty = {}, 0
-- per: operations in one iteration, so that the cost is per operation.
local function time(name, f, per)
  local t0 = now()
  f()
  local ns = (now() - t0) * 1000 / n
  if name == 'loop' then
    empty = ns
  else
    reply[#reply + 1] = name
    reply[#reply + 1] = fmt('%.1f', (ns - empty) / (per or 1))
  end
end
local sink
-- An empty numeric for loop: FORLOOP and the body's jump back.
time('loop', function() for _ = 1, n do end end)
-- One VM instruction, as scripts mix them: ARGV reads, arithmetic, comparisons,
-- tests and jumps; 14 instructions an iteration besides the loop's own
-- (`luac5.1 -l` of the body).
time('instruction', function()
  for i = 1, n do
    local a, b = ARGV[1], ARGV[2]
    local x = i * 1000 + 5
    if x < i or not a then sink = b end
    local y = x - i * 3
    sink = y > 0 and a or b
  end
end, 14)
time('find', function() local s = '600' for _ = 1, n do sink = find(s, '^[1-9]%d*$') end end)
time('tonumber', function() local s = '600' for _ = 1, n do sink = tonumber_(s) end end)
time('fmt', function() for i = 1, n do sink = fmt('%d', i) end end)
time('floor', function() for i = 1, n do sink = floor(i / 3) end end)
time('concat', function() local a = '20' for _ = 1, n do sink = a .. ' ' .. a end end)
time('reply', function() local a = '20' for _ = 1, n do sink = {'allow', {a, a, a}} end end)
time('redis.call', function() for _ = 1, n do sink = redis.call('TIME') end end)
-- The alternatives the built-ins do without: a new number to a string by
-- tostring or by concatenation (against fmt above), and an option checked for
-- canonical digits by a tostring round trip (against tonumber + find).
time('tostring', function() for i = 1, n do sink = tostring_(i) end end)
time('concat-number', function() for i = 1, n do sink = i .. '' end end)
time('check-by-find', function()
  local s = '600'
  for _ = 1, n do sink = tonumber_(s) and find(s, '^[1-9]%d*$') end
end)
time('check-by-tostring', function()
  local s = '600'
  for _ = 1, n do local v = tonumber_(s) sink = v and tostring_(v) == s end
end)
return reply
