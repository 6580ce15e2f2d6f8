-- Floor of lua/fixed_window.lua: its Redis commands on a cost-1 call (INCR,
-- then EXPIRE on a window's first hit or TTL after it) and the contract's
-- reply, with no option checks and no arithmetic. What fixed_window.lua costs
-- above this is its own logic.
local count = redis.call('INCR', KEYS[1])
if count == 1 then
  redis.call('EXPIRE', KEYS[1], ARGV[2])
  return {'allow', {ARGV[1], ARGV[2], ARGV[1]}}
end
return {'allow', {ARGV[1], redis.call('TTL', KEYS[1]), ARGV[1]}}
